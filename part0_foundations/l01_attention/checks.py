"""Lesson 01 checks: called by the notebook's autograder cells, by tests/autograder/test_attention.py and by
the reference tests. Each takes the implementation under test and raises CheckFailed with a learner message.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from course.grading import method
from course.grading.contract import (CheckFailed, Check, Lesson, call, expect, expect_close, expect_close_naming, expect_shape,
                            recognise, same)
from course.grading.proxy import fetch

ATOL = 1e-5


def _qkv(b=2, h=3, lq=5, lk=7, d=8, dv=6, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, lq, d, generator=g, dtype=dtype)
    k = torch.randn(b, h, lk, d, generator=g, dtype=dtype)
    v = torch.randn(b, h, lk, dv, generator=g, dtype=dtype)
    return q, k, v


# --- the common mistakes, each computed, so that a failure names the one the learner made (and no other) -------------
CAUSES = {
    "scale_missing": "the scores are not divided by √d (softmax(q kᵀ / √d) v, d = q.shape[-1])",
    "scale_twice": "the scores are divided by √d twice (by d in all): divide q kᵀ by √d once",
    "softmax_dim": "softmax is taken over the queries (dim −2): normalise each query's row over the keys (dim −1)",
    "no_row_max": "exp overflows on large scores: subtract the row max before exp",
    "mask_inverted": "the mask is read the wrong way round: True means may attend (−inf where the mask is False)",
    "causal_start": "the causal mask starts at the first key: it must be aligned to the end of the keys (query i of "
                    "Lq sits at position Lk − Lq + i)",
    "causal_inverted": "the causal mask is the wrong way round: query i sees the keys up to its own position, not "
                       "the later ones",
    "split_heads": "the heads are split the wrong way: view (B, L, n_heads·head_dim) as (B, L, n_heads, head_dim), "
                   "then transpose to (B, n_heads, L, head_dim)",
    "merge_heads": "the heads are merged the wrong way: transpose (B, n_heads, Lq, head_dim) back to "
                   "(B, Lq, n_heads, head_dim) before reshaping to (B, Lq, n_heads·head_dim)",
    "kv_groups": "query head h must use K/V head h // group (repeat_interleave), not h % n_kv_heads (repeat)",
}


def _allowed(lq, lk, mask=None, causal=False, form="end"):
    """Where query i may see key j: the mask and the causal rule (``form``: aligned to the "end" of the keys as the
    lesson says, or the mistakes "start" and "inverted")."""
    allowed = mask
    if causal:
        i, j = torch.arange(lq)[:, None], torch.arange(lk)[None, :]
        c = {"end": j <= i + lk - lq, "start": j <= i, "inverted": j >= i + lk - lq}[form]
        allowed = c if allowed is None else allowed & c
    return allowed


def _attend(q, k, v, allowed=None, scale=None, dim=-1, stable=True):
    """(output, weights) of softmax(q kᵀ · scale + mask) v normalised over ``dim``, in float64 — or, ``stable`` off,
    exp of the raw scores in the inputs' dtype (the mistake that overflows). A fully masked row gives zeros."""
    dt = torch.float64 if stable else q.dtype
    s = (q.to(dt) @ k.to(dt).transpose(-2, -1)) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if allowed is not None:
        s = s.masked_fill(~allowed, float("-inf"))
    if stable:
        top = s.amax(dim, keepdim=True)
        s = s - torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = s.exp()
    total = e.sum(dim, keepdim=True)
    w = e / torch.where(total > 0, total, torch.ones_like(total))
    return (w @ v.to(dt)).to(q.dtype), w.to(q.dtype)


