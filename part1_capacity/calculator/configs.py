"""A Hugging Face ``config.json`` → ``ModelProfile``, read by structure: any family ``transformers`` knows.

Two layers:

- ``profile_from_fields(config, defaults)`` — pure Python (no transformers, torch or numpy; it runs in the
  browser too). ``config`` is the file's JSON object; ``defaults`` a dict of the same shape with what the model
  type's config class supplies for fields the file leaves out (a multimodal checkpoint's language model under
  ``text_config``). It reads the cache structure from what the fields say, never from the family's name: K/V
  heads and head dims, every way a config marks its layers (``layer_types``, ``layers_block_type``,
  ``hybrid_override_pattern``, ``attn_type_list``, ``no_rope_layers`` with ``attention_chunk_size``,
  ``sliding_window_pattern``, ``full_attention_interval``, a ``sliding_window`` on every layer), MLA latents and
  DeepSeek-V3.2's indexer keys, recurrent state (Mamba-1, Mamba-2, gated DeltaNet, lightning attention), layers
  that reuse another layer's K/V (Gemma 3n), experts. A config whose cache holds something not modelled is refused
  with that structure named.
- ``hf_config.defaults_for(config)`` — ``transformers`` builds the config class for the file, so the defaults and
  derived fields are exactly those an engine loading the model sees; ``profile_from_config`` joins the two.

Parameters: ``count_parameters(config, defaults)`` counts a text model from its fields (pure Python; checked
against ``transformers``' meta-device build in the tests); a file path plans with the exact meta-device list
(``hf_config.meta_parameters``), a checkpoint with its headers.
"""
from __future__ import annotations

import dataclasses
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
_PER_LAYER = ("intermediate_size", "moe_intermediate_size")   # may be one value per layer (Gemma 3n, Hunyuan)
_LISTS = ("layer_types", "layers_block_type", "mlp_only_layers", "attn_layer_indices")
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
        v = d.get(key)
        if v is None:
            continue
        if key == "sliding_window" and v == 0 and d.get("use_sliding_window") is False:
            continue                      # Qwen2-MoE's class writes 0 when the window is off
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


# --- the fields, read the way transformers reads them -------------------------------------------------------------
# the canonical name first, then the names families publish it under (transformers' attribute_map)
ALIASES = {
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim"),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"),
    "intermediate_size": ("intermediate_size", "n_inner", "ffn_hidden_size"),
}
SHAPE_FIELDS = ("num_hidden_layers", "num_attention_heads", "hidden_size")   # a file must state these itself


class Fields:
    """The text model's fields: the file's value, else the default's. ``where`` names the file in messages."""

    def __init__(self, config: dict, defaults: dict | None, where: str):
        defaults = defaults or {}
        nested = isinstance(config.get("text_config"), dict)
        self.file = config["text_config"] if nested else config
        self.defaults = (defaults.get("text_config") if nested else defaults) or {}
        if not nested and isinstance(defaults.get("text_config"), dict) and defaults["text_config"] is not None:
            # a text-only file of a type whose class nests its text part (rare): read the nested defaults
            self.defaults = {**defaults["text_config"], **{k: v for k, v in defaults.items() if k != "text_config"}}
        self.top = config
        self.where = f"{where}: text_config" if nested else where

    def raw(self, name):
        for key in ALIASES.get(name, (name,)):
            if key in self.file:            # a field the file states, null included ("sliding_window": null)
                return self.file[key]
        for key in ALIASES.get(name, (name,)):
            if self.defaults.get(key) is not None:
                return self.defaults[key]
        return None

    def first(self, *names):
        """The value of the first of ``names`` the file states, else the first the defaults give (a default's
        alias never shadows the name the file uses: qwen3_moe's ``num_experts`` is its ``num_local_experts``)."""
        for src in (self.file, self.defaults):
            for name in names:
                for key in ALIASES.get(name, (name,)):
                    if src.get(key) is not None:
                        return src[key]
        return None

    def stated(self, name) -> bool:
        return any(self.file.get(k) is not None for k in ALIASES.get(name, (name,)))

    def int(self, name, default=None, lo=0, hi=None):
        v = self.raw(name)
        if v is None:
            if default is None:
                raise InputError(f"{self.where}: missing field '{name}'")
            return default
        if isinstance(v, list):
            raise InputError(f"{self.where}: field '{name}' is a list of {len(v)} values: one per layer is not "
                             "modelled (every layer must have the same value)")
        return validate.number(v, f"{self.where}: field '{name}'", lo=lo, hi=hi, integer=True)

    def flag(self, name, default=False) -> bool:
        v = self.raw(name)
        return default if v is None else bool(v)


