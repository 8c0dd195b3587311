"""Every rule of the lesson-04 checks, with the learner's message it gives, word for word.

tests/part0/l04_gpt2_int8/test_checks.py shows each check rejecting plausible mistakes; here each rule is broken alone by a
variant of the reference and its message pinned whole (numbers worked by hand: the test GPT-2 has n_embd 32, so
c_attn maps 32 → 96; w / 0.5 for the rounding table is written in the check), each ``call()`` label is pinned by an
implementation raising there (``"<label> raised RuntimeError: boom"``), and each tolerance both ways: an error 5 ×
the allowed one is refused, and where the default would be looser, an error between the two as well.
Plain functions without arguments, so that ``tools/mutation.py --verify`` can run them."""
import copy
import re

import torch
from torch import nn
from transformers.pytorch_utils import Conv1D

from part0_foundations.l04_gpt2_int8 import checks
from part0_foundations.l04_gpt2_int8 import int8 as ref
from tests.support.rules import BOOM, message


def boom(*a, **kw):
    raise RuntimeError("boom")


# --- conv1d_to_linear --------------------------------------------------------------------------------------------------
def _convert(build):
    """Every Conv1D replaced by ``build(conv)`` (recursively, in place)."""
    def f(model):
        for name, child in list(model.named_children()):
            if isinstance(child, Conv1D):
                setattr(model, name, build(child))
            else:
                f(child)
        return model
    return f


def _linear(conv, bias=True, weight=None, in_out=None):
    nx, nf = conv.weight.shape
    lin = nn.Linear(nx, nf, bias=bias)
    with torch.no_grad():
        lin.weight.copy_(conv.weight.t() if weight is None else weight)
        if bias:
            lin.bias.copy_(conv.bias)
    if in_out:
        lin.in_features, lin.out_features = in_out
    return lin


def test_conversion_messages():
    c = checks.check_conversion_exact
    assert message(c, boom) == f"conv1d_to_linear(model) {BOOM}"
    assert message(c, lambda m: ref.conv1d_to_linear(copy.deepcopy(m))) == (
        "conv1d_to_linear must convert the model in place and return it")
    assert message(c, lambda m: m) == ("Conv1D modules are still there: ['transformer.h.0.attn.c_attn', "
                                       "'transformer.h.0.attn.c_proj', 'transformer.h.0.mlp.c_fc']")
    assert message(c, _convert(lambda conv: nn.Sequential(_linear(conv)))) == (
        "transformer.h.0.attn.c_attn is Sequential, expected nn.Linear")

    def kept_layout(conv):    # an nn.Linear(96, 32) holding the (in, out) = (32, 96) weight as it is
        lin = nn.Linear(conv.weight.shape[1], conv.weight.shape[0])
        with torch.no_grad():
            lin.weight.copy_(conv.weight)
        return lin
    assert message(c, _convert(kept_layout)) == (
        "transformer.h.0.attn.c_attn.weight (out_features, in_features): expected shape (96, 32), got (32, 96)")
    assert message(c, _convert(lambda conv: _linear(conv, in_out=(96, 32)))) == (
        "transformer.h.0.attn.c_attn: in_features/out_features must be 32/96")
    reshaped = _convert(lambda conv: _linear(conv, weight=conv.weight.reshape(conv.weight.shape[1], -1)))
    assert message(c, reshaped).startswith(
        "transformer.h.0.attn.c_attn.weight must be the Conv1D weight transposed: differs from the reference by up to")
    assert message(c, _convert(lambda conv: _linear(conv, bias=False))) == "transformer.h.0.attn.c_attn: the bias was dropped"
    # the test model's biases are non-zero: a bias left at zero is caught
    def zero_bias(conv):
        lin = _linear(conv)
        with torch.no_grad():
            lin.bias.zero_()
        return lin
    assert message(c, _convert(zero_bias)).startswith("transformer.h.0.attn.c_attn.bias: differs from the reference")
    # every module right, the logits 5e-5 off: 5 × the allowed 1e-5
    def nudged(model):
        ref.conv1d_to_linear(model)
        model.lm_head.register_forward_hook(lambda mod, inp, out: out + 5e-5)
        return model
    assert message(c, nudged).startswith("logits after conversion vs before: differs from the reference by up to")


