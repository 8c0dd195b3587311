"""Every rule of every lesson-01 check rejects its own wrong implementation, with that rule's message.

tests/part0/test_lesson_checks.py feeds each check mutants of the reference solution; here each *rule* inside a check (each
``expect``) gets a wrong implementation that breaks that rule alone — built around the reference, so everything
else about it is right — and the check must fail with the rule's own words, at the start of the message (what the
learner reads first). Tolerances are pinned by an error 5× the allowed one (so a tolerance loosened 1000× would let it
through and fail here); where a check allows more than the default 1e-5, an error half the allowance must pass.

The labels a check gives ``call()`` are the learner's message when their code raises: each is pinned by an
implementation that raises ``RuntimeError('boom')`` exactly there, and the message must be
``"<label> raised RuntimeError: boom"`` (course.grading.contract.call's format). The inputs are pinned too: the same every run
(a grade is reproducible) and float32 whatever torch's default dtype, and a second, independent implementation
(batch and heads flattened into one ``torch.bmm``) passes every check, so the inputs have the lesson's shapes."""
import math

import pytest
import torch

from part0_foundations.l01_attention import checks
from part0_foundations.l01_attention.attention import MultiHeadAttention, scaled_dot_product_attention as sdpa
from tests.support.rules import BOOM, message


def rejects(check, impl, start):
    """``check(impl)`` fails and its message starts with ``start``."""
    got = message(check, impl)
    assert got.startswith(start), got     # exact case: the message is the learner's


def passes(check, impl):
    check(impl)


def variant(out=None, weights=None, mask=None, large=None, causal=None):
    """The reference SDPA with one thing changed: ``mask(mask)`` rewrites the mask it is given, ``causal(q, k, mask,
    causal)`` returns the (mask, causal) pair to use instead, ``out(o, q)`` and ``weights(o, w, mask)`` the results,
    ``large(o)`` the output when the logits are large (|q| > 100)."""
    def f(q, k, v, mask_=None, causal_=False, return_weights=False, **kw):
        m, c = kw.pop("mask", mask_), kw.pop("causal", causal_)
        if mask is not None:
            m = mask(m)
        if causal is not None:
            m, c = causal(q, k, m, c)
        o, w = sdpa(q, k, v, mask=m, causal=c, return_weights=True)
        if out is not None:
            o = out(o, q)
        if large is not None and q.abs().max() > 100:
            o = large(o)
        if weights is not None:
            o, w = weights(o, w, m)
        return (o, w) if return_weights else o
    return f


def boom(when):
    """The reference SDPA, raising RuntimeError('boom') on the calls where ``when(q, k, mask, causal,
    return_weights)`` holds."""
    def f(q, k, v, mask=None, causal=False, return_weights=False):
        if when(q, k, mask, causal, return_weights):
            raise RuntimeError("boom")
        return sdpa(q, k, v, mask=mask, causal=causal, return_weights=return_weights)
    return f


def start_aligned(q, k, mask, causal):
    """Causal as a plain lower triangle from the first key (query i sees keys j ≤ i whatever Lk − Lq is)."""
    if causal:
        tri = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        mask = tri if mask is None else mask & tri
    return mask, False


def sdpa_bmm(q, k, v, mask=None, causal=False, return_weights=False):
    """A second, independent SDPA for the lesson's 4-D inputs: batch and heads flattened into one bmm, the mask
    expanded to (B, H, Lq, Lk) first; the causal mask built here from absolute positions."""
    b, h, lq, d = q.shape
    lk = k.shape[-2]
    scores = torch.bmm(q.reshape(b * h, lq, d), k.reshape(b * h, lk, d).transpose(1, 2)) * d ** -0.5
    allowed = torch.ones(b, h, lq, lk, dtype=torch.bool)
    if mask is not None:
        allowed = allowed & mask.expand(b, h, lq, lk)
    if causal:
        allowed = allowed & (torch.arange(lk)[None, :] <= torch.arange(lk - lq, lk)[:, None])
    allowed = allowed.reshape(b * h, lq, lk)
    scores = scores.masked_fill(~allowed, -math.inf)
    top = scores.amax(-1, keepdim=True).nan_to_num(0.0, neginf=0.0)
    e = (scores - top).exp()
    w = e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)
    out = torch.bmm(w, v.reshape(b * h, lk, v.shape[-1])).reshape(b, h, lq, v.shape[-1])
    w = w.reshape(b, h, lq, lk)
    return (out, w) if return_weights else out


