"""The lesson-04 comparison: FP32 against INT8 per tensor and per output channel, by torch.ao and by hand.

    .venv/bin/python -m part0_foundations.l04_gpt2_int8.compare                       # the shipped model
    .venv/bin/python -m part0_foundations.l04_gpt2_int8.compare --model-dir ~/gpt2    # real GPT-2 124M, saved
                                                                                       # with save_pretrained

For the loaded model it measures, for every variant: state bytes (``torch.save`` of the state dict), logit error
against FP32, perplexity on the held-out text and the CPU latency of one forward pass over a fixed prompt; and,
for every Linear layer, the weight error (max, mean, SQNR in dB) of both scale schemes and the distribution of
the per-channel scales. It prints the tables and saves everything as JSON (by default ``results/comparison.json``
for the shipped model, ``results/comparison_<folder>.json`` for ``--model-dir``); the site page is rendered from
``results/comparison.json``. Latency is measured on whatever else the machine is doing: compare rows with each
other, not with another run.
"""
from __future__ import annotations

import argparse
import copy
import gc
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from course.shared import tables
from course.machine import records
from part0_foundations.l04_gpt2_int8 import data
from part0_foundations.l04_gpt2_int8.int8 import (
    SCHEMES, conv1d_to_linear, dequantize, is_tied, library_weight, linear_names, quantize_by_hand,
    quantize_per_channel, quantize_per_tensor, quantize_with_torch, state_bytes, weight_error,
)

HIST_BINS = 20  # histogram of per-channel scale / per-tensor scale over (0, 1]
VARIANTS = [
    # key, method, scheme, lm_head quantized too
    ("fp32", None, None, False),
    ("torch_per_tensor", "torch.ao", "per_tensor", False),
    ("torch_per_channel", "torch.ao", "per_channel", False),
    ("hand_per_tensor", "by hand", "per_tensor", False),
    ("hand_per_channel", "by hand", "per_channel", False),
    ("torch_per_tensor_lm_head", "torch.ao", "per_tensor", True),
    ("torch_per_channel_lm_head", "torch.ao", "per_channel", True),
    ("hand_per_channel_lm_head", "by hand", "per_channel", True),
]


def _quantized_count(model) -> int:
    from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

    return sum(isinstance(m, DynamicQuantizedLinear) for m in model.modules())


def build_variant(fp32_model, method, scheme, include_lm_head):
    """(model, deprecation warning or None) for one row of the table."""
    if method is None:
        return fp32_model, None
    if method == "torch.ao":
        return quantize_with_torch(fp32_model, scheme, include_lm_head)
    return quantize_by_hand(fp32_model, scheme, include_lm_head), None


@torch.no_grad()
def latencies_ms(models: list, prompt_ids: torch.Tensor, runs: int, warmup: int = 2) -> list[dict]:
    """Median and best wall time (ms) of one forward pass over the prompt, for each model.

    The models take turns (run 1 of every model, then run 2, ...), so a burst of load from elsewhere on the machine
    hits every row alike instead of one.
    """
    for m in models:
        for _ in range(warmup):
            m(prompt_ids)
    times = [[] for _ in models]
    for _ in range(runs):
        for i, m in enumerate(models):
            t0 = time.perf_counter()
            m(prompt_ids)
            times[i].append((time.perf_counter() - t0) * 1e3)
    return [{"latency_ms": statistics.median(t), "latency_best_ms": min(t)} for t in times]


def library_sqnr(fp32_model, qmodel) -> dict:
    """SQNR (dB) of the weights a torch.ao-quantized model computes with, per Linear name (lm_head included)."""
    fp, q = dict(fp32_model.named_modules()), dict(qmodel.named_modules())
    return {n: weight_error(fp[n].weight, library_weight(q[n]))["sqnr_db"] for n in linear_names(fp32_model, True)}


def layer_report(fp32_model, library: dict) -> list[dict]:
    """Weight error of both schemes for every Linear (and lm_head/wte), plus the per-channel scale histogram.

    ``library`` maps a scheme to ``library_sqnr`` of the torch.ao model with every Linear quantized.
    """
    modules = dict(fp32_model.named_modules())
    rows = []
    for name in linear_names(fp32_model, include_lm_head=True):
        w = modules[name].weight.detach().float()
        qt, st = quantize_per_tensor(w)
        qc, sc = quantize_per_channel(w, axis=0)
        ratio = (sc / st).clamp(max=1.0)
        hist = torch.histc(ratio, bins=HIST_BINS, min=0.0, max=1.0)
        row = {
            "name": name, "shape": list(w.shape), "per_tensor_scale": float(st),
            "per_tensor": weight_error(w, dequantize(qt, st)),
            "per_channel": weight_error(w, dequantize(qc, sc, axis=0)),
            "scale_ratio_hist": [int(h) for h in hist],
            "scale_ratio_median": float(ratio.median()),
        }
        for scheme, sqnr in library.items():
            row[f"torch_{scheme}_sqnr_db"] = sqnr[name]
        rows.append(row)
    return rows


