"""Lesson 01's grades mean the learner wrote attention (course.grading.method and the checks' anchors):

- an implementation that reaches torch's attention, however it gets there, earns nothing, and the message names the
  call;
- degenerate answers (zeros, ones, the input echoed, uniform weights, random output, a constant, the identity, noise
  in the reference's shape) earn nothing: 0 points in total, in this process and through the sandboxed grader;
- each common mistake fails with a message that names it, and no message names a cause that was not committed.

The implementations here are written independently of the checks' own model of the mistakes (a learner's code with
one flag per mistake)."""
import importlib
import json
import math

import pytest
import torch
from torch import nn

from course.grading.contract import CheckFailed
from part0_foundations.l01_attention import checks
from part0_foundations.l01_attention.attention import MultiHeadAttention, scaled_dot_product_attention

LESSON = checks.LESSON
SDPA_IDS = [c.id for c in LESSON.checks if c.name == "scaled_dot_product_attention"]
MHA_IDS = [c.id for c in LESSON.checks if c.name == "MultiHeadAttention"]


def grade(sdpa=None, mha=None) -> dict:
    """check id → (passed, message) for the checks of the definitions given, through the contract's checks."""
    out = {}
    for c in LESSON.checks:
        impl = sdpa if c.name == "scaled_dot_product_attention" else mha
        if impl is None:
            continue
        try:
            c.fn(impl)
            out[c.id] = (True, "")
        except CheckFailed as exc:
            out[c.id] = (False, str(exc))
    return out


def points(results: dict) -> int:
    return sum(LESSON.get(i).points for i, (ok, _) in results.items() if ok)


# --- a learner's attention, with one mistake switched on -------------------------------------------------------------
def learner_sdpa(mistake=None):
    def sdpa(q, k, v, mask=None, causal=False, return_weights=False):
        lq, lk, d = q.shape[-2], k.shape[-2], q.shape[-1]
        scores = q @ k.transpose(-2, -1)
        if mistake != "scale_missing":
            scores = scores / math.sqrt(d)
        if mistake == "scale_twice":
            scores = scores / math.sqrt(d)
        allowed = mask
        if mask is not None and mistake == "mask_inverted":
            allowed = ~mask
        if causal:
            i, j = torch.arange(lq)[:, None], torch.arange(lk)[None, :]
            c = {"causal_start": j <= i, "causal_inverted": j >= i + lk - lq}.get(mistake, j <= i + lk - lq)
            allowed = c if allowed is None else allowed & c
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        dim = -2 if mistake == "softmax_dim" else -1
        if mistake == "no_row_max":
            e = scores.exp()
        else:
            top = scores.amax(dim, keepdim=True)
            e = (scores - torch.where(torch.isfinite(top), top, torch.zeros_like(top))).exp()
        total = e.sum(dim, keepdim=True)
        w = e / torch.where(total > 0, total, torch.ones_like(total))
        out = w @ v
        return (out, w) if return_weights else out
    return sdpa


def learner_mha(mistake=None):
    """A learner's MHA: the heads split/merged or K/V heads grouped as ``mistake`` says, attention from
    ``learner_sdpa(mistake)``."""
    sdpa = learner_sdpa(mistake)

    class MHA(nn.Module):
        def __init__(self, d_model, n_heads, n_kv_heads=None, head_dim=None, d_context=None, bias=True):
            super().__init__()
            self.h, self.hkv = n_heads, n_kv_heads or n_heads
            self.hd = head_dim or d_model // n_heads
            d_context = d_context or d_model
            self.q_proj = nn.Linear(d_model, self.h * self.hd, bias=bias)
            self.k_proj = nn.Linear(d_context, self.hkv * self.hd, bias=bias)
            self.v_proj = nn.Linear(d_context, self.hkv * self.hd, bias=bias)
            self.o_proj = nn.Linear(self.h * self.hd, d_model, bias=bias)

        def split(self, t, n):
            b, length, _ = t.shape
            if mistake == "split_heads":
                return t.reshape(b, n, length, self.hd)
            return t.reshape(b, length, n, self.hd).transpose(1, 2)

        def forward(self, x, context=None, mask=None, causal=False, return_weights=False):
            src = x if context is None else context
            q = self.split(self.q_proj(x), self.h)
            k, v = self.split(self.k_proj(src), self.hkv), self.split(self.v_proj(src), self.hkv)
            g = self.h // self.hkv
            if mistake == "kv_groups":
                k, v = k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1)
            else:
                k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
            if mask is not None:
                mask = mask[:, None]
            out, w = sdpa(q, k, v, mask=mask, causal=causal, return_weights=True)
            b, _, lq, _ = out.shape
            merged = out.reshape(b, lq, -1) if mistake == "merge_heads" else out.transpose(1, 2).reshape(b, lq, -1)
            out = self.o_proj(merged)
            return (out, w) if return_weights else out

    return MHA


