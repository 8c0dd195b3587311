"""Lesson 01 — scaled dot-product attention and multi-head attention (MHA, GQA, MQA).

Written in basic tensor ops only: no ``F.scaled_dot_product_attention``, no ``nn.MultiheadAttention``.
The regions between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` are what learners write in the
exercise notebook (tools/make_notebooks.py copies this file's functions into the notebook; nbgrader
blanks the regions). This file is the one place the solution is written.

Shapes: ``B`` batch, ``H`` heads, ``Lq`` query length, ``Lk`` key length, ``d`` head_dim.
Mask convention (the same as PyTorch's boolean masks): ``True`` means "may attend", ``False`` means
"masked out".
"""
from __future__ import annotations

import math

import torch
from torch import nn


def causal_mask(lq: int, lk: int, device=None) -> torch.Tensor:
    """Boolean (lq, lk) mask, True where query i may see key j.

    Aligned to the *end*: query i sits at absolute position ``lk - lq + i``. With ``lq == lk`` this is the
    usual lower triangle; with ``lq == 1`` (one decode step over a KV cache) the new token sees every key.
    """
    offset = lk - lq
    i = torch.arange(lq, device=device).unsqueeze(1)
    j = torch.arange(lk, device=device).unsqueeze(0)
    return j <= i + offset


def scaled_dot_product_attention(q, k, v, mask=None, causal=False, return_weights=False):
    """softmax(q kᵀ / √d + mask) v, in basic tensor ops.

    q: (..., Lq, d), k: (..., Lk, d), v: (..., Lk, dv); mask: bool, broadcastable to (..., Lq, Lk).
    Returns the output (..., Lq, dv), and the weights (..., Lq, Lk) too when ``return_weights``.
    Numerically stable for large logits (the row maximum is subtracted before ``exp``). A query row whose
    every key is masked gets all-zero weights (and a zero output) instead of NaN.
    """
    lq, lk = _check_attention_inputs(q, k, v, mask)
    ### BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = None
    if mask is not None:
        allowed = mask
    if causal:
        c = causal_mask(lq, lk, device=q.device)
        allowed = c if allowed is None else (allowed & c)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    # Subtract the row max so exp never overflows; a fully masked row has max -inf, use 0 there.
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    e = torch.exp(scores - row_max)
    denom = e.sum(dim=-1, keepdim=True)
    weights = e / torch.where(denom > 0, denom, torch.ones_like(denom))
    out = weights @ v
    ### END SOLUTION
    return (out, weights) if return_weights else out


