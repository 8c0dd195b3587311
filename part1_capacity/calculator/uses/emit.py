"""Engine commands that serve a plan: ``vllm serve`` for the accelerators vLLM runs on, ``llama-server`` (llama.cpp)
for laptops, phones, edge modules and single machines.

Each flag is the engine's own, as its argument parser spells it:

- vLLM: ``vllm/engine/arg_utils.py`` (``EngineArgs.add_cli_args``): ``--tensor-parallel-size``,
  ``--pipeline-parallel-size``, ``--data-parallel-size``, ``--enable-expert-parallel``, ``--max-model-len``,
  ``--max-num-seqs``, ``--kv-cache-dtype``, ``--gpu-memory-utilization``, ``--dtype``, ``--quantization``,
  ``--trust-remote-code``, ``--mamba-ssm-cache-dtype``, ``--disable-hybrid-kv-cache-manager``. vLLM reads a
  checkpoint's ``quantization_config`` before any flag: an FP8 or MXFP4 checkpoint is served in its own format
  whatever ``--dtype`` says (``--dtype`` sets the activations), so for a quantized checkpoint the command says so
  instead of pretending to change the weights.
- llama.cpp: ``common/arg.cpp`` of the pinned llama.cpp: ``-m``, ``-c`` (the context of ALL slots: each of the
  ``-np`` slots gets ``c / np`` — ``src/llama-context.cpp``, ``n_ctx_seq = n_ctx / n_seq_max`` when the KV
  buffer is not unified), ``-np``, ``-ctk``/``-ctv`` (``kv_cache_types``: f32, f16, bf16, q8_0, …), ``-fa on``
  (a quantized V cache requires flash attention: ``llama-context.cpp`` "quantized V cache was requested, but
  this requires Flash Attention"), ``-ngl`` (the last layers offloaded to the GPU), ``--n-cpu-moe`` (the
  routed experts of the first N layers kept on the host), ``-nkvo`` (every layer's cache on the host).

Every line is safe to paste into a shell: each value that is not a fixed word is one quoted shell word
(``shell_word``: the exact bytes, control characters included, and nothing the shell expands), and each comment is
built from escaped text (``comment``: no newline or control character can end it and start a command).
"""
from __future__ import annotations

import json
import re
import shlex

from course.shared.units import ceil_div
from part1_capacity.calculator.base import validate
from part1_capacity.calculator.sizing import adapters
from part1_capacity.calculator.engines import vllm as vllm_rules
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.hardware.accelerators import SERVING_ENGINES

ENGINES = SERVING_ENGINES     # the commands --emit writes: one per serving engine (accelerators.SERVING_ENGINES)
VLLM_KV = {"bf16": "auto", "fp16": "auto", "fp8": "fp8"}
VLLM_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
QUANTIZED_CHECKPOINTS = ("fp8", "mxfp4", "fp4", "int8", "int4")   # native dtypes that mean a quantization_config
# Models whose repository ships its own code (tokenizer or modelling) that the engine must be allowed to run.
TRUST_REMOTE_CODE = {
    "moonshotai/Kimi-K2-Instruct": "MoonshotAI/Kimi-K2 docs/deploy_guidance.md (vllm serve ... --trust-remote-code)",
}
LLAMA_CPP_KV = {"fp32": "f32", "fp16": "f16", "bf16": "bf16", "q8_0": "q8_0"}
# A Hugging Face repository id as the Hub accepts it (huggingface_hub.utils.validate_repo_id: letters, digits,
# '-', '_', '.', an optional 'org/' part, at most 96 characters, no '--' or '..').
HUB_ID = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._-]*$")
_V053 = ("0.5.3", "listed on vLLM v0.5.3's engine-arguments page (docs.vllm.ai/en/v0.5.3/models/engine_args.html)")
_V091 = ("0.9.1", "used by vLLM v0.9.1's examples/online_serving/multi_instance_data_parallel.py")
_UNVERIFIED = (None, "in vLLM's current arg_utils.py; the first release that has it is not verified here")
# The vLLM release each emitted flag needs (a release known to have it; None: not verified).
VLLM_FLAG_SINCE = {
    **{f: _V053 for f in ("--tensor-parallel-size", "--pipeline-parallel-size", "--max-model-len", "--max-num-seqs",
                          "--max-num-batched-tokens", "--kv-cache-dtype", "--gpu-memory-utilization", "--dtype",
                          "--quantization", "--trust-remote-code", "--block-size")},
    **{f: _V091 for f in ("--data-parallel-size", "--data-parallel-size-local", "--data-parallel-address",
                          "--data-parallel-rpc-port", "--headless")},
    "--kv-cache-memory-bytes": ("0.14.1", "upstream by v0.14.1 (vllm-project/vllm-ascend PR #6375 carries it over "
                                          "from that release)"),
    **{f: _UNVERIFIED for f in ("--enable-expert-parallel", "--data-parallel-start-rank", "--mamba-ssm-cache-dtype",
                                "--disable-hybrid-kv-cache-manager", "--enable-lora", "--max-loras",
                                "--max-lora-rank", "--speculative-config")},
}
LLAMA_MAX_SEQ = 256            # llama.cpp src/llama-cparams.h: the most sequences (slots) one context holds
HEAD_ADDRESS = "$HEAD_IP"       # the head node's address, a shell variable the operator sets on every node
DP_RPC_PORT = 13345             # any free port, the same on every node (vLLM's docs use 13345)


