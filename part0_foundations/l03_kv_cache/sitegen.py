"""Figures and tables for site/part0/03_kv_cache.md, produced by the lesson's own code.

- measured vs law: the small model of each structure is prefilled here and its cache weighed (a few seconds);
- the latency plot and the speed ratio come from the saved benchmark run (results/bench_latency.json), with its
  date and host: nothing is re-timed while the site builds;
- the sample text comes from the shipped checkpoint;
- the 128K table uses the calculator's model profiles (part1_capacity/calculator/data/models.json, each with its source),
  whose cache sizes are the laws of laws.py.
"""
import json
from pathlib import Path

import torch

from course.machine import records
from course.shared import i18n, tables
from course.site.exercises import exercise_block
from part0_foundations.l03_kv_cache import laws
from part0_foundations.l03_kv_cache.bench import RESULTS
from part0_foundations.l03_kv_cache.gpt import GPT, WindowKV
from part0_foundations.l03_kv_cache.structures import STRUCTURES, law_bytes, law_growth_per_token
from course.shared.units import GIB as GiB

NAME = "l03"
T_VALUES = (16, 64, 256, 1024)


def _structures(out: Path):
    keys = ("n_layer", "d_model", "n_head", "n_kv_heads", "head_dim", "window", "kv_lora_rank", "qk_rope_head_dim",
            "d_inner", "d_state", "d_conv")
    # Which layer kinds read each field ("–" where the structure has no such layer).
    uses = {"n_kv_heads": ("full", "window"), "head_dim": ("full", "window"), "window": ("window",),
            "kv_lora_rank": ("mla",), "qk_rope_head_dim": ("mla",), "d_inner": ("ssm",), "d_state": ("ssm",),
            "d_conv": ("ssm",)}
    # One column per structure (six narrow columns fit the page; eleven fields as columns did not).
    rows = [[f"`{k}`"] + [str(getattr(cfg, k)) if k not in uses or set(uses[k]) & set(cfg.layer_types) else "–"
                          for cfg in STRUCTURES.values()] for k in keys]
    i18n.write_text(out, "structures.md", lambda tr: tables.table(
        tr("| field ") + "| " + " | ".join(STRUCTURES) + " |", rows, "l" + "r" * len(STRUCTURES)) + "\n")


def _measured_table(out: Path):
    measured = []  # (label, bytes per element, [(name, layers, growth, [(got, want)])])
    for dtype, label, bpe in ((torch.float32, "fp32", 4), (torch.bfloat16, "bf16", 2)):
        rows = []
        for name, cfg in STRUCTURES.items():
            torch.manual_seed(0)
            model = GPT(cfg).to(dtype).eval()
            cells = []
            for T in T_VALUES:
                cache = model.new_cache()
                with torch.no_grad():
                    model(torch.randint(0, cfg.vocab_size, (1, T)), cache)
                cells.append((cache.nbytes(), law_bytes(cfg, T, bpe)))
            rows.append((name, " · ".join(cfg.layer_types), law_growth_per_token(cfg, bpe), cells))
        measured.append((label, bpe, rows))

    def render(tr):
        lines = []
        for label, bpe, rows in measured:
            lines += [tr("**{label}** ({bpe} bytes per element): bytes the cache holds after a prefill of T tokens, "
                         "measured (sum of `element_size() × numel()`) — ✓ when equal to the law, to the byte.",
                         label=label, bpe=bpe), ""]
            header = tr("| structure | layers | law per token (growing) | ") + " | ".join(f"T = {t:,}" for t in T_VALUES) + " |"
            lines += [tables.table(header, [
                [name, layers, f"{growth:,} B"] + [f"{got:,} ✓" if got == want else
                                                   tr("{got} ✗ (law {want})", got=f"{got:,}", want=f"{want:,}")
                                                   for got, want in cells]
                for name, layers, growth, cells in rows]), ""]
        return "\n".join(lines)

    i18n.write_text(out, "measured_vs_law.md", render)