def _sdpa_mistakes(q, k, v, mask=None, causal=False) -> dict:
    """cause → (output, weights) of scaled_dot_product_attention(q, k, v, mask, causal) written with that mistake."""
    lq, lk = q.shape[-2], k.shape[-2]
    right = _allowed(lq, lk, mask, causal)
    out = {"scale_missing": _attend(q, k, v, right, scale=1.0),
           "scale_twice": _attend(q, k, v, right, scale=1.0 / q.shape[-1]),
           "softmax_dim": _attend(q, k, v, right, dim=-2),
           "no_row_max": _attend(q, k, v, right, stable=False)}
    if mask is not None:
        out["mask_inverted"] = _attend(q, k, v, _allowed(lq, lk, ~mask, causal))
    if causal:
        out["causal_inverted"] = _attend(q, k, v, _allowed(lq, lk, mask, causal, "inverted"))
        if lq != lk:
            out["causal_start"] = _attend(q, k, v, _allowed(lq, lk, mask, causal, "start"))
    return out


def _recognise(got, right, mistakes: dict, pick=0) -> str | None:
    """The mistake whose own result ``got`` equals (and the right result does not), or None."""
    return recognise(got, right, {cause: made[pick] if isinstance(made, tuple) else made
                                  for cause, made in mistakes.items()})


def expect_attention(got, want, what, mistakes: dict, atol=ATOL, pick=0):
    """``got`` equals ``want`` (course.grading.contract.expect_close); otherwise, when it equals one mistake's own result,
    the failure names that mistake."""
    expect_close_naming(got, want, what, {CAUSES[c]: made[pick] if isinstance(made, tuple) else made
                                          for c, made in mistakes.items()}, atol=atol)


def check_sdpa_matches_torch(sdpa):
    """Equal to F.scaled_dot_product_attention: no mask, a boolean mask, and causal."""
    q, k, v = _qkv()
    out = call(sdpa, q, k, v, what="scaled_dot_product_attention(q, k, v)")
    expect_shape(out, (2, 3, 5, 6), "scaled_dot_product_attention output")
    expect_attention(out, F.scaled_dot_product_attention(q, k, v), "no mask: softmax(q kᵀ / √d) v",
                     _sdpa_mistakes(q, k, v))

    g = torch.Generator().manual_seed(1)
    mask = torch.rand(2, 1, 5, 7, generator=g) > 0.3
    mask[..., 0] = True  # keep every row attendable so the reference has no NaN
    out = call(sdpa, q, k, v, mask=mask, what="scaled_dot_product_attention(q, k, v, mask=mask)")
    expect_attention(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                     "boolean mask (True = may attend; masked scores → −inf before softmax)",
                     _sdpa_mistakes(q, k, v, mask))

    q, k, v = _qkv(lq=6, lk=6, seed=2)
    out = call(sdpa, q, k, v, causal=True, what="scaled_dot_product_attention(q, k, v, causal=True)")
    expect_attention(out, F.scaled_dot_product_attention(q, k, v, is_causal=True),
                     "causal=True (query i sees keys j ≤ i)", _sdpa_mistakes(q, k, v, causal=True))


def check_sdpa_stable(sdpa):
    """Logits of size ~1e4 must not overflow: subtract the row maximum before exp."""
    q, k, v = _qkv(seed=3)
    q = q * 1e3
    out = call(sdpa, q, k, v, what="scaled_dot_product_attention with large logits")
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double()).float()
    mistakes = _sdpa_mistakes(q, k, v)
    if not bool(torch.isfinite(fetch(out)).all()) and _recognise(out, ref, mistakes) == "no_row_max":
        raise CheckFailed(f"large logits produced NaN/inf: {CAUSES['no_row_max']}")
    expect(bool(torch.isfinite(out).all()), "large logits (|q kᵀ| ~ 1e4) produced NaN/inf")
    expect_attention(out, ref, "large logits (|q kᵀ| ~ 1e4)", mistakes, atol=1e-4)


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
    want_out, want_w = _attend(q, k, v, mask)
    mistakes = _sdpa_mistakes(q, k, v, mask)
    cause = _recognise(w, want_w, mistakes, pick=1)
    if cause is not None and not same(w, want_w):
        raise CheckFailed(f"weights: {CAUSES[cause]}")
    expect(not bool(torch.isnan(w).any()) and not bool(torch.isnan(out).any()),
           "a fully masked row gives zero weights and a zero output, not NaN (every score of that row is −inf: "
           "its row maximum and its sum need a guard)")
    expect(bool((w[1, 2, 3] == 0).all()) and bool((out[1, 2, 3] == 0).all()),
           "a fully masked row gives zero weights and a zero output")
    expect(bool((w[~mask] == 0).all()), "masked positions must get exactly zero weight (use -inf before softmax)")
    rows = mask.any(-1)
    expect_close(w.sum(-1)[rows], torch.ones(int(rows.sum())), "each attendable row of weights must sum to 1", atol=1e-6)
    # Zero where masked and rows of 1 hold for any weights (uniform ones too): they must be attention's.
    expect_attention(w, want_w, "weights: softmax(q kᵀ / √d) over the keys the mask allows", mistakes, pick=1)
    expect_attention(out, want_out, "output with return_weights=True: weights @ v", mistakes)


