"""Benchmark: do the two throughput methods agree? llama-bench and the Python API on the same file, same tests.

    python -m part1_capacity.experiments.bench_agreement [--attempts 6] [--repeats 5]

E2 measures prefill (pp512) and decode (tg128) with llama-bench when it is built, else through the Python API
(``engine/bench.py``); they must measure the same thing. This script writes a small F16 llama GGUF in a scratch
folder and runs both methods back to back on it, one thread (two threads meet at a barrier after every operation, so
a neighbour's load on a shared machine shows as large random slow-downs), ``--repeats`` runs each summarised by the
median, and passes when, for each of pp and tg, one attempt of ``--attempts`` agrees within ±10 %. A method
systematically off by more than 10 % fails every attempt. Exit 0 when they agree, 1 when not. A timing: it lives
here, not in the tests (tests/part1/experiments/engine/test_engine_checks.py checks that both methods run the same tests on the same file).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

AGREEMENT = 0.10


def agree(ratios: dict) -> bool:
    """True when every metric has one attempt whose ratio (Python API / llama-bench) is within ±AGREEMENT of 1."""
    return all(any(abs(r - 1) <= AGREEMENT for r in rs) for rs in ratios.values())


def run(attempts: int, repeats: int, progress=print) -> dict:
    from part1_capacity.experiments.engine import bench
    from part1_capacity.experiments.engine.gguf_model import LlamaShape, write_llama_gguf

    if bench.find_llama_bench() is None:
        raise SystemExit("llama-bench not built (make llama-bench)")
    ratios = {"pp": [], "tg": []}
    with tempfile.TemporaryDirectory() as d:
        small = write_llama_gguf(Path(d) / "small.gguf", LlamaShape(4, 512, 8, 4, 1536), dtype="f16")
        for _ in range(attempts):
            ref = bench.run_llama_bench(small, n_prompt=512, n_gen=128, repeats=repeats, threads=1)
            ours = bench.run_python(small, n_prompt=512, n_gen=128, repeats=repeats, threads=1)
            for k in ratios:
                ratios[k].append(round(statistics.median(ours[k]["samples"]) /
                                       statistics.median(ref[k]["samples"]), 3))
            progress(f"Python API / llama-bench: {ratios}")
            if agree(ratios):
                break
    return {"ratios": ratios, "agree": agree(ratios)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attempts", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args(argv)
    r = run(a.attempts, a.repeats)
    print(("agree" if r["agree"] else f"outside ±{AGREEMENT:.0%} in every attempt") + f": {r['ratios']}")
    return 0 if r["agree"] else 1


if __name__ == "__main__":
    sys.exit(main())
