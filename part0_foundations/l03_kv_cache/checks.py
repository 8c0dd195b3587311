"""Lesson 03 checks: called by the notebook's autograder cells, by tests/autograder/test_kv_cache.py and by the
reference tests. Each takes the learner's definition and raises CheckFailed with a message for the learner.

The expected cache sizes come from ``laws.py`` (the formulas), never from running the reference model: a learner's
cache must hold exactly what the law says, to the byte.
"""
from __future__ import annotations

import dataclasses

import torch

from course.grading import method
from course.grading.contract import (Check, Lesson, one_torch_thread, call, expect, expect_close, expect_close_naming,
                            expect_shape)
from part0_foundations.l03_kv_cache import gpt as ref
from part0_foundations.l03_kv_cache import laws
from part0_foundations.l03_kv_cache.structures import STRUCTURES, law_bytes

ATOL = 1e-5
T_VALUES = (16, 64, 256, 1024)
DTYPES = (torch.float32, torch.bfloat16)




def _nbytes(tensors):
    return sum(t.element_size() * t.numel() for t in tensors)


def _bpe(dtype):
    return torch.empty(0, dtype=dtype).element_size()


# The common mistakes of the cached attention step, each written here and run on the same model: a failure names
# the one whose logits the learner's model gives (and no other).
CAUSES = {
    "rope_from_zero": "the new tokens are rotated as if they started at position 0: apply RoPE at their absolute "
                      "positions (the positions argument)",
    "mask_local": "the causal mask compares row numbers, not positions: a new query at position p sees every cached "
                  "key j ≤ p",
    "kv_groups": "query head h must use K/V head h // group (repeat_interleave), not h % n_kv_heads (repeat)",
    "window_edge": "the window is one key too wide: a query at p sees keys j with p − W < j ≤ p",
}


