"""What to propose to an archetype: run the calculator on its workload, read the kind of bottleneck, answer it.

- KV cache dominates and adds accelerators → **tier separation**: the weights stay in HBM on the accelerators
  they need anyway; the cache gets its own, cheaper tier (the calculator says which tiers can hold the overflow
  and what decode slows to when it reads from them).
- KV cache dominates but adds no accelerator → nothing to separate at this workload: say so.
- Weights dominate → address the weights: fewer bits per weight (the calculator is rerun at the next lower
  precision), more memory per device, sharding; and say plainly that a KV tier would not help.

Every number in a proposal is either a calculator output (``plan``, ``options[].plan``), a calculator input
(``workload``) or the value of a *verified* claim (``supporting_claims``). Prose never carries a figure: the
human renderer prints numbers only from those fields. An archetype without quantitative evidence gets its
structure and objections, and no numbers at all.
"""
from __future__ import annotations

from part1_capacity.archetypes.catalog import Archetype
from part1_capacity.archetypes.ledger import Ledger
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.base.fmt import fmt_bytes, fmt_count, fmt_ratio
from part1_capacity.calculator.hardware.accelerators import load_accelerator
from part1_capacity.calculator.plan.plan import Workload, make_plan

# The next lower weight precision to try when the weights are the bottleneck (None: nothing lower here).
LOWER_PRECISION = {"fp32": "bf16", "bf16": "fp8", "fp16": "fp8", "fp8": "int4", "int8": "int4",
                   "q8_0": "q5_0", "q5_0": "q4_k_m", "q4_k_m": "int4"}
SINGLE_DEVICE_KINDS = ("phone", "laptop", "edge")   # a customer ships one of these; more of them is no option

NO_EVIDENCE = ("No quantitative evidence: the ledger holds no verified claim about this customer, so the course "
               "states no figure and runs no sizing for it. What is known is the structure: who decides and what they protect. Collect checked "
               "figures (what they run, on which module, under which power and memory budget) before proposing.")


def _plan(model: str, w, weights_dtype: str | None = None) -> dict:
    wl = Workload(context=w.context, batch=w.concurrency, weights_dtype=weights_dtype or w.weights_dtype,
                  kv_dtype=w.kv_dtype)
    return make_plan(model, w.accelerator, wl).to_dict()


def _tier_separation(plan: dict) -> dict:
    fits = [t for t in plan["overflow_tiers"] if t["fits"]]
    return {
        "kind": "tier_separation",
        "headline": "Tier separation: the KV cache outweighs the weights and adds accelerators of its own.",
        "summary": ("Keep the weights in HBM on the accelerators they need anyway and give the KV cache its own, "
                    "cheaper tier; accelerators bought only to hold cache are the saving. Which tiers can hold the "
                    "overflow, and what decode slows to when it reads from them, is listed below; "
                    "cache-side measures (an eight-bit KV cache, prefix sharing) shrink what has to move."),
        "tiers_that_fit": [t["tier"] for t in fits],
        "options": [],
    }


def _weights(plan: dict, arch: Archetype, model: str) -> dict:
    w = arch.workload
    acc = load_accelerator(w.accelerator)
    options = []
    lower = LOWER_PRECISION.get(plan["workload"]["weights_dtype"])
    if lower:
        options.append({"action": f"weights in {lower} instead of {plan['workload']['weights_dtype']}",
                        "weights_dtype": lower, "plan": _plan(model, w, lower)})
    single = acc.kind in SINGLE_DEVICE_KINDS
    too_big = single and (plan["accelerators_without_kv"] or 2) > 1
    if too_big:
        headline = "The weights alone do not fit the device: this is not a model for this product."
        summary = ("The customer ships one device per user, so more devices is not an answer. Propose a smaller "
                   "model, or fewer bits per weight if quality allows; a KV tier would not help, the cache is "
                   "a small fraction of the weights here.")
    elif single:
        headline = "Weights set the memory budget on the device; the KV cache is the smaller part."
        summary = ("Every byte of weights is paid on every unit shipped and shared with the rest of the device: "
                   "propose fewer bits per weight or a smaller model. A KV tier would not address this customer's "
                   "problem.")
    else:
        headline = "Address the weights: they outweigh the KV cache."
        summary = ("Address the weights: fewer bits per weight, more memory per device, expert or tensor "
                   "parallelism across the accelerators the weights need anyway. ")
        added = plan["accelerators_added_by_kv"] or 0
        if added:
            summary += ("The cache is smaller than the weights but still adds accelerators of its own (the plan's "
                        "accelerators added by KV): an eight-bit cache, fewer or shorter sequences or a KV tier would "
                        "remove those, and only those.")
        else:
            summary += ("A tiered KV memory would not address this customer's problem: the cache is smaller than "
                        "the weights and adds no accelerator.")
    return {"kind": "weights", "headline": headline, "summary": summary, "tiers_that_fit": [],
            "options": options}


def _kv_fits() -> dict:
    return {"kind": "kv_fits",
            "headline": "The KV cache is larger than the weights, but fits beside them: no accelerator is added by it.",
            "summary": ("Tier separation would free no accelerator at this workload; it becomes a proposal only if "
                        "context or concurrency grows. Propose nothing on memory capacity here."),
            "tiers_that_fit": [], "options": []}


