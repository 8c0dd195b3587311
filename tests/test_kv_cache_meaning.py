"""Lesson 03's grades mean the learner wrote the caches and the cached attention: degenerate answers earn 0 points in
total (an attention that fills the cache right but computes nothing included), and torch's attention earns nothing."""
import pytest
import torch
from torch import nn

from course.grading import CheckFailed
from part0_foundations.l03_kv_cache import checks
from part0_foundations.l03_kv_cache import gpt as ref

LESSON = checks.LESSON
KINDS = ["zeros", "ones", "echo", "uniform", "random", "constant", "identity", "noise"]


def points(impls: dict) -> tuple[int, dict]:
    earned, messages = 0, {}
    for c in LESSON.checks:
        try:
            c.fn(impls[c.name])
            earned += c.points
        except CheckFailed as exc:
            messages[c.id] = str(exc)
    return earned, messages


def _fill(kind, x, g):
    if kind in ("zeros", "ones", "constant"):
        return torch.full_like(x, {"zeros": 0.0, "ones": 1.0, "constant": 0.37}[kind])
    if kind == "random":
        return torch.randn(x.shape, generator=g, dtype=x.dtype)
    if kind == "noise":
        return x + 0.1 * torch.randn(x.shape, generator=g, dtype=x.dtype)
    if kind == "identity":
        return nn.functional.layer_norm(x, x.shape[-1:])
    if kind == "uniform":   # every earlier position weighted alike
        return x.cumsum(-2) / torch.arange(1, x.shape[-2] + 1, dtype=x.dtype)[:, None]
    return x.clone()


def degenerate(kind):
    g = torch.Generator().manual_seed(5)

    def cache(base):
        class Cache(base):
            def append(self, k, v):
                keys, values, pos = super().append(k, v)
                if kind == "echo":      # the new keys and values handed back, the cache's held ones not
                    return k, v, pos
                return _fill(kind, keys, g), _fill(kind, values, g), pos
        return Cache

    def mixer(base):
        class Mixer(base):      # the cache filled exactly as the reference fills it; the output computes nothing
            def forward(self, x, positions, cache=None):
                super().forward(x, positions, cache)
                return _fill(kind, x, g)
        return Mixer

    return {"LayerKV": cache(ref.LayerKV), "WindowKV": cache(ref.WindowKV),
            "CausalSelfAttention": mixer(ref.CausalSelfAttention), "MLAttention": mixer(ref.MLAttention)}


@pytest.mark.parametrize("kind", KINDS)
def test_degenerate_answers_earn_nothing(kind, one_torch_thread):
    earned, messages = points(degenerate(kind))
    assert earned == 0, (earned, sorted(set(LESSON.ids()) - set(messages)))


def test_torch_attention_earns_nothing(one_torch_thread):
    class Attention(ref.CausalSelfAttention):
        def forward(self, x, positions, cache=None):
            out = super().forward(x, positions, cache)
            q = x.view(x.shape[0], 1, x.shape[1], -1)
            return out + 0 * nn.functional.scaled_dot_product_attention(q, q, q).view(out.shape)

    earned, messages = points(dict(degenerate("zeros"), CausalSelfAttention=Attention))
    assert earned == 0
    for check_id in ("cached_equals_uncached", "attention_cache_bytes", "window_cache_stops_at_W"):
        assert messages[check_id] == ("calls torch's scaled_dot_product_attention: write it from matrix products and "
                                      "softmax"), messages[check_id]