SDPA_CHECKS = [c.fn for c in checks.LESSON.checks if c.name == "scaled_dot_product_attention"]
MHA_CHECKS = [c.fn for c in checks.LESSON.checks if c.name == "MultiHeadAttention"]


def test_the_reference_passes_every_check():
    for c in checks.LESSON.checks:
        c.fn(MultiHeadAttention if c.name == "MultiHeadAttention" else sdpa)


@pytest.mark.parametrize("check", SDPA_CHECKS, ids=lambda c: c.__name__)
def test_a_second_implementation_passes(check):
    check(sdpa_bmm)


@pytest.mark.parametrize("check", SDPA_CHECKS, ids=lambda c: c.__name__)
def test_inputs_are_the_same_every_run(check):
    def spy(seen):
        def f(q, k, v, mask=None, causal=False, return_weights=False):
            seen.append((q.clone(), k.clone(), v.clone(), None if mask is None else mask.clone()))
            return sdpa(q, k, v, mask=mask, causal=causal, return_weights=return_weights)
        return f
    runs = []
    for seed in (100, 200):      # whatever the global generator holds, the check draws the same inputs
        torch.manual_seed(seed)
        runs.append([])
        check(spy(runs[-1]))
    assert len(runs[0]) == len(runs[1]) > 0
    for a, b in zip(*runs):
        for x, y in zip(a, b):
            assert (x is None and y is None) or torch.equal(x, y)


def test_inputs_are_float32_whatever_the_default_dtype():
    seen = []

    def spy(q, k, v, mask=None, causal=False, return_weights=False):
        seen.append((q.dtype, k.dtype, v.dtype))
        return sdpa(q, k, v, mask=mask, causal=causal, return_weights=return_weights)
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        checks.check_sdpa_matches_torch(spy)
    finally:
        torch.set_default_dtype(before)
    assert seen and all(d == (torch.float32,) * 3 for d in seen)


# --- sdpa_matches_torch: shape, no mask (with its tolerance), boolean mask, causal -----------------------------------
def test_sdpa_matches_torch_rules():
    c = checks.check_sdpa_matches_torch
    rejects(c, variant(out=lambda o, q: o[..., :5]),
            "scaled_dot_product_attention output: expected shape (2, 3, 5, 6), got (2, 3, 5, 5)")
    # 5e-5 off everywhere: 5 × the allowed 1e-5 (a tolerance loosened 1000× would pass it)
    rejects(c, variant(out=lambda o, q: o + 5e-5), "no mask: softmax(q kᵀ / √d) v: differs from the reference")
    mask_rule = "boolean mask (True = may attend; masked scores → −inf before softmax): differs from the reference"
    rejects(c, variant(mask=lambda m: None), mask_rule)                              # ignores its mask
    rejects(c, variant(mask=lambda m: None if m is None else ~m),                   # reads True as "masked"
            mask_rule.replace("differs from the reference", checks.CAUSES["mask_inverted"]))
    # sequence b's mask given to the wrong rows: batch and heads flattened, the (B, 1, Lq, Lk) mask tiled head-major
    def tiled(m):
        if m is None:
            return None
        flat = m.expand(2, 1, 5, 7).reshape(2, 5, 7).repeat(3, 1, 1)           # order h·B + b, read as b·H + h
        return flat.reshape(2, 3, 5, 7)
    rejects(c, variant(mask=tiled), mask_rule)
    rejects(c, variant(causal=lambda q, k, m, cz: (m, False)), "causal=True (query i sees keys j ≤ i): differs")


def test_sdpa_matches_torch_labels():
    c = checks.check_sdpa_matches_torch
    rejects(c, boom(lambda q, k, m, cz, rw: m is None and not cz), f"scaled_dot_product_attention(q, k, v) {BOOM}")
    rejects(c, boom(lambda q, k, m, cz, rw: m is not None),
            f"scaled_dot_product_attention(q, k, v, mask=mask) {BOOM}")
    rejects(c, boom(lambda q, k, m, cz, rw: cz), f"scaled_dot_product_attention(q, k, v, causal=True) {BOOM}")