# layer_types names → the calculator's layer kinds. "full": K/V of every token; "window": the last W tokens;
# "chunked": the tokens of the current chunk; "linear": a recurrent state (delta-net, lightning, Mamba);
# "both": attention and SSM side by side (Falcon-H1); "none": an MLP-only block.
KINDS = {"full_attention": "full", "attention": "full", "global": "full", "full": "full", "global_attention": "full",
         "indexed_attention": "full", "sliding_attention": "window", "sliding": "window", "local": "window",
         "local_attention": "window", "chunked_attention": "chunked", "linear_attention": "linear",
         "mamba": "linear", "mamba2": "linear", "ssm": "linear", "hybrid": "both", "mlp": "none", "moe": "none",
         "-": "none", "E": "none", "M": "linear", "*": "full"}
# fields that mean the cache holds something the calculator does not model, and what that is
NOT_MODELLED = {
    "cross_attention_layers": "cross-attention layers cache the image encoder's K/V beside the text's",
    "is_encoder_decoder": "an encoder-decoder's cross-attention caches the encoder output per sequence",
    "global_head_dim": "K/V head dims that differ by layer type",
    "num_global_key_value_heads": "K/V head counts that differ by layer type",
    "kv_lora_rank_per_layer": "per-layer MLA latent widths",
    "use_cla": "cross-layer attention: adjacent layers share one K/V (Hunyuan's CLA)",
}


def _periodic(n: int, period: int, last_is_global=True) -> list[bool]:
    """Layer i is local unless (i + 1) is a multiple of ``period``: the convention of every published period
    (Gemma 2/3, Cohere 2, Qwen3-Next, Llama 4)."""
    return [(i + 1) % period != 0 for i in range(n)]


def layer_kinds(f: Fields) -> list[str]:
    """Per layer: 'full', 'window', 'chunked', 'linear', 'both' or 'none', from every way a config marks it.

    What the file states comes first (its ``layer_types``, then a pattern it states), then the defaults' own
    ``layer_types`` (a class's default size: repeated by its period to the file's layer count), then a pattern
    the defaults state; a ``sliding_window`` with no pattern windows every layer (Mistral-7B) when it is shorter
    than the longest context."""
    for key, what in NOT_MODELLED.items():
        v = f.raw(key)
        if v not in (None, False, [], 0):
            raise InputError(f"{f.where}: {what} ('{key}'): not modelled")
    n = f.int("num_hidden_layers", lo=1, hi=512)
    kinds = _stated_kinds(f, f.file, n)
    if kinds is None:
        types = f.defaults.get("layer_types") or f.defaults.get("layers_block_type")
        if isinstance(types, list) and types and len(types) != n:
            period = next(p for p in range(1, len(types) + 1)
                          if all(types[i] == types[i % p] for i in range(len(types))))
            types = [types[i % period] for i in range(n)]
        kinds = _named_kinds(f, types, n) if types else _stated_kinds(f, f.defaults, n)
    if kinds is not None:
        return kinds
    window, longest = f.raw("sliding_window"), f.raw("max_position_embeddings")
    if window and f.raw("use_sliding_window") is not False and not (
            isinstance(window, int) and isinstance(longest, int) and window >= longest):
        return ["window"] * n
    # no window, or one no shorter than the longest context (Phi-4-mini: 262,144 for 131,072 positions): every
    # token stays in the cache, as in full attention
    return ["full"] * n


def _named_kinds(f: Fields, types, n: int) -> list[str]:
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise InputError(f"{f.where}: field 'layer_types' must be a list of names, got {validate.show(types)}")
    bad = [t for t in types if t not in KINDS]
    if bad:
        raise InputError(f"{f.where}: layer type {validate.show(bad[0])} is a layer the calculator does not "
                         f"model; known: {', '.join(k for k in KINDS if len(k) > 1)}")
    if len(types) != n:
        raise InputError(f"{f.where}: layer_types has {len(types)} entries for num_hidden_layers={n}")
    return [KINDS[t] for t in types]


