"""`capacity propose --archetype NAME [--model M] [--json]`: what to propose to a customer, and why.

Runs the calculator on the archetype's workload (``--model`` swaps the model, keeping the rest of the workload),
says which kind of bottleneck it is, what addresses it, which objections to expect and which verified claims
support it. Unverified claims never appear; an archetype without quantitative evidence shows no numbers.
"""
from __future__ import annotations


from part1_capacity.calculator.base import validate
from part1_capacity.archetypes.catalog import get_archetype, load_archetypes
from part1_capacity.archetypes.ledger import load_ledger
from part1_capacity.archetypes.propose import propose, render


def register(sub):
    p = sub.add_parser("propose", help="what to propose to a customer archetype, from the calculator and the ledger")
    p.add_argument("--archetype", required=True, metavar="NAME",
                   help="hyperscaler-silicon, merchant-vendor, neocloud, smartphone or edge-robotics")
    p.add_argument("--model", metavar="NAME", help="another model on the archetype's workload")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args) -> int:
    ledger = load_ledger()
    arch = get_archetype(args.archetype, load_archetypes(ledger=ledger))
    result = propose(arch, ledger, model=args.model)
    print(validate.dumps_json(result, indent=2) if args.json else render(result))
    return 0
