"""The KV-cache size laws, one per attention structure: pure functions, importable without torch.

Lesson 03 derives each law and measures a working model's cache against it to the byte; the Part 1 calculator
imports exactly these functions (they exist once). All results are in **bytes**. ``bytes_per_element`` may be
fractional for block-quantized caches (llama.cpp's q8_0 stores 32 values in 34 bytes: 34/32 = 1.0625).
``T`` (tokens in context) may be an int or a numpy array (the calculator's sweep is vectorized).

Per sequence:

- MHA / GQA / MQA: ``2 × L × n_kv_heads × head_dim × bytes`` per token (K and V: the factor 2).
- MLA (DeepSeek): ``L × (kv_lora_rank + qk_rope_head_dim) × bytes`` per token, no factor 2: the latent is shared
  by K and V and rebuilt into both at attention time; the decoupled RoPE key is cached beside it.
- Sliding-window hybrid: window layers hold ``min(T, W)`` tokens, full layers hold ``T``.
- K/V widths per layer type (Gemma 4, MiMo-V2-Flash): each kind of layer caches its own K/V heads, each head a key
  ``head_dim`` wide and a value ``v_head_dim`` wide: ``n_kv_heads × (head_dim + v_head_dim) × bytes`` per layer and
  token, the factor 2 of MHA/GQA when the two widths are equal.
- Chunked attention (Llama 4): a local layer attends only within its chunk of ``C`` tokens, so it holds the
  ``((T − 1) mod C) + 1`` tokens of the current chunk and must have room for ``min(T, C)``; global layers hold ``T``.
- MLA with a sparse-attention indexer (DeepSeek-V3.2): the indexer caches one more key per token per layer,
  ``index_head_dim`` wide, beside the latent; GQA with one (MiniMax-M3's block-sparse layers) caches it beside K/V.
- SSM hybrid: attention layers grow with ``T``; each state-space layer holds a constant state (a gated short
  convolution's, LFM2's, is its convolution window alone).
"""
from __future__ import annotations

# The cache structures, one id each, used everywhere (lesson 03, the calculator, its CLI and JSON), with the label
# pages and tables show. Layer kinds inside a model ("full", "window", "mla", "ssm") are a different thing: a
# structure is the law the whole model's cache follows.
STRUCTURES = {
    "mha": "MHA", "gqa": "GQA", "mqa": "MQA", "mla": "MLA",
    "sliding_window": "sliding window", "ssm_hybrid": "SSM hybrid",
}


def _min(t, w):
    """min(T, W) for a number or an array T (numpy's, through the array API's ``__array_namespace__``: this module
    imports no numpy, so the calculator page's Python runs it without one)."""
    namespace = getattr(t, "__array_namespace__", None)
    return namespace().minimum(t, w) if namespace is not None else min(t, w)


# --- MHA / GQA / MQA ------------------------------------------------------------------------------------------
def kv_bytes_per_token(n_layers, n_kv_heads, head_dim, bytes_per_element, v_head_dim=None):
    """Bytes of K and V cached per token: ``2 × n_layers × n_kv_heads × head_dim × bytes_per_element``; with a value
    head of another width (``v_head_dim``: MiMo-V2-Flash's 128 beside keys of 192)
    ``n_layers × n_kv_heads × (head_dim + v_head_dim) × bytes_per_element``."""
    v = head_dim if v_head_dim is None else v_head_dim
    return n_layers * n_kv_heads * (head_dim + v) * bytes_per_element


def kv_bytes(T, n_layers, n_kv_heads, head_dim, bytes_per_element, v_head_dim=None):
    """Bytes of K and V cached for ``T`` tokens of one sequence (MHA/GQA/MQA)."""
    return T * kv_bytes_per_token(n_layers, n_kv_heads, head_dim, bytes_per_element, v_head_dim)


# --- MLA --------------------------------------------------------------------------------------------------------
def mla_bytes_per_token(n_layers, kv_lora_rank, qk_rope_head_dim, bytes_per_element, index_head_dim=0):
    """Bytes of the MLA latent cache per token: ``n_layers × (kv_lora_rank + qk_rope_head_dim) × bytes``; with a
    sparse-attention indexer (DeepSeek-V3.2) its key adds ``index_head_dim`` per layer."""
    return (n_layers * (kv_lora_rank + qk_rope_head_dim) * bytes_per_element
            + index_key_bytes_per_token(n_layers, index_head_dim, bytes_per_element))