def _stated_kinds(f: Fields, src: dict, n: int) -> list[str] | None:
    """The layer kinds a pattern in ``src`` (the file's fields, or the defaults') states; None when it states none.
    Sizes a pattern needs are read from the file, else the defaults (``f``)."""
    types = src.get("layer_types") or src.get("layers_block_type")
    if types is not None and src is f.file:
        return _named_kinds(f, types, n)
    pattern = src.get("hybrid_override_pattern")
    if isinstance(pattern, str):                           # Nemotron-H: M (Mamba-2) * (attention) - (MLP) E (MoE)
        if len(pattern) != n:
            raise InputError(f"{f.where}: hybrid_override_pattern has {len(pattern)} entries for "
                             f"num_hidden_layers={n}")
        return [KINDS[c] for c in pattern]
    attn_types = src.get("attn_type_list")                 # MiniMax: 1 softmax attention, 0 lightning attention
    if attn_types is not None:
        if not isinstance(attn_types, list) or len(attn_types) != n or set(attn_types) - {0, 1}:
            raise InputError(f"{f.where}: field 'attn_type_list' must be {n} values of 0 (lightning) or 1 (softmax)")
        return ["full" if t else "linear" for t in attn_types]
    if src.get("attn_layer_period"):                       # Jamba: attention every period-th layer from the offset
        period, offset = f.int("attn_layer_period", lo=1, hi=512), f.int("attn_layer_offset", 0, hi=511)
        return ["full" if i % period == offset else "linear" for i in range(n)]
    if src.get("attention_chunk_size"):                    # Llama 4: RoPE layers chunked, NoPE layers global
        nope = f.raw("no_rope_layers")
        if isinstance(nope, list) and len(nope) == n:
            return ["chunked" if x else "full" for x in nope]
        every = f.int("no_rope_layer_interval", 4, lo=1, hi=512)
        return ["chunked" if local else "full" for local in _periodic(n, every)]
    if src.get("full_attention_interval") and (f.raw("linear_num_key_heads") or f.raw("linear_key_head_dim")):
        return ["linear" if local else "full" for local in _periodic(n, f.int("full_attention_interval", lo=1))]
    p = src.get("sliding_window_pattern") or src.get("_sliding_window_pattern")
    if p and f.raw("sliding_window") and f.raw("use_sliding_window") is not False:
        p = validate.number(p, f"{f.where}: field 'sliding_window_pattern'", lo=1, hi=512, integer=True)
        return ["window" if local else "full" for local in _periodic(n, p)]
    return None


