"""The llama.cpp offload flags of `capacity plan` (not a sub-command: the name starts with _): one accelerator and
the host's RAM, llama.cpp's own names (-ngl, --n-cpu-moe, --no-kv-offload)."""
from __future__ import annotations

import argparse

from course.shared.units import GB, GIB
from part1_capacity.calculator.plan import offload
from part1_capacity.calculator.base import validate
from part1_capacity.calculator.engines import llama_cpp as rules
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.base.fmt import fmt_bytes, fmt_time, table

FLAGS = ("gpu_layers", "cpu_moe", "host_memory", "host_bandwidth")


def count(text: str) -> int:
    """argparse type: an integer from 0 (llama.cpp's layer counts)."""
    try:
        return validate.parse_int(text, "value", lo=0, hi=2 ** 20)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("value: ")) from None


def positive_number(text: str) -> float:
    try:
        return validate.parse_float(text, "value", lo=1e-9, hi=1e9)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("value: ")) from None


def add_offload_flags(p: argparse.ArgumentParser):
    g = p.add_argument_group("llama.cpp on one accelerator and the host's RAM (with --engine llama.cpp; "
                             "default: the largest split that fits)")
    g.add_argument("--gpu-layers", type=count, default=None, metavar="N",
                   help="llama.cpp's -ngl: the output layer and the last N-1 layers on the accelerator, the rest "
                        "and the token embedding in host RAM (llama.cpp's order since December 2025)")
    g.add_argument("--cpu-moe", type=count, default=None, metavar="N",
                   help="llama.cpp's --n-cpu-moe: the routed experts of the first N layers stay in host RAM")
    g.add_argument("--no-kv-offload", action="store_true",
                   help="llama.cpp's --no-kv-offload: every layer's cache in host RAM")
    g.add_argument("--host-memory", type=positive_number, default=None, metavar="GIB",
                   help=f"host RAM in GiB (default {offload.DEFAULT_HOST_MEMORY / GIB:g})")
    g.add_argument("--host-bandwidth", type=positive_number, default=None, metavar="GB/S",
                   help=f"host memory bandwidth the CPU streams at, GB/s (default "
                        f"{offload.DEFAULT_HOST_BANDWIDTH / GB:g}: dual-channel DDR5-5600)")


def host_from_args(a, host: offload.Host | None = None) -> offload.Host:
    """The host: ``host`` (e.g. this machine's) or the default, with --host-memory / --host-bandwidth over it."""
    h = host or offload.Host()
    given = []
    if a.host_memory is not None:
        h = offload.Host(a.host_memory * GIB, h.bandwidth, h.link_bandwidth, h.source)
        given.append(f"{a.host_memory:g} GiB")
    if a.host_bandwidth is not None:
        h = offload.Host(h.memory_bytes, a.host_bandwidth * GB, h.link_bandwidth, h.source)
        given.append(f"{a.host_bandwidth:g} GB/s")
    if given:
        h = offload.Host(h.memory_bytes, h.bandwidth, h.link_bandwidth, "given: " + ", ".join(given)
                         + ("" if len(given) == 2 else f" (the rest {h.source})"))
    return h


def host_of(machine) -> offload.Host | None:
    """The host beside a detected GPU (``--accelerator local``): its RAM and measured bandwidth; None otherwise."""
    if machine is None or not machine.host_memory_bytes:
        return None
    return offload.Host(machine.host_memory_bytes, machine.host_bandwidth or offload.DEFAULT_HOST_BANDWIDTH, None,
                        "this machine: /proc/meminfo" + (", bandwidth measured" if machine.host_bandwidth else ""))


def offload_for(a, plan, host: offload.Host | None = None):
    """The placement for the parsed flags (``offload.placement``, or ``offload.propose`` with neither layer flag),
    None when the engine is not llama.cpp; the flags refused (exit 2) under another engine."""
    given = [n for n in FLAGS if getattr(a, n, None) is not None] + (["no_kv_offload"] if a.no_kv_offload else [])
    if plan.workload.engine != "llama.cpp":
        if given:
            raise InputError(f"--{given[0].replace('_', '-')}: a llama.cpp offload flag, only with --engine "
                             f"llama.cpp (got --engine {plan.workload.engine})")
        return None
    if plan.accelerator.unified_memory:        # Apple silicon, an APU, a CPU: one memory, nothing to split
        if given:
            raise InputError(f"--{given[0].replace('_', '-')}: {plan.accelerator.name} shares one memory with its "
                             f"host, so a split between them moves no bytes; the plan above holds for it")
        return None
    offload.check_flags(plan.model, a.gpu_layers, a.cpu_moe)
    h = host_from_args(a, host)
    kv = not a.no_kv_offload
    if a.gpu_layers is None and a.cpu_moe is None:
        return offload.propose(plan.resolved, h, kv)
    ngl = rules.ALL_LAYERS if a.gpu_layers is None else a.gpu_layers
    return {**offload.placement(plan.resolved, ngl, a.cpu_moe or 0, h, kv), "proposed": False}


def render_offload(off: dict) -> str:
    """The split in words and a table per device."""
    L = off["n_layers"]
    layers = f"{off['gpu_layers']} of {L} layers" + (" and the output layer" if off["output_on_accelerator"] else "")
    moe = f", the routed experts of the first {off['n_cpu_moe']} in host RAM" if off["n_cpu_moe"] else ""
    kv = "" if off["kv_offload"] else ", every layer's cache in host RAM (--no-kv-offload)"
    if off.get("proposed"):
        head = f"llama.cpp, the largest split that fits: {layers} on the accelerator{moe}{kv}"
    elif "proposed" in off and not off["fits"] and off["gpu_layers"] == 0:
        head = f"llama.cpp: no split fits — even with every layer in host RAM{moe}{kv}"
    else:
        head = f"llama.cpp split: {layers} on the accelerator{moe}{kv}"
    rows = []
    for d in off["devices"]:
        rows.append([d["name"], fmt_bytes(d["weights_bytes"]), fmt_bytes(d["kv_bytes"]),
                     fmt_bytes(d["compute_buffer_bytes"] + d["output_buffer_bytes"]), fmt_bytes(d["total_bytes"]),
                     fmt_bytes(d["budget_bytes"]), "yes" if d["fits"] else "NO"])
    out = [head, table(rows, ["device", "weights", "KV cache", "buffers", "total", "budget", "fits"], left=(0, 6))]
    dec = off["decode_tokens_per_s"]
    out.append(f"decode: {fmt_time(off['decode_s'])} per step ({dec:,.1f} tok/s: {fmt_time(off['decode_accelerator_s'])}"
               f" on the accelerator + {fmt_time(off['decode_host_s'])} streaming host RAM at "
               f"{off['host_bandwidth'] / GB:,.1f} GB/s)")
    if off["prefill_copy_s"]:
        out.append(f"prefill: {fmt_time(off['prefill_s'])} per prompt ({off['prefill_tokens_per_s']:,.0f} tok/s), "
                   f"of which {fmt_time(off['prefill_copy_s'])} copying the host's weights to the accelerator at "
                   f"{off['link_bandwidth'] / GB:,.1f} GB/s for every 512-token micro-batch")
    else:
        out.append(f"prefill: {fmt_time(off['prefill_s'])} per prompt ({off['prefill_tokens_per_s']:,.0f} tok/s)")
    out.append(f"host: {off['host_source']}; times are roofline bounds (memory and peak at the stated efficiencies)")
    return "\n".join(out)
