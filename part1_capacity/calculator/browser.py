"""The calculator page in the browser: the same plan code as `capacity plan`, run by Pyodide on the page.

The site build copies the calculator's light path (``plan`` and everything it imports: profiles, the cache laws,
dtypes, hardware, tiers, roofline, and their data files) into the built site; the page's JavaScript passes the
learner's choices in and shows what comes back. Nothing here computes: it lists the choices and calls
``make_plan``. Both functions return JSON text (one string crosses the JavaScript boundary). Units: bytes.
"""
from __future__ import annotations

import json

from part1_capacity.calculator.dtypes import DTYPES, KV_DTYPES
from part1_capacity.calculator.errors import InputError
from part1_capacity.calculator.fmt import fmt_bytes, fmt_count
from part1_capacity.calculator.hardware import bundled_accelerators
from part1_capacity.calculator.plan import Workload, make_plan
from part1_capacity.calculator.profiles import bundled_models


def choices() -> str:
    """The bundled models and accelerators and the precisions, as the page's pickers list them."""
    return json.dumps({
        "models": [{"id": m.id, "name": m.name, "structure": m.structure, "max_context": m.max_context,
                    "native_dtype": m.native_dtype} for m in bundled_models().values()],
        "accelerators": [{"id": a.id, "name": a.name, "memory": fmt_bytes(a.memory_bytes)}
                         for a in bundled_accelerators().values()],
        "weights_dtypes": list(DTYPES),
        "kv_dtypes": list(KV_DTYPES),
    })


def plan(model: str, accelerator: str, context: int, batch: int, weights_dtype: str | None = None,
         kv_dtype: str = "bf16") -> str:
    """``capacity plan --json`` for these inputs (``{"plan": ...}``) plus its figures in the CLI's wording
    (``{"text": ...}``), or ``{"error": "..."}`` with the one-line message the CLI would print."""
    try:
        d = make_plan(model, accelerator, Workload(context=int(context), batch=int(batch),
                                                   weights_dtype=weights_dtype or None, kv_dtype=kv_dtype)).to_dict()
    except InputError as exc:
        return json.dumps({"error": str(exc)})
    par = d["parallelism"]
    text = {
        "weights_bytes": fmt_bytes(d["weights_bytes"]),
        "kv_bytes_per_token": fmt_bytes(d["kv_bytes_per_token"]),
        "kv_bytes_per_sequence": fmt_bytes(d["kv_bytes_per_sequence"]),
        "kv_bytes_total": fmt_bytes(d["kv_bytes_total"]),
        "kv_to_weights_ratio": f"{d['kv_to_weights_ratio']:.3g}",
        "accelerators_needed": fmt_count(d["accelerators_needed"]),
        "accelerators_without_kv": fmt_count(d["accelerators_without_kv"]),
        "accelerators_added_by_kv": fmt_count(d["accelerators_added_by_kv"]),
        "parallelism": (f"tensor {par['tensor']} × pipeline {par['pipeline']} × data {par['data']}" if par else ""),
        "bottleneck": d["bottleneck"].replace("_", " "),
        "implication": d["implication"],
    }
    return json.dumps({"plan": d, "text": text})