def _ssm(f: Fields, n_layers: int) -> dict:
    """The recurrent layers' state shape, by the fields that describe it (the state size itself comes from the
    lesson-03 laws in ``profiles.ssm_from_dict``)."""
    g = f.int
    if f.raw("linear_num_key_heads") is not None or f.raw("linear_key_head_dim") is not None:
        out = {"kind": "gated_deltanet", "n_layers": n_layers, "n_k_heads": g("linear_num_key_heads", lo=1),
               "n_v_heads": g("linear_num_value_heads", lo=1), "k_head_dim": g("linear_key_head_dim", lo=1),
               "v_head_dim": g("linear_value_head_dim", lo=1), "d_conv": g("linear_conv_kernel_dim", lo=1)}
        if f.raw("mamba_ssm_dtype") or f.raw("mamba_ssm_cache_dtype"):
            # the checkpoint names the state's dtype (Qwen3.5: "mamba_ssm_dtype": "float32"), which vLLM follows
            out["state_dtype"] = DTYPE_NAMES.get(str(f.raw("mamba_ssm_cache_dtype") or f.raw("mamba_ssm_dtype")),
                                                 "fp32")
        return out
    heads = f.first("mamba_n_heads", "mamba_num_heads")
    if heads is not None:
        def pick(a, b):            # the name the file uses, else the one the defaults give
            return a if (a in f.file or (b not in f.file and f.raw(a) is not None)) else b
        hn = pick("mamba_n_heads", "mamba_num_heads")
        hd = pick("mamba_d_head", "mamba_head_dim")
        ds = pick("mamba_d_state", "ssm_state_size")
        dc = pick("mamba_d_conv", "conv_kernel")
        ng = pick("mamba_n_groups", "n_groups")
        if f.raw(hd) in (None, "auto") and f.raw("mamba_d_ssm"):
            head_dim = g("mamba_d_ssm", lo=1) // g(hn, lo=1)
        else:
            head_dim = g(hd, lo=1)
        out = {"kind": "mamba2", "n_layers": n_layers, "n_heads": g(hn, lo=1), "head_dim": head_dim,
               "d_state": g(ds, lo=1), "d_conv": g(dc, lo=1), "n_groups": g(ng, lo=1)}
        cache = f.raw("mamba_ssm_cache_dtype")
        if any(a == "NemotronHForCausalLM" for a in (f.top.get("architectures") or [])) or cache:
            # vLLM keeps Nemotron-H's SSM state in the checkpoint's mamba_ssm_cache_dtype, float32 by default
            # (vllm/model_executor/models/config.py, NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE)
            out["state_dtype"] = DTYPE_NAMES.get(str(cache or "float32"), "fp32")
        return out
    if f.raw("mamba_expand") is not None and f.raw("mamba_d_state") is not None:
        return {"kind": "mamba1", "n_layers": n_layers, "d_inner": g("mamba_expand", lo=1) * g("hidden_size", lo=1),
                "d_state": g("mamba_d_state", lo=1), "d_conv": g("mamba_d_conv", lo=1)}
    if f.raw("block_size") is not None or f.raw("attn_type_list") is not None or f.raw("linear_attn_alpha_factor"):
        # lightning attention (MiniMax): per head a head_dim × head_dim matrix, no convolution
        heads = g("num_attention_heads", lo=1)
        return {"kind": "lightning", "n_layers": n_layers, "n_heads": heads, "head_dim": _head_dim(f, heads)}
    raise InputError(f"{f.where}: recurrent (linear-attention) layers whose state shape the config does not give "
                     "(no Mamba, gated DeltaNet or lightning-attention fields): not modelled")


DTYPE_NAMES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "torch.bfloat16": "bf16",
               "torch.float16": "fp16", "torch.float32": "fp32"}


def _head_dim(f: Fields, heads: int) -> int:
    hd = f.raw("head_dim")
    if hd is not None:
        return f.int("head_dim", lo=1, hi=4096)
    return f.int("hidden_size", lo=1) // heads


