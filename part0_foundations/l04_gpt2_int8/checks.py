"""Lesson 04 checks: called by the notebook's autograder cells, by tests/autograder/test_gpt2_int8.py and by the
reference tests. Each takes the implementation under test and raises CheckFailed with a learner message.

Expected values come from PyTorch's own quantized tensors (``torch.quantize_per_tensor``/``_per_channel`` and
``.dequantize()``), from a real ``transformers`` GPT-2 before conversion, or are worked out by hand in the check.
"""
from __future__ import annotations

import warnings

import torch
from torch import nn

from course.grading import method
from course.grading.contract import Check, Lesson, call, expect, expect_close, expect_shape

# w / scale within this distance of a .5 tie may round either way: division and PyTorch's multiply-by-1/scale
# differ in the last bit there. Everywhere else the integers must be identical.
TIE_SLACK = 1e-4


def _torch_int_repr(w, scale, axis=None):
    """PyTorch's own integers for ``w`` (its quantized-tensor API warns that it is deprecated: not the learner's fault)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if axis is None:
            return torch.quantize_per_tensor(w, float(scale), 0, torch.qint8)
        n = w.shape[axis]
        return torch.quantize_per_channel(w, scale.double(), torch.zeros(n, dtype=torch.long), axis, torch.qint8)


def _tiny_gpt2(seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():  # non-zero biases, so a dropped bias is caught
        for m in model.modules():
            if hasattr(m, "bias") and isinstance(m.bias, torch.Tensor) and m.bias.dim() == 1:
                m.bias.normal_(0, 0.02)
    return model


def _weight(rows=64, cols=48, seed=0, outlier_rows=()):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(rows, cols, generator=g) * 0.05
    for r in outlier_rows:
        w[r] *= 50.0
    return w


def _expect_int8_like_torch(q, w, ref_q, scale_view, what):
    expect(isinstance(q, torch.Tensor) and q.dtype == torch.int8, f"{what}: q must be a torch.int8 tensor, got "
           f"{getattr(q, 'dtype', type(q).__name__)}")
    expect_shape(q, tuple(w.shape), f"{what}: q")
    x = (w.double() / scale_view.double()).abs()
    tie = ((x - x.floor()) - 0.5).abs() < TIE_SLACK
    diff = (q.long() - ref_q.long()).abs()
    bad = (diff > 0) & ~tie | (diff > 1)
    expect(not bool(bad.any()), f"{what}: {int(bad.sum())} of {q.numel()} integers differ from "
           f"torch.quantize_* (first at index {tuple(bad.nonzero()[0].tolist()) if bad.any() else ()}): "
           "q = clamp(round(w / scale), -128, 127), rounding half to even")


def check_conversion_exact(conv1d_to_linear):
    """Every Conv1D becomes an nn.Linear with the transposed weight; the logits are unchanged (1e-5)."""
    from transformers.pytorch_utils import Conv1D

    model = _tiny_gpt2()
    x = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))
    old = {n: (m.weight.detach().clone(), m.bias.detach().clone()) for n, m in model.named_modules() if isinstance(m, Conv1D)}
    expect(len(old) == 8, "internal: the test model should have 8 Conv1D modules")
    with torch.no_grad():
        want = model(x).logits
    out = call(conv1d_to_linear, model, what="conv1d_to_linear(model)")
    expect(out is model, "conv1d_to_linear must convert the model in place and return it")
    left = [n for n, m in model.named_modules() if isinstance(m, Conv1D)]
    expect(not left, f"Conv1D modules are still there: {left[:3]}")
    modules = dict(model.named_modules())
    for name, (w, b) in old.items():
        lin = modules.get(name)
        expect(isinstance(lin, nn.Linear), f"{name} is {type(lin).__name__}, expected nn.Linear")
        expect_shape(lin.weight, (w.shape[1], w.shape[0]), f"{name}.weight (out_features, in_features)")
        expect(lin.in_features == w.shape[0] and lin.out_features == w.shape[1],
               f"{name}: in_features/out_features must be {w.shape[0]}/{w.shape[1]}")
        expect_close(lin.weight, w.t(), f"{name}.weight must be the Conv1D weight transposed", atol=0, rtol=0)
        expect(lin.bias is not None, f"{name}: the bias was dropped")
        expect_close(lin.bias, b, f"{name}.bias", atol=0, rtol=0)
    with torch.no_grad():
        got = model(x).logits
    expect_close(got, want, "logits after conversion vs before", atol=1e-5, rtol=0)


def check_lm_head_untouched_and_tied(conv1d_to_linear):
    """lm_head stays the same FP32 module, tied to wte; after conversion torch.ao quantizes every block Linear only."""
    from part0_foundations.l04_gpt2_int8.int8 import is_tied, quantize_with_torch
    from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

    model = _tiny_gpt2(seed=2)
    x = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        before = model(x).logits
    head, wte = model.lm_head, model.transformer.wte
    expect(model.lm_head.weight is wte.weight, "internal: the test model should start tied")
    call(conv1d_to_linear, model, what="conv1d_to_linear(model)")
    expect(model.lm_head is head, "lm_head was replaced: it is already an nn.Linear, leave it as it is")
    expect(model.transformer.wte is wte, "the input embedding wte was replaced: leave it as it is")
    expect(is_tied(model), "lm_head.weight is no longer the very same tensor as transformer.wte.weight (tie broken)")
    expect(model.lm_head.weight.dtype == torch.float32, "lm_head must stay float32")
    # Linears of the right shapes that compute something else are not the conversion.
    with torch.no_grad():
        after = model(x).logits
    expect_close(after, before, "logits after conversion vs before", atol=1e-5, rtol=0)
    qmodel, _ = quantize_with_torch(model, "per_channel")
    n_quant = sum(isinstance(m, DynamicQuantizedLinear) for m in qmodel.modules())
    expect(n_quant == 8, f"after your conversion torch.ao quantized {n_quant} modules; expected the 8 block Linears "
           "(4 per layer × 2 layers): is every Conv1D an nn.Linear?")
    expect(is_tied(qmodel) and type(qmodel.lm_head) is nn.Linear, "after quantization lm_head must still be the FP32 "
           "nn.Linear tied to wte")


def check_per_tensor_matches_torch(quantize_per_tensor):
    """int8 values equal torch.quantize_per_tensor's with scale = max|w| / 127."""
    w = _weight(outlier_rows=(5,))
    res = call(quantize_per_tensor, w, what="quantize_per_tensor(w)")
    expect(isinstance(res, tuple) and len(res) == 2, "quantize_per_tensor must return (q, scale)")
    q, s = res
    s = torch.as_tensor(s)
    expect(s.numel() == 1, f"the scale of a per-tensor quantizer is one number, got shape {tuple(s.shape)}")
    want_s = w.abs().max() / 127
    expect_close(s.reshape(()), want_s, "scale = max|w| / 127", atol=0, rtol=1e-6)
    ref = _torch_int_repr(w, s).int_repr()
    _expect_int8_like_torch(q, w, ref, s.reshape(()), "quantize_per_tensor(w)")
    expect(int(q.abs().max()) == 127, "the largest |w| must map to ±127")


