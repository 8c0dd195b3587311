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
  this requires Flash Attention"), ``-ngl`` (layers offloaded to the GPU).
"""
from __future__ import annotations

from part1_capacity.calculator.engine_rules import vllm as vllm_rules
from part1_capacity.calculator.errors import InputError

ENGINES = ("vllm", "llama.cpp")
VLLM_KV = {"bf16": "auto", "fp16": "auto", "fp8": "fp8"}
VLLM_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
QUANTIZED_CHECKPOINTS = ("fp8", "mxfp4", "int8", "int4")   # native dtypes that mean a quantization_config
# Models whose repository ships its own code (tokenizer or modelling) that the engine must be allowed to run.
TRUST_REMOTE_CODE = {
    "moonshotai/Kimi-K2-Instruct": "MoonshotAI/Kimi-K2 docs/deploy_guidance.md (vllm serve ... --trust-remote-code)",
}
LLAMA_CPP_KV = {"fp32": "f32", "fp16": "f16", "bf16": "bf16", "q8_0": "q8_0"}


def repo_id(plan, hf_repo: str | None = None) -> str:
    """The repository a server loads: ``--hf-repo``, else the profile's (bundled table or config ``_name_or_path``)."""
    repo = hf_repo or plan.model.hf_repo
    if not repo:
        raise InputError(f"hf_repo: the repository of '{plan.model.id}' is unknown (its config.json has no "
                         f"_name_or_path); pass --hf-repo ORG/NAME")
    return repo


def command(plan, engine: str, hf_repo: str | None = None) -> str:
    if engine not in ENGINES:
        raise InputError(f"emit: unknown engine '{engine}'; allowed: {', '.join(ENGINES)}")
    acc = plan.accelerator
    if engine not in acc.engines:
        others = [e for e in acc.engines if e != engine]
        raise InputError(f"emit: {engine} does not serve {acc.name}; allowed here: {', '.join(acc.engines)}"
                         + (f" (--emit {others[0]})" if others else ""))
    if not plan.parallelism:
        raise InputError(f"emit: nothing to emit, the workload does not fit: {plan.verdict}")
    return vllm_command(plan, hf_repo) if engine == "vllm" else llama_cpp_command(plan, hf_repo)


def vllm_command(plan, hf_repo: str | None = None) -> str:
    """``vllm serve`` for the plan's deployment (one engine instance; with data parallelism, its replicas)."""
    m, wl, par = plan.model, plan.workload, plan.parallelism
    if wl.kv_dtype not in VLLM_KV:
        raise InputError(f"kv_dtype: vLLM's --kv-cache-dtype takes auto (bf16/fp16) or fp8, not {wl.kv_dtype}")
    repo = repo_id(plan, hf_repo)
    args = [f"vllm serve {repo}", f"--tensor-parallel-size {par['tensor']}"]
    if par["pipeline"] > 1:
        args.append(f"--pipeline-parallel-size {par['pipeline']}")
    if par["data"] > 1:
        args.append(f"--data-parallel-size {par['data']}")
    if par["expert"] > 1:
        args.append("--enable-expert-parallel")
    args += [f"--max-model-len {wl.context}", f"--max-num-seqs {par['sequences_per_replica']}",
             f"--kv-cache-dtype {VLLM_KV[wl.kv_dtype]}", f"--gpu-memory-utilization {wl.usable_fraction:g}"]
    if repo in TRUST_REMOTE_CODE:
        args.append("--trust-remote-code")
    # The SSM state dtype the plan sized, when vLLM would keep another by itself (engine_rules/vllm.py;
    # vllm/config/cache.py MambaDType), and the hybrid manager switched off when the plan assumed it.
    ssm = vllm_rules.mamba_ssm_cache_dtype_args(m, wl.state_dtype)
    if ssm:
        args.append(" ".join(ssm))
    if not getattr(wl, "hybrid_kv_cache_manager", True):
        args.append("--disable-hybrid-kv-cache-manager")
    notes = []
    if wl.weights_dtype != m.native_dtype:
        if m.native_dtype in QUANTIZED_CHECKPOINTS:
            notes.append(f"# {repo} is a {m.native_dtype} checkpoint: vLLM loads it as {m.native_dtype} (its "
                         f"quantization_config wins over --dtype), not as the {wl.weights_dtype} this plan sized; "
                         f"serve a {wl.weights_dtype} checkpoint of the model for that")
        elif wl.weights_dtype == "fp8":
            args.append("--quantization fp8")
        elif wl.weights_dtype in VLLM_DTYPE:
            args.append(f"--dtype {VLLM_DTYPE[wl.weights_dtype]}")
        else:
            notes.append(f"# {wl.weights_dtype} weights: serve a checkpoint already quantized to it "
                         f"(AWQ/GPTQ for int4/int8, a GGUF file for q8_0/q5_0/q4_k_m)")
    if par["nodes"] > 1 and par["data"] > 1:
        local = max(1, plan.accelerator.node_size // (par["tensor"] * par["pipeline"]))
        notes.append(f"# {par['nodes']} nodes: on each add --data-parallel-size-local {local}; the first with "
                     f"--data-parallel-address <its IP>, the others with --headless --data-parallel-start-rank "
                     f"<k·{local}> (vLLM's multi-node data parallelism)")
    elif par["nodes"] > 1:
        notes.append(f"# {par['nodes']} nodes of {plan.accelerator.node_size}: start a Ray cluster across them first "
                     f"(vLLM's multi-node serving), then run this on the head node")
    return " \\\n  ".join(args) + ("\n" + "\n".join(notes) if notes else "")


def llama_cpp_command(plan, hf_repo: str | None = None) -> str:
    """``llama-server`` for one replica of the plan on one machine: its sequences as slots, each with the full
    context, the KV types of the plan, every layer on the GPU."""
    m, wl, par, acc = plan.model, plan.workload, plan.parallelism, plan.accelerator
    if wl.kv_dtype not in LLAMA_CPP_KV or wl.state_dtype not in LLAMA_CPP_KV:
        raise InputError(f"kv_dtype: llama.cpp's -ctk/-ctv take {', '.join(LLAMA_CPP_KV.values())} here "
                         f"(kv dtypes {', '.join(LLAMA_CPP_KV)}), not {wl.kv_dtype}")
    per_replica = par["tensor"] * par["pipeline"]
    if per_replica > acc.node_size:
        raise InputError(f"emit: llama.cpp serves one machine here, and this deployment needs {per_replica} "
                         f"{acc.name} per replica ({par['nodes']} nodes); use --emit vllm or a smaller plan")
    seqs = par["sequences_per_replica"]
    kv = LLAMA_CPP_KV[wl.kv_dtype]
    gguf = f"{m.id}-{wl.weights_dtype}.gguf"
    args = [f"llama-server -m {gguf}", f"-c {wl.context * seqs}", f"-np {seqs}", f"-ctk {kv}", f"-ctv {kv}"]
    if kv not in ("f32", "f16", "bf16"):
        args.append("-fa on")
    args.append("-ngl 999")
    notes = [f"# {gguf}: a GGUF of {hf_repo or m.hf_repo or m.id} at {wl.weights_dtype} "
             f"(llama.cpp's convert_hf_to_gguf.py, then llama-quantize)"]
    if per_replica > 1:
        notes.append(f"# one machine with {per_replica} GPUs: llama.cpp splits the layers across them "
                     f"(its default -sm layer); tensor parallelism is vLLM's")
    if par["data"] > 1:
        notes.append(f"# {par['data']} replicas: run {par['data']} such servers, {seqs} sequences each")
    return " \\\n  ".join(args) + "\n" + "\n".join(notes)
