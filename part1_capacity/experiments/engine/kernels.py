"""The speed model's constants, measured on llama.cpp's own CPU matmul kernels — never on the ladder they predict.

``matmul-bench`` (``part1_capacity/experiments/engine/matmul_bench.c``, built by ``make matmul-bench`` against the ggml
libraries of the same vendored llama.cpp source and build flags as llama-bench) times ``ggml_mul_mat`` on the CPU
backend for one weight type, with the weights placed where llama.cpp's loader puts them (its repacking buffer when
the CPU backend has one for the type: Q4_K on AVX2). Why not ``test-backend-ops perf``: it fixes the thread count at
half the CPUs (``N_THREADS/2`` in tests/test-backend-ops.cpp: one thread here) and allocates weights in the plain
CPU buffer, so it never runs the repacked Q4_K kernels that llama-bench runs.

Four measurements per thread count and weight type (shapes chosen apart from any ladder model's):

- **stream** — decode as a model does it: a 2048 × 2048 weight times one token, over enough distinct copies that
  the weights (≥ 512 MB) stream from memory, in the pages the engine reads that type from (``engine_pages``: 2 MB
  pages unless the type is repacked; runs saved before this choice were in 4 KB pages and say nothing of it);
  → seconds per weight, ``decode_s_per_weight``;
- **cached** — the same product on one 512 × 512 weight that stays in the core's cache: the kernel's arithmetic
  alone (unpack, convert, multiply); → ``compute_s_per_weight`` (what a core spends per weight when memory is free);
- **prefill** — 2048 × 2048 weights times 512 tokens: → seconds per weight per token, ``prefill_s_per_weight_token``;
- **overhead** — 64 tiny products in one graph: the fixed cost of one graph node (thread hand-off, barrier),
  ``op_overhead_s``; a decode step pays it once per node of the model's graph.

Figures are medians over repeated runs, then over interleaved rounds. Run alone: ``python -m part1_capacity.experiments.engine.kernels --save``.
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import os
import statistics
import subprocess
from pathlib import Path

from part1_capacity.experiments.engine.common import REPO, load_result, save_result
from part1_capacity.calculator.base.dtypes import GGUF_BLOCKS, gguf_bits
from part1_capacity.calculator.base.errors import InputError

BUILT = REPO / "build" / "matmul-bench"       # make matmul-bench: a link into the llama.cpp cache
RESULT = "e2_kernels"
TYPES = ("f32", "f16", "q8_0", "q5_0", "q4_K", "q6_K")   # every type in the ladder's files (Q4_K_M: Q4_K + Q6_K)
BYTES_PER_WEIGHT = {"f32": 4.0, "f16": 2.0, **{t: gguf_bits(t) / 8 for t in GGUF_BLOCKS}}   # ggml's block sizes
STREAM_KM, STREAM_BYTES = 2048, 512 << 20
CACHED_KM = 512
PREFILL_KM, PREFILL_N = 2048, 512


def find_binary() -> str | None:
    for cand in (os.environ.get("MATMUL_BENCH"), str(BUILT)):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    return None


# glibc asked to back malloc'd memory with transparent huge pages (2 MB): how matmul-bench's weights are placed in
# the pages llama.cpp reads them from (``engine_pages``).
HUGE_ENV = {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
PAGES = ("4K", "2M")


def engine_pages(repacked: bool) -> str:
    """The page size llama.cpp's CPU backend reads a weight type from, by whether it repacks that type.
    The loader maps the GGUF file (``src/llama-mmap.cpp``) and the CPU backend multiplies a weight where it lies in
    that mapping, in the page cache, which the kernel maps with 2 MB page-table entries for large folios (85 % of an
    F32 model's mapping on this host: ``bench_pages``). Only the types ``ggml/src/ggml-cpu/repack.cpp`` repacks
    (Q4_K here) are copied into an aligned ``malloc`` buffer, which a host whose transparent huge pages are on
    ``madvise`` backs with 4 KB pages. On a virtual machine a TLB miss walks two page tables, so the page size moves
    a pure stream by a fifth or more here (``results/part1/e2_pages.json``)."""
    return "4K" if repacked else "2M"


def run_bench(type_name, k, m, n, threads, copies, reps, binary=None, pages="4K") -> dict:
    """One ``matmul-bench`` run: its JSON record (settings, repacked, seconds of each timed graph run), with its
    weights in 4 KB pages or, ``pages="2M"``, in transparent huge pages (``HUGE_ENV``); the record says which."""
    binary = binary or find_binary()
    if not binary:
        raise InputError("matmul-bench not found: run `make matmul-bench` (or set MATMUL_BENCH)")
    if pages not in PAGES:
        raise InputError(f"pages must be one of {', '.join(PAGES)}, got {pages!r}")
    cmd = [binary, type_name, str(k), str(m), str(n), str(threads), str(copies), str(reps)]
    env = {**os.environ, **HUGE_ENV} if pages == "2M" else None
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"matmul-bench failed ({out.returncode}): {out.stderr.strip()[-300:]}")
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    return {**rec, "pages": pages} if pages != "4K" else rec


@functools.cache
def repacks(type_name: str) -> bool:
    """Whether this build's CPU backend repacks ``type_name`` (one small matmul-bench run, asked once)."""
    return bool(run_bench(type_name, STREAM_KM, STREAM_KM, 1, 1, 1, 1)["repacked"])


def _median(rec) -> float:
    return statistics.median(rec["seconds"])


def per_weight_cost(run: dict, op_overhead_s: float = 0.0) -> float:
    """Seconds per weight of one run (per weight and token for a prefill run): its median over the copies, less one
    node's overhead, over the weights of one copy."""
    per_node = max(_median(run) / run["copies"] - op_overhead_s, 0.0)
    return per_node / (run["k"] * run["m"]) / (run["n"] if run["kind"] == "prefill" else 1)


def constants_from_runs(runs: list[dict]) -> dict:
    """Per thread count: ``op_overhead_s`` and per type ``decode_s_per_weight``, ``compute_s_per_weight``,
    ``prefill_s_per_weight_token``, ``bytes_per_weight``, ``repacked`` — from the raw runs.
    Each run gives its median; each product's node overhead is taken off before dividing by its weights; where
    one measurement was repeated in several rounds, the constant is the median over the rounds (a round the
    machine slowed, for memory or CPU, moves it less than a mean would)."""
    out: dict = {}
    for r in runs:
        out.setdefault(str(r["threads"]), {"types": {}})
    for th, v in out.items():
        over = [_median(r) / r["copies"] for r in runs if r["kind"] == "overhead" and str(r["threads"]) == th]
        if over:
            v["op_overhead_s"] = statistics.median(over)
    per: dict = {}
    for r in runs:
        if r["kind"] == "overhead":
            continue
        th = out[str(r["threads"])]
        o = th.get("op_overhead_s", 0.0)
        th["types"].setdefault(r["type"], {"bytes_per_weight": BYTES_PER_WEIGHT[r["type"]], "repacked": r["repacked"]})
        per.setdefault((str(r["threads"]), r["type"], r["kind"]), []).append(per_weight_cost(r, o))
    key = {"stream": "decode_s_per_weight", "cached": "compute_s_per_weight", "prefill": "prefill_s_per_weight_token"}
    for (th, t, kind), costs in per.items():
        out[th]["types"][t][key[kind]] = statistics.median(costs)
    return out


def stream_run(type_name: str, threads: int, reps: int = 15, pages: str = "4K") -> dict:
    """One streamed-decode measurement: one token times ``STREAM_KM`` square weights of ``type_name``, over
    enough distinct copies (≥ ``STREAM_BYTES``) that they stream from memory, in ``pages``."""
    copies = math.ceil(STREAM_BYTES / (STREAM_KM * STREAM_KM * BYTES_PER_WEIGHT[type_name]))
    return {**run_bench(type_name, STREAM_KM, STREAM_KM, 1, threads, copies, reps, pages=pages), "kind": "stream"}


def run_pages(run: dict) -> str:
    """The page size a saved run's weights sat in (runs saved before the field: 4 KB, matmul-bench's default)."""
    return run.get("pages", "4K")


def stream_rate(run: dict) -> float:
    """Bytes per second a streamed run read its weights at (median run)."""
    return run["k"] * run["m"] * BYTES_PER_WEIGHT[run["type"]] * run["copies"] / _median(run)


def measure(threads=(1, 2), types=TYPES, reps=15, rounds=5, progress=None) -> list[dict]:
    """All four measurements for each thread count and type, repeated in ``rounds`` interleaved rounds (every
    type once per round), so a spell of slow memory on this shared machine touches every type alike instead of
    one type's whole measurement; returns the raw runs (with a ``kind`` and a ``round`` each)."""
    runs = []
    for rnd in range(rounds):
        for th in threads:
            rec = run_bench("f32", 64, 8, 1, th, 64, 4 * reps)
            runs.append({**rec, "kind": "overhead", "round": rnd})
            for t in types:
                if progress:
                    progress(f"round {rnd + 1}/{rounds}: {t}, {th} thread{'s' if th > 1 else ''}")
                runs.append({**stream_run(t, th, reps, engine_pages(repacks(t))), "round": rnd})
                runs.append({**run_bench(t, CACHED_KM, CACHED_KM, 1, th, 1, 20 * reps), "kind": "cached",
                             "round": rnd})
                runs.append({**run_bench(t, PREFILL_KM, PREFILL_KM, PREFILL_N, th, 2, 3), "kind": "prefill",
                             "round": rnd})
    return runs


def decode_bytes_per_token(weight_types: dict) -> float:
    """Bytes of weights one decode token streams: every matmul and output weight once, at its type's bytes per
    weight (``weight_types`` as ``gguf_model.weight_types`` gives it; the embedding lookup reads one row, left out)."""
    return sum(n * BYTES_PER_WEIGHT[t] for part in ("matmul", "output") for t, n in weight_types[part].items())


def compact(runs: list[dict]) -> list[dict]:
    """The runs with their seconds rounded to 4 digits (far below the runs' own wander), to keep saved files small."""
    for r in runs:
        r["seconds"] = [float(f"{x:.4g}") for x in r["seconds"]]
    return runs


def load_constants() -> dict | None:
    """The saved constants (``results/part1/e2_kernels.json``), or None."""
    r = load_result(RESULT)
    return r["constants"] if r else None


def main(argv=None):
    from course.machine.records import run_record

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--reps", type=int, default=15, help="timed runs per measurement (default 15)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds of every measurement (default 5)")
    ap.add_argument("--save", action="store_true", help=f"save results/part1/{RESULT}.json")
    args = ap.parse_args(argv)
    try:
        threads = tuple(int(x) for x in args.threads.split(","))
    except ValueError:
        ap.error(f"--threads must be comma-separated whole numbers from 1 to {os.cpu_count()}, got {args.threads!r}")
    if not all(1 <= t <= (os.cpu_count() or 1) for t in threads):
        ap.error(f"--threads must each be from 1 to {os.cpu_count()} (this machine's CPUs), got {args.threads!r}")
    for name, v, hi in (("--reps", args.reps, 1000), ("--rounds", args.rounds, 100)):
        if not 1 <= v <= hi:
            ap.error(f"{name} must be from 1 to {hi}, got {v}")
    record = run_record(program="python -m part1_capacity.experiments.engine.kernels")
    runs = measure(threads, reps=args.reps, rounds=args.rounds, progress=lambda s: print("measuring", s, flush=True))
    from course.machine.records import load_average

    # a measurement at some thread counts replaces those and keeps the saved ones at other counts
    kept = [r for r in ((load_result(RESULT) or {}).get("runs") or []) if r["threads"] not in threads]
    for r in compact(runs):
        r["date_utc"], r["load_average"] = record["date_utc"], record["load_average_at_start"]
    result = {**record, "load_average_at_end": load_average(), "binary": "matmul-bench (make matmul-bench)",
              "runs": kept + runs, "constants": constants_from_runs(kept + runs)}
    if args.save:
        print("saved", save_result(RESULT, result))
        refreshed = refresh_host_profile(result["constants"])
        if refreshed:
            print("saved", refreshed)
    print(json.dumps(result["constants"], indent=1))


def refresh_host_profile(constants: dict):
    """Give the saved host profile (``results/part1/host_accelerator.json``, written by ``capacity e2 --save``) these
    kernel constants at its thread count, when it was measured on this machine's CPU: the profile carries the
    constants ``capacity plan`` times this host with, and constants of one CPU with another's bandwidth would
    mix two machines. Returns the path saved, or None (no profile, another CPU, or no constants at its count)."""
    from course.machine.records import host_description
    from part1_capacity.experiments.engine.host import host_accelerator

    prof = load_result("host_accelerator")
    desc = host_description()
    if not prof or not prof.get("measured") or f"({desc['cpu']}," not in prof.get("name", ""):
        return None
    k = constants.get(str(prof["measured"]["threads"]))
    return save_result("host_accelerator", host_accelerator(prof["measured"], desc, k)) if k else None


if __name__ == "__main__":
    main()
