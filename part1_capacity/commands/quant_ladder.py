"""`capacity e2 [--gguf PATH] [--params N] [--json] [--save]`: the quantization ladder, measured vs predicted."""
from __future__ import annotations

import argparse
import json
import sys

MAX_REPEATS = 100


def _count(text: str) -> int:
    """A parameter count: 500000000, 5e8 or 500M."""
    t = text.strip().upper().replace("_", "").replace(",", "")
    mult = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9}.get(t[-1:], 1)
    try:
        v = float(t[:-1] if mult != 1 else t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"--params: expected a count such as 500000000, 5e8 or 500M, got '{text}'")
    if v != int(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"--params: expected a positive whole count, got '{text}'")
    return int(v)


def register(sub):
    p = sub.add_parser("e2", aliases=["quant-ladder"], help="E2: F16/Q8_0/Q5_0/Q4_K_M prefill and decode, measured vs the calculator",
                       description="Quantize one F32 model with llama.cpp, measure pp512 and tg128 separately "
                                   "(llama-bench if available, else the Python API), and compare with the "
                                   "calculator's roofline on this host's measured profile.")
    p.add_argument("--gguf", metavar="PATH", help="F32 or F16 GGUF to quantize (default: a generated llama model)")
    p.add_argument("--params", type=_count, default=500_000_000, metavar="N",
                   help="parameters of the generated model (default 500M: weights far larger than the caches)")
    p.add_argument("--method", choices=("auto", "llama-bench", "python"), default="auto",
                   help="how to measure (auto: llama-bench when found)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per test after one warm-up (default 3)")
    p.add_argument("--accelerator", metavar="NAME|JSON",
                   help="predict for this calculator accelerator instead of measuring this host")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--save", action="store_true",
                   help="also save part1_capacity/results/e2.json and host_accelerator.json (the site reads them)")
    p.add_argument("--note", default="", help="a remark saved with the result (e.g. 'machine shared')")
    p.set_defaults(func=main)


def main(args) -> int:
    from part1_capacity.errors import InputError

    if not 2 <= args.repeats <= MAX_REPEATS:  # checked before the engine is even imported
        raise InputError(f"--repeats: between 2 (a spread needs two runs) and {MAX_REPEATS} (each run takes "
                         f"seconds to minutes), got {args.repeats}")
    from part1_capacity.engine import quant_ladder
    from part1_capacity.engine.common import run_record, save_result, scratch_dir
    from part1_capacity.engine.progress import Progress
    record = run_record()
    bar = Progress(quant_ladder.total_steps(), "e2")
    with scratch_dir("e2-") as tmp:
        result = quant_ladder.run(tmp, gguf=args.gguf, params=args.params, method=args.method, repeats=args.repeats,
                        accelerator=args.accelerator, progress=bar)
    bar.close()
    result = {**result, **record, "note": args.note}
    if args.save:
        print(f"saved {save_result('e2', result)}", file=sys.stderr)
        if result["host_profile"]:
            print(f"saved {save_result('host_accelerator', result['host_profile'])}", file=sys.stderr)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    m, a = result["model"], result["accelerator"]
    print(f"model: {m['name']} ({m['n_params']:,} parameters); measured by {result['method']}, "
          f"{result['threads']} threads")
    print(f"predicted for {a['id']}: {a['bandwidth'] / 1e9:.1f} GB/s, {a['flops_16'] / 1e9:.0f} GFLOP/s "
          f"(16-bit class), {a['flops_int8'] / 1e9:.0f} GOP/s int8")
    print(f"{'type':7} {'MB':>7} {'bpw':>5} {'pp512':>8} {'pred':>8} {'tg128':>7} {'pred':>7} {'BW roof':>7}")
    for r in result["levels"]:
        print(f"{r['type']:7} {r['file_bytes'] / 1e6:7.0f} {r['bits_per_weight']:5.2f} {r['pp512_tps']:8.1f} "
              f"{r['predicted_pp512_tps']:8.1f} {r['tg128_tps']:7.2f} {r['predicted_tg128_tps']:7.2f} "
              f"{100 * r['bandwidth_fraction']:6.0f}%")
    return 0
