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

from course import records
from course.exercises import exercise_block
from part0_foundations.l03_kv_cache import laws
from part0_foundations.l03_kv_cache.bench import RESULTS
from part0_foundations.l03_kv_cache.gpt import GPT, WindowKV
from part0_foundations.l03_kv_cache.structures import STRUCTURES, law_bytes, law_growth_per_token
from course.units import GIB as GiB

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
    rows = ["| field | " + " | ".join(STRUCTURES) + " |", "|---|" + "---:|" * len(STRUCTURES)]
    for k in keys:
        cells = [str(getattr(cfg, k)) if k not in uses or set(uses[k]) & set(cfg.layer_types) else "–"
                 for cfg in STRUCTURES.values()]
        rows.append(f"| `{k}` | " + " | ".join(cells) + " |")
    (out / "structures.md").write_text("\n".join(rows) + "\n")


def _measured_table(out: Path):
    lines = []
    for dtype, label, bpe in ((torch.float32, "fp32", 4), (torch.bfloat16, "bf16", 2)):
        lines += [f"**{label}** ({bpe} bytes per element): bytes the cache holds after a prefill of T tokens, "
                  f"measured (sum of `element_size() × numel()`) — ✓ when equal to the law, to the byte.", "",
                  "| structure | layers | law per token (growing) | " + " | ".join(f"T = {t:,}" for t in T_VALUES) + " |",
                  "|---|---|---|" + "---|" * len(T_VALUES)]
        for name, cfg in STRUCTURES.items():
            torch.manual_seed(0)
            model = GPT(cfg).to(dtype).eval()
            cells = []
            for T in T_VALUES:
                cache = model.new_cache()
                with torch.no_grad():
                    model(torch.randint(0, cfg.vocab_size, (1, T)), cache)
                got, want = cache.nbytes(), law_bytes(cfg, T, bpe)
                cells.append(f"{got:,} ✓" if got == want else f"{got:,} ✗ (law {want:,})")
            layers = " · ".join(cfg.layer_types)
            lines.append(f"| {name} | {layers} | {law_growth_per_token(cfg, bpe):,} B | " + " | ".join(cells) + " |")
        lines.append("")
    (out / "measured_vs_law.md").write_text("\n".join(lines))