# --- sdpa_causal_decode: a decode step, a chunk of queries, mask and causal together -----------------------------------
def test_sdpa_causal_decode_rules():
    c = checks.check_sdpa_causal_decode
    decode = "one decode step (Lq=1 over Lk=7 keys, causal=True): differs from the reference"
    rejects(c, variant(causal=start_aligned),
            "one decode step (Lq=1 over Lk=7 keys, causal=True): " + checks.CAUSES["causal_start"])
    rejects(c, variant(out=lambda o, q: o + 5e-5), decode)                          # 5 × the allowed 1e-5
    # a decode step special-cased (no mask for one query), a chunk of queries still aligned to the first key
    one_query_sees_all = lambda q, k, m, cz: (m, False) if q.shape[-2] == 1 else start_aligned(q, k, m, cz)
    chunk = "3 queries over 7 keys (causal=True): query i sits at position Lk − Lq + i = 4 + i and sees keys j ≤ 4 + i"
    rejects(c, variant(causal=one_query_sees_all), f"{chunk}: {checks.CAUSES['causal_start']}")
    # right for one query, 5e-5 off for a chunk of them: the rule's own words, no cause guessed
    rejects(c, variant(out=lambda o, q: o + 5e-5 * (q.shape[-2] == 3)), f"{chunk}: differs")
    both = "mask and causal=True together: a key is seen only where both allow it: differs from the reference"
    rejects(c, variant(causal=lambda q, k, m, cz: (None, cz)), both)                   # causal replaces the mask
    rejects(c, variant(causal=lambda q, k, m, cz: (m, cz and m is None)), both)        # the mask replaces causal
    # each sequence keeps its own mask: the two sequences' masks swapped is refused
    rejects(c, variant(mask=lambda m: None if m is None else m.roll(1, 0)), both)


def test_sdpa_causal_decode_labels():
    c = checks.check_sdpa_causal_decode
    rejects(c, boom(lambda q, k, m, cz, rw: q.shape[-2] == 1),
            f"scaled_dot_product_attention(q[..., -1:, :], k, v, causal=True) {BOOM}")
    rejects(c, boom(lambda q, k, m, cz, rw: q.shape[-2] == 3 and m is None),
            f"scaled_dot_product_attention(q[..., -3:, :], k, v, causal=True) {BOOM}")
    rejects(c, boom(lambda q, k, m, cz, rw: m is not None and cz),
            f"scaled_dot_product_attention(q[..., -3:, :], k, v, mask=mask, causal=True) {BOOM}")


# --- sdpa_stable ------------------------------------------------------------------------------------------------------
def test_sdpa_stable_rules():
    c = checks.check_sdpa_stable
    # NaN everywhere, not where exp overflows: the rule, no cause guessed (the overflow's own test names the row max)
    rejects(c, variant(large=lambda o: o * float("nan")), "large logits (|q kᵀ| ~ 1e4) produced NaN/inf")
    # 5e-4 off on large logits only: 5 × the allowed 1e-4 ...
    rejects(c, variant(large=lambda o: o + 5e-4), "large logits (|q kᵀ| ~ 1e4): differs")
    # ... and 5e-5 off passes: half the allowance of this check (the default 1e-5 would refuse it)
    passes(c, variant(large=lambda o: o + 5e-5))
    rejects(c, boom(lambda q, k, m, cz, rw: bool(q.abs().max() > 100)),
            f"scaled_dot_product_attention with large logits {BOOM}")


# --- sdpa_masked_weights_zero ------------------------------------------------------------------------------------------
def _masked_weights(change):
    return variant(weights=lambda o, w, m: change(o, w, m))


