"""`capacity e1 [--gguf PATH] [--structure gqa|mqa|mla|swa|ssm|linear|all] [--json] [--save]`: what llama.cpp
allocates vs the calculator — the KV slope of one model, or every buffer of every cache structure."""
from __future__ import annotations

import sys

from part1_capacity.calculator.base import validate

DEFAULT_PARAMS = 500_000_000


def register(sub):
    p = sub.add_parser("e1", aliases=["kv-allocation"], help="E1: KV-cache bytes per token reported by llama.cpp vs the calculator",
                       description="Open contexts of 2,048/8,192/16,384 tokens in llama.cpp (f16 and q8_0 KV), read "
                                   "the KV size from its log, fit the slope and compare it with the calculator.")
    p.add_argument("--gguf", metavar="PATH",
                   help="GGUF model to check (default: a generated llama model of ≥500M parameters, deleted after)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--save", action="store_true", help="also save it as results/part1/e1.json (the site)")
    p.add_argument("--structure", metavar="ID",
                   help="check every buffer (K, V, sliding-window cache, recurrent state) of tiny models of one "
                        "cache structure against the calculator and llama.cpp's allocation rules: gqa, mqa, mla, "
                        "swa, ssm, linear or all (saved as results/part1/e1_structures.json)")
    p.add_argument("--note", default="", help="a remark saved with the result (e.g. 'machine shared')")
    p.set_defaults(func=main)


def main(args) -> int:
    if args.structure or (args.gguf and not _full_attention(args.gguf)):
        return structures_main(args)
    from part1_capacity.experiments.engine import kv_allocation
    from part1_capacity.experiments.engine.common import run_record, save_result, scratch_dir
    from part1_capacity.experiments.engine.gguf_model import shape_for_params, write_llama_gguf
    from part1_capacity.experiments.engine.progress import Progress

    steps = len(kv_allocation.CONTEXTS) * len(kv_allocation.KV_TYPES)
    bar = Progress(steps + (0 if args.gguf else 1), "e1")
    record = run_record()
    if args.gguf:
        result = kv_allocation.run(args.gguf, progress=bar)
    else:
        # KV size depends only on the attention shape; F16 weights halve the file the default writes.
        shape = shape_for_params(DEFAULT_PARAMS)
        with scratch_dir("e1-") as tmp:
            path = write_llama_gguf(tmp / "model-f16.gguf", shape, dtype="f16",
                                    progress=lambda d, t: bar.update(d / t, "writing the model"))
            result = kv_allocation.run(path, progress=bar)
            result["model"]["path"] = f"generated: {shape.n_params():,}-parameter llama, F16 weights (deleted)"
    bar.close()
    result = {**result, **record, "note": args.note}
    if args.save:
        print(f"saved {save_result('e1', result)}", file=sys.stderr)
    if args.json:
        print(validate.dumps_json(result, indent=1))
    else:
        m = result["model"]
        print(f"model: {m['name']} — {m['n_layers']} layers × {m['n_kv_heads']} KV heads × head_dim {m['head_dim']}")
        print(f"{'KV':6} {'contexts':>22} {'reported bytes':>40} {'slope B/tok':>12} {'formula':>9}  match")
        for r in result["by_kv_type"]:
            print(f"{r['kv_type']:6} {str(r['cells']):>22} {str(r['reported_bytes']):>40} "
                  f"{r['slope_bytes_per_token']:12.2f} {r['formula_bytes_per_token']:9g}  {r['match']}")
    return 0 if result["match"] else 1


def _full_attention(path) -> bool:
    """Whether the GGUF is a plain full-attention model (the slope check); refuses unsupported architectures."""
    from part1_capacity.experiments.engine.gguf_profile import FULL_ATTENTION, profile_dict

    return profile_dict(path)["_architecture"] in FULL_ATTENTION


def structures_main(args) -> int:
    from part1_capacity.experiments.engine import structures, tiny_models
    from part1_capacity.experiments.engine.common import run_record, save_result
    from part1_capacity.experiments.engine.progress import Progress

    selector = args.structure or "all"
    specs = [] if args.gguf else tiny_models.specs_for(selector)
    n_runs = len(structures.CONTEXTS) * (len(structures.N_SEQ) + 1)   # + the swa_full runs of window models
    bar = Progress(max(len(specs), 1) * n_runs, "e1")
    record = run_record()
    if args.gguf:
        row = structures.check(args.gguf, args.structure or "gguf", progress=bar)
        result = {"selector": selector, "structures": [row], "match": row["match"]}
    else:
        result = structures.run(selector, progress=bar)
    bar.close()
    result = {**result, **record, "note": args.note}
    if args.save:
        print(f"saved {save_result('e1_structures', result)}", file=sys.stderr)
    if args.json:
        print(validate.dumps_json(result, indent=1))
    else:
        print(render_structures(result))
    return 0 if result["match"] else 1


def render_structures(result) -> str:
    from part1_capacity.calculator.base.fmt import fmt_bytes, table

    rows = []
    for r in result["structures"]:
        for i, case in enumerate(r["cases"]):
            for comp, reported in r["reported"].items():
                rows.append([r["architecture"], f"{case['context']:,} × {case['n_seq']}"
                             + (" swa_full" if case.get("swa_full") else ""), comp,
                             fmt_bytes(r["law"][comp][i]), fmt_bytes(r["predicted"][comp][i]),
                             fmt_bytes(reported[i]) if reported[i] is not None else "—",
                             "yes" if r["details"][i]["match"] else "NO"])
            for name, b in r["details"][i].get("buffers", {}).items():
                bound = "±10%" if name == "compute" else "as printed, ±0.005 MiB"
                rows.append([r["architecture"], f"{case['context']:,} × {case['n_seq']}"
                             + (" swa_full" if case.get("swa_full") else ""), f"{name} buffer", "—",
                             fmt_bytes(b["predicted"]), fmt_bytes(b["reported"]) if b["reported"] is not None else "—",
                             ("yes" if b["within"] else "NO") + f" ({bound})"])
    return table(rows, ["model", "context × seqs", "buffer", "law", "llama.cpp rule", "llama.cpp log", "match"],
                 left=(0, 1, 2))
