"""Tables and the scale-distribution figure for site/part0/04_gpt2_int8.md, from the saved comparison results
(``results/comparison.json``, written by ``compare.py`` for the shipped model). Nothing is measured here."""
import json
import math

from course.shared import tables
from course.machine import records
from course.shared import i18n
from course.site.exercises import exercise_block

from part0_foundations.l04_gpt2_int8 import data
from part0_foundations.l04_gpt2_int8.compare import HIST_BINS, layers_table, variants_table
from part0_foundations.l04_gpt2_int8.minilm import RESULTS as MINILM_RESULTS

NAME = "l04"
KINDS = [("attn.c_attn", "attn.c_attn (Q, K, V)"), ("attn.c_proj", "attn.c_proj"), ("mlp.c_fc", "mlp.c_fc"),
         ("mlp.c_proj", "mlp.c_proj"), ("lm_head", "lm_head (= wte)")]


def _kind(name):
    return next(k for k, _ in KINDS if name.endswith(k))


def anatomy_table(tr) -> str:
    """Where GPT-2's parameters sit, counted on real GPT2LMHeadModel modules built on the meta device (no memory).

    ``GPT2Config()``'s defaults are GPT-2 124M's configuration (vocab 50257, 1024 positions, 12 layers, n_embd 768).
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    columns = {"GPT-2 124M": GPT2Config(), "lesson model": GPT2Config.from_pretrained(data.SHIPPED_MODEL_DIR)}
    counted = {}
    for label, cfg in columns.items():
        with torch.device("meta"):
            model = GPT2LMHeadModel(cfg)
        total = sum(p.numel() for p in model.parameters())  # the tied weight is one Parameter: counted once
        block = model.transformer.h[0]
        rows = [("transformer.wte", model.transformer.wte, 1), ("transformer.wpe", model.transformer.wpe, 1)]
        rows += [(f"h[i].{n}", m, cfg.n_layer) for n, m in block.named_modules()
                 if n and not list(m.children()) and any(True for _ in m.parameters())]
        rows += [("transformer.ln_f", model.transformer.ln_f, 1), ("lm_head", model.lm_head, 1)]
        counted[label] = (rows, total, model.lm_head.weight is model.transformer.wte.weight)
    head = tr("| module | class | ") + " | ".join(tr("{k}: weight as stored | {k}: parameters", k=tr(k)) for k in columns) + " |"
    out = tables.head(head, "ll" + "lr" * len(columns))
    names = [r[0] for r in counted["GPT-2 124M"][0]]
    for i, name in enumerate(names):
        cells = []
        for label in columns:
            _, m, times = counted[label][0][i]
            w = getattr(m, "weight", None)
            shape = " × ".join(str(d) for d in w.shape) if w is not None else "—"
            n = sum(p.numel() for p in m.parameters()) * times
            if name == "lm_head" and counted[label][2]:
                cells.append(tr("{shape} (tied) | 0 extra", shape=shape))
            else:
                cells.append(f"{shape} | {n:,} ({100 * n / counted[label][1]:.1f}%)"
                             + (tr(", {n} layers", n=times) if times > 1 else ""))
        cls = type(counted["GPT-2 124M"][0][i][1]).__name__
        out.append(tables.row(f"`{name}`", f"`{cls}`", *cells))
    out.append(tables.row(tr("**total**"), "", *(c for k in columns for c in ("", f"**{counted[k][1]:,}**"))))
    return "\n".join(out) + "\n"


def figure(results, path, tr):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    layers = results["layers"]
    edges = np.linspace(0, 1, HIST_BINS + 1)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1, 1.3]})
    for kind, label in KINDS:
        counts = np.sum([r["scale_ratio_hist"] for r in layers if _kind(r["name"]) == kind], axis=0)
        if np.ndim(counts) == 0:
            continue
        ax1.stairs(counts / counts.sum(), edges, label=label, linewidth=1.6)
    ax1.set_xlabel(tr("channel scale / tensor scale\n(= share of the 127 levels a channel uses with one scale per tensor)"))
    ax1.set_ylabel(tr("share of output channels"))
    ax1.set_title(tr("Per-channel scales, all layers"))
    ax1.legend(fontsize=8)

    names = [r["name"].replace("transformer.", "") for r in layers]
    x = np.arange(len(layers))
    ax2.bar(x - 0.2, [r["per_tensor"]["sqnr_db"] for r in layers], 0.4, label=tr("one scale per tensor"))
    ax2.bar(x + 0.2, [r["per_channel"]["sqnr_db"] for r in layers], 0.4, label=tr("one scale per output channel"))
    ax2.set_xticks(x, names, rotation=60, ha="right", fontsize=7)
    ax2.set_ylabel(tr("weight SQNR (dB, higher is better)"))
    ax2.set_title(tr("INT8 weight error per layer"))
    lo = min(min(r["per_tensor"]["sqnr_db"], r["per_channel"]["sqnr_db"]) for r in layers)
    ax2.set_ylim(max(0, lo - 5), None)
    ax2.legend(fontsize=8, loc="lower right")
    fig.suptitle(tr("{model}: where the INT8 scales sit", model=results["model"]["label"]), fontsize=10)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _checks(results, out):
    """Answers of the page's self-check questions, from the saved comparison (and one line of arithmetic)."""
    c, m = results["conversion"], results["model"]
    i18n.write_text(out, "check_conv.md", lambda tr: tr(
        "`quantize_dynamic` replaces modules by type and knows `nn.Linear`, not `Conv1D`: on the lesson model it "
        "quantizes **{before}** modules before the conversion and **{after}** after it (lm_head left out), with "
        "logits unchanged by the conversion to {diff}.", before=c["quantized_by_torch_before_conversion"],
        after=c["quantized_by_torch_after_conversion"], diff=f"{c['logit_max_abs_diff']:.0e}") + "\n")
    v = {r["key"]: r for r in results["variants"]}
    kept, head = v["hand_per_channel"], v["hand_per_channel_lm_head"]
    extra = head["state_bytes"] - kept["state_bytes"]
    vd = m["vocab_size"] * m["n_embd"]
    i18n.write_text(out, "check_lm_head.md", lambda tr: tr(
        "Because the head's weight *is* the embedding `wte`, which the input lookup still needs in FP32: quantizing "
        "the head adds an INT8 copy instead of replacing anything. Measured on the lesson model (per-channel, by "
        "hand): {kept} → {head} bytes, **{extra} bytes more** — the \\(V \\times d\\) = {vocab} × {d} = {vd} INT8 "
        "weights of the copy, plus its {vocab} float32 scales ({scale_bytes} bytes) and the state dict's bookkeeping.",
        kept=f"{kept['state_bytes']:,}", head=f"{head['state_bytes']:,}", extra=f"{extra:,}",
        vocab=f"{m['vocab_size']:,}", d=m["n_embd"], vd=f"{vd:,}", scale_bytes=f"{4 * m['vocab_size']:,}") + "\n")
    ratio = 10
    i18n.write_text(out, "check_sqnr.md", lambda tr: tr(
        "Its step is {ratio}× coarser than its own scale would give, so its rounding error's mean square "
        "\\(s^2/12\\) is {square}× larger: {db} dB less SQNR for that row. Per-channel scales give it back at no "
        "run-time cost.", ratio=ratio, square=ratio ** 2, db=f"{10 * math.log10(ratio ** 2):.1f}") + "\n")