def test_sdpa_masked_weights_zero_rules():
    c = checks.check_sdpa_masked_weights_zero
    no_tuple = lambda q, k, v, mask=None, causal=False, return_weights=False: sdpa(q, k, v, mask=mask)
    rejects(c, no_tuple, "with return_weights=True, return (output, weights)")
    rejects(c, _masked_weights(lambda o, w, m: (o, w.transpose(-1, -2))),
            "weights: expected shape (2, 3, 5, 7), got (2, 3, 7, 5)")
    not_nan = ("a fully masked row gives zero weights and a zero output, not NaN (every score of that row is −inf: "
               "its row maximum and its sum need a guard)")
    rejects(c, _masked_weights(lambda o, w, m: (o, w.masked_fill(~m.any(-1, keepdim=True), float("nan")))),
            not_nan)
    # right weights, but a NaN output on the fully masked row
    rejects(c, _masked_weights(lambda o, w, m: (o.masked_fill(~m.any(-1, keepdim=True), float("nan")), w)),
            not_nan)
    # a fully masked row spread evenly (1/7 each) instead of zero
    rejects(c, _masked_weights(lambda o, w, m: (o, torch.where(m.any(-1, keepdim=True), w, 1 / 7))),
            "a fully masked row gives zero weights and a zero output")
    # masked positions of attendable rows get 1e-9, not exactly 0 (rows still sum to 1 within 1e-6)
    tiny = lambda o, w, m: (o, w + 1e-9 * (~m & m.any(-1, keepdim=True)))
    rejects(c, _masked_weights(tiny), "masked positions must get exactly zero weight (use -inf before softmax)")
    rows = "each attendable row of weights must sum to 1: differs from the reference"
    rejects(c, _masked_weights(lambda o, w, m: (o, w * 0.5)), rows)
    # exp(s − row max) not divided by its sum: right only where a row sees a single key
    top = lambda w: w.amax(-1, keepdim=True)
    rejects(c, _masked_weights(lambda o, w, m: (o, torch.where(top(w) > 0, w / top(w), w))), rows)
    # rows summing to 1 + 1.5e-5: over the 1e-6 + 1e-5·1 allowed (the default atol 1e-5 would let it through)
    rejects(c, _masked_weights(lambda o, w, m: (o, w * (1 + 1.5e-5))), rows)
    rejects(c, boom(lambda q, k, m, cz, rw: rw), f"scaled_dot_product_attention(..., return_weights=True) {BOOM}")
    # zero where masked and rows of 1, but spread evenly over the keys the mask allows: not attention's weights
    def uniform(o, w, m):
        even = m.expand(w.shape).to(w.dtype)
        return o, even / even.sum(-1, keepdim=True).clamp_min(1)
    rejects(c, _masked_weights(uniform), "weights: softmax(q kᵀ / √d) over the keys the mask allows: differs")
    # 5e-5 off (5 × allowed) except on the fully masked row, which stays zero
    rejects(c, _masked_weights(lambda o, w, m: (o + 5e-5 * (o != 0), w)),
            "output with return_weights=True: weights @ v: differs")


# --- MultiHeadAttention ------------------------------------------------------------------------------------------------
class Off(MultiHeadAttention):
    """The reference MHA with one rule broken, chosen by the class attribute ``broken``."""
    broken = ""

    def __init__(self, d_model, n_heads, n_kv_heads=None, head_dim=None, d_context=None, bias=True):
        super().__init__(d_model, n_heads, n_kv_heads, head_dim, d_context, bias)
        if self.broken == "kv_proj_width":
            self.k_proj = torch.nn.Linear(self.d_context, n_heads * self.head_dim, bias=bias)

    def forward(self, x, context=None, mask=None, causal=False, return_weights=False):
        if self.broken == "ignores_context":
            context = None if context is None or context.shape[-1] != self.d_model else context
            if context is None and x.shape[-1] == self.d_model and self.d_context != self.d_model:
                context = x.new_zeros(x.shape[0], 9, self.d_context)     # a fixed context, whatever is passed
        if self.broken == "causal_ignored":
            causal = False
        if mask is not None and self.broken == "mask_ignored":
            mask = None
        if mask is not None and self.broken == "mask_per_head":     # (B, a, Lk) read as (1, B, a, Lk): head j gets
            mask = mask.unsqueeze(0)                                  # sequence j's mask (B = n_heads here)
        if mask is not None and self.broken == "mask_as_padding":   # the first query's row taken for every query
            mask = mask[:, :1]
        out, w = super().forward(x, context, mask=mask, causal=causal, return_weights=True)
        if self.broken == "out_shape":
            out = out[:, :-1]
        if self.broken == "out_off" or (self.broken == "gqa_off" and 1 < self.n_kv_heads < self.n_heads) \
                or (self.broken == "mha_off" and self.n_kv_heads == self.n_heads) \
                or (self.broken == "mqa_off" and self.n_kv_heads == 1) \
                or (self.broken == "cross_off" and context is not None and not return_weights) \
                or (self.broken == "padding_off" and mask is not None):
            out = out + 5e-5
        if self.broken == "weights_off" and context is not None:
            w = w * 0.5
        if self.broken == "weights_shape":
            w = w.transpose(-1, -2)
        return (out, w) if return_weights else out


