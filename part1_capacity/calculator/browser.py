"""The calculator page in the browser: the same plan code as `capacity plan`, run by Pyodide on the page.

The site build copies the calculator's light path (``plan`` and everything it imports: profiles, the cache laws,
the config reader, dtypes, hardware, tiers, roofline, and their data files) into the built site, with a table of
the defaults ``transformers`` gives each model type (``defaults.json``, written by the site build from
``transformers`` itself: ``defaults_table``). The page's JavaScript passes the learner's choices in and shows what
comes back. Nothing here computes: it reads the inputs as the CLI does and calls ``make_plan``. Both functions
return JSON text (one string crosses the JavaScript boundary). Units: bytes.
"""
from __future__ import annotations

import json

from part1_capacity.calculator import configs, validate
from part1_capacity.calculator.dtypes import DTYPES, KV_DTYPES
from part1_capacity.calculator.engine_rules import ENGINES
from part1_capacity.calculator.errors import InputError
from part1_capacity.calculator.fmt import fmt_bytes, fmt_count
from part1_capacity.calculator.hardware import bundled_accelerators
from part1_capacity.calculator.plan import Workload, make_plan
from part1_capacity.calculator.profiles import bundled_models

PARAMETERS_NOTE = ("parameters counted from the config's fields (the text model: no vision or audio tower); "
                   "`capacity plan --model config.json` counts the model transformers builds, and a model folder "
                   "with its weights gives the exact bytes from their headers")


def choices() -> str:
    """The bundled models and accelerators, the precisions and the engines, as the page's pickers list them."""
    return json.dumps({
        "models": [{"id": m.id, "name": m.name, "structure": m.structure, "max_context": m.max_context,
                    "native_dtype": m.native_dtype} for m in bundled_models().values()],
        "accelerators": [{"id": a.id, "name": a.name, "memory": fmt_bytes(a.memory_bytes)}
                         for a in bundled_accelerators().values()],
        "weights_dtypes": list(DTYPES),
        "kv_dtypes": list(KV_DTYPES),
        "engines": list(ENGINES),
    })


# --- a pasted config.json --------------------------------------------------------------------------------------------
def defaults_table(model_types, class_defaults, architectures: dict) -> dict:
    """The stored table (site build, where ``transformers`` is): per model type, its config class's defaults, and
    the model type each causal-LM class name belongs to (a file whose own ``model_type`` is unknown: Kimi-K2's).
    A per-layer list the class derives from its default size (``layer_types`` of 26 layers) is stored as its
    repeating unit under ``per_layer`` (``["sliding_attention", "full_attention"]``) and repeated to the file's
    own layer count (``defaults_for``); a list that does not repeat is left out (the reader then derives the kinds
    from the file's own markers)."""
    table = {}
    for mt in model_types:
        try:
            d = class_defaults(mt)
            json.dumps(d)
        except Exception:      # a class that cannot build with no arguments, or holds non-JSON values: left out
            continue
        table[mt] = _per_layer_units(d)
    return {"model_types": table, "architectures": architectures}


def _per_layer_units(d: dict) -> dict:
    n = d.get("num_hidden_layers") or d.get("n_layer")
    out, units = {}, {}
    for k, v in d.items():
        if isinstance(v, list) and n and len(v) == n:
            p = next(p for p in range(1, n + 1) if all(v[i] == v[i % p] for i in range(n)))
            if p < n:
                units[k] = v[:p]
        elif k == "text_config" and isinstance(v, dict):
            out[k] = _per_layer_units(v)
        else:
            out[k] = v
    if units:
        out["per_layer"] = units
    return out


def _resolve(defaults: dict, file: dict) -> dict:
    """The file's fields over the class defaults, per-layer units repeated to the file's layer count."""
    out = {k: v for k, v in defaults.items() if k not in ("per_layer", "text_config")}
    out.update((k, v) for k, v in file.items() if k != "text_config")
    n = out.get("num_hidden_layers") or out.get("n_layer")
    if isinstance(n, int) and 0 < n <= 4096:
        for k, unit in (defaults.get("per_layer") or {}).items():
            if k not in file:
                out[k] = [unit[i % len(unit)] for i in range(n)]
    return out


def defaults_for(config: dict, table: dict, where: str = "config.json") -> dict:
    """What ``hf_config.defaults_for`` gives the CLI, from the stored table: the class defaults of the file's model
    type with the file's own fields over them (a field the file states wins, null included, as the config class
    sets it)."""
    types = table["model_types"]
    mt = config.get("model_type")
    if mt not in types:
        mt = next((table["architectures"][a] for a in config.get("architectures") or []
                   if table["architectures"].get(a) in types), None)
    if mt is None:
        raise InputError(f"{where}: model_type {config.get('model_type')!r} is not one this page knows (the causal "
                         f"language models of transformers: {len(types)} types); the CLI reads it with transformers "
                         f"if transformers knows it: `capacity plan --model config.json`")
    out = _resolve(types[mt], config)
    if isinstance(types[mt].get("text_config"), dict) or isinstance(config.get("text_config"), dict):
        out["text_config"] = _resolve(types[mt].get("text_config") or {}, config.get("text_config") or {})
    return out


def profile_from_text(text: str, table: dict, where: str = "config.json", model_id: str = "config"):
    """A pasted config.json → the calculator's profile, with the pure-Python reader the CLI's reader is built on
    (``configs.profile_from_fields``) and the parameters counted from the fields."""
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{where}: not JSON ({exc})") from None
    configs.check_config(config, where)
    return configs.profile_from_fields(config, defaults_for(config, table, where), where, model_id)


def plan(model: str, accelerator: str, context, batch, weights_dtype: str | None = None, kv_dtype: str = "bf16",
         engine: str = "law", config: str | None = None, table: dict | None = None, model_id: str = "config") -> str:
    """``capacity plan --json`` for these inputs (``{"plan": ...}``) plus its figures in the CLI's wording
    (``{"text": ...}``), or ``{"error": "..."}`` with the one-line message the CLI would print. ``context`` and
    ``batch`` as typed (``128K``); ``config``: a pasted config.json's text, planned instead of ``model`` (named
    ``model_id``, as the CLI names a file by its folder), ``table`` the stored defaults."""
    notes = []
    try:
        T = validate.parse_int(context, "context")
        B = validate.parse_int(batch, "batch")
        m = model
        if config:
            m = profile_from_text(config, table or {"model_types": {}, "architectures": {}}, model_id=model_id)
            notes.append(PARAMETERS_NOTE)
        d = make_plan(m, accelerator, Workload(context=T, batch=B, weights_dtype=weights_dtype or None,
                                               kv_dtype=kv_dtype, engine=engine)).to_dict()
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
    return json.dumps({"plan": d, "text": text, "notes": notes, "inputs": {"context": T, "batch": B}})