def index_key_bytes_per_token(n_layers, index_head_dim, bytes_per_element):
    """A sparse-attention indexer's key, one head ``index_head_dim`` wide, cached per token in each of ``n_layers``
    layers beside their attention cache: ``n_layers × index_head_dim × bytes`` (no value: the indexer only scores)."""
    return n_layers * index_head_dim * bytes_per_element


def mla_bytes(T, n_layers, kv_lora_rank, qk_rope_head_dim, bytes_per_element, index_head_dim=0):
    """Bytes of the MLA latent cache (and indexer keys) for ``T`` tokens of one sequence."""
    return T * mla_bytes_per_token(n_layers, kv_lora_rank, qk_rope_head_dim, bytes_per_element, index_head_dim)


# --- sliding-window hybrids -------------------------------------------------------------------------------------
def window_tokens(T, window):
    """Tokens a sliding-window layer holds after ``T`` tokens: ``min(T, W)`` (a ring buffer of W slots)."""
    return _min(T, window)


def sliding_window_bytes(T, n_full_layers, n_window_layers, window, n_kv_heads, head_dim, bytes_per_element,
                         v_head_dim=None, window_kv_heads=None, window_head_dim=None, window_v_head_dim=None):
    """Bytes cached for ``T`` tokens when ``n_window_layers`` keep only the last ``window`` tokens.

    ``2 × n_kv_heads × head_dim × bytes × (n_full_layers × T + n_window_layers × min(T, W))``. When the window
    layers have K/V heads and widths of their own (``window_kv_heads``, ``window_head_dim``, ``window_v_head_dim``;
    the full layers' when None), each kind of layer is counted at its own: full layers
    ``n_kv_heads × (head_dim + v_head_dim) × T``, window layers ``window_kv_heads × (window_head_dim +
    window_v_head_dim) × min(T, W)``, times the bytes.
    """
    wkv = n_kv_heads if window_kv_heads is None else window_kv_heads
    wk = head_dim if window_head_dim is None else window_head_dim
    if window_v_head_dim is not None:
        wv = window_v_head_dim
    elif window_head_dim is not None:
        wv = window_head_dim                     # a window width of its own, for keys and values alike
    else:
        wv = v_head_dim                          # the full layers' (None: their head_dim)
    return (kv_bytes_per_token(n_full_layers, n_kv_heads, head_dim, bytes_per_element, v_head_dim) * T
            + kv_bytes_per_token(n_window_layers, wkv, wk, bytes_per_element, wv) * window_tokens(T, window))


def sliding_window_growth_bytes_per_token(n_full_layers, n_kv_heads, head_dim, bytes_per_element, v_head_dim=None):
    """Slope once ``T > W``: only the full layers still grow."""
    return kv_bytes_per_token(n_full_layers, n_kv_heads, head_dim, bytes_per_element, v_head_dim)


# --- chunked attention ------------------------------------------------------------------------------------------
def chunk_tokens(T, chunk):
    """Tokens a chunked-attention layer holds after ``T`` tokens: those of the current chunk,
    ``((T − 1) mod C) + 1`` (Llama 4: a token attends only to the tokens of its own chunk of ``C``)."""
    return (T - 1) % chunk + 1


def chunk_room_tokens(T, chunk):
    """Tokens a chunked layer must have room for over a sequence that reaches ``T`` tokens: ``min(T, C)`` (a
    chunk fills completely before the next one starts)."""
    return _min(T, chunk)


def chunked_attention_bytes(T, n_full_layers, n_chunked_layers, chunk, n_kv_heads, head_dim, bytes_per_element):
    """Bytes reserved for one sequence of ``T`` tokens when ``n_chunked_layers`` attend within chunks of ``chunk``:
    ``2 × n_kv_heads × head_dim × bytes × (n_full_layers × T + n_chunked_layers × min(T, C))`` — the same room as a
    window of ``C`` (what an engine allocates), though after ``T`` tokens a chunked layer holds
    ``chunk_tokens(T, C)``, fewer than a window's ``min(T, W)``."""
    per_layer_token = kv_bytes_per_token(1, n_kv_heads, head_dim, bytes_per_element)
    return per_layer_token * (n_full_layers * T + n_chunked_layers * chunk_room_tokens(T, chunk))


# --- state-space (SSM / linear-attention) hybrids ---------------------------------------------------------------
def ssm_state_bytes(n_ssm_layers, state_elements_per_layer, bytes_per_element):
    """Constant recurrent state of one sequence: ``n_ssm_layers × state_elements × bytes`` (independent of T)."""
    return n_ssm_layers * state_elements_per_layer * bytes_per_element