def _latency(out: Path, plt, tr, lang):
    r = json.loads(RESULTS.read_text())
    import numpy as np

    fig, ax = plt.subplots(figsize=(8, 4))
    pos = np.array(r["positions"][1:])  # step 0 (with the prefill) is left out
    k = 15  # the machine was shared: raw steps are noisy, the running median shows the trend
    for key, label, color in (("uncached_ms", tr("without cache (whole sequence every step)"), "C0"),
                              ("cached_ms", tr("with KV cache (one token per step)"), "C1")):
        ms = np.array(r[key][1:])
        med = np.array([np.median(ms[max(0, i - k // 2):i + k // 2 + 1]) for i in range(len(ms))])
        ax.plot(pos, ms, lw=0.6, alpha=0.35, color=color)
        ax.plot(pos, med, lw=2, color=color, label=tr("{label}, running median of {k}", label=label, k=k))
    ax.set_xlabel(tr("position of the token being generated"))
    ax.set_ylabel(tr("latency of the step (ms)"))
    ax.set_ylim(bottom=0)
    ax.set_title(tr("{n} greedy tokens, lesson-03 GPT, {threads} thread(s)", n=r["new_tokens"], threads=r["threads"]))
    ax.legend()
    fig.savefig(out / i18n.localized("latency.png", lang), dpi=110, bbox_inches="tight")
    plt.close(fig)
    rec = records.read_record(r)     # the saved run may predate the shared record's keys
    host = rec["host"]
    (out / i18n.localized("bench_summary.md", lang)).write_text(tr(
        "Generating **{n} tokens** after a {prompt}-token prompt took **{uncached} s without the cache** and "
        "**{cached} s with it**: a speed ratio of **{ratio}×**, with the same tokens ({same}) and logits within "
        "{diff}. Run of {date} on `{node}` ({cpu}, torch {torch}, {threads} thread(s), load average {load0} before "
        "and {load1} after: the machine was shared, so absolute times are contended). Command: `{command}`.",
        n=r["new_tokens"], prompt=r["prompt_tokens"], uncached=f"{r['uncached_total_s']:.2f}",
        cached=f"{r['cached_total_s']:.2f}", ratio=f"{r['speed_ratio']:.1f}",
        same=tr("yes") if r["same_tokens"] else tr("NO"), diff=f"{r['max_abs_logit_difference']:.1e}",
        date=rec["date_utc"], node=host["node"], cpu=host["cpu"], torch=r["torch"], threads=r["threads"],
        load0=round(rec["load_average_at_start"], 2), load1=round(rec["load_average_at_end"], 2),
        command=rec["command"]) + "\n")


def _sample(out: Path):
    from part0_foundations.l03_kv_cache.train import CHECKPOINT, load_checkpoint

    model, tok = load_checkpoint()
    made = torch.load(CHECKPOINT, map_location="cpu", weights_only=False)["made"]
    n_params = sum(p.numel() for p in model.parameters())
    prompt, temperature = "The KV cache", 0.7
    g = torch.Generator().manual_seed(0)
    ids = model.generate(torch.tensor([tok.encode(prompt)]), 300, temperature=temperature, generator=g)
    text = tok.decode(ids[0].tolist())
    c = model.config
    i18n.write_text(out, "sample.md", lambda tr: tr(
        "A continuation of “{prompt}” sampled at temperature {temperature} (seed 0) from the shipped model "
        "({layers} layers, d_model {d_model}, {heads} heads of {head_dim}, {kv_heads} K/V heads, {vocab} characters; "
        "{params} parameters, {mb} MB checkpoint; {steps} steps of {batch} × {seq} characters on {chars} characters "
        "of course text, validation loss {loss} nats per character):", prompt=prompt, temperature=temperature,
        layers=c.n_layer, d_model=c.d_model, heads=c.n_head, head_dim=c.head_dim, kv_heads=c.n_kv_heads,
        vocab=c.vocab_size, params=f"{n_params:,}", mb=f"{CHECKPOINT.stat().st_size / 1e6:.1f}", steps=made["steps"],
        batch=made["batch_size"], seq=made["seq_len"], chars=f"{made['corpus_chars']:,}", loss=f"{made['val_loss']:.2f}")
        + f"\n\n```text\n{text}\n```\n")


LAYOUT_T = 256  # tokens in the layout diagram: past the window, so the ring buffer is full


def kv_layout_figure(path: Path, plt, tr):
    """What one layer of each small model holds after LAYOUT_T tokens, drawn to scale (elements per token × tokens).

    Heights and widths come from the lesson's configs (``STRUCTURES``): a band per K head and per V head, the MLA
    latent and RoPE key, the window layer's W slots, the SSM layer's constant state (drawn with the same area as
    its element count).
    """
    from matplotlib.patches import Rectangle

    T = LAYOUT_T
    k_col, v_col = plt.cm.Blues, plt.cm.Oranges
    fig, axes = plt.subplots(2, 3, figsize=(11, 6.2), sharex=True, sharey=True, layout="constrained")
    top = 0
    for ax, (name, cfg) in zip(axes.flat, STRUCTURES.items()):
        kind = next((k for k in ("mla", "ssm", "window") if k in cfg.layer_types), "full")
        bands = []  # (label, height in elements per token, colour)
        if kind in ("full", "window"):
            for h in range(cfg.n_kv_heads):
                bands.append((tr("K head {h}", h=h), cfg.head_dim, k_col(0.45 + 0.4 * h / max(cfg.n_kv_heads, 1))))
            for h in range(cfg.n_kv_heads):
                bands.append((tr("V head {h}", h=h), cfg.head_dim, v_col(0.45 + 0.4 * h / max(cfg.n_kv_heads, 1))))
            held = laws.window_tokens(T, cfg.window) if kind == "window" else T
        elif kind == "mla":
            bands = [(tr("latent c_kv (serves K and V)"), cfg.kv_lora_rank, "#9467bd"),
                     (tr("RoPE key (shared by all heads)"), cfg.qk_rope_head_dim, "#2ca02c")]
            held = T
        y = 0
        if kind == "ssm":
            conv = laws.mamba1_conv_state_elements(cfg.d_inner, cfg.d_conv)
            ssm = cfg.d_inner * cfg.d_state
            # Drawn as rectangles of the same area as their element counts, d_inner tall.
            for label, elements, colour in ((tr("SSM state h: d_inner × d_state"), ssm, "#17becf"),
                                            (tr("conv state: (d_conv − 1) × d_inner"), conv, "#bcbd22")):
                ax.add_patch(Rectangle((0, y), elements / cfg.d_inner, cfg.d_inner, fc=colour, ec="black", lw=0.5))
                ax.text(elements / cfg.d_inner + 4, y + cfg.d_inner / 2, tr("{label}:\n{n} elements (any T)", label=label, n=f"{elements:,}"),
                        va="center", fontsize=8)
                y += cfg.d_inner
            title = tr("{name}: SSM layer, constant state", name=name)
            total = conv + ssm
        else:
            for label, height, colour in bands:
                ax.add_patch(Rectangle((0, y), held, height, fc=colour, ec="white", lw=0.6))
                if len(bands) <= 4:
                    ax.text(held / 2, y + height / 2, label, ha="center", va="center", fontsize=8)
                y += height
            if kind == "full" and cfg.n_kv_heads > 2:
                ax.text(held / 2, y * 0.25, tr("K: one band per K/V head"), ha="center", fontsize=8, color="white")
                ax.text(held / 2, y * 0.75, tr("V: one band per K/V head"), ha="center", fontsize=8)
            if kind == "window":
                ax.add_patch(Rectangle((0, 0), T, y, fill=False, ls="--", ec="#555555"))
                ax.text(held + 4, y / 2, tr("not kept:\nonly the last\nW = {w} tokens", w=cfg.window), fontsize=8,
                        va="center")
                title = tr("{name}: window layer, W slots", name=name)
            else:
                title = (tr("{name}: a latent per token, no K, no V", name=name) if kind == "mla"
                         else tr("{name}: K and V per head", name=name))
            total = held * y
        ax.set_title(tr("{title}\n{n} elements held", title=title, n=f"{total:,}"), fontsize=9)
        top = max(top, y)
        ax.grid(alpha=0.2)
    for ax in axes.flat:
        ax.set_xlim(0, T * 1.02)
        ax.set_ylim(0, top * 1.05)
    for ax in axes[1]:
        ax.set_xlabel(tr("tokens held (after T = {T} tokens)", T=T))
    for ax in axes[:, 0]:
        ax.set_ylabel(tr("elements per token"))
    fig.suptitle(tr("What one layer caches, to scale (the lesson's small models; K in blue, V in orange)"), fontsize=10)
    fig.savefig(path, dpi=100)
    plt.close(fig)


RING_W, RING_STEPS = 8, 14  # a small ring, drawn step by step


def ring_buffer_figure(path: Path, plt, tr):
    """The slots of the lesson's own WindowKV (W = RING_W) after each decode step: which token each slot holds."""
    import numpy as np

    cache = WindowKV(RING_W)
    grid = np.full((RING_STEPS, RING_W), -1)
    for p in range(RING_STEPS):
        token = torch.full((1, 1, 1, 1), float(p))  # a "key" whose value is its own position
        cache.append(token, token)
        held = cache.k[0, 0, :, 0].long().tolist()
        grid[p, : len(held)] = held
    fig, ax = plt.subplots(figsize=(7.5, 5.4), layout="constrained")
    ax.imshow(np.where(grid < 0, np.nan, grid), cmap="Greys", vmin=-RING_STEPS, vmax=RING_STEPS * 1.6,
              aspect="auto")
    for p in range(RING_STEPS):
        for slot in range(RING_W):
            t = grid[p, slot]
            if t < 0:
                ax.text(slot, p, tr("empty"), ha="center", va="center", fontsize=7, color="#999999")
                continue
            newest = t == p
            ax.text(slot, p, f"{t}", ha="center", va="center", fontsize=10,
                    color="#cc0000" if newest else "black", weight="bold" if newest else "normal")
    ax.set_xticks(range(RING_W), [tr("slot {i}", i=i) for i in range(RING_W)], fontsize=8)
    ax.set_yticks(range(RING_STEPS), [tr("after token {p}", p=p) for p in range(RING_STEPS)], fontsize=8)
    ax.set_title(tr("WindowKV with W = {w}: token p is written to slot p mod W (red: the newest);\n"
                    "from token {w} on, each new token overwrites the oldest, and the memory stops growing", w=RING_W),
                 fontsize=9)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _checks(out: Path):
    """Answers of the page's self-check questions, computed with the laws (the question gives the inputs)."""
    per_tok = laws.kv_bytes_per_token(40, 8, 128, 2)
    total = laws.kv_bytes(131_072, 40, 8, 128, 2)
    i18n.write_text(out, "check_nemo.md", lambda tr: tr(
        "\\(2 \\times 40 \\times 8 \\times 128 \\times 2\\) = **{per_tok} bytes per token** ({kib} KiB); at "
        "131,072 tokens, **{total} bytes = {gib} GiB** for one conversation.", per_tok=f"{per_tok:,}",
        kib=f"{per_tok / 1024:,.0f}", total=f"{total:,}", gib=f"{total / 2**30:,.0f}") + "\n")
    W, seen = 128, 1000
    held = laws.window_tokens(seen, W)
    newest, nxt = seen - 1, seen
    i18n.write_text(out, "check_ring.md", lambda tr: tr(
        "It holds \\(\\min(T, W)\\) = **{held}** tokens, numbers {first} to {newest}. Token {newest} is in slot "
        "{newest} mod {W} = **{slot}**; token {nxt} goes to slot {nxt} mod {W} = {nxt_slot}, where it overwrites token "
        "**{overwritten}**, the oldest one held.", held=held, first=seen - held, newest=newest, W=W,
        slot=newest % W, nxt=nxt, nxt_slot=nxt % W, overwritten=nxt - W) + "\n")


def build(out):
    i18n.use_figure_fonts()  # the Korean figures' labels need the CJK font
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: extra threads only spin
    try:
        _structures(out)
        _measured_table(out)
        _sample(out)
    finally:
        torch.set_num_threads(before)
    for lang, tr in i18n.each_language():
        _latency(out, plt, tr, lang)
        kv_layout_figure(out / i18n.localized("kv_layout.png", lang), plt, tr)
        ring_buffer_figure(out / i18n.localized("ring_buffer.png", lang), plt, tr)
    _checks(out)
    from part0_foundations.l03_kv_cache import notebook

    i18n.write_text(out, "exercise.md", lambda tr: exercise_block(notebook, lang=tr.lang))
