"""Tables and the figure for site/part1/archetypes.md, produced by the archetype code and the calculator.

Nothing here types a figure: every number comes from a calculator run, a workload input or a verified claim;
the flagged archetype's column carries none. The "same model, three customers" section checks that the
conclusions really differ and fails the build if the data stop saying so.
"""
from __future__ import annotations

from part1_capacity.archetypes.catalog import load_archetypes
from part1_capacity.archetypes.ledger import load_ledger, parse_ledger
from part1_capacity.archetypes.propose import propose
from part1_capacity.calculator.fmt import fmt_bytes, fmt_count, fmt_ratio
from part1_capacity.calculator.errors import InputError

NAME = "archetypes"
SAME_MODEL = "gpt-oss-120b"
SAME_MODEL_FOR = ("hyperscaler-silicon", "neocloud", "smartphone")
# What the page's prose says of that comparison; the build fails if the calculator stops saying it.
SAME_MODEL_EXPECT = {"hyperscaler-silicon": "tier_separation", "neocloud": "weights", "smartphone": "weights"}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _inputs(w: dict) -> str:
    return (f"`{w['model']}` on `{w['accelerator']}`, context {w['context']:,}, concurrency {w['concurrency']:,}, "
            f"weights {w['weights_dtype']}, KV {w['kv_dtype']}")


def _bottleneck(p: dict) -> str:
    return {"kv_cache": "KV cache", "weights": "weights", None: "not sized"}[p["bottleneck"]]


def _accelerators(plan: dict) -> str:
    return (f"{fmt_count(plan['accelerators_needed'])} ({fmt_count(plan['accelerators_without_kv'])} for the "
            f"weights, {fmt_count(plan['accelerators_added_by_kv'])} added by the KV cache)")


def side_by_side(archetypes, proposals) -> str:
    ids = list(archetypes)
    head = "| | " + " | ".join(f"**{_cell(archetypes[a].name)}**" for a in ids) + " |"
    rows = [head, "|---" * (len(ids) + 1) + "|"]

    def row(label, fn):
        rows.append(f"| **{label}** | " + " | ".join(_cell(fn(archetypes[a], proposals[a])) for a in ids) + " |")

    row("typical workload", lambda a, p: a.workload_description)
    row("calculator inputs", lambda a, p: _inputs(p["workload"]) if p["plan"] else "none (no quantitative evidence)")
    row("KV / weights", lambda a, p: fmt_ratio(p["plan"]["kv_to_weights_ratio"]) if p["plan"] else "—")
    row("accelerators", lambda a, p: _accelerators(p["plan"]) if p["plan"] else "—")
    row("bottleneck", lambda a, p: _bottleneck(p))
    row("what to propose", lambda a, p: p["proposal"]["headline"])
    row("quantitative evidence", lambda a, p: "yes: verified claims in the ledger" if a.evidence
        else "**none — marked; no numbers shown**")
    return "\n".join(rows) + "\n"


def profiles(archetypes) -> str:
    """Who decides in each organisation and why suppliers miss them: one folded block per archetype (prose too long
    for a table cell)."""
    out = []
    for a in archetypes.values():
        items = [("who signs off", a.signs_off), ("measured on", "; ".join(a.measured_on)),
                 ("cannot give up", "; ".join(a.cannot_give_up)), ("decision cycle", a.decision_cycle),
                 ("why suppliers miss them", a.why_suppliers_miss)]
        out.append(f'??? note "{a.name}"\n')
        out += [f"    - **{label}:** {text}" for label, text in items]
        out.append("    - **objections they raise:**")
        out += [f"        - {o.text}" for o in a.objections]
        out.append("")
    return "\n".join(out) + "\n"


