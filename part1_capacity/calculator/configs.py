"""A Hugging Face ``config.json`` → ``ModelProfile``, read the way ``transformers`` reads it.

The file's fields go through ``transformers``' own config class for its ``model_type``
(``AutoConfig.for_model(model_type, **fields)``, nothing downloaded), so the defaults a published file leaves out
(Google's ``gemma-3-27b-it`` states no ``max_position_embeddings``, ``sliding_window_pattern`` or ``rope_theta``),
the ``attribute_map`` aliases (GPT-2's ``n_layer``), the derived ``layer_types`` and a multimodal checkpoint's
nested ``text_config`` are exactly what an engine loading the model sees. Parameter counts come from
``transformers`` too: the model is built on PyTorch's ``meta`` device (shapes only, no memory) and its parameters
counted, which also gives the tensor groups for the weight bytes (``weights.py``).

What stays here is what ``transformers`` does not provide: which layers cache what (the cache laws' inputs), the
recurrent-state shapes of each hybrid family, which parameters a quantized checkpoint stores at which precision,
and limits that keep hostile files from running away (checked before anything is built).

``transformers`` (and torch) are imported only when a config file is read: the bundled models never import them.
"""
from __future__ import annotations

import fnmatch
import json
import re
from functools import lru_cache
from pathlib import Path

from part1_capacity.calculator import validate
from part1_capacity.calculator.errors import InputError
from part1_capacity.calculator.profiles import ModelProfile, profile_from_dict
from part1_capacity.calculator.weights import WeightGroup

