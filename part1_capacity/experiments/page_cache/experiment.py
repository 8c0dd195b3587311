"""The E3 run: write the index, map it, then alternate "hog takes one more step" / "searcher times its reads".

Every exit path — normal end, safety stop, exception, Ctrl-C, SIGTERM, SIGHUP — ends the hog and deletes the index
file (``finally``). SIGTERM/SIGHUP are turned into KeyboardInterrupt for the duration of the run, so they unwind
the same way as Ctrl-C. The hog dies with its parent even on SIGKILL (see ``hog``); a temporary directory left
by a killed run is removed by the next run (its name carries the dead process id).

Units: all sizes in bytes, latencies in microseconds, PSI in percent, fractions of MemTotal in [0, 1].
"""
from __future__ import annotations

import datetime as _dt
import math
import os
import shutil
import resource
import signal
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from course.machine import memstat, records
from part1_capacity.experiments.page_cache import index as flat_index
from part1_capacity.experiments.page_cache.hog import HogEnded, HogProcess
from part1_capacity.experiments.page_cache.knee import find_knee, trailing_baseline
from part1_capacity.experiments.page_cache.searcher import Searcher, faiss_query_ms
from part1_capacity.calculator.base.errors import InputError
from course.shared.units import GIB

TMP_PREFIX = "capacity-e3-"
# The median does not go to the disk's milliseconds: it moves when most reads take a fault, mostly minor ones
# (pages reclaim unmapped but kept), a few microseconds against under one for a mapped page. ×4 sits between the
# median's wander before the jump and the jump itself in every saved run (the E3 page's p50 table shows both).
P50_KNEE_FACTOR = 4.0


@dataclass
class Config:
    """One E3 run. Sizes in bytes (the CLI converts its GB/MB flags, 1 GB = 10^9 bytes)."""

    index_bytes: int = 5 * 10**9
    step_bytes: int = 256 * 10**6
    start_bytes: int = 0              # the first hog step jumps straight here (skips the flat region)
    floor_bytes: int = GIB            # MemAvailable never goes below this
    cap_bytes: int | None = None      # the hog never holds more; None = 85 % of MemTotal
    reads: int = 20_000               # page reads per cycle (p99.9 needs well over 1,000)
    cycle_seconds: float = 30.0       # ... or fewer if they take longer than this (heavy thrashing)
    baseline_cycles: int = 3          # cycles with the hog at 0 bytes, then as many holding its first step
    knee_factor: float = 10.0         # "far above baseline" = at least this × the baseline (p99)
    p50_knee_factor: float = P50_KNEE_FACTOR  # the median's threshold (see P50_KNEE_FACTOR)
    knee_confirm: int = 2             # ... for this many cycles in a row
    past_knee_bytes: int = 2 * 10**9  # stop when the hog is this far past a confirmed p99 knee
    faiss_queries: int = 0            # real FAISS flat queries per cycle (each reads the whole index)
    madvise_random: bool = False      # MADV_RANDOM on the searcher's mapping: no read-around on a miss
    settle_seconds: float = 1.0       # pause after each step before reading
    max_cycles: int = 400
    workdir: str = field(default_factory=tempfile.gettempdir)
    dim: int = flat_index.DIM
    seed: int = 0

    def resolved_cap(self, host_mem: int) -> int:
        """The hog's cap: as given (default 85 % of MemTotal), and never more than a cgroup limit minus the floor
        (inside a limited cgroup the OOM killer acts on the limit, whatever the host's MemAvailable says)."""
        cap = self.cap_bytes if self.cap_bytes is not None else int(0.85 * host_mem)
        limit = memstat.cgroup_memory_limit()
        if limit is not None:
            cap = min(cap, limit - self.floor_bytes - (512 << 20))  # room for the searcher and the interpreter
        return cap