# Below this many parameters every variant is kept in memory so that their latencies can be measured taking turns;
# above it (GPT-2 124M) each variant is timed as soon as it is built and then dropped, to stay within a few GB.
INTERLEAVE_MAX_PARAMS = 20_000_000


def run_comparison(model, tokenizer, *, label: str, max_eval_tokens: int = 16384, logit_windows: int = 4,
                   latency_runs: int = 20, threads: int = 2) -> dict:
    """Every number of the lesson's tables for one loaded GPT2LMHeadModel (left untouched: works on a copy)."""
    torch.set_num_threads(threads)
    window = min(model.config.n_positions, 1024)
    windows = data.token_windows(tokenizer, data.heldout_text(), window, max_eval_tokens)
    probe = windows[:min(logit_windows, data.windows_per_batch(window, model.config.vocab_size))]
    prompt = torch.tensor([tokenizer(data.PROMPT)["input_ids"][:window]])

    model.eval()
    # Before conversion the library finds no nn.Linear in the blocks: every Conv1D is passed by.
    before, _ = quantize_with_torch(model, "per_tensor", include_lm_head=False)  # works on a copy
    quantized_before = _quantized_count(before)
    del before  # one model's worth of memory: GPT-2 124M is 0.5 GB in FP32
    ref_before = data.logits(model, probe)
    fp32 = conv1d_to_linear(copy.deepcopy(model)).eval()
    ref = data.logits(fp32, probe)
    n_linear = len(linear_names(fp32))

    interleave = sum(p.numel() for p in fp32.parameters()) <= INTERLEAVE_MAX_PARAMS
    variants, models, deprecation, library = [], [], None, {}
    fp32_bytes = state_bytes(fp32)
    for key, method, scheme, lm_head in VARIANTS:
        m, dep = build_variant(fp32, method, scheme, lm_head)
        deprecation = deprecation or dep
        if method == "torch.ao" and lm_head:
            library[scheme] = library_sqnr(fp32, m)  # every Linear quantized, lm_head included
        out = data.logits(m, probe)
        err = (out - ref).abs()
        nbytes = state_bytes(m)
        variants.append({
            "key": key, "method": method or "—", "scheme": scheme or "—",
            "lm_head": "int8 (untied copy)" if lm_head else "fp32, tied",
            "tied": is_tied(m), "quantized_modules": _quantized_count(m),
            "state_bytes": nbytes, "bytes_vs_fp32": nbytes / fp32_bytes,
            "logit_max_abs_err": float(err.max()), "logit_mean_abs_err": float(err.mean()),
            "top1_agreement": float((out.argmax(-1) == ref.argmax(-1)).float().mean()),
            "perplexity": data.perplexity(m, windows),
        })
        if interleave:
            models.append(m)
        else:
            variants[-1].update(latencies_ms([m], prompt, latency_runs)[0])
        del m, out, err
        gc.collect()
        print(f"  {key:28s} {nbytes:>12,} B  ppl {variants[-1]['perplexity']:.3f}", file=sys.stderr, flush=True)
    if interleave:
        for v, lat in zip(variants, latencies_ms(models, prompt, latency_runs)):
            v.update(lat)

    cfg = model.config
    return {
        "model": {
            "label": label, "n_layer": cfg.n_layer, "n_head": cfg.n_head, "n_embd": cfg.n_embd,
            "vocab_size": cfg.vocab_size, "n_positions": cfg.n_positions,
            "parameters": sum(p.numel() for p in model.parameters()),
            "linear_layers": n_linear, "tied_on_load": is_tied(model),
        },
        "conversion": {
            "conv1d_layers_converted": n_linear,
            "logit_max_abs_diff": float((ref - ref_before).abs().max()),
            "quantized_by_torch_before_conversion": quantized_before,
            "quantized_by_torch_after_conversion": next(v["quantized_modules"] for v in variants if v["key"] == "torch_per_tensor"),
            "quantized_by_torch_after_conversion_with_lm_head": next(v["quantized_modules"] for v in variants if v["key"] == "torch_per_tensor_lm_head"),
        },
        "eval": {"window": window, "tokens": windows.numel(), "logit_tokens": probe.numel(),
                 "perplexity_batch_windows": data.windows_per_batch(window, cfg.vocab_size),
                 "prompt_tokens": prompt.shape[1]},
        "latency": {"runs": latency_runs, "threads": threads, "statistic": "median (and best) ms of one forward pass" + (", variants taking turns" if interleave else ""),
                    "load_average_at_end": records.load_average()},
        "torch_deprecation_warning": deprecation,
        "versions": {"torch": torch.__version__,
                     "quantized_engine": torch.backends.quantized.engine},
        "variants": variants,
        "layers": layer_report(fp32, library),
    }


