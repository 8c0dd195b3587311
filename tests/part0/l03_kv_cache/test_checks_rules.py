"""Every rule of the lesson-03 checks, with the learner's message it gives, word for word.

tests/part0/test_lesson_checks.py shows each check rejecting mutants of the reference; here the reference passes every
check, each ``call()`` label is pinned by a class raising exactly there (``"<label> raised RuntimeError: boom"``),
the byte messages by caches that hold too much (figures by hand from the MHA model: 4 layers × 4 K/V heads × 16 ×
2 (K and V) × 16 tokens = 8,192 elements: 32,768 bytes in float32, 16,384 in bfloat16), and what the W = 4 run
feeds the learner's attention by a class that records it.
Plain functions without arguments, so that ``tools/mutation.py --verify`` can run them."""
import torch

from part0_foundations.l03_kv_cache import checks, gpt
from tests.support.rules import BOOM, message


def raising(base, init=False, load=False, forward=lambda cache: False):
    """``base`` raising RuntimeError('boom') in its constructor, its load_state_dict, or its forward when
    ``forward(cache)`` holds."""
    class Boom(base):
        def __init__(self, *a, **kw):
            if init:
                raise RuntimeError("boom")
            super().__init__(*a, **kw)

        def load_state_dict(self, *a, **kw):
            if load:
                raise RuntimeError("boom")
            return super().load_state_dict(*a, **kw)

        def forward(self, x, positions, cache=None):
            if forward(cache):
                raise RuntimeError("boom")
            return super().forward(x, positions, cache)
    return Boom


def with_cache(wrap):
    """The reference attention, handing its layer cache through ``wrap``."""
    class Wrapped(gpt.CausalSelfAttention):
        def forward(self, x, positions, cache=None):
            return super().forward(x, positions, None if cache is None else wrap(cache))
    return Wrapped


class _Twice:
    """Appends every chunk twice."""
    def __init__(self, cache):
        self.cache = cache

    def append(self, k, v):
        self.cache.append(k, v)
        return self.cache.append(k, v)


class _AsFloat32:
    """Stores the keys and values in float32 whatever the model's dtype."""
    def __init__(self, cache):
        self.cache = cache

    def append(self, k, v):
        keys, values, pos = self.cache.append(k.float(), v.float())
        return keys.to(k.dtype), values.to(v.dtype), pos


def test_the_reference_passes_every_check():
    for c in checks.LESSON.checks:
        c.fn(getattr(gpt, c.name))


def test_labels():
    attention = gpt.CausalSelfAttention
    assert message(checks.check_cached_equals_uncached, raising(attention, init=True)) == (
        f"Boom(config, window=None) {BOOM}")
    assert message(checks.check_window_cache_stops_at_W, raising(attention, init=True)) == (
        f"Boom(config, window=128) {BOOM}")
    assert message(checks.check_cached_equals_uncached, raising(attention, load=True)) == (
        f"Boom.load_state_dict(the reference weights) {BOOM}")
    assert message(checks.check_mla_cached_equals_uncached, raising(gpt.MLAttention, init=True)) == f"Boom(config) {BOOM}"
    assert message(checks.check_cached_equals_uncached, raising(attention, forward=lambda c: c is not None)) == (
        f"MHA with your attention: generate(..., use_cache=True) {BOOM}")
    assert message(checks.check_cached_equals_uncached, raising(attention, forward=lambda c: c is None)) == (
        f"MHA with your attention: generate(..., use_cache=False) {BOOM}")
    assert message(checks.check_attention_cache_bytes, raising(attention, forward=lambda c: c is not None)) == (
        f"MHA model forward over 16 tokens with a cache {BOOM}")


def test_byte_messages():
    assert message(checks.check_attention_cache_bytes, with_cache(_Twice)) == (
        "MHA, float32, T=16: the cache holds 65,536 bytes, the law says 32,768 bytes")
    assert message(checks.check_attention_cache_bytes, with_cache(_AsFloat32)) == (
        "MHA, bfloat16, T=16: the cache holds 32,768 bytes, the law says 16,384 bytes")


def test_reference_logits_message():
    class NoRopeOnK(gpt.CausalSelfAttention):
        """Rotates the queries only."""
        def forward(self, x, positions, cache=None):
            real = gpt.apply_rope
            calls = []

            def rope_q_only(t, p, theta=10000.0):
                calls.append(1)
                return real(t, p, theta) if len(calls) == 1 else t
            gpt.apply_rope = rope_q_only
            try:
                return super().forward(x, positions, cache)
            finally:
                gpt.apply_rope = real
    msg = message(checks.check_cached_equals_uncached, NoRopeOnK)
    assert msg.startswith("MHA with your attention: logits vs the reference attention with the same weights (project "
                          "q, k, v; RoPE on q and k; query head h uses K/V head h // group; a query at p sees keys "
                          "j ≤ p): differs from the reference by up to "), msg


def test_the_window_run_is_what_its_label_says():
    # W = 4, two sequences of 7 prompt tokens, 10 new: the attention sees positions 0 … 15 (the 17th token is the
    # last one chosen)
    seen = []

    class Records(gpt.CausalSelfAttention):
        def forward(self, x, positions, cache=None):
            if self.window == 4:
                seen.append((x.shape[0], int(positions.max())))
            return super().forward(x, positions, cache)
    checks.check_cached_equals_uncached(Records)
    assert {b for b, _ in seen} == {2}
    assert max(p for _, p in seen) == 15