def validate(cfg: Config) -> None:
    """Raise InputError (naming the CLI flag) for settings that cannot run or would not be safe."""
    for name, value in (("settle-s", cfg.settle_seconds), ("cycle-seconds", cfg.cycle_seconds),
                        ("knee-factor", cfg.knee_factor), ("p50-knee-factor", cfg.p50_knee_factor)):
        if not (isinstance(value, (int, float)) and math.isfinite(value)):
            raise InputError(f"{name}: must be a finite number, got {value}")
    checks = [
        (cfg.index_bytes >= 16 * 10**6, "index-gb: must be at least 0.016 (16 MB)"),
        (cfg.step_bytes >= 1 << 20, "step-mb: must be at least 1"),
        (cfg.start_bytes >= 0, "start-gb: must be >= 0"),
        (cfg.floor_bytes >= 256 << 20, "mem-floor-gb: must be at least 0.27 (256 MiB): a lower floor risks the OOM killer"),
        (cfg.cap_bytes is None or cfg.cap_bytes > 0, "hog-cap-gb: must be > 0"),
        (1000 <= cfg.reads <= 10**7, "reads: must be in 1000..10000000 (p99.9 needs a thousand samples)"),
        (0 < cfg.cycle_seconds <= 3600, "cycle-seconds: must be in (0, 3600]"),
        (1 <= cfg.baseline_cycles <= 100, "baseline-cycles: must be in 1..100"),
        (1 < cfg.knee_factor <= 10**6, "knee-factor: must be in (1, 1000000]"),
        (1 < cfg.p50_knee_factor <= 10**6, "p50-knee-factor: must be in (1, 1000000]"),
        (1 <= cfg.knee_confirm <= 100, "knee-confirm: must be in 1..100"),
        (cfg.past_knee_bytes >= 0, "past-knee-gb: must be >= 0"),
        (0 <= cfg.faiss_queries <= 10_000, "faiss-queries: must be in 0..10000"),
        (0 <= cfg.settle_seconds <= 600, "settle-s: must be in 0..600 seconds"),
        (0 <= cfg.seed < 2**63, "seed: must be an integer in 0..2^63-1"),
        (2 * cfg.baseline_cycles < cfg.max_cycles <= 100_000, "max-cycles: must exceed twice baseline-cycles (and be at most 100000)"),
    ]
    for ok, message in checks:
        if not ok:
            raise InputError(message)
    if not os.path.isdir(cfg.workdir):
        raise InputError(f"dir: {cfg.workdir} is not a directory")
    fstype = memstat.filesystem_type(cfg.workdir)
    if fstype in ("tmpfs", "ramfs"):
        raise InputError(f"dir: {cfg.workdir} is on {fstype} (memory, not disk): its pages cannot be evicted; "
                         "choose a directory on a disk filesystem")
    free_disk = shutil.disk_usage(cfg.workdir).free
    if free_disk < cfg.index_bytes + GIB:
        raise InputError(f"index-gb: {cfg.index_bytes / 1e9:.2f} GB does not fit in {cfg.workdir} "
                         f"({free_disk / 1e9:.1f} GB free, 1 GiB margin kept)")
    info = memstat.meminfo()
    if cfg.cap_bytes is not None and cfg.cap_bytes > info.total:
        raise InputError(f"hog-cap-gb: {cfg.cap_bytes / 1e9:.2f} GB is more than the host's memory "
                         f"({info.total / 1e9:.2f} GB)")
    if cfg.resolved_cap(info.total) < cfg.step_bytes:
        raise InputError(f"hog-cap-gb: the hog may take less than one step "
                         f"(cgroup memory limit {memstat.cgroup_memory_limit()} bytes, floor included)")
    if info.available < cfg.floor_bytes + cfg.step_bytes:
        raise InputError(f"mem-floor-gb: MemAvailable is {info.available / 1e9:.2f} GB already, "
                         f"less than the floor plus one step")


