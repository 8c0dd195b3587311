"""`capacity plan`: one model on one accelerator for one workload → memory, accelerators, roofline, bottleneck."""
from __future__ import annotations


from part1_capacity import validate
from part1_capacity.commands._common import add_workload_flags, positive_int, workload_from_args
from part1_capacity import engine_alloc
from part1_capacity.errors import InputError
from part1_capacity.fmt import fmt_bytes, fmt_count, fmt_time, table
from part1_capacity.plan import Plan, make_plan


def register(sub):
    p = sub.add_parser("plan", help="memory, accelerators and bottleneck for one model × accelerator × workload")
    p.add_argument("--model", required=True, help="bundled model id (see `capacity list models`) or a config.json")
    p.add_argument("--accelerator", required=True, help="bundled accelerator id or an accelerator JSON file")
    add_workload_flags(p)
    p.add_argument("--tensor-parallel", type=positive_int, default=None, metavar="N",
                   help="pin the tensor-parallel degree (default: the search picks it)")
    p.add_argument("--engine", default="law", metavar="ENGINE",
                   help="whose allocation to report beside the plan: law (the textbook law, default), llama.cpp or "
                        "vllm (block rounding, head replication, window and hybrid rules; part1_capacity/engine_alloc)")
    p.add_argument("--disable-hybrid-kv-cache-manager", action="store_true",
                   help="with --engine vllm: every sliding-window layer at full length, as vLLM's flag of that name")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--emit", choices=["vllm"], help="print the matching `vllm serve` command instead")
    p.set_defaults(func=run)


def run(a) -> int:
    engine_alloc.check_engine(a.engine)
    plan = make_plan(a.model, a.accelerator, workload_from_args(a))
    alloc = engine_alloc.for_plan(plan, a.engine, not a.disable_hybrid_kv_cache_manager)
    if a.emit == "vllm":
        print(vllm_command(plan))
    elif a.json:
        print(validate.dumps_json({**plan.to_dict(), **alloc.to_fields()}, indent=2))
    else:
        print(render(plan))
        if a.engine != "law":
            print("\n" + render_engine(alloc))
    return 0


def render_engine(alloc) -> str:
    rows = [["engine", alloc.engine], ["tensor-parallel ranks", str(alloc.tensor_parallel)],
            ["KV per token per rank (growing)", fmt_bytes(alloc.kv_bytes_per_token)],
            ["cache of the workload (all ranks)", fmt_bytes(alloc.kv_bytes_total)],
            ["  of which recurrent state", fmt_bytes(alloc.state_bytes)]]
    return "\n".join([table(rows, ["what the engine allocates", "value"], left=(0, 1))]
                     + [f"  - {n}" for n in alloc.notes])


