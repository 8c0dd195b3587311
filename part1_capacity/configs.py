"""A Hugging Face ``config.json`` → ``ModelProfile``, for the families the calculator knows.

Families: llama, mistral, qwen2, qwen3 (GQA); gpt2 (MHA); deepseek_v2/v3 (MLA); gemma2, gemma3, gpt_oss (sliding
windows, from ``layer_types`` or the family's pattern); jamba, nemotron_h, granitemoehybrid, qwen3_next, falcon_h1
(state-space / linear-attention hybrids, state sizes from the config's SSM fields). A nested ``text_config``
(multimodal checkpoints such as Gemma 3) is read in place of the top level.

Parameter counts are estimated from the shapes (embeddings, attention, MLP or experts, SSM projections; norms and
biases ignored) because a config does not state them; ``tests/test_calculator_configs.py`` checks the estimate
against the published counts. A missing field raises ``InputError`` naming it.
"""
from __future__ import annotations

import json
from pathlib import Path

from part1_capacity.errors import InputError
from part1_capacity.profiles import ModelProfile, profile_from_dict

FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gpt2", "deepseek_v2", "deepseek_v3", "gemma2", "gemma3",
            "gpt_oss", "jamba", "nemotron_h", "granitemoehybrid", "qwen3_next", "falcon_h1")
_ALIASES = {"gemma3_text": "gemma3", "gemma2_text": "gemma2", "kimi_k2": "deepseek_v3"}
_MISSING = object()


class _Cfg:
    """Field access that names the missing field (and the file) in its error."""

    def __init__(self, d: dict, where: str):
        self.d, self.where = d, where

    def get(self, *keys, default=_MISSING):
        for k in keys:
            if k in self.d and self.d[k] is not None:
                return self.d[k]
        if default is _MISSING:
            raise InputError(f"{self.where}: missing field '{keys[0]}'"
                             + (f" (or {', '.join(repr(k) for k in keys[1:])})" if len(keys) > 1 else ""))
        return default

    def int(self, *keys, default=_MISSING) -> int:
        v = self.get(*keys, default=default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v or v < 0:
            raise InputError(f"{self.where}: field '{keys[0]}' must be a non-negative integer, got {v!r}")
        return int(v)


def load_config(path) -> tuple[dict, str]:
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        from part1_capacity.dtypes import closest
        from part1_capacity.profiles import bundled_models

        hint = closest(Path(str(path)).name.lower(), bundled_models())
        raise InputError(f"model: no config file at '{path}' and no bundled model of that name{hint}; nothing is "
                         f"downloaded: pass a local config.json or a bundled id (`capacity list models`)")
    try:
        d = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"model: {p} is not valid JSON: {getattr(exc, 'msg', exc)}")
    if not isinstance(d, dict):
        raise InputError(f"model: {p} must hold a JSON object")
    return d, p.name if p.parent.name in ("", ".") else f"{p.parent.name}/{p.name}"


def profile_from_config_path(path) -> ModelProfile:
    d, where = load_config(path)
    p = Path(path).resolve()
    model_id = p.name if p.is_dir() else (p.parent.name if p.stem == "config" else p.stem)
    return profile_from_config(d, where, model_id=model_id)