def host_facts(workdir: str) -> dict:
    """What the result depends on beside the run record (``course.machine.records``: node, CPU, system, Python, load):
    memory, swap, disk, the kernel's reclaim settings, the libraries."""
    info = memstat.meminfo()
    swap = memstat.read_kib_fields("/proc/meminfo", ("SwapTotal",)).get("SwapTotal", 0)

    def read(path):
        try:
            return Path(path).read_text().strip()
        except OSError:
            return None

    import numpy

    try:
        import faiss

        faiss_version = faiss.__version__
    except ImportError:
        faiss_version = None
    return {
        "mem_total_bytes": info.total,
        "swap_total_bytes": swap,
        "page_size_bytes": memstat.PAGE_SIZE,
        "index_filesystem": memstat.filesystem_type(workdir),
        "index_block_device": block_device_facts(workdir),
        "transparent_hugepage": read("/sys/kernel/mm/transparent_hugepage/enabled"),
        "vm_swappiness": read("/proc/sys/vm/swappiness"),
        "vm_min_free_kbytes": read("/proc/sys/vm/min_free_kbytes"),
        "vm_watermark_scale_factor": read("/proc/sys/vm/watermark_scale_factor"),
        "vm_watermark_boost_factor": read("/proc/sys/vm/watermark_boost_factor"),
        "zone_watermarks_pages": memstat.zone_watermarks(),
        "mem_available_at_start_bytes": info.available,
        "psi_available": memstat.psi_memory() is not None,
        "cgroup_memory_limit_bytes": memstat.cgroup_memory_limit(),
        "numpy": numpy.__version__,
        "faiss": faiss_version,
    }


def block_device_facts(path: str) -> dict:
    """Read-ahead (KiB) and rotational flag of the block device holding ``path``, when /sys shows them.

    The read-ahead matters here: a miss on a default mmap reads that much around the missed page."""
    st = os.stat(path)
    dev = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    out = {"device": None, "read_ahead_kb": None, "rotational": None}
    if not dev.exists():
        return out
    dev = dev.resolve()
    out["device"] = dev.name
    for queue in (dev / "queue", dev.parent / "queue"):  # a partition's queue is its disk's
        if queue.is_dir():
            for key, name in (("read_ahead_kb", "read_ahead_kb"), ("rotational", "rotational")):
                try:
                    out[key] = int((queue / name).read_text())
                except (OSError, ValueError):
                    pass
            break
    return out


def _remove_stale_workdirs(parent: str) -> None:
    """Delete temporary directories of earlier runs whose process no longer exists (e.g. killed with SIGKILL)."""
    for d in Path(parent).glob(f"{TMP_PREFIX}*"):
        try:
            pid = int(d.name[len(TMP_PREFIX):].split("-")[0])
        except ValueError:
            continue
        if pid != os.getpid() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(d, ignore_errors=True)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _knee_dict(knee, cycles, host_mem):
    if knee is None:
        return None
    c = cycles[knee.index]
    return {
        "cycle": knee.index,
        "hog_bytes": c["hog_bytes"],
        "hog_fraction": c["hog_bytes"] / host_mem,
        "mem_available_bytes": c["mem_available_bytes"],
        "mem_available_fraction": c["mem_available_bytes"] / host_mem,
        "baseline_us": knee.baseline,
        "value_us": knee.value,
        "ratio": knee.ratio,
        "confirmed": knee.confirmed,
        "major_faults": c["major_faults"],
        "index_resident_bytes": c["index_resident_bytes"],
    }


def _hog_held_clean(cycles) -> list[bool]:
    """Cycles that may set the baseline: the hog holds memory and the reads caused no major fault."""
    return [c["phase"] != "baseline" and c["major_faults"] == 0 for c in cycles]


def knees(cycles, cfg: Config, host_mem: int) -> tuple[dict | None, dict | None]:
    """(knee_p99, knee_p50) of the cycles so far: p99 at ``knee_factor``, p50 at ``p50_knee_factor`` × its baseline.

    Each cycle is compared with the baseline re-taken with the hog in place: the median of the last
    ``baseline_cycles`` cycles with the hog holding memory and no major fault (``knee.trailing_baseline``); before
    the first such cycle, the hog-at-zero baseline. Only cycles whose reads caused major faults can be knees."""
    out = []
    went_to_disk = [c["major_faults"] > 0 for c in cycles]
    clean = _hog_held_clean(cycles)
    for key, factor in (("p99_us", cfg.knee_factor), ("p50_us", cfg.p50_knee_factor)):
        series = [c[key] for c in cycles]
        if len(series) <= cfg.baseline_cycles:
            out.append(None)
            continue
        idle = statistics.median(series[:cfg.baseline_cycles])
        reference = [idle if r is None else r for r in trailing_baseline(series, clean, cfg.baseline_cycles)]
        k = find_knee(series, cfg.baseline_cycles, factor, cfg.knee_confirm, went_to_disk, reference)
        out.append(_knee_dict(k, cycles, host_mem))
    return out[0], out[1]


