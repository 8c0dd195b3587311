"""Lesson 03 — a decoder-only GPT with a KV cache, readable top to bottom (in the spirit of nanoGPT).

One file holds the whole model: rotary positions, the layer caches, the four kinds of token mixer, the block, the
GPT and its generation loop. The training loop is ``train.py``; the cache-size laws are ``laws.py``.

Each layer of the model is one of four kinds (``GPTConfig.layer_types``):

- ``"full"``   causal self-attention with ``n_kv_heads`` K/V heads (MHA, GQA, MQA); its cache grows by one row a token;
- ``"window"`` the same attention restricted to the last ``window`` tokens; its cache is a ring buffer of W slots;
- ``"mla"``    multi-head latent attention (DeepSeek-V2/V3): the cache holds a compressed latent of width
  ``kv_lora_rank`` and one decoupled RoPE key of width ``qk_rope_head_dim`` per token; K and V are rebuilt from the
  latent at attention time;
- ``"ssm"``    a selective state-space layer (Mamba-1 style, sequential scan): its cache is a constant state.

``generate(idx, n, use_cache=True)`` runs a prefill (the whole prompt in one forward pass, filling the cache) and
then one forward pass per new token over that token alone; ``use_cache=False`` recomputes the whole sequence each
step. Both give the same tokens (greedy) and the same logits. ``ModelCache.nbytes()`` is what the cache really
holds: the sum of ``element_size() * numel()`` of every tensor in it, in bytes.

Shapes: ``B`` batch, ``t`` new tokens in this call, ``T`` tokens in the cache, ``H`` query heads.
The regions between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` are what learners write in the notebook.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from part0_foundations.l01_attention.attention import scaled_dot_product_attention

LAYER_TYPES = ("full", "window", "mla", "ssm")


@dataclass
class GPTConfig:
    vocab_size: int = 96
    n_layer: int = 4
    d_model: int = 128
    n_head: int = 4
    n_kv_heads: int = 4          # == n_head: MHA; 1 < n_kv_heads < n_head: GQA; 1: MQA
    head_dim: int = 32
    d_ff: int = 512
    layer_types: tuple = ()      # one entry of LAYER_TYPES per layer; empty = all "full"
    window: int = 128            # tokens a "window" layer keeps
    kv_lora_rank: int = 32       # MLA latent width
    qk_nope_head_dim: int = 16   # MLA: per-head query/key width without position
    qk_rope_head_dim: int = 8    # MLA: width of the decoupled RoPE key (one, shared by all heads)
    v_head_dim: int = 16         # MLA: per-head value width
    d_inner: int = 128           # SSM: inner width (Mamba's expand × d_model)
    d_state: int = 8             # SSM: state size per inner channel
    d_conv: int = 4              # SSM: width of the causal depthwise convolution
    rope_theta: float = 10000.0
    extra: dict = field(default_factory=dict)  # free-form notes kept with a checkpoint (not used by the model)

    def __post_init__(self):
        self.layer_types = tuple(self.layer_types) or ("full",) * self.n_layer
        for name in ("vocab_size", "n_layer", "d_model", "n_head", "n_kv_heads", "head_dim", "d_ff", "window",
                     "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "d_inner", "d_state",
                     "d_conv"):
            val = getattr(self, name)
            if not isinstance(val, int) or isinstance(val, bool) or val <= 0:
                raise ValueError(f"{name} must be a positive int, got {val!r}")
        if self.n_head % self.n_kv_heads:
            raise ValueError(f"n_kv_heads ({self.n_kv_heads}) must divide n_head ({self.n_head})")
        if len(self.layer_types) != self.n_layer:
            raise ValueError(f"layer_types: {len(self.layer_types)} entries for n_layer={self.n_layer}")
        bad = [t for t in self.layer_types if t not in LAYER_TYPES]
        if bad:
            raise ValueError(f"layer_types: unknown {bad}; allowed {list(LAYER_TYPES)}")
        for name in ("head_dim", "qk_rope_head_dim"):
            if getattr(self, name) % 2:
                raise ValueError(f"{name} must be even (rotary positions rotate pairs), got {getattr(self, name)}")


# --- rotary positions -------------------------------------------------------------------------------------------
def apply_rope(x, positions, theta=10000.0):
    """Rotate pairs of features of ``x`` (..., t, d) by angles ``position × theta^(-2i/d)`` (RoPE, GPT-NeoX halves).

    The angle depends on the absolute position only, so a key rotated once when it enters the cache stays valid.
    """
    d = x.shape[-1]
    inv_freq = theta ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    angles = positions.to(torch.float32)[:, None] * inv_freq[None, :]        # (t, d/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


# --- the caches: one object per layer, and the model's container ---------------------------------------------------
class LayerKV:
    """K and V of one full-attention layer: (B, n_kv_heads, T, head_dim) each, one more row per token."""

    def __init__(self):
        self.k = self.v = None

    def append(self, k, v):
        """Append the keys/values of ``t`` new tokens (B, n_kv_heads, t, head_dim).

        Returns every cached key, value and their positions (B, n_kv_heads, T, head_dim) ×2 and (T,), new ones last.
        """
        ### BEGIN SOLUTION
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
        ### END SOLUTION
        return self.k, self.v, torch.arange(self.k.shape[2])

    def tensors(self):
        return [t for t in (self.k, self.v) if t is not None]


class WindowKV:
    """K and V of one sliding-window layer: a ring buffer of ``window`` slots; token ``p`` lives in slot ``p % W``.

    It grows until it holds W tokens, then each new token overwrites the oldest one: the memory stops at W.
    ``n`` counts every token seen (positions are arithmetic, so no position tensor needs to be stored).
    """

    def __init__(self, window):
        self.window, self.n = window, 0
        self.k = self.v = None

    def ordered(self):
        """The held keys, values and positions, oldest first."""
        if self.k is None:
            return None, None, torch.arange(0)
        held = self.k.shape[2]
        shift = self.n % self.window if held == self.window else 0  # the oldest token sits in slot n % W
        pos = torch.arange(self.n - held, self.n)
        return self.k.roll(-shift, dims=2), self.v.roll(-shift, dims=2), pos

    def append(self, k, v):
        """Add ``t`` new tokens. Returns what the new queries may look at: the held tokens plus the new ones, with
        their positions (the attention's window mask drops the ones too far back). Keeps only the last W."""
        t = k.shape[2]
        old_k, old_v, old_pos = self.ordered()
        new_pos = torch.arange(self.n, self.n + t)
        keys = k if old_k is None else torch.cat([old_k, k], dim=2)
        values = v if old_v is None else torch.cat([old_v, v], dim=2)
        ### BEGIN SOLUTION
        for j in range(t):
            slot = (self.n + j) % self.window
            if self.k is None:
                self.k, self.v = k[:, :, j:j + 1].clone(), v[:, :, j:j + 1].clone()
            elif slot == self.k.shape[2]:                 # still filling up: grow by one slot
                self.k = torch.cat([self.k, k[:, :, j:j + 1]], dim=2)
                self.v = torch.cat([self.v, v[:, :, j:j + 1]], dim=2)
            else:                                         # full: overwrite the oldest token in place
                self.k[:, :, slot] = k[:, :, j]
                self.v[:, :, slot] = v[:, :, j]
        self.n += t
        ### END SOLUTION
        return keys, values, torch.cat([old_pos, new_pos])

    def tensors(self):
        return [t for t in (self.k, self.v) if t is not None]


class LatentKV:
    """MLA cache of one layer: the latent ``c_kv`` (B, T, kv_lora_rank) and the RoPE key (B, T, qk_rope_head_dim).

    No K, no V: they are rebuilt from the latent by up-projections at every step.
    """

    def __init__(self):
        self.c_kv = self.k_rope = None

    def append(self, c_kv, k_rope):
        """Append ``t`` new latents and RoPE keys; return the whole cached ``(c_kv, k_rope)``."""
        ### BEGIN SOLUTION
        self.c_kv = c_kv if self.c_kv is None else torch.cat([self.c_kv, c_kv], dim=1)
        self.k_rope = k_rope if self.k_rope is None else torch.cat([self.k_rope, k_rope], dim=1)
        ### END SOLUTION
        return self.c_kv, self.k_rope

    def tensors(self):
        return [t for t in (self.c_kv, self.k_rope) if t is not None]


class SSMState:
    """Recurrent state of one SSM layer: the last ``d_conv − 1`` inputs of the convolution (B, d_conv − 1, d_inner)
    and the state ``h`` (B, d_inner, d_state). Its size does not depend on how many tokens were seen."""

    def __init__(self):
        self.conv = self.h = None

    def tensors(self):
        return [t for t in (self.conv, self.h) if t is not None]


class ModelCache:
    """Every layer's cache, and the number of tokens seen so far (the position of the next token)."""

    def __init__(self, config: GPTConfig):
        make = {"full": LayerKV, "window": lambda: WindowKV(config.window), "mla": LatentKV, "ssm": SSMState}
        self.layers = [make[kind]() for kind in config.layer_types]
        self.n_tokens = 0

    def tensors(self):
        return [t for layer in self.layers for t in layer.tensors()]

    def nbytes(self):
        """Bytes the cache holds: the sum of ``element_size() * numel()`` of every tensor in it."""
        return sum(t.element_size() * t.numel() for t in self.tensors())


# --- the token mixers -------------------------------------------------------------------------------------------
class CausalSelfAttention(nn.Module):
    """Causal self-attention with ``n_kv_heads`` K/V heads and rotary positions; ``window`` limits how far back a
    query may look (None: the whole context). Called with a layer cache, it computes only the new tokens."""

    def __init__(self, config: GPTConfig, window=None):
        super().__init__()
        self.n_head, self.n_kv_heads, self.head_dim = config.n_head, config.n_kv_heads, config.head_dim
        self.window, self.rope_theta = window, config.rope_theta
        self.q_proj = nn.Linear(config.d_model, config.n_head * config.head_dim, bias=False)
        self.k_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)
        self.v_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)
        self.o_proj = nn.Linear(config.n_head * config.head_dim, config.d_model, bias=False)

    def forward(self, x, positions, cache=None):
        """x: (B, t, d_model) for the tokens at ``positions`` (t,); cache: a LayerKV/WindowKV or None (no cache:
        x is the whole sequence). Returns (B, t, d_model)."""
        B, t, _ = x.shape
        ### BEGIN SOLUTION
        q = self.q_proj(x).view(B, t, self.n_head, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, positions, self.rope_theta), apply_rope(k, positions, self.rope_theta)
        if cache is None:
            k_pos = positions
        else:
            k, v, k_pos = cache.append(k, v)          # every key/value this layer can still see
        group = self.n_head // self.n_kv_heads
        if group > 1:                                 # GQA/MQA: each K/V head serves a group of query heads
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        allowed = k_pos[None, :] <= positions[:, None]                    # causal, by absolute position
        if self.window is not None:
            allowed = allowed & (k_pos[None, :] > positions[:, None] - self.window)
        out = scaled_dot_product_attention(q, k, v, mask=allowed)
        out = self.o_proj(out.transpose(1, 2).reshape(B, t, self.n_head * self.head_dim))
        ### END SOLUTION
        return out


