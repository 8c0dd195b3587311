"""Figures and tables for site/part0/01_attention.md, produced by the lesson's own code."""
import math

import torch

from course.shared import tables
from course.shared import i18n
from course.site.exercises import exercise_block

from part0_foundations.l01_attention.attention import MultiHeadAttention, scaled_dot_product_attention

NAME = "l01"


def _positions(n, d):
    """Sinusoidal position vectors (n, d): similar for nearby positions, so attention prefers neighbours."""
    pos = torch.arange(n, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(-math.log(100.0) * torch.arange(0, d, 2, dtype=torch.float32) / d)
    x = torch.zeros(n, d)
    x[:, 0::2], x[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    return x


def _heatmap(tokens, w_full, w_causal, tr, path):
    import matplotlib.pyplot as plt

    n = len(tokens)
    # Constrained layout and one shared row of query labels: the two panels' labels cannot collide.
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6), sharey=True, layout="constrained")
    for ax, w, title in ((axes[0], w_full, tr("bidirectional (encoder)")), (axes[1], w_causal, tr("causal (decoder)"))):
        im = ax.imshow(w.numpy(), cmap="viridis", vmin=0, vmax=1)
        for i in range(n):
            for j in range(n):
                v = float(w[i, j])
                ax.text(j, i, "0" if v == 0 else f"{v:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if v < 0.5 else "black")
        ax.set_xticks(range(n), tokens, rotation=45, ha="right")
        ax.set_xlabel(tr("key (a token looked at)"))
        ax.set_title(title)
    axes[0].set_yticks(range(n), tokens)
    axes[0].set_ylabel(tr("query (the token looking)"))
    fig.colorbar(im, ax=axes, shrink=0.85, label=tr("attention weight"))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def build(out):
    i18n.use_figure_fonts()  # the Korean figures' labels need the CJK font
    import matplotlib

    matplotlib.use("Agg")
    tokens = "the cache grows with every token".split()
    x = _positions(len(tokens), 16) * 3.0
    _, w_full = scaled_dot_product_attention(x, x, x, return_weights=True)
    _, w_causal = scaled_dot_product_attention(x, x, x, causal=True, return_weights=True)
    for lang, tr in i18n.each_language():
        _heatmap(tokens, w_full, w_causal, tr, out / i18n.localized("attention_heatmap.png", lang))

    # K/V projection widths for one 4096-wide layer with 32 query heads, read off real modules.
    widths = {}
    for label, hkv in (("MHA", 32), ("GQA", 8), ("MQA", 1)):
        m = MultiHeadAttention(4096, 32, n_kv_heads=hkv, head_dim=128)
        widths[label] = (hkv, m.k_proj.out_features + m.v_proj.out_features)
    base = widths["MHA"][1]

    def table(tr):
        rows = tables.head(tr("| structure | n_heads | n_kv_heads | K+V features per token per layer | vs MHA |"))
        rows += [tables.row(label, '32', hkv, f"{width:,}", f"{width / base:.3f}×") for label, (hkv, width) in widths.items()]
        return "\n".join(rows) + "\n"

    i18n.write_text(out, "kv_widths.md", table)
    i18n.write_text(out, "check_kv_widths.md", lambda tr: tr(
        "Each layer caches \\(2 \\times n_{{kv}} \\times d_{{head}}\\) features per token, read off the "
        "projections: MHA (32 K/V heads) {mha}; GQA (8) **{gqa}**, {gqa_ratio}× of MHA; MQA (1) **{mqa}**, "
        "{mqa_ratio}×. The number of query heads does not appear.",
        mha=f"{widths['MHA'][1]:,}", gqa=f"{widths['GQA'][1]:,}", gqa_ratio=f"{widths['GQA'][1] / base:.3f}",
        mqa=f"{widths['MQA'][1]:,}", mqa_ratio=f"{widths['MQA'][1] / base:.4f}") + "\n")
    from part0_foundations.l01_attention import notebook

    i18n.write_text(out, "exercise.md", lambda tr: exercise_block(notebook, lang=tr.lang))