def check_sdpa_causal_decode(sdpa):
    """With causal=True and fewer queries than keys (decoding over a KV cache), the causal mask is aligned to the end
    of the keys: one new query sees every cached key, and query i of Lq sits at position Lk − Lq + i; a boolean mask
    given as well still applies."""
    q, k, v = _qkv(lq=7, lk=7, seed=6)
    full = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # 7 queries over 7 keys: the lower triangle
    one = q[..., -1:, :]
    out = call(sdpa, one, k, v, causal=True,
               what="scaled_dot_product_attention(q[..., -1:, :], k, v, causal=True)")
    expect_attention(out, full[..., -1:, :], "one decode step (Lq=1 over Lk=7 keys, causal=True)",
                     _sdpa_mistakes(one, k, v, causal=True))
    three = q[..., -3:, :]
    out = call(sdpa, three, k, v, causal=True,
               what="scaled_dot_product_attention(q[..., -3:, :], k, v, causal=True)")
    expect_attention(out, full[..., -3:, :], "3 queries over 7 keys (causal=True): query i sits at position "
                     "Lk − Lq + i = 4 + i and sees keys j ≤ 4 + i", _sdpa_mistakes(three, k, v, causal=True))
    g = torch.Generator().manual_seed(7)
    pad = torch.rand(2, 1, 1, 7, generator=g) > 0.5
    pad[..., 0] = True  # key 0 is seen by every query: no row is fully masked
    pad[..., -1] = True  # the newest key is real: only causal hides it from the earlier queries
    both = pad & torch.ones(7, 7, dtype=torch.bool).tril()
    out = call(sdpa, three, k, v, mask=pad, causal=True,
               what="scaled_dot_product_attention(q[..., -3:, :], k, v, mask=mask, causal=True)")
    expect_attention(out, F.scaled_dot_product_attention(q, k, v, attn_mask=both)[..., -3:, :],
                     "mask and causal=True together: a key is seen only where both allow it",
                     _sdpa_mistakes(three, k, v, pad, causal=True))


def _copy_from_torch_mha(mine, ref: nn.MultiheadAttention, d):
    with torch.no_grad():
        wq, wk, wv = ref.in_proj_weight.split(d)
        bq, bk, bv = ref.in_proj_bias.split(d)
        mine.q_proj.weight.copy_(wq); mine.q_proj.bias.copy_(bq)
        mine.k_proj.weight.copy_(wk); mine.k_proj.bias.copy_(bk)
        mine.v_proj.weight.copy_(wv); mine.v_proj.bias.copy_(bv)
        mine.o_proj.weight.copy_(ref.out_proj.weight); mine.o_proj.bias.copy_(ref.out_proj.bias)


def _weights(mha) -> dict:
    """name → (weight, bias) of an MHA's four projections, as values here (a learner's module is a stand-in)."""
    out = {}
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
        lin = getattr(mha, name)
        bias = lin.bias
        out[name] = (fetch(lin.weight).detach().clone(), None if bias is None else fetch(bias).detach().clone())
    return out


def _linear(x, wb):
    w, b = wb
    return x @ w.T + (0 if b is None else b)