def test_lm_head_messages():
    c = checks.check_lm_head_untouched_and_tied
    assert message(c, boom) == f"conv1d_to_linear(model) {BOOM}"

    def new_head(model):                 # a new nn.Linear holding the very same (tied) weight
        ref.conv1d_to_linear(model)
        head = nn.Linear(model.lm_head.in_features, model.lm_head.out_features, bias=False)
        head.weight = model.lm_head.weight
        model.lm_head = head
        return model
    assert message(c, new_head) == "lm_head was replaced: it is already an nn.Linear, leave it as it is"

    def new_wte(model):
        ref.conv1d_to_linear(model)
        wte = nn.Embedding(*model.transformer.wte.weight.shape)
        wte.weight = model.transformer.wte.weight
        model.transformer.wte = wte
        return model
    assert message(c, new_wte) == "the input embedding wte was replaced: leave it as it is"

    def zero_linears(model):             # every Conv1D an nn.Linear of the right shape, holding zeros
        ref.conv1d_to_linear(model)
        with torch.no_grad():
            for m in model.transformer.h.modules():
                if isinstance(m, nn.Linear):
                    m.weight.zero_()
        return model
    assert message(c, zero_linears).startswith("logits after conversion vs before: differs from the reference")

    def untied(model):
        ref.conv1d_to_linear(model)
        model.lm_head.weight = nn.Parameter(model.lm_head.weight.detach().clone())
        return model
    assert message(c, untied) == ("lm_head.weight is no longer the very same tensor as transformer.wte.weight (tie "
                                  "broken)")

    def double_head(model):            # still tied (one Parameter), but float64
        ref.conv1d_to_linear(model)
        model.lm_head.double()
        return model
    assert message(c, double_head) == "lm_head must stay float32"
    assert message(c, lambda m: m) == ("after your conversion torch.ao quantized 0 modules; expected the 8 block "
                                       "Linears (4 per layer × 2 layers): is every Conv1D an nn.Linear?")

    class Head(nn.Linear):
        pass

    def subclassed_head(model):        # the same module object, made a subclass of nn.Linear
        ref.conv1d_to_linear(model)
        model.lm_head.__class__ = Head
        return model
    assert message(c, subclassed_head) == "after quantization lm_head must still be the FP32 nn.Linear tied to wte"


# --- quantize_per_tensor -----------------------------------------------------------------------------------------------
def _pt(change_q=None, change_s=None):
    def f(w, scale=None):
        q, s = ref.quantize_per_tensor(w, scale)
        return (q if change_q is None else change_q(q, w)), (s if change_s is None else change_s(s))
    return f


def _one_off(q, w):
    q = q.clone()
    q[0, 0] += 1 if q[0, 0] < 0 else -1
    return q


def test_per_tensor_messages():
    c = checks.check_per_tensor_matches_torch
    assert message(c, boom) == f"quantize_per_tensor(w) {BOOM}"
    assert message(c, lambda w, scale=None: ref.quantize_per_tensor(w)[0]) == "quantize_per_tensor must return (q, scale)"
    assert message(c, lambda w, scale=None: (ref.quantize_per_tensor(w)[0], w.abs().amax(1) / 127)) == (
        "the scale of a per-tensor quantizer is one number, got shape (64,)")
    assert message(c, _pt(change_s=lambda s: s * 127 / 128)).startswith(
        "scale = max|w| / 127: differs from the reference by up to")
    # the scale 5e-6 off (relative): 5 × the allowed 1e-6, and far below the default atol 1e-5 on a scale of ~0.02
    assert message(c, _pt(change_s=lambda s: s * (1 + 5e-6))).startswith("scale = max|w| / 127: differs")
    assert message(c, _pt(change_q=lambda q, w: q.int())) == (
        "quantize_per_tensor(w): q must be a torch.int8 tensor, got torch.int32")
    assert message(c, _pt(change_q=lambda q, w: q.flatten())) == (
        "quantize_per_tensor(w): q: expected shape (64, 48), got (3072,)")
    assert message(c, _pt(change_q=_one_off)) == (
        "quantize_per_tensor(w): 1 of 3072 integers differ from torch.quantize_* (first at index (0, 0)): q = "
        "clamp(round(w / scale), -128, 127), rounding half to even")
    # two off at index (0, 0): more than the one step a near-tie may take
    two_off = lambda q, w: (lambda x: (x.__setitem__((0, 0), x[0, 0] + (2 if x[0, 0] < 0 else -2)), x)[1])(q.clone())
    assert message(c, _pt(change_q=two_off)).startswith("quantize_per_tensor(w): 1 of 3072 integers differ")


