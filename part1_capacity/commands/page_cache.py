"""`capacity e3` — what an mmap-opened index really costs: latency, faults and residency while a hog takes memory.

Sizes on the command line are decimal: 1 GB = 10^9 bytes, 1 MB = 10^6 bytes (the JSON is all bytes). The result
is saved (with the host's facts) under results/part1/ unless --no-save; the site page is built from it.
"""
from __future__ import annotations

import json
import math
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

from part1_capacity.calculator.base import validate
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.base.saved_runs import RESULTS  # results/part1/: generated, outside the code tree



def default_out(index_gb: float) -> Path:
    return RESULTS / f"e3_index{index_gb:g}gb.json"


class ProgressBar:
    """One line on stderr, redrawn in place on a terminal; one line per cycle (and a few others) otherwise."""

    def __init__(self, stream=None, width=24):
        self.stream, self.width = stream or sys.stderr, width
        self.tty = self.stream.isatty()
        self._last = 0.0

    def __call__(self, fraction, text):
        n = 0 if fraction is None else round(self.width * fraction)
        line = f"e3 [{'#' * n}{'.' * (self.width - n)}] {text}"
        if self.tty:
            # return and clear-line are the bar's own controls; the text goes through the CLI's escaping
            getattr(self.stream, "unescaped", self.stream).write("\r\x1b[K")
            self.stream.write(line)
        else:
            now = time.monotonic()
            if not (text.startswith("cycle") or now - self._last > 5):
                return
            self._last = now
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self):
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _gb(x):
    return f"{x / 1e9:.2f} GB"


def summary(result) -> str:
    host = result["host_mem_bytes"]
    lines = [f"E3: index {_gb(result['index_bytes'])} on a {_gb(host)} host, {len(result['cycles'])} cycles, "
             f"stopped: {result['stop_reason']}"]
    for name, factor in (("knee_p99", "knee_factor"), ("knee_p50", "p50_knee_factor")):
        k = result[name]
        if k is None:
            lines.append(f"{name}: none (no cycle reached {result['config'][factor]:g}× the baseline)")
            continue
        lines.append(
            f"{name}: hog {_gb(k['hog_bytes'])} ({100 * k['hog_fraction']:.0f}% of host), MemAvailable still "
            f"{_gb(k['mem_available_bytes'])} ({100 * k['mem_available_fraction']:.0f}%); "
            f"{k['baseline_us']:.1f} → {k['value_us']:.0f} µs (×{k['ratio']:,.0f})"
            + ("" if k["confirmed"] else " [not confirmed: the run ended]"))
    k = result["knee_p99"]
    if k and k["confirmed"]:
        hot = (k["mem_available_bytes"] - result["index_bytes"]) / 1e9
        lines.append(f"hot cache on this host: MemAvailable at the p99 knee − index = {hot:+.2f} GB "
                     f"(plan with `capacity index ... --hot-cache-gb {max(hot, 0):.2f}`)")
    return "\n".join(lines)


def _command_line(args) -> str:
    """The command as typed (from sys.argv when run as `capacity e3 ...`), else rebuilt from the parsed flags."""
    if sys.argv[1:2] == ["e3"]:
        return "capacity " + shlex.join(sys.argv[1:])
    flags = [f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}") for k, v in vars(args).items()
             if k not in ("func", "command") and v not in (None, False)]
    return "capacity e3 " + " ".join(flags)


def check_out(out: Path) -> None:
    """Refuse an --out the result could not be written to, before the run takes minutes and gigabytes."""
    if out.is_dir():
        raise InputError(f"out: {out} is a directory; give a file name (e.g. {out / 'e3.json'})")
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise InputError(f"out: cannot create {out} ({parent} is not a writable directory)")
    # the name itself (empty, too long), a symbolic link, a FIFO, a device that takes no bytes (/dev/full)
    validate.output_path(out, "out", create_folders=True)


