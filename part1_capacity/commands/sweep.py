"""`capacity sweep`: a context × batch grid (powers of two by default) → accelerators needed and added by KV,
as tables, JSON or heatmap PNGs. Vectorized: see part1_capacity/experiments/bench_sweep.py for the rate."""
from __future__ import annotations

import argparse
import math

from part1_capacity.calculator.base import validate
from part1_capacity.commands._common import (add_revision_flag, add_workload_flags, model_name, positive_int,
                                             workload_from_args)
from part1_capacity.calculator.base.fmt import fmt_k, table
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.readers.loader import load_model


MAX_GRID = 128      # values per axis: 128 × 128 cells stay a table a reader can scan, and quick to compute


def _int_list(text: str) -> list[int]:
    items = [x for x in text.split(",") if x.strip()]
    if len(items) > MAX_GRID:      # refused before any parsing: a 5000-value list is not a table anyone reads
        raise argparse.ArgumentTypeError(f"at most {MAX_GRID} values, got {len(items)}")
    return [positive_int(x) for x in items]


def register(sub):
    p = sub.add_parser("sweep", help="a context × batch grid: accelerators needed and added by KV (heatmaps)")
    p.add_argument("--model", required=True)
    add_revision_flag(p)
    p.add_argument("--accelerator", required=True)
    p.add_argument("--contexts", type=_int_list, default=None,
                   help="comma-separated contexts (default: powers of two from 1K to the model's maximum)")
    p.add_argument("--batches", type=_int_list, default=None, help="comma-separated batches (default 1..256, ×2)")
    add_workload_flags(p, grid=True)
    p.add_argument("--json", action="store_true")
    p.add_argument("--heatmap", metavar="PNG", help="write the two heatmaps to this PNG file (a new name or a "
                                                    "regular file; a symbolic link is not followed unless "
                                                    "--follow-symlinks)")
    p.add_argument("--follow-symlinks", action="store_true",
                   help="with --heatmap: write through a symbolic link at that path to its target")
    p.set_defaults(func=run)


def run(a) -> int:
    # the sweep (numpy arrays, matplotlib) is loaded when a sweep runs: `capacity plan` and `compare` need neither
    from part1_capacity.calculator.uses.sweep import heatmaps, pow2_grid, sweep

    model = load_model(model_name(a))
    contexts = a.contexts or pow2_grid(min(1024, model.max_context), model.max_context).tolist()
    batches = a.batches or pow2_grid(1, 256).tolist()
    if max(contexts) > model.max_context:
        raise InputError(f"contexts: {max(contexts)} exceeds {model.id}'s maximum context of "
                         f"{model.max_context} tokens")
    if a.follow_symlinks and a.heatmap is None:
        raise InputError("--follow-symlinks: only with --heatmap (the one file a sweep writes)")
    if a.heatmap is not None:   # checked before the computation: a sweep is not thrown away for a missing folder
        validate.output_path(a.heatmap, "heatmap", a.follow_symlinks)
        if not a.heatmap.endswith(".png"):
            raise InputError(f"heatmap: expected a .png path, got {validate.show(a.heatmap)}")
    s = sweep(model, a.accelerator, contexts, batches, workload_from_args(a, context=max(contexts),
                                                                         batch=max(batches)))
    if a.heatmap is not None:
        with validate.open_for_write(a.heatmap, "heatmap", a.follow_symlinks) as fh:
            heatmaps(s, fh)
    if a.json:
        print(validate.dumps_json(s.to_dict(), indent=2))
        return 0
    print(f"{model.name} on {s.accelerator.name}: weights {s.workload.weights_dtype}, KV {s.workload.kv_dtype}; "
          f"cells: accelerators needed (of which added by the KV cache); × = one sequence does not fit")
    header = ["context \\ batch"] + [fmt_k(int(b)) for b in s.batches]
    rows = []
    for i, c in enumerate(s.contexts):
        cells = []
        for j in range(len(s.batches)):
            n, k = s.needed[i, j], s.added_by_kv[i, j]
            cells.append("×" if not math.isfinite(float(n)) else f"{int(n)} ({int(k)})")
        rows.append([fmt_k(int(c))] + cells)
    print(table(rows, header))
    if a.heatmap is not None:
        print(f"heatmaps written to {a.heatmap}")
    return 0
