"""Tables and the figure for site/part1/archetypes.md, produced by the archetype code and the calculator.

Nothing here types a figure: every number comes from a calculator run, a workload input or a verified claim;
the flagged archetype's column carries none. The "same model, three customers" section checks that the
conclusions really differ and fails the build if the data stop saying so.
"""
from __future__ import annotations

from course.shared import i18n, tables
from part1_capacity.archetypes.catalog import load_archetypes
from part1_capacity.archetypes.ledger import STUDY_QUARANTINED, load_ledger, parse_ledger
from part1_capacity.archetypes.propose import propose
from part1_capacity.calculator.base.fmt import fmt_bytes, fmt_count, fmt_ratio
from part1_capacity.calculator.base.errors import InputError

NAME = "archetypes"
SAME_MODEL = "gpt-oss-120b"
SAME_MODEL_FOR = ("hyperscaler-silicon", "neocloud", "smartphone")
# What the page's prose says of that comparison; the build fails if the calculator stops saying it.
SAME_MODEL_EXPECT = {"hyperscaler-silicon": "tier_separation", "neocloud": "weights", "smartphone": "weights"}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


EN = i18n.translator("en")


def _inputs(w: dict, tr=EN) -> str:
    return tr("`{model}` on `{accelerator}`, context {context}, concurrency {concurrency}, weights {weights}, KV {kv}",
              model=w["model"], accelerator=w["accelerator"], context=f"{w['context']:,}",
              concurrency=f"{w['concurrency']:,}", weights=w["weights_dtype"], kv=w["kv_dtype"])


def _bottleneck(p: dict, tr=EN) -> str:
    return tr({"kv_cache": "KV cache", "weights": "weights", None: "not sized"}[p["bottleneck"]])


def _accelerators(plan: dict, tr=EN) -> str:
    return tr("{needed} ({without} for the weights, {added} added by the KV cache)",
              needed=fmt_count(plan["accelerators_needed"]), without=fmt_count(plan["accelerators_without_kv"]),
              added=fmt_count(plan["accelerators_added_by_kv"]))


def side_by_side(archetypes, proposals, tr=EN) -> str:
    ids = list(archetypes)
    head = "| | " + " | ".join(f"**{_cell(tr(archetypes[a].name))}**" for a in ids) + " |"
    rows = tables.head(head)

    def row(label, fn):
        rows.append(tables.row(f"**{tr(label)}**", *(_cell(fn(archetypes[a], proposals[a])) for a in ids)))

    row("typical workload", lambda a, p: tr(a.workload_description))
    row("calculator inputs", lambda a, p: _inputs(p["workload"], tr) if p["plan"]
        else tr("none (no quantitative evidence)"))
    row("KV / weights", lambda a, p: fmt_ratio(p["plan"]["kv_to_weights_ratio"]) if p["plan"] else "—")
    row("accelerators", lambda a, p: _accelerators(p["plan"], tr) if p["plan"] else "—")
    row("bottleneck", lambda a, p: _bottleneck(p, tr))
    row("what to propose", lambda a, p: tr(p["proposal"]["headline"]))
    row("quantitative evidence", lambda a, p: tr("yes: verified claims in the ledger") if a.evidence
        else tr("**none — marked; no numbers shown**"))
    return "\n".join(rows) + "\n"


def profiles(archetypes, tr=EN) -> str:
    """Who decides in each organisation and why suppliers miss them: one folded block per archetype (prose too long
    for a table cell)."""
    out = []
    for a in archetypes.values():
        items = [("who signs off", tr(a.signs_off)), ("measured on", "; ".join(tr(m) for m in a.measured_on)),
                 ("cannot give up", "; ".join(tr(c) for c in a.cannot_give_up)),
                 ("decision cycle", tr(a.decision_cycle)), ("why suppliers miss them", tr(a.why_suppliers_miss))]
        out.append(f'??? note "{tr(a.name)}"\n')
        out += [f"    - **{tr(label)}:** {text}" for label, text in items]
        out.append("    - **" + tr("objections they raise:") + "**")
        out += [f"        - {tr(o.text)}" for o in a.objections]
        out.append("")
    return "\n".join(out) + "\n"


def same_model(archetypes, ledger, tr=EN) -> tuple[str, list[dict]]:
    props = [propose(archetypes[a], ledger, model=SAME_MODEL) for a in SAME_MODEL_FOR]
    headlines = {p["proposal"]["headline"] for p in props}
    kinds = {p["archetype"]: p["proposal"]["kind"] for p in props}
    phone_too_small = props[-1]["plan"]["accelerators_without_kv"] > 1
    if len(headlines) != len(props) or kinds != SAME_MODEL_EXPECT or not phone_too_small:
        raise RuntimeError(f"{SAME_MODEL} no longer draws the conclusions the page describes for {SAME_MODEL_FOR} "
                           f"({kinds}): update site/part1/archetypes.md or pick another model")
    rows = [tr("Here is the same model, `{model}`, put to three of the archetypes on their own workloads:",
               model=SAME_MODEL), "",
            *tables.head(tr("| customer | workload (calculator inputs) | weights | KV cache | KV / weights | "
                            "accelerators | bottleneck | conclusion |"))]
    for p in props:
        plan = p["plan"]
        rows.append(tables.row(_cell(tr(p['name'])), _inputs(p['workload'], tr), fmt_bytes(plan['weights_bytes']),
                               fmt_bytes(plan['kv_bytes_total']),
                               fmt_ratio(plan['kv_to_weights_ratio']), _accelerators(plan, tr),
                               _bottleneck(p, tr), _cell(tr(p['proposal']['headline']))))
    return "\n".join(rows) + "\n", props


