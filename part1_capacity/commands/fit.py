"""`capacity fit`: the longest context at a batch, or the most concurrent sequences at a context, that fit the
accelerators one has (one by default)."""
from __future__ import annotations

from part1_capacity.calculator.base import validate
from part1_capacity.calculator.uses.fit import fit
from part1_capacity.calculator.base.fmt import fmt_bytes
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.plan.plan import for_plan, make_plan
from part1_capacity.commands._common import (accelerator_arg, add_extras_flags, add_revision_flag, add_workload_flags,
                                             batch_int, context_int, machine_fields,
                                             model_name, positive_int, workload_from_args)


def register(sub):
    p = sub.add_parser("fit", help="the longest context (at --batch) or the most sequences (at --context) that fit "
                                   "the accelerators you have")
    p.add_argument("--model", required=True, help="bundled model id, a config.json, a model folder, a .gguf file or "
                                                    "a Hub repository id (org/name)")
    add_revision_flag(p)
    p.add_argument("--accelerator", required=True, help="bundled accelerator id, an accelerator JSON file, or local "
                                                          "(this machine, detected)")
    g = p.add_argument_group("what to find (give exactly one)")
    what = g.add_mutually_exclusive_group(required=True)
    what.add_argument("--batch", type=batch_int, default=None, metavar="B",
                      help="concurrent sequences: find the longest context (max_context) at this batch")
    what.add_argument("--context", type=context_int, default=None, metavar="T",
                      help="tokens per sequence: find the most concurrent sequences (max_batch) at this context")
    p.add_argument("--accelerators", type=positive_int, default=1, metavar="N",
                   help="how many accelerators you have (default 1)")
    p.add_argument("--engine", default="law", metavar="ENGINE",
                   help="whose allocation sizes the cache: law (default), llama.cpp (256-cell padding) or vllm "
                        "(16-token blocks, per-request reservation)")
    add_workload_flags(p, grid=True)
    add_extras_flags(p)
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    p.set_defaults(func=run)


def run(a) -> int:
    model = load_model(model_name(a))
    acc, machine = accelerator_arg(a.accelerator)
    search = "context" if a.batch is not None else "batch"
    wl = workload_from_args(a, context=a.context or 1, batch=a.batch or 1)
    f = fit(model, acc, wl, search, a.accelerators)
    d = {**f.to_dict(), **machine_fields(machine)}
    if f.value is not None:      # the plan at the answer, as `capacity plan` sizes it
        plan = make_plan(model, acc, f.workload)
        d["plan_at_answer"] = {"accelerators_needed": plan.accelerators_needed, "weights_bytes": plan.weights_bytes,
                               "kv_bytes_total": (plan.kv_bytes_total if f.workload.engine == "law" else
                                                  for_plan(plan).kv_bytes_total),
                               "usable_bytes_per_accelerator": plan.resolved.usable_bytes}
    if a.json:
        print(validate.dumps_json(d, indent=2))
        return 0
    if machine is not None:
        print(f"this machine: {machine.found.describe()}")
    print(render(f, d))
    return 0


def render(f, d: dict) -> str:
    wl, n = f.workload, f.accelerators
    where = f"{n} × {f.accelerator.name}" if n > 1 else f.accelerator.name
    head = (f"{f.model.name} on {where} (weights {wl.weights_dtype}, KV {wl.kv_dtype}, sized by "
            f"{'the textbook law' if wl.engine == 'law' else wl.engine})")
    if f.value is None:
        at = f"at batch {wl.batch:,}" if f.searched == "context" else f"at context {wl.context:,}"
        return f"{head}\nnothing fits {at}: {f.reason}"
    if f.searched == "context":
        line = f"longest context at batch {wl.batch:,}: {f.value:,} tokens per sequence"
    else:
        line = f"most concurrent sequences at context {wl.context:,}: {f.value:,}"
    p = d["plan_at_answer"]
    out = [head, line, f"limited by {f.reason}",
           f"at the answer: weights {fmt_bytes(p['weights_bytes'])} + cache {fmt_bytes(p['kv_bytes_total'])} "
           f"on {p['accelerators_needed']} accelerator{'s' if p['accelerators_needed'] != 1 else ''} of "
           f"{fmt_bytes(p['usable_bytes_per_accelerator'])} usable each"]
    return "\n".join(out)
