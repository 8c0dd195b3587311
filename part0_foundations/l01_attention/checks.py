"""Lesson 01 checks: called by the notebook's autograder cells, by tests/autograder/test_attention.py and by
the reference tests. Each takes the implementation under test and raises CheckFailed with a learner message.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from course import method
from course.grading import Check, Lesson, call, expect, expect_close, expect_shape

ATOL = 1e-5


def _qkv(b=2, h=3, lq=5, lk=7, d=8, dv=6, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, lq, d, generator=g, dtype=dtype)
    k = torch.randn(b, h, lk, d, generator=g, dtype=dtype)
    v = torch.randn(b, h, lk, dv, generator=g, dtype=dtype)
    return q, k, v


def check_sdpa_matches_torch(sdpa):
    """Equal to F.scaled_dot_product_attention: no mask, a boolean mask, and causal."""
    q, k, v = _qkv()
    out = call(sdpa, q, k, v, what="scaled_dot_product_attention(q, k, v)")
    expect_shape(out, (2, 3, 5, 6), "scaled_dot_product_attention output")
    expect_close(out, F.scaled_dot_product_attention(q, k, v), "no mask: softmax(q kᵀ / √d) v", atol=ATOL)

    g = torch.Generator().manual_seed(1)
    mask = torch.rand(2, 1, 5, 7, generator=g) > 0.3
    mask[..., 0] = True  # keep every row attendable so the reference has no NaN
    out = call(sdpa, q, k, v, mask=mask, what="scaled_dot_product_attention(q, k, v, mask=mask)")
    expect_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), "boolean mask (True = may attend; masked scores → −inf before softmax)", atol=ATOL)

    q, k, v = _qkv(lq=6, lk=6, seed=2)
    out = call(sdpa, q, k, v, causal=True, what="scaled_dot_product_attention(q, k, v, causal=True)")
    expect_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), "causal=True (query i sees keys j ≤ i)", atol=ATOL)


def check_sdpa_stable(sdpa):
    """Logits of size ~1e4 must not overflow: subtract the row maximum before exp."""
    q, k, v = _qkv(seed=3)
    q = q * 1e3
    out = call(sdpa, q, k, v, what="scaled_dot_product_attention with large logits")
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double()).float()
    expect(bool(torch.isfinite(out).all()), "large logits produced NaN/inf: subtract the row max before exp")
    expect_close(out, ref, "large logits (subtract the row max before exp)", atol=1e-4)


def check_sdpa_masked_weights_zero(sdpa):
    """Masked positions get exactly zero weight; every attendable row sums to 1; a fully masked row gives zero
    weights and a zero output, not NaN."""
    q, k, v = _qkv(seed=4)
    g = torch.Generator().manual_seed(5)
    mask = torch.rand(2, 3, 5, 7, generator=g) > 0.5
    mask[..., 1] = True
    mask[1, 2, 3] = False  # one query row whose every key is masked
    res = call(sdpa, q, k, v, mask=mask, return_weights=True, what="scaled_dot_product_attention(..., return_weights=True)")
    expect(isinstance(res, tuple) and len(res) == 2, "with return_weights=True, return (output, weights)")
    out, w = res
    expect_shape(w, (2, 3, 5, 7), "weights")
    expect(not bool(torch.isnan(w).any()) and not bool(torch.isnan(out).any()),
           "a fully masked row gives zero weights and a zero output, not NaN (its row max is −inf: use 0 there)")
    expect(bool((w[1, 2, 3] == 0).all()) and bool((out[1, 2, 3] == 0).all()),
           "a fully masked row gives zero weights and a zero output")
    expect(bool((w[~mask] == 0).all()), "masked positions must get exactly zero weight (use -inf before softmax)")
    rows = mask.any(-1)
    expect_close(w.sum(-1)[rows], torch.ones(int(rows.sum())), "each attendable row of weights must sum to 1", atol=1e-6)


def check_sdpa_causal_decode(sdpa):
    """With causal=True and fewer queries than keys (decoding over a KV cache), the causal mask is aligned to the end
    of the keys: one new query sees every cached key, and query i of Lq sits at position Lk − Lq + i; a boolean mask
    given as well still applies."""
    q, k, v = _qkv(lq=7, lk=7, seed=6)
    full = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # 7 queries over 7 keys: the lower triangle
    out = call(sdpa, q[..., -1:, :], k, v, causal=True,
               what="scaled_dot_product_attention(q[..., -1:, :], k, v, causal=True)")
    expect_close(out, full[..., -1:, :], "one decode step (Lq=1 over Lk=7 keys, causal=True) sees every key: the "
                 "causal mask is aligned to the end of the keys", atol=ATOL)
    out = call(sdpa, q[..., -3:, :], k, v, causal=True,
               what="scaled_dot_product_attention(q[..., -3:, :], k, v, causal=True)")
    expect_close(out, full[..., -3:, :], "3 queries over 7 keys (causal=True): query i sits at position "
                 "Lk − Lq + i = 4 + i and sees keys j ≤ 4 + i", atol=ATOL)
    g = torch.Generator().manual_seed(7)
    pad = torch.rand(2, 1, 1, 7, generator=g) > 0.5
    pad[..., 0] = True  # key 0 is seen by every query: no row is fully masked
    pad[..., -1] = True  # the newest key is real: only causal hides it from the earlier queries
    both = pad & torch.ones(7, 7, dtype=torch.bool).tril()
    out = call(sdpa, q[..., -3:, :], k, v, mask=pad, causal=True,
               what="scaled_dot_product_attention(q[..., -3:, :], k, v, mask=mask, causal=True)")
    expect_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=both)[..., -3:, :],
                 "mask and causal=True together: a key is seen only where both allow it", atol=ATOL)


def _copy_from_torch_mha(mine, ref: nn.MultiheadAttention, d):
    with torch.no_grad():
        wq, wk, wv = ref.in_proj_weight.split(d)
        bq, bk, bv = ref.in_proj_bias.split(d)
        mine.q_proj.weight.copy_(wq); mine.q_proj.bias.copy_(bq)
        mine.k_proj.weight.copy_(wk); mine.k_proj.bias.copy_(bk)
        mine.v_proj.weight.copy_(wv); mine.v_proj.bias.copy_(bv)
        mine.o_proj.weight.copy_(ref.out_proj.weight); mine.o_proj.bias.copy_(ref.out_proj.bias)


def check_mha_matches_torch(MultiHeadAttention):
    """MHA with weights copied from nn.MultiheadAttention gives the same output (self and causal)."""
    torch.manual_seed(0)
    d, h = 16, 4
    ref = nn.MultiheadAttention(d, h, batch_first=True)
    mine = call(MultiHeadAttention, d, h, what="MultiHeadAttention(d_model=16, n_heads=4)")
    _copy_from_torch_mha(mine, ref, d)
    x = torch.randn(2, 6, d)
    out = call(mine, x, what="MultiHeadAttention.forward(x)")
    expect_shape(out, (2, 6, d), "MultiHeadAttention output")
    want, _ = ref(x, x, x, need_weights=False)
    expect_close(out, want, "self-attention vs nn.MultiheadAttention", atol=ATOL)
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)  # torch: True = masked out
    want, _ = ref(x, x, x, attn_mask=causal, need_weights=False)
    out = call(mine, x, causal=True, what="MultiHeadAttention.forward(x, causal=True)")
    expect_close(out, want, "causal self-attention vs nn.MultiheadAttention", atol=ATOL)


def check_gqa_equals_repeated_mha(MultiHeadAttention):
    """GQA equals MHA whose K/V projections repeat each KV head over its group of query heads."""
    torch.manual_seed(1)
    d, h, hkv, hd = 24, 6, 2, 5
    gqa = call(MultiHeadAttention, d, h, n_kv_heads=hkv, head_dim=hd, what="MultiHeadAttention(24, 6, n_kv_heads=2, head_dim=5)")
    mha = call(MultiHeadAttention, d, h, n_kv_heads=h, head_dim=hd, what="MultiHeadAttention(24, 6, n_kv_heads=6, head_dim=5)")
    expect_shape(gqa.k_proj.weight, (hkv * hd, d), "GQA k_proj.weight (n_kv_heads·head_dim, d_model)")
    group = h // hkv
    with torch.no_grad():
        mha.q_proj.load_state_dict(gqa.q_proj.state_dict())
        mha.o_proj.load_state_dict(gqa.o_proj.state_dict())
        for name in ("k_proj", "v_proj"):
            src, dst = getattr(gqa, name), getattr(mha, name)
            dst.weight.copy_(src.weight.view(hkv, hd, d).repeat_interleave(group, 0).reshape(h * hd, d))
            dst.bias.copy_(src.bias.view(hkv, hd).repeat_interleave(group, 0).reshape(h * hd))
    x = torch.randn(3, 7, d)
    expect_close(call(gqa, x, causal=True), call(mha, x, causal=True), "GQA vs MHA with repeated K/V heads (query head h uses K/V head h // group)", atol=ATOL)


def check_mqa_and_cross_attention(MultiHeadAttention):
    """MQA has one K/V head; cross-attention reads keys/values from another sequence of another width."""
    torch.manual_seed(2)
    mqa = call(MultiHeadAttention, 32, 8, n_kv_heads=1, what="MultiHeadAttention(32, 8, n_kv_heads=1)")
    expect_shape(mqa.k_proj.weight, (4, 32), "MQA k_proj.weight (one KV head of head_dim 4)")
    x = torch.randn(2, 5, 32)
    expect_shape(call(mqa, x), (2, 5, 32), "MQA output")

    cross = call(MultiHeadAttention, 32, 4, n_kv_heads=2, d_context=12, what="MultiHeadAttention(32, 4, n_kv_heads=2, d_context=12)")
    ctx = torch.randn(2, 9, 12)
    out = call(cross, x, ctx, what="cross-attention forward(x, context)")
    expect_shape(out, (2, 5, 32), "cross-attention output (B, Lq, d_model)")
    out2 = call(cross, x, ctx.flip(1) * 2.0 + 1.0, what="cross-attention forward(x, other context)")
    expect(not torch.allclose(out, out2), "cross-attention output did not change when the context changed: are K and V computed from the context?")
    _, w = call(cross, x, ctx, return_weights=True, what="cross-attention with return_weights=True")
    expect_shape(w, (2, 4, 5, 9), "cross-attention weights (B, n_heads, Lq, Lk)")


def check_mha_mask_every_head(MultiHeadAttention):
    """A boolean mask given to MultiHeadAttention (True = may attend) applies to every head: a (B, 1, Lk) padding
    mask and a (B, Lq, Lk) mask give nn.MultiheadAttention's output under the same mask."""
    torch.manual_seed(3)
    d, h = 12, 2
    ref = nn.MultiheadAttention(d, h, batch_first=True)
    mine = call(MultiHeadAttention, d, h, what="MultiHeadAttention(d_model=12, n_heads=2)")
    _copy_from_torch_mha(mine, ref, d)
    # B = n_heads = 2: a mask read as one per head instead of one per sequence gives a wrong output, not an error
    x = torch.randn(2, 6, d)
    real = torch.ones(2, 6, dtype=torch.bool)
    real[1, 4:] = False  # the second sequence ends in two padding tokens
    out = call(mine, x, mask=real[:, None, :], what="MultiHeadAttention.forward(x, mask=padding (B, 1, Lk))")
    want, _ = ref(x, x, x, key_padding_mask=~real, need_weights=False)  # torch: True = masked out
    expect_close(out, want, "padding mask (B, 1, Lk) shared by every head vs nn.MultiheadAttention", atol=ATOL)
    g = torch.Generator().manual_seed(8)
    mask = torch.rand(2, 6, 6, generator=g) > 0.4
    mask[..., 0] = True  # every query sees key 0: no row is fully masked
    out = call(mine, x, mask=mask, what="MultiHeadAttention.forward(x, mask=(B, Lq, Lk))")
    want, _ = ref(x, x, x, attn_mask=(~mask).repeat_interleave(h, 0), need_weights=False)  # torch: (B·heads, Lq, Lk)
    expect_close(out, want, "mask (B, Lq, Lk) shared by every head vs nn.MultiheadAttention", atol=ATOL)