def ledger_tables(archetypes, ledger, tr=EN) -> str:
    rows = tables.head(tr("| claim | statement | source | as of |"))
    for c in ledger.verified():
        # The source is a document's own title: cited as published.
        statement = c.statement() if tr.lang == i18n.DEFAULT else c.statement(tr)
        rows.append(tables.row(f"`{c.id}`", _cell(statement), _cell(c.source), _cell(c.as_of)))
    status = ["", *tables.head(tr("| archetype | verified claims | quarantined claims | quantitative evidence |"))]
    quarantined = {a: any(a in c.archetypes for c in ledger.quarantined()) for a in archetypes}
    for a in archetypes.values():
        status.append(tables.row(_cell(tr(a.name)), tr('yes') if a.evidence else tr('none'),
                                 tr('yes (editors only)') if quarantined[a.id] else tr('none'),
                                 tr('yes') if a.evidence else tr('**none: marked, shows no numbers**')))
    return "\n".join(rows + status) + "\n"


def quarantine_note(archetypes, ledger, tr=EN) -> str:
    """This ledger's quarantine beside the original study's count: its ids by archetype (never a statement, value
    or source), and why the two cannot be matched claim by claim."""
    quarantined, seen, groups = ledger.quarantined_ids(), set(), []
    for a in archetypes.values():
        ids = [cid for cid in ledger.quarantined_ids(a.id) if cid not in seen]   # a claim about two: listed once
        seen.update(ids)
        if ids:
            groups.append(f"{tr(a.name)}: " + ", ".join(f"`{cid}`" for cid in ids))
    if seen != set(quarantined):
        raise RuntimeError(f"quarantined claims about no known archetype: {sorted(set(quarantined) - seen)}")
    return tr("**This quarantine and the original study's.** The study says it quarantined {study} unsourced claims; "
              "this ledger quarantines {n} of its {total} — {listing}. The two counts cannot be matched claim by "
              "claim: the study did not publish its list. The rule here: a claim is quarantined when the source it "
              "names could not be checked (status `unverified`); a claim that names no source at all is not "
              "quarantined but refused (the first of the validator's messages below).",
              study=STUDY_QUARANTINED["count"], n=len(quarantined), total=len(ledger.verified()) + len(quarantined),
              listing="; ".join(groups)) + "\n"


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


def figure(proposals, path, tr=EN):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sized = [p for p in proposals.values() if p["plan"]]
    names = [tr(p["name"]).replace(" ", "\n", 1) for p in sized]
    base = [p["plan"]["accelerators_without_kv"] for p in sized]
    added = [p["plan"]["accelerators_added_by_kv"] for p in sized]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.bar(names, base, color="#4c72b0", label=tr("accelerators for the weights"))
    ax.bar(names, added, bottom=base, color="#dd8452", label=tr("accelerators added by the KV cache"))
    for i, p in enumerate(sized):
        ax.text(i, base[i] + added[i], tr("bottleneck:\n{bottleneck}", bottleneck=_bottleneck(p, tr)), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel(tr("accelerators (devices)"))
    ax.set_title(tr("Accelerators for each archetype's own workload"))
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_ylim(0, max(b + a for b, a in zip(base, added)) * 1.3)
    ax.legend(frameon=False, fontsize=8, loc="upper right")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def build(out):
    i18n.use_figure_fonts()  # the Korean figures' labels need the CJK font
    ledger = load_ledger()
    archetypes = load_archetypes(ledger=ledger)
    proposals = {a: propose(arch, ledger) for a, arch in archetypes.items()}
    i18n.write_text(out, "side_by_side.md", lambda tr: side_by_side(archetypes, proposals, tr))
    i18n.write_text(out, "profiles.md", lambda tr: profiles(archetypes, tr))
    i18n.write_text(out, "same_model.md", lambda tr: same_model(archetypes, ledger, tr)[0])
    i18n.write_text(out, "ledger.md", lambda tr: ledger_tables(archetypes, ledger, tr))
    i18n.write_text(out, "quarantine.md", lambda tr: quarantine_note(archetypes, ledger, tr))
    rejections = rejection_examples()   # the validator's own messages, quoted as it prints them
    i18n.write_text(out, "rejections.md", lambda tr: rejections)
    for lang, tr in i18n.each_language():
        figure(proposals, out / i18n.localized("accelerators_by_archetype.png", lang), tr)
