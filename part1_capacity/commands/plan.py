"""`capacity plan`: one model on one accelerator for one workload → memory, accelerators, roofline, bottleneck."""
from __future__ import annotations

import argparse

from part1_capacity.calculator.base import validate
from part1_capacity.commands._common import (accelerator_arg, add_extras_flags, add_revision_flag, add_vllm_startup_flags,
                                             add_workload_flags, machine_fields,
                                             model_name, positive_int, startup_flags_from_args, workload_from_args)
from part1_capacity.calculator.sizing import adapters
from part1_capacity.calculator.uses import emit
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.base.fmt import fmt_bytes, fmt_count, fmt_time, table
from part1_capacity.calculator.plan.plan import Plan, for_plan, make_plan, plan_report
from part1_capacity.calculator.hardware.tiers import load_tiers
from part1_capacity.commands._offload import add_offload_flags, host_of, offload_for, render_offload
from part1_capacity.calculator.hardware.accelerators import memory_label


EXAMPLES = """examples:
  capacity plan --model llama-3.1-70b --accelerator h100 --context 32K --batch 16
  capacity plan --model llama-3.1-70b --accelerator h100 --context 32K --batch 16 --json
  capacity plan --model path/to/config.json --accelerator mi300x --context 8K --kv-dtype fp8
  capacity plan --model llama-3.1-8b --accelerator m4-max --context 32K --weights-dtype q4_k_m --emit llama.cpp
  capacity plan --model llama-3.1-8b --accelerator h100 --context 32K --batch 64 --engine vllm"""