MINILM_LABELS = {
    "fp32": "FP32 (reference)",
    "w8_per_tensor": "INT8 weights, one scale per tensor",
    "w8_per_channel": "INT8 weights, one scale per output channel",
    "w8_per_channel+a8_per_tensor": "… + INT8 activations, one scale per tensor",
    "w8_per_channel+a8_per_token": "… + INT8 activations, one scale per token",
}


def minilm_tables(r: dict, tr) -> dict[str, str]:
    """The MiniLM section's snippets, from ``results/minilm.json`` (written by ``minilm.py``)."""
    v = r["variants"]
    n = next(iter(v.values()))
    rows = tables.head(tr("| variant | cosine to FP32 (mean) | cosine (worst chunk) | recall@5 | MRR |"), "lrrrr")
    for name, label in MINILM_LABELS.items():
        if name in v:
            x = v[name]
            rows.append(tables.row(tr(label), f"{x['cosine_mean']:.4f}", f"{x['cosine_min']:.4f}",
                                   f"{x['recall@5']:.3f}", f"{x['mrr']:.3f}"))
    step = 1 / n["questions"]
    pt, pc = v["w8_per_tensor"], v["w8_per_channel"]
    variants = "\n".join(rows) + "\n\n" + tr(
        "Cosine over {chunks} chunks of the course pages; recall@5 and MRR over lesson 05's {questions} labelled "
        "questions. Recall moves one question at a time ({step} each), so it is a coarse gauge: one scale per tensor "
        "leaves the embeddings at cosine {pt_cos} to FP32 (per channel: {pc_cos}) while recall@5 reads {pt_recall} "
        "against FP32's {fp32_recall} — the ranking of this small corpus survives a distortion that a larger index, "
        "or a threshold on similarity, would not. Run of {date}; command `{command}`.", chunks=n["chunks"],
        questions=n["questions"], step=f"{step:.1%}", pt_cos=f"{pt['cosine_mean']:.3f}",
        pc_cos=f"{pc['cosine_mean']:.4f}", pt_recall=f"{pt['recall@5']:.3f}", fp32_recall=f"{v['fp32']['recall@5']:.3f}",
        date=r["date_utc"], command=r["command"]) + "\n"
    layers = r["layers"]
    gaps = [x["sqnr_per_channel_db"] - x["sqnr_per_tensor_db"] for x in layers]
    worst = max(layers, key=lambda x: x["channel_spread"])
    act = r["activation_spread"]
    a_worst = max(act, key=act.get)
    summary = tr(
        "Over MiniLM's {n} encoder layers, one scale per output channel gains **{lo} to {hi} dB** of weight SQNR over "
        "one scale per tensor (median {median} dB). The widest weight spread is `{worst}`: its largest output "
        "channel's range is {spread}× the median channel's. The *inputs* of the layers spread further: up to "
        "{act}× (`{act_layer}`), which is why one activation scale per tensor costs more than one per token.",
        n=len(layers), lo=f"{min(gaps):.1f}", hi=f"{max(gaps):.1f}", median=f"{sorted(gaps)[len(gaps) // 2]:.1f}",
        worst=worst["layer"], spread=f"{worst['channel_spread']:.0f}", act=f"{act[a_worst]:.0f}",
        act_layer=a_worst) + "\n"
    table = tables.head(tr("| layer | shape (out, in) | channel spread (max/median) | SQNR per tensor (dB) | SQNR per channel (dB) | "
                "gain (dB) | input spread |"), "llrrrrr")
    for x, g in zip(layers, gaps):
        table.append(tables.row(f"`{x['layer']}`", f"{x['shape'][0]} × {x['shape'][1]}", f"{x['channel_spread']:.1f}",
                                f"{x['sqnr_per_tensor_db']:.1f}",
                                f"{x['sqnr_per_channel_db']:.1f}", f"{g:.1f}",
                                f"{act.get(x['layer'], float('nan')):.1f}"))
    return {"minilm_variants.md": variants, "minilm_summary.md": summary,
            "minilm_layers.md": "\n".join(table) + "\n"}