def ssm_hybrid_bytes(T, n_full_layers, n_kv_heads, head_dim, kv_bytes_per_element,
                     n_ssm_layers, state_elements_per_layer, state_bytes_per_element):
    """Attention layers grow with ``T``; state-space layers add a constant state."""
    return (kv_bytes(T, n_full_layers, n_kv_heads, head_dim, kv_bytes_per_element)
            + ssm_state_bytes(n_ssm_layers, state_elements_per_layer, state_bytes_per_element))


def conv_state_elements(d_conv, conv_dim):
    """A causal convolution's state in elements: the last ``d_conv − 1`` inputs of its ``conv_dim`` channels."""
    return (d_conv - 1) * conv_dim


def mamba1_conv_state_elements(d_inner, d_conv):
    """Mamba-1 convolution state: ``(d_conv − 1) × d_inner``."""
    return conv_state_elements(d_conv, d_inner)


def mamba1_state_elements(d_inner, d_state, d_conv):
    """Mamba-1 layer state in elements: conv ``(d_conv − 1) × d_inner`` + SSM ``d_inner × d_state``."""
    return mamba1_conv_state_elements(d_inner, d_conv) + d_inner * d_state


def mamba2_state_elements(n_heads, head_dim, d_state, d_conv, n_groups):
    """Mamba-2 layer state in elements: conv ``(d_conv − 1) × (d_inner + 2 × n_groups × d_state)`` with
    ``d_inner = n_heads × head_dim``, plus SSM ``n_heads × head_dim × d_state``."""
    return mamba2_conv_state_elements(n_heads, head_dim, d_state, d_conv, n_groups) + n_heads * head_dim * d_state


def mamba2_conv_state_elements(n_heads, head_dim, d_state, d_conv, n_groups):
    """Mamba-2 convolution state: ``(d_conv − 1) × (n_heads × head_dim + 2 × n_groups × d_state)`` (x, B and C
    pass through the convolution)."""
    return conv_state_elements(d_conv, n_heads * head_dim + 2 * n_groups * d_state)


def gated_deltanet_state_elements(n_k_heads, n_v_heads, k_head_dim, v_head_dim, d_conv):
    """Gated DeltaNet layer state in elements: conv ``(d_conv − 1) × (2 × key_dim + value_dim)`` plus the
    recurrent ``n_v_heads × d_k × d_v`` matrix (``key_dim = n_k_heads × d_k``, ``value_dim = n_v_heads × d_v``)."""
    return (gated_deltanet_conv_state_elements(n_k_heads, n_v_heads, k_head_dim, v_head_dim, d_conv)
            + n_v_heads * k_head_dim * v_head_dim)


def gated_deltanet_conv_state_elements(n_k_heads, n_v_heads, k_head_dim, v_head_dim, d_conv):
    """Gated DeltaNet convolution state: ``(d_conv − 1) × (2 × n_k_heads × d_k + n_v_heads × d_v)`` (q, k, v)."""
    return conv_state_elements(d_conv, 2 * n_k_heads * k_head_dim + n_v_heads * v_head_dim)


def kda_state_elements(n_heads, head_dim, d_conv):
    """Kimi Delta Attention (Kimi Linear) layer state in elements: conv ``(d_conv − 1) × 3 × n_heads × head_dim``
    (q, k and v each pass a short convolution) plus the recurrent ``n_heads × head_dim × head_dim`` matrix."""
    return kda_conv_state_elements(n_heads, head_dim, d_conv) + n_heads * head_dim * head_dim


def kda_conv_state_elements(n_heads, head_dim, d_conv):
    """Kimi Delta Attention convolution state: ``(d_conv − 1) × 3 × n_heads × head_dim``."""
    return conv_state_elements(d_conv, 3 * n_heads * head_dim)


def short_conv_state_elements(channels, d_conv):
    """A gated short convolution's layer state (LFM2) in elements: the last ``d_conv − 1`` inputs of its
    ``channels`` (the hidden size), ``(d_conv − 1) × channels``, and no recurrent matrix beside it."""
    return conv_state_elements(d_conv, channels)


def lightning_state_elements(n_heads, head_dim):
    """Lightning attention (MiniMax) layer state in elements: per head the ``head_dim × head_dim`` matrix
    ``Σ kᵀv`` of linear attention (no convolution)."""
    return n_heads * head_dim * head_dim