def _layer_kinds(c: _Cfg, family: str, n_layers: int) -> list[str]:
    """Per layer: 'full', 'window', 'ssm', 'both' (attention and SSM side by side) or 'none' (MLP only)."""
    types = c.d.get("layer_types") or c.d.get("layers_block_type")
    if family == "nemotron_h" and c.d.get("hybrid_override_pattern"):
        pat = c.d["hybrid_override_pattern"]
        return [{"M": "ssm", "*": "full"}.get(ch, "none") for ch in pat]
    if types:
        table = {"full_attention": "full", "attention": "full", "sliding_attention": "window", "sliding": "window",
                 "linear_attention": "ssm", "mamba": "ssm", "mamba2": "ssm", "M": "ssm", "*": "full",
                 "mlp": "none", "moe": "none", "-": "none", "E": "none"}
        kinds = []
        for t in types:
            if t not in table:
                raise InputError(f"{c.where}: layer_types: unknown '{t}'; allowed: {', '.join(sorted(table))}")
            kinds.append(table[t])
        return kinds
    if family == "gemma2":
        return ["window" if i % 2 == 0 else "full" for i in range(n_layers)]
    if family == "gemma3":
        pattern = c.int("sliding_window_pattern", default=6)
        return ["full" if (i + 1) % pattern == 0 else "window" for i in range(n_layers)]
    if family == "gpt_oss":
        return ["window" if i % 2 == 0 else "full" for i in range(n_layers)]
    if family == "jamba":
        period, offset = c.int("attn_layer_period"), c.int("attn_layer_offset")
        return ["full" if i % period == offset else "ssm" for i in range(n_layers)]
    if family == "qwen3_next":
        interval = c.int("full_attention_interval")
        return ["full" if (i + 1) % interval == 0 else "ssm" for i in range(n_layers)]
    if family == "falcon_h1":
        return ["both"] * n_layers
    if family == "granitemoehybrid":
        raise InputError(f"{c.where}: missing field 'layer_types'")
    if family == "mistral" and c.d.get("sliding_window"):
        return ["window"] * n_layers
    if family in ("qwen2", "qwen3") and c.d.get("use_sliding_window") and c.d.get("sliding_window"):
        first = c.int("max_window_layers", default=n_layers)
        return ["window" if i >= first else "full" for i in range(n_layers)]
    return ["full"] * n_layers


