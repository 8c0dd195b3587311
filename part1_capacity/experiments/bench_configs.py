"""Benchmark: `capacity plan` on a bundled model and on every published config.json, and what each run imported
(not a test).

Each case runs ``capacity plan --model M --accelerator h100 --context 1024 --json`` in a fresh interpreter of the
tree given (``--tree``: this checkout by default, or another one — an older commit's worktree — for the figures
before a change): one warm-up run, then ``--repeat`` timed runs; the median wall time is reported with its ratio to
the bundled model's, and whether the run imported torch or transformers (the light path imports neither). The
configs are the published files under ``tests/data/configs/`` (their README names each repository); 1,024 tokens
is a context every one of them allows (GPT-2's longest).

    python -m part1_capacity.experiments.bench_configs [--repeat 3] [--tree /path/to/other/checkout]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]
# the CLI called in process, then the heavy modules it left loaded, on stderr's last line
RUN = ("import json, sys; from part1_capacity.cli import main; rc = main(sys.argv[1:]); "
       "print(json.dumps({'rc': rc, 'heavy': sorted({m.split('.')[0] for m in sys.modules} & "
       "{'torch', 'transformers'})}), file=sys.stderr)")


def run(tree: Path, model: str, repeat: int) -> tuple[float, list[str] | str]:
    """(median seconds, the heavy modules imported) — or, for a file that tree refuses, the refusal's line."""
    argv = [sys.executable, "-c", RUN, "plan", "--model", model, "--accelerator", "h100", "--context", "1024", "--json"]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    times, heavy = [], []
    for i in range(repeat + 1):
        t = time.perf_counter()
        r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tree)
        dt = time.perf_counter() - t
        tail = json.loads(r.stderr.strip().splitlines()[-1])
        if tail["rc"] != 0:                     # a structure this tree does not model: its one line
            lines = r.stderr.strip().splitlines()[:-1]
            line = next((x for x in reversed(lines) if "error" in x), lines[0] if lines else "")
            return dt, "refused: " + line.split("error: ", 1)[-1][:70]
        heavy = tail["heavy"]
        if i:                                   # the first run warms the file caches
            times.append(dt)
    return statistics.median(times), heavy


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tree", type=Path, default=HERE, help="the checkout whose calculator is timed")
    a = ap.parse_args(argv)
    configs = sorted((HERE / "tests" / "data" / "configs").glob("*/config.json"))
    cases = [("bundled llama-3.1-8b", "llama-3.1-8b")] + [(p.parent.name, str(p)) for p in configs]
    rows = [(label, *run(a.tree, model, a.repeat)) for label, model in cases]
    base = rows[0][1]
    print(f"tree {a.tree}, {a.repeat} runs each, median wall time of `capacity plan ... --json` at 1,024 tokens")
    print(f"{'case':34s} {'median s':>9s} {'× bundled':>10s}  imported")
    for label, med, heavy in rows:
        what = heavy if isinstance(heavy, str) else ", ".join(heavy) or "-"
        print(f"{label:34s} {med:9.2f} {med / base:10.2f}  {what}")
    configs_only = [r for r in rows[1:] if not isinstance(r[2], str)]
    light = sum(not h for _, _, h in configs_only)
    print(f"configs planned: {len(configs_only)} of {len(rows) - 1}; without torch or transformers: {light}; worst × bundled: "
          f"{max(m for _, m, _ in configs_only) / base:.2f}; median × bundled: "
          f"{statistics.median(m for _, m, _ in configs_only) / base:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
