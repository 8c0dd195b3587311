"""Figures and tables for site/part0/02_encoder_decoder.md, from the shipped checkpoint and its saved results.

Nothing trains here: the training curve and the accuracies come from ``results.json`` (written by ``train.py``
together with ``checkpoint.pt``); the diagram, the translations and the attention maps come from the checkpoint.
"""
from __future__ import annotations

import datetime as dt
import json

import torch

from course.shared import tables
from course.machine import records
from course.shared import i18n
from course.site.exercises import exercise_block

from part0_foundations.l02_encoder_decoder import data
from part0_foundations.l02_encoder_decoder.model import CHECKPOINT, greedy_decode, load_model
from part0_foundations.l02_encoder_decoder.train import RESULTS

NAME = "l02"

# The figures draw Hangul with Noto Sans CJK (course.shared.i18n.use_figure_fonts), so a Korean date can be shown too.
HEATMAP_TEXTS = ["the 3rd of March '21", "Wednesday, September 27, 2000", "03/04/21", "le 1er août 1969",
                 "2021년 3월 3일"]
TRANSLATE_TEXTS = ["3 March 2021", "March 3, 2021", "03/03/21", "Wed, 3 Mar 2021", "2021년 3월 3일",
                   "the 3rd of March '21", "3. März 2021", "29 February 2000",
                   "hello world", "3 March 2150", "29 February 2021", "Mon, 3 Mar 2021", "3 March 2021!"]


def _pct(x: float) -> str:
    return f"{100 * x:.2f} %"


def _box(ax, x, y, w, h, text, color, fontsize=8.5):
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.01,rounding_size=0.015",
                                fc=color, ec="#333333", lw=0.8))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, x0, y0, x1, y1, color="#333333", style="-|>", lw=1.0, connection="arc3"):
    from matplotlib.patches import FancyArrowPatch

    ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle=style, mutation_scale=10, color=color, lw=lw,
                                 connectionstyle=connection))