def test_rounding_messages():
    c = checks.check_rounding_and_clamping
    assert message(c, boom) == f"quantize_per_tensor(w, scale=0.5) {BOOM}"
    assert message(c, lambda w, scale=None: (boom() if isinstance(scale, torch.Tensor) else ref.quantize_per_tensor(
        w, scale))) == f"quantize_per_tensor(w, scale=tensor(0.5000)) {BOOM}"
    assert message(c, lambda w, scale=None: ref.quantize_per_tensor(w, scale)[0]) == (
        "quantize_per_tensor must return (q, scale)")
    assert message(c, _pt(change_q=lambda q, w: q.int())) == "q must be a torch.int8 tensor"
    assert message(c, _pt(change_s=lambda s: torch.as_tensor(s) * 2)) == "when a scale is given, return it unchanged"

    def half_up(w, scale=None):
        q = torch.clamp(torch.floor(w / scale + 0.5), -128, 127).to(torch.int8)
        return q, scale
    # w / 0.5 = 0.5, -1.5, 2.5 round up to 1, -1, 3 instead of to the even 0, -2, 2
    # (floor(x + 0.5) rounds -1.5 up, not away from zero: neither named mistake, the rule is stated)
    assert message(c, half_up) == ("with scale 0.5: w=0.25 → 1 (want 0); w=-0.75 → -1 (want -2); w=1.25 → 3 (want 2)"
                                   " — round half to even (torch.round), then clamp to [-128, 127]")

    def half_away(w, scale=None):      # 0.5 → 1, -1.5 → -2, 2.5 → 3, -0.5 → -1: halves away from zero
        x = w / scale
        return torch.clamp(torch.sign(x) * torch.floor(x.abs() + 0.5), -128, 127).to(torch.int8), scale
    assert message(c, half_away) == (
        "with scale 0.5: w=0.25 → 1 (want 0); w=-0.25 → -1 (want 0); w=1.25 → 3 (want 2) — halves are rounded away "
        "from zero (floor(x + 0.5) or Python's round-half-up): torch.round rounds half to even")

    def truncated(w, scale=None):      # 0.6 → 0, -0.6 → 0, 1.5 → 1, 2.5 → 2 (a cast cuts the fraction)
        return torch.clamp(w / scale, -128, 127).to(torch.int8), scale
    assert message(c, truncated) == (
        "with scale 0.5: w=0.75 → 1 (want 2); w=-0.75 → -1 (want -2); w=0.3 → 0 (want 1); w=-0.3 → 0 (want -1) — "
        "the fraction is cut off (a cast to int truncates): round first, with torch.round")

    def wraps(w, scale=None):          # no clamp: 128, 200 and -200 wrap around int8
        q = torch.round(w / scale).long()
        return ((q + 128) % 256 - 128).to(torch.int8), scale
    assert message(c, wraps) == ("with scale 0.5: w=63.75 → -128 (want 127); w=100 → -56 (want 127); w=-100 → 56 "
                                 "(want -128) — values past the int8 range wrap around: clamp to [-128, 127] before "
                                 "the cast")
    # everything 0: nine wrong, the first four listed
    assert message(c, lambda w, scale=None: (torch.zeros_like(w, dtype=torch.int8), scale)) == (
        "with scale 0.5: w=0.75 → 0 (want 2); w=-0.75 → 0 (want -2); w=1.25 → 0 (want 2); w=0.3 → 0 (want 1) — "
        "round half to even (torch.round), then clamp to [-128, 127]")


# --- quantize_per_channel ----------------------------------------------------------------------------------------------
def _pc(change_q=None, change_s=None):
    def f(w, axis=0, scales=None):
        q, s = ref.quantize_per_channel(w, axis=axis)
        return (q if change_q is None else change_q(q, w)), (s if change_s is None else change_s(s, w, axis))
    return f