# model_type → (what decides its cache, a published config.json the tests read: tests/data/configs/README.md).
FAMILIES = {
    "llama": ("GQA", "meta-llama/Llama-3.1-70B-Instruct"),
    "mistral": ("GQA; sliding window on every layer when set", "mistralai/Mistral-7B-v0.1"),
    "qwen2": ("GQA", "Qwen/Qwen2.5-0.5B-Instruct"),
    "qwen3": ("GQA", "Qwen/Qwen3-8B"),
    "gpt2": ("MHA", "openai-community/gpt2"),
    "deepseek_v2": ("MLA, MoE", "deepseek-ai/DeepSeek-V2.5"),
    "deepseek_v3": ("MLA, MoE, FP8", "deepseek-ai/DeepSeek-R1"),
    "gemma2": ("sliding window, alternating", "google/gemma-2-9b"),
    "gemma3": ("sliding window, 5 local : 1 global (multimodal: text_config)", "google/gemma-3-27b-it"),
    "gemma3_text": ("sliding window, 5 local : 1 global", "google/gemma-3-27b-it (its text_config)"),
    "gpt_oss": ("sliding window, MoE, MXFP4 experts", "openai/gpt-oss-20b"),
    "jamba": ("Mamba-1 hybrid, MoE", "ai21labs/AI21-Jamba-1.5-Mini"),
    "nemotron_h": ("Mamba-2 hybrid (MoE in Nemotron 3)", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"),
    "granitemoehybrid": ("Mamba-2 hybrid, MoE", "ibm-granite/granite-4.0-h-tiny"),
    "qwen3_next": ("Gated DeltaNet hybrid, MoE", "Qwen/Qwen3-Next-80B-A3B-Instruct"),
    "falcon_h1": ("Mamba-2 and attention side by side in every layer", "tiiuae/Falcon-H1-0.5B-Base"),
}

# Limits checked before transformers sees the file: far beyond any published model, near enough that a model
# built from them on the meta device stays fast. (field → (lowest, highest)); None values are left to defaults.
_LIMITS = {
    "num_hidden_layers": (1, 512), "n_layer": (1, 512), "num_attention_heads": (1, 1024), "n_head": (1, 1024),
    "num_key_value_heads": (1, 1024), "hidden_size": (1, 65536), "n_embd": (1, 65536), "head_dim": (1, 4096),
    "intermediate_size": (1, 262144), "n_inner": (1, 262144), "moe_intermediate_size": (1, 262144),
    "shared_expert_intermediate_size": (0, 262144), "vocab_size": (1, 2 ** 22),
    "max_position_embeddings": (1, 2 ** 30), "n_positions": (1, 2 ** 30), "sliding_window": (1, 2 ** 30),
    "sliding_window_pattern": (1, 512), "max_window_layers": (0, 512),
    "num_local_experts": (0, 1024), "num_experts": (0, 1024), "n_routed_experts": (0, 1024),
    "n_shared_experts": (0, 64), "num_experts_per_tok": (0, 1024), "experts_per_token": (0, 1024),
    "first_k_dense_replace": (0, 512), "moe_layer_freq": (1, 512), "num_nextn_predict_layers": (0, 16),
    "kv_lora_rank": (1, 65536), "q_lora_rank": (1, 65536), "qk_rope_head_dim": (0, 4096),
    "qk_nope_head_dim": (0, 4096), "v_head_dim": (1, 4096),
    "attn_layer_period": (1, 512), "attn_layer_offset": (0, 511), "expert_layer_period": (1, 512),
    "expert_layer_offset": (0, 511), "full_attention_interval": (1, 512),
    "mamba_expand": (1, 64), "mamba_d_state": (1, 4096), "mamba_d_conv": (1, 64), "mamba_dt_rank": (1, 65536),
    "mamba_n_heads": (1, 4096), "mamba_d_head": (1, 4096), "mamba_n_groups": (1, 4096), "mamba_d_ssm": (1, 2 ** 20),
    "mamba_num_heads": (1, 4096), "mamba_head_dim": (1, 4096), "ssm_state_size": (1, 4096), "conv_kernel": (1, 64),
    "n_groups": (1, 4096), "linear_num_key_heads": (1, 4096), "linear_num_value_heads": (1, 4096),
    "linear_key_head_dim": (1, 4096), "linear_value_head_dim": (1, 4096), "linear_conv_kernel_dim": (1, 64),
}
_LISTS = ("layer_types", "layers_block_type", "mlp_only_layers", "attn_layer_indices")
_KINDS = {"full_attention": "full", "attention": "full", "sliding_attention": "window", "linear_attention": "ssm",
          "mamba": "ssm", "mlp": "none", "moe": "none", "hybrid": "both"}
_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
_MULTIMODAL = re.compile(r"(^|\.)(vision_tower|vision_model|multi_modal_projector|audio_tower)\.")
QUANT_METHODS = ("fp8", "mxfp4", "awq", "gptq")


# --- reading and checking the file ------------------------------------------------------------------------------
def load_config(path) -> tuple[dict, str]:
    """The JSON object of a ``config.json`` (or a folder holding one) and a short name for messages."""
    p = Path(path)
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise InputError(f"model: folder {p} has no config.json; expected a Hugging Face model folder "
                             f"(config.json + *.safetensors) or a config.json path")
        p = p / "config.json"
    elif not p.exists():
        from part1_capacity.calculator.dtypes import closest
        from part1_capacity.calculator.profiles import bundled_models

        hint = closest(p.name.lower(), bundled_models())
        raise InputError(f"model: no config file at '{path}' and no bundled model of that name{hint}; nothing is "
                         f"downloaded: pass a local config.json, a model folder, a .gguf file or a bundled id "
                         f"(`capacity list models`)")
    d = validate.load_json_object(p, "model", max_bytes=4 * validate.MIB)
    return d, p.name if p.parent.name in ("", ".") else f"{p.parent.name}/{p.name}"


def check_fields(d: dict, where: str) -> None:
    """Refuse values that would make ``transformers`` (or our own layer walk) crash, hang or blow up: numbers
    out of range, wrong types, zero periods. Fields left out are fine: their defaults come from ``transformers``."""
    for key, (lo, hi) in _LIMITS.items():
        if d.get(key) is not None:
            validate.number(d[key], f"{where}: field '{key}'", lo=lo, hi=hi, integer=True)
    for key in _LISTS:
        v = d.get(key)
        if v is not None and (not isinstance(v, list) or len(v) > 512
                              or not all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in v)):
            raise InputError(f"{where}: field '{key}' must be a list of at most 512 names or indices, "
                             f"got {validate.show(v)}")
    for key in ("quantization_config", "text_config", "rope_scaling", "rope_parameters"):
        if d.get(key) is not None and not isinstance(d[key], dict):
            raise InputError(f"{where}: field '{key}' must be a JSON object, got {validate.show(d[key])}")
    pat = d.get("hybrid_override_pattern")
    if pat is not None and (not isinstance(pat, str) or len(pat) > 512 or set(pat) - set("M*-E")):
        raise InputError(f"{where}: field 'hybrid_override_pattern' must be a string of M * - E (at most 512), "
                         f"got {validate.show(pat)}")
    q = d.get("quantization_config")
    if q and q.get("quant_method") not in QUANT_METHODS:
        raise InputError(f"{where}: quantization_config.quant_method {validate.show(q.get('quant_method'))} is not "
                         f"supported; allowed: {', '.join(QUANT_METHODS)}")
    if q and q.get("quant_method") in ("awq", "gptq") and q.get("bits", 4) not in (4, 8):
        # the widths these methods store and the calculator sizes (int4, int8): bits 0 or 3 would be sized as int4
        raise InputError(f"{where}: quantization_config.bits {validate.show(q.get('bits'))} is not a width "
                         f"{q['quant_method']} stores here; allowed: 4, 8")


