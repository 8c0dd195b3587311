"""Benchmark: one plan in process — wall time and the calls that show whether it is sized once (not a test).

For each workload: ``make_plan`` + ``plan_report`` (what ``capacity plan --json`` computes, without the process
start and the imports), one warm-up, then ``--repeat`` timed runs (median and minimum), and from one profiled run
the number of calls to ``get_dtype``, ``weights.weights_bytes`` and ``check_engine`` — the counts a workload
resolved once keeps small, whatever the number of deployments the search tries.

    python -m part1_capacity.experiments.bench_plan [--repeat 30]
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

from part1_capacity.calculator.plan.plan import Workload, make_plan, plan_report

CASES = (
    ("llama-3.1-70b", "h100", dict(context=32768, batch=17)),
    ("deepseek-v3", "h200", dict(context=131072, batch=64)),
    ("gpt-oss-120b", "h100", dict(context=131072, batch=64, engine="vllm")),
    ("nemotron-3-nano-30b-a3b", "a100", dict(context=262144, batch=45, nodes=2)),
)
COUNTED = ("get_dtype", "weights_bytes", "check_engine")


def run(model, acc, kw) -> None:
    plan_report(make_plan(model, acc, Workload(**kw)))


def calls(model, acc, kw) -> dict[str, int]:
    prof = cProfile.Profile()
    prof.runcall(run, model, acc, kw)
    out = dict.fromkeys(COUNTED, 0)
    for (path, _, name), row in pstats.Stats(prof).stats.items():
        if name in out and ("weights.py" in path or name != "weights_bytes"):
            out[name] += row[1]     # primitive and recursive calls: ncalls
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30)
    a = ap.parse_args(argv)
    print(f"{'model':<26}{'accelerator':<13}{'median ms':>10}{'min ms':>9}  " + "  ".join(COUNTED))
    for model, acc, kw in CASES:
        run(model, acc, kw)
        times = []
        for _ in range(a.repeat):
            t = time.perf_counter()
            run(model, acc, kw)
            times.append(time.perf_counter() - t)
        c = calls(model, acc, kw)
        print(f"{model:<26}{acc:<13}{statistics.median(times) * 1e3:>10.2f}{min(times) * 1e3:>9.2f}  "
              + "  ".join(f"{c[k]:>{len(k)}}" for k in COUNTED))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
