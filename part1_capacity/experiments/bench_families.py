"""Benchmark: `capacity plan` by a bundled id, a config.json and a Hub repository id, warm (not a test).

Each case runs ``python -m part1_capacity.cli plan ... --json`` in a fresh process: one warm-up run (file caches
warm), then ``--repeat`` timed runs; the median wall time is reported with its ratio to the bundled id. The Hub id
is served by a small Hub on 127.0.0.1 (tests/local_hub.py) holding a checkpoint written here (config.json and two
safetensors shards); nothing leaves the machine.

    python -m part1_capacity.experiments.bench_families [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "tests" / "data" / "configs"


def _tiny_hub_repo():
    """A 2-layer llama checkpoint with two safetensors shards (the tests' tiny model)."""
    from tests.test_hub import sharded_repo

    return sharded_repo()


def run(model: str, env: dict, repeat: int) -> tuple[float, float]:
    argv = [sys.executable, "-m", "part1_capacity.cli", "plan", "--model", model, "--accelerator", "h100",
            "--context", "4096", "--json"]
    times = []
    for i in range(repeat + 1):
        t = time.perf_counter()
        r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO)
        dt = time.perf_counter() - t
        if r.returncode != 0:
            raise SystemExit(f"{model}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
        json.loads(r.stdout)
        if i:                                   # the first run warms the file caches
            times.append(dt)
    return statistics.median(times), min(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from tests.local_hub import Hub

    hub = Hub().start()
    hub.repos["org/tiny-llama"] = _tiny_hub_repo()
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPATH": str(REPO), "HF_ENDPOINT": hub.url, "HF_HUB_CACHE": cache,
               "HF_HUB_OFFLINE": "0", "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}
        env.pop("HF_TOKEN", None)
        cases = [("bundled id", "llama-3.1-70b"),
                 ("config.json (counted type: pure Python)", str(CONFIGS / "llama-3.1-70b" / "config.json")),
                 ("config.json (MoE, counted)", str(CONFIGS / "mixtral-8x7b" / "config.json")),
                 ("local-Hub id (headers by range)", "org/tiny-llama"),
                 ("config.json (other type: transformers + meta device)", str(CONFIGS / "gemma-2-9b" / "config.json"))]
        rows = []
        for label, model in cases:
            med, best = run(model, env, a.repeat)
            rows.append((label, med, best))
    hub.stop()
    base = rows[0][1]
    print(f"{'case':56s} {'median s':>9s} {'min s':>7s} {'× bundled':>10s}")
    for label, med, best in rows:
        print(f"{label:56s} {med:9.2f} {best:7.2f} {med / base:10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