# The rounding mistakes a learner makes, each recognised by its own integers (a hint names only the one made).
ROUNDING = {
    None: "round half to even (torch.round), then clamp to [-128, 127]",
    "half_away": "halves are rounded away from zero (floor(x + 0.5) or Python's round-half-up): torch.round rounds "
                 "half to even",
    "truncated": "the fraction is cut off (a cast to int truncates): round first, with torch.round",
    "wraps": "values past the int8 range wrap around: clamp to [-128, 127] before the cast",
}


def _rounding_mistake(q, x) -> str | None:
    """Which mistake gives exactly the integers ``q`` for ``x = w / scale`` (float), or None."""
    made = {"half_away": torch.clamp(torch.sign(x) * torch.floor(x.abs() + 0.5), -128, 127),
            "truncated": torch.clamp(torch.trunc(x), -128, 127),
            "wraps": (torch.round(x).long() + 128) % 256 - 128}
    got = q.long()
    for key, ints in made.items():
        if torch.equal(got, ints.long()):
            return key
    return None


def check_rounding_and_clamping(quantize_per_tensor):
    """With a given scale: round half to even, clamp to [-128, 127]; worked out by hand."""
    w = torch.tensor([0.25, 0.75, -0.25, -0.75, 1.25, 0.3, -0.3, 63.5, 63.75, 100.0, -64.0, -64.25, -100.0])
    # w / 0.5 = 0.5, 1.5, -0.5, -1.5, 2.5, 0.6, -0.6, 127, 127.5, 200, -128, -128.5, -200
    want = torch.tensor([0, 2, 0, -2, 2, 1, -1, 127, 127, 127, -128, -128, -128], dtype=torch.int8)
    for scale in (0.5, torch.tensor(0.5)):
        res = call(quantize_per_tensor, w, scale, what=f"quantize_per_tensor(w, scale={scale!r})")
        expect(isinstance(res, tuple) and len(res) == 2, "quantize_per_tensor must return (q, scale)")
        q, s = res
        expect(isinstance(q, torch.Tensor) and q.dtype == torch.int8, "q must be a torch.int8 tensor")
        expect(float(torch.as_tensor(s)) == 0.5, "when a scale is given, return it unchanged")
        bad = (q.long() != want.long()).nonzero().flatten().tolist()
        expect(not bad, "with scale 0.5: " + "; ".join(
            f"w={w[i].item():g} → {q[i].item()} (want {want[i].item()})" for i in bad[:4])
            + " — " + ROUNDING.get(_rounding_mistake(q, w / 0.5), ROUNDING[None]))


