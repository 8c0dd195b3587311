"""The lesson 04 checks must fail on plausible wrong implementations (a check that cannot fail proves nothing)."""
import copy

import pytest
import torch
from torch import nn
from transformers.pytorch_utils import Conv1D

from course.grading.contract import CheckFailed
from part0_foundations.l04_gpt2_int8 import checks
from part0_foundations.l04_gpt2_int8 import int8 as ref


def conv_reshaped(model):
    """Reshapes the (in, out) weight into (out, in) instead of transposing it."""
    for name, child in list(model.named_children()):
        if isinstance(child, Conv1D):
            nx, nf = child.weight.shape
            lin = nn.Linear(nx, nf)
            with torch.no_grad():
                lin.weight.copy_(child.weight.reshape(nf, nx))
                lin.bias.copy_(child.bias)
            setattr(model, name, lin)
        else:
            conv_reshaped(child)
    return model


def conv_and_copy_head(model):
    """Converts correctly, then rebuilds lm_head from a copy of the weight: the tie is broken."""
    ref.conv1d_to_linear(model)
    head = nn.Linear(model.lm_head.in_features, model.lm_head.out_features, bias=False)
    head.weight = nn.Parameter(model.lm_head.weight.detach().clone())
    model.lm_head = head
    return model


def conv_noop(model):
    return model


def pt_round_half_up(w, scale=None):
    scale = torch.as_tensor(w.abs().max() / 127 if scale is None else scale, dtype=torch.float32)
    return torch.clamp(torch.floor(w / scale + 0.5), -128, 127).to(torch.int8), scale


def pt_no_clamp(w, scale=None):
    scale = torch.as_tensor(w.abs().max() / 127 if scale is None else scale, dtype=torch.float32)
    return torch.round(w / scale).to(torch.int8), scale  # int8 wraps around instead of saturating


def pt_scale_128(w, scale=None):
    scale = torch.as_tensor(w.abs().max() / 128 if scale is None else scale, dtype=torch.float32)
    return torch.clamp(torch.round(w / scale), -128, 127).to(torch.int8), scale


def pc_one_scale(w, axis=0, scales=None):
    s = (w.abs().max() / 127).expand(w.shape[axis]).clone()
    return ref.quantize_per_tensor(w, s[0])[0], s


def pc_wrong_axis(w, axis=0, scales=None):
    return ref.quantize_per_channel(w, axis=1 - axis)


def pc_zero_row_nan(w, axis=0, scales=None):
    s = w.abs().amax(dim=1 - axis) / 127
    shape = [1, 1]
    shape[axis] = -1
    return torch.clamp(torch.round(w / s.view(shape)), -128, 127).to(torch.int8), s


def deq_ignores_axis(q, scale, axis=0):
    scale = torch.as_tensor(scale)
    return q.float() * (scale if scale.dim() == 0 else scale.view(-1, 1))


def deq_int(q, scale, axis=0):
    return ref.dequantize(q, scale, axis).round()


@pytest.mark.parametrize("check_id, wrong, says", [
    ("conversion_exact", conv_reshaped, "must be the Conv1D weight transposed"),
    ("conversion_exact", conv_noop, "Conv1D modules are still there"),
    ("lm_head_untouched_and_tied", conv_and_copy_head, "lm_head was replaced"),
    ("lm_head_untouched_and_tied", conv_noop, "is every Conv1D an nn.Linear?"),
    ("per_tensor_matches_torch", pt_scale_128, "scale = max|w| / 127"),
    ("rounding_and_clamping", pt_round_half_up, "w=0.25 → 1 (want 0)"),
    ("rounding_and_clamping", pt_no_clamp, "w=100 → -56 (want 127)"),
    ("per_channel_matches_torch", pc_one_scale, "scales = max|w| over the channel / 127"),
    ("per_channel_matches_torch", pc_wrong_axis, "scales for axis=0 (one per channel)"),
    ("per_channel_matches_torch", pc_zero_row_nan, "even for an all-zero channel"),
    ("per_channel_not_worse", pc_one_scale, "is not far below the per-tensor one"),
    ("per_channel_not_worse", pc_wrong_axis, "scales: expected shape (96,)"),
    ("dequantize", deq_ignores_axis, "dequantize(q, scales, axis=1) raised"),
    ("dequantize", deq_int, "dequantize(q, scale) per tensor: differs"),
])
def test_check_fails_on_wrong_implementation(check_id, wrong, says):
    _, check = checks.ALL[check_id]
    with pytest.raises(CheckFailed) as err:
        check(wrong)
    assert says in str(err.value), str(err.value)


def test_reference_passes_every_check():
    for check_id, (name, check) in checks.ALL.items():
        check(getattr(ref, name))


# --- int8_round_trip on MiniLM's real layers -----------------------------------------------------------------------
def rt_input_channels(linear):
    """Scales per INPUT channel (axis 1): the wrong axis of an nn.Linear weight."""
    out = copy.deepcopy(linear)
    q, s = ref.quantize_per_channel(linear.weight, axis=1)
    with torch.no_grad():
        out.weight.copy_(ref.dequantize(q, s, axis=1))
    return out


def rt_per_tensor(linear):
    """One scale for the whole tensor."""
    out = copy.deepcopy(linear)
    q, s = ref.quantize_per_tensor(linear.weight)
    with torch.no_grad():
        out.weight.copy_(ref.dequantize(q, s))
    return out


def rt_in_place(linear):
    """Right numbers, but written into the original layer."""
    q, s = ref.quantize_per_channel(linear.weight, axis=0)
    with torch.no_grad():
        linear.weight.copy_(ref.dequantize(q, s, axis=0))
    return linear


def rt_drops_bias(linear):
    out = ref.int8_round_trip(linear)
    out.bias = None
    return out


@pytest.mark.parametrize("wrong, message", [
    (rt_input_channels, "OUTPUT channel"), (rt_per_tensor, "OUTPUT channel"),
    (rt_in_place, "leave the original"), (rt_drops_bias, "bias must be kept"),
])
def test_minilm_layer_check_rejects(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        checks.check_minilm_layer_sqnr(wrong)


@pytest.mark.parametrize("wrong", [rt_input_channels, rt_per_tensor])
def test_minilm_embeddings_check_rejects(wrong):
    with pytest.raises(CheckFailed, match="cosine"):
        checks.check_minilm_embeddings_match(wrong)


def test_minilm_checks_pass_the_reference():
    checks.check_minilm_layer_sqnr(ref.int8_round_trip)
    checks.check_minilm_embeddings_match(ref.int8_round_trip)
