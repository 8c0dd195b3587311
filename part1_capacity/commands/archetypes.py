"""`capacity archetypes [NAME] [--json]`: the five customer archetypes, described by structure.

Without NAME, one row per archetype; with NAME, its full structure and workload. Workloads are calculator
inputs; an archetype without quantitative evidence lists none (and no numbers at all).
"""
from __future__ import annotations


from part1_capacity.calculator.base import validate
from part1_capacity.archetypes.catalog import get_archetype, load_archetypes
from part1_capacity.archetypes.ledger import load_ledger


def register(sub):
    p = sub.add_parser("archetypes", help="the customer archetypes (structure, objections, workload)")
    p.add_argument("name", nargs="?", metavar="NAME", help="show one archetype in full")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def _record(a) -> dict:
    return {**a.structure(),
            "objections": [{"when": o.when, "text": o.text} for o in a.objections],
            "workload": a.workload.to_dict() if a.workload else {"description": a.workload_description}}


def _inputs(a) -> str:
    w = a.workload
    if w is None:
        return "no quantitative evidence: no calculator inputs"
    return (f"{w.model} on {w.accelerator}, context {w.context:,}, {w.concurrency:,} sequences, "
            f"weights {w.weights_dtype}, KV {w.kv_dtype}")


def run(args) -> int:
    archetypes = load_archetypes(ledger=load_ledger())
    chosen = [get_archetype(args.name, archetypes)] if args.name else list(archetypes.values())
    if args.json:
        print(validate.dumps_json({"archetypes": [_record(a) for a in chosen]}, indent=2))
        return 0
    if not args.name:
        print(f"{'archetype':<21}{'who signs off':<60}workload (calculator inputs)")
        for a in chosen:
            who = a.signs_off.split(";")[0].split(",")[0]
            who = who if len(who) <= 57 else who[:56] + "…"
            print(f"{a.id:<21}{who:<60}{_inputs(a)}")
        print("\n`capacity archetypes NAME` shows one in full; `capacity propose --archetype NAME` sizes its workload.")
        return 0
    a = chosen[0]
    print(f"{a.name} ({a.id})")
    if not a.evidence:
        print("Marked: no quantitative evidence (no verified claim in the ledger) — no numbers are shown.")
    for label, value in (("Who signs off", a.signs_off), ("Decision cycle", a.decision_cycle),
                         ("Why suppliers miss them", a.why_suppliers_miss)):
        print(f"\n{label}:\n  {value}")
    for label, items in (("Measured on", a.measured_on), ("Cannot give up", a.cannot_give_up)):
        print(f"\n{label}:")
        for x in items:
            print(f"  - {x}")
    print("\nObjections they will raise:")
    for o in a.objections:
        print(f"  - {o.text}" + ("" if o.when == "any" else f" (to a {'KV-cache' if o.when == 'kv_cache' else 'weights'} proposal)"))
    print(f"\nTypical workload:\n  {a.workload_description}\n  {_inputs(a)}")
    return 0