def broken(what):
    return type(f"Off_{what}", (Off,), {"broken": what})


class Boom(MultiHeadAttention):
    """The reference MHA raising RuntimeError('boom') where ``init_fails(args)`` holds for the constructor's arguments
    as passed (d_model, n_heads, n_kv_heads, head_dim, d_context) or ``forward_fails(self, x, context, mask, causal,
    return_weights, n)`` for the n-th call (from 1) of forward on this module."""
    init_fails = staticmethod(lambda args: False)
    forward_fails = staticmethod(lambda *a: False)

    def __init__(self, d_model, n_heads, n_kv_heads=None, head_dim=None, d_context=None, bias=True):
        if self.init_fails((d_model, n_heads, n_kv_heads, head_dim, d_context)):
            raise RuntimeError("boom")
        super().__init__(d_model, n_heads, n_kv_heads, head_dim, d_context, bias)
        self.calls = 0

    def forward(self, x, context=None, mask=None, causal=False, return_weights=False):
        self.calls += 1
        if self.forward_fails(self, x, context, mask, causal, return_weights, self.calls):
            raise RuntimeError("boom")
        return super().forward(x, context, mask=mask, causal=causal, return_weights=return_weights)


def booms(init=None, forward=None):
    attrs = {}
    if init is not None:
        attrs["init_fails"] = staticmethod(init)
    if forward is not None:
        attrs["forward_fails"] = staticmethod(forward)
    return type("BoomMHA", (Boom,), attrs)


def test_mha_matches_torch_rules():
    c = checks.check_mha_matches_torch
    rejects(c, broken("out_shape"), "MultiHeadAttention output: expected shape (2, 6, 16), got (2, 5, 16)")
    rejects(c, broken("out_off"), "self-attention vs nn.MultiheadAttention: differs")       # 5 × the 1e-5 allowed
    rejects(c, broken("causal_ignored"), "causal self-attention vs nn.MultiheadAttention: differs")


def test_mha_matches_torch_labels():
    c = checks.check_mha_matches_torch
    rejects(c, booms(init=lambda a: a == (16, 4, None, None, None)),
            f"MultiHeadAttention(d_model=16, n_heads=4) {BOOM}")
    rejects(c, booms(forward=lambda s, x, ctx, m, cz, rw, n: not cz), f"MultiHeadAttention.forward(x) {BOOM}")
    rejects(c, booms(forward=lambda s, x, ctx, m, cz, rw, n: cz), f"MultiHeadAttention.forward(x, causal=True) {BOOM}")


def test_mha_mask_every_head_rules():
    c = checks.check_mha_mask_every_head
    padding = "padding mask (B, 1, Lk) shared by every head vs nn.MultiheadAttention: differs from the reference"
    rejects(c, broken("mask_ignored"), padding)
    rejects(c, broken("mask_per_head"), padding)          # B = n_heads: a wrong output, not an error
    rejects(c, broken("out_off"), "no mask, vs nn.MultiheadAttention: differs from the reference")  # 5 × 1e-5
    rejects(c, broken("padding_off"), padding)            # only with a mask: 5 × the allowed 1e-5
    rejects(c, broken("mask_as_padding"),
            "mask (B, Lq, Lk) shared by every head vs nn.MultiheadAttention: differs from the reference")


def test_mha_mask_every_head_labels():
    c = checks.check_mha_mask_every_head
    rejects(c, booms(init=lambda a: a == (12, 2, None, None, None)),
            f"MultiHeadAttention(d_model=12, n_heads=2) {BOOM}")
    rejects(c, booms(forward=lambda s, x, ctx, m, cz, rw, n: m is None), f"MultiHeadAttention.forward(x) {BOOM}")
    rejects(c, booms(forward=lambda s, x, ctx, m, cz, rw, n: m is not None and m.shape[1] == 1),
            f"MultiHeadAttention.forward(x, mask=padding (B, 1, Lk)) {BOOM}")
    rejects(c, booms(forward=lambda s, x, ctx, m, cz, rw, n: m is not None and m.shape[1] > 1),
            f"MultiHeadAttention.forward(x, mask=(B, Lq, Lk)) {BOOM}")


