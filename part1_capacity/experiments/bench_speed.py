"""Benchmark: the per-weight-type speed model against every saved quantization ladder, as one table.

    python -m part1_capacity.experiments.bench_speed [--constants-file]

Reads every saved ladder (``results/part1/e2.json``, ``results/part1/e2_*.json``, written by ``capacity e2 --save
[--save-name NAME] --threads 2,1 --calibrate``), recomputes the predictions from the kernel rounds timed around
each run (``--calibrate``) or, for a run without them or with ``--constants-file``, from
``results/part1/e2_kernels.json`` (``python -m part1_capacity.experiments.engine.kernels --save``), and prints predicted ÷ measured
for pp512 and tg128, with the goals (tg128 within 15 %, pp512 within 25 %). Nothing is timed here: the timings are
the saved runs'.
"""
from __future__ import annotations

import sys


def main(argv=None) -> int:
    import argparse

    from part1_capacity.experiments.engine import kernels
    from part1_capacity.experiments.engine import quant_ladder as ql

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--constants-file", action="store_true",
                    help="predict every ladder from results/part1/e2_kernels.json, not from the kernels timed around it")
    args = ap.parse_args(argv)
    constants = kernels.load_constants() if args.constants_file else None
    if args.constants_file and not constants:
        print("no saved kernel constants: run `python -m part1_capacity.experiments.engine.kernels --save`", file=sys.stderr)
        return 1
    ladders = ql.saved_ladders(constants, "results/part1/e2_kernels.json")
    rows = ql.validation_rows(ladders)
    if not rows:
        print("no saved ladder with kernel constants: run `python -m part1_capacity.experiments.engine.kernels --save` and "
              "`capacity e2 --save --threads 2,1`", file=sys.stderr)
        return 1
    head = (f"{'run':14} {'params':>7} {'thr':>3} {'type':7} {'pp512':>8} {'model':>8} {'pred/meas':>9}  "
            f"{'tg128':>7} {'model':>7} {'pred/meas':>9}  {'load':>4}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['run']:14} {r['params'] / 1e9:6.2f}B {r['threads']:3d} {r['type']:7} {r['pp512']:8.1f} "
              f"{r['pp512_predicted']:8.1f} {1 + r['pp512_error']:8.2f}{'' if r['pp512_ok'] else '!'} "
              f"{'':1} {r['tg128']:7.2f} {r['tg128_predicted']:7.2f} {1 + r['tg128_error']:8.2f}"
              f"{'' if r['tg128_ok'] else '!'}  {r['load_average'] or 0:4.1f}")
    n = len(rows)
    tg_ok, pp_ok = sum(r["tg128_ok"] for r in rows), sum(r["pp512_ok"] for r in rows)
    worst_tg = max(rows, key=lambda r: abs(r["tg128_error"]))
    worst_pp = max(rows, key=lambda r: abs(r["pp512_error"]))
    print(f"\ntg128 within {ql.TG_GOAL:.0%}: {tg_ok}/{n} (worst {worst_tg['type']}, {worst_tg['threads']} threads, "
          f"{worst_tg['run']}: {worst_tg['tg128_error']:+.0%}); pp512 within {ql.PP_GOAL:.0%}: {pp_ok}/{n} (worst "
          f"{worst_pp['type']}, {worst_pp['threads']} threads, {worst_pp['run']}: {worst_pp['pp512_error']:+.0%})")
    print("'!' marks a miss of the goal; load = the 1-minute load average when that level was measured")
    for run in dict.fromkeys(r["run"] for r in rows):
        print(f"{run}: predicted from {next(r['basis'] for r in rows if r['run'] == run).split(' (')[0]}")
    for name, r in ladders.items():
        for th, levels in r.get("levels_by_threads", {}).items():
            s = ql.study_ratios(levels)
            if s:
                print(f"{name}, {th} threads: F32 → Q4_K_M size {s['size']:.2f}× (study {ql.STUDY['size']}×), "
                      f"prefill {s['prefill_gain']:+.0%} (study {ql.STUDY['prefill_gain']:+.0%}), decode "
                      f"{s['decode_gain']:+.0%} (study {ql.STUDY['decode_gain']:+.0%}), size ratio "
                      f"{s['theory']:.1f}× (study {ql.STUDY['theory']}×)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
