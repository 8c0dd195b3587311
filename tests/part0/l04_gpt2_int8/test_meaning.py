"""Lesson 04's grades mean the learner quantized: degenerate answers earn 0 points in total, and torch's own
quantization earns nothing (the message names it)."""
import copy
import warnings

import pytest
import torch
from torch import nn

from part0_foundations.l04_gpt2_int8 import checks
from part0_foundations.l04_gpt2_int8 import int8 as ref
from tests.support.rules import DEGENERATE_KINDS, lesson_points

LESSON = checks.LESSON
KINDS = DEGENERATE_KINDS


def points(impls: dict) -> tuple[int, dict]:
    return lesson_points(LESSON, impls)


def degenerate(kind):
    g = torch.Generator().manual_seed(6)

    def ints(w):
        if kind in ("zeros", "ones", "constant"):
            return torch.full(w.shape, {"zeros": 0, "ones": 1, "constant": 37}[kind], dtype=torch.int8)
        if kind in ("echo", "identity"):         # the weight itself, cast
            return w.to(torch.int8)
        if kind == "uniform":                     # every entry the same step of the range
            return torch.full(w.shape, 64, dtype=torch.int8)
        if kind == "random":
            return torch.randint(-128, 128, w.shape, generator=g, dtype=torch.int8)
        return (ref.quantize_per_tensor(w)[0].long() + torch.randint(-2, 3, w.shape, generator=g)).clamp(
            -128, 127).to(torch.int8)             # noise around the right integers

    def per_tensor(w, scale=None):
        return ints(w), (w.abs().max() / 127 if scale is None else scale)

    def per_channel(w, axis=0, scales=None):
        return ints(w), (w.abs().amax(dim=1 - axis) / 127).clamp_min(1e-8)

    def dequantize(q, scale, axis=0):
        if kind == "echo":
            return q.float()
        return ints(q.float()).float() * 0.01

    def weights(w):
        if kind == "echo":
            return w.clone()
        if kind == "identity":
            return torch.eye(*w.shape)
        if kind == "noise":
            return w + 0.01 * torch.randn(w.shape, generator=g)
        return ints(w).float() * 0.01

    def conv1d_to_linear(model):
        if kind == "echo":
            return model
        ref.conv1d_to_linear(model)
        with torch.no_grad():
            for m in model.transformer.h.modules():
                if isinstance(m, nn.Linear):
                    m.weight.copy_(weights(m.weight))
        return model

    def int8_round_trip(lin):
        out = copy.deepcopy(lin)
        with torch.no_grad():
            out.weight.copy_(weights(lin.weight))
        return out

    return {"conv1d_to_linear": conv1d_to_linear, "quantize_per_tensor": per_tensor,
            "quantize_per_channel": per_channel, "dequantize": dequantize, "int8_round_trip": int8_round_trip}


@pytest.mark.parametrize("kind", KINDS)
def test_degenerate_answers_earn_nothing(kind, one_torch_thread):
    earned, messages = points(degenerate(kind))
    assert earned == 0, (earned, sorted(set(LESSON.ids()) - set(messages)))


def test_torch_quantization_earns_nothing(one_torch_thread):
    def per_tensor(w, scale=None):
        scale = w.abs().max() / 127 if scale is None else scale
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.quantize_per_tensor(w, float(scale), 0, torch.qint8).int_repr(), scale

    earned, messages = points(dict(degenerate("zeros"), quantize_per_tensor=per_tensor))
    assert earned == 0
    for check_id in ("per_tensor_matches_torch", "rounding_and_clamping"):
        assert messages[check_id] == ("calls torch's own quantization: compute the scale, round and clamp yourself"), \
            messages[check_id]