def saved_config(saved: dict) -> Config:
    """The Config of a saved run, with today's defaults for settings it predates (e.g. ``p50_knee_factor``)."""
    names = {f.name for f in fields(Config)}
    return Config(**{k: v for k, v in saved["config"].items() if k in names})


def knees_today(saved: dict) -> tuple[dict | None, dict | None]:
    """(knee_p99, knee_p50) of a saved run by today's rule, from its cycles: a run saved under an older rule is
    read the same way as a new one (the cycles are the measurement; the knee is a reading of them)."""
    return knees(saved["cycles"], saved_config(saved), saved["host_mem_bytes"])


def baselines(cycles, cfg: Config) -> dict:
    """The no-fault latency before and with the hog (p99 and p50, µs), and the hog's CPU time during the reads:
    what shows whether the hog itself disturbs the searcher."""
    idle = [c for c in cycles if c["phase"] == "baseline"]
    held = [c for c, ok in zip(cycles, _hog_held_clean(cycles)) if ok]
    first_held = [c for c in cycles if c["phase"] == "hog_baseline"]

    def med(rows, key):
        return statistics.median(c[key] for c in rows) if rows else None

    return {
        "idle_p99_us": med(idle, "p99_us"), "idle_p50_us": med(idle, "p50_us"),
        "hog_held_p99_us": med(first_held, "p99_us"), "hog_held_p50_us": med(first_held, "p50_us"),
        "hog_held_bytes": first_held[0]["hog_bytes"] if first_held else None,
        "no_fault_cycles": len(held),
        "no_fault_p99_us_median": med(held, "p99_us"),
        "no_fault_p99_us_max": max((c["p99_us"] for c in held), default=None),
        "hog_cpu_seconds_during_reads": sum(c.get("hog_cpu_seconds") or 0.0 for c in cycles),
    }


def _measure(searcher, path, hog, cfg, faiss_index, phase, counters_before):
    """One cycle's record. Memory state is read right after the step (before the reads disturb it), latency and
    faults during the reads (with the hog's CPU time over the same span), PSI and reclaim counters right after.
    ``counters_before``: /proc/vmstat reclaim counters taken before the step, so the deltas cover step + reads."""
    info = memstat.meminfo()
    lru = memstat.read_kib_fields("/proc/meminfo", ("Active(file)", "Inactive(file)"))
    resident = memstat.file_resident_bytes(path)
    rss = memstat.rss_split()
    hog_rss = hog.rss()
    hog_cpu0 = hog.cpu_seconds()
    switches0 = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw
    stats = searcher.read_pages(cfg.reads, cfg.cycle_seconds)
    switches = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw - switches0
    hog_cpu1 = hog.cpu_seconds()
    psi = memstat.psi_memory()
    counters = memstat.vmstat()
    record = {
        "phase": phase,
        "hog_bytes": hog.bytes,
        "hog_rss_anon_bytes": hog_rss.anon if hog_rss else None,
        "mem_available_bytes": info.available,
        "mem_free_bytes": info.free,
        "cached_bytes": info.cached,
        "active_file_bytes": lru.get("Active(file)"),
        "inactive_file_bytes": lru.get("Inactive(file)"),
        "index_resident_bytes": resident,
        "rss_anon_bytes": rss.anon,
        "rss_file_bytes": rss.file,
        "reads": stats.reads,
        "read_seconds": stats.seconds,
        "p50_us": stats.p50_us,
        "p99_us": stats.p99_us,
        "p999_us": stats.p999_us,
        "mean_us": stats.mean_us,
        "max_us": stats.max_us,
        "major_faults": stats.major_faults,
        "minor_faults": stats.minor_faults,
        "hog_cpu_seconds": None if hog_cpu0 is None or hog_cpu1 is None else hog_cpu1 - hog_cpu0,
        "searcher_involuntary_switches": switches,
        "reclaim": {k: counters[k] - counters_before.get(k, counters[k]) for k in counters},
        "psi_some_avg10": psi.some_avg10 if psi else None,
        "psi_full_avg10": psi.full_avg10 if psi else None,
        "time": time.time(),
    }
    if faiss_index is not None and cfg.faiss_queries:
        record["faiss_query_ms"] = faiss_query_ms(faiss_index, cfg.faiss_queries, cfg.dim)
    return record


