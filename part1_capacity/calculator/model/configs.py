"""A Hugging Face ``config.json`` → ``ModelProfile``, read by structure: any family ``transformers`` knows.

Two layers:

- ``profile_from_fields(config, defaults)`` — pure Python (no transformers, torch or numpy; it runs in the
  browser too). ``config`` is the file's JSON object; ``defaults`` a dict of the same shape with what the model
  type's config class supplies for fields the file leaves out (a multimodal checkpoint's language model under
  ``text_config``). It reads the cache structure from what the fields say, never from the family's name: K/V
  heads and head dims, every way a config marks its layers (``layer_types``, ``layers_block_type``,
  ``hybrid_override_pattern``, ``attn_type_list``, ``no_rope_layers`` with ``attention_chunk_size``,
  ``sliding_window_pattern``, ``full_attention_interval``, a ``sliding_window`` on every layer), MLA latents and
  DeepSeek-V3.2's indexer keys, recurrent state (Mamba-1, Mamba-2, gated DeltaNet, lightning attention, LFM2's
  short convolutions, Kimi Delta Attention), layers that reuse another layer's K/V (Gemma 3n), experts. A config whose cache holds something not modelled is refused
  with that structure named.
- ``hf_config.defaults_for(config)`` — ``transformers`` builds the config class for the file, so the defaults and
  derived fields are exactly those an engine loading the model sees; ``profile_from_config`` joins the two.

Parameters: ``param_count.count_model_parameters(config, defaults)`` counts the model from its fields (pure Python;
held equal to ``transformers``' meta-device build for every published config in the tests). A config of a type it
counts (``COUNTED``) plans in pure Python with the class defaults stored in data/config_defaults.json; another type
plans with ``transformers``' defaults and its exact meta-device list (``hf_config.meta_parameters``), a checkpoint
with its headers. The field reading itself is ``config_fields``.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import json
import re
from functools import lru_cache
from pathlib import Path

from part1_capacity.calculator.base import validate
from part1_capacity.calculator.model.config_fields import (ALIASES, BOOLEAN_FIELDS, NOT_MODELLED, SHAPE_FIELDS,
                                                           Fields, attention_free, boolean, experts, head_dim_of,
                                                           compressed_layers, kv_heads, kv_widths_by_type,
                                                           layer_kinds, named_kinds, sparse_index, ssm_fields)
from part1_capacity.calculator.base.dtypes import config_dtype
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.model.param_count import (MULTIMODAL, TOWERS, count_model_parameters, count_parameters,
                                                   counts_in_pure_python, is_routed_expert, mlp_shapes, numel)
from part1_capacity.calculator.model.profiles import ModelProfile, profile_from_dict
from part1_capacity.calculator.model.weights import WeightGroup

# model_type → (what decides its cache, a published config.json the tests read: tests/data/configs/README.md).
# Not a list of what is supported — any family is read by structure — but the published files the tests hold.
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
    "mixtral": ("GQA, MoE", "mistralai/Mixtral-8x7B-v0.1"),
    "qwen3_moe": ("GQA, MoE", "Qwen/Qwen3-235B-A22B"),
    "qwen3_vl_moe": ("GQA, MoE (multimodal: text_config)", "Qwen/Qwen3-VL-30B-A3B-Instruct"),
    "qwen3_5_moe": ("Gated DeltaNet hybrid, MoE (multimodal: text_config)", "Qwen/Qwen3.5-35B-A3B"),
    "llama4": ("chunked attention, 3 chunked : 1 global, MoE (multimodal: text_config)",
               "meta-llama/Llama-4-Scout-17B-16E-Instruct"),
    "kimi_k2": ("MLA, MoE, FP8 (DeepseekV3ForCausalLM)", "moonshotai/Kimi-K2-Instruct"),
    "deepseek_v32": ("MLA with indexer keys, MoE, FP8", "deepseek-ai/DeepSeek-V3.2"),
    "minimax_m1": ("lightning-attention hybrid, MoE (its own code)", "MiniMaxAI/MiniMax-M1"),
    "qwen2_moe": ("GQA, MoE", "Qwen/Qwen2-57B-A14B"),
    "phi3": ("GQA (a sliding window longer than the context: full attention)", "microsoft/Phi-4-mini-instruct"),
    "olmo2": ("MHA", "allenai/OLMo-2-1124-13B"),
    "hunyuan": ("GQA, MoE (HunYuanMoEV1ForCausalLM)", "tencent/Hunyuan-A13B-Instruct"),
    "glm4_moe": ("GQA, MoE", "zai-org/GLM-4.5-Air"),
    "mamba": ("Mamba-1 on every layer: no attention, one state per sequence", "state-spaces/mamba-2.8b-hf"),
    "exaone4": ("GQA", "LGAI-EXAONE/EXAONE-4.0-1.2B"),
    "lfm2": ("gated short-convolution hybrid (a convolution window per sequence)", "LiquidAI/LFM2-1.2B"),
    "kimi_linear": ("Kimi Delta Attention hybrid, MLA, MoE", "moonshotai/Kimi-Linear-48B-A3B-Instruct"),
    "nemotron-nas": ("GQA on the blocks that keep attention, an FFN width per block (its own code)",
                     "nvidia/Llama-3_3-Nemotron-Super-49B-v1"),
    "deepseek_v4": ("compressed sparse attention: a 128-token window on every layer, K/V compressed 4× with the "
                    "indexer's keys or 128×, MoE, FP8", "deepseek-ai/DeepSeek-V4-Flash"),
    "minimax_m3": ("GQA with the lightning indexer's keys on its block-sparse layers, MoE (its own code)",
                   "MiniMaxAI/MiniMax-M3"),
    "gemma4": ("sliding window, 5 local : 1 global, K/V heads and head dims per layer type, MoE beside a dense MLP "
               "(multimodal: text_config)", "google/gemma-4-26B-A4B"),
    "mimo_v2_flash": ("sliding window on 39 of 48 layers, K/V heads per layer type, values narrower than keys, MoE, "
                      "FP8", "XiaomiMiMo/MiMo-V2-Flash"),
}

# The defaults of a file whose repository ships its own config class (a type transformers lacks): what every such
# class inherits from transformers' PretrainedConfig and a file may leave unsaid — the output head tied to the
# token embedding (Phi-3-small states nothing: 7.39B tied, 7.80B untied)
OWN_CODE_DEFAULTS = {"tie_word_embeddings": True}

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
_PER_LAYER = ("intermediate_size", "moe_intermediate_size")   # may be one value per layer (Gemma 3n, Hunyuan)
_LISTS = ("layer_types", "layers_block_type", "mlp_only_layers", "attn_layer_indices")
QUANT_METHODS = ("fp8", "fbgemm_fp8", "mxfp4", "awq", "gptq", "compressed-tensors", "modelopt")


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
        from part1_capacity.calculator.base.dtypes import closest
        from part1_capacity.calculator.model.profiles import bundled_models

        hint = closest(p.name.lower(), bundled_models())
        raise InputError(f"model: no config file at '{path}' and no bundled model of that name{hint}; nothing is "
                         f"downloaded: pass a local config.json, a model folder, a .gguf file or a bundled id "
                         f"(`capacity list models`)")
    d = validate.load_json_object(p, "model", max_bytes=4 * validate.MIB, infinity=True)
    return d, p.name if p.parent.name in ("", ".") else f"{p.parent.name}/{p.name}"


def check_fields(d: dict, where: str) -> None:
    """Refuse values that would make ``transformers`` (or our own layer walk) crash, hang or blow up: numbers
    out of range, wrong types, zero periods. Fields left out are fine: their defaults come from ``transformers``."""
    for key, (lo, hi) in _LIMITS.items():
        v = d.get(key)
        if v is None:
            continue
        if key == "sliding_window" and v == 0 and d.get("use_sliding_window") is False:
            continue                      # Qwen2-MoE's class writes 0 when the window is off
        if key == "moe_layer_freq" and isinstance(v, list):
            # one 0/1 per layer, 1 where the layer routes (MiMo-V2-Flash), beside DeepSeek's every-n-th integer
            if not 0 < len(v) <= 512 or any(x not in (0, 1) or isinstance(x, bool) for x in v):
                raise InputError(f"{where}: field 'moe_layer_freq' must be one number or one 0/1 per layer, got "
                                 f"{validate.show(v)}")
            continue
        if key == "sliding_window_pattern" and isinstance(v, str):
            # EXAONE 4 / K-EXAONE write the period as letters, "LLLG": L a local layer, G a global one
            if not 0 < len(v) <= 512 or set(v) - set("LG"):
                raise InputError(f"{where}: field 'sliding_window_pattern' must be a number or a string of L "
                                 f"(local) and G (global), got {validate.show(v)}")
            continue
        if key in _PER_LAYER and isinstance(v, list):     # Gemma 3n: an MLP width per layer (MatFormer)
            if not 0 < len(v) <= 512:
                raise InputError(f"{where}: field '{key}' must be one number or one per layer, got {len(v)} values")
            for x in v:
                validate.number(x, f"{where}: field '{key}'", lo=lo, hi=hi, integer=True)
            continue
        validate.number(v, f"{where}: field '{key}'", lo=lo, hi=hi, integer=True)
    for key in _LISTS:
        v = d.get(key)
        if v is not None and (not isinstance(v, list) or len(v) > 512
                              or not all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in v)):
            raise InputError(f"{where}: field '{key}' must be a list of at most 512 names or indices, "
                             f"got {validate.show(v)}")
    for key in BOOLEAN_FIELDS:
        if d.get(key) is not None:
            boolean(d[key], f"{where}: field '{key}'")
    for key in ("dtype", "torch_dtype"):
        if d.get(key) is not None:
            config_dtype(d[key], f"{where}: field '{key}'")
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
    if not isinstance(mt, str) or not mt:
        raise InputError(f"{where}: model_type {validate.show(mt) if mt is not None else '(missing)'}: a config.json "
                         f"names its model_type (a Hugging Face config), e.g. 'llama'")
    return mt



def check_config(config: dict, where: str) -> str:
    """The file's own checks, before any defaults: a JSON object with a model_type, numbers in range, and the
    fields that define the model's shape stated by the file itself. Returns the model_type."""
    if not isinstance(config, dict):
        raise InputError(f"{where}: must hold a JSON object")
    mt = _model_type(config, where)
    check_fields(config, where)
    if isinstance(config.get("text_config"), dict):
        check_fields(config["text_config"], f"{where}: text_config")
    f = Fields(config, None, where)
    for key, what in NOT_MODELLED.items():
        if f.raw(key) not in (None, False, [], 0):
            raise InputError(f"{f.where}: {what} ('{key}'): not modelled")
    types = f.file.get("layer_types")
    if isinstance(types, list):
        named_kinds(f, types, len(types))          # a layer type not modelled is named before anything else
    free = attention_free(f)               # Mamba: no attention, so no heads to state
    missing = [k for k in SHAPE_FIELDS if not f.stated(k) and not (free and k == "num_attention_heads")]
    if missing:
        raise InputError(f"{f.where}: missing field '{missing[0]}' (with {', '.join(SHAPE_FIELDS)}, it defines "
                         "the model's shape: a config must state it, defaults would invent a model)")
    return mt


