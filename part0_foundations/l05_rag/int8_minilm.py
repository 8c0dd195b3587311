"""Lesson 04's INT8 routes on MiniLM, scored the way lesson 05 retrieves: cosine to FP32 on the course's chunks,
recall@5 and MRR on the labelled questions.

The quantization (``part0_foundations.l04_gpt2_int8.minilm``) is lesson 04's; the corpus, the chunking and the
retrieval metrics are this lesson's, so the measurement lives here — a lesson uses only the lessons before it.
``python -m part0_foundations.l05_rag.int8_minilm`` reruns the study (a few minutes on 2 cores) and writes lesson 04's
``results/minilm.json``, which lesson 04's page is built from.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from course.machine.records import run_record
from part0_foundations.l04_gpt2_int8.minilm import (FIGURE_LAYER, RESULTS, VARIANTS, ModelEmbedder, activation_spread,
                                                   encoder_linears, layer_rows, load_minilm, variant)
from part0_foundations.l05_rag import evalset
from part0_foundations.l05_rag.pipeline import OVERLAP, SIZE
from part0_foundations.l05_rag.rag import chunk_corpus, load_corpus


def study(folder, variants=VARIANTS) -> dict:
    """The whole measurement on the Markdown pages under ``folder`` (lesson 05's corpus and questions)."""
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
    ap = argparse.ArgumentParser(prog="python -m part0_foundations.l05_rag.int8_minilm",
                                 description="INT8 per tensor vs per channel on MiniLM (a real pretrained model).")
    ap.add_argument("--corpus", default=str(Path(__file__).resolve().parents[2] / "site"),
                    help="folder of Markdown pages with lesson 05's labelled questions (default: the course site)")
    ap.add_argument("--write", action="store_true", help=f"save the result as {RESULTS.name} (the page reads it)")
    args = ap.parse_args(argv)
    if not Path(args.corpus).is_dir():
        print(f"minilm: error: --corpus: no folder at '{args.corpus}'", file=sys.stderr)
        return 2
    torch.set_num_threads(min(2, torch.get_num_threads()))
    result = {**study(args.corpus), **run_record(argv, program="python -m part0_foundations.l05_rag.int8_minilm")}
    for name, v in result["variants"].items():
        print(f"{name:30} cosine {v['cosine_mean']:.4f} (min {v['cosine_min']:.4f})  recall@5 {v['recall@5']:.3f}  "
              f"MRR {v['mrr']:.3f}")
    if args.write:
        RESULTS.write_text(json.dumps(result, indent=1) + "\n")
        print(f"saved {RESULTS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