def experts(f: Fields) -> tuple[int, int]:
    """(routed experts per MoE layer, experts each token uses): 0, 0 for a dense model."""
    e = f.first("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts") or 0
    if isinstance(e, list) or not e or e == 1:
        return 0, 0
    k = f.first("num_experts_per_tok", "experts_per_token", "moe_topk", "num_experts_per_token")
    if isinstance(k, list):
        k = k[0] if len(set(k)) == 1 else None
    if k is None:
        raise InputError(f"{f.where}: {e} experts but no experts-per-token field (num_experts_per_tok)")
    e = validate.number(e, f"{f.where}: experts", lo=2, hi=4096, integer=True)
    k = validate.number(k, f"{f.where}: field 'num_experts_per_tok'", lo=1, hi=e, integer=True)
    return e, k


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
        _named_kinds(f, types, len(types))          # a layer type not modelled is named before anything else
    missing = [k for k in SHAPE_FIELDS if not f.stated(k)]
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
    n_heads = f.int("num_attention_heads", lo=1, hi=1024)
    n_kv = f.int("num_key_value_heads", 1 if f.flag("multi_query") else n_heads, lo=1, hi=1024)
    hidden = f.int("hidden_size", lo=1, hi=65536)
    head_dim = _head_dim(f, n_heads)
    shared = f.int("num_kv_shared_layers", 0, hi=512)         # Gemma 3n: the last layers reuse earlier K/V
    if shared >= len(kinds):
        raise InputError(f"{f.where}: num_kv_shared_layers ({shared}) must be fewer than the layers ({len(kinds)})")
    own = kinds[:len(kinds) - shared]                         # layers that keep their own K/V
    n_lin = sum(k in ("linear", "both") for k in kinds)
    prof = {"id": model_id, "name": f"{model_id} ({mt})", "n_layers": len(kinds), "n_heads": n_heads,
            "n_kv_heads": n_kv, "head_dim": head_dim, "hidden_size": hidden,
            "n_full_layers": sum(k in ("full", "both") for k in own),
            "max_context": f.int("max_position_embeddings", lo=1), "source": f"{where} (model_type {mt})"}
    if shared:
        prof["n_kv_shared_layers"] = shared
    repo = config.get("_name_or_path")
    if isinstance(repo, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", repo) and not repo.startswith("."):
        prof["hf_repo"] = repo          # the repository the config was saved from: what `vllm serve` loads
    if "window" in own or "chunked" in own:
        if "window" in own and "chunked" in own:
            raise InputError(f"{f.where}: sliding-window and chunked layers in one model: not modelled")
        prof["n_window_layers"] = own.count("window") + own.count("chunked")
        if "chunked" in own:
            prof["window"] = f.int("attention_chunk_size", lo=1)
            prof["window_kind"] = "chunked"
        else:
            prof["window"] = f.int("sliding_window", lo=1)
    if f.raw("kv_lora_rank"):
        prof.update(kv_lora_rank=f.int("kv_lora_rank", lo=1), qk_rope_head_dim=f.int("qk_rope_head_dim", lo=1),
                    n_kv_heads=n_heads, head_dim=f.int("qk_nope_head_dim", lo=1), v_head_dim=f.int("v_head_dim", lo=1))
        if f.raw("index_head_dim") and (f.raw("index_topk") or "indexed_attention" in (f.raw("layer_types") or [])):
            prof["index_head_dim"] = f.int("index_head_dim", lo=1)   # DeepSeek-V3.2: the indexer's key per token
    if n_lin:
        prof["ssm"] = _ssm(f, n_lin)
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
    if parameters is None:
        parameters = count_parameters(config, defaults, where)
    total = sum(_numel(s) for _, s in parameters)
    routed = [(n, s) for n, s in parameters if _is_routed_expert(n)]
    active = total - sum(_numel(s) for n, s in parameters if _MULTIMODAL.search(n))
    f = Fields(config, defaults, where)
    routed_params = sum(_numel(s) for _, s in routed)
    if routed:
        e, k = experts(f)
        if e:
            active -= routed_params * (1 - k / e)
    prof["params_total"], prof["params_active"] = float(total), float(active)
    if routed_params:
        prof["params_routed"] = float(routed_params)

    quant = config.get("quantization_config") or (config.get("text_config") or {}).get("quantization_config") or {}
    dt = f.raw("dtype") or f.raw("torch_dtype") or config.get("torch_dtype") or config.get("dtype")
    native = DTYPE_NAMES.get(str(dt), "bf16")
    groups = weight_groups(parameters, native, quant)
    prof["native_dtype"] = {"mxfp4": "mxfp4", "fp8": "fp8"}.get(quant.get("quant_method"), groups[0].dtype)
    prof["model_dtype"] = native
    prof["weight_groups"] = [{"name": g.name, "params": g.params, "dtype": g.dtype} for g in groups]
    return profile_from_dict(prof, where)


# --- what a profile's structure is, in words (the calculator page lists families by it) ------------------------
def structure_summary(p: ModelProfile) -> str:
    """What decides one model's cache, from its profile: the attention structure, windows or chunks, recurrent
    state, experts, shared K/V, indexer keys."""
    from part0_foundations.l03_kv_cache.laws import STRUCTURES

    parts = [STRUCTURES.get(p.structure, p.structure.replace("_", " "))]
    if p.ssm is not None:
        parts[0] = {"mamba1": "Mamba-1", "mamba2": "Mamba-2", "gated_deltanet": "gated DeltaNet",
                    "lightning": "lightning attention"}[p.ssm.kind] + f" hybrid ({p.ssm.n_layers} of {p.n_layers} "
        parts[0] += "layers recurrent)"
    if p.n_window_layers:
        kind = "chunked (chunk" if p.window_kind == "chunked" else "sliding-window (window"
        parts.append(f"{p.n_window_layers} of {p.n_layers} layers {kind} {p.window:,})")
    if p.is_mla:
        parts[-1 if p.ssm is None and not p.n_window_layers else len(parts)] = (
            "MLA latent" + (" + indexer keys" if p.index_head_dim else ""))
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


# --- parameters from the fields ------------------------------------------------------------------------------------
def count_parameters(config: dict, defaults: dict | None = None, where: str = "config.json"):
    """(name, shape) of the text model's parameters, from its fields alone (pure Python): embeddings, attention
    (GQA, MLA with its indexer), dense and expert MLPs (routed, shared, dense-first layers), recurrent blocks and
    norms. Named like ``transformers``' modules, so quantization rules and the routed-expert share read them
    alike. A vision or audio tower is not counted here (the meta-device list has it)."""
    f = Fields(config, defaults, where)
    kinds = layer_kinds(f)
    D = f.int("hidden_size", lo=1)
    V = f.int("vocab_size", lo=1)
    H = f.int("num_attention_heads", lo=1)
    KV = f.int("num_key_value_heads", H, lo=1)
    hd = _head_dim(f, H)
    inter = f.raw("intermediate_size")
    inter = inter[0] if isinstance(inter, list) else inter
    I = validate.number(inter or 4 * D, f"{f.where}: field 'intermediate_size'", lo=1, integer=True)
    out = [("model.embed_tokens.weight", (V, D))]
    if not f.flag("tie_word_embeddings"):
        out.append(("lm_head.weight", (V, D)))
    e, k = experts(f)
    moe_I = f.int("moe_intermediate_size", I) if e else 0
    dense_first = f.int("first_k_dense_replace", 0) if e else 0
    mlp_only = set(f.raw("mlp_only_layers") or [])
    step = f.int("decoder_sparse_step", 1, lo=1) if e else 1
    mlp_types = f.raw("mlp_layer_types")
    bias = f.flag("attention_bias") or f.flag("qkv_bias")
    ssm = _ssm(f, 1) if any(x in ("linear", "both") for x in kinds) else None
    pattern = f.raw("hybrid_override_pattern")
    one_op_per_block = isinstance(pattern, str) and len(pattern) == len(kinds)
    for i, kind in enumerate(kinds):
        p = f"model.layers.{i}"
        out.append((f"{p}.input_layernorm.weight", (D,)))
        if kind in ("full", "window", "chunked", "both"):
            out += _attention(f, p, D, H, KV, hd, bias)
        if kind in ("linear", "both"):
            out += _recurrent(f, p, D, ssm, H, hd)
        moe = bool(e) and i >= dense_first and i not in mlp_only and (i + 1) % step == 0
        if isinstance(mlp_types, list) and i < len(mlp_types):
            moe = bool(e) and mlp_types[i] in ("sparse", "moe")
        if f.raw("expert_layer_period"):          # Jamba: experts every period-th layer from the offset
            moe = bool(e) and i % f.int("expert_layer_period", lo=1) == f.int("expert_layer_offset", 0)
        if one_op_per_block:                      # Nemotron-H: a block is a mixer or an MLP, never both
            if kind != "none":
                continue
            moe = bool(e) and pattern[i] == "E"
        if True:
            out.append((f"{p}.post_attention_layernorm.weight", (D,)))
            out += _moe(f, p, D, e, moe_I) if moe else [(f"{p}.mlp.gate_up_proj.weight", (2 * I, D)),
                                                       (f"{p}.mlp.down_proj.weight", (D, I))]
    out.append(("model.norm.weight", (D,)))
    return out


def _attention(f: Fields, p: str, D: int, H: int, KV: int, hd: int, bias: bool):
    if f.raw("kv_lora_rank"):
        r, q = f.int("kv_lora_rank", lo=1), f.raw("q_lora_rank")
        rope, nope, v = f.int("qk_rope_head_dim", lo=1), f.int("qk_nope_head_dim", lo=1), f.int("v_head_dim", lo=1)
        a = [(f"{p}.self_attn.kv_a_proj_with_mqa.weight", (r + rope, D)), (f"{p}.self_attn.kv_a_layernorm.weight", (r,)),
             (f"{p}.self_attn.kv_b_proj.weight", (H * (nope + v), r)), (f"{p}.self_attn.o_proj.weight", (D, H * v))]
        if q:
            q = f.int("q_lora_rank", lo=1)
            a += [(f"{p}.self_attn.q_a_proj.weight", (q, D)), (f"{p}.self_attn.q_a_layernorm.weight", (q,)),
                  (f"{p}.self_attn.q_b_proj.weight", (H * (nope + rope), q))]
        else:
            a.append((f"{p}.self_attn.q_proj.weight", (H * (nope + rope), D)))
        if f.raw("index_head_dim") and f.raw("index_n_heads"):
            ih, ihd = f.int("index_n_heads", lo=1), f.int("index_head_dim", lo=1)
            a += [(f"{p}.self_attn.indexer.wq_b.weight", (ih * ihd, q or D)),
                  (f"{p}.self_attn.indexer.wk.weight", (ihd, D)), (f"{p}.self_attn.indexer.k_norm.weight", (ihd,)),
                  (f"{p}.self_attn.indexer.k_norm.bias", (ihd,)),
                  (f"{p}.self_attn.indexer.weights_proj.weight", (ih, D))]
        return a
    a = [(f"{p}.self_attn.q_proj.weight", (H * hd, D)), (f"{p}.self_attn.k_proj.weight", (KV * hd, D)),
         (f"{p}.self_attn.v_proj.weight", (KV * hd, D)), (f"{p}.self_attn.o_proj.weight", (D, H * hd))]
    if bias:
        a += [(f"{p}.self_attn.q_proj.bias", (H * hd,)), (f"{p}.self_attn.k_proj.bias", (KV * hd,)),
              (f"{p}.self_attn.v_proj.bias", (KV * hd,))]
        if f.flag("attention_bias"):
            a.append((f"{p}.self_attn.o_proj.bias", (D,)))
    weightless = f.raw("attn_temperature_tuning") is not None      # Llama 4's QK norm is an L2 norm, no weights
    if (f.flag("use_qk_norm") and not weightless) or f.raw("model_type") in ("qwen3", "qwen3_moe"):
        a += [(f"{p}.self_attn.q_norm.weight", (hd,)), (f"{p}.self_attn.k_norm.weight", (hd,))]
    return a


def _moe(f: Fields, p: str, D: int, e: int, I: int):
    m = [(f"{p}.mlp.gate.weight", (e, D)), (f"{p}.mlp.experts.gate_up_proj", (e, 2 * I, D)),
         (f"{p}.mlp.experts.down_proj", (e, D, I))]
    shared = f.raw("shared_expert_intermediate_size") or (f.int("n_shared_experts", 0) * I) or (
        f.int("intermediate_size", 0) if f.raw("intermediate_size_mlp") else 0)
    if shared:
        m += [(f"{p}.mlp.shared_experts.gate_up_proj.weight", (2 * shared, D)),
              (f"{p}.mlp.shared_experts.down_proj.weight", (D, shared))]
    return m


def _recurrent(f: Fields, p: str, D: int, s: dict, H: int, hd: int):
    kind = s["kind"]
    if kind == "gated_deltanet":
        kd, vd = s["n_k_heads"] * s["k_head_dim"], s["n_v_heads"] * s["v_head_dim"]
        conv = 2 * kd + vd
        return [(f"{p}.linear_attn.in_proj_qkvz.weight", (2 * kd + 2 * vd, D)),
                (f"{p}.linear_attn.in_proj_ba.weight", (2 * s["n_v_heads"], D)),
                (f"{p}.linear_attn.conv1d.weight", (conv, 1, s["d_conv"])),
                (f"{p}.linear_attn.dt_bias", (s["n_v_heads"],)), (f"{p}.linear_attn.A_log", (s["n_v_heads"],)),
                (f"{p}.linear_attn.norm.weight", (s["v_head_dim"],)), (f"{p}.linear_attn.out_proj.weight", (D, vd))]
    if kind == "mamba2":
        d_in = s["n_heads"] * s["head_dim"]
        conv = d_in + 2 * s["n_groups"] * s["d_state"]
        return [(f"{p}.mamba.in_proj.weight", (d_in + conv + s["n_heads"], D)),
                (f"{p}.mamba.conv1d.weight", (conv, 1, s["d_conv"])), (f"{p}.mamba.conv1d.bias", (conv,)),
                (f"{p}.mamba.dt_bias", (s["n_heads"],)), (f"{p}.mamba.A_log", (s["n_heads"],)),
                (f"{p}.mamba.D", (s["n_heads"],)), (f"{p}.mamba.norm.weight", (d_in,)),
                (f"{p}.mamba.out_proj.weight", (D, d_in))]
    if kind == "mamba1":
        d_in, ds = s["d_inner"], s["d_state"]
        rank = f.int("mamba_dt_rank", -(-D // 16), lo=1)
        return [(f"{p}.mamba.in_proj.weight", (2 * d_in, D)), (f"{p}.mamba.conv1d.weight", (d_in, 1, s["d_conv"])),
                (f"{p}.mamba.conv1d.bias", (d_in,)), (f"{p}.mamba.x_proj.weight", (rank + 2 * ds, d_in)),
                (f"{p}.mamba.dt_proj.weight", (d_in, rank)), (f"{p}.mamba.dt_proj.bias", (d_in,)),
                (f"{p}.mamba.A_log", (d_in, ds)), (f"{p}.mamba.D", (d_in,)), (f"{p}.mamba.out_proj.weight", (D, d_in)),
                # Jamba's Mamba-1 mixer normalises its time step, B and C
                (f"{p}.mamba.dt_layernorm.weight", (rank,)), (f"{p}.mamba.b_layernorm.weight", (ds,)),
                (f"{p}.mamba.c_layernorm.weight", (ds,))]
    # lightning attention: q, k, v, output gate and output projections, a norm
    inner = s["n_heads"] * s["head_dim"]
    return [(f"{p}.self_attn.qkv_proj.weight", (3 * inner, D)), (f"{p}.self_attn.output_gate.weight", (inner, D)),
            (f"{p}.self_attn.out_proj.weight", (D, inner)), (f"{p}.self_attn.norm.weight", (inner,))]


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


_MULTIMODAL = re.compile(r"(^|\.)(vision_tower|vision_model|visual|multi_modal_projector|audio_tower|"
                         r"embed_vision|embed_audio|audio_model|vision_embed)\.")


# Model types whose parameters ``count_parameters`` counts exactly: the tests hold each to transformers' meta-device
# build on a published config (tests/test_families.py). A text-only config of these types plans in pure Python
# with the class defaults stored in data/config_defaults.json (no transformers, no torch); every other type, and
# every multimodal checkpoint (its vision tower), goes through transformers.
COUNTED = ("llama", "mistral", "mixtral", "qwen3", "qwen3_moe", "deepseek_v2", "deepseek_v3", "deepseek_v32", "jamba")
STORED_DEFAULTS = Path(__file__).resolve().parent / "data" / "config_defaults.json"


@lru_cache(maxsize=1)
def stored_defaults() -> dict:
    """``{"model_types": {type: class defaults}, "architectures": {class: type}, "known_types": [every type
    transformers has], "transformers": version}``."""
    return json.loads(STORED_DEFAULTS.read_text())


def stored_type(d: dict) -> str | None:
    """The stored model type that reads this text-only config (its own, or the one its architecture names)."""
    if isinstance(d.get("text_config"), dict) or isinstance(d.get("vision_config"), dict):
        return None
    table = stored_defaults()
    mt = d.get("model_type")
    if mt in table["model_types"]:
        return mt
    if mt in table["known_types"]:            # a type transformers has: its own class reads it, not another's
        return None
    archs = d.get("architectures") if isinstance(d.get("architectures"), list) else []
    return next((table["architectures"][a] for a in archs if a in table["architectures"]), None)


def write_stored_defaults(path=STORED_DEFAULTS) -> dict:
    """Regenerate data/config_defaults.json from the installed transformers (run after changing its pin:
    ``python -m part1_capacity.calculator.configs``)."""
    from part1_capacity.calculator import hf_config

    table = {"transformers": hf_config.version(), "model_types": {mt: hf_config.class_defaults(mt) for mt in COUNTED},
             "architectures": {a: mt for mt in COUNTED for a in hf_config.architectures_of(mt)},
             "known_types": hf_config.known_types()}
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
    from part1_capacity.calculator import hf_config

    d = json.loads(text)
    check_config(d, where)                          # the file's own checks first: before transformers sees it
    given = [(n, tuple(s)) for n, s in json.loads(params_json)] if params_json else None
    mt = stored_type(d)
    if mt is not None:                              # pure Python: the stored class defaults, the exact count
        return profile_from_fields(d, stored_defaults()["model_types"][mt], where, model_id, given)
    if hf_config.known_model_type(d) is None:
        # a repository that ships its own modelling code for a type transformers lacks (MiniMax-M1): read by
        # structure from the file alone — every field it states — and counted from those fields
        prof = profile_from_fields(d, {}, where, model_id, given)
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
