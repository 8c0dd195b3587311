"""Benchmark: how many (context, batch) plans per second `capacity sweep` computes (the target is ≥ 100,000).

    .venv/bin/python part1_capacity/experiments/bench_sweep.py [--points-per-axis 1000]

Prints one line per model: grid size, seconds (best of 3) and points per second, on H100 profiles with bf16
weights and cache. Timings depend on the machine and its load; nothing here is asserted by the tests.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from part1_capacity.calculator.readers.loader import load_model  # noqa: E402
from part1_capacity.calculator.uses.sweep import sweep  # noqa: E402

MODELS = ("llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "deepseek-v3", "gpt-oss-120b",
          "nemotron-3-nano-30b-a3b")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points-per-axis", type=int, default=1000)
    ap.add_argument("--accelerator", default="h100")
    a = ap.parse_args(argv)
    k = a.points_per_axis
    print(f"grid {k} contexts × {k} batches = {k * k:,} points per model, accelerator {a.accelerator}")
    rates = []
    for name in MODELS:
        m = load_model(name)
        contexts = np.linspace(1024, m.max_context, k).astype(np.int64)
        batches = np.arange(1, k + 1)
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            s = sweep(m, a.accelerator, contexts, batches)
            best = min(best, time.perf_counter() - t0)
        rate = s.points / best
        rates.append(rate)
        print(f"{name:26s} {best:7.3f} s  {rate:12,.0f} points/s")
    print(f"slowest model: {min(rates):,.0f} points/s ({min(rates) / 1e5:.1f}× the 100,000 asked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
