"""Figures and tables for site/part0/03_kv_cache.md, produced by the lesson's own code.

- measured vs law: the small model of each structure is prefilled here and its cache weighed (a few seconds);
- the latency plot and the speed ratio come from the saved benchmark run (results/bench_latency.json), with its
  date and host: nothing is re-timed while the site builds;
- the sample text comes from the shipped checkpoint;
- the 128K table uses the calculator's model profiles (part1_capacity/data/models.json, each with its source),
  whose cache sizes are the laws of laws.py.
"""
import json
from pathlib import Path

import torch

from part0_foundations.l03_kv_cache.bench import RESULTS
from part0_foundations.l03_kv_cache.gpt import GPT
from part0_foundations.l03_kv_cache.structures import STRUCTURES, law_bytes, law_growth_per_token

NAME = "l03"
T_VALUES = (16, 64, 256, 1024)
GiB = 2 ** 30


def _structures(out: Path):
    keys = ("n_layer", "d_model", "n_head", "n_kv_heads", "head_dim", "window", "kv_lora_rank", "qk_rope_head_dim",
            "d_inner", "d_state", "d_conv")
    # Which layer kinds read each field ("–" where the structure has no such layer).
    uses = {"n_kv_heads": ("full", "window"), "head_dim": ("full", "window"), "window": ("window",),
            "kv_lora_rank": ("mla",), "qk_rope_head_dim": ("mla",), "d_inner": ("ssm",), "d_state": ("ssm",),
            "d_conv": ("ssm",)}
    rows = ["| structure | " + " | ".join(f"`{k}`" for k in keys) + " |", "|---|" + "---|" * len(keys)]
    for name, cfg in STRUCTURES.items():
        cells = [str(getattr(cfg, k)) if k not in uses or set(uses[k]) & set(cfg.layer_types) else "–"
                 for k in keys]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    (out / "structures.md").write_text("\n".join(rows) + "\n")


def _measured_table(out: Path):
    lines = []
    for dtype, label, bpe in ((torch.float32, "fp32", 4), (torch.bfloat16, "bf16", 2)):
        lines += [f"**{label}** ({bpe} bytes per element): bytes the cache holds after a prefill of T tokens, "
                  f"measured (sum of `element_size() × numel()`) — ✓ when equal to the law, to the byte.", "",
                  "| structure | layers | law per token (growing) | " + " | ".join(f"T = {t:,}" for t in T_VALUES) + " |",
                  "|---|---|---|" + "---|" * len(T_VALUES)]
        for name, cfg in STRUCTURES.items():
            torch.manual_seed(0)
            model = GPT(cfg).to(dtype).eval()
            cells = []
            for T in T_VALUES:
                cache = model.new_cache()
                with torch.no_grad():
                    model(torch.randint(0, cfg.vocab_size, (1, T)), cache)
                got, want = cache.nbytes(), law_bytes(cfg, T, bpe)
                cells.append(f"{got:,} ✓" if got == want else f"{got:,} ✗ (law {want:,})")
            layers = " · ".join(cfg.layer_types)
            lines.append(f"| {name} | {layers} | {law_growth_per_token(cfg, bpe):,} B | " + " | ".join(cells) + " |")
        lines.append("")
    (out / "measured_vs_law.md").write_text("\n".join(lines))


def _latency(out: Path, plt):
    r = json.loads(RESULTS.read_text())
    import numpy as np

    fig, ax = plt.subplots(figsize=(8, 4))
    pos = np.array(r["positions"][1:])  # step 0 (with the prefill) is left out
    k = 15  # the machine was shared: raw steps are noisy, the running median shows the trend
    for key, label, color in (("uncached_ms", "without cache (whole sequence every step)", "C0"),
                              ("cached_ms", "with KV cache (one token per step)", "C1")):
        ms = np.array(r[key][1:])
        med = np.array([np.median(ms[max(0, i - k // 2):i + k // 2 + 1]) for i in range(len(ms))])
        ax.plot(pos, ms, lw=0.6, alpha=0.35, color=color)
        ax.plot(pos, med, lw=2, color=color, label=f"{label}, running median of {k}")
    ax.set_xlabel("position of the token being generated")
    ax.set_ylabel("latency of the step (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{r['new_tokens']} greedy tokens, lesson-03 GPT, {r['threads']} thread(s)")
    ax.legend()
    fig.savefig(out / "latency.png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    (out / "bench_summary.md").write_text(
        f"Generating **{r['new_tokens']} tokens** after a {r['prompt_tokens']}-token prompt took "
        f"**{r['uncached_total_s']:.2f} s without the cache** and **{r['cached_total_s']:.2f} s with it**: a speed "
        f"ratio of **{r['speed_ratio']:.1f}×**, with the same tokens ({'yes' if r['same_tokens'] else 'NO'}) and "
        f"logits within {r['max_abs_logit_difference']:.1e}. Run of {r['date_utc']} on `{r['host']}` "
        f"({r['cpu']}, torch {r['torch']}, {r['threads']} thread(s), load average {r['load_average_before_after'][0]} "
        f"before and {r['load_average_before_after'][1]} after: the machine was shared, so absolute times are "
        f"contended). Command: `{r['command']}`.\n")


def _sample(out: Path):
    from part0_foundations.l03_kv_cache.train import CHECKPOINT, load_checkpoint

    model, tok = load_checkpoint()
    made = torch.load(CHECKPOINT, map_location="cpu", weights_only=False)["made"]
    n_params = sum(p.numel() for p in model.parameters())
    prompt, temperature = "The KV cache", 0.7
    g = torch.Generator().manual_seed(0)
    ids = model.generate(torch.tensor([tok.encode(prompt)]), 300, temperature=temperature, generator=g)
    text = tok.decode(ids[0].tolist())
    c = model.config
    (out / "sample.md").write_text(
        f"A continuation of “{prompt}” sampled at temperature {temperature} (seed 0) from the shipped model ({c.n_layer} layers, d_model {c.d_model}, "
        f"{c.n_head} heads of {c.head_dim}, {c.n_kv_heads} K/V heads, {c.vocab_size} characters; "
        f"{n_params:,} parameters, "
        f"{CHECKPOINT.stat().st_size / 1e6:.1f} MB checkpoint; {made['steps']} steps of "
        f"{made['batch_size']} × {made['seq_len']} characters on {made['corpus_chars']:,} characters of course text, "
        f"validation loss {made['val_loss']:.2f} nats per character):\n\n```text\n{text}\n```\n")


def build(out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: extra threads only spin
    try:
        _structures(out)
        _measured_table(out)
        _sample(out)
    finally:
        torch.set_num_threads(before)
    _latency(out, plt)