def test_per_channel_messages():
    c = checks.check_per_channel_matches_torch
    assert message(c, boom) == (
        f"quantize_per_channel(w, axis=0) (one scale per channel along axis, max over the others) {BOOM}")
    assert message(c, lambda w, axis=0, scales=None: (boom() if axis == 1 else ref.quantize_per_channel(w, axis))) == (
        f"quantize_per_channel(w, axis=1) (one scale per channel along axis, max over the others) {BOOM}")
    assert message(c, lambda w, axis=0, scales=None: ref.quantize_per_channel(w, axis)[0]) == (
        "quantize_per_channel must return (q, scales)")
    assert message(c, _pc(change_s=lambda s, w, axis: s.max())) == (
        "scales for axis=0 (one per channel): expected shape (64,), got ()")

    def zero_scale(s, w, axis):        # the all-zero row 9 gets scale 0
        s = s.clone()
        s[w.abs().amax(dim=1 - axis) == 0] = 0
        return s
    assert message(c, _pc(change_s=zero_scale)) == ("axis=0: every scale must be finite and positive, even for an "
                                                    "all-zero channel (otherwise w / scale is NaN)")
    assert message(c, _pc(change_s=lambda s, w, axis: s * 127 / 128)).startswith(
        "axis=0: scales = max|w| over the channel / 127: differs from the reference")
    assert message(c, _pc(change_s=lambda s, w, axis: s * (1 + 5e-6))).startswith(      # 5 × the allowed 1e-6
        "axis=0: scales = max|w| over the channel / 127: differs")
    assert message(c, _pc(change_q=lambda q, w: q.int())) == (
        "quantize_per_channel(w, axis=0): q must be a torch.int8 tensor, got torch.int32")
    assert message(c, _pc(change_q=_one_off)).startswith(
        "quantize_per_channel(w, axis=0): 1 of 3072 integers differ from torch.quantize_* (first at index (0, 0))")
    # the second axis is checked too: right along axis 0, off along axis 1
    axis1 = lambda w, axis=0, scales=None: (lambda q, s: (_one_off(q, w) if axis == 1 else q, s))(
        *ref.quantize_per_channel(w, axis))
    assert message(c, axis1).startswith("quantize_per_channel(w, axis=1): 1 of 3072 integers differ")

    # the all-zero row: a quantizer without the smallest scale divides 0 by 0 there
    def no_floor(w, axis=0, scales=None):
        s = w.abs().amax(dim=1 - axis) / 127
        view = s.view(-1, 1) if axis == 0 else s.view(1, -1)
        return torch.clamp(torch.round(w / view), -128, 127).to(torch.int8), s
    assert message(c, no_floor).startswith("axis=0: every scale must be finite and positive")
    # a later call of axis 0 is labelled as such
    calls = []

    def third_call_fails(w, axis=0, scales=None):
        calls.append(axis)
        if len(calls) == 3:
            raise RuntimeError("boom")
        return ref.quantize_per_channel(w, axis)
    assert message(c, third_call_fails) == f"quantize_per_channel(w, axis=0) {BOOM}"


def test_per_channel_not_worse_messages():
    c = checks.check_per_channel_not_worse
    assert message(c, boom) == f"quantize_per_channel(w, axis=0) {BOOM}"
    assert message(c, _pc(change_s=lambda s, w, axis: s[:-1])) == "scales: expected shape (96,), got (95,)"
    nothing = lambda w, axis=0, scales=None: (torch.zeros_like(w, dtype=torch.int8), torch.ones(w.shape[axis]))
    assert re.fullmatch(r"per-channel mean squared error [\d.e+-]+ is above the per-tensor one [\d.e+-]+",
                        message(c, nothing))

    def one_scale(w, axis=0, scales=None):
        s = (w.abs().max() / 127).expand(w.shape[axis]).clone()
        return ref.quantize_per_tensor(w, s[0])[0], s
    assert re.fullmatch(r"per-channel mean squared error [\d.e+-]+ is not far below the per-tensor one [\d.e+-]+: "
                        r"with two outlier rows, each ordinary row should get its own, much smaller scale",
                        message(c, one_scale))

    def floored_row(w, axis=0, scales=None):   # row 0 rounded down: an error up to a whole step there
        q, s = ref.quantize_per_channel(w, axis)
        q = q.clone()
        q[0] = torch.floor(w[0] / s[0]).to(torch.int8)
        return q, s
    assert message(c, floored_row) == ("some channel has an error above half its own scale: are the scales per row "
                                       "(axis 0)?")
    # the weight handed back as it is, with scales of 1: no error at all, and no INT8
    assert message(c, lambda w, axis=0, scales=None: (w.clone(), torch.ones(w.shape[axis]))) == (
        "q must be a torch.int8 tensor, got torch.float32")