def _run(args) -> int:
    from part1_capacity.experiments.page_cache.experiment import Config, run

    def size(name, value, unit):
        if value is None:
            return None
        if not (math.isfinite(value) and value >= 0):  # NaN, infinite or negative
            raise InputError(f"{name}: must be a finite number >= 0, got {value}")
        return int(value * unit)

    cfg = Config(
        index_bytes=size("index-gb", args.index_gb, 10**9),
        step_bytes=size("step-mb", args.step_mb, 10**6),
        start_bytes=size("start-gb", args.start_gb, 10**9),
        floor_bytes=size("mem-floor-gb", args.mem_floor_gb, 10**9) if args.mem_floor_gb is not None else 1 << 30,
        cap_bytes=size("hog-cap-gb", args.hog_cap_gb, 10**9),
        reads=args.reads, cycle_seconds=args.cycle_seconds, baseline_cycles=args.baseline_cycles,
        knee_factor=args.knee_factor, knee_confirm=args.knee_confirm,
        **({} if args.p50_knee_factor is None else {"p50_knee_factor": args.p50_knee_factor}),
        past_knee_bytes=size("past-knee-gb", args.past_knee_gb, 10**9), faiss_queries=args.faiss_queries,
        madvise_random=args.madvise_random,
        settle_seconds=args.settle_s, max_cycles=args.max_cycles, workdir=args.dir, seed=args.seed,
    )
    if args.out is not None:
        validate.output_path(args.out, "out", create_folders=True)     # '' refused by name, not the default
    out = None if args.no_save else Path(args.out) if args.out is not None else default_out(args.index_gb)
    if out is not None:
        check_out(out)
    bar = ProgressBar() if not args.quiet else (lambda fraction, text: None)
    command = _command_line(args)

    def on_start(pid, workdir):
        if not args.quiet:
            print(f"e3: hog pid {pid}, index in {workdir}", file=sys.stderr, flush=True)

    result = run(cfg, command=command, progress=bar, on_start=on_start)
    if hasattr(bar, "done"):
        bar.done()
    interrupted = result["stop_reason"] == "interrupted"
    if out and not interrupted:
        out.parent.mkdir(parents=True, exist_ok=True)
        with validate.open_for_write(out, "out") as fh:
            fh.write((json.dumps(result, indent=1) + "\n").encode())
    if args.json:
        print(validate.dumps_json(result, indent=1))
    else:
        print(summary(result))
    if out and not interrupted:
        print(f"e3: saved {out}", file=sys.stderr)
    if interrupted:
        print("e3: interrupted — hog ended, index removed, partial result not saved", file=sys.stderr)
        return 130
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "e3", aliases=["page-cache"], help="E3: an mmap-opened index under memory pressure, where search latency breaks (writes GBs, takes RAM)",
        description=__doc__.split("\n\n")[0])
    a = p.add_argument
    a("--index-gb", type=float, default=5.0, help="index file size, GB (default 5)")
    a("--step-mb", type=float, default=256.0, help="memory the hog takes per step, MB (default 256)")
    a("--start-gb", type=float, default=0.0,
      help="the hog's first step jumps to this size, GB (skips the flat region; default 0)")
    a("--mem-floor-gb", type=float, default=None,
      help="stop before MemAvailable would fall below this, GB (default 1 GiB = 1.074)")
    a("--hog-cap-gb", type=float, default=None, help="the hog never holds more than this, GB (default 85%% of RAM)")
    a("--reads", type=int, default=20_000, help="random page reads per cycle (default 20000)")
    a("--cycle-seconds", type=float, default=30.0, help="at most this long reading per cycle (default 30)")
    a("--baseline-cycles", type=int, default=3, help="cycles with the hog at 0 before the first step (default 3)")
    a("--knee-factor", type=float, default=10.0, help="knee = latency at least this × baseline (default 10)")
    a("--p50-knee-factor", type=float, default=None,
      help="p50 knee = the median at least this × its baseline (default 4: a fault in memory, not the disk)")
    a("--knee-confirm", type=int, default=2, help="... for this many cycles in a row (default 2)")
    a("--past-knee-gb", type=float, default=2.0,
      help="stop when the hog is this far past a confirmed p99 knee, GB (default 2)")
    a("--faiss-queries", type=int, default=0,
      help="real FAISS flat queries per cycle, reported as faiss_query_ms (default 0; each reads the whole index)")
    a("--madvise-random", action="store_true",
      help="MADV_RANDOM on the searcher's mapping: a miss reads one page, not the kernel's read-around window")
    a("--settle-s", type=float, default=1.0, help="pause after each step before reading, s (default 1)")
    a("--max-cycles", type=int, default=400, help="hard limit on cycles (default 400)")
    a("--dir", default=tempfile.gettempdir(), help="where the temporary index is written (a disk, not tmpfs)")
    a("--seed", type=int, default=0, help="random seed for vectors and read offsets")
    a("--out", default=None, help="save the result here (default results/part1/e3_index<G>gb.json)")
    a("--no-save", action="store_true", help="do not save the result")
    a("--json", action="store_true", help="print the full result as JSON on stdout")
    a("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_run)