def check_per_channel_matches_torch(quantize_per_channel):
    """One scale per channel (max over the other axis / 127); values equal torch.quantize_per_channel; a zero row is safe."""
    w = _weight(outlier_rows=(3, 17))
    w[9] = 0.0
    for axis in (0, 1):
        res = call(quantize_per_channel, w, axis=axis,
                   what=f"quantize_per_channel(w, axis={axis}) (one scale per channel along axis, max over the others)")
        expect(isinstance(res, tuple) and len(res) == 2, "quantize_per_channel must return (q, scales)")
        q, s = res
        n = w.shape[axis]
        expect_shape(s, (n,), f"scales for axis={axis} (one per channel)")
        expect(bool(torch.isfinite(s).all()) and bool((s > 0).all()), f"axis={axis}: every scale must be finite and "
               "positive, even for an all-zero channel (otherwise w / scale is NaN)")
        want_s = w.abs().amax(dim=1 - axis) / 127
        nz = want_s > 0
        expect_close(s[nz], want_s[nz], f"axis={axis}: scales = max|w| over the channel / 127", atol=0, rtol=1e-6)
        ref = _torch_int_repr(w, s, axis).int_repr()
        view = s.view(-1, 1) if axis == 0 else s.view(1, -1)
        _expect_int8_like_torch(q, w, ref, view, f"quantize_per_channel(w, axis={axis})")
    q, _ = call(quantize_per_channel, w, axis=0, what="quantize_per_channel(w, axis=0)")
    expect(bool((q[9] == 0).all()), "an all-zero row must quantize to zeros")


