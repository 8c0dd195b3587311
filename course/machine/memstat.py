"""Measuring memory from inside a process, Linux only, standard library + ctypes (no psutil).

Shared by lesson 05 (a RAG index opened with mmap) and experiment E3 (that index under memory pressure).
Everything is read straight from the kernel so a learner can check each number by hand:

- ``rss_split()``            resident memory split anonymous / file-backed / shared (``/proc/<pid>/status``), bytes
- ``file_resident_bytes()``  how much of a file sits in the page cache (``mmap`` + ``mincore``), bytes
- ``drop_file_pages()``      evict a file's clean pages from the page cache (``posix_fadvise(DONTNEED)``)
- ``fault_counts()``         this process's major / minor page faults (``getrusage``), counts
- ``meminfo()``              MemTotal / MemAvailable / Cached / MemFree (``/proc/meminfo``), bytes
- ``psi_memory()``           memory pressure stall information, some/full avg10 (``/proc/pressure/memory``), percent

Why these and not "free memory": an mmap-opened file raises RssFile, not RssAnon, and its pages live in the page
cache (``Cached``), which the kernel counts as *available* — until someone else needs the memory and the pages are
evicted; the next read of an evicted page is a *major* fault (a disk read), which is where latency goes.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
from dataclasses import dataclass

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")  # bytes; 4096 on x86-64

# /proc files report kB (which the kernel means as KiB = 1024 bytes).
_KIB = 1024


def read_kib_fields(path: str, names: tuple[str, ...]) -> dict[str, int]:
    """Fields ``Name:   123 kB`` of a /proc file, converted to bytes. Missing fields are absent from the result."""
    out = {}
    with open(path) as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in names:
                value = rest.split()
                out[key] = int(value[0]) * (_KIB if len(value) > 1 and value[1] == "kB" else 1)
    return out


@dataclass(frozen=True)
class RssSplit:
    """Resident set of one process, bytes. ``total = anon + file + shmem`` (the kernel's own definition of VmRSS)."""

    anon: int   # private memory: heap, stacks, anonymous mmap (what malloc / numpy / torch tensors use)
    file: int   # pages of mapped files that are resident (an mmap-opened index shows up here)
    shmem: int  # shared memory / tmpfs pages mapped by the process

    @property
    def total(self) -> int:
        return self.anon + self.file + self.shmem


def rss_split(pid: int | str = "self") -> RssSplit:
    """RSS of process ``pid`` (default: this one) split anonymous / file-backed / shmem, in bytes."""
    f = read_kib_fields(f"/proc/{pid}/status", ("RssAnon", "RssFile", "RssShmem"))
    return RssSplit(anon=f.get("RssAnon", 0), file=f.get("RssFile", 0), shmem=f.get("RssShmem", 0))


def vm_rss(pid: int | str = "self") -> int:
    """VmRSS of process ``pid`` in bytes (as ``ps``/``top`` show it)."""
    return read_kib_fields(f"/proc/{pid}/status", ("VmRSS",)).get("VmRSS", 0)


# --- page-cache residency via mincore ------------------------------------------------------------------------

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.restype = ctypes.c_int
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
_PROT_READ, _MAP_SHARED = 0x1, 0x01
_MAP_FAILED = ctypes.c_void_p(-1).value
# mincore sets bit 0 of each byte when the page is resident; the other bits are reserved.
_BIT0 = bytes(b & 1 for b in range(256))


def resident_pages(path: str | os.PathLike) -> tuple[int, int]:
    """(resident pages, total pages) of a file in the page cache, pages of ``PAGE_SIZE`` bytes.

    Maps the file read-only (mapping populates nothing), asks ``mincore`` which pages are in the page cache, unmaps.
    Linux reports page-cache state for files the caller owns or may write; for other files it only sees the pages
    mapped in this process, so measure files you created.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0, 0
        n_pages = (size + PAGE_SIZE - 1) // PAGE_SIZE
        addr = _libc.mmap(None, size, _PROT_READ, _MAP_SHARED, fd, 0)
        if addr in (None, _MAP_FAILED):
            err = ctypes.get_errno()
            raise OSError(err, f"mmap failed: {os.strerror(err)}", str(path))
        try:
            vec = (ctypes.c_ubyte * n_pages)()
            if _libc.mincore(addr, size, vec) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"mincore failed: {os.strerror(err)}", str(path))
            return bytes(vec).translate(_BIT0).count(1), n_pages
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def file_resident_bytes(path: str | os.PathLike) -> int:
    """Bytes of ``path`` resident in the page cache (resident pages × page size, capped at the file size)."""
    pages, _ = resident_pages(path)
    return min(pages * PAGE_SIZE, os.path.getsize(path))


def drop_file_pages(path: str | os.PathLike) -> None:
    """Evict the file's pages from the page cache. Flushes dirty pages first (DONTNEED skips dirty pages).

    Pages mapped by some process may stay; call it while nobody maps the file (or expect partial eviction).
    On tmpfs there is no backing store and nothing is evicted.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


# --- faults, meminfo, PSI ------------------------------------------------------------------------------------


def fault_counts() -> tuple[int, int]:
    """(major, minor) page faults of this process so far, counts (all threads, not children).

    Major = the page had to be read from disk; minor = the page was already in memory (page cache or zero page).
    """
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_majflt, ru.ru_minflt


@dataclass(frozen=True)
class MemInfo:
    """The memory this process can use, bytes: the host's (/proc/meminfo), or its memory cgroup's when a cgroup
    limit is below the host's RAM (``scope`` says which; see ``meminfo``)."""

    total: int      # MemTotal: usable RAM (in a limited cgroup: the limit)
    available: int  # MemAvailable: the kernel's estimate of what can be allocated without swapping (includes
    #                 reclaimable page cache — the cache of an mmap-opened index counts as "available")
    cached: int     # Cached: page cache (file pages, incl. tmpfs/shmem)
    free: int       # MemFree: RAM holding nothing at all (small on a healthy machine: the cache uses the rest)
    scope: str = "host"  # "host" or "cgroup"


def meminfo(path: str = "/proc/meminfo", cgroup: bool = True) -> MemInfo:
    """MemTotal, MemAvailable, Cached and MemFree, in bytes.

    With ``cgroup`` (the default) and this process in a memory cgroup whose limit is below the host's RAM, the
    figures are the group's, as a container would show them: total = the limit; available = the smaller of the
    host's MemAvailable and the group's (limit − usage + its file LRU pages); cached = the page cache charged to
    the group; free = the smaller of the host's MemFree and limit − usage. A smaller "host" made with a cgroup then
    reads like a smaller machine, and a floor on MemAvailable holds for the group and for the host alike."""
    f = read_kib_fields(path, ("MemTotal", "MemAvailable", "Cached", "MemFree"))
    host = MemInfo(total=f["MemTotal"], available=f["MemAvailable"], cached=f["Cached"], free=f["MemFree"])
    return group_view(host, cgroup_memory() if cgroup else None)


def group_view(host: MemInfo, g: CgroupMemory | None) -> MemInfo:
    """``host`` as a process inside the memory cgroup ``g`` sees it (see ``meminfo``); ``host`` itself when there
    is no group or its limit is not below the host's RAM."""
    if g is None or g.limit >= host.total:
        return host
    return MemInfo(total=g.limit, available=min(host.available, g.available), cached=g.cache,
                   free=max(0, min(host.free, g.limit - g.usage)), scope="cgroup")


@dataclass(frozen=True)
class Psi:
    """Memory pressure stall information: share of the last 10 s in which tasks were stalled on memory, percent.

    some = at least one task stalled; full = all non-idle tasks stalled at once.
    """

    some_avg10: float
    full_avg10: float


def psi_memory(path: str = "/proc/pressure/memory") -> Psi | None:
    """PSI memory some/full avg10 in percent (0-100), or None when the kernel has no PSI (file absent/unreadable)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        kind, *fields = line.split()
        for field in fields:
            name, _, value = field.partition("=")
            if name == "avg10":
                values[kind] = float(value)
    if "some" not in values:
        return None
    # "full" is absent on kernels before 5.13 for some resources; for memory it has always existed.
    return Psi(some_avg10=values["some"], full_avg10=values.get("full", 0.0))


def filesystem_type(path: str | os.PathLike) -> str:
    """Type of the filesystem holding ``path`` (e.g. "ext4", "tmpfs"), from the longest matching /proc/mounts entry.

    Matters because tmpfs pages are shared memory, not evictable page cache: residency cannot be dropped there.
    """
    real = os.path.realpath(path)
    best, fstype = "", "unknown"
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            mount = parts[1].replace("\\040", " ")
            inside = real == mount or real.startswith(mount.rstrip("/") + "/")
            if inside and len(mount) >= len(best):
                best, fstype = mount, parts[2]
    return fstype


@dataclass(frozen=True)
class CgroupMemory:
    """The memory cgroup that limits this process most tightly (itself or an ancestor), bytes.

    Inside it the kernel reclaims (and OOM-kills) against ``limit``, whatever the host's MemAvailable says; the
    page cache a process of the group reads is charged to the group, so its pages are the ones reclaimed."""

    path: str    # the group's directory under the cgroup mount
    limit: int   # memory.limit_in_bytes (v1) / memory.max (v2)
    usage: int   # charged now: anonymous memory + page cache (+ kernel memory on v1)
    file: int    # page cache on the file LRU lists (active + inactive): what reclaim can drop without swap
    cache: int   # all page cache charged to the group (v1 ``total_cache``, v2 ``file``; includes shmem)

    @property
    def available(self) -> int:
        """The group's MemAvailable: room below the limit plus the page cache reclaim would drop."""
        return max(0, self.limit - self.usage + self.file)


def memory_mounts(mounts_path: str) -> dict[str, str]:
    mounts = {}
    with open(mounts_path) as f:
        for line in f:
            _, mount, fstype, opts, *_ = line.split()
            if fstype == "cgroup2":
                mounts.setdefault("v2", mount)
            elif fstype == "cgroup" and "memory" in opts.split(","):
                mounts.setdefault("v1", mount)
    return mounts


def _read_stat(path: str) -> dict[str, int]:
    out = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                out[key] = int(value)
    return out


def cgroup_memory(mounts_path: str = "/proc/mounts", cgroup_path: str = "/proc/self/cgroup") -> CgroupMemory | None:
    """The group with the tightest memory limit among this process's cgroups and their ancestors, or None when
    none is limited. Reads cgroup v2 ``memory.max``/``memory.current``/``memory.stat`` or v1
    ``memory.limit_in_bytes``/``memory.usage_in_bytes``/``memory.stat`` (its ``total_*`` lines, which include
    the group's children)."""
    mounts = memory_mounts(mounts_path)
    try:
        with open(cgroup_path) as f:
            entries = [line.rstrip("\n").split(":", 2) for line in f]
    except OSError:
        return None
    best = None
    for _, controllers, path in entries:
        if controllers == "" and "v2" in mounts:
            version, base = "v2", mounts["v2"]
        elif "memory" in controllers.split(",") and "v1" in mounts:
            version, base = "v1", mounts["v1"]
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):
            d = os.path.join(base, *parts[:depth])
            try:
                with open(os.path.join(d, "memory.max" if version == "v2" else "memory.limit_in_bytes")) as f:
                    value = f.read().strip()
            except OSError:
                continue
            if value == "max" or int(value) >= (1 << 62):  # v1 writes "unlimited" as a huge number
                continue
            if best is None or int(value) < best[2]:
                best = (version, d, int(value))
    if best is None:
        return None
    version, d, limit = best
    try:
        stat = _read_stat(os.path.join(d, "memory.stat"))
        with open(os.path.join(d, "memory.current" if version == "v2" else "memory.usage_in_bytes")) as f:
            usage = int(f.read())
    except (OSError, ValueError):
        return CgroupMemory(d, limit, 0, 0, 0)  # limit known, usage unreadable (an ancestor we may not read)
    pre = "" if version == "v2" else "total_"
    file = stat.get(f"{pre}active_file", 0) + stat.get(f"{pre}inactive_file", 0)
    cache = stat.get("file", 0) if version == "v2" else stat.get("total_cache", 0)
    return CgroupMemory(d, limit, usage, file, cache)