class _Stop(Exception):
    """The step loop ends; ``args[0]`` is the stop reason recorded in the result."""


@dataclass
class _Run:
    """The state of one run while it goes: what the cycles share."""

    cfg: Config
    cap: int
    host_mem: int
    progress: object
    path: str = ""
    searcher: Searcher | None = None
    hog: HogProcess | None = None
    faiss_index: object = None
    cycles: list = field(default_factory=list)

    def cycle(self, phase: str, counters_before: dict | None = None) -> dict:
        c = _measure(self.searcher, self.path, self.hog, self.cfg, self.faiss_index, phase,
                     counters_before if counters_before is not None else memstat.vmstat())
        self.cycles.append(c)
        self._report(c)
        return c

    def _report(self, c):
        cfg = self.cfg
        limit = max(1, min(self.cap, self.host_mem - cfg.floor_bytes) - cfg.start_bytes)
        frac = min(1.0, max(0.0, (c["hog_bytes"] - cfg.start_bytes) / limit)) if c["phase"] == "step" else 0.0
        self.progress(frac, f"cycle {len(self.cycles) - 1}: hog {c['hog_bytes'] / 1e9:5.2f} GB | "
                            f"avail {c['mem_available_bytes'] / 1e9:5.2f} GB | "
                            f"index {100 * c['index_resident_bytes'] / os.path.getsize(self.path):5.1f}% cached | "
                            f"p50 {c['p50_us']:.1f} p99 {c['p99_us']:.1f} us | {c['major_faults']} major faults")

    def step(self, n_bytes: int, phase: str) -> dict:
        """The hog takes ``n_bytes`` more (after the safety checks), the memory settles, one cycle is measured."""
        cfg, hog = self.cfg, self.hog
        if len(self.cycles) >= cfg.max_cycles:
            raise _Stop("max_cycles")
        # Safety, before each step (the hog re-checks before each 64 MiB chunk of it).
        if hog.bytes + n_bytes > self.cap:
            raise _Stop("cap")
        if memstat.meminfo().available - n_bytes < cfg.floor_bytes:
            raise _Stop("floor")
        counters = memstat.vmstat()
        before = hog.bytes
        reply = hog.grow(n_bytes)
        if reply["stopped"] and hog.bytes == before:  # refused outright: nothing new to measure
            raise _Stop(reply["stopped"])
        time.sleep(cfg.settle_seconds)
        c = self.cycle(phase, counters)
        if reply["stopped"]:
            raise _Stop(reply["stopped"])
        return c

    def hold(self, phase: str) -> None:
        """One more cycle with the hog holding what it has (no step): the baseline with the hog in place."""
        if len(self.cycles) >= self.cfg.max_cycles:
            raise _Stop("max_cycles")
        self.cycle(phase)

    def knee_stop(self) -> None:
        k99, k50 = knees(self.cycles, self.cfg, self.host_mem)
        if k99 and k99["confirmed"] and k50 and k50["confirmed"]:
            raise _Stop("p50_knee_confirmed")
        if k99 and k99["confirmed"] and self.hog.bytes - k99["hog_bytes"] >= self.cfg.past_knee_bytes:
            raise _Stop("past_knee_limit")