def test_dequantize_messages():
    c = checks.check_dequantize
    assert message(c, boom) == f"dequantize(q, scale) {BOOM}"
    assert message(c, lambda q, s, axis=0: (boom() if axis == 1 else ref.dequantize(q, s, axis))) == (
        f"dequantize(q, scales, axis=1) {BOOM}")
    assert message(c, lambda q, s, axis=0: ref.dequantize(q, s, axis).double()) == (
        "dequantize must return a float32 tensor")
    assert message(c, lambda q, s, axis=0: ref.dequantize(q, s, axis).round()).startswith(
        "dequantize(q, scale) per tensor: differs from the reference")
    # 5e-6 off everywhere: over 1e-7 + 1e-6·|ref| (|ref| ≤ 128 · 0.03), under the default atol 1e-5
    assert message(c, lambda q, s, axis=0: ref.dequantize(q, s, axis) + 5e-6).startswith(
        "dequantize(q, scale) per tensor: differs")
    assert message(c, lambda q, s, axis=0: ref.dequantize(q, s, axis) * (1 + 5e-6) if axis == 0 and torch.as_tensor(
        s).dim() else ref.dequantize(q, s, axis)).startswith("dequantize per channel along axis=0: differs")

    def transposed_scales(q, s, axis=0):      # per channel, but the scales laid along the other axis when square
        s = torch.as_tensor(s)
        if s.dim() == 0:
            return ref.dequantize(q, s)
        return q.float() * s.flip(0).view([-1, 1] if axis == 0 else [1, -1])
    assert message(c, transposed_scales).startswith("dequantize per channel along axis=0: differs")


# --- int8_round_trip on MiniLM -----------------------------------------------------------------------------------------
LAYER = "encoder.layer.0.output.dense"


def test_minilm_layer_messages():
    c = checks.check_minilm_layer_sqnr
    assert message(c, boom) == f"int8_round_trip(MiniLM's {LAYER}) {BOOM}"
    assert message(c, lambda lin: ref.int8_round_trip(lin).weight) == (
        "int8_round_trip must return an nn.Linear, got Parameter")

    def in_place(lin):
        q, s = ref.quantize_per_channel(lin.weight, axis=0)
        with torch.no_grad():
            lin.weight.copy_(ref.dequantize(q, s, axis=0))
        return lin
    assert message(c, in_place) == "int8_round_trip must return a copy and leave the original layer's weight unchanged"

    def transposed(lin):
        out = nn.Linear(lin.out_features, lin.in_features)
        with torch.no_grad():
            out.weight.copy_(ref.int8_round_trip(lin).weight.t())
        return out
    assert message(c, transposed) == "the returned weight (out, in): expected shape (384, 1536), got (1536, 384)"

    def no_bias(lin):
        out = ref.int8_round_trip(lin)
        out.bias = None
        return out
    assert message(c, no_bias) == "the bias must be kept exactly"

    def per_tensor(lin):
        out = copy.deepcopy(lin)
        q, s = ref.quantize_per_tensor(lin.weight)
        with torch.no_grad():
            out.weight.copy_(ref.dequantize(q, s))
        return out
    assert re.fullmatch(r"weight SQNR [\d.]+ dB, the reference's per-channel round trip gives [\d.]+ dB: one scale "
                        r"per OUTPUT channel \(axis 0 of an nn.Linear weight\), max\|w\| / 127", message(c, per_tensor))


def test_minilm_embeddings_messages():
    c = checks.check_minilm_embeddings_match
    assert message(c, boom) == f"int8_round_trip(encoder.layer.0.attention.self.query) {BOOM}"
    assert message(c, lambda lin: ref.int8_round_trip(lin).weight) == (
        "int8_round_trip(encoder.layer.0.attention.self.query) must return an nn.Linear")

    def input_channels(lin):
        out = copy.deepcopy(lin)
        q, s = ref.quantize_per_channel(lin.weight, axis=1)
        with torch.no_grad():
            out.weight.copy_(ref.dequantize(q, s, axis=1))
        return out
    assert re.fullmatch(r"with your round trip in every layer, the embedding of question \d+ has cosine 0\.\d{5} to "
                        r"the reference INT8 model's \(want ≥ 0\.9999\): check the scales' axis",
                        message(c, input_channels))
    # each layer handed back unquantized: FP32 is not the INT8 model (cosine about 0.9994)
    assert re.fullmatch(r"with your round trip in every layer, the embedding of question \d+ has cosine 0\.\d{5} to "
                        r"the reference INT8 model's \(want ≥ 0\.9999\): check the scales' axis",
                        message(c, lambda lin: copy.deepcopy(lin)))