class MultiHeadAttention(nn.Module):
    """Multi-head attention with ``n_kv_heads`` key/value heads shared by groups of query heads.

    ``n_kv_heads == n_heads`` is MHA, ``1 < n_kv_heads < n_heads`` is GQA, ``n_kv_heads == 1`` is MQA.
    ``head_dim`` is explicit (it need not be ``d_model / n_heads``, as in Mistral-NeMo or Gemma).
    Self-attention: ``forward(x)``. Cross-attention: ``forward(x, context)`` — queries from ``x``, keys and
    values from ``context`` (width ``d_context``, default ``d_model``).

    The K/V projections produce ``n_kv_heads × head_dim`` features per token: that, not ``d_model``, is what a
    KV cache stores (lesson 03).
    """

    def __init__(self, d_model, n_heads, n_kv_heads=None, head_dim=None, d_context=None, bias=True):
        super().__init__()
        n_kv_heads, head_dim = _check_heads(d_model, n_heads, n_kv_heads, head_dim)
        d_context = d_model if d_context is None else d_context
        self.d_model, self.n_heads, self.n_kv_heads, self.head_dim = d_model, n_heads, n_kv_heads, head_dim
        self.d_context = d_context
        self.q_proj = nn.Linear(d_model, n_heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(d_context, n_kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(d_context, n_kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(n_heads * head_dim, d_model, bias=bias)

    def split_heads(self, x, n):
        """(B, L, n·head_dim) → (B, n, L, head_dim)."""
        b, length, _ = x.shape
        return x.view(b, length, n, self.head_dim).transpose(1, 2)

    def forward(self, x, context=None, mask=None, causal=False, return_weights=False):
        """x: (B, Lq, d_model); context: (B, Lk, d_context) or None for self-attention; mask: bool (B, Lq, Lk), or
        (B, 1, Lk) for padding, True = may attend, the same for every head.

        Returns (B, Lq, d_model), and the weights (B, n_heads, Lq, Lk) too when ``return_weights``.
        """
        src = _check_mha_inputs(self, x, context)
        ### BEGIN SOLUTION
        q = self.split_heads(self.q_proj(x), self.n_heads)
        k = self.split_heads(self.k_proj(src), self.n_kv_heads)
        v = self.split_heads(self.v_proj(src), self.n_kv_heads)
        group = self.n_heads // self.n_kv_heads
        if group > 1:
            # GQA/MQA: each KV head serves `group` consecutive query heads.
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)  # (B, Lq, Lk) → (B, 1, Lq, Lk), shared by every head
        out, weights = scaled_dot_product_attention(q, k, v, mask=mask, causal=causal, return_weights=True)
        b, _, lq, _ = out.shape
        out = self.o_proj(out.transpose(1, 2).reshape(b, lq, self.n_heads * self.head_dim))
        ### END SOLUTION
        return (out, weights) if return_weights else out


# --- input checks, after the idea: bad shapes become a ValueError naming the argument -------------------------
def _check_heads(d_model, n_heads, n_kv_heads, head_dim):
    """Validate MultiHeadAttention's sizes; return (n_kv_heads, head_dim) with their defaults filled in."""
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    for name, val in (("d_model", d_model), ("n_heads", n_heads), ("n_kv_heads", n_kv_heads)):
        if not isinstance(val, int) or val <= 0:
            raise ValueError(f"{name} must be a positive int, got {val!r}")
    if n_heads % n_kv_heads != 0:
        raise ValueError(
            f"n_kv_heads ({n_kv_heads}) must divide n_heads ({n_heads}): each KV head serves a whole group"
        )
    if head_dim is None:
        if d_model % n_heads != 0:
            raise ValueError(f"head_dim: d_model ({d_model}) is not divisible by n_heads ({n_heads}); pass head_dim")
        head_dim = d_model // n_heads
    if not isinstance(head_dim, int) or head_dim <= 0:
        raise ValueError(f"head_dim must be a positive int, got {head_dim!r}")
    return n_kv_heads, head_dim


def _check_mha_inputs(mha, x, context):
    """Validate MultiHeadAttention.forward's inputs; return the keys' and values' source (``context`` or ``x``)."""
    if x.dim() != 3 or x.shape[-1] != mha.d_model:
        raise ValueError(f"x: expected shape (B, L, d_model={mha.d_model}), got {tuple(x.shape)}")
    src = x if context is None else context
    if src.dim() != 3 or src.shape[-1] != mha.d_context or src.shape[0] != x.shape[0]:
        raise ValueError(
            f"context: expected shape (B={x.shape[0]}, L, d_context={mha.d_context}), got {tuple(src.shape)}"
        )
    return src


def _check_attention_inputs(q, k, v, mask):
    """Raise a ValueError that names the offending argument; return the (Lq, Lk) pair."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() < 2:
            raise ValueError(f"{name} must have at least 2 dims (..., length, dim), got shape {tuple(t.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"k: last dim {k.shape[-1]} must equal q's last dim {q.shape[-1]} (head_dim)")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"v: length {v.shape[-2]} must equal k's length {k.shape[-2]}")
    lq, lk = q.shape[-2], k.shape[-2]
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise ValueError("mask must be a torch.bool tensor (True = may attend)")
        try:
            torch.broadcast_shapes(mask.shape, q.shape[:-2] + (lq, lk))
        except RuntimeError:
            raise ValueError(
                f"mask: shape {tuple(mask.shape)} does not broadcast to (..., Lq={lq}, Lk={lk})"
            ) from None
    return lq, lk
