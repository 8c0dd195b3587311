"""Shared flags and formatting for the `capacity` sub-commands (not a sub-command: the name starts with _)."""
from __future__ import annotations

import argparse

from part1_capacity.calculator.base import validate
from part1_capacity.calculator.base.errors import InputError
from course.shared.units import GIB
from part1_capacity.calculator.engines import vllm_memory
from part1_capacity.calculator.plan.plan import DEFAULT_OVERHEAD_BYTES, DEFAULT_USABLE_FRACTION, Workload

MAX_INT = 2 ** 53         # every count stays exact as a float (the search is vectorized in float64)
MAX_CONTEXT = 2 ** 30     # a billion tokens per sequence: beyond any published model's maximum
MAX_BATCH = 2 ** 20       # a million concurrent sequences: beyond any deployment's scheduler
MAX_OVERHEAD_GIB = 1e6    # a pebibyte per accelerator: beyond any device


def positive_int(text: str, hi: int = MAX_INT) -> int:
    """argparse type: a positive integer up to ``hi``; ``128K``/``1M`` suffixes mean ×1024 / ×1024²
    (``validate.parse_int``: a 400-digit argument is refused before any arithmetic)."""
    try:
        return validate.parse_int(text, "value", lo=1, hi=hi)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("value: ")) from None


def context_int(text: str) -> int:
    """argparse type of --context: 1 to MAX_CONTEXT tokens."""
    return positive_int(text, MAX_CONTEXT)


def batch_int(text: str) -> int:
    """argparse type of --batch: 1 to MAX_BATCH sequences."""
    return positive_int(text, MAX_BATCH)


def fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got '{text}'")
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got '{text}'")
    return v


def non_negative(text: str) -> float:
    """argparse type: a finite number from 0 to MAX_OVERHEAD_GIB (``nan``, ``inf``, ``1e300`` refused)."""
    try:
        return validate.parse_float(text, "value", lo=0, hi=MAX_OVERHEAD_GIB)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("value: ")) from None


def add_revision_flag(p: argparse.ArgumentParser):
    from part1_capacity.calculator.readers.hub_http import COMMAND_SECONDS, REQUEST_SECONDS

    p.add_argument("--revision", default=None, metavar="REV",
                   help="with a Hub repository id as --model: the branch, tag or commit to read (default main). "
                        f"Hub reads are bounded: each request by a deadline of {REQUEST_SECONDS:g} s "
                        f"(CAPACITY_HUB_REQUEST_DEADLINE), all of a command's by {COMMAND_SECONDS:g} s "
                        "(CAPACITY_HUB_DEADLINE), each answer by a size cap")


def model_name(a, attr: str = "model"):
    """--model with --revision folded in (``org/name@rev``: what the loader reads)."""
    name, rev = getattr(a, attr), getattr(a, "revision", None)
    if rev is None or name is None:
        return name
    if "/" not in str(name) or "@" in str(name):
        raise InputError(f"--revision: only with a Hub repository id as --model (org/name), got {name!r}")
    from part1_capacity.calculator.readers.hub import check_revision

    return f"{name}@{check_revision(rev, '--revision')}"


def add_workload_flags(p: argparse.ArgumentParser, context_default=None, batch_default=1, dtype_flags=True,
                       grid=False, more=None):
    """The workload flags; ``grid=True`` leaves out --context/--batch (a sweep takes lists instead). ``more``: the
    argument group of the less common ones (--state-dtype, --usable-fraction, --overhead-gib; default ``p``), so a
    command's help can list the common flags first."""
    more = p if more is None else more
    if not grid:
        p.add_argument("--context", type=context_int, required=context_default is None, default=context_default,
                       help="tokens per sequence, prompt + output (e.g. 131072 or 128K)")
        p.add_argument("--batch", type=batch_int, default=batch_default, help="concurrent sequences")
    if dtype_flags:
        p.add_argument("--weights-dtype", default=None,
                       help="fp32 bf16 fp16 fp8 int8 int4 mxfp4 q8_0 q5_0 q4_k_m (default: the model's native)")
        p.add_argument("--kv-dtype", default="bf16", help="fp32 bf16 fp16 fp8 int8 q8_0 (default bf16)")
        more.add_argument("--state-dtype", default=None, help="recurrent-state dtype of SSM hybrids (default: what the engine keeps — the checkpoint's "
                                "dtype for it, else the model dtype; llama.cpp f32 — never the KV dtype)")
    more.add_argument("--usable-fraction", type=fraction, default=DEFAULT_USABLE_FRACTION,
                   help=f"share of accelerator memory the engine may use (default {DEFAULT_USABLE_FRACTION})")
    more.add_argument("--overhead-gib", type=non_negative, default=DEFAULT_OVERHEAD_BYTES / GIB,
                   help="allowance per accelerator for activations and runtime, GiB (default 2)")


