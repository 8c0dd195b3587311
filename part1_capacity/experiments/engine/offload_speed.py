"""The llama.cpp split's decode and prefill (calculator/offload.py) beside published runs
(``data/llama_cpp_offload_speeds.json``, each with its source and what had to be assumed). A comparison to read,
not a test: ``python -m part1_capacity.experiments.engine.offload_speed``."""
from __future__ import annotations

import json
from pathlib import Path

from course.shared.units import GB, GIB
from part1_capacity.calculator.plan import offload
from part1_capacity.calculator.hardware.accelerators import load_accelerator
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.plan.resolve import Workload, resolve

DATA = Path(__file__).resolve().parent / "data" / "llama_cpp_offload_speeds.json"


def points() -> list[dict]:
    return json.loads(DATA.read_text())["points"]


def predict(p: dict) -> dict:
    r = resolve(load_model(p["model"]), load_accelerator(p["accelerator"]),
                Workload(context=p["context"], prompt=p["prompt"], kv_dtype="fp16", engine="llama.cpp"))
    host = offload.Host(p["host"]["memory_gib"] * GIB, p["host"]["bandwidth_gb_s"] * GB)
    return offload.placement(r, p["flags"]["n_gpu_layers"], p["flags"]["n_cpu_moe"], host)


def main() -> None:
    for p in points():
        pred, meas = predict(p), p["measured"]
        print(f"{p['id']}: decode {pred['decode_tokens_per_s']:,.1f} tok/s predicted, "
              f"{meas['decode_tokens_per_s']:,.2f} measured ({pred['decode_tokens_per_s'] / meas['decode_tokens_per_s']:,.1f}×); "
              f"prefill {pred['prefill_tokens_per_s']:,.0f} predicted, {meas['prefill_tokens_per_s']:,.0f} measured "
              f"({pred['prefill_tokens_per_s'] / meas['prefill_tokens_per_s']:,.1f}×); fits: {pred['fits']}")


if __name__ == "__main__":
    main()
