"""Every rule of every lesson-01 check rejects its own wrong implementation, with that rule's message.

tests/test_lesson_checks.py feeds each check mutants of the reference solution; here each *rule* inside a check (each
``expect``) gets a wrong implementation that breaks that rule alone — built around the reference, so everything
else about it is right — and the check must fail with the rule's own words. Tolerances are pinned by an error 5×
the allowed one (so a tolerance loosened 1000× would let it through and fail here)."""
import pytest
import torch

from course.grading import CheckFailed
from part0_foundations.l01_attention import checks
from part0_foundations.l01_attention.attention import MultiHeadAttention, scaled_dot_product_attention as sdpa


def rejects(check, impl, words):
    with pytest.raises(CheckFailed) as err:
        check(impl)
    assert words in str(err.value), str(err.value)     # exact case: the message is the learner's


def variant(out=None, weights=None, mask=None, large=None):
    """The reference SDPA with one thing changed: ``mask(mask)`` rewrites the mask it is given, ``out(o, q)`` and
    ``weights(w, mask)`` the results, ``large(o)`` the output when the logits are large (|q| > 100)."""
    def f(q, k, v, mask_=None, causal=False, return_weights=False, **kw):
        m = kw.pop("mask", mask_)
        if mask is not None:
            m = mask(m)
        o, w = sdpa(q, k, v, mask=m, causal=causal, return_weights=True)
        if out is not None:
            o = out(o, q)
        if large is not None and q.abs().max() > 100:
            o = large(o)
        if weights is not None:
            o, w = weights(o, w, m)
        return (o, w) if return_weights else o
    return f


def test_the_reference_passes_every_check():
    for c in checks.LESSON.checks:
        c.fn(MultiHeadAttention if c.name == "MultiHeadAttention" else sdpa)


# --- sdpa_matches_torch: shape, no mask (with its tolerance), boolean mask, causal -----------------------------------
def test_sdpa_matches_torch_rules():
    c = checks.check_sdpa_matches_torch
    rejects(c, variant(out=lambda o, q: o[..., :5]), "output: expected shape (2, 3, 5, 6)")
    # 5e-5 off everywhere: 5 × the allowed 1e-5 (a tolerance loosened 1000× would pass it)
    rejects(c, variant(out=lambda o, q: o + 5e-5), "no mask: softmax(q kᵀ / √d) v: differs from the reference")
    rejects(c, variant(mask=lambda m: None), "boolean mask (True = may attend")       # ignores its mask
    rejects(c, variant(mask=lambda m: None if m is None else ~m), "boolean mask")     # reads True as "masked"
    causal_ignored = lambda q, k, v, mask=None, causal=False, return_weights=False: sdpa(q, k, v, mask=mask)
    rejects(c, causal_ignored, "causal=True (query i sees keys j ≤ i)")


def test_sdpa_stable_rules():
    c = checks.check_sdpa_stable
    rejects(c, variant(large=lambda o: o * float("nan")), "large logits produced NaN/inf")
    # 5e-4 off on large logits only: 5 × the allowed 1e-4
    rejects(c, variant(large=lambda o: o + 5e-4), "large logits (subtract the row max before exp): differs")


def _masked_weights(change):
    return variant(weights=lambda o, w, m: change(o, w, m))


def test_sdpa_masked_weights_zero_rules():
    c = checks.check_sdpa_masked_weights_zero
    no_tuple = lambda q, k, v, mask=None, causal=False, return_weights=False: sdpa(q, k, v, mask=mask)
    rejects(c, no_tuple, "with return_weights=True, return (output, weights)")
    rejects(c, _masked_weights(lambda o, w, m: (o, w.transpose(-1, -2))), "weights: expected shape (2, 3, 5, 7)")
    rejects(c, _masked_weights(lambda o, w, m: (o, w.masked_fill(~m.any(-1, keepdim=True), float("nan")))),
            "not NaN")
    # a fully masked row spread evenly (1/7 each) instead of zero
    rejects(c, _masked_weights(lambda o, w, m: (o, torch.where(m.any(-1, keepdim=True), w, 1 / 7))),
            "a fully masked row gives zero weights and a zero output")
    # masked positions of attendable rows get 1e-9, not exactly 0 (rows still sum to 1 within 1e-6)
    tiny = lambda o, w, m: (o, w + 1e-9 * (~m & m.any(-1, keepdim=True)))
    rejects(c, _masked_weights(tiny), "masked positions must get exactly zero weight")
    rejects(c, _masked_weights(lambda o, w, m: (o, w * 0.5)), "each attendable row of weights must sum to 1")