LESSON = Lesson(
    package="part0_foundations.l01_attention",
    reference=("part0_foundations.l01_attention.attention",),
    # Attention is the exercise: torch's in every form is off limits (the given causal_mask and shape checks are not).
    forbids=(method.SDPA, method.MHA),
    checks=(
        Check("sdpa_matches_torch", "scaled_dot_product_attention", check_sdpa_matches_torch, 2),
        Check("sdpa_causal_decode", "scaled_dot_product_attention", check_sdpa_causal_decode, 1, hidden=True),
        Check("sdpa_stable", "scaled_dot_product_attention", check_sdpa_stable, 1),
        Check("sdpa_masked_weights_zero", "scaled_dot_product_attention", check_sdpa_masked_weights_zero, 1),
        Check("mha_matches_torch", "MultiHeadAttention", check_mha_matches_torch, 2),
        Check("mha_mask_every_head", "MultiHeadAttention", check_mha_mask_every_head, 1, hidden=True),
        Check("gqa_equals_repeated_mha", "MultiHeadAttention", check_gqa_equals_repeated_mha, 1),
        Check("mqa_and_cross_attention", "MultiHeadAttention", check_mqa_and_cross_attention, 1),
    ),
)
"""The lesson contract: the notebook's test cells, tests/autograder and the checks' own tests all read it."""
ALL = LESSON.table()
