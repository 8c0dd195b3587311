"""Figures and tables for site/part0/02_encoder_decoder.md, from the shipped checkpoint and its saved results.

Nothing trains here: the training curve and the accuracies come from ``results.json`` (written by ``train.py``
together with ``checkpoint.pt``); the diagram, the translations and the attention maps come from the checkpoint.
"""
from __future__ import annotations

import datetime as dt
import json

import torch

from course import records
from course.exercises import exercise_block

from part0_foundations.l02_encoder_decoder import data
from part0_foundations.l02_encoder_decoder.model import CHECKPOINT, greedy_decode, load_model
from part0_foundations.l02_encoder_decoder.train import RESULTS

NAME = "l02"

# Latin-script examples only: the site's plotting fonts have no Hangul or kanji glyphs.
HEATMAP_TEXTS = ["the 3rd of March '21", "Wednesday, September 27, 2000", "03/04/21", "le 1er août 1969"]
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


def architecture_figure(cfg, n_params, path):
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
    _box(ax, ex, 0.05, w, h, "source characters: “the 3rd of March '21”", "white")
    _box(ax, ex, 0.15, w, h, "embedding·√d_model + sinusoidal positions", emb)
    enc = [(0.29, "self-attention (bidirectional; padding masked)", attn), (0.37, "add & LayerNorm", norm),
           (0.45, "feed-forward (ReLU)", ffn), (0.53, "add & LayerNorm", norm)]
    for y, t, c in enc:
        _box(ax, ex, y, w, h, t, c)
    ax.add_patch(plt.Rectangle((ex - w / 2 - 0.015, 0.245), w + 0.03, 0.33, fill=False, ls="--", ec="#666666"))
    ax.text(ex - w / 2 - 0.02, 0.41, f"×{cfg['n_encoder_layers']}", ha="right", va="center", fontsize=11)
    _box(ax, ex, 0.66, w, h, "memory: a vector per source character", "#eeeeee")
    for y0, y1 in ((0.05, 0.15), (0.15, 0.29), (0.29, 0.37), (0.37, 0.45), (0.45, 0.53), (0.53, 0.66)):
        _arrow(ax, ex, y0 + h / 2, ex, y1 - h / 2)
    ax.text(ex, 0.97, "ENCODER", ha="center", fontsize=12, weight="bold")
    ax.text(ex, 0.93, "reads the whole input at once", ha="center", fontsize=9)
    # Decoder column.
    _box(ax, dx, 0.05, w, h, "output so far: “<bos> 2 0 2 1 - 0 3 …”", "white")
    _box(ax, dx, 0.15, w, h, "embedding·√d_model + sinusoidal positions", emb)
    dec = [(0.26, "causal self-attention", attn), (0.33, "add & LayerNorm", norm),
           (0.40, "cross-attention: Q from here, K and V from memory", cross), (0.47, "add & LayerNorm", norm),
           (0.54, "feed-forward (ReLU)", ffn), (0.61, "add & LayerNorm", norm)]
    for y, t, c in dec:
        _box(ax, dx, y, w, h, t, c, fontsize=8)
    ax.add_patch(plt.Rectangle((dx - w / 2 - 0.015, 0.215), w + 0.03, 0.44, fill=False, ls="--", ec="#666666"))
    ax.text(dx + w / 2 + 0.02, 0.435, f"×{cfg['n_decoder_layers']}", ha="left", va="center", fontsize=11)
    _box(ax, dx, 0.73, w, h, "linear (the shared embedding) + softmax", emb)
    _box(ax, dx, 0.83, w, h, "next character (argmax), appended to the output;\nrepeat until <eos>", "white",
         fontsize=8)
    for y0, y1 in ((0.05, 0.15), (0.15, 0.26), (0.26, 0.33), (0.33, 0.40), (0.40, 0.47), (0.47, 0.54), (0.54, 0.61),
                   (0.61, 0.73), (0.73, 0.83)):
        _arrow(ax, dx, y0 + h / 2, dx, y1 - h / 2)
    ax.text(dx, 0.97, "DECODER", ha="center", fontsize=12, weight="bold")
    ax.text(dx, 0.93, "writes the output one character at a time", ha="center", fontsize=9)
    # The bridge: every decoder layer's cross-attention reads the same memory.
    _arrow(ax, ex + w / 2, 0.66, dx - w / 2, 0.40, color="#cc0000", lw=2.0, connection="arc3,rad=-0.2")
    ax.text(0.485, 0.60, "cross-\nattention", ha="center", fontsize=9, color="#cc0000")
    ax.text(0.5, -0.03, f"shipped model: d_model = {cfg['d_model']}, {cfg['n_heads']} heads, d_ff = {cfg['d_ff']}, "
            f"vocabulary of {cfg['vocab_size']} characters, {n_params:,} parameters", ha="center", fontsize=9)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def training_figure(res, path):
    import matplotlib.pyplot as plt

    tr = res["training"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    steps = [r["step"] for r in tr["loss_curve"]]
    a.plot(steps, [r["loss"] for r in tr["loss_curve"]], color="#1f77b4")
    a.set_yscale("log")
    a.set_xlabel("training step")
    a.set_ylabel("cross-entropy per character (smoothed)")
    a.set_title("training loss (teacher forcing)")
    a.grid(alpha=0.3)
    vs = [r["step"] for r in tr["val_curve"]]
    b.plot(vs, [100 * r["exact_match"] for r in tr["val_curve"]], "o-", color="#2ca02c")
    b.set_xlabel("training step")
    b.set_ylabel("exact match (%)")
    b.set_title(f"greedy decoding on {tr['n_val']} validation dates")
    b.set_ylim(0, 101)
    b.grid(alpha=0.3)
    # A top axis with training seconds, read from the same log.
    secs = {r["step"]: r["seconds"] for r in tr["val_curve"]}
    top = b.secondary_xaxis("top")
    top.set_xticks(vs[1::2], [f"{secs[s]:.0f}" for s in vs[1::2]])
    top.set_xlabel("wall-clock seconds of training on this shared machine", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def heatmap_figure(model, path):
    """Cross-attention of the last decoder layer (mean over heads): which source characters each output character
    reads."""
    import matplotlib.pyplot as plt

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
    # One colour scale for every panel, with its bar: panels compare with each other.
    vmax = max(float(w.max()) for _, _, ws in maps for w in ws)
    # Sized to be shown about 940 px wide: tick labels stay ~10 px on the page.
    fig = plt.figure(figsize=(11, 3.6 * len(maps)), layout="constrained")
    rows = fig.subfigures(len(maps), 1)
    axes = []
    for j, (row, (text, iso, ws)) in enumerate(zip(rows, maps)):
        row.suptitle(f"“{text}” → {iso}", fontsize=11)  # one title per example: no two panels' titles collide
        row_axes = row.subplots(1, n_layers)
        axes += list(row_axes)
        for layer, (ax, w) in enumerate(zip(row_axes, ws)):
            im = ax.imshow(w, cmap="magma", vmin=0, vmax=vmax, aspect="auto")
            ax.set_xticks(range(len(text)), list(text.replace(" ", "␣")), fontsize=10)
            ax.set_yticks(range(len(iso) + 1), list(iso) + ["<eos>"], fontsize=10)
            ax.set_title(f"decoder layer {layer + 1}", fontsize=10)
            if layer == 0:
                ax.set_ylabel("character being written", fontsize=10)
            if j == len(maps) - 1:
                ax.set_xlabel("source character", fontsize=10)
        # The same colour scale in every row (vmax over all panels), so one bar per row reads the same.
        row.colorbar(im, ax=list(row_axes), shrink=0.9, label="weight (mean over heads)")
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _tables(res, out):
    ev, tr = res["evaluation"], res["training"]
    rows = [
        "| | full model | same decoder, encoder output cut off (zeros) | best constant answer (chance) |",
        "|---|---|---|---|",
        f"| exact match on the {ev['n_test']:,} test dates | **{_pct(ev['test_exact_match'])}** "
        f"| {_pct(ev['ablation_exact_match'])} | {_pct(ev['chance_exact_match'])} |",
        f"| characters right (of 10 per date) | {_pct(ev['test_char_accuracy'])} "
        f"| {_pct(ev['ablation_char_accuracy'])} | {_pct(ev['chance_char_accuracy'])} |",
    ]
    (out / "results.md").write_text("\n".join(rows) + "\n")
    m = tr["machine"]
    cpus = records.read_record(m)["host"]["cpus"]      # a saved run may predate the shared record's keys
    load5 = m.get("load_average_5min_at_end", m.get("loadavg_5min_at_end"))
    (out / "training.md").write_text(
        f"{tr['steps']:,} steps of {tr['batch_size']} examples ({tr['steps'] * tr['batch_size']:,} examples, "
        f"each a fresh draw of training date, form and casing), AdamW at peak learning rate {tr['lr']:g} with "
        f"{tr['warmup']} warm-up steps: **{tr['train_seconds']:.0f} s** of wall-clock training "
        f"({tr['train_cpu_seconds']:.0f} CPU-seconds) with {tr['threads']} torch thread(s) on a "
        f"{cpus}-core machine shared with other jobs (load average {load5:g} over the "
        f"last 5 minutes of the run), torch {m['torch']}.\n")
    (out / "ablation.md").write_text(
        f"With the encoder output replaced by zeros, the trained decoder writes only "
        f"**{ev['ablation_distinct_outputs']} distinct string(s)** for the {ev['n_test']:,} test inputs and gets "
        f"{_pct(ev['ablation_exact_match'])} of them exactly right — against "
        f"{_pct(ev['test_exact_match'])} with cross-attention.\n")
    example = dt.date(2021, 3, 3)
    rows = ["| form | written for 2021-03-03 | exact match (2,000 test dates) |", "|---|---|---|"]
    for form, acc in ev["per_form_exact_match"].items():
        rows.append(f"| `{form}` | {data.render(example, form)} | {_pct(acc)} |")
    (out / "per_form.md").write_text("\n".join(rows) + "\n")
    per_form = ev["per_form_exact_match"]
    imperfect = sorted((acc, form) for form, acc in per_form.items() if acc < 1)
    summary = (f"In **{len(per_form) - len(imperfect)} of the {len(per_form)} forms** every one of the "
               f"{ev['n_test']:,} test dates is translated exactly")
    summary += (": all of them." if not imperfect else "; the others: " + ", ".join(
        f"`{form}` ({data.render(example, form)}) at {_pct(acc)}" for acc, form in imperfect) + ".")
    (out / "per_form_summary.md").write_text(summary + "\n")
    (out / "check_ablation.md").write_text(
        f"Because every output character is looked up in the input, and the cut-off decoder has nothing to look "
        f"up: it writes {ev['ablation_distinct_outputs']} distinct string(s) for {ev['n_test']:,} different dates "
        f"and gets {_pct(ev['ablation_exact_match'])} exactly right, against {_pct(ev['test_exact_match'])} with "
        f"cross-attention. Its {_pct(ev['ablation_char_accuracy'])} of characters right is what the layout of an "
        f"ISO date gives away (the best input-blind guess gets {_pct(ev['chance_char_accuracy'])}).\n")
    errs = [dict(e, form="(seeded)") for e in ev["errors"]] + ev["per_form_errors"]
    rows = ["| set | form | input | expected | model wrote |", "|---|---|---|---|---|"]
    rows += [f"| {'2,000 test dates' if e['form'] == '(seeded)' else 'per form'} | `{e['form']}` | `{e['text']}` "
             f"| {e['target']} | {e['got']} |" for e in errs[:12]]
    (out / "errors.md").write_text(("\n".join(rows) if errs else "None: every test date is right in every form.")
                                   + "\n")
    from part0_foundations.l02_encoder_decoder.translate import translate

    misread = ev["per_form_errors"][:1] + ev["errors"][:1]
    rows = ["| `translate(text)` | result |", "|---|---|"]
    for text in TRANSLATE_TEXTS + [e["text"] for e in misread[:1]]:
        try:
            got = f"`{translate(text)}`"
        except ValueError as exc:
            got = f"ValueError: {exc}".replace("|", "\\|")
        rows.append(f"| `{text}` | {got} |")
    note = ""
    if misread:
        e = misread[0]
        note = (f"\nThe last row is a real date that the model misreads (its greedy output is {e['got']}, the date is "
                f"{e['target']}): no string is a form of two dates, so the round trip catches the mistake and "
                f"`translate` refuses instead of answering wrongly.\n")
    (out / "translations.md").write_text("\n".join(rows) + "\n" + note)
    h = res["heldout_forms"]
    rows = ["| form never seen in training | written for 2021-03-03 | exact match (2,000 test dates) |", "|---|---|---|"]
    rows += [f"| `{f}` | {data.render(example, f)} | {_pct(acc)} |" for f, acc in h["per_form_exact_match"].items()]
    rows.append(f"| the {len(data.FORM_NAMES) - len(h['forms'])} forms it was trained on (seeded test set) | | "
                f"{_pct(h['seen_exact_match'])} |")
    wrong = "; ".join(f"`{e['text']}` → {e['got']} (not {e['target']})" for e in h["errors"][:4])
    (out / "heldout_forms.md").write_text("\n".join(rows) + "\n" + (f"\nSome of its mistakes: {wrong}.\n" if wrong else ""))
    n_params = res["n_parameters"]
    (out / "model.md").write_text(
        f"The shipped model has **{n_params:,} parameters**; `checkpoint.pt` is "
        f"{CHECKPOINT.stat().st_size / 1e6:.1f} MB (float32) and loads with `torch.load(weights_only=True)`.\n")


def build(out):
    import matplotlib

    matplotlib.use("Agg")
    res = json.loads(RESULTS.read_text())
    model = load_model()
    # A model this small decodes a handful of dates faster on one thread; on a busy machine a second OpenMP
    # thread that spin-waits makes it many times slower.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        architecture_figure(res["model"], res["n_parameters"], out / "architecture.png")
        training_figure(res, out / "training_curve.png")
        heatmap_figure(model, out / "cross_attention.png")
        _tables(res, out)
        from part0_foundations.l02_encoder_decoder import notebook

        (out / "exercise.md").write_text(exercise_block(notebook))
    finally:
        torch.set_num_threads(threads)