def add_extras_flags(p: argparse.ArgumentParser):
    """LoRA adapters and a speculative-decoding draft model (their memory: calculator/sizing/adapters.py)."""
    g = p.add_argument_group("LoRA adapters and speculative decoding")
    g.add_argument("--lora-rank", type=lambda t: positive_int(t, 4096), default=None, metavar="R",
                   help="serve LoRA adapters of rank R (vLLM: --enable-lora --max-lora-rank; llama.cpp: --lora)")
    g.add_argument("--lora-targets", default=None, metavar="M,M",
                   help="the modules the adapter adapts (default q_proj,v_proj, PEFT's; any of q_proj k_proj v_proj "
                        "o_proj gate_proj up_proj down_proj); vLLM preallocates all of them whatever this says")
    g.add_argument("--max-loras", type=lambda t: positive_int(t, 4096), default=None, metavar="N",
                   help="adapters served at once (vLLM's --max-loras slots; default 1)")
    g.add_argument("--draft-model", default=None, metavar="M",
                   help="a speculative-decoding draft model (bundled id, config.json, folder, .gguf or org/name): "
                        "its weights and its own cache are counted")
    g.add_argument("--num-speculative-tokens", type=lambda t: positive_int(t, 64), default=None, metavar="K",
                   help="tokens the draft proposes per step (vLLM's num_speculative_tokens, llama.cpp's --draft-max)")


def extras_from_args(a) -> dict:
    """The Workload fields of the LoRA and draft flags (only those given)."""
    from part1_capacity.calculator.sizing import adapters

    out = {}
    if getattr(a, "lora_rank", None) is not None or getattr(a, "lora_targets", None) is not None or \
            getattr(a, "max_loras", None) is not None:
        if getattr(a, "lora_rank", None) is None:
            raise InputError("--lora-targets/--max-loras: LoRA settings need --lora-rank R")
        out.update(lora_rank=a.lora_rank, lora_targets=adapters.parse_targets(a.lora_targets),
                   max_loras=a.max_loras or 1)
    if getattr(a, "num_speculative_tokens", None) is not None and getattr(a, "draft_model", None) is None:
        raise InputError("--num-speculative-tokens: speculative decoding needs --draft-model M")
    if getattr(a, "draft_model", None) is not None:
        out.update(draft_model=a.draft_model, num_speculative_tokens=a.num_speculative_tokens or 0)
    return out


def workload_from_args(a, **over) -> Workload:
    kw = dict(context=getattr(a, "context", None), batch=getattr(a, "batch", 1),
              weights_dtype=getattr(a, "weights_dtype", None),
              kv_dtype=getattr(a, "kv_dtype", "bf16"), state_dtype=getattr(a, "state_dtype", None),
              usable_fraction=a.usable_fraction, overhead_bytes=a.overhead_gib * GIB,
              tensor_parallel=getattr(a, "tensor_parallel", None),
              pipeline_parallel=getattr(a, "pipeline_parallel", None), nodes=getattr(a, "nodes", None),
              engine=getattr(a, "engine", None) or "law",
              hybrid_kv_cache_manager=not getattr(a, "disable_hybrid_kv_cache_manager", False))
    kw.update(extras_from_args(a))
    kw.update(over)
    return Workload(**kw)


def size_bytes(text: str) -> float:
    """argparse type of a memory size: ``12.22GiB``, ``512MiB``, ``13e9``, ``13GB`` or bytes."""
    from part1_capacity.calculator.engines.vllm_memory import parse_size

    try:
        return parse_size(text, "value")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("value: ")) from None