def _mha(x, w, h, hkv, hd, context=None, mask=None, causal=False, mistake=None):
    """(output, weights) of multi-head attention with the projections ``w`` (``_weights``), written here from the
    lesson's definition — or with one ``mistake`` of ``CAUSES``. ``mask``: (B, Lq, Lk) or (B, 1, Lk), every head."""
    src = x if context is None else context
    b, lq, lk = x.shape[0], x.shape[1], src.shape[1]

    def split(t, n, length):
        if mistake == "split_heads":
            return t.reshape(b, n, length, hd)
        return t.view(b, length, n, hd).transpose(1, 2)

    q = split(_linear(x, w["q_proj"]), h, lq)
    k = split(_linear(src, w["k_proj"]), hkv, lk)
    v = split(_linear(src, w["v_proj"]), hkv, lk)
    group = h // hkv
    if mistake == "kv_groups":
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
    else:
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    m = None if mask is None else mask[:, None]
    if m is not None and mistake == "mask_inverted":
        m = ~m
    form = "inverted" if mistake == "causal_inverted" else "end"
    scale = {"scale_missing": 1.0, "scale_twice": 1.0 / hd}.get(mistake)
    out, weights = _attend(q, k, v, _allowed(lq, lk, m, causal, form), scale=scale,
                           dim=-2 if mistake == "softmax_dim" else -1)
    merged = out.reshape(b, lq, h * hd) if mistake == "merge_heads" else out.transpose(1, 2).reshape(b, lq, h * hd)
    return _linear(merged, w["o_proj"]), weights


def _mha_mistakes(x, w, h, hkv, hd, context=None, mask=None, causal=False) -> dict:
    causes = ["scale_missing", "scale_twice", "softmax_dim", "split_heads", "merge_heads"]
    causes += ["kv_groups"] if 1 < hkv < h else []
    causes += ["mask_inverted"] if mask is not None else []
    causes += ["causal_inverted"] if causal else []
    return {c: _mha(x, w, h, hkv, hd, context, mask, causal, mistake=c) for c in causes}