def minilm_figure(r: dict, path, tr) -> None:
    """Per-output-channel max|w| of one real layer, sorted, with the one per-tensor max drawn across it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    f = r["figure_layer"]
    a = np.asarray(f["channel_absmax"])
    fig, ax = plt.subplots(figsize=(9, 3.6))
    ax.bar(np.arange(a.size), a, width=1.0, color="#4c72b0", label=tr("max |w| of each output channel"))
    ax.axhline(f["per_tensor_absmax"], color="#c44e52", linewidth=1.5,
               label=tr("max |w| of the tensor: sets the one per-tensor scale (÷ 127)"))
    ax.axhline(float(np.median(a)), color="#55a868", linestyle="--", linewidth=1.2, label=tr("median channel"))
    ax.set_xlabel(tr("output channel of {layer} (in model order)", layer=f["layer"]))
    ax.set_ylabel("max |w|")
    ax.set_yscale("log")
    ax.set_title(tr("MiniLM, a real pretrained layer: a few outlier channels set the per-tensor scale"))
    ax.legend(fontsize=8, loc="upper right")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def build(out):
    i18n.use_figure_fonts()  # the Korean figures' labels need the CJK font
    minilm = json.loads(MINILM_RESULTS.read_text())
    results = json.loads(data.RESULTS_PATH.read_text())
    for lang, tr in i18n.each_language():
        for fname, text in minilm_tables(minilm, tr).items():
            (out / i18n.localized(fname, lang)).write_text(text)
        minilm_figure(minilm, out / i18n.localized("minilm_outliers.png", lang), tr)
        figure(results, out / i18n.localized("scale_distribution.png", lang), tr)
    i18n.write_text(out, "variants.md", lambda tr: variants_table(results, tr))
    i18n.write_text(out, "layers.md", lambda tr: layers_table(results, tr))
    i18n.write_text(out, "anatomy.md", anatomy_table)

    m, c, e, lat = results["model"], results["conversion"], results["eval"], results["latency"]
    rec = records.read_record(results)     # a saved comparison may predate the shared record's keys
    load = lat.get("load_average_at_end", lat.get("loadavg_1min"))
    cpus = rec["host"]["cpus"] or lat.get("cpu_count")
    i18n.write_text(out, "model.md", lambda tr: tr(
        "Model: **{label}** — {layers} layers, {heads} heads, n_embd {n_embd}, vocabulary {vocab}, {params} parameters "
        "(the tied weight counted once). Perplexity over {tokens} held-out tokens in windows of {window}, up to "
        "{windows} windows per batch; logit error over the first {logit_tokens} of them (one batch); latency: "
        "{statistic} over a {prompt}-token prompt, {runs} runs on {threads} threads, 1-minute load average {load} on "
        "{cpus} CPUs while measuring. torch {torch}, quantized engine `{engine}`. Command: `{command}`.",
        label=m["label"], layers=m["n_layer"], heads=m["n_head"], n_embd=m["n_embd"], vocab=f"{m['vocab_size']:,}",
        params=f"{m['parameters']:,}", tokens=f"{e['tokens']:,}", window=e["window"],
        windows=e.get("perplexity_batch_windows", 8), logit_tokens=f"{e['logit_tokens']:,}",
        statistic=tr(lat["statistic"]), prompt=e["prompt_tokens"], runs=lat["runs"], threads=lat["threads"],
        load=f"{load:.1f}", cpus=cpus, torch=results["versions"]["torch"],
        engine=results["versions"]["quantized_engine"], command=rec["command"]) + "\n")
    i18n.write_text(out, "conversion.md", lambda tr: "\n".join([
        *tables.head(tr("| | value |"), "lr"),
        tables.row(tr("Conv1D modules converted to nn.Linear"), c['conv1d_layers_converted']),
        tables.row(tr("max \\|logit difference\\| after conversion"), f"{c['logit_max_abs_diff']:.2e}"),
        tables.row(tr("modules `quantize_dynamic` quantizes **before** conversion (lm_head excluded)"), c['quantized_by_torch_before_conversion']),
        tables.row(tr("modules it quantizes after conversion (lm_head excluded)"), c['quantized_by_torch_after_conversion']),
        tables.row(tr("… and with lm_head included"), c['quantized_by_torch_after_conversion_with_lm_head']),
    ]) + "\n")
    log = json.loads((data.SHIPPED_MODEL_DIR / "train_log.json").read_text())
    i18n.write_text(out, "training.md", lambda tr: tr(
        "The shipped run: {params} parameters, {tokens} training tokens, {steps} steps of {batch} × {positions} tokens "
        "in {seconds} s on {threads} thread(s) of a shared machine (it stops at {max_steps} steps or {minutes} "
        "minutes), held-out perplexity {ppl}; command `{command}`, log in `model/train_log.json`.",
        params=f"{log['parameters']:,}", tokens=f"{log['train_tokens']:,}", steps=log["steps"],
        batch=log["args"]["batch_size"], positions=log["args"]["n_positions"], seconds=f"{log['seconds']:.0f}",
        threads=log["args"]["threads"], max_steps=log["args"]["steps"], minutes=f"{log['args']['minutes']:g}",
        ppl=f"{log['heldout_perplexity']:.1f}", command=records.read_record(log)["command"]) + "\n")
    _checks(results, out)
    from part0_foundations.l04_gpt2_int8 import notebook

    i18n.write_text(out, "exercise.md", lambda tr: exercise_block(notebook, lang=tr.lang))
    # The library's own warning, quoted as it printed it (both languages).
    warning = results["torch_deprecation_warning"] or "(no deprecation warning was raised)"
    i18n.write_text(out, "deprecation.md", lambda tr: "```text\n" + warning.strip() + "\n```\n")
