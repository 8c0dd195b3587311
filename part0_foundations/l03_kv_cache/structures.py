"""The small working model of each attention structure, and which law of ``laws.py`` predicts its cache.

``law_bytes(config, T, bytes_per_element)`` maps a ``GPTConfig`` onto the arguments of the law for its structure;
the tests, the notebook and the site compare it with ``ModelCache.nbytes()`` of the real model.
"""
from __future__ import annotations

from part0_foundations.l03_kv_cache import laws
from part0_foundations.l03_kv_cache.gpt import GPTConfig

# Tiny widths: these models are for measuring caches, not for writing text (they are not trained).
_BASE = dict(vocab_size=64, n_layer=4, d_model=64, n_head=4, head_dim=16, d_ff=128)

STRUCTURES = {
    laws.STRUCTURES["mha"]: GPTConfig(**_BASE, n_kv_heads=4),
    laws.STRUCTURES["gqa"]: GPTConfig(**_BASE, n_kv_heads=2),
    laws.STRUCTURES["mqa"]: GPTConfig(**_BASE, n_kv_heads=1),
    laws.STRUCTURES["mla"]: GPTConfig(**_BASE, n_kv_heads=4, layer_types=("mla",) * 4,
                                      kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16),
    # Three window layers to one full layer, like Gemma-3's 5:1 pattern in miniature; W between the T values.
    laws.STRUCTURES["sliding_window"]: GPTConfig(**_BASE, n_kv_heads=2,
                                                 layer_types=("window", "window", "window", "full"), window=128),
    # Three SSM layers to one attention layer, like the Jamba/Nemotron-H hybrids in miniature.
    laws.STRUCTURES["ssm_hybrid"]: GPTConfig(**_BASE, n_kv_heads=2, layer_types=("ssm", "ssm", "full", "ssm"),
                                             d_inner=128, d_state=8, d_conv=4),
}
"""label (``laws.STRUCTURES``) → config of the small model for that structure."""


def structure_of(config: GPTConfig) -> str:
    """The structure id (a key of ``laws.STRUCTURES``) whose law this model's cache follows."""
    kinds = set(config.layer_types)
    if kinds == {"full"}:
        if config.n_kv_heads == config.n_head:
            return "mha"
        return "mqa" if config.n_kv_heads == 1 else "gqa"
    if kinds == {"mla"}:
        return "mla"
    if kinds <= {"window", "full"}:
        return "sliding_window"
    if kinds <= {"ssm", "full"}:
        return "ssm_hybrid"
    raise ValueError(f"layer_types: no single law for the mix {sorted(kinds)}; mix 'full' with one other kind")


def law_bytes(config: GPTConfig, T, bytes_per_element):
    """Cache bytes of one sequence of ``T`` tokens predicted by ``laws.py`` for this model."""
    c, kinds = config, config.layer_types
    s = structure_of(c)
    if s in ("mha", "gqa", "mqa"):
        return laws.kv_bytes(T, c.n_layer, c.n_kv_heads, c.head_dim, bytes_per_element)
    if s == "mla":
        return laws.mla_bytes(T, c.n_layer, c.kv_lora_rank, c.qk_rope_head_dim, bytes_per_element)
    if s == "sliding_window":
        return laws.sliding_window_bytes(T, kinds.count("full"), kinds.count("window"), c.window,
                                         c.n_kv_heads, c.head_dim, bytes_per_element)
    state = laws.mamba1_state_elements(c.d_inner, c.d_state, c.d_conv)
    return laws.ssm_hybrid_bytes(T, kinds.count("full"), c.n_kv_heads, c.head_dim, bytes_per_element,
                                 kinds.count("ssm"), state, bytes_per_element)


def law_growth_per_token(config: GPTConfig, bytes_per_element, beyond_window=True):
    """Bytes added per extra token (the slope): for a window model past W, only the full layers still grow."""
    c, kinds = config, config.layer_types
    s = structure_of(c)
    if s in ("mha", "gqa", "mqa"):
        return laws.kv_bytes_per_token(c.n_layer, c.n_kv_heads, c.head_dim, bytes_per_element)
    if s == "mla":
        return laws.mla_bytes_per_token(c.n_layer, c.kv_lora_rank, c.qk_rope_head_dim, bytes_per_element)
    if s == "sliding_window":
        if beyond_window:
            return laws.sliding_window_growth_bytes_per_token(kinds.count("full"), c.n_kv_heads, c.head_dim,
                                                              bytes_per_element)
        return laws.kv_bytes_per_token(c.n_layer, c.n_kv_heads, c.head_dim, bytes_per_element)
    return laws.kv_bytes_per_token(kinds.count("full"), c.n_kv_heads, c.head_dim, bytes_per_element)