class MLAttention(nn.Module):
    """Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434, §2.1), without query compression.

    Per token it caches ``c_kv = norm(W_DKV x)`` (width ``kv_lora_rank``) and ``k_rope = RoPE(W_KR x)`` (width
    ``qk_rope_head_dim``, one key shared by all heads). At attention time ``k_nope = W_UK c_kv`` and ``v = W_UV c_kv``
    are rebuilt per head, and each head's key is ``[k_nope, k_rope]``.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        c = config
        self.n_head, self.nope, self.rope, self.v_dim = c.n_head, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim
        self.rope_theta = c.rope_theta
        self.q_proj = nn.Linear(c.d_model, c.n_head * (c.qk_nope_head_dim + c.qk_rope_head_dim), bias=False)
        self.kv_down = nn.Linear(c.d_model, c.kv_lora_rank, bias=False)          # W_DKV
        self.kv_norm = nn.LayerNorm(c.kv_lora_rank)
        self.k_rope_proj = nn.Linear(c.d_model, c.qk_rope_head_dim, bias=False)  # W_KR
        self.k_up = nn.Linear(c.kv_lora_rank, c.n_head * c.qk_nope_head_dim, bias=False)  # W_UK
        self.v_up = nn.Linear(c.kv_lora_rank, c.n_head * c.v_head_dim, bias=False)        # W_UV
        self.o_proj = nn.Linear(c.n_head * c.v_head_dim, c.d_model, bias=False)

    def forward(self, x, positions, cache=None):
        """x: (B, t, d_model) at ``positions`` (t,); cache: a LatentKV or None. Returns (B, t, d_model)."""
        B, t, _ = x.shape
        H = self.n_head
        q = self.q_proj(x).view(B, t, H, self.nope + self.rope).transpose(1, 2)
        q_nope, q_rope = q.split([self.nope, self.rope], dim=-1)
        q = torch.cat([q_nope, apply_rope(q_rope, positions, self.rope_theta)], dim=-1)
        ### BEGIN SOLUTION
        c_kv = self.kv_norm(self.kv_down(x))                                        # (B, t, kv_lora_rank)
        k_rope = apply_rope(self.k_rope_proj(x), positions, self.rope_theta)        # (B, t, qk_rope_head_dim)
        if cache is not None:
            c_kv, k_rope = cache.append(c_kv, k_rope)                              # (B, T, ...): the whole context
        T = c_kv.shape[1]
        k_nope = self.k_up(c_kv).view(B, T, H, self.nope).transpose(1, 2)           # rebuilt, never cached
        v = self.v_up(c_kv).view(B, T, H, self.v_dim).transpose(1, 2)
        k = torch.cat([k_nope, k_rope[:, None].expand(B, H, T, self.rope)], dim=-1)
        out = scaled_dot_product_attention(q, k, v, causal=True)  # the causal mask is aligned to the end
        ### END SOLUTION
        return self.o_proj(out.transpose(1, 2).reshape(B, t, H * self.v_dim))


class SSMLayer(nn.Module):
    """A selective state-space layer in the style of Mamba-1 (Gu & Dao, arXiv:2312.00752), as a plain loop.

    Per inner channel ``i`` and state ``s``: ``h[i,s] ← exp(Δ_i A[i,s]) h[i,s] + Δ_i B_s u_i`` and
    ``y_i = Σ_s C_s h[i,s] + D_i u_i``, where ``u`` is the input after a causal depthwise convolution of width
    ``d_conv`` and ``Δ, B, C`` depend on the token. The state (``h`` and the convolution's last ``d_conv − 1``
    inputs) is all that a new token needs from the past: it has the same size after 10 tokens or 10 million.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        c = config
        self.d_inner, self.d_state, self.d_conv = c.d_inner, c.d_state, c.d_conv
        self.in_proj = nn.Linear(c.d_model, 2 * c.d_inner, bias=False)    # u and the gate z
        self.conv_weight = nn.Parameter(torch.randn(c.d_conv, c.d_inner) / c.d_conv)
        self.conv_bias = nn.Parameter(torch.zeros(c.d_inner))
        self.dt_proj = nn.Linear(c.d_inner, c.d_inner)
        self.bc_proj = nn.Linear(c.d_inner, 2 * c.d_state, bias=False)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, c.d_state + 1, dtype=torch.float32)).repeat(c.d_inner, 1))
        self.D = nn.Parameter(torch.ones(c.d_inner))
        self.out_proj = nn.Linear(c.d_inner, c.d_model, bias=False)

    def forward(self, x, positions, cache=None):
        """x: (B, t, d_model); cache: an SSMState (updated in place) or None (start from a zero state)."""
        B, t, _ = x.shape
        u, z = self.in_proj(x).chunk(2, dim=-1)
        state = cache if cache is not None else SSMState()
        if state.h is None:
            state.conv = x.new_zeros(B, self.d_conv - 1, self.d_inner)
            state.h = x.new_zeros(B, self.d_inner, self.d_state)
        padded = torch.cat([state.conv, u], dim=1)                             # (B, d_conv − 1 + t, d_inner)
        u = sum(padded[:, j:j + t] * self.conv_weight[j] for j in range(self.d_conv)) + self.conv_bias
        u = F.silu(u)
        dt = F.softplus(self.dt_proj(u))                                         # (B, t, d_inner)
        Bm, Cm = self.bc_proj(u).chunk(2, dim=-1)                                # (B, t, d_state) each
        A = -torch.exp(self.A_log)                                               # (d_inner, d_state), negative
        h, ys = state.h, []
        for i in range(t):
            h = torch.exp(dt[:, i, :, None] * A) * h + (dt[:, i] * u[:, i])[:, :, None] * Bm[:, i, None, :]
            ys.append((h * Cm[:, i, None, :]).sum(-1))
        y = torch.stack(ys, dim=1) + self.D * u
        state.conv, state.h = padded[:, -(self.d_conv - 1):].clone(), h         # the whole memory of the past
        return self.out_proj(y * F.silu(z))