def _model_type(d: dict, where: str) -> str:
    mt = d.get("model_type")
    if not isinstance(mt, str) or mt not in FAMILIES:
        raise InputError(f"{where}: model_type {validate.show(mt) if mt is not None else '(missing)'} is not "
                         f"supported; supported families: {', '.join(FAMILIES)}")
    return mt


# --- transformers -----------------------------------------------------------------------------------------------
def _transformers():
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")          # nothing is downloaded, ever
    import transformers

    transformers.logging.set_verbosity_error()            # a config's harmless notices are not our output
    return transformers


def build_config(d: dict, where: str, text: bool = True):
    """``transformers``' config object for the file: its text part for a multimodal checkpoint (what decides the
    cache), or with ``text=False`` the whole model (what a server loads)."""
    mt = _model_type(d, where)
    check_fields(d, where)
    if d.get("text_config") is not None:
        check_fields(d["text_config"], f"{where}: text_config")
    fields = {k: v for k, v in d.items() if k != "model_type"}
    try:
        cfg = _transformers().AutoConfig.for_model(mt, **fields)
        return cfg.get_text_config() if text else cfg
    except InputError:
        raise
    except (Exception, RecursionError) as exc:   # transformers' own validation: one line, the first of its message
        msg = (str(exc).strip().splitlines() or [type(exc).__name__])
        raise InputError(f"{where}: transformers refuses this {mt} config: {' '.join(msg[:2])[:200]}") from None