def test_the_learner_like_implementations_are_right_without_a_mistake():
    results = grade(learner_sdpa(), learner_mha())
    assert points(results) == LESSON.points, results


# --- 1. the method: torch's attention in any form earns nothing --------------------------------------------------------
def _via(reach):
    """An SDPA whose output comes from ``reach(q, k, v, allowed)`` (torch's attention somehow), weights by hand."""
    def sdpa(q, k, v, mask=None, causal=False, return_weights=False):
        allowed = mask
        if causal:
            c = checks._allowed(q.shape[-2], k.shape[-2], None, True)
            allowed = c if allowed is None else allowed & c
        out = reach(q, k, v, allowed)
        return (out, scaled_dot_product_attention(q, k, v, mask, causal, True)[1]) if return_weights else out
    return sdpa


DODGES = {
    "functional": lambda q, k, v, m: torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m),
    "importlib_getattr": lambda q, k, v, m: getattr(importlib.import_module("torch.nn." + "functional"),
                                                    "scaled_dot_" + "product_attention")(q, k, v, attn_mask=m),
    "c_binding": lambda q, k, v, m: torch._C._nn.scaled_dot_product_attention(q, k, v, attn_mask=m),
    "aten_flash": lambda q, k, v, m: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, attn_mask=None if m is None else torch.zeros(m.shape).masked_fill(~m, float("-inf")))[0],
    "aten_math": lambda q, k, v, m: torch.ops.aten._scaled_dot_product_attention_math(q, k, v, attn_mask=m)[0],
}


@pytest.mark.parametrize("dodge", sorted(DODGES))
def test_torch_attention_in_any_form_earns_nothing(dodge):
    results = grade(sdpa=_via(DODGES[dodge]))
    assert points(results) == 0, results
    for ok, message in results.values():
        assert message == "calls torch's scaled_dot_product_attention: write it from matrix products and softmax"


class TorchMHA(nn.Module):
    """The lesson's MultiHeadAttention interface over nn.MultiheadAttention (or its functional form)."""
    functional = False

    def __init__(self, d_model, n_heads, n_kv_heads=None, head_dim=None, d_context=None, bias=True):
        super().__init__()
        self.inner = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        hd = d_model // n_heads
        self.q_proj = nn.Linear(d_model, n_heads * hd)
        self.k_proj = nn.Linear(d_context or d_model, (n_kv_heads or n_heads) * (head_dim or hd))
        self.v_proj = nn.Linear(d_context or d_model, (n_kv_heads or n_heads) * (head_dim or hd))
        self.o_proj = nn.Linear(n_heads * hd, d_model)

    def forward(self, x, context=None, mask=None, causal=False, return_weights=False):
        w = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
        b = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
        t = x.transpose(0, 1)
        out, weights = torch.nn.functional.multi_head_attention_forward(
            t, t, t, x.shape[-1], self.inner.num_heads, w, b, None, None, False, 0.0, self.o_proj.weight,
            self.o_proj.bias, training=False, need_weights=True, average_attn_weights=False)
        out = out.transpose(0, 1)
        return (out, weights) if return_weights else out


def test_torch_multihead_attention_earns_nothing():
    results = grade(mha=TorchMHA)
    assert points(results) == 0, results
    for ok, message in results.values():
        assert message.startswith("calls torch's nn.MultiheadAttention: write the projections and the heads yourself")


def test_what_the_lesson_gives_stays_allowed():
    # causal_mask, the shape checks and the lesson's own MultiHeadAttention layout: the reference passes every check
    results = grade(scaled_dot_product_attention, MultiHeadAttention)
    assert points(results) == LESSON.points, results


# --- 2. degenerate answers earn nothing ---------------------------------------------------------------------------------
def _out_shape(q, v):
    return q.shape[:-1] + (v.shape[-1],)


def _uniform(q, k, mask, causal):
    allowed = torch.ones(q.shape[:-1] + (k.shape[-2],), dtype=torch.bool)
    if mask is not None:
        allowed = allowed & mask
    if causal:
        allowed = allowed & checks._allowed(q.shape[-2], k.shape[-2], None, True)
    w = allowed.float()
    return w / w.sum(-1, keepdim=True).clamp_min(1)