def shell_word(s: str) -> str:
    """``s`` as one shell word that a shell reads back as exactly ``s``: ``shlex.quote`` for printable text; text
    with control characters (a newline, an escape code) as bash's ``$'...'`` with each such byte as ``\\xHH``, so
    the word is the exact file name and the line shows no raw control character."""
    s = str(s)
    if all(c.isprintable() for c in s):
        return shlex.quote(s)
    out = []
    for c in s:
        if c in "\\'":
            out.append("\\" + c)
        elif c.isprintable():
            out.append(c)
        else:
            try:
                raw = c.encode("utf-8", "surrogateescape")      # a file name's undecodable byte, as the OS gave it
            except UnicodeEncodeError:
                raw = c.encode("utf-8", "surrogatepass")
            out.append("".join(f"\\x{b:02x}" for b in raw))
    return "$'" + "".join(out) + "'"


def comment(text: str) -> str:
    """``# text`` with every control character of ``text`` escaped (``validate.printable``): one comment line that
    nothing in ``text`` can end."""
    return "# " + validate.printable(str(text), limit=10_000)


def repo_id(plan, hf_repo: str | None = None) -> str:
    """The repository a server loads: ``--hf-repo``, else the profile's (bundled table or config ``_name_or_path``)."""
    repo = hf_repo or plan.model.hf_repo
    if not repo:
        raise InputError(f"hf_repo: the repository of '{plan.model.id}' is unknown (its config.json has no "
                         f"_name_or_path); pass --hf-repo ORG/NAME")
    # checked, then quoted where it is printed: a command line is pasted into a shell
    if len(repo) > 96 or not HUB_ID.match(repo) or "--" in repo or ".." in repo:
        raise InputError(f"hf_repo: {validate.show(repo)} is not a Hugging Face repository id (ORG/NAME: letters, "
                         f"digits, '-', '_', '.'; at most 96 characters)")
    return repo


def command(plan, engine: str, hf_repo: str | None = None, startup=None, offload: dict | None = None) -> str:
    """The serving command for ``plan``; ``offload`` (``offload.placement``/``propose``): llama.cpp on one GPU and
    the host, written as its ``-ngl`` / ``--n-cpu-moe`` / ``-nkvo`` flags."""
    if engine not in ENGINES:
        raise InputError(f"emit: unknown engine '{engine}'; allowed: {', '.join(ENGINES)}")
    acc = plan.accelerator
    if engine not in acc.engines:
        others = [e for e in acc.engines if e != engine]
        raise InputError(f"emit: {engine} does not serve {acc.name}; allowed here: {', '.join(acc.engines)}"
                         + (f" (--emit {others[0]})" if others else ""))
    if offload is not None and engine == "llama.cpp":
        if not offload["fits"]:
            raise InputError("emit: nothing to emit, no split of the layers between the accelerator and the host "
                             "fits (see placement)")
        return llama_cpp_command(plan, hf_repo, offload)
    if not plan.parallelism:
        raise InputError(f"emit: nothing to emit, the workload does not fit: {plan.verdict}")
    return vllm_command(plan, hf_repo, startup) if engine == "vllm" else llama_cpp_command(plan, hf_repo)