def register(sub):
    p = sub.add_parser("plan", help="memory, accelerators and bottleneck for one model × accelerator × workload",
                       usage="capacity plan --model MODEL --accelerator ACCELERATOR --context N [--batch N] "
                             "[flags below]",
                       description="How much memory one model needs on one accelerator for one workload, how many\n"
                                   "accelerators that takes (and how many only because of the KV cache), and which\n"
                                   "resource bounds it. The common flags come first.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    # The flags in groups, the common ones first (a new flag goes into the group it belongs to).
    common = p.add_argument_group("the common flags: model, accelerator, workload, precision")
    memory = p.add_argument_group("the recurrent state's precision, memory per accelerator")
    deploy = p.add_argument_group("deployment")
    out = p.add_argument_group("output")
    engine = p.add_argument_group("engine: whose allocation rules")
    hub = p.add_argument_group("a model on the Hugging Face Hub")
    common.add_argument("--model", required=True, help="bundled model id (see `capacity list models`), a config.json, "
                                                         "a model folder, a .gguf file or a Hub repository id (org/name)")
    common.add_argument("--accelerator", required=True, help="bundled accelerator id, an accelerator JSON file, or "
                                                               "local (this machine: nvidia-smi, rocm-smi, Apple "
                                                               "silicon, else the CPU and its RAM)")
    add_workload_flags(common, more=memory)
    add_revision_flag(hub)
    deploy.add_argument("--tensor-parallel", type=positive_int, default=None, metavar="N",
                        help="pin the tensor-parallel degree (default: the search picks it)")
    deploy.add_argument("--pipeline-parallel", type=positive_int, default=None, metavar="N",
                        help="pin the pipeline stages (default: the search picks them; stages go across nodes)")
    deploy.add_argument("--nodes", type=positive_int, default=None, metavar="N",
                        help="a node budget: the deployment with the best decode step on at most N nodes "
                             "(default: the fewest nodes)")
    deploy.add_argument("--tiers", default=None, metavar="FILE",
                        help="a memory-tier table (JSON, the format of `capacity list tiers --json`: id, name, kinds, "
                             "capacity_gb, bandwidth_gb_s, latency_ns, status, source per row) for where the KV "
                             "overflow can go (default: the bundled table, part1_capacity/calculator/data/tiers.json)")
    out.add_argument("--json", action="store_true", help="print the plan as JSON")
    out.add_argument("--emit", choices=list(emit.ENGINES),
                     help="print the command that serves the plan instead: `vllm serve` (accelerators vLLM runs on) "
                          "or `llama-server` (llama.cpp: laptops, phones, edge modules, one machine)")
    out.add_argument("--hf-repo", default=None, metavar="ORG/NAME",
                     help="the repository --emit vllm serves (default: the profile's, or the config's _name_or_path)")
    engine.add_argument("--engine", default="law", metavar="ENGINE",
                        help="whose allocation to report beside the plan: law (the textbook law, default), llama.cpp "
                             "or vllm (block rounding, head replication, window and hybrid rules; "
                             "part1_capacity/calculator/engines)")
    engine.add_argument("--disable-hybrid-kv-cache-manager", action="store_true",
                        help="with --engine vllm: every sliding-window layer at full length, as vLLM's flag of that "
                             "name")
    add_vllm_startup_flags(p)
    add_offload_flags(p)
    add_extras_flags(p)
    p.set_defaults(func=run)


def run(a) -> int:
    # the engine is checked once, with the rest of the workload (Workload.validate)
    if a.disable_hybrid_kv_cache_manager and a.engine != "vllm":
        # vLLM's flag: silently ignored under another engine, it would let a reader believe the plan used it
        raise InputError(f"--disable-hybrid-kv-cache-manager: a vLLM flag, only with --engine vllm "
                         f"(got --engine {a.engine})")
    flags = startup_flags_from_args(a)
    rows = load_tiers(a.tiers) if a.tiers else None     # checked before any sizing, like an accelerator file
    acc, machine = accelerator_arg(a.accelerator)      # `local`: this machine, detected
    plan = make_plan(model_name(a), acc, workload_from_args(a), tiers=rows)
    fields, start = plan_report(plan, flags=flags)      # the engine and its manager travel in the workload
    fields.update(machine_fields(machine))
    off = offload_for(a, plan, host_of(machine))        # llama.cpp on one accelerator and the host (or None)
    if off is not None:
        fields["placement"] = off["devices"]
        fields["offload"] = {k: v for k, v in off.items() if k != "devices"}
    if a.emit and a.json:       # the plan and the command together, for a script
        print(validate.dumps_json({**fields, "emit": {"engine": a.emit,
                                                      "command": emit.command(plan, a.emit, a.hf_repo,
                                                                              startup=start, offload=off)}},
                                  indent=2))
    elif a.emit:
        print(emit.command(plan, a.emit, a.hf_repo, startup=start, offload=off))
    elif a.json:
        print(validate.dumps_json(fields, indent=2))
    else:
        if machine is not None:
            print(f"this machine: {machine.found.describe()}\n")
        print(render(plan))
        if a.engine != "law":
            print("\n" + render_engine(for_plan(plan)))
        if start is not None:
            print("\n" + render_startup(start, plan.workload.context))
        if off is not None:
            print("\n" + render_offload(off))
    return 0


def render_startup(s, max_model_len: int) -> str:
    """The lines vLLM logs at start-up, predicted, and the budget they come from (per worker)."""
    b = s.budget
    gib = lambda x: f"{x / 2 ** 30:.2f} GiB"
    rows = [["total memory (as the engine sees it)", gib(b["total_bytes"])],
            [f"  × gpu_memory_utilization {b['utilization']:g}", gib(b["total_bytes"] * b["utilization"])],
            ["  − weights (this rank)", gib(b["weights_bytes"])],
            ["  − profile-run activation peak", gib(b["activation_bytes"])],
            ["  − non-torch memory", gib(b["non_torch_bytes"])],
            ["  − CUDA graphs (estimated inside the budget)" if b["cuda_graph_bytes"] else
             "  − CUDA graphs (captured after the cache)", gib(b["cuda_graph_bytes"])]]
    layout = f"tensor {s.flags.get('tensor_parallel_size', 1)} × pipeline {s.flags.get('pipeline_parallel_size', 1)}"
    head = (f"what vLLM will log at start-up (per worker of {layout}; --kv-cache-memory given)"
            if s.flags["kv_cache_memory_bytes"] is not None else
            f"what vLLM will log at start-up (per worker of {layout})")
    out = [head, table(rows, ["budget", "value"], left=(0, 1)) if s.flags["kv_cache_memory_bytes"] is None else "",
           f"  Available KV cache memory: {s.kv_cache_memory_bytes / 2 ** 30:.2f} GiB",
           f"  GPU KV cache size: {s.kv_cache_tokens:,} tokens",
           f"  Maximum concurrency for {max_model_len:,} tokens per request: {s.max_concurrency:.2f}x"]
    if s.error:
        out.append(f"verdict: vLLM refuses to start — {s.error}")
    return "\n".join([o for o in out if o] + [f"  - {n}" for n in s.notes])


def render_engine(alloc) -> str:
    rows = [["engine", alloc.engine], ["tensor-parallel ranks", str(alloc.tensor_parallel)],
            ["pipeline stages", str(alloc.pipeline_parallel)],
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
    fewest = plan.fewest or plan.deployment
    par_s = (f"{fewest.label()}, {fewest.nodes} node{'s' if fewest.nodes != 1 else ''}" if fewest else
             why_not(plan))
    rows = [
        ["memory per accelerator", memory_label(acc)],
        ["weights", f"{fmt_bytes(d['weights_bytes'])} ({d['weights_bytes_source']})"],
        *([["  with the MTP module", f"{fmt_bytes(d['weights_bytes_with_mtp'])} (loaded only for MTP speculative "
                                     f"decoding; KV / weights {d['kv_to_weights_ratio_with_mtp']:.3g})"]]
          if "weights_bytes_with_mtp" in d else []),
        *extras_rows(plan),
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
        rows.append(["KV stored incl. TP replication", fmt_bytes(d["kv_bytes_stored"])
                     + f" ({d['kv_bytes_stored'] / d['kv_bytes_total']:.2g}× the cache: "
                     + ("the MLA latent on every tensor rank)" if m.is_mla else
                        "K/V heads fewer than tensor ranks are copied)")])
    out = [head, "", table(rows, ["quantity", "value"], left=(0, 1))]
    if par and plan.deployment is not fewest:
        dep = plan.deployment
        out.append(f"deployment on the node budget: {dep.accelerators:,} accelerators, {dep.label()}, "
                   f"{dep.nodes} node{'s' if dep.nodes != 1 else ''}")
    if par:
        out.append(f"why this deployment: {par['reason']}")
    if d["layout_notice"]:
        out.append(f"layout: {d['layout_notice']}")
    phases = []
    for name in ("prefill", "decode"):
        ph = d[name]
        if ph:
            rate = f"{ph['tokens_per_s']:,.0f} tok/s" if name == "decode" else "per prompt"
            phases.append([name, f"{ph['arithmetic_intensity']:,.1f}", f"{ph['ridge_point']:,.0f}", ph["bound"],
                           fmt_time(ph["time_s"]), rate])
    if phases:
        kind = (d["decode"] or d["prefill"])["time_kind"]
        lower = kind == "roofline lower bound"
        out += ["", table(phases, ["phase", "FLOP/byte", "ridge", "bound", "time ≥" if lower else "time",
                                   "at most" if lower else ""], left=(0, 3, 5))]
        out += times_lines((d["decode"] or d["prefill"])["basis"], lower)
    dec = d["decode"]
    if dec and (dec["communication_s"] > 0 or dec["pipeline_microbatches"] < (par or d["parallelism_without_kv"])
                .get("pipeline", 1)):
        out.append(f"decode step includes {fmt_time(dec['communication_s'])} of all-reduce over the interconnect"
                   + (f"; {dec['pipeline_bubble_fraction']:.0%} pipeline bubble ({dec['pipeline_microbatches']} "
                      f"micro-batch(es) for {(par or d['parallelism_without_kv'])['pipeline']} stages)"
                      if dec["pipeline_bubble_fraction"] > 0 else ""))
    out += ["", f"bottleneck: {d['bottleneck']} — {d['verdict']}"]
    if d["overflow_tiers"]:
        out += ["", overflow_line(plan)]
        rows = [[t["name"], "yes" if t["fits"] else "no", f"{t['decode_tokens_per_s']:,.1f}",
                 f"{t['slowdown_vs_hbm']:,.1f}×"] for t in d["overflow_tiers"]]
        out.append(table(rows, ["tier", "holds it", "decode tok/s", "slower than HBM"]))
    elif d["overflow_bytes"] > 0:
        out += ["", overflow_line(plan) + f"; the tier table describes server nodes, not a {acc.kind}, so no tier "
                                          f"is proposed"]
    return "\n".join(out)


def extras_rows(plan: Plan) -> list:
    """The LoRA adapters' and the draft model's lines under the weights."""
    r, wl, rows = plan.resolved, plan.workload, []
    if r is None:
        return rows
    if wl.lora_rank:
        what = (f"vLLM's {wl.max_loras} slot(s) of rank {adapters.vllm_rank(wl.lora_rank)} on every linear layer"
                if wl.engine == "vllm" else f"{wl.max_loras} adapter(s) of rank {wl.lora_rank} on "
                                            f"{', '.join(wl.lora_targets)}")
        rows.append(["  of which LoRA", f"{fmt_bytes(r.lora_bytes)} ({what})"])
    if r.draft is not None:
        kv = r.draft.cache_bytes(wl.context, r.kv_bytes, r.state_bytes)
        rows.append(["  of which draft model", f"{fmt_bytes(r.draft_weights_bytes)} ({r.draft.name}; its cache "
                                               f"{fmt_bytes(kv)} per sequence, counted with the cache)"])
    return rows


def times_lines(basis: str, lower: bool) -> list[str]:
    """Where the phase times come from, one fact a line: the basis, the assumption and its source, and what a lower
    bound means (``basis``: speed.basis's words, "<basis> (assumption: <source>)" for a datasheet accelerator)."""
    head, sep, source = basis.partition(" (assumption: ")
    out = [f"times from: {head}"]
    if sep:
        out.append(f"  assumption: {source.removesuffix(')')}")
    if lower:
        out.append("  these are roofline lower bounds (every efficiency 1.0): a real engine takes longer and serves "
                   "fewer tokens per second")
    return out


def why_not(plan: Plan) -> str:
    """Why no deployment was found: the weights themselves, or one sequence's cache beside them."""
    where = f"{plan.model.n_layers} pipeline stages of {plan.accelerator.max_tp} tensor rank(s)"
    if plan.accelerators_without_kv is None:
        return f"the weights do not fit even split over {where}"
    return f"one sequence's cache does not fit beside its share of the weights on {where}"


def overflow_line(plan: Plan) -> str:
    """The overflow and its arithmetic, rank by rank; says why when it exceeds the cache itself."""
    o = plan.overflow
    line = (f"KV overflow beyond the weights-only deployment ({o['deployment']}): each of its {o['ranks']:,} "
            f"ranks must hold {fmt_bytes(o['cache_per_rank'])} of cache beside its weights and has "
            f"{fmt_bytes(o['free_per_rank'])} free, so {fmt_bytes(o['bytes_per_rank'])} per rank × {o['ranks']:,} = "
            f"{fmt_bytes(o['bytes'])}")
    if o["bytes"] > plan.kv_bytes_total:
        why = ("the MLA latent has no heads to split, so every tensor rank holds all of it" if plan.model.is_mla
               else "K/V heads fewer than the tensor ranks are copied to each")
        line += (f" — more than the {fmt_bytes(plan.kv_bytes_total)} cache itself because the ranks together "
                 f"store {o['replication']:.2g}× it ({why})")
    return line