def cgroup_memory_limit() -> int | None:
    """The tightest memory limit (bytes) of this process's cgroup and its ancestors, or None when unlimited.

    Inside a limited cgroup the kernel reclaims (and OOM-kills) against the limit, not against the host's
    MemAvailable: an experiment that takes memory must respect both. Reads cgroup v2 ``memory.max`` or v1
    ``memory.limit_in_bytes``.
    """
    g = cgroup_memory()
    return None if g is None else g.limit


# --- the kernel's reclaim: counters and watermarks ----------------------------------------------------------

RECLAIM_COUNTERS = ("pgscan_kswapd", "pgscan_direct", "pgsteal_kswapd", "pgsteal_direct",
                    "workingset_refault_file", "workingset_activate_file")


def vmstat(names: tuple[str, ...] = RECLAIM_COUNTERS, path: str = "/proc/vmstat") -> dict[str, int]:
    """Counters of ``/proc/vmstat`` (pages or events since boot, as the kernel counts them); absent ones are left out.

    ``pgscan_*``/``pgsteal_*``: pages scanned / reclaimed by kswapd (background) or by an allocating task itself
    (direct reclaim, which stalls that task); ``workingset_refault_file``: evicted file pages read back soon after.
    """
    out = {}
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key in names:
                    out[key] = int(value)
    except OSError:
        pass
    return out


def zone_watermarks(path: str = "/proc/zoneinfo") -> list[dict]:
    """Per memory zone with managed pages: ``zone``, ``managed``, ``free``, ``min``, ``low``, ``high`` in pages.

    kswapd wakes when a zone's free pages fall below ``low`` and reclaims until ``high``; below ``min`` an
    allocating task reclaims by itself (direct reclaim). ``min`` over all zones is ``vm.min_free_kbytes``.
    """
    zones, zone = [], None
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return zones
    for line in lines:
        parts = line.split()
        if line.startswith("Node") and len(parts) >= 4:
            zone = {"zone": parts[3]}
            zones.append(zone)
        elif zone is None or len(parts) < 2:
            continue
        elif parts[:2] == ["pages", "free"] and len(parts) >= 3:
            zone["free"] = int(parts[2])
        elif parts[0] in ("min", "low", "high", "managed") and parts[1].isdigit() and parts[0] not in zone:
            zone[parts[0]] = int(parts[1])  # the first of each: per-cpu "high:" lines come later, with a colon
    return [z for z in zones if z.get("managed")]