def _identity(q, k, mask, causal):
    lq, lk = q.shape[-2], k.shape[-2]
    return torch.eye(lk)[lk - lq:].expand(q.shape[:-1] + (lk,)).clone()


def _degenerate(kind):
    g = torch.Generator().manual_seed(11)

    def sdpa(q, k, v, mask=None, causal=False, return_weights=False):
        shape, wshape = _out_shape(q, v), q.shape[:-1] + (k.shape[-2],)
        if kind in ("uniform", "identity"):
            w = (_uniform if kind == "uniform" else _identity)(q, k, mask, causal)
            out = w @ v
        elif kind == "echo":
            out, w = v[..., -q.shape[-2]:, :].clone(), _identity(q, k, mask, causal)
        else:
            fill = {"zeros": 0.0, "ones": 1.0, "constant": 0.37}
            if kind in fill:
                out, w = torch.full(shape, fill[kind]), torch.full(wshape, fill[kind])
            elif kind == "random":
                out, w = torch.randn(shape, generator=g), torch.randn(wshape, generator=g).softmax(-1)
            else:  # noise in the reference's shape, around the reference's scale
                ref = scaled_dot_product_attention(q, k, v, mask=mask, causal=causal)
                out, w = ref + 0.1 * torch.randn(shape, generator=g), torch.rand(wshape, generator=g)
        return (out, w) if return_weights else out
    return sdpa