# --- the model --------------------------------------------------------------------------------------------------
class Block(nn.Module):
    """Pre-norm residual block: x + mixer(norm(x)), then x + MLP(norm(x))."""

    def __init__(self, config: GPTConfig, kind: str):
        super().__init__()
        self.kind = kind
        self.ln_1 = nn.LayerNorm(config.d_model)
        if kind == "full":
            self.mixer = CausalSelfAttention(config)
        elif kind == "window":
            self.mixer = CausalSelfAttention(config, window=config.window)
        elif kind == "mla":
            self.mixer = MLAttention(config)
        else:
            self.mixer = SSMLayer(config)
        self.ln_2 = nn.LayerNorm(config.d_model)
        self.mlp = nn.Sequential(nn.Linear(config.d_model, config.d_ff), nn.GELU(),
                                 nn.Linear(config.d_ff, config.d_model))

    def forward(self, x, positions, cache=None):
        x = x + self.mixer(self.ln_1(x), positions, cache)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config, kind) for kind in config.layer_types)
        self.ln_f = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # weight tying (as in GPT-2): fewer parameters to ship
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)

    def new_cache(self) -> ModelCache:
        return ModelCache(self.config)

    def forward(self, idx, cache: ModelCache | None = None, targets=None):
        """idx: (B, t) token ids. Without a cache, idx is the whole sequence; with one, only the new tokens (they
        sit at positions ``cache.n_tokens, ...``) and the cache is extended. Returns logits (B, t, vocab), and the
        mean cross-entropy too when ``targets`` are given."""
        if idx.dim() != 2:
            raise ValueError(f"idx: expected shape (B, t), got {tuple(idx.shape)}")
        start = cache.n_tokens if cache is not None else 0
        positions = torch.arange(start, start + idx.shape[1])
        x = self.tok_emb(idx)
        for i, block in enumerate(self.blocks):
            x = block(x, positions, cache.layers[i] if cache is not None else None)
        if cache is not None:
            cache.n_tokens += idx.shape[1]
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))

    @torch.no_grad()
    def generate_steps(self, idx, max_new_tokens, use_cache=True, temperature=0.0, generator=None):
        """Yield ``(next_token (B, 1), logits (B, vocab))`` once per new token. Greedy when ``temperature == 0``.

        With the cache: one prefill over the prompt, then one token per forward pass. Without: the whole
        sequence again at every step.
        """
        cache = self.new_cache() if use_cache else None
        seq, step_input = idx, idx
        for _ in range(max_new_tokens):
            logits = self(step_input, cache)[:, -1] if use_cache else self(seq)[:, -1]
            if temperature == 0:
                nxt = logits.argmax(dim=-1, keepdim=True)
            else:
                probs = torch.softmax(logits.float() / temperature, dim=-1)
                nxt = torch.multinomial(probs, 1, generator=generator)
            seq, step_input = torch.cat([seq, nxt], dim=1), nxt
            yield nxt, logits

    def generate(self, idx, max_new_tokens, use_cache=True, temperature=0.0, generator=None, return_logits=False):
        """Extend ``idx`` (B, t) by ``max_new_tokens``; return (B, t + n), plus the logits (B, n, vocab) if asked."""
        toks, logits = [], []
        for nxt, lg in self.generate_steps(idx, max_new_tokens, use_cache, temperature, generator):
            toks.append(nxt)
            logits.append(lg)
        out = torch.cat([idx] + toks, dim=1)
        return (out, torch.stack(logits, dim=1)) if return_logits else out
