"""Lesson 03's grades mean the learner wrote the caches and the cached attention: degenerate answers earn 0 points in
total (an attention that fills the cache right but computes nothing included), and torch's attention earns nothing."""
import pytest
import torch
from torch import nn

from course.grading.contract import CheckFailed
from part0_foundations.l03_kv_cache import checks
from part0_foundations.l03_kv_cache import gpt as ref
from tests.support.rules import DEGENERATE_KINDS, lesson_points

LESSON = checks.LESSON
KINDS = DEGENERATE_KINDS


def points(impls: dict) -> tuple[int, dict]:
    return lesson_points(LESSON, impls)


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


# --- hints name the real cause ------------------------------------------------------------------------------------------
def learner_attention(mistake):
    """A learner's cached attention step with one mistake (written here, apart from the checks' own model of it)."""
    class Attention(ref.CausalSelfAttention):
        def forward(self, x, positions, cache=None):
            b, t, _ = x.shape
            heads = lambda proj, n: proj(x).reshape(b, t, n, self.head_dim).permute(0, 2, 1, 3)
            q, k, v = heads(self.q_proj, self.n_head), heads(self.k_proj, self.n_kv_heads), heads(self.v_proj,
                                                                                                   self.n_kv_heads)
            where = torch.arange(t) if mistake == "rope_from_zero" else positions
            q, k = ref.apply_rope(q, where, self.rope_theta), ref.apply_rope(k, where, self.rope_theta)
            key_pos = positions
            if cache is not None:
                k, v, key_pos = cache.append(k, v)
            g = self.n_head // self.n_kv_heads
            if mistake == "kv_groups":
                k, v = torch.cat([k] * g, dim=1), torch.cat([v] * g, dim=1)
            else:
                k, v = torch.repeat_interleave(k, g, dim=1), torch.repeat_interleave(v, g, dim=1)
            if mistake == "mask_local":
                ok = torch.ones(t, len(key_pos), dtype=torch.bool).tril()
            else:
                ok = key_pos[None, :] <= positions[:, None]
            if self.window is not None:
                ok = ok & (key_pos[None, :] >= positions[:, None] - self.window + (mistake != "window_edge"))
            out = ref.scaled_dot_product_attention(q, k, v, mask=ok)
            return self.o_proj(out.permute(0, 2, 1, 3).reshape(b, t, -1))
    return Attention


@pytest.mark.parametrize("mistake", sorted(checks.CAUSES))
def test_a_cached_attention_mistake_is_named_and_nothing_else(mistake, one_torch_thread):
    try:
        LESSON.get("cached_equals_uncached").fn(learner_attention(mistake))
        raise AssertionError(f"the check passed {mistake}")
    except CheckFailed as exc:
        message = str(exc)
    assert checks.CAUSES[mistake] in message, message
    assert not [c for c in checks.CAUSES if c != mistake and checks.CAUSES[c] in message], message


def test_the_learner_like_attention_is_right_without_a_mistake(one_torch_thread):
    LESSON.get("cached_equals_uncached").fn(learner_attention(None))