def _prepare(r: _Run, workdir: str, on_start) -> int:
    """Write the index, map and warm it, start the hog; returns the number of vectors written."""
    cfg, progress = r.cfg, r.progress
    r.path = os.path.join(workdir, "flat.index")
    try:
        n_vectors = flat_index.write_flat_index(
            r.path, cfg.index_bytes, cfg.dim, cfg.seed,
            progress=lambda done, total: progress(done / total, f"writing index {done / 1e9:.2f}/{total / 1e9:.2f} GB"))
    except OSError as exc:
        raise InputError(f"dir: cannot write the index in {cfg.workdir}: {exc.strerror}") from None
    r.searcher = Searcher(r.path, seed=cfg.seed, random_advice=cfg.madvise_random)
    progress(None, "warming: touching every page of the index")
    r.searcher.warm()
    if cfg.faiss_queries:
        r.faiss_index = flat_index.open_faiss(r.path)
    r.hog = HogProcess(cfg.floor_bytes, r.cap)
    r.hog.grow(0)  # wait until the hog is up (its interpreter start-up is not in the baseline cycles)
    if on_start:
        on_start(r.hog.pid, workdir)
    return n_vectors


def _cycles(r: _Run) -> None:
    """Idle baseline, first step, baseline with the hog held, then one step per cycle until a stop (``_Stop``)."""
    cfg = r.cfg
    for _ in range(cfg.baseline_cycles):
        r.hold("baseline")
    r.step(cfg.start_bytes if cfg.start_bytes > 0 else cfg.step_bytes, "hog_baseline")
    for _ in range(cfg.baseline_cycles - 1):
        r.hold("hog_baseline")
    while True:
        r.step(cfg.step_bytes, "step")
        r.knee_stop()


def run(cfg: Config, command: str = "", progress=None, on_start=None) -> dict:
    """Run E3 and return its result (keys: see ``_result``). ``progress(fraction or None, text)`` is called as it
    goes; ``on_start(hog_pid, workdir)`` once the hog runs. Ctrl-C/SIGTERM end the run early: the result so far is
    returned with ``stop_reason = "interrupted"`` (after cleanup)."""
    validate(cfg)
    host = host_facts(cfg.workdir)
    r = _Run(cfg, cfg.resolved_cap(host["mem_total_bytes"]), host["mem_total_bytes"],
             progress or (lambda fraction, text: None))
    started = _dt.datetime.now(_dt.timezone.utc)
    record = records.run_record()
    if command:
        record["command"] = command
    _remove_stale_workdirs(cfg.workdir)
    stop_reason, n_vectors = None, 0
    workdir = tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-", dir=cfg.workdir)
    old_handlers = {s: signal.signal(s, _interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        n_vectors = _prepare(r, workdir, on_start)
        _cycles(r)
    except _Stop as stop:
        stop_reason = stop.args[0]
    except KeyboardInterrupt:
        stop_reason = "interrupted"
    except HogEnded:
        stop_reason = "hog_ended"
    finally:
        if r.hog is not None:
            r.hog.close()
        r.faiss_index = None
        if r.searcher is not None:
            r.searcher.close()
        shutil.rmtree(workdir, ignore_errors=True)
        for s, h in old_handlers.items():
            signal.signal(s, h)
    record["load_average_at_end"] = records.load_average()
    return _result(r, host, record, command, started, stop_reason, n_vectors)


def _result(r: _Run, host, record, command, started, stop_reason, n_vectors) -> dict:
    cfg, cycles = r.cfg, r.cycles
    knee_p99, knee_p50 = knees(cycles, cfg, r.host_mem) if cycles else (None, None)
    config = asdict(cfg)
    config["cap_bytes"] = r.cap
    return {
        "experiment": "e3",
        "command": command,
        "record": record,
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host_mem_bytes": r.host_mem,
        "index_bytes": flat_index.file_bytes(n_vectors, cfg.dim) if n_vectors else 0,
        "index_vectors": n_vectors,
        "index_dim": cfg.dim,
        "config": config,
        "stop_reason": stop_reason,
        "knee_rule": "first of knee_confirm cycles with major faults and latency >= knee_factor (p99) or "
                     "p50_knee_factor (p50) x the baseline re-taken with the hog in place (median of the last "
                     "baseline_cycles no-fault cycles)",
        "knee_p99": knee_p99,
        "knee_p50": knee_p50,
        "baselines": baselines(cycles, cfg) if cycles else None,
        "cycles": cycles,
        "host": host,
    }