def render(plan: Plan) -> str:
    d, m, acc, wl = plan.to_dict(), plan.model, plan.accelerator, plan.workload
    head = (f"{m.name} ({m.structure}) on {acc.name}: {wl.batch:,} × {wl.context:,} tokens, "
            f"weights {wl.weights_dtype}, KV {wl.kv_dtype}")
    par = d["parallelism"]
    par_s = (f"tensor {par['tensor']} × pipeline {par['pipeline']} × data {par['data']}" if par else
             why_not(plan))
    rows = [
        ["weights", fmt_bytes(d["weights_bytes"])],
        ["KV per token (growing)", fmt_bytes(d["kv_bytes_per_token"])],
        ["KV per sequence", fmt_bytes(d["kv_bytes_per_sequence"])
         + (f" (incl. {fmt_bytes(d['state_bytes_per_sequence'])} recurrent state)" if m.ssm else "")],
        ["KV total", fmt_bytes(d["kv_bytes_total"])],
        ["KV / weights", f"{d['kv_to_weights_ratio']:.3g}"],
        ["accelerators needed", f"{fmt_count(d['accelerators_needed'])}  ({par_s})"],
        ["  without the KV cache", fmt_count(d["accelerators_without_kv"])],
        ["  added by the KV cache", fmt_count(d["accelerators_added_by_kv"])],
    ]
    if d["kv_bytes_stored"] > d["kv_bytes_total"] * 1.0001:
        rows.append(["KV stored incl. TP replication", fmt_bytes(d["kv_bytes_stored"])])
    out = [head, "", table(rows, ["quantity", "value"], left=(0, 1))]
    phases = []
    for name in ("prefill", "decode"):
        ph = d[name]
        if ph:
            rate = f"{ph['tokens_per_s']:,.0f} tok/s" if name == "decode" else "per prompt"
            phases.append([name, f"{ph['arithmetic_intensity']:,.1f}", f"{ph['ridge_point']:,.0f}", ph["bound"],
                           fmt_time(ph["time_s"]), rate])
    if phases:
        out += ["", table(phases, ["phase", "FLOP/byte", "ridge", "bound", "time", ""], left=(0, 3, 5))]
    out += ["", f"bottleneck: {d['bottleneck']} — {d['implication']}"]
    if d["overflow_tiers"]:
        n0 = d["accelerators_without_kv"]
        out += ["", f"KV overflow beyond the weights-only deployment ({fmt_count(n0)} "
                    f"accelerator{'' if n0 == 1 else 's'}): {fmt_bytes(d['overflow_bytes'])}"]
        rows = [[t["name"], "yes" if t["fits"] else "no", f"{t['decode_tokens_per_s']:,.1f}",
                 f"{t['slowdown_vs_hbm']:,.1f}×"] for t in d["overflow_tiers"]]
        out.append(table(rows, ["tier", "holds it", "decode tok/s", "slower than HBM"]))
    elif d["overflow_bytes"] > 0:
        out += ["", f"KV overflow beyond the weights-only deployment: {fmt_bytes(d['overflow_bytes'])}; the tier table "
                    f"describes server nodes, not a {acc.kind}, so no tier is proposed"]
    return "\n".join(out)


def why_not(plan: Plan) -> str:
    """Why no deployment was found: the weights themselves, or one sequence's cache beside them."""
    if plan.accelerators_without_kv is None:
        return (f"the weights do not fit even split over {plan.model.n_layers} pipeline stages of "
                f"{plan.accelerator.max_tp} tensor rank(s)")
    return "one sequence's cache does not fit beside its share of the weights, even split over every layer"


VLLM_KV = {"bf16": "auto", "fp16": "auto", "fp8": "fp8"}


def vllm_command(plan: Plan) -> str:
    """The `vllm serve` arguments matching the plan (one replica's tensor group, its share of sequences)."""
    d, m, wl = plan.to_dict(), plan.model, plan.workload
    if not d["parallelism"]:
        raise InputError(f"plan: nothing to emit, the workload does not fit: {why_not(plan)}")
    if wl.kv_dtype not in VLLM_KV:
        raise InputError(f"kv_dtype: vLLM's --kv-cache-dtype takes auto (bf16/fp16) or fp8, not {wl.kv_dtype}")
    par = d["parallelism"]
    args = [f"vllm serve {m.hf_repo or m.id}", f"--tensor-parallel-size {par['tensor']}"]
    if par["pipeline"] > 1:
        args.append(f"--pipeline-parallel-size {par['pipeline']}")
    if par["data"] > 1:
        args.append(f"--data-parallel-size {par['data']}")
    args += [f"--max-model-len {wl.context}", f"--max-num-seqs {par['sequences_per_replica']}",
             f"--kv-cache-dtype {VLLM_KV[wl.kv_dtype]}", f"--gpu-memory-utilization {wl.usable_fraction:g}"]
    notes = []
    if wl.weights_dtype != m.native_dtype:
        if wl.weights_dtype == "fp8":
            args.append("--quantization fp8")
        elif wl.weights_dtype in ("bf16", "fp16", "fp32"):
            args.append(f"--dtype {dict(bf16='bfloat16', fp16='float16', fp32='float32')[wl.weights_dtype]}")
        else:
            notes.append(f"# {wl.weights_dtype} weights: serve a checkpoint already quantized to it "
                         f"(AWQ/GPTQ for int4/int8, a GGUF file for q8_0/q5_0/q4_k_m)")
    return " \\\n  ".join(args) + ("\n" + "\n".join(notes) if notes else "")
