"""The "on your own machine" section of site/part1/calculator.md: what fits one card, and a llama.cpp split between
a 24 GB card and 64 GiB of RAM — a dense 70B model, and a MoE with its experts on the host. Every number is the
calculator's (``fit.fit``, ``offload.propose``, ``emit.command``); the scenarios are inputs, not claims."""
from __future__ import annotations

from pathlib import Path

from course.shared import i18n, tables
from course.shared.units import GB, GIB
from part1_capacity.calculator.uses import emit
from part1_capacity.calculator.plan import offload
from part1_capacity.calculator.uses.fit import fit
from part1_capacity.calculator.base.fmt import fmt_bytes, fmt_time
from part1_capacity.calculator.hardware.accelerators import load_accelerator
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.plan.plan import Workload, make_plan

EN = i18n.translator("en")
CARD = "rtx-4090"                      # a 24 GB card
FIT = ("llama-3.1-8b", "q4_k_m")       # what fits on it alone
DENSE = ("llama-3.1-70b", "q4_k_m")    # too large for it: layers split with the host
MOE = ("gpt-oss-120b", None)           # a MoE: experts on the host
CONTEXT = 8192


def _workload(dtype, **kw) -> Workload:
    return Workload(context=CONTEXT, weights_dtype=dtype, kv_dtype="fp16", engine="llama.cpp", **kw)


def fit_lines(tr=EN) -> str:
    mid, dtype = FIT
    m, a = load_model(mid), load_accelerator(CARD)
    one = fit(m, a, _workload(dtype), "context")
    many = fit(m, a, _workload(dtype), "batch")
    if one.limited_by != "memory" or many.limited_by != "memory":
        raise AssertionError(f"own-machine section: the prose says memory limits {mid} on {CARD}; it is now "
                             f"{one.limited_by} / {many.limited_by}")
    return tr("`.venv/bin/capacity fit --model {model} --accelerator {acc} --weights-dtype {dtype} --engine llama.cpp "
              "--batch 1`: the longest context is **{T} tokens** (one more block of {block} tokens does not fit "
              "beside the weights); with `--context {C}` instead, **{B} sequences** fit.",
              model=mid, acc=CARD, dtype=dtype, T=f"{one.value:,}", block=one.block, C=CONTEXT,
              B=f"{many.value:,}") + "\n"


def split_table(mid: str, dtype, tr=EN) -> str:
    """The proposed split of ``mid`` on the card and the default host: bytes per device, decode, the command."""
    m, a = load_model(mid), load_accelerator(CARD)
    plan = make_plan(m, a, _workload(dtype))
    off = offload.propose(plan.resolved)
    if not off["proposed"]:
        raise AssertionError(f"own-machine section: no split of {mid} fits {CARD} and the default host")
    rows = [[tr("the card") if d["device"] == "accelerator" else tr("host RAM"), fmt_bytes(d["weights_bytes"]),
             fmt_bytes(d["kv_bytes"]), fmt_bytes(d["compute_buffer_bytes"] + d["output_buffer_bytes"]),
             fmt_bytes(d["total_bytes"]), fmt_bytes(d["budget_bytes"])] for d in off["devices"]]
    head = tr("| device | weights | KV cache | buffers | total | budget |")
    if off["n_cpu_moe"]:
        what = tr("every layer on the card, the routed experts of the first {k} of {L} layers in host RAM",
                  k=off["n_cpu_moe"], L=off["n_layers"])
    else:
        what = tr("the output layer and the last {n} of {L} layers on the card, the other layers and the embedding in "
                  "host RAM", n=off["gpu_layers"], L=off["n_layers"])
    out = [tr("**{model}** ({dtype}), {T} tokens: {what}.", model=m.name, dtype=plan.workload.weights_dtype,
              T=f"{CONTEXT:,}", what=what), "",
           tables.table(head, rows, "l" + "r" * 5), "",
           tr("Decode: **{tps} tokens/s** ({acc} on the card + {host} reading host RAM at {bw} GB/s); prefill of "
              "the {T}-token prompt: {pre}, of which {copy} copying the host's weights to the card.",
              tps=f"{off['decode_tokens_per_s']:,.1f}", acc=fmt_time(off["decode_accelerator_s"]),
              host=fmt_time(off["decode_host_s"]), bw=f"{off['host_bandwidth'] / GB:,.1f}", T=f"{CONTEXT:,}",
              pre=fmt_time(off["prefill_s"]), copy=fmt_time(off["prefill_copy_s"])), "",
           "```bash", emit.command(plan, "llama.cpp", offload=off).split("\n#")[0], "```"]
    return "\n".join(out) + "\n"


def host_line(tr=EN) -> str:
    return tr("The host assumed: {mem} GiB of RAM at {bw} GB/s (dual-channel DDR5-5600); `--accelerator local` "
              "reads yours.", mem=f"{offload.DEFAULT_HOST_MEMORY / GIB:g}",
              bw=f"{offload.DEFAULT_HOST_BANDWIDTH / GB:g}") + "\n"


def build(out) -> None:
    out = Path(out)
    i18n.write_text(out, "own_fit.md", fit_lines)
    i18n.write_text(out, "own_dense.md", lambda tr: host_line(tr) + "\n" + split_table(*DENSE, tr=tr))
    i18n.write_text(out, "own_moe.md", lambda tr: split_table(*MOE, tr=tr))