LABELS = {
    "fp32": "FP32 (Conv1D → Linear)",
    "torch_per_tensor": "torch.ao dynamic INT8, per tensor",
    "torch_per_channel": "torch.ao dynamic INT8, per channel",
    "hand_per_tensor": "by hand, weight-only INT8, per tensor",
    "hand_per_channel": "by hand, weight-only INT8, per channel",
    "torch_per_tensor_lm_head": "torch.ao per tensor **+ lm_head**",
    "torch_per_channel_lm_head": "torch.ao per channel **+ lm_head**",
    "hand_per_channel_lm_head": "by hand per channel **+ lm_head**",
}


def _english(message: str, **values) -> str:
    return message.format(**values) if values else message


def variants_table(results: dict, tr=_english) -> str:
    """The comparison table; ``tr`` translates its words (a ``course.shared.i18n.Translator`` on the site)."""
    rows = tables.head(tr("| variant | lm_head tied to wte | state bytes | vs FP32 | max \\|Δlogit\\| | mean \\|Δlogit\\| "
               "| top-1 agree | perplexity | latency ms (median / best) |"), "llrrrrrrr")
    for v in results["variants"]:
        rows.append(
            tables.row(tr(LABELS[v['key']]) if v['key'] in LABELS else v['key'],
                       tr('yes (FP32)') if v['tied'] else tr('**no** (INT8 copy)'),
                       f"{v['state_bytes']:,}", f"{v['bytes_vs_fp32']:.3f}×",
                       f"{v['logit_max_abs_err']:.4f}", f"{v['logit_mean_abs_err']:.5f}",
                       f"{100 * v['top1_agreement']:.2f}%", f"{v['perplexity']:.3f}",
                       f"{v['latency_ms']:.1f} / {v['latency_best_ms']:.1f}"))
    return "\n".join(rows) + "\n"


def layers_table(results: dict, tr=_english) -> str:
    rows = tables.head(tr("| layer | shape (out, in) | per tensor: max \\|err\\| | mean \\|err\\| | SQNR dB "
               "| per channel: max \\|err\\| | mean \\|err\\| | SQNR dB | torch.ao SQNR dB (tensor / channel) "
               "| median channel scale / tensor scale |"), "llrrrrrrrr")
    for r in results["layers"]:
        t, c = r["per_tensor"], r["per_channel"]
        lib = (f"{r['torch_per_tensor_sqnr_db']:.1f} / {r['torch_per_channel_sqnr_db']:.1f}"
               if "torch_per_tensor_sqnr_db" in r else "—")
        name = r["name"].replace("transformer.", "") + (" (= wte)" if r["name"] == "lm_head" else "")
        rows.append(
            tables.row(name, f"{r['shape'][0]} × {r['shape'][1]}", f"{t['max_abs']:.2e}", f"{t['mean_abs']:.2e}",
                       f"{t['sqnr_db']:.1f}", f"{c['max_abs']:.2e}", f"{c['mean_abs']:.2e}",
                       f"{c['sqnr_db']:.1f}", lib, f"{r['scale_ratio_median']:.3f}"))
    return "\n".join(rows) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-dir", type=Path, default=None,
                   help="a local folder saved with save_pretrained (e.g. GPT-2 124M); default: the shipped model")
    p.add_argument("--out", type=Path, default=None, help="where to save the JSON results")
    p.add_argument("--max-eval-tokens", type=int, default=16384)
    p.add_argument("--latency-runs", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    for field in ("max_eval_tokens", "latency_runs", "threads"):
        if getattr(args, field) < 1:
            print(f"error: --{field.replace('_', '-')}: must be a positive integer", file=sys.stderr)
            return 2
    try:
        model, tokenizer = data.load_model(args.model_dir)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    shipped = args.model_dir is None
    label = "shipped lesson model" if shipped else str(args.model_dir)
    out = args.out or (data.RESULTS_PATH if shipped else
                       data.RESULTS_PATH.with_name(f"comparison_{args.model_dir.resolve().name}.json"))
    record = records.run_record(argv, program="python -m part0_foundations.l04_gpt2_int8.compare")
    print(f"Comparing {label} on {args.threads} threads (load average now {record['load_average_at_start'] or 0:.1f})",
          file=sys.stderr)
    try:
        results = run_comparison(model, tokenizer, label=label, max_eval_tokens=args.max_eval_tokens,
                                 latency_runs=args.latency_runs, threads=args.threads)
    except ValueError as exc:  # e.g. --max-eval-tokens shorter than one window
        print(f"error: {exc}", file=sys.stderr)
        return 2
    weights = next((f for f in ("model.safetensors", "pytorch_model.bin") if (Path(args.model_dir or data.SHIPPED_MODEL_DIR) / f).exists()), None)
    results["model"]["weights_sha256"] = data.sha256(Path(args.model_dir or data.SHIPPED_MODEL_DIR) / weights) if weights else None
    results = {"record": record, **results}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(variants_table(results))
    print(layers_table(results))
    print(f"saved {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