def test_sdpa_errors_rules():
    c = checks.check_sdpa_errors
    def without(rule):
        def f(q, k, v, mask=None, causal=False, return_weights=False):
            try:
                return sdpa(q, k, v, mask=mask, causal=causal, return_weights=return_weights)
            except ValueError as e:
                if rule(q, k, v, mask):
                    raise ValueError("bad input") from None   # refused, but the argument is not named
                raise
        return f
    rejects(c, lambda *a, **k: (_ for _ in ()).throw(ValueError("no")), "scaled_dot_product_attention(q, k, v)")
    rejects(c, without(lambda q, k, v, m: k.shape[-1] != q.shape[-1]), "k with the wrong head_dim")
    rejects(c, without(lambda q, k, v, m: v.shape[-2] != k.shape[-2]), "v with a different length than k")
    rejects(c, without(lambda q, k, v, m: m is not None), "a mask of the wrong shape")


# --- MultiHeadAttention ------------------------------------------------------------------------------------------------
class Off(MultiHeadAttention):
    """The reference MHA with one rule broken, chosen by the class attribute ``broken``."""
    broken = ""

    def __init__(self, d_model, n_heads, n_kv_heads=None, head_dim=None, d_context=None, bias=True):
        if self.broken == "accepts_bad_groups" and n_kv_heads and n_heads % n_kv_heads:
            n_kv_heads = 1
        super().__init__(d_model, n_heads, n_kv_heads, head_dim, d_context, bias)
        if self.broken == "kv_proj_width":
            self.k_proj = torch.nn.Linear(self.d_context, n_heads * self.head_dim, bias=bias)

    def forward(self, x, context=None, mask=None, causal=False, return_weights=False):
        if self.broken == "accepts_any_width" and x.shape[-1] != self.d_model:
            x = torch.nn.functional.pad(x, (0, self.d_model - x.shape[-1]))
        if self.broken == "ignores_context":
            context = None if context is None or context.shape[-1] != self.d_model else context
            if context is None and x.shape[-1] == self.d_model and self.d_context != self.d_model:
                context = x.new_zeros(x.shape[0], 9, self.d_context)     # a fixed context, whatever is passed
        if self.broken == "causal_ignored":
            causal = False
        out, w = super().forward(x, context, mask=mask, causal=causal, return_weights=True)
        if self.broken == "out_shape":
            out = out[:, :-1]
        if self.broken == "out_off" or (self.broken == "gqa_off" and 1 < self.n_kv_heads < self.n_heads):
            out = out + 5e-5
        if self.broken == "weights_shape":
            w = w.transpose(-1, -2)
        return (out, w) if return_weights else out


def broken(what):
    return type(f"Off_{what}", (Off,), {"broken": what})


def test_mha_matches_torch_rules():
    c = checks.check_mha_matches_torch
    rejects(c, broken("out_shape"), "MultiHeadAttention output: expected shape (2, 6, 16)")
    rejects(c, broken("out_off"), "self-attention vs nn.MultiheadAttention: differs")       # 5 × the 1e-5 allowed
    rejects(c, broken("causal_ignored"), "causal self-attention vs nn.MultiheadAttention")


def test_gqa_equals_repeated_mha_rules():
    c = checks.check_gqa_equals_repeated_mha
    rejects(c, broken("kv_proj_width"), "GQA k_proj.weight (n_kv_heads·head_dim, d_model)")
    rejects(c, broken("gqa_off"), "GQA vs MHA with repeated K/V heads")    # only GQA 5e-5 off: 5 × allowed


def test_mqa_and_cross_attention_rules():
    c = checks.check_mqa_and_cross_attention
    rejects(c, broken("kv_proj_width"), "MQA k_proj.weight (one KV head of head_dim 4)")
    rejects(c, broken("out_shape"), "MQA output: expected shape (2, 5, 32)")
    rejects(c, broken("ignores_context"), "cross-attention output did not change when the context changed")
    rejects(c, broken("weights_shape"), "cross-attention weights (B, n_heads, Lq, Lk)")


def test_mha_errors_rules():
    c = checks.check_mha_errors
    # without the group rule, 32 / 6 still fails on head_dim: refused, but not for the reason the rule names
    rejects(c, broken("accepts_bad_groups"), "n_heads=6, n_kv_heads=4: raised ValueError but the message does not "
                                             "name 'n_kv_heads'")
    rejects(c, broken("accepts_any_width"), "an input of width 31 for d_model=32: expected ValueError naming 'x'")
