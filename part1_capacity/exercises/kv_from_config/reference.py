"""Reference solution: KV-cache bytes one token adds, read from a ``config.json`` dict. Units: bytes.

The law is lesson 03's (``part0_foundations/l03_kv_cache/laws.py``); what the exercise practises is reading the
fields: the names differ between families, and a field a file leaves out takes its default.
"""
from __future__ import annotations


def kv_bytes_per_token(config: dict, bytes_per_element: float) -> float:
    """Bytes of KV cache one more token adds to one sequence, every layer attending to the whole context.

    Full attention (MHA, GQA, MQA): ``2 × layers × kv_heads × head_dim × bytes`` (a key and a value per K/V head).
    MLA (DeepSeek-V2/V3, a ``kv_lora_rank`` in the file): ``layers × (kv_lora_rank + qk_rope_head_dim) × bytes``,
    the latent and the shared RoPE key, no factor 2."""
    ### BEGIN SOLUTION
    layers = config.get("num_hidden_layers", config.get("n_layer"))
    if config.get("kv_lora_rank"):
        per_token = layers * (config["kv_lora_rank"] + config["qk_rope_head_dim"]) * bytes_per_element
    else:
        heads = config.get("num_attention_heads", config.get("n_head"))
        kv_heads = config.get("num_key_value_heads") or heads  # absent: one K/V head per query head (MHA)
        hidden = config.get("hidden_size", config.get("n_embd"))
        head_dim = config.get("head_dim") or hidden // heads  # a file may set head_dim apart from hidden / heads
        per_token = 2 * layers * kv_heads * head_dim * bytes_per_element
    ### END SOLUTION
    return per_token
