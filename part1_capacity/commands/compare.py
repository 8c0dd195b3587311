"""`capacity compare`: several models side by side on one accelerator and one workload.

With no arguments: the four attention structures — GQA (Mistral-NeMo-12B), MLA (DeepSeek-V3), a sliding-window
hybrid (gpt-oss-120b) and an SSM hybrid (Nemotron-3-Nano-30B-A3B) — at 128K tokens, 64 concurrent sequences,
each model's weights at its native precision and the KV cache in bf16, on an H200, with the kind of bottleneck
for each.
"""
from __future__ import annotations


from part1_capacity.calculator.base import validate
from part1_capacity.commands._common import add_workload_flags, workload_from_args
from part1_capacity.calculator.uses.compare import (DEFAULT_ACCELERATOR, DEFAULT_BATCH, DEFAULT_CONTEXT,
                                                    DEFAULT_MODELS, compare)
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.base.fmt import fmt_bytes, fmt_count, table


def register(sub):
    p = sub.add_parser("compare", help="several models side by side (default: the four attention structures "
                                       "at 128K on one accelerator)")
    p.add_argument("--models", default=",".join(DEFAULT_MODELS),
                   help="comma-separated model ids or config.json paths (default: GQA, MLA, sliding, SSM hybrid)")
    p.add_argument("--accelerator", default=DEFAULT_ACCELERATOR, help=f"default {DEFAULT_ACCELERATOR}")
    add_workload_flags(p, context_default=DEFAULT_CONTEXT, batch_default=DEFAULT_BATCH)
    p.add_argument("--engines", action="store_true",
                   help="for each model, what the textbook law, llama.cpp and vLLM allocate for the workload, and why")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(a) -> int:
    names = [m.strip() for m in a.models.split(",") if m.strip()]
    if not names:
        raise InputError("models: give at least one model id (see `capacity list models`)")
    if a.engines:
        return run_engines(names, a)
    plans = compare(names, a.accelerator, workload_from_args(a))
    if a.json:
        print(validate.dumps_json(plans, indent=2))
        return 0
    first = plans[0]
    print(f"{len(plans)} models on {first['accelerator']}: {a.batch:,} sequences × {a.context:,} tokens, "
          f"KV {first['workload']['kv_dtype']}")
    rows = []
    for d in plans:
        rows.append([d["model"], d["structure"], d["workload"]["weights_dtype"], fmt_bytes(d["kv_bytes_per_token"]),
                     fmt_bytes(d["kv_bytes_per_sequence"]), fmt_bytes(d["kv_bytes_total"]),
                     fmt_bytes(d["weights_bytes"]), f"{d['kv_to_weights_ratio']:.2f}",
                     fmt_count(d["accelerators_needed"]), fmt_count(d["accelerators_without_kv"]),
                     fmt_count(d["accelerators_added_by_kv"]), d["bottleneck"]])
    print(table(rows, ["model", "structure", "weights", "KV/token", "KV/seq", "KV total", "weights size",
                       "KV/W", "accel.", "w/o KV", "by KV", "bottleneck"], left=(0, 1, 2, 11)))
    for d in plans:
        print(f"- {d['model']}: {d['bottleneck']} — {d['verdict']}")
    return 0


def run_engines(names, a) -> int:
    from part1_capacity.calculator.uses.compare import compare_engines

    out = compare_engines(names, a.accelerator, workload_from_args(a))
    if a.json:
        print(validate.dumps_json(out, indent=2))
        return 0
    print(f"what engines allocate: {a.batch:,} sequences × {a.context:,} tokens on {out[0]['accelerator']}")
    for d in out:
        rows = [[e["engine"], str(e["tensor_parallel"] or "—"), fmt_bytes(e["kv_bytes_per_token"]),
                 fmt_bytes(e["kv_bytes_total"]), fmt_bytes(e["state_bytes"])] for e in d["engines"]]
        print(f"\n{d['model']} ({d['structure']})")
        print(table(rows, ["engine", "TP", "KV/token per rank", "cache (all ranks)", "of which state"], left=(0,)))
        for e in d["engines"][1:]:
            for note in e["notes"]:
                print(f"  - {e['engine']}: {note}")
    return 0
