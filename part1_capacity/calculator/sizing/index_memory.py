"""A retrieval index served from the host's page cache: its bytes, and the memory that keeps search p99 flat.

- The bytes are lesson 05's formulas (``part0_foundations.l05_rag.index``): FAISS ``IndexFlat``, ``IndexIVFFlat``
  and ``IndexHNSWFlat`` files, which an mmap-opened index holds in the page cache byte for byte.
- The memory that keeps p99 flat is E3's law: a search's p99 stays at its baseline while the kernel's
  ``MemAvailable`` stays above the index's bytes plus ``hot_cache_bytes`` — the page cache of *other* files that
  the kernel keeps as readily as the index's pages (MemAvailable counts it, the index cannot use it). Below that
  the page cache gives the index's pages away and every read of an evicted page waits for the disk.
  ``hot_cache_bytes`` is a property of the host — what else it keeps cached — read from the saved E3 runs of the
  same host (``results/part1/e3_*.json``: MemAvailable at the p99 knee − index bytes, the largest over the runs; a run in
  a memory cgroup is a host of the group's size), or given (the original study's desktop host: 1.67 GB). With no
  run of this host, the largest of all runs is used and ``hot_cache_warning`` names where it was measured.

``host_memory_bytes`` is the memory the host has available before the index is read (``free``'s *available*
column with the serving stack loaded but the index not yet touched). ``headroom_bytes`` = host memory − needed:
what every other process together may still take before p99 breaks; negative means it breaks at once.
All sizes in bytes.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from part0_foundations.l05_rag import index as l05
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.base.saved_runs import RESULTS  # results/part1/: generated, outside the code tree

KINDS = ("flat", "ivf", "hnsw")
DEFAULT_HNSW_M = 32  # FAISS's IndexHNSWFlat(d, M) examples and most deployments use M = 32


def index_bytes(kind: str, vectors: int, dim: int, nlist: int | None = None, hnsw_m: int = DEFAULT_HNSW_M) -> int:
    """Bytes of a FAISS index file of ``vectors`` float32 vectors of ``dim`` (lesson 05's formulas)."""
    if kind == "flat":
        return l05.flat_index_bytes(vectors, dim)
    if kind == "ivf":
        return l05.ivf_flat_index_bytes(vectors, dim, l05.default_nlist(vectors) if nlist is None else nlist)
    if kind == "hnsw":
        return l05.hnsw_flat_index_bytes(vectors, dim, hnsw_m)
    raise InputError(f"type: must be one of {', '.join(KINDS)}, got {kind!r}")


@dataclass(frozen=True)
class Host:
    """Which machine a hot cache belongs to: its node name and the memory its processes see (a memory cgroup's
    limit inside one: ``course.machine.memstat.meminfo``), bytes. The hot cache is what else runs there, so it is only
    reused on the same node with the same memory (within 1 %)."""

    node: str
    memory_bytes: int

    def same_as(self, other: "Host") -> bool:
        return self.node == other.node and abs(self.memory_bytes - other.memory_bytes) <= 0.01 * other.memory_bytes

    def label(self) -> str:
        return f"{self.node}, {self.memory_bytes / 1e9:.2f} GB"


def this_host() -> Host:
    """The host this process runs on (node name; memory as ``course.machine.memstat.meminfo`` sees it)."""
    import platform

    from course.machine import memstat

    return Host(platform.node(), memstat.meminfo().total)


@dataclass(frozen=True)
class KneeRun:
    """One saved E3 run's p99 knee, as the law reads it (bytes)."""

    file: str
    index_bytes: int
    mem_available_at_knee_bytes: int
    hog_at_knee_bytes: int
    mem_available_before_hog_bytes: int  # first cycle: index cached, hog at 0
    host: Host | None = None             # where it ran

    @property
    def ratio(self) -> float:
        """MemAvailable at the knee ÷ index bytes."""
        return self.mem_available_at_knee_bytes / self.index_bytes

    @property
    def hot_cache_bytes(self) -> int:
        """MemAvailable at the knee − index bytes: what MemAvailable still counted that the index could not use."""
        return self.mem_available_at_knee_bytes - self.index_bytes


def knee_runs(results_dir: Path | None = None) -> list[KneeRun]:
    """The saved E3 runs with a confirmed p99 knee measured against the baseline re-taken with the hog in place
    (runs saved before that rule carry no ``baselines`` and are left out), smallest index first."""
    runs = []
    for p in sorted(Path(results_dir or RESULTS).glob("e3_*.json")):
        r = json.loads(p.read_text())
        k = r.get("knee_p99")
        if r.get("stop_reason") == "interrupted" or not r.get("baselines") or not (k and k["confirmed"]):
            continue
        runs.append(KneeRun(p.name, int(r["index_bytes"]), int(k["mem_available_bytes"]), int(k["hog_bytes"]),
                            int(r["cycles"][0]["mem_available_bytes"]), run_host(r)))
    return sorted(runs, key=lambda k: (k.index_bytes, k.file))


def run_host(saved: dict) -> Host:
    """The host of a saved E3 run: the node of its run record (``host.hostname`` in runs saved before it) and the
    memory the run saw (``host_mem_bytes``: a cgroup's limit when it ran inside one)."""
    rec = saved.get("record") if isinstance(saved.get("record"), dict) else {}
    host = saved.get("host") if isinstance(saved.get("host"), dict) else {}
    node = (rec.get("host") or {}).get("node") or host.get("hostname") or "?"
    return Host(node, int(saved.get("host_mem_bytes") or host.get("mem_total_bytes") or 0))


def hot_cache_bytes(runs: list[KneeRun]) -> int:
    """The law's term for this host: the largest MemAvailable-at-knee − index bytes over the runs (the safe side),
    never below 0."""
    if not runs:
        raise InputError("hot-cache-gb: no saved E3 run with a confirmed knee; run `capacity e3` or give "
                         "--hot-cache-gb")
    return max(0, max(k.hot_cache_bytes for k in runs))


@dataclass(frozen=True)
class IndexMemory:
    """What ``capacity index`` reports (JSON keys = field names; bytes)."""

    type: str
    vectors: int
    dim: int
    nlist: int | None
    hnsw_m: int | None
    index_bytes: int
    hot_cache_bytes: int                # other files' page cache the kernel keeps as readily as the index
    hot_cache_source: str
    host_memory_needed_bytes: int       # index + hot cache: MemAvailable must stay above this for a flat p99
    knee_ratio: float                   # host_memory_needed_bytes ÷ index_bytes
    host_memory_bytes: int | None       # given: available before the index is read
    headroom_bytes: int | None          # host memory − needed: what other processes may still take
    p99_flat: bool | None               # headroom >= 0
    hot_cache_warning: str | None = None  # set when the default hot cache was measured on another host

    def to_dict(self) -> dict:
        return asdict(self)


def _check(name: str, value, low, high, integer: bool = True):
    ok = isinstance(value, int) if integer else isinstance(value, (int, float)) and math.isfinite(value)
    if not ok or not low <= value <= high:
        kind = "an integer" if integer else "a finite number"
        raise InputError(f"{name}: must be {kind} in {low:,}..{high:,}, got {value}")


def plan_index(kind: str, vectors: int, dim: int, host_memory_bytes: float | None = None,
               nlist: int | None = None, hnsw_m: int = DEFAULT_HNSW_M, hot_cache: float | None = None,
               results_dir: Path | None = None, host: Host | None = None) -> IndexMemory:
    """Index bytes, the host memory that keeps p99 flat (E3's law) and, given the host's memory, the headroom.
    Without ``hot_cache`` the term is the largest of the saved runs of ``host`` (default: this one); when none
    ran there, the largest of all runs, and ``hot_cache_warning`` says so."""
    if kind not in KINDS:
        raise InputError(f"type: must be one of {', '.join(KINDS)}, got {kind!r}")
    _check("vectors", vectors, 1, 10**13)
    _check("dim", dim, 1, 65_536)
    if kind == "ivf" and nlist is not None:
        _check("nlist", nlist, 1, vectors)
    if kind == "hnsw":
        _check("hnsw-m", hnsw_m, 2, 1024)
    if host_memory_bytes is not None:
        _check("host-memory-gb", host_memory_bytes / 1e9, 0.001, 1e6, integer=False)
    warning = None
    if hot_cache is None:
        runs = knee_runs(results_dir)
        here = host or this_host()
        mine = [k for k in runs if k.host and k.host.same_as(here)]
        hot = hot_cache_bytes(mine or runs)
        where = "E3 on this host" if mine else "E3 on other hosts"
        source = f"{where}: " + ", ".join(f"{k.file} ({k.hot_cache_bytes / 1e9:+.2f} GB)" for k in mine or runs)
        if not mine:
            others = sorted({k.host.label() for k in runs if k.host})
            warning = (f"hot-cache-gb: no E3 run was measured on this host ({here.label()}); the default "
                       f"{hot / 1e9:.2f} GB comes from {'; '.join(others)}. Measure yours with `capacity e3` on "
                       "this host (it prints the hot cache) and pass --hot-cache-gb")
    else:
        _check("hot-cache-gb", hot_cache / 1e9, 0, 1e6, integer=False)
        hot, source = int(hot_cache), "given"
    n_bytes = index_bytes(kind, vectors, dim, nlist, hnsw_m)
    needed = n_bytes + hot
    host = None if host_memory_bytes is None else int(host_memory_bytes)
    headroom = None if host is None else host - needed
    return IndexMemory(
        type=kind, vectors=vectors, dim=dim,
        nlist=(l05.default_nlist(vectors) if nlist is None else nlist) if kind == "ivf" else None,
        hnsw_m=hnsw_m if kind == "hnsw" else None, index_bytes=n_bytes, hot_cache_bytes=hot,
        hot_cache_source=source, host_memory_needed_bytes=needed, knee_ratio=needed / n_bytes, host_memory_bytes=host,
        headroom_bytes=headroom, p99_flat=None if headroom is None else headroom >= 0, hot_cache_warning=warning)