def structure_fields(config: dict, defaults: dict | None = None, where: str = "config.json",
                     model_id: str = "config") -> dict:
    """The profile's cache fields (the bundled table's format, without parameters or dtypes), pure Python."""
    mt = check_config(config, where)
    f = Fields(config, defaults, where)
    kinds = layer_kinds(f)
    hidden = f.int("hidden_size", lo=1, hi=65536)
    if attention_free(f):
        # no attention layer: no K/V heads (one nominal head, never cached: n_full_layers is 0), and no position
        # limit (no position embeddings; the longest context the field limits allow)
        n_heads = n_kv = head_dim = 1
    else:
        n_heads = f.int("num_attention_heads", lo=1, hi=1024)
        n_kv = kv_heads(f, n_heads)
        head_dim = head_dim_of(f, n_heads)
    shared = f.int("num_kv_shared_layers", 0, hi=512)         # Gemma 3n: the last layers reuse earlier K/V
    if shared >= len(kinds):
        raise InputError(f"{f.where}: num_kv_shared_layers ({shared}) must be fewer than the layers ({len(kinds)})")
    own = kinds[:len(kinds) - shared]                         # layers that keep their own K/V
    n_lin = sum(k in ("linear", "both") for k in kinds)
    if not attention_free(f) and f.raw("max_position_embeddings") is None:
        # vLLM assumes 2,048 then; a plan would silently cap every context there
        raise InputError(f"{f.where}: positions with no stated limit (no {', '.join(ALIASES['max_position_embeddings'])}"
                         "; ALiBi's, as BLOOM's, have none): a context limit is not modelled without one; allowed: a "
                         "file that states max_position_embeddings")
    prof = {"id": model_id, "name": f"{model_id} ({mt})", "n_layers": len(kinds), "n_heads": n_heads,
            "n_kv_heads": n_kv, "head_dim": head_dim, "hidden_size": hidden,
            "n_full_layers": sum(k in ("full", "both") for k in own),
            "max_context": f.int("max_position_embeddings", _LIMITS["max_position_embeddings"][1]
                                 if attention_free(f) else None, lo=1), "source": f"{where} (model_type {mt})"}
    if shared:
        prof["n_kv_shared_layers"] = shared
    repo = config.get("_name_or_path")
    if isinstance(repo, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", repo) and not repo.startswith("."):
        prof["hf_repo"] = repo          # the repository the config was saved from: what `vllm serve` loads
    if not attention_free(f) and not f.raw("kv_lora_rank"):
        full, window = kv_widths_by_type(f, n_heads, n_kv, head_dim)
        has_full = any(k in ("full", "both") for k in own)
        if not has_full:
            full = window                    # no full layer: the model's heads are the window layers'
        elif "window" not in own:
            window = full
        prof.update(n_kv_heads=full[0], head_dim=full[1])
        if full[2] != full[1]:
            prof["head_dim_v"] = full[2]
        if window != full:
            if "chunked" in own:
                raise InputError(f"{f.where}: chunked layers with K/V widths of their own: not modelled")
            prof.update(window_n_kv_heads=window[0], window_head_dim=window[1], window_head_dim_v=window[2])
    if "window" in own or "chunked" in own:
        if "window" in own and "chunked" in own:
            raise InputError(f"{f.where}: sliding-window and chunked layers in one model: not modelled")
        prof["n_window_layers"] = own.count("window") + own.count("chunked")
        if "chunked" in own:
            prof["window"] = f.int("attention_chunk_size", lo=1)
            prof["window_kind"] = "chunked"
        elif f.raw("sliding_window_size") is not None:
            prof["window"] = f.int("sliding_window_size", lo=1)    # MiMo-V2-Flash: the window vLLM reads
        else:
            prof["window"] = f.int("sliding_window", lo=1)
    if f.raw("kv_lora_rank"):
        prof.update(kv_lora_rank=f.int("kv_lora_rank", lo=1), qk_rope_head_dim=f.int("qk_rope_head_dim", lo=1),
                    n_kv_heads=n_heads, head_dim=f.int("qk_nope_head_dim", lo=1), v_head_dim=f.int("v_head_dim", lo=1))
        if f.raw("index_head_dim") and (f.raw("index_topk") or "indexed_attention" in (f.raw("layer_types") or [])):
            prof["index_head_dim"] = f.int("index_head_dim", lo=1)   # DeepSeek-V3.2: the indexer's key per token
    index = sparse_index(f, len(kinds))
    if index is not None:                 # MiniMax-M3: the lightning indexer's key per token on its sparse layers
        if f.raw("kv_lora_rank") or n_lin or prof.get("n_window_layers") or index[0] > prof["n_full_layers"]:
            raise InputError(f"{f.where}: block-sparse indexer keys beside MLA, window, recurrent or shared-K/V "
                             "layers: not modelled")
        prof["n_index_layers"], prof["index_head_dim"] = index
    compressed = compressed_layers(f, len(kinds))
    if compressed is not None:            # DeepSeek-V4: a window on every layer, compressed entries beside
        if f.raw("kv_lora_rank") or n_lin or shared or index is not None or n_kv != 1 or set(own) - {"full", "window"}:
            raise InputError(f"{f.where}: compressed layers ('compress_ratios') beside MLA, recurrent, shared-K/V, "
                             "block-sparse or per-type layers, or more than one K/V head: not modelled")
        prof.update(n_full_layers=0, n_window_layers=len(kinds), window=f.int("sliding_window", lo=1),
                    compressed=[list(c) for c in compressed])
    if n_lin:
        prof["ssm"] = ssm_fields(f, n_lin)
    e, k = experts(f)
    if e:
        prof["_experts"] = (e, k)
    return prof


def profile_from_fields(config: dict, defaults: dict | None = None, where: str = "config.json",
                        model_id: str = "config", parameters=None) -> ModelProfile:
    """A config (the file's JSON object) and the defaults of its model type → the calculator's profile.

    Pure Python. ``parameters``: a list of (name, shape) of the whole model (``hf_config.meta_parameters``, or a
    checkpoint's headers); None counts them from the fields (``count_parameters``: the text model, no vision
    tower)."""
    prof = structure_fields(config, defaults, where, model_id)
    prof.pop("_experts", None)
    prof.update(mlp_shapes(config, defaults, where))      # what the engines' start-up rules read beyond the cache
    if parameters is None:
        parameters = count_model_parameters(config, defaults, where)
    total = sum(numel(s) for _, s in parameters)
    routed = [(n, s) for n, s in parameters if is_routed_expert(n)]
    multimodal = sum(numel(s) for n, s in parameters if MULTIMODAL.search(n))
    active = total - multimodal
    f = Fields(config, defaults, where)
    routed_params = sum(numel(s) for _, s in routed)
    if routed:
        e, k = experts(f)
        if e:
            active -= routed_params * (1 - k / e)
    prof["params_total"], prof["params_active"] = float(total), float(active)
    if routed_params:
        prof["params_routed"] = float(routed_params)
    if multimodal:
        prof["params_multimodal"] = float(multimodal)

    quant = config.get("quantization_config") or (config.get("text_config") or {}).get("quantization_config") or {}
    # the weights' dtype as the file names it (transformers 5 writes "dtype", older files "torch_dtype"); a file
    # that names none is sized in bf16, the precision checkpoints are published in
    native = f.dtype("dtype", "torch_dtype", default="bf16")
    if quant and config.get("expert_dtype") is not None and "expert_dtype" not in quant:
        # DeepSeek-V4 states its experts' precision beside the quantization_config (transformers' DeepseekV4Config
        # moves it inside, as V4.1 publishes it)
        quant = {**quant, "expert_dtype": config["expert_dtype"]}
    groups = weight_groups(parameters, native, quant, f"{where}: quantization_config")
    prof["native_dtype"] = groups[0].dtype
    prof["model_dtype"] = native
    prof["weight_groups"] = [{"name": g.name, "params": g.params, "dtype": g.dtype} for g in groups]
    if isinstance(config.get("vision_config"), dict):
        # kept as the file states it for the engines' start-up rules (vLLM profiles the vision encoder inside its
        # budget: engines/vllm_memory.py vision_tower); a profile key starting with "_" lands in ``extra``
        prof["_vision_config"] = dict(config["vision_config"])
        if config.get("mm_tokens_per_image") is not None:
            prof["_mm_tokens_per_image"] = config["mm_tokens_per_image"]
    return profile_from_dict(prof, where)


# --- what a profile's structure is, in words (the calculator page lists families by it) ------------------------
def structure_summary(p: ModelProfile) -> str:
    """What decides one model's cache, from its profile: the attention structure, windows or chunks, recurrent
    state, experts, shared K/V, indexer keys."""
    from part0_foundations.l03_kv_cache.laws import STRUCTURES

    parts = [STRUCTURES.get(p.structure, p.structure.replace("_", " "))]
    if p.ssm is not None:
        parts[0] = {"mamba1": "Mamba-1", "mamba2": "Mamba-2", "gated_deltanet": "gated DeltaNet",
                    "lightning": "lightning attention", "short_conv": "short-convolution",
                    "kda": "Kimi Delta Attention"}[p.ssm.kind] + f" hybrid ({p.ssm.n_layers} of {p.n_layers} "
        parts[0] += "layers recurrent)"
    if p.n_window_layers:
        kind = "chunked (chunk" if p.window_kind == "chunked" else "sliding-window (window"
        parts.append(f"{p.n_window_layers} of {p.n_layers} layers {kind} {p.window:,})")
    if p.compressed:                    # DeepSeek-V4: one K=V head, compressed entries beside the windows
        parts.append(f"one K=V head for {p.n_heads}")
        parts += [f"K/V compressed {ratio}× on {layers} layers" + (" with indexer keys" if index else "")
                  for ratio, layers, index in p.compressed]
    elif p.is_mla:
        parts[-1 if p.ssm is None and not p.n_window_layers else len(parts)] = (
            "MLA latent" + (" + indexer keys" if p.index_head_dim else ""))
    elif p.index_head_dim:
        parts.append(f"{p.n_kv_heads} K/V heads for {p.n_heads} + indexer keys on {p.index_layers} layers")
    elif p.kv_widths_differ:
        kv, k, v = p.window_kv
        def width(heads, key, value):
            return f"{heads} × {key}" + (f"/{value}" if value != key else "")
        parts.append(f"K/V per layer type: full {width(p.n_kv_heads, p.head_dim, p.kv_v_dim)}"
                     + (f", window {width(kv, k, v)}" if p.n_window_layers else ""))
    elif p.n_kv_heads < p.n_heads:
        parts.append(f"{p.n_kv_heads} K/V heads for {p.n_heads}")
    if p.n_kv_shared_layers:
        parts.append(f"{p.n_kv_shared_layers} layers reuse earlier K/V")
    if p.params_routed:                 # routed experts (a vision tower alone also makes active < total)
        parts.append("MoE")
    return ", ".join(dict.fromkeys(parts))


def families_by_structure(profiles) -> dict[str, list[str]]:
    """``{structure id: [model ids]}`` for the given profiles, in the order given."""
    out: dict[str, list[str]] = {}
    for p in profiles:
        out.setdefault(p.structure, []).append(p.id)
    return out


def _not_converted(name: str, patterns) -> bool:
    """Whether the parameter ``name`` belongs to a module a quantization config leaves unconverted: a module name
    or its suffix (``lm_head``, ``model.layers.0.mlp``; ``*`` wildcards as ModelOpt's ``exclude_modules`` and
    transformers' ``modules_to_not_convert`` use them), or ``re:PATTERN`` matched from the start of the module's
    name as vLLM matches compressed-tensors' ``ignore`` (``compressed_tensors/utils.py``
    ``_is_equal_or_regex_match``: ``re.match``)."""
    module = name.rsplit(".", 1)[0]
    for p in patterns:
        if p.startswith("re:"):
            if re.match(p[3:], module):
                return True
        elif fnmatch.fnmatch(name, f"{p}.*") or fnmatch.fnmatch(name, f"*.{p}.*") or fnmatch.fnmatch(module, p):
            return True
    return False


def _gptq_skips(quant: dict, where: str) -> list:
    """GPTQModel's per-module rules (``dynamic``): a ``-:REGEX`` key leaves the matching modules unquantized
    (vllm/model_executor/layers/quantization/utils/gptq_utils.py ``get_dynamic_override``: negative match
    → skip); a ``+:REGEX`` (or bare) key that changes ``bits`` or ``group_size`` quantizes those modules another
    way — not modelled, refused by name."""
    dyn = quant.get("dynamic") or {}
    if not isinstance(dyn, dict):
        raise InputError(f"{where}.dynamic: expected an object of per-module rules")
    skips = []
    for key, rule in dyn.items():
        if str(key).startswith("-:"):
            skips.append("re:" + str(key)[2:])
        elif isinstance(rule, dict) and any(rule.get(k, quant.get(k)) != quant.get(k)
                                            for k in ("bits", "group_size")):
            raise InputError(f"{where}.dynamic: {validate.show(key)} quantizes some modules with other bits or "
                             "groups (per-layer widths are not modelled)")
    return skips


def quant_scheme(quant: dict | None, where: str = "quantization_config") -> dict | None:
    """What a ``quantization_config`` stores, in one form: ``{"method", "dtype", "group", "zeros", "skip"}`` —
    the matrices' storage type, the input weights sharing one scale (0: no per-group scale worth counting),
    whether a zero point is stored per group, the modules left unconverted. None: not quantized.

    - ``awq`` / ``gptq`` (AutoAWQ's and AutoGPTQ's checkpoints, read by transformers' AwqConfig / GPTQConfig):
      ``bits``-wide integers; per ``group_size`` input weights of each output column one fp16 scale (``scales``)
      and one ``bits``-wide zero point packed in int32 (``qzeros``: GPTQ always, AWQ when ``zero_point``);
      ``group_size`` −1 is one group per column. GPTQ's ``g_idx`` (one int32 per input row) is not counted.
    - ``compressed-tensors`` (llm-compressor's checkpoints): the ``weights`` of its config group — ``num_bits``
      and ``type`` (8-bit float: fp8; integers: int8 / int4), ``strategy`` "group" with ``group_size`` (one scale
      in the model dtype per group, a zero point when not ``symmetric``); other strategies keep one scale per row
      or tensor (not counted); ``ignore`` lists the modules left unconverted (``re:`` patterns are not read).
    - ``fp8`` (block scales of fp32 per 128 × 128, not counted), ``fbgemm_fp8`` (fp8 with a scale per row, not
      counted), ``mxfp4`` (its 8-bit scale per 32 values is inside the dtype's 4.25 bits).
    - ``modelopt`` (NVIDIA ModelOpt's checkpoints, read by vLLM's ModelOptFp8Config / ModelOptNvFp4Config):
      ``quant_algo`` FP8 (fp8 matrices, per-tensor scales not counted) or NVFP4 / W4A16_NVFP4 (4-bit float
      matrices and one fp8 E4M3 scale per ``group_size`` (16) weights of a row; the fp32 per-tensor scales, a few
      per matrix, not counted); ``ignore`` (or the older ``exclude_modules``) lists the modules left unconverted,
      as globs. Another algorithm (MIXED_PRECISION: a scheme per layer) is refused by name.
    - compressed-tensors' 4-bit floats: groups of 16 are NVFP4 (as above), groups of 32 MXFP4 (an 8-bit exponent
      scale per 32, inside the dtype's 4.25 bits).

    A scheme's ``scale_dtype`` is the storage type of its group scales (absent: fp16 for AWQ / GPTQ, the model
    dtype for compressed-tensors' integers)."""
    method = (quant or {}).get("quant_method")
    if not method:
        return None
    skip = quant.get("modules_to_not_convert") or []
    if method == "fp8" and quant.get("ignored_layers"):        # vLLM's Fp8Config reads this name too
        skip = list(skip) + list(quant["ignored_layers"]) if isinstance(quant["ignored_layers"], list) else None
    if method == "modelopt":
        algo = str(quant.get("quant_algo", "")).upper()      # ModelOpt may write it in lower case (vLLM upper-cases)
        if algo == "FP8":
            out = {"method": method, "dtype": "fp8", "group": 0, "zeros": False}
        elif algo in ("NVFP4", "W4A16_NVFP4"):
            group = validate.number(quant.get("group_size", 16), f"{where}.group_size", lo=1, hi=2 ** 20,
                                    integer=True)
            out = {"method": f"{method} {algo}", "dtype": "fp4", "group": group, "zeros": False,
                   "scale_dtype": "fp8"}
        else:
            raise InputError(f"{where}.quant_algo: ModelOpt {validate.show(quant.get('quant_algo'))} is not a "
                             "storage type the calculator sizes (a scheme per layer is not modelled); allowed: FP8, "
                             "NVFP4, W4A16_NVFP4")
        # config.json names them "ignore", the older hf_quant_config.json "exclude_modules" (vLLM reads both)
        skip = quant.get("ignore") or quant.get("exclude_modules") or []
    elif method in ("fp8", "fbgemm_fp8", "mxfp4"):
        out = {"method": method, "dtype": "mxfp4" if method == "mxfp4" else "fp8", "group": 0, "zeros": False}
    elif method in ("awq", "gptq"):
        bits = quant.get("bits", 4)
        group = validate.number(quant.get("group_size", 128), f"{where}.group_size", lo=-1, hi=2 ** 20,
                                integer=True)
        if group == 0:           # AwqConfig / GPTQConfig: -1 (one group per row) or a group of that many weights
            raise InputError(f"{where}.group_size: 0 is no group; allowed: -1 (one group per row) or a positive "
                             f"integer")
        zeros = quant.get("zero_point")
        zeros = True if zeros is None else boolean(zeros, f"{where}.zero_point")
        out = {"method": method, "dtype": "int8" if bits == 8 else "int4", "group": group,
               "zeros": method == "gptq" or zeros}
        if method == "gptq" and isinstance(skip, list):
            skip = list(skip) + _gptq_skips(quant, where)
    else:                                                   # compressed-tensors (check_fields allows no other)
        groups = quant.get("config_groups")
        if not isinstance(groups, dict) or not groups or not all(isinstance(g, dict) for g in groups.values()):
            raise InputError(f"{where}.config_groups: expected an object of quantization schemes")
        schemes = {json.dumps(g.get("weights"), sort_keys=True) for g in groups.values()}
        if len(schemes) != 1:
            raise InputError(f"{where}.config_groups: {len(schemes)} different weight schemes in one checkpoint "
                             "(some layers quantized differently from others): not modelled")
        w = next(iter(groups.values())).get("weights")
        if not isinstance(w, dict):
            raise InputError(f"{where}.config_groups: a scheme without 'weights': activations alone quantized "
                             "are not modelled")
        bits, kind = w.get("num_bits"), w.get("type", "int")
        dtype = {(8, "float"): "fp8", (8, "int"): "int8", (4, "int"): "int4", (4, "float"): "fp4"}.get((bits, kind))
        if dtype is None:
            raise InputError(f"{where}.config_groups.weights: {validate.show(bits)}-bit {validate.show(kind)} "
                             "weights are not a storage type the calculator sizes; allowed: 8-bit float, 8-bit "
                             "int, 4-bit int, 4-bit float (NVFP4 in groups of 16, MXFP4 in groups of 32)")
        grouped = w.get("strategy") in ("group", "tensor_group")       # tensor_group: NVFP4's, with a global scale
        group = validate.number(w.get("group_size") if grouped else 0, f"{where}.config_groups.weights.group_size",
                                lo=1 if grouped else 0, hi=2 ** 20, integer=True)
        symmetric = w.get("symmetric")
        symmetric = True if symmetric is None else boolean(symmetric, f"{where}.config_groups.weights.symmetric")
        out = {"method": method, "dtype": dtype, "group": group, "zeros": not symmetric}
        if dtype == "fp4":
            if group == 16:                         # NVFP4: an fp8 E4M3 scale per 16 (nvfp4-pack-quantized)
                out.update(method=f"{method} NVFP4", scale_dtype="fp8", zeros=False)
            elif group == 32:                       # MXFP4: its E8M0 scale per 32 is inside mxfp4's 4.25 bits
                out.update(method=f"{method} MXFP4", dtype="mxfp4", group=0, zeros=False)
            else:
                raise InputError(f"{where}.config_groups.weights.group_size {validate.show(group)}: 4-bit float "
                                 "weights come in groups of 16 (NVFP4) or 32 (MXFP4); allowed: 16, 32")
        skip = quant.get("ignore") or []
    if not isinstance(skip, list) or not all(isinstance(p, str) for p in skip):
        raise InputError(f"{where}: the modules left unconverted (modules_to_not_convert, ignore): expected a "
                         "list of module names")
    bad = next((p for p in skip if p.startswith("re:") and not _compiles(p[3:])), None)
    if bad is not None:
        raise InputError(f"{where}: the unconverted-module pattern {validate.show(bad)} is not a regular expression "
                         "the calculator runs (at most 500 characters, no repeated group that itself repeats)")
    out["skip"] = list(skip)
    return out


# A repeated group that itself repeats (``(a+)+``, ``(.*)*``) can take exponential time to fail on a module name:
# a config file is the user's input, so such patterns are refused rather than run.
_NESTED_REPEAT = re.compile(r"\([^()]*[*+}][^()]*\)\s*[*+{]")


def _compiles(pattern: str) -> bool:
    if len(pattern) > 500 or _NESTED_REPEAT.search(pattern):
        return False
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def _v4_kept(name: str, leaf: str) -> bool:
    """DeepSeek-V4's matrices its checkpoint keeps in bf16 beside fp8 ones (its inference code, model.py: the
    Compressor's wkv and wgate "stored in bf16", the Indexer's weights_proj built in bfloat16)."""
    return leaf == "weights_proj" or (".compressor." in name and leaf in ("kv_proj", "gate_proj"))


def _k3_kept(leaf: str) -> bool:
    """Kimi-K3's latent projections around its routed experts and its attention-residual projections: matrices its
    MXFP4 checkpoint keeps in bf16 (moonshotai/Kimi-K3's safetensors: routed_expert_down_proj / _up_proj and every
    *_res_proj stored BF16, not packed) though the ``ignore`` list does not name them."""
    return leaf in ("routed_expert_down_proj", "routed_expert_up_proj") or leaf.endswith("_res_proj")


def weight_groups(params, native: str, quant: dict, where: str = "quantization_config") -> tuple[WeightGroup, ...]:
    """Parameters by storage precision. Unquantized: everything at the native dtype. A quantized checkpoint
    stores only its matrices quantized — ``mxfp4`` (gpt-oss) the routed-expert matrices, every other method every
    linear matrix — and keeps embeddings, the output head, norms, biases, routers and convolution/state
    parameters in the native dtype (bf16), minus the modules it leaves unconverted; group-quantized integers add
    their scales and zero points (``quant_scheme``)."""
    q = quant_scheme(quant, where)
    if q is None:
        return (WeightGroup("all parameters", float(sum(numel(s) for _, s in params)), native),)
    method = q["method"]
    quantized = kept = scales = experts4 = 0
    expert_dtype = quant.get("expert_dtype")
    if expert_dtype not in (None, "fp8", "fp4"):
        raise InputError(f"{where}.expert_dtype: {validate.show(expert_dtype)} is not a storage type the calculator "
                         "sizes; allowed: fp4, fp8")
    for name, shape in params:
        if expert_dtype == "fp4" and is_routed_expert(name) and not name.endswith("bias"):
            # DeepSeek-V4's routed experts: 4-bit floats (E2M1) with one E8M0 scale per 32 weights (its inference
            # code's fp4_block_size 32, scale_fmt ue8m0): MXFP4's layout, the scale inside its 4.25 bits
            experts4 += numel(shape)
            continue
        leaf = name.rsplit(".", 2)[-2] if name.count(".") >= 1 else name
        matrix = (is_routed_expert(name) and not name.endswith("bias")) if method == "mxfp4" else (
            (len(shape) == 2 and name.endswith(".weight") and "embed" not in name and "lm_head" not in name
             and leaf not in ("gate", "router", "shared_expert_gate") and not _v4_kept(name, leaf)
             and not _k3_kept(leaf))
            or (is_routed_expert(name) and not name.endswith("bias")))
        if matrix and not _not_converted(name, q["skip"]):
            quantized += numel(shape)
            if q["group"]:         # one scale per group of input weights of each output row (-1: the whole row)
                n_in = shape[-1]
                per_row = 1 if q["group"] == -1 else -(-n_in // q["group"])
                scales += numel(shape) // n_in * per_row
        else:
            kept += numel(shape)
    groups = [WeightGroup(f"{method} matrices", float(quantized), q["dtype"])]
    if experts4:
        groups.insert(0, WeightGroup("routed experts in fp4 (an E8M0 scale per 32 weights: mxfp4)", float(experts4),
                                     "mxfp4"))
    if scales:
        sdtype = q.get("scale_dtype") or ("fp16" if method in ("awq", "gptq") else native)
        groups.append(WeightGroup(f"{method} group scales ({sdtype}, one per {q['group']} weights of a row)"
                                  if q["group"] > 0 else f"{method} scales ({sdtype}, one per row)",
                                  float(scales), sdtype))
        if q["zeros"]:
            groups.append(WeightGroup(f"{method} zero points ({q['dtype']}, one per scale)", float(scales),
                                      q["dtype"]))
    if kept:
        groups.append(WeightGroup(f"embeddings, norms, routers and other unquantized ({native})", float(kept),
                                  native))
    return tuple(groups)


# Model types whose parameters ``param_count`` counts exactly — the text model and, for a multimodal checkpoint, its
# vision tower: the tests hold each to transformers' meta-device build on a published config
# (tests/calculator/model/test_families.py). A config of these types plans in pure Python with the class defaults stored in
# data/config_defaults.json (no transformers, no torch). Beside them, every decoder type transformers has whose
# pure count equals transformers' own build at the class's default size (``census``, run when the table is
# regenerated: ``checked_at_default_size`` in the table) plans the same way; every other type goes through
# transformers.
COUNTED = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_vl_moe",
           "qwen3_5_moe", "gpt2", "gemma2", "gemma3", "gpt_oss", "olmo2", "phi3", "hunyuan_v1_moe", "llama4",
           "deepseek_v2", "deepseek_v3", "deepseek_v32", "jamba", "nemotron_h", "granitemoehybrid", "falcon_h1",
           "glm4_moe", "mistral3", "mpt", "exaone4", "mamba", "lfm2", "kimi_linear", "gemma4", "mimo_v2_flash",
           "deepseek_v4")
STORED_DEFAULTS = Path(__file__).resolve().parents[1] / "data" / "config_defaults.json"


@lru_cache(maxsize=1)
def stored_defaults() -> dict:
    """``{"model_types": {type: class defaults}, "architectures": {class: type}, "known_types": [every type
    transformers has], "known_architectures": [every class its architectures resolve], "transformers": version}``."""
    return json.loads(STORED_DEFAULTS.read_text())


def stored_type(d: dict) -> str | None:
    """The stored model type that reads this config (its own, or the one its architecture names)."""
    table = stored_defaults()
    mt = d.get("model_type")
    if mt in table["model_types"]:
        return mt
    if mt in table["known_types"]:            # a type transformers has: its own class reads it, not another's
        return None
    archs = d.get("architectures") if isinstance(d.get("architectures"), list) else []
    return next((table["architectures"][a] for a in archs if a in table["architectures"]), None)


def transformers_has_class(d: dict) -> bool:
    """Whether ``transformers`` has a config class for this file (its model_type, or a class its architectures
    name), from the stored table: no import. False for a repository that ships its own code for a type
    transformers lacks (MiniMax-M1)."""
    table = stored_defaults()
    archs = d.get("architectures") if isinstance(d.get("architectures"), list) else []
    return d.get("model_type") in table["known_types"] or any(a in table["known_architectures"] for a in archs)


def light_types() -> tuple[str, ...]:
    """Every model type the pure path plans: the counted ones and those checked at their class's default size."""
    table = stored_defaults()
    return tuple(table["model_types"])


def census(model_type: str) -> tuple[int, int] | None:
    """(the pure count, transformers' meta-device count) of ``model_type``'s class at its default size, the file
    being the class's own dict (what ``save_pretrained`` writes); None when either side cannot count it (an
    encoder-decoder, a structure the calculator refuses, a class that cannot be built from its defaults) or when
    the file's cache read with the stored class defaults differs from the one read with transformers' resolved
    config. Imports transformers and torch: run when the stored table is regenerated, and by the tests."""
    from part1_capacity.calculator.model import hf_config

    try:
        defaults = json.loads(json.dumps(hf_config.class_defaults(model_type), default=str))
        cfg = hf_config.build({"model_type": model_type}, model_type)
        if cfg.get_text_config() is not cfg and model_type not in TOWERS:
            # a tower the pure count does not know: transformers may fall back to the language model alone,
            # and the two counts would agree on less than a server loads
            return None
        file = {**json.loads(json.dumps(cfg.to_dict(), default=str)), "model_type": model_type}
        meta = hf_config.meta_parameters(file, model_type)
        pure = count_model_parameters(file, defaults, model_type)
        stub = [("p", (1,))]
        stored = profile_from_fields(file, defaults, model_type, parameters=stub)
        resolved = profile_from_fields(file, hf_config.defaults_for(file, model_type), model_type, parameters=stub)
        if any(stored.cache_bytes(T, 2) != resolved.cache_bytes(T, 2) for T in (1, 5000, 200_000)):
            return None
    except (Exception, RecursionError):        # any class transformers cannot build at its defaults: not stored
        return None
    return sum(numel(s) for _, s in pure), sum(numel(s) for _, s in meta)


def write_stored_defaults(path=STORED_DEFAULTS, checked=None) -> dict:
    """Regenerate data/config_defaults.json from the installed transformers (run after changing its pin:
    ``python -m part1_capacity.calculator.model.configs``). ``checked``: the decoder types to try beside ``COUNTED``
    (default: every causal-LM and image-text-to-text type transformers maps); those whose ``census`` is equal to the
    parameter are stored, the others left to transformers."""
    from part1_capacity.calculator.model import hf_config

    tried = hf_config.decoder_types() if checked is None else checked
    exact = sorted(mt for mt in tried if mt not in COUNTED and (c := census(mt)) is not None and c[0] == c[1])
    stored = list(COUNTED) + exact
    table = {"transformers": hf_config.version(), "model_types": {mt: hf_config.class_defaults(mt) for mt in stored},
             # a class two stored types map keeps the counted type's reading
             "architectures": {**{a: mt for mt in exact for a in hf_config.architectures_of(mt)},
                               **{a: mt for mt in COUNTED for a in hf_config.architectures_of(mt)}},
             "checked_at_default_size": exact,
             "known_types": hf_config.known_types(), "known_architectures": hf_config.known_architectures()}
    Path(path).write_text(json.dumps(table, indent=1, sort_keys=True, default=str) + "\n")
    return table


def profile_from_config(d: dict, where: str = "config.json", model_id: str = "config",
                        parameters=None) -> ModelProfile:
    """A config.json's profile: ``transformers`` supplies the defaults (``hf_config.defaults_for``) and the exact
    parameter list (``hf_config.meta_parameters``) unless ``parameters`` are given (a checkpoint's headers)."""
    if not isinstance(d, dict):
        raise InputError(f"{where}: must hold a JSON object")
    _model_type(d, where)
    return _profile(json.dumps(d, sort_keys=True), where, model_id, parameters is not None and
                    json.dumps(parameters))


@lru_cache(maxsize=32)
def _profile(text: str, where: str, model_id: str, params_json) -> ModelProfile:
    """Built once per distinct file content: building the model on the meta device takes up to a second."""
    from part1_capacity.calculator.model import hf_config

    d = json.loads(text)
    check_config(d, where)                          # the file's own checks first: before transformers sees it
    given = [(n, tuple(s)) for n, s in json.loads(params_json)] if params_json else None
    mt = stored_type(d)
    if mt is not None and (given is not None or counts_in_pure_python(d)):
        # pure Python: the stored class defaults, the exact count (a tower the count does not know: transformers)
        return profile_from_fields(d, stored_defaults()["model_types"][mt], where, model_id, given)
    if not transformers_has_class(d):
        # a repository that ships its own modelling code for a type transformers lacks (MiniMax-M1): read by
        # structure from the file alone — every field it states — and counted from those fields
        prof = profile_from_fields(d, OWN_CODE_DEFAULTS, where, model_id, given)
        return dataclasses.replace(prof, source=f"{prof.source}; read from its own fields (transformers has no "
                                                f"class for this model_type)")
    defaults = hf_config.defaults_for(d, where)
    params = given if given is not None else hf_config.meta_parameters(d, where)
    return profile_from_fields(d, defaults, where, model_id, params)


def profile_from_config_path(path) -> ModelProfile:
    d, where = load_config(path)
    p = Path(path).resolve()
    model_id = p.name if p.is_dir() else (p.parent.name if p.stem == "config" else p.stem)
    return profile_from_config(d, where, model_id=model_id)


if __name__ == "__main__":
    print(f"wrote {STORED_DEFAULTS} for {len(write_stored_defaults()['model_types'])} model types")
