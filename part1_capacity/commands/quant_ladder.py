"""`capacity e2 [--gguf PATH] [--params N] [--json] [--save]`: the quantization ladder, measured vs predicted."""
from __future__ import annotations

import argparse
import sys

from part1_capacity.calculator.base import validate

MAX_REPEATS = 100


def _count(text: str) -> int:
    """A parameter count: 500000000, 5e8 or 500M."""
    t = text.strip().upper().replace("_", "").replace(",", "")
    mult = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9}.get(t[-1:], 1)
    try:
        v = float(t[:-1] if mult != 1 else t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a count such as 500000000, 5e8 or 500M, got '{text}'")
    # E2 writes a model of this many parameters to disk: from a hundred thousand to what the disk can hold
    if not (v == v and 1e5 <= v <= 1e11) or v != int(v):
        raise argparse.ArgumentTypeError(f"expected a whole count from 100K to 100B, got {text[:40]!r}")
    return int(v)


def _threads(text: str) -> tuple[int, ...]:
    """Thread counts: "2" or "2,1" (the first is the run's main one)."""
    try:
        out = tuple(int(x) for x in text.split(","))
    except ValueError:
        out = ()
    if not out or any(not 1 <= t <= 256 for t in out) or len(set(out)) != len(out):
        raise argparse.ArgumentTypeError(f"expected distinct counts from 1 to 256 such as 2 or 2,1, "
                                         f"got '{text}'")
    return out


def _name(text: str) -> str:
    if not text.startswith("e2") or not text.replace("_", "").replace("-", "").replace(".", "").isalnum() \
            or len(text) > 40:
        raise argparse.ArgumentTypeError(f"--save-name: a file name starting with 'e2' (letters, digits, _ - .), "
                                         f"got '{text}'")
    return text


def register(sub):
    p = sub.add_parser("e2", aliases=["quant-ladder"], help="E2: F32/F16/Q8_0/Q5_0/Q4_K_M prefill and decode, measured vs the calculator",
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
                   help="also save results/part1/e2.json and host_accelerator.json (the site reads them)")
    p.add_argument("--threads", type=_threads, default=None, metavar="N[,N...]",
                   help="engine threads, one count or several (default: this process's CPUs); each file is "
                        "measured at every count, the first is the run's main one")
    p.add_argument("--save-name", type=_name, default="e2", metavar="NAME",
                   help="with --save: results/NAME.json (default e2, the run the site shows first)")
    p.add_argument("--calibrate", action="store_true",
                   help="also time llama.cpp's matmul kernels (matmul-bench) before and after the ladder, about a "
                        "minute, and each level's streamed decode just before and after it, and predict from those: "
                        "they share the machine's state with the ladder")
    p.add_argument("--note", default="", help="a remark saved with the result (e.g. 'machine shared')")
    p.set_defaults(func=main)


def main(args) -> int:
    from part1_capacity.calculator.base.errors import InputError

    if not 2 <= args.repeats <= MAX_REPEATS:  # checked before the engine is even imported
        raise InputError(f"--repeats: between 2 (a spread needs two runs) and {MAX_REPEATS} (each run takes "
                         f"seconds to minutes), got {args.repeats}")
    from part1_capacity.experiments.engine import quant_ladder
    from part1_capacity.experiments.engine.common import run_record, save_result, scratch_dir
    from part1_capacity.experiments.engine.progress import Progress
    record = run_record()
    bar = Progress(quant_ladder.total_steps(), "e2")
    with scratch_dir("e2-") as tmp:
        result = quant_ladder.run(tmp, gguf=args.gguf, params=args.params, method=args.method, repeats=args.repeats,
                        accelerator=args.accelerator, threads=args.threads, progress=bar,
                        calibrate=args.calibrate)
    bar.close()
    from course.machine.records import load_average

    result = {**result, **record, "load_average_at_end": load_average(), "note": args.note}
    if args.save:
        print(f"saved {save_result(args.save_name, result)}", file=sys.stderr)
        if result["host_profile"] and args.save_name == "e2":
            print(f"saved {save_result('host_accelerator', result['host_profile'])}", file=sys.stderr)
    if args.json:
        print(validate.dumps_json(result, indent=1))
        return 0
    m, a = result["model"], result["accelerator"]
    print(f"model: {m['name']} ({m['n_params']:,} parameters); measured by {result['method']}, "
          f"{result['threads']} threads")
    print(f"predicted for {a['id']}: {a['bandwidth'] / 1e9:.1f} GB/s, {a['flops_16'] / 1e9:.0f} GFLOP/s "
          f"(16-bit class), {a['flops_int8'] / 1e9:.0f} GOP/s int8")
    print(f"{'thr':>3} {'type':7} {'MB':>7} {'bpw':>5} {'pp512':>8} {'model':>8} {'err':>5} {'roofl':>7} "
          f"{'tg128':>7} {'model':>7} {'err':>5} {'roofl':>7}")

    def err(r, m):
        return f"{100 * r['prediction_error'][m]:+4.0f}%" if r.get("prediction_error") else "    -"

    def num(v, f):
        return format(v, f) if v is not None else "-"

    for th, rows in result["levels_by_threads"].items():
        for r in rows:
            print(f"{th:>3} {r['type']:7} {r['file_bytes'] / 1e6:7.0f} {r['bits_per_weight']:5.2f} "
                  f"{r['pp512_median_tps']:8.1f} {num(r['predicted_pp512_tps'], '8.1f')} {err(r, 'pp512')} "
                  f"{r['roofline_pp512_tps']:7.1f} {r['tg128_median_tps']:7.2f} "
                  f"{num(r['predicted_tg128_tps'], '7.2f')} {err(r, 'tg128')} {r['roofline_tg128_tps']:7.2f}")
    return 0
