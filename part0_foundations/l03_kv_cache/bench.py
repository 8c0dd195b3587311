"""Benchmark: generate 512 tokens with the KV cache and without it (same model, same run); print the speed ratio
and save the latency of every step against its position.

    .venv/bin/python -m part0_foundations.l03_kv_cache.bench            # writes results/bench_latency.json
    .venv/bin/python -m part0_foundations.l03_kv_cache.bench --threads 2 --tokens 512

Without the cache, step ``i`` is a forward pass over the prompt plus ``i`` tokens: its latency rises with the
position. With the cache, each step is a forward pass over one token plus an attention read of the cache: nearly
flat. The site's latency plot is drawn from the saved JSON (with the run's date and host), never re-measured.
Timings are wall-clock on whatever else the machine is doing: the load average is saved with them.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from course.machine import records
from part0_foundations.l03_kv_cache.train import load_checkpoint

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "bench_latency.json"
PROMPT = "The KV cache"




def time_steps(model, prompt, n_tokens, use_cache):
    """Seconds for each generation step (step 0 includes the prefill with the cache), the tokens and the logits."""
    times, toks, logits = [], [], []
    t = time.perf_counter()
    for nxt, lg in model.generate_steps(prompt, n_tokens, use_cache=use_cache):
        now = time.perf_counter()
        times.append(now - t)
        toks.append(nxt)
        logits.append(lg)
        t = now
    return times, torch.cat(toks, dim=1), torch.stack(logits, dim=1)


def run(n_tokens=512, threads=1, out: Path | None = RESULTS):
    if n_tokens < 2 or threads < 1:
        raise SystemExit("tokens: must be >= 2; threads: must be >= 1")
    torch.set_num_threads(threads)
    model, tok = load_checkpoint()
    prompt = torch.tensor([tok.encode(PROMPT)])
    time_steps(model, prompt, 8, True)  # warm-up: first-call allocations are not the cache's fault
    time_steps(model, prompt, 8, False)
    record = records.run_record(["--tokens", str(n_tokens), "--threads", str(threads)],
                                program="python -m part0_foundations.l03_kv_cache.bench")
    cached, toks_c, log_c = time_steps(model, prompt, n_tokens, True)
    uncached, toks_u, log_u = time_steps(model, prompt, n_tokens, False)
    ratio = sum(uncached) / sum(cached)
    p0 = prompt.shape[1]
    result = {
        "what": f"greedy generation of {n_tokens} tokens after a {p0}-token prompt, with and without the KV cache",
        **record, "load_average_at_end": records.load_average(), "torch": torch.__version__, "threads": threads,
        "prompt_tokens": p0, "new_tokens": n_tokens,
        "positions": list(range(p0, p0 + n_tokens)),
        "cached_ms": [round(s * 1e3, 4) for s in cached],
        "uncached_ms": [round(s * 1e3, 4) for s in uncached],
        "cached_total_s": round(sum(cached), 4), "uncached_total_s": round(sum(uncached), 4),
        "speed_ratio": round(ratio, 2),
        "same_tokens": bool(torch.equal(toks_c, toks_u)),
        "max_abs_logit_difference": float((log_c - log_u).abs().max()),
        "note": "step 0 with the cache includes the prefill of the prompt; wall-clock on a shared machine",
    }
    print(f"{n_tokens} tokens: with cache {sum(cached):.2f} s, without {sum(uncached):.2f} s -> "
          f"speed ratio {ratio:.1f}x (same tokens: {result['same_tokens']}, max logit difference "
          f"{result['max_abs_logit_difference']:.2e}; {threads} thread(s), load {record['load_average_at_start'] or 0:.1f})")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"saved {out}")
    return result


def main():
    ap = argparse.ArgumentParser(description="KV cache vs no cache: generation speed ratio and per-step latency.")
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the machine may be shared)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    run(args.tokens, args.threads, args.out)


if __name__ == "__main__":
    main()
