"""The calculator page in the browser: the same plan code as `capacity plan`, run by Pyodide on the page.

The site build copies the calculator's light path (``plan`` and everything it imports: profiles, the cache laws,
the config reader with its stored class defaults, dtypes, hardware, tiers, roofline, and their data files) into
the built site. The page's JavaScript passes the learner's choices in and shows what
comes back. Nothing here computes: it reads the inputs as the CLI does and calls ``make_plan``. Both functions
return JSON text (one string crosses the JavaScript boundary). Units: bytes.
"""
from __future__ import annotations

import json

from part1_capacity.calculator.model import configs
from part1_capacity.calculator.base import validate
from part1_capacity.calculator.plan import offload
from part1_capacity.calculator.uses.fit import fit
from part1_capacity.calculator.base.dtypes import DTYPES, KV_DTYPES
from part1_capacity.calculator.engines import ENGINES
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.base.fmt import fmt_bytes, fmt_count
from part1_capacity.calculator.hardware.accelerators import bundled_accelerators, runtime_memory
from part1_capacity.calculator.plan.plan import Workload, make_plan, plan_report
from part1_capacity.calculator.model.profiles import bundled_models

def choices() -> str:
    """The bundled models and accelerators, the precisions and the engines, as the page's pickers list them."""
    return json.dumps({
        "models": [{"id": m.id, "name": m.name, "structure": m.structure, "max_context": m.max_context,
                    "native_dtype": m.native_dtype} for m in bundled_models().values()],
        "accelerators": [{"id": a.id, "name": a.name, "memory": fmt_bytes(runtime_memory(a)[0])}
                         for a in bundled_accelerators().values()],
        "weights_dtypes": list(DTYPES),
        "kv_dtypes": list(KV_DTYPES),
        "engines": list(ENGINES),
    })


# --- a pasted config.json --------------------------------------------------------------------------------------------
def profile_from_text(text: str, where: str = "config.json", model_id: str = "config"):
    """A pasted config.json → the calculator's profile, by the CLI's own pure-Python path
    (``configs.profile_from_config`` without ``transformers``): a type whose parameters the config reader counts
    exactly with the class defaults stored beside it (``configs.stored_type``), or a type ``transformers`` lacks,
    read from its own fields. Any other type needs ``transformers`` (its defaults, its parameter list), which this
    page does not carry: refused with what to do instead."""
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{where}: not JSON ({exc})") from None
    if not isinstance(config, dict):
        raise InputError(f"{where}: must hold a JSON object")
    configs.check_config(config, where)
    mt = configs.stored_type(config)
    table = configs.stored_defaults()
    if mt is not None:
        return configs.profile_from_fields(config, table["model_types"][mt], where, model_id)
    if not configs.transformers_has_class(config):   # the CLI's rule, the same call (Kimi-K3, MiniMax-M1)
        return configs.profile_from_fields(config, configs.OWN_CODE_DEFAULTS, where, model_id)
    raise InputError(f"{where}: model_type {config.get('model_type')!r} takes its defaults and its parameter count "
                     f"from transformers {table['transformers']}, which this page does not carry (it reads the "
                     f"{len(table['model_types'])} model types listed on it): plan it with `capacity plan --model "
                     "config.json`, or a model folder with its weights for the exact bytes")


def plan(model: str, accelerator: str, context, batch, weights_dtype: str | None = None, kv_dtype: str = "bf16",
         engine: str = "law", config: str | None = None, model_id: str = "config") -> str:
    """``capacity plan --json`` for these inputs (``{"plan": ...}``) plus its figures in the CLI's wording
    (``{"text": ...}``), or ``{"error": "..."}`` with the one-line message the CLI would print. ``context`` and
    ``batch`` as typed (``128K``); ``config``: a pasted config.json's text, planned instead of ``model`` (named
    ``model_id``, as the CLI names a file by its folder)."""
    try:
        T = validate.parse_int(context, "context")
        B = validate.parse_int(batch, "batch")
        m = model
        if config:
            m = profile_from_text(config, model_id=model_id)
        p = make_plan(m, accelerator, Workload(context=T, batch=B, weights_dtype=weights_dtype or None,
                                               kv_dtype=kv_dtype, engine=engine))
        # what `capacity plan --json` prints: the plan, the engine's allocation for it and, under vLLM on an
        # accelerator it runs on, its start-up figures with the default flags; strict JSON
        d = json.loads(validate.dumps_json(plan_report(p, engine)[0]))
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
        "engine_kv_cache_tokens": (fmt_count(d["engine_kv_cache_tokens"]) + " tokens"
                                   if d.get("engine_kv_cache_tokens") is not None else ""),
        "engine_max_concurrency": (f"{d['engine_max_concurrency']:.2f}× the context"
                                   if d.get("engine_max_concurrency") is not None else ""),
        "engine_startup_error": d.get("engine_startup_error") or "",
        **own_machine(p),
    }
    return json.dumps({"plan": d, "text": text, "inputs": {"context": T, "batch": B}})


def own_machine(p) -> dict:
    """What fits ONE accelerator (``fit``: the longest context at the batch, the most sequences at the context) and,
    under llama.cpp, the largest split with the default host's RAM (``offload.propose``), in the CLI's words."""
    wl, out = p.workload, {}
    for search, key in (("context", "fit_max_context"), ("batch", "fit_max_batch")):
        f = fit(p.model, p.accelerator, wl, search)
        unit = "tokens at this batch" if search == "context" else "sequences at this context"
        out[key] = (f"{f.value:,} {unit} ({f.limited_by.replace('_', ' ')})" if f.value is not None
                    else f"none: {f.reason}")
    if wl.engine != "llama.cpp":
        out["llama_cpp_split"] = "choose the llama.cpp engine"
    elif p.accelerator.unified_memory:
        out["llama_cpp_split"] = "one memory shared with the host: nothing to split"
    else:
        o = offload.propose(p.resolved)
        where = (("the output layer and " if o["output_on_accelerator"] else "")
                 + f"{o['gpu_layers']} of {o['n_layers']} layers on the accelerator") + (
            f", the first {o['n_cpu_moe']} layers' experts in host RAM" if o["n_cpu_moe"] else "")
        out["llama_cpp_split"] = (f"{where}: {o['decode_tokens_per_s']:,.1f} tokens/s decode (-ngl "
                                  f"{o['n_gpu_layers'] if o['n_gpu_layers'] <= o['n_layers'] else 999}"
                                  + (f" --n-cpu-moe {o['n_cpu_moe']}" if o["n_cpu_moe"] else "") + ")"
                                  if o["proposed"] else f"nothing fits, even with every layer in host RAM")
        out["llama_cpp_split"] += f"; host: {o['host_source']}"
    return out