def check_per_channel_not_worse(quantize_per_channel):
    """On a weight with two outlier output channels, per-channel error is not above per-tensor error (far below)."""
    w = _weight(rows=96, cols=64, seed=3, outlier_rows=(7, 60))
    res = call(quantize_per_channel, w, axis=0, what="quantize_per_channel(w, axis=0)")
    q, s = res
    expect_shape(s, (96,), "scales")
    w_pc = q.float() * torch.as_tensor(s, dtype=torch.float32).view(-1, 1)
    scale = float(w.abs().max() / 127)
    w_pt = _torch_int_repr(w, scale).dequantize()
    err_pc, err_pt = float(((w - w_pc) ** 2).mean()), float(((w - w_pt) ** 2).mean())
    expect(err_pc <= err_pt, f"per-channel mean squared error {err_pc:.3g} is above the per-tensor one {err_pt:.3g}")
    # Rounding noise is s²/12 per element. One scale: s is set by the outliers (50× the others) for all 96 rows.
    # Per channel: 94 rows get a step ~50× finer, so the mean squared error must drop by far more than 10×.
    expect(err_pc <= err_pt / 10, f"per-channel mean squared error {err_pc:.3g} is not far below the per-tensor one "
           f"{err_pt:.3g}: with two outlier rows, each ordinary row should get its own, much smaller scale")
    # Rounding error is at most half a step, and the step of each channel is its own scale.
    row_err = (w - w_pc).abs().amax(dim=1)
    expect(bool((row_err <= torch.as_tensor(s) / 2 * (1 + 1e-5)).all()),
           "some channel has an error above half its own scale: are the scales per row (axis 0)?")
    # The weight handed back as it is (with scales of 1) has no error at all: the integers must be INT8's.
    expect(isinstance(q, torch.Tensor) and q.dtype == torch.int8, f"q must be a torch.int8 tensor, got "
           f"{getattr(q, 'dtype', type(q).__name__)}")


def check_dequantize(dequantize):
    """q · scale, with one scale or one per channel along axis; equals torch's dequantize of the same integers."""
    g = torch.Generator().manual_seed(4)
    q = torch.randint(-128, 128, (6, 5), generator=g, dtype=torch.int8)
    got = call(dequantize, q, torch.tensor(0.03), what="dequantize(q, scale)")
    expect(isinstance(got, torch.Tensor) and got.dtype == torch.float32, "dequantize must return a float32 tensor")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the quantized-tensor API warns that it is deprecated
        want = torch._make_per_tensor_quantized_tensor(q, 0.03, 0).dequantize()
    expect_close(got, want, "dequantize(q, scale) per tensor", atol=1e-7, rtol=1e-6)
    for axis in (0, 1):
        s = torch.rand(q.shape[axis], generator=g) * 0.1 + 0.01
        got = call(dequantize, q, s, axis=axis, what=f"dequantize(q, scales, axis={axis})")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = torch._make_per_channel_quantized_tensor(
                q, s.double(), torch.zeros(q.shape[axis], dtype=torch.long), axis).dequantize()
        expect_close(got, want, f"dequantize per channel along axis={axis}", atol=1e-7, rtol=1e-6)



# --- MiniLM: the round trip on a real pretrained layer --------------------------------------------------------------
MINILM_LAYER = "encoder.layer.0.output.dense"   # a layer with real outlier channels (see the lesson page)


def _minilm_copy():
    from part0_foundations.l04_gpt2_int8.minilm import load_minilm

    return load_minilm()


def _reference_round_trip(linear):
    # The course's own quantizer, imported fresh here: the expected values never come from the learner's code.
    from part0_foundations.l04_gpt2_int8 import int8 as ref

    return ref.int8_round_trip(linear)