def _ssm(c: _Cfg, family: str, hidden: int, n_ssm: int) -> dict:
    if family == "jamba":
        return {"kind": "mamba1", "n_layers": n_ssm, "d_inner": c.int("mamba_expand") * hidden,
                "d_state": c.int("mamba_d_state"), "d_conv": c.int("mamba_d_conv")}
    if family == "qwen3_next":
        return {"kind": "gated_deltanet", "n_layers": n_ssm, "n_k_heads": c.int("linear_num_key_heads"),
                "n_v_heads": c.int("linear_num_value_heads"), "k_head_dim": c.int("linear_key_head_dim"),
                "v_head_dim": c.int("linear_value_head_dim"), "d_conv": c.int("linear_conv_kernel_dim")}
    if family == "nemotron_h":
        return {"kind": "mamba2", "n_layers": n_ssm, "n_heads": c.int("mamba_num_heads"),
                "head_dim": c.int("mamba_head_dim"), "d_state": c.int("ssm_state_size"),
                "d_conv": c.int("conv_kernel"), "n_groups": c.int("n_groups", "mamba_n_groups"),
                # vLLM keeps Nemotron-H's SSM state in the checkpoint's mamba_ssm_cache_dtype, float32 by default
                # (vllm/model_executor/models/config.py, NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE)
                "state_dtype": {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(
                    str(c.d.get("mamba_ssm_cache_dtype", "float32")), "fp32")}
    # granitemoehybrid, falcon_h1: mamba_* fields
    return {"kind": "mamba2", "n_layers": n_ssm, "n_heads": c.int("mamba_n_heads"), "head_dim": c.int("mamba_d_head"),
            "d_state": c.int("mamba_d_state"), "d_conv": c.int("mamba_d_conv"), "n_groups": c.int("mamba_n_groups")}


def _params(c: _Cfg, family: str, kinds: list[str], hidden: int, n_heads: int, n_kv: int, head_dim: int,
            ssm: dict | None) -> tuple[float, float]:
    """(total, active) parameters estimated from the shapes."""
    vocab = c.int("vocab_size")
    tied = bool(c.d.get("tie_word_embeddings", family in ("gpt2", "gemma2", "gemma3")))
    embed = vocab * hidden * (1 if tied else 2)
    if family in ("deepseek_v2", "deepseek_v3"):
        nope, rope, vdim = c.int("qk_nope_head_dim"), c.int("qk_rope_head_dim"), c.int("v_head_dim")
        r_kv, r_q = c.int("kv_lora_rank"), c.int("q_lora_rank", default=0)
        q = hidden * r_q + r_q * n_heads * (nope + rope) if r_q else hidden * n_heads * (nope + rope)
        attn = q + hidden * (r_kv + rope) + r_kv * n_heads * (nope + vdim) + n_heads * vdim * hidden
    else:
        attn = hidden * head_dim * (2 * n_heads + 2 * n_kv)
    gated = family != "gpt2"
    dense_mlp = (3 if gated else 2) * hidden * c.int("intermediate_size", "n_inner", default=4 * hidden)

    # experts: (routed count, used per token, per-expert width, shared width, which layers)
    n_exp = c.int("n_routed_experts", "num_experts", "num_local_experts", default=0)
    k = c.int("num_experts_per_tok", "num_experts_per_token", "experts_per_token", default=0)
    total = active = float(embed)
    if ssm:
        d_inner = ssm.get("d_inner") or ssm.get("n_heads", 0) * ssm.get("head_dim", 0)
        if ssm["kind"] == "mamba1":
            dt_rank = c.int("mamba_dt_rank", default=-(-hidden // 16))
            s = (hidden * 2 * d_inner + d_inner * ssm["d_conv"] + d_inner * (dt_rank + 2 * ssm["d_state"])
                 + dt_rank * d_inner + d_inner * ssm["d_state"] + d_inner * hidden)
        elif ssm["kind"] == "mamba2":
            g = 2 * ssm["n_groups"] * ssm["d_state"]
            s = hidden * (2 * d_inner + g + ssm["n_heads"]) + (d_inner + g) * ssm["d_conv"] + d_inner * hidden
        else:
            kd, vd = ssm["n_k_heads"] * ssm["k_head_dim"], ssm["n_v_heads"] * ssm["v_head_dim"]
            s = hidden * (2 * kd + 2 * vd + 2 * ssm["n_v_heads"]) + (2 * kd + vd) * ssm["d_conv"] + vd * hidden
    for i, kind in enumerate(kinds):
        mix = {"full": attn, "window": attn, "none": 0}.get(kind, 0)
        if kind in ("ssm", "both"):
            mix = s + (attn if kind == "both" else 0)
        mlp_total = mlp_active = 0
        if family == "nemotron_h":
            pat = c.d.get("hybrid_override_pattern", "")
            ch = pat[i] if i < len(pat) else ""
            if ch == "-":
                mlp_total = mlp_active = 2 * hidden * c.int("intermediate_size")     # relu² MLP: up and down
            elif ch == "E":
                w = c.int("moe_intermediate_size")
                shared = 2 * hidden * c.int("moe_shared_expert_intermediate_size", default=0)
                mlp_total = n_exp * 2 * hidden * w + shared + hidden * n_exp
                mlp_active = k * 2 * hidden * w + shared + hidden * n_exp
        elif family in ("jamba", "qwen3_next", "granitemoehybrid", "gpt_oss", "deepseek_v2", "deepseek_v3"):
            is_moe = n_exp > 0
            if family == "jamba":
                is_moe = n_exp > 1 and i % c.int("expert_layer_period") == c.int("expert_layer_offset")
            if family in ("deepseek_v2", "deepseek_v3"):
                is_moe = i >= c.int("first_k_dense_replace", default=0) and i % c.int("moe_layer_freq", default=1) == 0
            if family == "qwen3_next" and i in (c.d.get("mlp_only_layers") or []):
                is_moe = False
            if is_moe:
                w = c.int("moe_intermediate_size", "intermediate_size")
                shared = 3 * hidden * (c.int("n_shared_experts", default=0) * w
                                       + c.int("shared_expert_intermediate_size", "shared_intermediate_size",
                                               default=0))
                mlp_total = n_exp * 3 * hidden * w + shared + hidden * n_exp
                mlp_active = k * 3 * hidden * w + shared + hidden * n_exp
            else:
                mlp_total = mlp_active = dense_mlp
        elif kind != "none" or family not in ("nemotron_h",):
            mlp_total = mlp_active = dense_mlp
        total += mix + mlp_total
        active += mix + mlp_active
    return float(total), float(active)


def profile_from_config(d: dict, where: str = "config.json", model_id: str = "config") -> ModelProfile:
    """Read the fields of one of ``FAMILIES`` and build a profile (validated like the bundled ones)."""
    top = d
    if isinstance(d.get("text_config"), dict):
        d = {**{k: v for k, v in d.items() if k != "text_config"}, **d["text_config"]}
    c = _Cfg(d, where)
    mt = str(top.get("model_type") or d.get("model_type") or "")
    family = _ALIASES.get(mt, mt)
    if family not in FAMILIES:
        raise InputError(f"{where}: model_type '{mt or '(missing)'}' is not supported; allowed: {', '.join(FAMILIES)}")
    n_layers = c.int("num_hidden_layers", "n_layer", "num_layers")
    n_heads = c.int("num_attention_heads", "n_head")
    n_kv = c.int("num_key_value_heads", default=n_heads)
    if n_kv == 0 or n_heads == 0 or n_layers == 0:
        raise InputError(f"{where}: num_hidden_layers, num_attention_heads and num_key_value_heads must be > 0")
    hidden = c.int("hidden_size", "n_embd", "d_model")
    head_dim = c.int("head_dim", default=hidden // n_heads if n_heads else 0)
    kinds = _layer_kinds(c, family, n_layers)
    if len(kinds) != n_layers and family != "nemotron_h":
        raise InputError(f"{where}: layer_types has {len(kinds)} entries for num_hidden_layers={n_layers}")
    n_full = sum(k in ("full", "both") for k in kinds)
    n_win = kinds.count("window")
    n_ssm = sum(k in ("ssm", "both") for k in kinds)
    prof = {"id": model_id, "name": f"{model_id} ({mt})", "n_layers": len(kinds), "n_heads": n_heads,
            "n_kv_heads": n_kv, "head_dim": head_dim, "hidden_size": hidden, "n_full_layers": n_full,
            "max_context": c.int("max_position_embeddings", "n_positions", "n_ctx"),
            "source": f"{where} (model_type {mt})"}
    if n_win:
        prof["n_window_layers"] = n_win
        prof["window"] = c.int("sliding_window")
    if family in ("deepseek_v2", "deepseek_v3"):
        prof["kv_lora_rank"] = c.int("kv_lora_rank")
        prof["qk_rope_head_dim"] = c.int("qk_rope_head_dim")
        prof["n_kv_heads"] = n_heads
        prof["head_dim"] = c.int("qk_nope_head_dim")
        if c.get("v_head_dim", default=None) is not None:   # V width of MLA prefill (roofline)
            prof["v_head_dim"] = c.int("v_head_dim")
    ssm = _ssm(c, family, hidden, n_ssm) if n_ssm else None
    if ssm:
        prof["ssm"] = ssm
    total, active = _params(c, family, kinds, hidden, n_heads, n_kv, head_dim, ssm)
    prof["params_total"], prof["params_active"] = total, active
    quant = (d.get("quantization_config") or {}).get("quant_method", "")
    if quant == "mxfp4":
        prof["native_dtype"] = "mxfp4"
    elif quant == "fp8":
        prof["native_dtype"] = "fp8"
    elif str(d.get("torch_dtype") or d.get("dtype") or "") == "float32":
        prof["native_dtype"] = "fp32"
    return profile_from_dict(prof, where)