def test_gqa_equals_repeated_mha_rules():
    c = checks.check_gqa_equals_repeated_mha
    rejects(c, broken("kv_proj_width"),
            "GQA k_proj.weight (n_kv_heads·head_dim, d_model): expected shape (10, 24), got (30, 24)")
    rejects(c, broken("gqa_off"), "GQA (6 query heads, 2 K/V heads, causal) vs attention with its own weights: "
                                  "differs")    # only GQA 5e-5 off: 5 × allowed
    # GQA right, the MHA it is compared with (n_kv_heads = n_heads) 5e-5 off
    rejects(c, broken("mha_off"), "GQA vs MHA with repeated K/V heads (query head h uses K/V head h // group): "
                                  "differs")


def test_gqa_equals_repeated_mha_labels():
    # the arguments the label names, exactly as passed: n_kv_heads=6 is given, not left to default
    c = checks.check_gqa_equals_repeated_mha
    rejects(c, booms(init=lambda a: a == (24, 6, 2, 5, None)),
            f"MultiHeadAttention(24, 6, n_kv_heads=2, head_dim=5) {BOOM}")
    rejects(c, booms(init=lambda a: a == (24, 6, 6, 5, None)),
            f"MultiHeadAttention(24, 6, n_kv_heads=6, head_dim=5) {BOOM}")
    rejects(c, booms(forward=lambda s, x, ctx, m, cz, rw, n: s.n_kv_heads == 2), f"GQA forward(x, causal=True) {BOOM}")
    rejects(c, booms(forward=lambda s, x, ctx, m, cz, rw, n: s.n_kv_heads == 6), f"MHA forward(x, causal=True) {BOOM}")


def test_mqa_and_cross_attention_rules():
    c = checks.check_mqa_and_cross_attention
    rejects(c, broken("kv_proj_width"), "MQA k_proj.weight (one KV head of head_dim 4): expected shape (4, 32), got "
                                        "(32, 32)")
    rejects(c, broken("out_shape"), "MQA output: expected shape (2, 5, 32), got (2, 4, 32)")
    rejects(c, broken("ignores_context"), "cross-attention output did not change when the context changed: are K and "
                                          "V computed from the context?")
    rejects(c, broken("weights_shape"), "cross-attention weights (B, n_heads, Lq, Lk): expected shape (2, 4, 5, 9), "
                                        "got (2, 4, 9, 5)")
    # the cross-attention output cut short (the MQA output of another width is fine)
    def forward(self, x, context=None, **kw):
        out = MultiHeadAttention.forward(self, x, context, **kw)
        return out if context is None or kw.get("return_weights") else out[:, :-1]
    cut = type("CutCross", (MultiHeadAttention,), {"forward": forward})
    rejects(c, cut, "cross-attention output (B, Lq, d_model): expected shape (2, 5, 32), got (2, 4, 32)")
    # anchored on attention with the module's own weights: 5e-5 off (5 × allowed) in one place each
    rejects(c, broken("mqa_off"), "MQA (8 query heads, 1 K/V head) vs attention with its own weights: differs")
    rejects(c, broken("cross_off"), "cross-attention vs attention with its own weights: differs")
    rejects(c, broken("weights_off"), "cross-attention weights vs softmax(q kᵀ / √d) with its own weights: differs")


def test_mqa_and_cross_attention_labels():
    c = checks.check_mqa_and_cross_attention
    rejects(c, booms(init=lambda a: a == (32, 8, 1, None, None)), f"MultiHeadAttention(32, 8, n_kv_heads=1) {BOOM}")
    rejects(c, booms(init=lambda a: a == (32, 4, 2, None, 12)),
            f"MultiHeadAttention(32, 4, n_kv_heads=2, d_context=12) {BOOM}")
    ctx_call = lambda k: (lambda s, x, ctx, m, cz, rw, n: ctx is not None and not rw and n == k)
    rejects(c, booms(forward=ctx_call(1)), f"cross-attention forward(x, context) {BOOM}")
    rejects(c, booms(forward=ctx_call(2)), f"cross-attention forward(x, other context) {BOOM}")
    rejects(c, booms(forward=lambda s, x, ctx, m, cz, rw, n: rw), f"cross-attention with return_weights=True {BOOM}")