def vllm_command(plan, hf_repo: str | None = None, startup=None) -> str:
    """``vllm serve`` for the plan's deployment (one engine instance; with data parallelism, its replicas)."""
    m, wl, par = plan.model, plan.workload, plan.parallelism
    if wl.kv_dtype not in VLLM_KV:
        raise InputError(f"kv_dtype: vLLM's --kv-cache-dtype takes auto (bf16/fp16) or fp8, not {wl.kv_dtype}")
    repo = repo_id(plan, hf_repo)
    args = [f"vllm serve {shell_word(repo)}", f"--tensor-parallel-size {par['tensor']}"]
    if par["pipeline"] > 1:
        args.append(f"--pipeline-parallel-size {par['pipeline']}")
    if par["data"] > 1:
        args.append(f"--data-parallel-size {par['data']}")
    if par["expert"] > 1:
        args.append("--enable-expert-parallel")
    flags = startup.flags if startup is not None else {}
    given = getattr(startup, "given", {}) if startup is not None else {}
    util = given.get("gpu_memory_utilization") or wl.usable_fraction
    args += [f"--max-model-len {wl.context}",
             f"--max-num-seqs {given.get('max_num_seqs') or par['sequences_per_replica']}",
             f"--kv-cache-dtype {VLLM_KV[wl.kv_dtype]}", f"--gpu-memory-utilization {util:g}"]
    if given.get("kv_cache_memory_bytes"):
        args.append(f"--kv-cache-memory-bytes {int(given['kv_cache_memory_bytes'])}")
    for key in ("max_num_batched_tokens", "block_size"):
        if given.get(key):
            args.append(f"--{key.replace('_', '-')} {flags[key]}")
    if repo in TRUST_REMOTE_CODE:
        args.append("--trust-remote-code")
    args += vllm_extras_args(plan)
    # The SSM state dtype the plan sized, when vLLM would keep another by itself (engines/vllm.py;
    # vllm/config/cache.py MambaDType), and the hybrid manager switched off when the plan assumed it.
    ssm = vllm_rules.mamba_ssm_cache_dtype_args(m, wl.state_dtype)
    if ssm:
        args.append(" ".join(ssm))
    if not getattr(wl, "hybrid_kv_cache_manager", True):
        args.append("--disable-hybrid-kv-cache-manager")
    notes = []
    if wl.weights_dtype != m.native_dtype:
        if m.native_dtype in QUANTIZED_CHECKPOINTS:
            notes.append(f"{repo} is a {m.native_dtype} checkpoint: vLLM loads it as {m.native_dtype} (its "
                         f"quantization_config wins over --dtype), not as the {wl.weights_dtype} this plan sized; "
                         f"serve a {wl.weights_dtype} checkpoint of the model for that")
        elif wl.weights_dtype == "fp8":
            args.append("--quantization fp8")
        elif wl.weights_dtype in VLLM_DTYPE:
            args.append(f"--dtype {VLLM_DTYPE[wl.weights_dtype]}")
        else:
            notes.append(f"{wl.weights_dtype} weights: serve a checkpoint already quantized to it "
                         f"(AWQ/GPTQ for int4/int8, a GGUF file for q8_0/q5_0/q4_k_m)")
    if wl.weights_dtype == "fp8" and not plan.accelerator.flops_fp8:
        notes.append(f"{plan.accelerator.name} has no FP8 tensor cores: vLLM serves FP8 weights weight-only "
                     "(FP8 Marlin kernels, vllm/model_executor/layers/quantization/utils/marlin_utils_fp8.py), "
                     "the matmuls run at the 16-bit rate — half the memory, not twice the speed")
    if par["nodes"] > 1 and par["data"] > 1:
        local = max(1, plan.accelerator.node_size // (par["tensor"] * par["pipeline"]))
        dp = [f"--data-parallel-size-local {local}", f'--data-parallel-address "{HEAD_ADDRESS}"',
              f"--data-parallel-rpc-port {DP_RPC_PORT}"]
        args += dp
        worker = " ".join(a for a in args if not a.startswith("--data-parallel-size-local")
                          and not a.startswith("--data-parallel-address") and not a.startswith("--data-parallel-rpc"))
        notes.append(f"set HEAD_IP to the head node's address (reachable from the others) on every node; this "
                     f"command runs on the head node, and vLLM's multi-node data parallelism "
                     f"(docs/serving/data_parallel_deployment.md) starts each other node with the same address and "
                     f"port:")
        shown = min(par["nodes"] - 1, 3)
        for k in range(1, shown + 1):
            notes.append(f"node {k}: {worker} --headless {' '.join(dp)} --data-parallel-start-rank {k * local}")
        if par["nodes"] - 1 > shown:
            notes.append(f"nodes {shown + 1}–{par['nodes'] - 1}: the same, --data-parallel-start-rank k × {local}")
    elif par["nodes"] > 1:
        notes.append(f"{par['nodes']} nodes of {plan.accelerator.node_size}: start a Ray cluster across them first "
                     f"(vLLM's multi-node serving), then run this on the head node")
    notes = [comment(n) for n in notes]
    notes.append(version_note(args + notes))
    return " \\\n  ".join(args) + "\n" + "\n".join(notes)


def vllm_extras_args(plan) -> list[str]:
    """LoRA slots (``--enable-lora --max-loras --max-lora-rank``: vLLM's argument names, its ranks in
    ``adapters.VLLM_RANKS``) and a draft model (``--speculative-config`` JSON: ``model``,
    ``num_speculative_tokens``)."""
    wl, r, out = plan.workload, plan.resolved, []
    if wl.lora_rank:
        out += ["--enable-lora", f"--max-loras {wl.max_loras}", f"--max-lora-rank {adapters.vllm_rank(wl.lora_rank)}"]
    if r is not None and r.draft is not None:
        cfg = {"model": r.draft.hf_repo or r.draft.id, "num_speculative_tokens": wl.num_speculative_tokens or 1}
        out.append(f"--speculative-config {shell_word(json.dumps(cfg, separators=(',', ':')))}")
    return out


def llama_cpp_extras_args(plan) -> list[str]:
    """``--lora FILE`` per adapter and ``-md DRAFT.gguf --draft-max K`` (common/arg.cpp's names)."""
    wl, r, out = plan.workload, plan.resolved, []
    if wl.lora_rank:
        out += [f"--lora adapter-{k + 1}.gguf" for k in range(wl.max_loras)]
    if r is not None and r.draft is not None:
        d = r.draft
        path = d.checkpoint.path if d.checkpoint is not None and d.checkpoint.source == "gguf" else \
            f"{d.id}-{wl.weights_dtype}.gguf"
        out.append(f"-md {shell_word(path)}")
        if wl.num_speculative_tokens:
            out.append(f"--draft-max {wl.num_speculative_tokens}")
    return out


def version_note(lines: list[str]) -> str:
    """``# vLLM ≥ X`` for the flags in ``lines``: the newest release among those each flag is known in, and the
    flags whose first release is not verified."""
    used = sorted({w for line in lines for w in line.replace("#", " ").split() if w in VLLM_FLAG_SINCE})
    known = [(tuple(int(x) for x in VLLM_FLAG_SINCE[f][0].split(".")), f) for f in used if VLLM_FLAG_SINCE[f][0]]
    v, flag = max(known)
    line = f"# needs vLLM >= {'.'.join(map(str, v))} ({flag}: {VLLM_FLAG_SINCE[flag][1]})"
    unknown = [f for f in used if not VLLM_FLAG_SINCE[f][0]]
    return line + (f"; first release not verified for {', '.join(unknown)}" if unknown else "")


def llama_cpp_command(plan, hf_repo: str | None = None, offload: dict | None = None) -> str:
    """``llama-server`` for one replica of the plan on one machine: its sequences as slots, each with the full
    context, the KV types of the plan, every layer on the GPU — or, with ``offload``, the split it describes
    (``-ngl``: the last N layers on the GPU; ``--n-cpu-moe``: the first M layers' experts on the host; ``-nkvo``)."""
    m, wl, acc = plan.model, plan.workload, plan.accelerator
    par = plan.parallelism if offload is None else {"tensor": 1, "pipeline": 1, "data": 1, "nodes": 1,
                                                     "sequences_per_replica": wl.batch}
    if wl.kv_dtype not in LLAMA_CPP_KV or wl.state_dtype not in LLAMA_CPP_KV:
        raise InputError(f"kv_dtype: llama.cpp's -ctk/-ctv take {', '.join(LLAMA_CPP_KV.values())} here "
                         f"(kv dtypes {', '.join(LLAMA_CPP_KV)}), not {wl.kv_dtype}")
    per_replica = par["tensor"] * par["pipeline"]
    if per_replica > acc.node_size:
        raise InputError(f"emit: llama.cpp serves one machine here, and this deployment needs {per_replica} "
                         f"{acc.name} per replica ({par['nodes']} nodes); use --emit vllm or a smaller plan")
    seqs = par["sequences_per_replica"]
    servers = ceil_div(seqs, LLAMA_MAX_SEQ)      # one context holds at most LLAMA_MAX_SEQ sequences
    slots = ceil_div(seqs, servers)
    kv = LLAMA_CPP_KV[wl.kv_dtype]
    # the GGUF given as --model is the file served (at its own precision); otherwise the file to make
    given = m.checkpoint.path if m.checkpoint is not None and m.checkpoint.source == "gguf" else ""
    gguf = given or f"{m.id}-{wl.weights_dtype}.gguf"
    args = [f"llama-server -m {shell_word(gguf)}", f"-c {wl.context * slots}", f"-np {slots}", f"-ctk {kv}",
            f"-ctv {kv}"]
    if kv not in ("f32", "f16", "bf16"):
        args.append("-fa on")
    args += llama_cpp_extras_args(plan)
    if offload is None:
        args.append("-ngl 999")
    else:
        args.append(f"-ngl {offload['n_gpu_layers'] if offload['n_gpu_layers'] <= m.n_layers else 999}")
        if offload["n_cpu_moe"]:
            args.append(f"--n-cpu-moe {offload['n_cpu_moe']}")
        if not offload["kv_offload"]:
            args.append("-nkvo")
    notes = [] if given else [f"{gguf}: a GGUF of {hf_repo or m.hf_repo or m.id} at "
                              f"{wl.weights_dtype} (llama.cpp's convert_hf_to_gguf.py, then llama-quantize)"]
    if per_replica > 1:
        notes.append(f"one machine with {per_replica} GPUs: llama.cpp splits the layers across them "
                     f"(its default -sm layer); tensor parallelism is vLLM's")
    if servers > 1:
        notes.append(f"{seqs:,} sequences per replica: llama.cpp holds at most {LLAMA_MAX_SEQ} per context "
                     f"(LLAMA_MAX_SEQ, src/llama-cparams.h; llama-context.cpp refuses more), so run {servers} such "
                     f"servers of {slots} slots on different ports (--port) per replica, behind one load balancer"
                     + (f" — {servers * slots - seqs} slot(s) spare" if servers * slots != seqs else ""))
    if par["data"] > 1:
        notes.append(f"{par['data']} replicas: run {par['data']} such " + ("groups of servers" if servers > 1 else
                     "servers") + f", {seqs} sequences each")
    return " \\\n  ".join(args) + ("\n" + "\n".join(comment(n) for n in notes) if notes else "")
