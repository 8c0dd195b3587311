"""Published llama.cpp logs of runs split between a GPU and the host (``data/llama_cpp_offload_logs.json``),
predicted with the calculator's placement rules (``engines/llama_cpp.py``: ``place_weights``,
``place_cache``). Each point names its source; the prediction starts from the model's shape and the GGUF types
the point states, never from the buffer being predicted. Units: bytes; the log's MiB are 2^20 bytes."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from part1_capacity.calculator.engines import llama_cpp as rules

DATA = Path(__file__).resolve().parent / "data" / "llama_cpp_offload_logs.json"
MIB = 2 ** 20
TOLERANCE = 0.02          # each buffer within 2 % of the log


@lru_cache(maxsize=1)
def published_points() -> list[dict]:
    return json.loads(DATA.read_text())["points"]


def tensors(p: dict) -> rules.ModelTensors:
    """The point's tensors: embedding and output head at their stated types; the layers from the stated total (the
    sum of the log's model buffers) when given, else zero (only the host's embedding is then compared)."""
    s, t = p["shape"], p.get("tensors", {})
    weights = s["n_vocab"] * s["n_embd"]
    embd = weights * t.get("token_embd_bytes_per_weight", 0.0)
    out = weights * t["output_bytes_per_weight"] if "output_bytes_per_weight" in t else embd
    total = t.get("total_mib", 0.0) * MIB or embd + (0.0 if s["tied"] else out)
    return rules.uniform_tensors(total, 0.0, s["n_layer"], embd, s["tied"], out)


def layer_cache(p: dict) -> tuple:
    """Bytes of each layer's K and V for the point's context: ``n_ctx × (n_embd_k_gqa + n_embd_v_gqa) × bytes``."""
    s, c = p["shape"], p["context"]
    per = c["n_ctx"] * (s["n_embd_k_gqa"] + s["n_embd_v_gqa"]) * c["kv_bytes"]
    return (float(per),) * s["n_layer"]


def predict(p: dict) -> dict:
    """What the rules say each device holds for the point's flags, in the log's keys (MiB)."""
    f = p["flags"]
    first = f.get("output_first", True)          # builds before the change offloaded the output layer last
    w = rules.place_weights(tensors(p), f["n_gpu_layers"], f["n_cpu_moe"], first)
    out = {"accelerator_weights_mib": w["accelerator"]["total"] / MIB, "host_weights_mib": w["host"]["total"] / MIB}
    if "context" in p:
        kv = rules.place_cache(layer_cache(p), f["n_gpu_layers"], f["kv_offload"], first)
        out.update(accelerator_kv_mib=kv["accelerator"] / MIB, host_kv_mib=kv["host"] / MIB)
    if not f["kv_offload"] or "context" not in p:
        kv = rules.place_cache((1.0,) * p["shape"]["n_layer"], f["n_gpu_layers"], f["kv_offload"], first)
        out["kv_layers_on"] = "host" if kv["accelerator"] == 0 else "accelerator" if kv["host"] == 0 else "both"
    return out


def errors(p: dict) -> dict:
    """Relative error of each logged buffer (``None`` for a logged zero predicted as zero)."""
    pred, out = predict(p), {}
    for k, v in p["logged"].items():
        if isinstance(v, str):
            out[k] = None if pred[k] == v else f"{pred[k]} ≠ {v}"
        elif v == 0:
            out[k] = None if pred[k] == 0 else float("inf")
        else:
            out[k] = pred[k] / v - 1
    return out
