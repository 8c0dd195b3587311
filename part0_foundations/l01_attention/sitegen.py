"""Figures and tables for site/part0/01_attention.md, produced by the lesson's own code."""
import math

import torch

from course.exercises import exercise_block

from part0_foundations.l01_attention.attention import MultiHeadAttention, scaled_dot_product_attention

NAME = "l01"


def _positions(n, d):
    """Sinusoidal position vectors (n, d): similar for nearby positions, so attention prefers neighbours."""
    pos = torch.arange(n, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(-math.log(100.0) * torch.arange(0, d, 2, dtype=torch.float32) / d)
    x = torch.zeros(n, d)
    x[:, 0::2], x[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    return x


def build(out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tokens = "the cache grows with every token".split()
    n = len(tokens)
    x = _positions(n, 16) * 3.0
    _, w_full = scaled_dot_product_attention(x, x, x, return_weights=True)
    _, w_causal = scaled_dot_product_attention(x, x, x, causal=True, return_weights=True)
    # Constrained layout and one shared row of query labels: the two panels' labels cannot collide.
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6), sharey=True, layout="constrained")
    for ax, w, title in ((axes[0], w_full, "bidirectional (encoder)"), (axes[1], w_causal, "causal (decoder)")):
        im = ax.imshow(w.numpy(), cmap="viridis", vmin=0, vmax=1)
        for i in range(n):
            for j in range(n):
                v = float(w[i, j])
                ax.text(j, i, "0" if v == 0 else f"{v:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if v < 0.5 else "black")
        ax.set_xticks(range(n), tokens, rotation=45, ha="right")
        ax.set_xlabel("key (a token looked at)")
        ax.set_title(title)
    axes[0].set_yticks(range(n), tokens)
    axes[0].set_ylabel("query (the token looking)")
    fig.colorbar(im, ax=axes, shrink=0.85, label="attention weight")
    fig.savefig(out / "attention_heatmap.png", dpi=110)
    plt.close(fig)

    # K/V projection widths for one 4096-wide layer with 32 query heads, read off real modules.
    rows = ["| structure | n_heads | n_kv_heads | K+V features per token per layer | vs MHA |", "|---|---|---|---|---|"]
    base, widths = None, {}
    for label, hkv in (("MHA", 32), ("GQA", 8), ("MQA", 1)):
        m = MultiHeadAttention(4096, 32, n_kv_heads=hkv, head_dim=128)
        width = m.k_proj.out_features + m.v_proj.out_features
        base = base or width
        widths[label] = width
        rows.append(f"| {label} | 32 | {hkv} | {width:,} | {width / base:.3f}× |")
    (out / "kv_widths.md").write_text("\n".join(rows) + "\n")
    (out / "check_kv_widths.md").write_text(
        f"Each layer caches \\(2 \\times n_{{kv}} \\times d_{{head}}\\) features per token, read off the "
        f"projections: MHA (32 K/V heads) {widths['MHA']:,}; GQA (8) **{widths['GQA']:,}**, "
        f"{widths['GQA'] / widths['MHA']:.3f}× of MHA; MQA (1) **{widths['MQA']:,}**, "
        f"{widths['MQA'] / widths['MHA']:.4f}×. The number of query heads does not appear.\n")
    from part0_foundations.l01_attention import notebook

    (out / "exercise.md").write_text(exercise_block(notebook))