# --- what the checks hand over, and the rules' edges -------------------------------------------------------------------
def test_results_must_be_tuples_and_tensors():
    assert message(checks.check_per_tensor_matches_torch, lambda w, scale=None: list(ref.quantize_per_tensor(w))) == (
        "quantize_per_tensor must return (q, scale)")
    assert message(checks.check_rounding_and_clamping,
                   lambda w, scale=None: list(ref.quantize_per_tensor(w, scale))) == (
        "quantize_per_tensor must return (q, scale)")
    assert message(checks.check_per_channel_matches_torch,
                   lambda w, axis=0, scales=None: list(ref.quantize_per_channel(w, axis))) == (
        "quantize_per_channel must return (q, scales)")
    assert message(checks.check_per_tensor_matches_torch, _pt(change_q=lambda q, w: q.tolist())) == (
        "quantize_per_tensor(w): q must be a torch.int8 tensor, got list")
    # in_features right, out_features wrong: one of the two is enough to refuse
    assert message(checks.check_conversion_exact, _convert(lambda conv: _linear(conv, in_out=(32, 32)))) == (
        "transformer.h.0.attn.c_attn: in_features/out_features must be 32/96")


def test_axis_is_always_passed():
    # a quantizer without a default axis is right: every call names the axis it asks for
    def no_default(w, axis, scales=None):
        return ref.quantize_per_channel(w, axis)
    checks.check_per_channel_matches_torch(no_default)
    checks.check_per_channel_not_worse(no_default)


def test_zero_row_message():
    # the all-zero row is asked again on its own: a quantizer whose third answer differs is caught there
    calls = []

    def changes(w, axis=0, scales=None):
        calls.append(axis)
        q, s = ref.quantize_per_channel(w, axis)
        if len(calls) == 3:
            q = q.clone()
            q[9] = 1
        return q, s
    assert message(checks.check_per_channel_matches_torch, changes) == "an all-zero row must quantize to zeros"


def test_inputs_are_the_same_every_run():
    def record(check, spy_args):
        runs = []
        for seed in (11, 22):
            torch.manual_seed(seed)
            seen = []
            check(spy_args(seen))
            runs.append(seen)
        assert runs[0] and len(runs[0]) == len(runs[1])
        for a, b in zip(*runs):
            assert all(torch.equal(x, y) for x, y in zip(a, b))
    record(checks.check_per_tensor_matches_torch,
           lambda seen: lambda w, scale=None: seen.append((w.clone(),)) or ref.quantize_per_tensor(w, scale))
    record(checks.check_per_channel_not_worse,
           lambda seen: lambda w, axis=0, scales=None: seen.append((w.clone(),)) or ref.quantize_per_channel(w, axis))
    record(checks.check_dequantize,
           lambda seen: lambda q, s, axis=0: seen.append((q.clone(), torch.as_tensor(s).clone())) or ref.dequantize(
               q, s, axis))


def test_dequantize_edges():
    c = checks.check_dequantize
    # negative integers are asked: reading them as unsigned bytes (q.to(uint8)) is refused
    assert message(c, lambda q, s, axis=0: ref.dequantize(q.to(torch.uint8).to(torch.int16), s, axis)).startswith(
        "dequantize(q, scale) per tensor: differs")
    # 3e-6 relative: over the 1e-6 allowed, under the default 1e-5
    assert message(c, lambda q, s, axis=0: ref.dequantize(q, s, axis) * (1 + 3e-6)).startswith(
        "dequantize(q, scale) per tensor: differs")
    # per channel, 5e-6 off everywhere: over 1e-7 + 1e-6·|ref| (|ref| ≤ 128 · 0.11), under the default atol 1e-5
    per_channel_off = lambda q, s, axis=0: ref.dequantize(q, s, axis) + (5e-6 if torch.as_tensor(s).dim() else 0)
    assert message(c, per_channel_off).startswith("dequantize per channel along axis=0: differs")