def count_parameters(cfg, where: str) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every parameter of the model ``cfg`` describes, built on the meta device (no memory,
    no weights: ``transformers``' own modules decide which tensors exist)."""
    tr = _transformers()
    import torch

    try:
        with torch.device("meta"):
            model = tr.AutoModelForCausalLM.from_config(cfg)
    except (Exception, RecursionError) as exc:
        msg = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise InputError(f"{where}: transformers cannot build this model: {msg}") from None
    return [(n, tuple(p.shape)) for n, p in model.named_parameters()]


# --- what the calculator reads ----------------------------------------------------------------------------------
def _get(cfg, name: str, where: str, default=None):
    v = getattr(cfg, name, None)
    if v is None:
        if default is None:
            raise InputError(f"{where}: missing field '{name}'")
        return default
    return validate.number(v, f"{where}: field '{name}'", lo=0, integer=True)


def layer_kinds(cfg, where: str) -> list[str]:
    """Per layer: 'full', 'window', 'ssm', 'both' (attention and SSM side by side) or 'none' (MLP only), from
    ``transformers``' ``layer_types`` (or ``layers_block_type``) where the family has one."""
    n = _get(cfg, "num_hidden_layers", where)
    types = getattr(cfg, "layer_types", None) or getattr(cfg, "layers_block_type", None)
    if types:
        bad = [t for t in types if t not in _KINDS]
        if bad:
            raise InputError(f"{where}: layer_types: unknown {validate.show(bad[0])}; allowed: {', '.join(_KINDS)}")
        kinds = [_KINDS[t] for t in types]
    elif getattr(cfg, "sliding_window", None) and cfg.model_type == "mistral":
        kinds = ["window"] * n           # Mistral-7B-v0.1: every layer windowed
    else:
        kinds = ["full"] * n
    if len(kinds) != n and cfg.model_type != "nemotron_h":
        raise InputError(f"{where}: layer_types has {len(kinds)} entries for num_hidden_layers={n}")
    return kinds


def ssm_fields(cfg, where: str, n_ssm: int) -> dict:
    """Recurrent-layer shapes of a hybrid, in the field names of its family (``transformers`` keeps them as
    published). The state size itself comes from the lesson-03 laws (``profiles.ssm_from_dict``)."""
    g = lambda name: _get(cfg, name, where)   # noqa: E731
    mt = cfg.model_type
    if mt == "jamba":
        return {"kind": "mamba1", "n_layers": n_ssm, "d_inner": g("mamba_expand") * g("hidden_size"),
                "d_state": g("mamba_d_state"), "d_conv": g("mamba_d_conv")}
    if mt == "qwen3_next":
        return {"kind": "gated_deltanet", "n_layers": n_ssm, "n_k_heads": g("linear_num_key_heads"),
                "n_v_heads": g("linear_num_value_heads"), "k_head_dim": g("linear_key_head_dim"),
                "v_head_dim": g("linear_value_head_dim"), "d_conv": g("linear_conv_kernel_dim")}
    if mt == "nemotron_h":
        return {"kind": "mamba2", "n_layers": n_ssm, "n_heads": g("mamba_num_heads"), "head_dim": g("mamba_head_dim"),
                "d_state": g("ssm_state_size"), "d_conv": g("conv_kernel"), "n_groups": g("n_groups"),
                # vLLM keeps Nemotron-H's SSM state in the checkpoint's mamba_ssm_cache_dtype, float32 by default
                # (vllm/model_executor/models/config.py, NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE)
                "state_dtype": _DTYPES.get(str(getattr(cfg, "mamba_ssm_cache_dtype", None) or "float32"), "fp32")}
    if mt in ("granitemoehybrid", "falcon_h1"):
        return {"kind": "mamba2", "n_layers": n_ssm, "n_heads": g("mamba_n_heads"), "head_dim": g("mamba_d_head"),
                "d_state": g("mamba_d_state"), "d_conv": g("mamba_d_conv"), "n_groups": g("mamba_n_groups")}
    raise InputError(f"{where}: {mt} has recurrent layers the calculator cannot size")


def _is_routed_expert(name: str) -> bool:
    return ".experts." in name


def _not_converted(name: str, patterns) -> bool:
    return any(fnmatch.fnmatch(name, f"{p}.*") or fnmatch.fnmatch(name, f"*.{p}.*") for p in patterns)


def weight_groups(params, native: str, quant: dict) -> tuple[WeightGroup, ...]:
    """Parameters by storage precision. Unquantized: everything at the native dtype. A quantized checkpoint
    stores only its matrices quantized — ``mxfp4`` (gpt-oss) the routed-expert matrices, ``fp8``/``awq``/
    ``gptq`` every linear matrix — and keeps embeddings, the output head, norms, biases, routers and
    convolution/state parameters in the native dtype (bf16), minus ``modules_to_not_convert``."""
    method = (quant or {}).get("quant_method")
    if not method:
        return (WeightGroup("all parameters", float(sum(_numel(s) for _, s in params)), native),)
    qdtype = {"mxfp4": "mxfp4", "fp8": "fp8"}.get(method) or ("int8" if quant.get("bits") == 8 else "int4")
    skip = quant.get("modules_to_not_convert") or []
    if not isinstance(skip, list) or not all(isinstance(p, str) for p in skip):
        raise InputError("quantization_config.modules_to_not_convert: expected a list of module names")
    quantized = kept = 0
    for name, shape in params:
        leaf = name.rsplit(".", 2)[-2] if name.count(".") >= 1 else name
        matrix = (_is_routed_expert(name) and not name.endswith("bias")) if method == "mxfp4" else (
            (len(shape) == 2 and name.endswith(".weight") and "embed" not in name and "lm_head" not in name
             and leaf not in ("gate", "router", "shared_expert_gate"))
            or (_is_routed_expert(name) and not name.endswith("bias")))
        if matrix and not _not_converted(name, skip):
            quantized += _numel(shape)
        else:
            kept += _numel(shape)
    groups = [WeightGroup(f"{method} matrices", float(quantized), qdtype)]
    if kept:
        groups.append(WeightGroup(f"embeddings, norms, routers and other unquantized ({native})", float(kept),
                                  native))
    return tuple(groups)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def profile_from_config(d: dict, where: str = "config.json", model_id: str = "config") -> ModelProfile:
    """Build a profile from a config.json's fields (validated like the bundled ones)."""
    if not isinstance(d, dict):
        raise InputError(f"{where}: must hold a JSON object")
    _model_type(d, where)
    return _profile(json.dumps(d, sort_keys=True), where, model_id)


@lru_cache(maxsize=32)
def _profile(text: str, where: str, model_id: str) -> ModelProfile:
    """Built once per distinct file content: building the model on the meta device takes up to a second."""
    d = json.loads(text)
    mt = _model_type(d, where)
    cfg = build_config(d, where)
    kinds = layer_kinds(cfg, where)
    n_heads = _get(cfg, "num_attention_heads", where)
    n_kv = _get(cfg, "num_key_value_heads", where, default=n_heads)
    hidden = _get(cfg, "hidden_size", where)
    head_dim = getattr(cfg, "head_dim", None) or hidden // max(n_heads, 1)
    n_ssm = sum(k in ("ssm", "both") for k in kinds)
    prof = {"id": model_id, "name": f"{model_id} ({mt})", "n_layers": len(kinds), "n_heads": n_heads,
            "n_kv_heads": n_kv, "head_dim": head_dim, "hidden_size": hidden,
            "n_full_layers": sum(k in ("full", "both") for k in kinds),
            "max_context": _get(cfg, "max_position_embeddings", where), "source": f"{where} (model_type {mt})"}
    repo = d.get("_name_or_path")
    if isinstance(repo, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", repo) and not repo.startswith("."):
        prof["hf_repo"] = repo          # the repository the config was saved from: what `vllm serve` loads
    if "window" in kinds:
        prof["n_window_layers"] = kinds.count("window")
        prof["window"] = _get(cfg, "sliding_window", where)
    if getattr(cfg, "kv_lora_rank", None):
        prof.update(kv_lora_rank=_get(cfg, "kv_lora_rank", where),
                    qk_rope_head_dim=_get(cfg, "qk_rope_head_dim", where),
                    n_kv_heads=n_heads, head_dim=_get(cfg, "qk_nope_head_dim", where),
                    v_head_dim=_get(cfg, "v_head_dim", where))      # V width of MLA prefill (roofline)
    if n_ssm:
        prof["ssm"] = ssm_fields(cfg, where, n_ssm)

    # the whole model a server loads (a multimodal checkpoint's vision tower too); a text token does not run the
    # vision tower, so it is left out of the active parameters
    params = count_parameters(build_config(d, where, text=False), where)
    total = sum(_numel(s) for _, s in params)
    routed = [(n, s) for n, s in params if _is_routed_expert(n)]
    active = total - sum(_numel(s) for n, s in params if _MULTIMODAL.search(n))
    if routed:
        n_exp = routed[0][1][0]
        k = _get(cfg, "num_experts_per_tok", where, default=n_exp)
        active -= sum(_numel(s) for _, s in routed) * (1 - min(k, n_exp) / n_exp)
    prof["params_total"], prof["params_active"] = float(total), float(active)

    quant = d.get("quantization_config") or (d.get("text_config") or {}).get("quantization_config") or {}
    dt = getattr(cfg, "dtype", None) or d.get("torch_dtype")
    native = _DTYPES.get(str(dt).replace("torch.", ""), "bf16")
    groups = weight_groups(params, native, quant)
    prof["native_dtype"] = {"mxfp4": "mxfp4", "fp8": "fp8"}.get(quant.get("quant_method"), groups[0].dtype)
    prof["weight_groups"] = [{"name": g.name, "params": g.params, "dtype": g.dtype} for g in groups]
    return profile_from_dict(prof, where)


def profile_from_config_path(path) -> ModelProfile:
    d, where = load_config(path)
    p = Path(path).resolve()
    model_id = p.name if p.is_dir() else (p.parent.name if p.stem == "config" else p.stem)
    return profile_from_config(d, where, model_id=model_id)