def propose(arch: Archetype, ledger: Ledger, model: str | None = None) -> dict:
    """The proposal for ``arch`` (optionally with another ``model`` on its workload), as a JSON-ready dict."""
    out = {"archetype": arch.id, "name": arch.name, "quantitative_evidence": arch.evidence,
           "structure": arch.structure()}
    if not arch.evidence or arch.workload is None:
        note = NO_EVIDENCE
        if model:
            note += " The model asked for cannot be sized for this customer for the same reason."
        out.update({"workload": {"description": arch.workload_description}, "plan": None, "bottleneck": None,
                    "proposal": {"kind": "no_evidence", "headline": "No quantitative evidence.", "summary": note,
                                 "tiers_that_fit": [], "options": []},
                    "objections": arch.objections_for(None), "supporting_claims": []})
        return out
    w = arch.workload
    model = (model or w.model).strip()
    plan = _plan(model, w)
    if plan["accelerators_needed"] is None:
        raise InputError(f"model: {model} does not fit {w.accelerator} at this archetype's workload even split "
                         f"over every layer; pick a smaller model")
    if plan["bottleneck"] == "kv_cache":
        proposal = _tier_separation(plan) if (plan["accelerators_added_by_kv"] or 0) > 0 else _kv_fits()
    else:
        proposal = _weights(plan, arch, model)
    workload = {**w.to_dict(), "model": plan["model"]}
    out.update({"workload": workload, "plan": plan, "bottleneck": plan["bottleneck"], "proposal": proposal,
                "objections": arch.objections_for(plan["bottleneck"]),
                "supporting_claims": [c.to_dict() for c in ledger.verified(arch.id)]})
    return out


# --- human output ------------------------------------------------------------------------------------------------
def _para(label, text, width=100):
    import textwrap

    return textwrap.fill(text, width, initial_indent=label, subsequent_indent=" " * len(label),
                         break_on_hyphens=False, break_long_words=False)


def render(p: dict) -> str:
    """The proposal as readable text. Numbers come only from the plan, the workload and verified claims."""
    s = p["structure"]
    lines = [f"{p['name']} ({p['archetype']})", ""]
    lines.append(_para("Who signs off:        ", s["signs_off"]))
    lines.append(_para("Measured on:          ", "; ".join(s["measured_on"]) + "."))
    lines.append(_para("Cannot give up:       ", "; ".join(s["cannot_give_up"]) + "."))
    lines.append(_para("Decision cycle:       ", s["decision_cycle"]))
    lines.append(_para("Why suppliers miss:   ", s["why_suppliers_miss"]))
    lines.append("")
    prop = p["proposal"]
    if p["plan"] is None:
        lines.append(_para("Workload:             ", p["workload"]["description"]))
        lines += ["", _para("Proposal:             ", prop["summary"])]
    else:
        w, plan = p["workload"], p["plan"]
        lines.append(_para("Workload (scenario):  ", w["description"]))
        lines.append(f"Calculator inputs:    {w['model']} on {w['accelerator']}, context {w['context']:,} tokens, "
                     f"concurrency {w['concurrency']:,} sequences, weights {w['weights_dtype']}, KV {w['kv_dtype']}")
        lines += ["", "What the calculator says"]
        rows = [
            ("weights", fmt_bytes(plan["weights_bytes"])),
            ("KV cache per token", fmt_bytes(plan["kv_bytes_per_token"])),
            ("KV cache in total", fmt_bytes(plan["kv_bytes_total"])),
            ("KV / weights", fmt_ratio(plan["kv_to_weights_ratio"])),
            ("accelerators needed", fmt_count(plan["accelerators_needed"])),
            ("  without the KV cache", fmt_count(plan["accelerators_without_kv"])),
            ("  added by the KV cache", fmt_count(plan["accelerators_added_by_kv"])),
            ("prefill bound", plan["prefill"]["bound"] if plan["prefill"] else "-"),
            ("decode bound", plan["decode"]["bound"] if plan["decode"] else "-"),
            ("bottleneck", "KV cache" if plan["bottleneck"] == "kv_cache" else "weights"),
        ]
        lines += [f"  {k:<26}{v}" for k, v in rows]
        lines += ["", _para("Proposal:             ", prop["headline"]), _para("                      ", prop["summary"])]
        if prop["kind"] == "tier_separation":
            lines.append("  Where the cache that does not fit can go (per accelerator; decode step against all in HBM):")
            for t in plan["overflow_tiers"]:
                lines.append(f"    - {t['name']}: {'holds it' if t['fits'] else 'too small'}, "
                             f"decode {fmt_ratio(t['slowdown_vs_hbm'])}× slower")
        for o in prop["options"]:
            q = o["plan"]
            lines.append(f"  Option: {o['action']}: weights {fmt_bytes(q['weights_bytes'])}, "
                         f"accelerators needed {fmt_count(q['accelerators_needed'])} "
                         f"(was {fmt_count(plan['accelerators_needed'])})")
    lines += ["", "Objections to expect"] + [_para("  - ", o) for o in p["objections"]]
    if p["supporting_claims"]:
        lines += ["", "Supporting claims (verified; the quarantine is never shown)"]
        for c in p["supporting_claims"]:
            lines.append(_para("  - ", f"{c['statement']} [{c['id']}; {c['source']}"
                                      + (f", {c['as_of']}" if c["as_of"] else "") + "]"))
    return "\n".join(lines)