def test_conversion_is_exact():
    c = checks.check_conversion_exact
    # the weight and bias copied exactly: 5e-6 off (absolute or relative) is refused, not only 1e-5
    for change, what in ((lambda t: t + 5e-6, "weight must be the Conv1D weight transposed"),
                         (lambda t: t * (1 + 5e-6), "weight must be the Conv1D weight transposed")):
        off = _convert(lambda conv: _linear(conv, weight=change(conv.weight.t())))
        assert message(c, off).startswith(f"transformer.h.0.attn.c_attn.{what}: differs")

    def bias_off(change):
        def build(conv):
            lin = _linear(conv)
            with torch.no_grad():
                lin.bias.copy_(change(lin.bias))
            return lin
        return _convert(build)
    assert message(c, bias_off(lambda b: b + 5e-6)).startswith("transformer.h.0.attn.c_attn.bias: differs")
    assert message(c, bias_off(lambda b: b * (1 + 5e-6))).startswith("transformer.h.0.attn.c_attn.bias: differs")

    def logits(change):
        def f(model):
            ref.conv1d_to_linear(model)
            model.lm_head.register_forward_hook(lambda mod, inp, out: change(out))
            return model
        return f
    # the logits 1.5 × as large: the allowance is absolute (rtol 0), not relative
    assert message(c, logits(lambda out: out * 1.5)).startswith("logits after conversion vs before: differs")
    # 1.2e-5 off at the largest logit (|logit| 0.44) only: over the absolute 1e-5, under 1e-5 + 1e-5·|logit|
    bump = lambda out: out + 1.2e-5 * (out.abs() == out.abs().max())
    assert message(c, logits(bump)).startswith("logits after conversion vs before: differs")


def _near_tie():
    """The one place of the per-channel check's weight, along axis 1, where |w| / scale is within 1e-4 of a .5."""
    w = checks._weight(outlier_rows=(3, 17))
    w[9] = 0.0
    _, s = ref.quantize_per_channel(w, axis=1)
    x = (w.double() / s.double().view(1, -1)).abs()
    gap = ((x - x.floor()) - 0.5).abs()
    assert float(gap.min()) < checks.TIE_SLACK and int((gap < checks.TIE_SLACK).sum()) == 1
    return tuple(int(i) for i in (gap == gap.min()).nonzero()[0])


def test_near_ties_round_either_way():
    at = _near_tie()

    def moved(by):
        def f(w, axis=0, scales=None):
            q, s = ref.quantize_per_channel(w, axis)
            if axis == 1:
                q = q.clone()
                q[at] += by if q[at] < 0 else -by     # the other way round at the tie (or two steps)
            return q, s
        return f
    checks.check_per_channel_matches_torch(moved(1))
    assert message(checks.check_per_channel_matches_torch, moved(2)) == (
        f"quantize_per_channel(w, axis=1): 1 of 3072 integers differ from torch.quantize_* (first at index {at}): q = "
        "clamp(round(w / scale), -128, 127), rounding half to even")


def test_minilm_layer_rules_edges():
    c = checks.check_minilm_layer_sqnr

    def in_place_then_copy(lin):       # a new object, but the original's weight was written first
        q, s = ref.quantize_per_channel(lin.weight, axis=0)
        with torch.no_grad():
            lin.weight.copy_(ref.dequantize(q, s, axis=0))
        return copy.deepcopy(lin)
    assert message(c, in_place_then_copy) == (
        "int8_round_trip must return a copy and leave the original layer's weight unchanged")

    def coarser(lin):                  # per output channel, but scales 2 % too large: about 0.2 dB worse
        out = copy.deepcopy(lin)
        _, s = ref.quantize_per_channel(lin.weight, axis=0)
        s = s * 1.02
        q = torch.clamp(torch.round(lin.weight / s.view(-1, 1)), -128, 127).to(torch.int8)
        with torch.no_grad():
            out.weight.copy_(ref.dequantize(q, s, axis=0))
        return out
    assert re.fullmatch(r"weight SQNR [\d.]+ dB, the reference's per-channel round trip gives [\d.]+ dB: .*",
                        message(c, coarser))