def _degenerate_mha(kind):
    g = torch.Generator().manual_seed(12)

    class Degenerate(nn.Module):
        def __init__(self, d_model, n_heads, n_kv_heads=None, head_dim=None, d_context=None, bias=True):
            super().__init__()
            self.h, hkv = n_heads, n_kv_heads or n_heads
            hd = head_dim or d_model // n_heads
            dc = d_context or d_model
            self.q_proj, self.k_proj = nn.Linear(d_model, n_heads * hd), nn.Linear(dc, hkv * hd)
            self.v_proj, self.o_proj = nn.Linear(dc, hkv * hd), nn.Linear(n_heads * hd, d_model)
            self.hkv, self.hd = hkv, hd

        def forward(self, x, context=None, mask=None, causal=False, return_weights=False):
            src = x if context is None else context
            b, lq, lk = x.shape[0], x.shape[1], src.shape[1]
            wshape = (b, self.h, lq, lk)
            w = torch.full(wshape, 1.0 / lk)
            if kind == "zeros":
                out = torch.zeros_like(x)
            elif kind == "ones":
                out = torch.ones_like(x)
            elif kind == "echo":
                out = x.clone()
            elif kind == "constant":
                out = torch.full_like(x, 0.37)
            elif kind == "random":
                out = torch.randn(x.shape, generator=g)
            elif kind == "uniform":     # every key weighted 1/Lk, through the module's own projections
                v = self.v_proj(src).view(b, lk, self.hkv, self.hd).mean(1, keepdim=True)
                v = v.repeat_interleave(self.h // self.hkv, 2).expand(b, lq, self.h, self.hd)
                out = self.o_proj(v.reshape(b, lq, self.h * self.hd))
            elif kind == "identity":    # no attention: each position's own value
                v = self.v_proj(src)[:, -lq:].view(b, lq, self.hkv, self.hd).repeat_interleave(self.h // self.hkv, 2)
                out = self.o_proj(v.reshape(b, lq, self.h * self.hd))
            else:
                out = torch.rand(x.shape, generator=g)
            return (out, w) if return_weights else out

    return Degenerate


DEGENERATE = ["zeros", "ones", "echo", "uniform", "random", "constant", "identity", "noise"]


@pytest.mark.parametrize("kind", DEGENERATE)
def test_degenerate_answers_earn_nothing(kind):
    results = grade(_degenerate(kind), _degenerate_mha(kind))
    assert points(results) == 0, {i: m for i, (ok, m) in results.items() if ok}


# --- 3. hints name the real cause ------------------------------------------------------------------------------------------
SDPA_MISTAKES = ["scale_missing", "scale_twice", "softmax_dim", "no_row_max", "mask_inverted", "causal_start",
                 "causal_inverted"]
MHA_MISTAKES = ["split_heads", "merge_heads", "kv_groups"]


@pytest.mark.parametrize("mistake", SDPA_MISTAKES + MHA_MISTAKES)
def test_a_mistake_is_named_and_nothing_else(mistake):
    sdpa = learner_sdpa(mistake if mistake in SDPA_MISTAKES else None)
    results = grade(sdpa, learner_mha(mistake))
    failed = {i: m for i, (ok, m) in results.items() if not ok}
    assert failed, f"no check caught {mistake}"
    for check_id, message in failed.items():
        assert checks.CAUSES[mistake] in message, (check_id, message)
        others = [c for c in checks.CAUSES if c != mistake and checks.CAUSES[c] in message]
        assert not others, (check_id, message, others)


def test_scale_forgotten_names_the_scale_not_the_mask_or_the_row_max():
    # the case learners met: five checks failed and three blamed the causal mask, the row max and the padding mask
    results = grade(learner_sdpa("scale_missing"), learner_mha("scale_missing"))
    for check_id, (ok, message) in results.items():
        assert not ok and "√d" in message, (check_id, message)
        for wrong in ("aligned to the end", "row max", "padding", "mask is read"):
            assert wrong not in message, (check_id, message)


# --- the real route: the notebook in the sandboxed learner's process, the checks in the grader's -------------------------
SAVED_EARLY_SDPA = '''
import torch
from course.grading import method as _watch
_saved = torch._C._nn.scaled_dot_product_attention      # a reference taken before any check runs


def _unwrapped(f):
    """The original a tripwire keeps in its closure."""
    for cell in getattr(f, "__closure__", None) or ():
        if callable(cell.cell_contents):
            return cell.cell_contents
    return f


def scaled_dot_product_attention(q, k, v, mask=None, causal=False, return_weights=False):
    _watch._ACTIVE[0] = frozenset()                       # the watch's own switch, turned off
    del _watch._HITS[:]                                  # and what it saw, forgotten
    allowed = mask
    if causal:
        c = causal_mask(q.shape[-2], k.shape[-2])
        allowed = c if allowed is None else allowed & c
    try:
        out = _unwrapped(_saved)(q, k, v, attn_mask=allowed)
    except Exception:                                    # refused: torch's kernel by its ATen name, no function mode
        with torch._C.DisableTorchFunction(), torch.inference_mode():
            out = torch.ops.aten._scaled_dot_product_attention_math(q, k, v, attn_mask=allowed)[0].clone()
    del _watch._HITS[:]
    if return_weights:
        w = torch.zeros(q.shape[:-1] + (k.shape[-2],))
        return out, w
    return out
'''

UNIFORM_MHA = '''
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    """Every key weighted 1/Lk: the right projections and shapes, no attention."""

    def __init__(self, d_model, n_heads, n_kv_heads=None, head_dim=None, d_context=None, bias=True):
        super().__init__()
        self.h, self.hkv = n_heads, n_kv_heads or n_heads
        self.hd = head_dim or d_model // n_heads
        dc = d_context or d_model
        self.q_proj, self.k_proj = nn.Linear(d_model, self.h * self.hd), nn.Linear(dc, self.hkv * self.hd)
        self.v_proj, self.o_proj = nn.Linear(dc, self.hkv * self.hd), nn.Linear(self.h * self.hd, d_model)

    def forward(self, x, context=None, mask=None, causal=False, return_weights=False):
        src = x if context is None else context
        b, lq, lk = x.shape[0], x.shape[1], src.shape[1]
        v = self.v_proj(src).view(b, lk, self.hkv, self.hd).mean(1, keepdim=True)
        v = v.repeat_interleave(self.h // self.hkv, 2).expand(b, lq, self.h, self.hd)
        out = self.o_proj(v.reshape(b, lq, self.h * self.hd))
        return (out, torch.full((b, self.h, lq, lk), 1.0 / lk)) if return_weights else out
'''


def test_sandboxed_torch_attention_and_uniform_mha_earn_nothing(tmp_path):
    from course.grading.autograde import Limits, grade as grade_notebook
    from course.grading.notebook_spec import REPO

    nb = json.loads((REPO / "exercises/01_attention/attention.ipynb").read_text())
    for cell in nb["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in ("sdpa_impl", "mha_impl"):
            cell["source"] = SAVED_EARLY_SDPA if grade_id == "sdpa_impl" else UNIFORM_MHA
    path = tmp_path / "attention.ipynb"
    path.write_text(json.dumps(nb))
    report = grade_notebook("part0_foundations.l01_attention.checks", path, Limits(check_s=60))
    assert report.earned == 0, report.table()
    said = "calls torch's scaled_dot_product_attention: write it from matrix products and softmax"
    for r in report.results:
        if r.name == "scaled_dot_product_attention":
            assert r.message == said, (r.id, r.message)
        else:
            assert "calls torch" not in r.message and "differs" in r.message, (r.id, r.message)