def check_mha_matches_torch(MultiHeadAttention):
    """MHA with weights copied from nn.MultiheadAttention gives the same output (self and causal)."""
    torch.manual_seed(0)
    d, h = 16, 4
    ref = nn.MultiheadAttention(d, h, batch_first=True)
    mine = call(MultiHeadAttention, d, h, what="MultiHeadAttention(d_model=16, n_heads=4)")
    _copy_from_torch_mha(mine, ref, d)
    w = _weights(mine)
    x = torch.randn(2, 6, d)
    out = call(mine, x, what="MultiHeadAttention.forward(x)")
    expect_shape(out, (2, 6, d), "MultiHeadAttention output")
    want, _ = ref(x, x, x, need_weights=False)
    expect_attention(out, want, "self-attention vs nn.MultiheadAttention", _mha_mistakes(x, w, h, h, d // h))
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)  # torch: True = masked out
    want, _ = ref(x, x, x, attn_mask=causal, need_weights=False)
    out = call(mine, x, causal=True, what="MultiHeadAttention.forward(x, causal=True)")
    expect_attention(out, want, "causal self-attention vs nn.MultiheadAttention",
                     _mha_mistakes(x, w, h, h, d // h, causal=True))


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
    got = call(gqa, x, causal=True, what="GQA forward(x, causal=True)")
    # Anchored on attention written here with the GQA's own weights: two modules that agree on nothing (zeros, the
    # input echoed) would otherwise agree with each other.
    w = _weights(gqa)
    want, _ = _mha(x, w, h, hkv, hd, causal=True)
    expect_attention(got, want.float(), "GQA (6 query heads, 2 K/V heads, causal) vs attention with its own weights",
                     _mha_mistakes(x, w, h, hkv, hd, causal=True))
    expect_close(got, call(mha, x, causal=True, what="MHA forward(x, causal=True)"),
                 "GQA vs MHA with repeated K/V heads (query head h uses K/V head h // group)", atol=ATOL)


def check_mqa_and_cross_attention(MultiHeadAttention):
    """MQA has one K/V head; cross-attention reads keys/values from another sequence of another width."""
    torch.manual_seed(2)
    mqa = call(MultiHeadAttention, 32, 8, n_kv_heads=1, what="MultiHeadAttention(32, 8, n_kv_heads=1)")
    expect_shape(mqa.k_proj.weight, (4, 32), "MQA k_proj.weight (one KV head of head_dim 4)")
    x = torch.randn(2, 5, 32)
    got = call(mqa, x)
    expect_shape(got, (2, 5, 32), "MQA output")
    w = _weights(mqa)
    expect_attention(got, _mha(x, w, 8, 1, 4)[0].float(), "MQA (8 query heads, 1 K/V head) vs attention with its own "
                     "weights", _mha_mistakes(x, w, 8, 1, 4))

    cross = call(MultiHeadAttention, 32, 4, n_kv_heads=2, d_context=12, what="MultiHeadAttention(32, 4, n_kv_heads=2, d_context=12)")
    ctx = torch.randn(2, 9, 12)
    out = call(cross, x, ctx, what="cross-attention forward(x, context)")
    expect_shape(out, (2, 5, 32), "cross-attention output (B, Lq, d_model)")
    out2 = call(cross, x, ctx.flip(1) * 2.0 + 1.0, what="cross-attention forward(x, other context)")
    expect(not torch.allclose(out, out2), "cross-attention output did not change when the context changed: are K and V computed from the context?")
    _, wts = call(cross, x, ctx, return_weights=True, what="cross-attention with return_weights=True")
    expect_shape(wts, (2, 4, 5, 9), "cross-attention weights (B, n_heads, Lq, Lk)")
    w = _weights(cross)
    want, want_w = _mha(x, w, 4, 2, 8, context=ctx)
    mistakes = _mha_mistakes(x, w, 4, 2, 8, context=ctx)
    expect_attention(out, want.float(), "cross-attention vs attention with its own weights", mistakes)
    expect_attention(wts, want_w.float(), "cross-attention weights vs softmax(q kᵀ / √d) with its own weights",
                     mistakes, pick=1)


def check_mha_mask_every_head(MultiHeadAttention):
    """A boolean mask given to MultiHeadAttention (True = may attend) applies to every head: a (B, 1, Lk) padding
    mask and a (B, Lq, Lk) mask give nn.MultiheadAttention's output under the same mask."""
    torch.manual_seed(3)
    d, h = 12, 2
    ref = nn.MultiheadAttention(d, h, batch_first=True)
    mine = call(MultiHeadAttention, d, h, what="MultiHeadAttention(d_model=12, n_heads=2)")
    _copy_from_torch_mha(mine, ref, d)
    w = _weights(mine)
    # B = n_heads = 2: a mask read as one per head instead of one per sequence gives a wrong output, not an error
    x = torch.randn(2, 6, d)
    # Without a mask first: a mistake there is not the mask's.
    out = call(mine, x, what="MultiHeadAttention.forward(x)")
    want, _ = ref(x, x, x, need_weights=False)
    expect_attention(out, want, "no mask, vs nn.MultiheadAttention", _mha_mistakes(x, w, h, h, d // h))
    real = torch.ones(2, 6, dtype=torch.bool)
    real[1, 4:] = False  # the second sequence ends in two padding tokens
    out = call(mine, x, mask=real[:, None, :], what="MultiHeadAttention.forward(x, mask=padding (B, 1, Lk))")
    want, _ = ref(x, x, x, key_padding_mask=~real, need_weights=False)  # torch: True = masked out
    expect_attention(out, want, "padding mask (B, 1, Lk) shared by every head vs nn.MultiheadAttention",
                     _mha_mistakes(x, w, h, h, d // h, mask=real[:, None, :]))
    g = torch.Generator().manual_seed(8)
    mask = torch.rand(2, 6, 6, generator=g) > 0.4
    mask[..., 0] = True  # every query sees key 0: no row is fully masked
    out = call(mine, x, mask=mask, what="MultiHeadAttention.forward(x, mask=(B, Lq, Lk))")
    want, _ = ref(x, x, x, attn_mask=(~mask).repeat_interleave(h, 0), need_weights=False)  # torch: (B·heads, Lq, Lk)
    expect_attention(out, want, "mask (B, Lq, Lk) shared by every head vs nn.MultiheadAttention",
                     _mha_mistakes(x, w, h, h, d // h, mask=mask))


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
