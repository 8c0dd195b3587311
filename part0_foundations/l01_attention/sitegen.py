"""Figures and tables for site/part0/01_attention.md, produced by the lesson's own code."""
import math

import torch

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
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    for ax, w, title in ((axes[0], w_full, "bidirectional"), (axes[1], w_causal, "causal (decoder)")):
        im = ax.imshow(w.numpy(), cmap="viridis", vmin=0, vmax=1)
        ax.set_xticks(range(n), tokens, rotation=45, ha="right")
        ax.set_yticks(range(n), tokens)
        ax.set_xlabel("key")
        ax.set_ylabel("query")
        ax.set_title(title)
    fig.colorbar(im, ax=axes, shrink=0.8, label="attention weight")
    fig.savefig(out / "attention_heatmap.png", dpi=110, bbox_inches="tight")
    plt.close(fig)

    # K/V projection widths for one 4096-wide layer with 32 query heads, read off real modules.
    rows = ["| structure | n_heads | n_kv_heads | K+V features per token per layer | vs MHA |", "|---|---|---|---|---|"]
    base = None
    for label, hkv in (("MHA", 32), ("GQA", 8), ("MQA", 1)):
        m = MultiHeadAttention(4096, 32, n_kv_heads=hkv, head_dim=128)
        width = m.k_proj.out_features + m.v_proj.out_features
        base = base or width
        rows.append(f"| {label} | 32 | {hkv} | {width:,} | {width / base:.3f}× |")
    (out / "kv_widths.md").write_text("\n".join(rows) + "\n")
