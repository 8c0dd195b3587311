"""Benchmark: is a decode-speed miss the model or the machine? Streaming rates of llama-bench and matmul-bench, side by side.

    python -m part1_capacity.experiments.bench_stream [--threads 2] [--rounds 4] [--save]

Decode of F32 weights does nothing but stream them, so llama-bench's tg rate on an F32 model, times the bytes of its
weights, is a memory bandwidth — the same quantity matmul-bench's streamed F32 product measures for the speed model.
This script alternates the two, round after round (a generated F32 llama model of about 0.5 B parameters in a
scratch folder, deleted after; llama-bench tg32 twice; matmul-bench's streamed product as ``engine/kernels.py`` runs
it), and prints both rates and their ratio per round; then one long matmul-bench run (about 3 s of the same product,
no warm-up) in windows, to show whether the rate moves within one process. If the ratio stays near 1 while both
rates move together, a miss is the machine's wander; if the ratio sits away from 1, the microbenchmark measures
something the engine does not do. ``--save`` writes ``results/part1/e2_stream.json`` for the engine-checks page.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys

LONG_REPS, WINDOW = 240, 20      # the long run: timed products, and how many make one window of the series


def measure(threads: int, rounds: int, workdir, progress=print) -> dict:
    from part1_capacity.experiments.engine import kernels
    from part1_capacity.experiments.engine.bench import run_llama_bench
    from part1_capacity.experiments.engine.gguf_model import shape_for_params, weight_types, write_llama_gguf

    path = workdir / "model-f32.gguf"
    write_llama_gguf(path, shape_for_params(500_000_000))
    per_token = kernels.decode_bytes_per_token(weight_types(path))
    km = kernels.STREAM_KM
    copies = math.ceil(kernels.STREAM_BYTES / (km * km * 4))
    out = {"threads": threads, "weight_bytes_per_token": per_token, "rounds": []}
    for i in range(rounds):
        tg = run_llama_bench(path, n_prompt=8, n_gen=32, repeats=2, threads=threads)["tg"]["tps"]
        rec = kernels.run_bench("f32", km, km, 1, threads, copies, 15)
        mb = km * km * 4 * copies / statistics.median(rec["seconds"])
        out["rounds"].append({"llama_bench_tg32_tps": tg, "llama_bench_gbs": tg * per_token / 1e9,
                              "matmul_bench_gbs": mb / 1e9})
        progress(f"round {i + 1}/{rounds}: llama-bench {tg * per_token / 1e9:.1f} GB/s, matmul-bench {mb / 1e9:.1f} GB/s")
    rec = kernels.run_bench("f32", km, km, 1, threads, copies, LONG_REPS)
    s = rec["seconds"]
    out["long_run_gbs"] = [km * km * 4 * copies / statistics.median(s[i:i + WINDOW]) / 1e9
                           for i in range(0, len(s), WINDOW)]
    out["long_run_window_s"] = statistics.median(s) * WINDOW
    return out


def report(r: dict) -> str:
    lines = [f"{'round':>5} {'llama-bench GB/s':>17} {'matmul-bench GB/s':>18} {'ratio':>6}"]
    for i, x in enumerate(r["rounds"]):
        lines.append(f"{i + 1:5d} {x['llama_bench_gbs']:17.1f} {x['matmul_bench_gbs']:18.1f} "
                     f"{x['llama_bench_gbs'] / x['matmul_bench_gbs']:6.2f}")
    lines.append(f"one long matmul-bench run, windows of {r['long_run_window_s']:.2f} s (GB/s): "
                 + " ".join(f"{g:.0f}" for g in r["long_run_gbs"]))
    return "\n".join(lines)


def main(argv=None) -> int:
    from course.machine.records import run_record
    from part1_capacity.experiments.engine import kernels
    from part1_capacity.experiments.engine.bench import find_llama_bench
    from part1_capacity.experiments.engine.common import save_result, scratch_dir

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--save", action="store_true", help="write results/part1/e2_stream.json")
    args = ap.parse_args(argv)
    if not 1 <= args.threads <= (os.cpu_count() or 1):
        ap.error(f"--threads must be from 1 to {os.cpu_count()} (this machine's CPUs), got {args.threads}")
    if not 1 <= args.rounds <= 50:
        ap.error(f"--rounds must be from 1 to 50, got {args.rounds}")
    if not (kernels.find_binary() and find_llama_bench()):
        print("needs matmul-bench and llama-bench: run `make matmul-bench`", file=sys.stderr)
        return 1
    record = run_record(program="python -m part1_capacity.experiments.bench_stream")
    with scratch_dir("stream-") as tmp:
        r = measure(args.threads, args.rounds, tmp, progress=lambda s: print(s, file=sys.stderr, flush=True))
    print(report(r))
    if args.save:
        print("saved", save_result("e2_stream", {**record, **r}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