def _mistaken(mistake):
    """The reference attention step written with one of ``CAUSES``."""
    class Mistaken(ref.CausalSelfAttention):
        def forward(self, x, positions, cache=None):
            B, t, _ = x.shape
            q = self.q_proj(x).view(B, t, self.n_head, self.head_dim).transpose(1, 2)
            k = self.k_proj(x).view(B, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
            v = self.v_proj(x).view(B, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
            rot = torch.arange(t) if mistake == "rope_from_zero" else positions
            q, k = ref.apply_rope(q, rot, self.rope_theta), ref.apply_rope(k, rot, self.rope_theta)
            k_pos = positions
            if cache is not None:
                k, v, k_pos = cache.append(k, v)
            group = self.n_head // self.n_kv_heads
            if group > 1 and mistake == "kv_groups":
                k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
            elif group > 1:
                k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            if mistake == "mask_local":
                allowed = torch.arange(len(k_pos))[None, :] <= torch.arange(t)[:, None]
            else:
                allowed = k_pos[None, :] <= positions[:, None]
            if self.window is not None:
                edge = self.window + (mistake == "window_edge")
                allowed = allowed & (k_pos[None, :] > positions[:, None] - edge)
            out = ref.scaled_dot_product_attention(q, k, v, mask=allowed)
            return self.o_proj(out.transpose(1, 2).reshape(B, t, self.n_head * self.head_dim))
    return Mistaken


def _model(name, dtype=torch.float32, seed=0, window=None, **learner_classes):
    """The small model of a structure, with the learner's mixer class swapped in (same weights). ``window``
    overrides the structure's W (a small W lets a short check run far past it)."""
    torch.manual_seed(seed)
    config = STRUCTURES[name] if window is None else dataclasses.replace(STRUCTURES[name], window=window)
    model = ref.GPT(config).to(dtype).eval()
    for block in model.blocks:
        old = block.mixer
        if isinstance(old, ref.CausalSelfAttention) and "attention" in learner_classes:
            cls = learner_classes["attention"]
            new = call(cls, model.config, window=old.window,
                       what=f"{cls.__name__}(config, window={old.window})")
        elif isinstance(old, ref.MLAttention) and "mla" in learner_classes:
            cls = learner_classes["mla"]
            new = call(cls, model.config, what=f"{cls.__name__}(config)")
        else:
            continue
        call(new.load_state_dict, old.state_dict(), what=f"{type(new).__name__}.load_state_dict(the reference weights)")
        block.mixer = new.to(dtype)
    return model


def _cached_equals_uncached(model, label, n_new=10, reference=None, mistaken=None):
    """Greedy tokens and logits of generate(use_cache=True) and (use_cache=False) must agree, and with
    ``reference`` (the same model with the reference mixers, same weights) the logits must equal its logits.
    ``mistaken(cause)``: the same model with a mistaken mixer, whose logits name a mistake the learner's equal."""
    prompt = torch.randint(0, model.config.vocab_size, (2, 7), generator=torch.Generator().manual_seed(1))

    def logits_of(cause, use_cache):
        def run():
            with torch.no_grad():
                return mistaken(cause).generate(prompt, n_new, use_cache=use_cache, return_logits=True)[1]
        return run
    causes = list(CAUSES) if mistaken is not None else []
    a, la = call(model.generate, prompt, n_new, use_cache=True, return_logits=True,
                 what=f"{label}: generate(..., use_cache=True)")
    b, lb = call(model.generate, prompt, n_new, use_cache=False, return_logits=True,
                 what=f"{label}: generate(..., use_cache=False)")
    if reference is not None:
        with torch.no_grad():
            want = reference(b[:, :-1])[:, prompt.shape[1] - 1:]  # the logits that chose b's new tokens
        expect_close_naming(lb, want, f"{label}: logits vs the reference attention with the same weights (project q, "
                            "k, v; RoPE on q and k; query head h uses K/V head h // group; a query at p sees keys "
                            "j ≤ p)", {CAUSES[c]: logits_of(c, False) for c in causes}, atol=ATOL)
    expect_close_naming(la, lb, f"{label}: logits with the cache vs without",
                        {CAUSES[c]: logits_of(c, True) for c in causes}, atol=ATOL)
    expect(torch.equal(a, b), f"{label}: greedy tokens differ with the cache and without")


def _anchor(name, label, **learner_classes):
    """One forward of the model with the learner's mixer gives the reference model's logits (same weights): a cache
    of the right size behind an attention that computes nothing is not the work."""
    model, reference = _model(name, **learner_classes), _model(name)
    idx = torch.randint(0, model.config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        got = call(model, idx, what=f"{label}: forward over 9 tokens without a cache")
        want = reference(idx)
    expect_close(got, want, f"{label}: logits vs the reference attention with the same weights", atol=ATOL)


def _bytes_match_law(model_factory, name, t_values=T_VALUES):
    for dtype in DTYPES:
        model = model_factory(name, dtype)
        for T in t_values:
            cache = model.new_cache()
            idx = torch.randint(0, model.config.vocab_size, (1, T), generator=torch.Generator().manual_seed(T))
            with torch.no_grad():
                call(model, idx, cache, what=f"{name} model forward over {T} tokens with a cache")
            got, want = cache.nbytes(), law_bytes(model.config, T, _bpe(dtype))
            expect(got == want, f"{name}, {str(dtype).replace('torch.', '')}, T={T}: the cache holds {got:,} bytes, "
                                f"the law says {want:,} bytes")


# --- LayerKV: the cache append ------------------------------------------------------------------------------------
@one_torch_thread
def check_layer_kv_append(LayerKV):
    """Appending chunks of 5, 1, 1 and 3 tokens holds exactly their concatenation, with positions 0..T-1."""
    g = torch.Generator().manual_seed(0)
    chunks = [(torch.randn(2, 3, n, 4, generator=g), torch.randn(2, 3, n, 4, generator=g)) for n in (5, 1, 1, 3)]
    cache = call(LayerKV, what="LayerKV()")
    seen = 0
    for k, v in chunks:
        res = call(cache.append, k, v, what="LayerKV.append(k, v) (append along the token axis, dim 2)")
        expect(isinstance(res, tuple) and len(res) == 3, "LayerKV.append must return (keys, values, positions)")
        keys, values, pos = res
        seen += k.shape[2]
        expect_shape(keys, (2, 3, seen, 4), f"keys after {seen} tokens")
        expect_shape(values, (2, 3, seen, 4), f"values after {seen} tokens")
        expect(torch.equal(pos, torch.arange(seen)), f"positions after {seen} tokens must be 0..{seen - 1}")
    expect_close(keys, torch.cat([k for k, _ in chunks], dim=2), "cached keys vs the appended keys", atol=0)
    expect_close(values, torch.cat([v for _, v in chunks], dim=2), "cached values vs the appended values", atol=0)
    want = 2 * laws.kv_bytes(seen, 1, 3, 4, 4)  # two sequences in the batch
    got = _nbytes(call(cache.tensors, what="LayerKV.tensors()"))
    expect(got == want, f"after {seen} tokens, one layer's cache of 2 sequences holds {got} bytes; the law says "
                        f"{want} bytes")


@one_torch_thread
def check_window_ring_buffer(WindowKV):
    """A ring buffer of W slots: holds min(T, W) tokens, the newest ones, and returns old + new keys with positions."""
    W, g = 8, torch.Generator().manual_seed(2)
    ks = torch.randn(1, 2, 30, 4, generator=g)
    vs = torch.randn(1, 2, 30, 4, generator=g)
    for chunks in ((1,) * 30, (3, 1, 11, 1, 1, 13)):
        cache = call(WindowKV, W, what=f"WindowKV({W})")
        n = 0
        for c in chunks:
            keys, values, pos = call(cache.append, ks[:, :, n:n + c], vs[:, :, n:n + c], what="WindowKV.append(k, v)")
            lo = max(0, n - W)  # the oldest token held before this call
            expect(torch.equal(pos, torch.arange(lo, n + c)),
                   f"after {n} tokens, appending {c}: positions returned should be {lo}..{n + c - 1}, got "
                   f"{pos.tolist()}")
            expect_close(keys, ks[:, :, lo:n + c], f"keys returned when appending {c} tokens after {n}", atol=0)
            expect_close(values, vs[:, :, lo:n + c], f"values returned when appending {c} tokens after {n}", atol=0)
            n += c
            held = _nbytes(call(cache.tensors, what="WindowKV.tensors()"))
            want = laws.sliding_window_bytes(n, 0, 1, W, 2, 4, 4)
            expect(held == want, f"window W={W} after T={n} tokens: the ring holds {held} bytes, the law says "
                                 f"{want} bytes (min(T, W) = {min(n, W)} tokens)")
        ok, ov, opos = call(cache.ordered, what="WindowKV.ordered()")
        expect(torch.equal(opos, torch.arange(30 - W, 30)), "the ring must hold the last W positions")
        expect_close(ok, ks[:, :, 30 - W:], "ring contents (oldest first) vs the last W keys", atol=0)
        expect_close(ov, vs[:, :, 30 - W:], "ring contents (oldest first) vs the last W values", atol=0)


# --- CausalSelfAttention: the cached attention step ---------------------------------------------------------------
@one_torch_thread
def check_cached_equals_uncached(CausalSelfAttention):
    """generate(use_cache=True) equals use_cache=False (greedy tokens, logits within 1e-5) and the reference
    attention's logits, for MHA, GQA, MQA and the sliding-window hybrid with your attention in every layer; the
    window model also with W = 4, run to 17 tokens (a query at p sees keys j with p − W < j ≤ p)."""
    for name, window in (("MHA", None), ("GQA", None), ("MQA", None), ("sliding window", None),
                         ("sliding window", 4)):
        label = f"{name} with your attention" + (f" (W={window}, 17 tokens: keys j with p − W < j ≤ p)" if window else "")
        _cached_equals_uncached(_model(name, window=window, attention=CausalSelfAttention), label,
                                reference=_model(name, window=window),
                                mistaken=lambda c, n=name, w=window: _model(n, window=w, attention=_mistaken(c)))


@one_torch_thread
def check_attention_cache_bytes(CausalSelfAttention):
    """The cache of MHA, GQA and MQA models holds exactly 2 × L × n_kv_heads × head_dim × bytes × T."""
    for name in ("MHA", "GQA", "MQA"):
        _anchor(name, f"{name} with your attention", attention=CausalSelfAttention)
    for name in ("MHA", "GQA", "MQA"):
        _bytes_match_law(lambda n, dt: _model(n, dt, attention=CausalSelfAttention), name)


@one_torch_thread
def check_window_cache_stops_at_W(CausalSelfAttention):
    """Window layers stop growing at W: the hybrid's cache follows the law, and past W only the full layer grows."""
    _anchor("sliding window", "sliding window with your attention", attention=CausalSelfAttention)
    _bytes_match_law(lambda n, dt: _model(n, dt, attention=CausalSelfAttention), "sliding window")
    model = _model("sliding window", attention=CausalSelfAttention)
    W = model.config.window
    cache, sizes = model.new_cache(), []
    for _ in range(4):  # four chunks of W tokens: T = W, 2W, 3W, 4W
        with torch.no_grad():
            call(model, torch.randint(0, 64, (1, W)), cache, what="forward with a cache")
        sizes.append([_nbytes(layer.tensors()) for layer in cache.layers])
    kinds = model.config.layer_types
    for i, kind in enumerate(kinds):
        per = [s[i] for s in sizes]
        if kind == "window":
            expect(len(set(per)) == 1, f"window layer {i}: bytes at T = W, 2W, 3W, 4W are {per}; they must stay at W")
        else:
            expect(per[3] == 4 * per[0], f"full layer {i}: bytes at T = W, 2W, 3W, 4W are {per}; they must grow")


# --- MLA: the latent cache ------------------------------------------------------------------------------------------
@one_torch_thread
def check_mla_cached_equals_uncached(MLAttention):
    """The MLA model with your MLAttention generates the same with the cache and without, with the logits of the
    reference MLA (same weights)."""
    _cached_equals_uncached(_model("MLA", mla=MLAttention), "MLA with your MLAttention", reference=_model("MLA"))


@one_torch_thread
def check_mla_cache_bytes(MLAttention):
    """The MLA cache holds only the latent and the RoPE key: L × (kv_lora_rank + qk_rope_head_dim) × bytes × T."""
    _anchor("MLA", "MLA with your MLAttention", mla=MLAttention)
    model = _model("MLA", mla=MLAttention)
    cache = model.new_cache()
    with torch.no_grad():
        call(model, torch.randint(0, 64, (1, 5)), cache, what="MLA forward with a cache")
    c = model.config
    for i, layer in enumerate(cache.layers):
        widths = sorted(t.shape[-1] for t in layer.tensors())
        expect(widths == sorted([c.kv_lora_rank, c.qk_rope_head_dim]),
               f"MLA layer {i} caches tensors of widths {widths}; it should hold the latent (kv_lora_rank="
               f"{c.kv_lora_rank}) and the RoPE key (qk_rope_head_dim={c.qk_rope_head_dim}), not K and V")
    _bytes_match_law(lambda n, dt: _model(n, dt, mla=MLAttention), "MLA")


LESSON = Lesson(
    package="part0_foundations.l03_kv_cache",
    reference=("part0_foundations.l03_kv_cache.gpt",),
    # The cached attention step is the exercise: torch's attention is off limits (lesson 01's, given, is not).
    forbids=(method.SDPA, method.MHA),
    checks=(
        Check("layer_kv_append", "LayerKV", check_layer_kv_append, 2),
        Check("window_ring_buffer", "WindowKV", check_window_ring_buffer, 2),
        # The model hands your attention the reference caches: calling their append is the point, not a copy.
        Check("cached_equals_uncached", "CausalSelfAttention", check_cached_equals_uncached, 3,
              allows=("LayerKV", "WindowKV")),
        Check("attention_cache_bytes", "CausalSelfAttention", check_attention_cache_bytes, 1,
              allows=("LayerKV", "WindowKV")),
        Check("window_cache_stops_at_W", "CausalSelfAttention", check_window_cache_stops_at_W, 1, hidden=True,
              allows=("LayerKV", "WindowKV")),
        Check("mla_cached_equals_uncached", "MLAttention", check_mla_cached_equals_uncached, 2),
        Check("mla_cache_bytes", "MLAttention", check_mla_cache_bytes, 2),
    ),
)
"""The lesson contract: the notebook's test cells, tests/autograder and the checks' own tests all read it."""
ALL = LESSON.table()