def check_minilm_layer_sqnr(int8_round_trip):
    """On MiniLM's real layer: a new nn.Linear, original untouched, bias kept, the weight SQNR of per-channel INT8
    equal to the reference's (to 0.01 dB) and well above one scale per tensor."""
    from part0_foundations.l04_gpt2_int8.int8 import dequantize, quantize_per_tensor, weight_error
    from part0_foundations.l04_gpt2_int8.minilm import encoder_linears

    layer = encoder_linears(_minilm_copy())[MINILM_LAYER]
    w0, b0 = layer.weight.detach().clone(), layer.bias.detach().clone()
    out = call(int8_round_trip, layer, what=f"int8_round_trip(MiniLM's {MINILM_LAYER})")
    expect(isinstance(out, nn.Linear), f"int8_round_trip must return an nn.Linear, got {type(out).__name__}")
    expect(out is not layer and torch.equal(layer.weight.detach(), w0),
           "int8_round_trip must return a copy and leave the original layer's weight unchanged")
    expect_shape(out.weight, tuple(w0.shape), "the returned weight (out, in)")
    expect(out.bias is not None and torch.equal(out.bias.detach(), b0), "the bias must be kept exactly")
    got = weight_error(w0, out.weight.detach())["sqnr_db"]
    want = weight_error(w0, _reference_round_trip(layer).weight.detach())["sqnr_db"]
    q, s = quantize_per_tensor(w0)
    one_scale = weight_error(w0, dequantize(q, s))["sqnr_db"]
    expect(abs(got - want) <= 0.01, f"weight SQNR {got:.2f} dB, the reference's per-channel round trip gives "
           f"{want:.2f} dB: one scale per OUTPUT channel (axis 0 of an nn.Linear weight), max|w| / 127")
    expect(got >= one_scale + 3, f"weight SQNR {got:.2f} dB is not clearly above one scale per tensor "
           f"({one_scale:.2f} dB): per-channel scales should win on a layer with outlier channels")


def check_minilm_embeddings_match(int8_round_trip):
    """Every encoder layer of MiniLM round-tripped by the learner gives the same sentence embeddings as the reference
    round trip (cosine ≥ 0.9999 on lesson 05's questions)."""
    from part0_foundations.l04_gpt2_int8.minilm import replace_encoder_linears
    from course.shared.minilm import site_questions

    def yours(name, lin):
        new = call(int8_round_trip, lin, what=f"int8_round_trip({name})")
        expect(isinstance(new, nn.Linear), f"int8_round_trip({name}) must return an nn.Linear")
        return new

    texts = [q for q, _ in site_questions()[:16]]
    models = [replace_encoder_linears(_minilm_copy(), build)
              for build in (yours, lambda name, lin: _reference_round_trip(lin))]
    models = [m.encode(texts, normalize_embeddings=True, convert_to_tensor=True) for m in models]
    cos = (models[0] * models[1]).sum(dim=1)
    worst = int(cos.argmin())
    expect(float(cos.min()) >= 0.9999, f"with your round trip in every layer, the embedding of question {worst} "
           f"has cosine {float(cos.min()):.5f} to the reference INT8 model's (want ≥ 0.9999): check the scales' axis")


LESSON = Lesson(
    package="part0_foundations.l04_gpt2_int8",
    reference=("part0_foundations.l04_gpt2_int8.int8",),
    # Quantizing is the exercise: torch's own quantization is what the checks compare with, not what the learner calls.
    forbids=(method.QUANTIZE,),
    checks=(
        Check("conversion_exact", "conv1d_to_linear", check_conversion_exact, 3),
        Check("lm_head_untouched_and_tied", "conv1d_to_linear", check_lm_head_untouched_and_tied, 2),
        Check("per_tensor_matches_torch", "quantize_per_tensor", check_per_tensor_matches_torch, 2),
        Check("rounding_and_clamping", "quantize_per_tensor", check_rounding_and_clamping, 2),
        Check("per_channel_matches_torch", "quantize_per_channel", check_per_channel_matches_torch, 2),
        Check("per_channel_not_worse", "quantize_per_channel", check_per_channel_not_worse, 2),
        Check("dequantize", "dequantize", check_dequantize, 2),
        Check("minilm_layer_sqnr", "int8_round_trip", check_minilm_layer_sqnr, 2),
        Check("minilm_embeddings_match", "int8_round_trip", check_minilm_embeddings_match, 2),
    ),
)
"""The lesson contract: the notebook's test cells, tests/autograder and the checks' own tests all read it."""
ALL = LESSON.table()
