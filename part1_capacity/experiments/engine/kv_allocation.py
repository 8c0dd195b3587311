"""E1 — the KV slope reported by the engine.

Open contexts of 2,048, 8,192 and 16,384 tokens, read the size of the KV cache llama.cpp allocates from its own
log line, fit bytes = slope × cells + intercept, and compare the slope with the calculator's bytes per token for
the same model (its shape read from the GGUF's metadata; the formula is the lesson-03 law, through the calculator's
profile). Done for an f16 cache and a q8_0 cache (34 bytes per 32 values).

The log prints MiB with two decimals, so each size is known to ±0.005 MiB; the check is that the fitted slope
rounds to the formula's figure and that every printed size equals formula × cells to that precision.
"""
from __future__ import annotations

import numpy as np

from part1_capacity.calculator.base import dtypes
from part1_capacity.experiments.engine import llama
from part1_capacity.experiments.engine.common import CALCULATOR_DTYPE, calculator_profile
from part1_capacity.experiments.engine.gguf_model import read_shape

CONTEXTS = (2048, 8192, 16384)
KV_TYPES = ("f16", "q8_0")
PRINT_HALF_STEP_BYTES = 0.005 * llama.MIB   # the log's rounding: two decimals of MiB


def fit_slope(cells, sizes):
    """Least-squares line through (cells, bytes): (slope in bytes per token, intercept in bytes)."""
    slope, intercept = np.polyfit(np.asarray(cells, float), np.asarray(sizes, float), 1)
    return float(slope), float(intercept)


def formula_bytes_per_token(profile, kv_type: str) -> float:
    """The calculator's bytes per token for a cache of llama.cpp type ``kv_type`` ("f16" or "q8_0")."""
    return profile.kv_bytes_per_token(dtypes.bytes_per_element(CALCULATOR_DTYPE[kv_type], "kv_type"))


def check_kv_type(model: llama.Model, profile, kv_type: str, contexts=CONTEXTS, threads=2, progress=None) -> dict:
    lines = []
    for n in contexts:
        lines.append(llama.kv_cache_line(model, n, kv_type, threads))
        if progress:
            progress.step(f"{kv_type} KV, {n} tokens")
    cells = [ln.cells for ln in lines]
    reported = [ln.size_bytes for ln in lines]
    slope, intercept = fit_slope(cells, reported)
    formula = formula_bytes_per_token(profile, kv_type)
    worst = max(abs(r - formula * c) for r, c in zip(reported, cells))
    match = round(slope) == formula and worst <= PRINT_HALF_STEP_BYTES
    return {
        "kv_type": kv_type, "contexts": list(contexts), "cells": cells, "reported_bytes": reported,
        "slope_bytes_per_token": slope, "intercept_bytes": intercept, "formula_bytes_per_token": formula,
        "max_deviation_bytes": worst, "print_precision_bytes": PRINT_HALF_STEP_BYTES, "match": bool(match),
        "layers_reported": lines[0].layers, "log_lines": [ln.text for ln in lines],
    }


def run(gguf_path, contexts=CONTEXTS, kv_types=KV_TYPES, threads=2, progress=None) -> dict:
    """E1 on one GGUF. The top-level keys describe the f16 cache; ``by_kv_type`` holds every type;
    ``match`` is true only when every type matched."""
    shape = read_shape(gguf_path)
    profile = calculator_profile(shape)
    with llama.Model(gguf_path) as model:
        rows = [check_kv_type(model, profile, kv, contexts, threads, progress) for kv in kv_types]
    first = rows[0]
    return {
        "contexts": first["contexts"], "reported_bytes": first["reported_bytes"],
        "slope_bytes_per_token": first["slope_bytes_per_token"],
        "formula_bytes_per_token": first["formula_bytes_per_token"],
        "match": all(r["match"] for r in rows),
        "by_kv_type": rows,
        "model": {"path": str(gguf_path), "name": shape.name, "architecture": shape.architecture,
                  "n_layers": shape.n_layers, "n_heads": shape.n_heads, "n_kv_heads": shape.n_kv_heads,
                  "head_dim": shape.head_dim_k, "n_params": shape.n_params},
        "formula": ("calculator ModelProfile.kv_bytes_per_token → lesson-03 laws.kv_bytes_per_token: "
                    "2 × n_layers × n_kv_heads × head_dim × bytes per element"),
    }
