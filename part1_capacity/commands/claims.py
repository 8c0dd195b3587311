"""`capacity claims [--unverified] [--ledger PATH] [--json]`: the evidence ledger.

Without ``--unverified`` it lists the verified claims (the only ones any other output uses). ``--unverified``
lists the quarantine for editors: claims whose source could not be checked, with what they are attributed to.
``--ledger PATH`` validates and lists a draft ledger instead of the bundled one.
"""
from __future__ import annotations


from part1_capacity.calculator.base import validate
from part1_capacity.archetypes import catalog
from part1_capacity.archetypes.ledger import load_ledger


def register(sub):
    p = sub.add_parser("claims", help="the evidence ledger (verified claims; --unverified: the quarantine)")
    p.add_argument("--unverified", action="store_true",
                   help="list the quarantined claims (source could not be checked), for editors")
    p.add_argument("--ledger", metavar="PATH", help="a ledger TOML file to validate and list instead")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args) -> int:
    ids = list(catalog.load_archetypes().keys())
    led = load_ledger(args.ledger, archetype_ids=ids)
    claims = led.quarantined() if args.unverified else led.verified()
    if args.json:
        rows = []
        for c in claims:
            row = {**c.to_dict(), "archetypes": list(c.archetypes)}
            if c.verified:
                row["checked"] = c.checked
            rows.append(row)
        print(validate.dumps_json({"status": "unverified" if args.unverified else "verified", "claims": rows},
                                  indent=2))
        return 0
    if args.unverified:
        print(f"Quarantined claims ({led.origin}): their source could not be checked, so no other output shows "
              "them. Check the source and mark them verified, or leave them here.")
    else:
        print(f"Verified claims ({led.origin}). Quarantined claims are listed only with --unverified.")
    for c in claims:
        print(f"\n[{c.id}] ({', '.join(c.archetypes)})\n  {c.statement()}\n  source: {c.source}"
              + (f" ({c.as_of})" if c.as_of else "") + (f"\n  url: {c.url}" if c.url else "")
              + (f"\n  checked: {c.checked}" if c.verified else ""))
    if not claims:
        print("\n(none)")
    return 0
