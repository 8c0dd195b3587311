"""Benchmark: `capacity plan` by a bundled id, a config.json and a Hub repository id, warm (not a test).

Each case runs ``capacity plan ... --json`` in a fresh process: one warm-up run (file caches
warm), then ``--repeat`` timed runs; the median wall time is reported with its ratio to the bundled id. The Hub id
is served by a small Hub on 127.0.0.1 (tests/support/local_hub.py) holding a checkpoint written here (config.json and two
safetensors shards); nothing leaves the machine.

    python -m part1_capacity.experiments.bench_families [--repeat 3] [--all]
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
    from tests.calculator.readers.test_hub import sharded_repo

    return sharded_repo()


def _uncounted(folder: Path) -> str:
    """The gemma-2-9b file relabelled as StableLM (``stablelm``, a type with no pure count): what a config of such a
    type costs, transformers and torch imported and the model built on the meta device. Written for this run."""
    d = json.loads((CONFIGS / "gemma-2-9b" / "config.json").read_text())
    d.update(model_type="stablelm", architectures=["StableLmForCausalLM"])
    p = folder / "uncounted" / "config.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(d))
    return str(p)


def run(model: str, env: dict, repeat: int, context: str = "4096") -> tuple[float, float]:
    # the `capacity` command as a user runs it (its entry point beside this Python; PYTHONPATH picks this tree)
    argv = [str(Path(sys.executable).with_name("capacity")), "plan", "--model", model, "--accelerator", "h100",
            "--context", context, "--json"]
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
    ap.add_argument("--all", action="store_true", help="also every published config in tests/data/configs")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from tests.support.local_hub import Hub

    hub = Hub().start()
    hub.repos["org/tiny-llama"] = _tiny_hub_repo()
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPATH": str(REPO), "HF_ENDPOINT": hub.url, "HF_HUB_CACHE": cache,
               "HF_HUB_OFFLINE": "0", "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}
        env.pop("HF_TOKEN", None)
        cases = [("bundled id", "llama-3.1-70b"),
                 ("config.json (counted type: pure Python)", str(CONFIGS / "llama-3.1-70b" / "config.json")),
                 ("config.json (MoE, counted)", str(CONFIGS / "mixtral-8x7b" / "config.json")),
                 ("config.json (gemma2, counted)", str(CONFIGS / "gemma-2-9b" / "config.json")),
                 ("config.json (multimodal, vision tower counted)", str(CONFIGS / "gemma-3-27b-it" / "config.json")),
                 ("config.json (Mamba-2 hybrid, counted)", str(CONFIGS / "nemotron-h-8b" / "config.json")),
                 ("config.json (no transformers class: MiniMax-M1)", str(CONFIGS / "minimax-m1" / "config.json")),
                 ("config.json (K/V per layer type, MoE, vision: Gemma 4)",
                  str(CONFIGS / "gemma-4-26b-a4b" / "config.json")),
                 ("config.json (K/V per layer type, FP8 MoE: MiMo-V2-Flash)",
                  str(CONFIGS / "mimo-v2-flash" / "config.json")),
                 ("config.json (indexer keys, own code: MiniMax-M3)", str(CONFIGS / "minimax-m3" / "config.json")),
                 ("local-Hub id (headers by range)", "org/tiny-llama"),
                 ("config.json (type without a pure count: meta device)", _uncounted(Path(cache)))]
        if a.all:
            # at 1,024 tokens, which every file allows (GPT-2's longest context)
            cases += [(f"config.json: {p.parent.name} (1K)", str(p)) for p in sorted(CONFIGS.glob("*/config.json"))]
        rows = []
        for label, model in cases:
            med, best = run(model, env, a.repeat, "1024" if label.endswith("(1K)") else "4096")
            rows.append((label, med, best))
    hub.stop()
    base = rows[0][1]
    print(f"{'case':56s} {'median s':>9s} {'min s':>7s} {'× bundled':>10s}")
    for label, med, best in rows:
        print(f"{label:56s} {med:9.2f} {best:7.2f} {med / base:10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