def add_vllm_startup_flags(p: argparse.ArgumentParser):
    """vLLM's start-up flags (``vllm serve``'s own names), used with ``--engine vllm``; unset, vLLM's defaults for
    the accelerator (part1_capacity/calculator/engines/vllm_memory.py)."""
    g = p.add_argument_group("vLLM start-up (with --engine vllm)")
    g.add_argument("--kv-cache-memory", type=size_bytes, default=None, metavar="SIZE",
                   help="vLLM's --kv-cache-memory-bytes: the KV memory per worker (12.22GiB, 13e9, bytes); "
                        "nothing is estimated")
    g.add_argument("--gpu-memory-utilization", type=fraction, default=None, metavar="F",
                   help="vLLM's share of the device memory (default: the release's, "
                        f"{vllm_memory.RELEASES[vllm_memory.DEFAULT_RELEASE].default_utilization:g} in "
                        f"v{vllm_memory.DEFAULT_RELEASE}; 0.9 up to v0.19)")
    g.add_argument("--max-num-seqs", type=positive_int, default=None, metavar="N",
                   help="vLLM's scheduler limit (default: 1024 on GPUs of >= 70 GiB other than the A100, else 256)")
    g.add_argument("--max-num-batched-tokens", type=positive_int, default=None, metavar="N",
                   help="tokens per chunked-prefill step (default: vLLM's per accelerator: 8192, 2048, TPU 256–1024)")
    g.add_argument("--block-size", type=lambda t: positive_int(t, 2 ** 16), default=None, metavar="N",
                   help="tokens per KV block (default: vLLM's — 16; MLA 64 on Hopper, 128 on Blackwell)")
    g.add_argument("--vllm-version", default=None, metavar="X.Y[.Z]",
                   help=f"the vLLM release whose start-up rules apply (default {vllm_memory.DEFAULT_RELEASE}, the newest "
                        "modelled): non-torch memory per rank, "
                        "the default gpu_memory_utilization, V0's scheduler defaults before 0.8, the CUDA-graph "
                        "estimate inside the budget from 0.21 "
                        "(part1_capacity/calculator/engines/vllm_memory.py RELEASES)")


VLLM_STARTUP_FLAGS = ("kv_cache_memory", "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens",
                      "block_size", "vllm_version")


def startup_flags_from_args(a):
    """The ``StartupFlags`` of the parsed vLLM start-up flags; refused (exit 2) without ``--engine vllm``."""
    from part1_capacity.calculator.engines.vllm_memory import StartupFlags, release

    given = [n for n in VLLM_STARTUP_FLAGS if getattr(a, n, None) is not None]
    if given and getattr(a, "engine", "law") != "vllm":
        raise InputError(f"--{given[0].replace('_', '-')}: a vLLM start-up flag, only with --engine vllm "
                         f"(got --engine {getattr(a, 'engine', 'law')})")
    return StartupFlags(gpu_memory_utilization=a.gpu_memory_utilization, kv_cache_memory_bytes=a.kv_cache_memory,
                        max_num_seqs=a.max_num_seqs, max_num_batched_tokens=a.max_num_batched_tokens,
                        block_size=a.block_size, vllm_version=release(a.vllm_version)[0].name and a.vllm_version)


def accelerator_arg(name):
    """--accelerator: a bundled id, a JSON file, or ``local`` (this machine, detected: ``local_machine.detect``).
    Returns (Accelerator, the detected Machine or None)."""
    from part1_capacity.calculator.hardware.accelerators import load_accelerator
    from part1_capacity.calculator.hardware import local_machine

    if str(name).strip().lower() == local_machine.LOCAL:
        m = local_machine.detect()
        return m.accelerator, m
    return load_accelerator(name), None


def machine_fields(machine) -> dict:
    """The JSON of what ``--accelerator local`` found."""
    if machine is None:
        return {}
    f = machine.found
    return {"local": {"tool": f.tool, "name": f.name, "memory_bytes": f.memory_bytes, "count": f.count,
                      "host_memory_bytes": machine.host_memory_bytes, "host_bandwidth": machine.host_bandwidth,
                      "matched": f.matched, "found": f.describe()}}