def _latency(out: Path, plt):
    r = json.loads(RESULTS.read_text())
    import numpy as np

    fig, ax = plt.subplots(figsize=(8, 4))
    pos = np.array(r["positions"][1:])  # step 0 (with the prefill) is left out
    k = 15  # the machine was shared: raw steps are noisy, the running median shows the trend
    for key, label, color in (("uncached_ms", "without cache (whole sequence every step)", "C0"),
                              ("cached_ms", "with KV cache (one token per step)", "C1")):
        ms = np.array(r[key][1:])
        med = np.array([np.median(ms[max(0, i - k // 2):i + k // 2 + 1]) for i in range(len(ms))])
        ax.plot(pos, ms, lw=0.6, alpha=0.35, color=color)
        ax.plot(pos, med, lw=2, color=color, label=f"{label}, running median of {k}")
    ax.set_xlabel("position of the token being generated")
    ax.set_ylabel("latency of the step (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{r['new_tokens']} greedy tokens, lesson-03 GPT, {r['threads']} thread(s)")
    ax.legend()
    fig.savefig(out / "latency.png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    rec = records.read_record(r)     # the saved run may predate the shared record's keys
    host = rec["host"]
    (out / "bench_summary.md").write_text(
        f"Generating **{r['new_tokens']} tokens** after a {r['prompt_tokens']}-token prompt took "
        f"**{r['uncached_total_s']:.2f} s without the cache** and **{r['cached_total_s']:.2f} s with it**: a speed "
        f"ratio of **{r['speed_ratio']:.1f}×**, with the same tokens ({'yes' if r['same_tokens'] else 'NO'}) and "
        f"logits within {r['max_abs_logit_difference']:.1e}. Run of {rec['date_utc']} on `{host['node']}` "
        f"({host['cpu']}, torch {r['torch']}, {r['threads']} thread(s), load average "
        f"{round(rec['load_average_at_start'], 2)} before and {round(rec['load_average_at_end'], 2)} after: the "
        f"machine was shared, so absolute times are contended). Command: `{rec['command']}`.\n")


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
    (out / "sample.md").write_text(
        f"A continuation of “{prompt}” sampled at temperature {temperature} (seed 0) from the shipped model ({c.n_layer} layers, d_model {c.d_model}, "
        f"{c.n_head} heads of {c.head_dim}, {c.n_kv_heads} K/V heads, {c.vocab_size} characters; "
        f"{n_params:,} parameters, "
        f"{CHECKPOINT.stat().st_size / 1e6:.1f} MB checkpoint; {made['steps']} steps of "
        f"{made['batch_size']} × {made['seq_len']} characters on {made['corpus_chars']:,} characters of course text, "
        f"validation loss {made['val_loss']:.2f} nats per character):\n\n```text\n{text}\n```\n")


LAYOUT_T = 256  # tokens in the layout diagram: past the window, so the ring buffer is full


def kv_layout_figure(out: Path, plt):
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
                bands.append((f"K head {h}", cfg.head_dim, k_col(0.45 + 0.4 * h / max(cfg.n_kv_heads, 1))))
            for h in range(cfg.n_kv_heads):
                bands.append((f"V head {h}", cfg.head_dim, v_col(0.45 + 0.4 * h / max(cfg.n_kv_heads, 1))))
            held = laws.window_tokens(T, cfg.window) if kind == "window" else T
        elif kind == "mla":
            bands = [("latent c_kv (serves K and V)", cfg.kv_lora_rank, "#9467bd"),
                     ("RoPE key (shared by all heads)", cfg.qk_rope_head_dim, "#2ca02c")]
            held = T
        y = 0
        if kind == "ssm":
            conv = laws.mamba1_conv_state_elements(cfg.d_inner, cfg.d_conv)
            ssm = cfg.d_inner * cfg.d_state
            # Drawn as rectangles of the same area as their element counts, d_inner tall.
            for label, elements, colour in (("SSM state h: d_inner × d_state", ssm, "#17becf"),
                                            ("conv state: (d_conv − 1) × d_inner", conv, "#bcbd22")):
                ax.add_patch(Rectangle((0, y), elements / cfg.d_inner, cfg.d_inner, fc=colour, ec="black", lw=0.5))
                ax.text(elements / cfg.d_inner + 4, y + cfg.d_inner / 2, f"{label}:\n{elements:,} elements (any T)",
                        va="center", fontsize=8)
                y += cfg.d_inner
            title = f"{name}: SSM layer, constant state"
            total = conv + ssm
        else:
            for label, height, colour in bands:
                ax.add_patch(Rectangle((0, y), held, height, fc=colour, ec="white", lw=0.6))
                if len(bands) <= 4:
                    ax.text(held / 2, y + height / 2, label, ha="center", va="center", fontsize=8)
                y += height
            if kind == "full" and cfg.n_kv_heads > 2:
                ax.text(held / 2, y * 0.25, "K: one band per K/V head", ha="center", fontsize=8, color="white")
                ax.text(held / 2, y * 0.75, "V: one band per K/V head", ha="center", fontsize=8)
            if kind == "window":
                ax.add_patch(Rectangle((0, 0), T, y, fill=False, ls="--", ec="#555555"))
                ax.text(held + 4, y / 2, f"not kept:\nonly the last\nW = {cfg.window} tokens", fontsize=8,
                        va="center")
                title = f"{name}: window layer, W slots"
            else:
                title = {"mla": f"{name}: a latent per token, no K, no V", "full": f"{name}: K and V per head"}[kind]
            total = held * y
        ax.set_title(f"{title}\n{total:,} elements held", fontsize=9)
        top = max(top, y)
        ax.grid(alpha=0.2)
    for ax in axes.flat:
        ax.set_xlim(0, T * 1.02)
        ax.set_ylim(0, top * 1.05)
    for ax in axes[1]:
        ax.set_xlabel(f"tokens held (after T = {T} tokens)")
    for ax in axes[:, 0]:
        ax.set_ylabel("elements per token")
    fig.suptitle("What one layer caches, to scale (the lesson's small models; K in blue, V in orange)", fontsize=10)
    fig.savefig(out / "kv_layout.png", dpi=100)
    plt.close(fig)


RING_W, RING_STEPS = 8, 14  # a small ring, drawn step by step


def ring_buffer_figure(out: Path, plt):
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
                ax.text(slot, p, "empty", ha="center", va="center", fontsize=7, color="#999999")
                continue
            newest = t == p
            ax.text(slot, p, f"{t}", ha="center", va="center", fontsize=10,
                    color="#cc0000" if newest else "black", weight="bold" if newest else "normal")
    ax.set_xticks(range(RING_W), [f"slot {i}" for i in range(RING_W)], fontsize=8)
    ax.set_yticks(range(RING_STEPS), [f"after token {p}" for p in range(RING_STEPS)], fontsize=8)
    ax.set_title(f"WindowKV with W = {RING_W}: token p is written to slot p mod W (red: the newest);\n"
                 f"from token {RING_W} on, each new token overwrites the oldest, and the memory stops growing",
                 fontsize=9)
    fig.savefig(out / "ring_buffer.png", dpi=100)
    plt.close(fig)


def _checks(out: Path):
    """Answers of the page's self-check questions, computed with the laws (the question gives the inputs)."""
    per_tok = laws.kv_bytes_per_token(40, 8, 128, 2)
    total = laws.kv_bytes(131_072, 40, 8, 128, 2)
    (out / "check_nemo.md").write_text(
        f"\\(2 \\times 40 \\times 8 \\times 128 \\times 2\\) = **{per_tok:,} bytes per token** "
        f"({per_tok / 1024:,.0f} KiB); at 131,072 tokens, **{total:,} bytes = {total / 2**30:,.0f} GiB** for one "
        f"conversation.\n")
    W, seen = 128, 1000
    held = laws.window_tokens(seen, W)
    newest, nxt = seen - 1, seen
    (out / "check_ring.md").write_text(
        f"It holds \\(\\min(T, W)\\) = **{held}** tokens, numbers {seen - held} to {newest}. Token {newest} is in "
        f"slot {newest} mod {W} = **{newest % W}**; token {nxt} goes to slot {nxt} mod {W} = {nxt % W}, where it "
        f"overwrites token **{nxt - W}**, the oldest one held.\n")


def build(out):
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
    _latency(out, plt)
    kv_layout_figure(out, plt)
    ring_buffer_figure(out, plt)
    _checks(out)
    from part0_foundations.l03_kv_cache import notebook

    (out / "exercise.md").write_text(exercise_block(notebook))