def architecture_figure(cfg, n_params, path, tr):
    """The encoder–decoder block diagram, labelled with the shipped model's own dimensions."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9.5, 7.2))
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.04, 1)
    ax.axis("off")
    w, h = 0.38, 0.05
    ex, dx = 0.22, 0.75
    attn, ffn, norm, emb, cross = "#cfe2f3", "#d9ead3", "#f3f3f3", "#fff2cc", "#f4cccc"
    # Encoder column.
    _box(ax, ex, 0.05, w, h, tr("source characters: “the 3rd of March '21”"), "white")
    _box(ax, ex, 0.15, w, h, tr("embedding·√d_model + sinusoidal positions"), emb)
    enc = [(0.29, tr("self-attention (bidirectional; padding masked)"), attn), (0.37, tr("add & LayerNorm"), norm),
           (0.45, tr("feed-forward (ReLU)"), ffn), (0.53, tr("add & LayerNorm"), norm)]
    for y, t, c in enc:
        _box(ax, ex, y, w, h, t, c)
    ax.add_patch(plt.Rectangle((ex - w / 2 - 0.015, 0.245), w + 0.03, 0.33, fill=False, ls="--", ec="#666666"))
    ax.text(ex - w / 2 - 0.02, 0.41, f"×{cfg['n_encoder_layers']}", ha="right", va="center", fontsize=11)
    _box(ax, ex, 0.66, w, h, tr("memory: a vector per source character"), "#eeeeee")
    for y0, y1 in ((0.05, 0.15), (0.15, 0.29), (0.29, 0.37), (0.37, 0.45), (0.45, 0.53), (0.53, 0.66)):
        _arrow(ax, ex, y0 + h / 2, ex, y1 - h / 2)
    ax.text(ex, 0.97, tr("ENCODER"), ha="center", fontsize=12, weight="bold")
    ax.text(ex, 0.93, tr("reads the whole input at once"), ha="center", fontsize=9)
    # Decoder column.
    _box(ax, dx, 0.05, w, h, tr("output so far: “<bos> 2 0 2 1 - 0 3 …”"), "white")
    _box(ax, dx, 0.15, w, h, tr("embedding·√d_model + sinusoidal positions"), emb)
    dec = [(0.26, tr("causal self-attention"), attn), (0.33, tr("add & LayerNorm"), norm),
           (0.40, tr("cross-attention: Q from here, K and V from memory"), cross), (0.47, tr("add & LayerNorm"), norm),
           (0.54, tr("feed-forward (ReLU)"), ffn), (0.61, tr("add & LayerNorm"), norm)]
    for y, t, c in dec:
        _box(ax, dx, y, w, h, t, c, fontsize=8)
    ax.add_patch(plt.Rectangle((dx - w / 2 - 0.015, 0.215), w + 0.03, 0.44, fill=False, ls="--", ec="#666666"))
    ax.text(dx + w / 2 + 0.02, 0.435, f"×{cfg['n_decoder_layers']}", ha="left", va="center", fontsize=11)
    _box(ax, dx, 0.73, w, h, tr("linear (the shared embedding) + softmax"), emb)
    _box(ax, dx, 0.83, w, h, tr("next character (argmax), appended to the output;\nrepeat until <eos>"), "white",
         fontsize=8)
    for y0, y1 in ((0.05, 0.15), (0.15, 0.26), (0.26, 0.33), (0.33, 0.40), (0.40, 0.47), (0.47, 0.54), (0.54, 0.61),
                   (0.61, 0.73), (0.73, 0.83)):
        _arrow(ax, dx, y0 + h / 2, dx, y1 - h / 2)
    ax.text(dx, 0.97, tr("DECODER"), ha="center", fontsize=12, weight="bold")
    ax.text(dx, 0.93, tr("writes the output one character at a time"), ha="center", fontsize=9)
    # The bridge: every decoder layer's cross-attention reads the same memory.
    _arrow(ax, ex + w / 2, 0.66, dx - w / 2, 0.40, color="#cc0000", lw=2.0, connection="arc3,rad=-0.2")
    ax.text(0.485, 0.60, tr("cross-\nattention"), ha="center", fontsize=9, color="#cc0000")
    ax.text(0.5, -0.03, tr("shipped model: d_model = {d_model}, {heads} heads, d_ff = {d_ff}, vocabulary of {vocab} "
                           "characters, {params} parameters", d_model=cfg["d_model"], heads=cfg["n_heads"],
                           d_ff=cfg["d_ff"], vocab=cfg["vocab_size"], params=f"{n_params:,}"), ha="center", fontsize=9)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def training_figure(res, path, tr):
    import matplotlib.pyplot as plt

    run = res["training"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    steps = [r["step"] for r in run["loss_curve"]]
    a.plot(steps, [r["loss"] for r in run["loss_curve"]], color="#1f77b4")
    a.set_yscale("log")
    a.set_xlabel(tr("training step"))
    a.set_ylabel(tr("cross-entropy per character (smoothed)"))
    a.set_title(tr("training loss (teacher forcing)"))
    a.grid(alpha=0.3)
    vs = [r["step"] for r in run["val_curve"]]
    b.plot(vs, [100 * r["exact_match"] for r in run["val_curve"]], "o-", color="#2ca02c")
    b.set_xlabel(tr("training step"))
    b.set_ylabel(tr("exact match (%)"))
    b.set_title(tr("greedy decoding on {n} validation dates", n=run["n_val"]))
    b.set_ylim(0, 101)
    b.grid(alpha=0.3)
    # A top axis with training seconds, read from the same log.
    secs = {r["step"]: r["seconds"] for r in run["val_curve"]}
    top = b.secondary_xaxis("top")
    top.set_xticks(vs[1::2], [f"{secs[s]:.0f}" for s in vs[1::2]])
    top.set_xlabel(tr("wall-clock seconds of training on this shared machine"), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def attention_maps(model):
    """Cross-attention of every decoder layer (mean over heads) for each of ``HEATMAP_TEXTS``: which source
    characters each output character reads. [(text, iso, [(T, S) array per layer])]."""
    src = data.source_tensor(HEATMAP_TEXTS)
    out = greedy_decode(model, src, data.TARGET_LEN)
    n_layers = model.config.n_decoder_layers
    maps = []
    with torch.no_grad():
        for j, text in enumerate(HEATMAP_TEXTS):
            s = src[j : j + 1, : len(text)]
            iso = data.decode_ids(out[j])
            tgt = torch.tensor([[data.BOS_ID] + data.encode_text(iso)])
            memory = model.encode(s)
            _, weights = model.decode(tgt, memory, model.padding_mask(s), return_cross_weights=True)
            # (T, S) per layer: row t is the step that writes output character t.
            maps.append((text, iso, [weights[layer][0].mean(0).numpy() for layer in range(n_layers)]))
    return maps


def heatmap_figure(maps, path, tr):
    """The maps of ``attention_maps``, one row per example, one panel per decoder layer."""
    import matplotlib.pyplot as plt

    # One colour scale for every panel, with its bar: panels compare with each other.
    vmax = max(float(w.max()) for _, _, ws in maps for w in ws)
    # Sized to be shown about 940 px wide: tick labels stay ~10 px on the page.
    fig = plt.figure(figsize=(11, 3.6 * len(maps)), layout="constrained")
    rows = fig.subfigures(len(maps), 1)
    axes = []
    for j, (row, (text, iso, ws)) in enumerate(zip(rows, maps)):
        row.suptitle(f"“{text}” → {iso}", fontsize=11)  # one title per example: no two panels' titles collide
        row_axes = row.subplots(1, len(ws))
        axes += list(row_axes)
        for layer, (ax, w) in enumerate(zip(row_axes, ws)):
            im = ax.imshow(w, cmap="magma", vmin=0, vmax=vmax, aspect="auto")
            ax.set_xticks(range(len(text)), list(text.replace(" ", "␣")), fontsize=10)
            ax.set_yticks(range(len(iso) + 1), list(iso) + ["<eos>"], fontsize=10)
            ax.set_title(tr("decoder layer {n}", n=layer + 1), fontsize=10)
            if layer == 0:
                ax.set_ylabel(tr("character being written"), fontsize=10)
            if j == len(maps) - 1:
                ax.set_xlabel(tr("source character"), fontsize=10)
        # The same colour scale in every row (vmax over all panels), so one bar per row reads the same.
        row.colorbar(im, ax=list(row_axes), shrink=0.9, label=tr("weight (mean over heads)"))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _tables(res, out):
    ev, run = res["evaluation"], res["training"]
    n_test = f"{ev['n_test']:,}"
    pct = {k: _pct(ev[k]) for k in ("test_exact_match", "ablation_exact_match", "chance_exact_match",
                                    "test_char_accuracy", "ablation_char_accuracy", "chance_char_accuracy")}
    i18n.write_text(out, "results.md", lambda tr: "\n".join([
        *tables.head(tr("| | full model | same decoder, encoder output cut off (zeros) | best constant answer (chance) |")),
        tables.row(tr("exact match on the {n} test dates", n=n_test), f"**{pct['test_exact_match']}**",
                   pct['ablation_exact_match'], pct['chance_exact_match']),
        tables.row(tr("characters right (of 10 per date)"), pct['test_char_accuracy'], pct['ablation_char_accuracy'],
                   pct['chance_char_accuracy']),
    ]) + "\n")
    m = run["machine"]
    cpus = records.read_record(m)["host"]["cpus"]      # a saved run may predate the shared record's keys
    load5 = m.get("load_average_5min_at_end", m.get("loadavg_5min_at_end"))
    i18n.write_text(out, "training.md", lambda tr: tr(
        "{steps} steps of {batch} examples ({examples} examples, each a fresh draw of training date, form and "
        "casing), AdamW at peak learning rate {lr} with {warmup} warm-up steps: **{seconds} s** of wall-clock "
        "training ({cpu_seconds} CPU-seconds) with {threads} torch thread(s) on a {cpus}-core machine shared with "
        "other jobs (load average {load5} over the last 5 minutes of the run), torch {torch}.",
        steps=f"{run['steps']:,}", batch=run["batch_size"], examples=f"{run['steps'] * run['batch_size']:,}",
        lr=f"{run['lr']:g}", warmup=run["warmup"], seconds=f"{run['train_seconds']:.0f}",
        cpu_seconds=f"{run['train_cpu_seconds']:.0f}", threads=run["threads"], cpus=cpus, load5=f"{load5:g}",
        torch=m["torch"]) + "\n")
    i18n.write_text(out, "ablation.md", lambda tr: tr(
        "With the encoder output replaced by zeros, the trained decoder writes only **{distinct} distinct "
        "string(s)** for the {n} test inputs and gets {ablation} of them exactly right — against {full} with "
        "cross-attention.", distinct=ev["ablation_distinct_outputs"], n=n_test, ablation=pct["ablation_exact_match"],
        full=pct["test_exact_match"]) + "\n")
    example = dt.date(2021, 3, 3)
    per_form = ev["per_form_exact_match"]
    i18n.write_text(out, "per_form.md", lambda tr: "\n".join(
        tables.head(tr("| form | written for 2021-03-03 | exact match (2,000 test dates) |"))
        + [tables.row(f"`{form}`", data.render(example, form), _pct(acc)) for form, acc in per_form.items()]) + "\n")
    imperfect = sorted((acc, form) for form, acc in per_form.items() if acc < 1)

    def summary(tr):
        text = tr("In **{perfect} of the {forms} forms** every one of the {n} test dates is translated exactly",
                  perfect=len(per_form) - len(imperfect), forms=len(per_form), n=n_test)
        if not imperfect:
            return text + tr(": all of them.") + "\n"
        others = ", ".join(tr("`{form}` ({example}) at {acc}", form=form, example=data.render(example, form),
                              acc=_pct(acc)) for acc, form in imperfect)
        return text + tr("; the others: {others}.", others=others) + "\n"

    i18n.write_text(out, "per_form_summary.md", summary)
    i18n.write_text(out, "check_ablation.md", lambda tr: tr(
        "Because every output character is looked up in the input, and the cut-off decoder has nothing to look "
        "up: it writes {distinct} distinct string(s) for {n} different dates and gets {ablation} exactly right, "
        "against {full} with cross-attention. Its {ablation_chars} of characters right is what the layout of an "
        "ISO date gives away (the best input-blind guess gets {chance_chars}).",
        distinct=ev["ablation_distinct_outputs"], n=n_test, ablation=pct["ablation_exact_match"],
        full=pct["test_exact_match"], ablation_chars=pct["ablation_char_accuracy"],
        chance_chars=pct["chance_char_accuracy"]) + "\n")
    errs = [dict(e, form="(seeded)") for e in ev["errors"]] + ev["per_form_errors"]

    def errors(tr):
        if not errs:
            return tr("None: every test date is right in every form.") + "\n"
        rows = tables.head(tr("| set | form | input | expected | model wrote |"))
        rows += [tables.row(tr('2,000 test dates') if e['form'] == '(seeded)' else tr('per form'), f"`{e['form']}`",
                            f"`{e['text']}`", e['target'], e['got']) for e in errs[:12]]
        return "\n".join(rows) + "\n"

    i18n.write_text(out, "errors.md", errors)
    from part0_foundations.l02_encoder_decoder.translate import translate

    misread = ev["per_form_errors"][:1] + ev["errors"][:1]
    results = []
    for text in TRANSLATE_TEXTS + [e["text"] for e in misread[:1]]:
        try:
            results.append((text, f"`{translate(text)}`"))
        except ValueError as exc:  # the message is the program's own (English, as the CLI prints it)
            results.append((text, f"ValueError: {exc}".replace("|", "\\|")))

    def translations(tr):
        rows = tables.head(tr("| `translate(text)` | result |")) + [tables.row(f"`{t}`", got) for t, got in results]
        note = ""
        if misread:
            e = misread[0]
            note = "\n" + tr(
                "The last row is a real date that the model misreads (its greedy output is {got}, the date is "
                "{target}): no string is a form of two dates, so the round trip catches the mistake and "
                "`translate` refuses instead of answering wrongly.", got=e["got"], target=e["target"]) + "\n"
        return "\n".join(rows) + "\n" + note

    i18n.write_text(out, "translations.md", translations)
    h = res["heldout_forms"]

    def heldout(tr):
        rows = tables.head(tr("| form never seen in training | written for 2021-03-03 | exact match (2,000 test dates) |"))
        rows += [tables.row(f"`{f}`", data.render(example, f), _pct(acc)) for f, acc in h["per_form_exact_match"].items()]
        rows.append(tables.row(tr("the {n} forms it was trained on (seeded test set)",
                                  n=len(data.FORM_NAMES) - len(h["forms"])), "", _pct(h['seen_exact_match'])))
        wrong = "; ".join(tr("`{text}` → {got} (not {target})", text=e["text"], got=e["got"], target=e["target"])
                          for e in h["errors"][:4])
        return "\n".join(rows) + "\n" + ("\n" + tr("Some of its mistakes: {wrong}.", wrong=wrong) + "\n" if wrong else "")

    i18n.write_text(out, "heldout_forms.md", heldout)
    n_params = res["n_parameters"]
    i18n.write_text(out, "model.md", lambda tr: tr(
        "The shipped model has **{params} parameters**; `checkpoint.pt` is {mb} MB (float32) and loads with "
        "`torch.load(weights_only=True)`.", params=f"{n_params:,}", mb=f"{CHECKPOINT.stat().st_size / 1e6:.1f}")
        + "\n")


def build(out):
    i18n.use_figure_fonts()  # the Korean figures' labels need the CJK font
    import matplotlib

    matplotlib.use("Agg")
    res = json.loads(RESULTS.read_text())
    model = load_model()
    # A model this small decodes a handful of dates faster on one thread; on a busy machine a second OpenMP
    # thread that spin-waits makes it many times slower.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        maps = attention_maps(model)
        for lang, tr in i18n.each_language():
            architecture_figure(res["model"], res["n_parameters"], out / i18n.localized("architecture.png", lang), tr)
            training_figure(res, out / i18n.localized("training_curve.png", lang), tr)
            heatmap_figure(maps, out / i18n.localized("cross_attention.png", lang), tr)
        _tables(res, out)
        from part0_foundations.l02_encoder_decoder import notebook

        i18n.write_text(out, "exercise.md", lambda tr: exercise_block(notebook, lang=tr.lang))
    finally:
        torch.set_num_threads(threads)