def same_model(archetypes, ledger) -> tuple[str, list[dict]]:
    props = [propose(archetypes[a], ledger, model=SAME_MODEL) for a in SAME_MODEL_FOR]
    headlines = {p["proposal"]["headline"] for p in props}
    kinds = {p["archetype"]: p["proposal"]["kind"] for p in props}
    phone_too_small = props[-1]["plan"]["accelerators_without_kv"] > 1
    if len(headlines) != len(props) or kinds != SAME_MODEL_EXPECT or not phone_too_small:
        raise RuntimeError(f"{SAME_MODEL} no longer draws the conclusions the page describes for {SAME_MODEL_FOR} "
                           f"({kinds}): update site/part1/archetypes.md or pick another model")
    rows = [f"Here is the same model, `{SAME_MODEL}`, put to three of the archetypes on their own workloads:", "",
            "| customer | workload (calculator inputs) | weights | KV cache | KV / weights | accelerators | "
            "bottleneck | conclusion |", "|---|---|---|---|---|---|---|---|"]
    for p in props:
        plan = p["plan"]
        rows.append(f"| {_cell(p['name'])} | {_inputs(p['workload'])} | {fmt_bytes(plan['weights_bytes'])} | "
                    f"{fmt_bytes(plan['kv_bytes_total'])} | {fmt_ratio(plan['kv_to_weights_ratio'])} | "
                    f"{_accelerators(plan)} | {_bottleneck(p)} | {_cell(p['proposal']['headline'])} |")
    return "\n".join(rows) + "\n", props


def ledger_tables(archetypes, ledger) -> str:
    rows = ["| claim | statement | source | as of |", "|---|---|---|---|"]
    for c in ledger.verified():
        rows.append(f"| `{c.id}` | {_cell(c.statement())} | {_cell(c.source)} | {_cell(c.as_of)} |")
    status = ["", "| archetype | verified claims | quarantined claims | quantitative evidence |", "|---|---|---|---|"]
    quarantined = {a: any(a in c.archetypes for c in ledger.quarantined()) for a in archetypes}
    for a in archetypes.values():
        status.append(f"| {_cell(a.name)} | {'yes' if a.evidence else 'none'} | "
                      f"{'yes (editors only)' if quarantined[a.id] else 'none'} | "
                      f"{'yes' if a.evidence else '**none: marked, shows no numbers**'} |")
    return "\n".join(rows + status) + "\n"


def rejection_examples() -> str:
    """The validator's own messages for two bad entries, captured by running it."""
    good = {"id": "example-part-memory", "archetypes": ["neocloud"], "text": "An example part carries {value}.",
            "value": 80, "unit": "GB", "source": "example datasheet", "status": "unverified"}
    out = []
    for bad in ({**good, "source": ""}, {**good, "value": "about eighty"}):
        try:
            parse_ledger({"claim": [bad]}, "draft.toml")
        except InputError as exc:
            out.append(f"capacity: error: {exc}")
        else:
            raise RuntimeError("the ledger accepted a bad entry")
    return "```text\n" + "\n".join(out) + "\n```\n"


def figure(proposals, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sized = [p for p in proposals.values() if p["plan"]]
    names = [p["name"].replace(" ", "\n", 1) for p in sized]
    base = [p["plan"]["accelerators_without_kv"] for p in sized]
    added = [p["plan"]["accelerators_added_by_kv"] for p in sized]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.bar(names, base, color="#4c72b0", label="accelerators for the weights")
    ax.bar(names, added, bottom=base, color="#dd8452", label="accelerators added by the KV cache")
    for i, p in enumerate(sized):
        ax.text(i, base[i] + added[i], f"bottleneck:\n{_bottleneck(p)}", ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("accelerators (devices)")
    ax.set_title("Accelerators for each archetype's own workload")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_ylim(0, max(b + a for b, a in zip(base, added)) * 1.3)
    ax.legend(frameon=False, fontsize=8, loc="upper right")
    fig.savefig(out / "accelerators_by_archetype.png", dpi=110, bbox_inches="tight")
    plt.close(fig)


def build(out):
    ledger = load_ledger()
    archetypes = load_archetypes(ledger=ledger)
    proposals = {a: propose(arch, ledger) for a, arch in archetypes.items()}
    (out / "side_by_side.md").write_text(side_by_side(archetypes, proposals))
    (out / "profiles.md").write_text(profiles(archetypes))
    table, _ = same_model(archetypes, ledger)
    (out / "same_model.md").write_text(table)
    (out / "ledger.md").write_text(ledger_tables(archetypes, ledger))
    (out / "rejections.md").write_text(rejection_examples())
    figure(proposals, out)
