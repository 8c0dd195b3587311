"""A ``config.json``'s fields read the way ``transformers`` reads them: the text model's fields with their defaults,
the kind of every layer, the recurrent state's shape and the experts. Pure Python (any Python, the browser's too).

``configs`` builds a profile's cache from these, ``param_count`` its parameters; neither repeats how a field is read.
"""
from __future__ import annotations

from part1_capacity.calculator.base import validate
from part1_capacity.calculator.base.dtypes import config_dtype
from part1_capacity.calculator.base.errors import InputError

# the canonical name first, then the names families publish it under (transformers' attribute_map)
ALIASES = {
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim"),
    # every name vLLM reads a context length under (vllm/config/model.py, _get_and_verify_max_len's possible_keys)
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length",
                                "max_seq_len", "model_max_length", "max_seq_length", "seq_len"),  # MPT; Baichuan2
    "intermediate_size": ("intermediate_size", "n_inner", "ffn_hidden_size", "ff_intermediate_size"),  # Phi-3-small
    "vocab_size": ("vocab_size", "padded_vocab_size"),          # ChatGLM: the embedding's padded row count
    "tie_word_embeddings": ("tie_word_embeddings", "tie_embedding"),   # LFM2 (Lfm2Config pops it into the first)
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
        """A true/false field: the file's must be a JSON boolean (``"false"``, a string, is refused by name, never
        read as true); a default is the config class's own."""
        for key in ALIASES.get(name, (name,)):
            if self.file.get(key) is not None:
                return boolean(self.file[key], f"{self.where}: field '{key}'")
        v = self.raw(name)
        return default if v is None else bool(v)

    def dtype(self, *names, default=None):
        """The calculator's dtype for the first of ``names`` the file (else the defaults) states; ``default`` when
        none is stated. One table for every dtype a config names (``dtypes.config_dtype``)."""
        for src, where in ((self.file, self.where), (self.top, self.where.removesuffix(": text_config")),
                           (self.defaults, f"{self.where} (default)")):
            for name in names:
                if src.get(name) is not None:
                    return config_dtype(src[name], f"{where}: field '{name}'")
        return default


def boolean(v, field: str) -> bool:
    """A JSON ``true``/``false``; anything else refused by ``field``."""
    if not isinstance(v, bool):
        raise InputError(f"{field}: must be true or false, got {validate.show(v)}")
    return v


# true/false fields the calculator reads (the parameter count's biases and ties, the cache's attention kinds): a
# string "false" or a 0 is refused before transformers sees the file (it would read "false" as true)
BOOLEAN_FIELDS = ("tie_word_embeddings", "mlp_bias", "attention_bias", "qkv_bias", "use_qk_norm", "mamba_conv_bias",
                  "use_conv_bias", "mamba_proj_bias", "use_bias", "projectors_bias", "multi_query_attention",
                  "new_decoder_architecture", "multi_query", "use_sliding_window", "is_encoder_decoder", "use_cla",
                  "conv_bias", "block_auto_adjust_ff_dim", "attention_out_bias", "mla_use_output_gate", "tie_embedding",
                  "attention_k_eq_v", "latent_moe_use_norm")


# layer_types names → the calculator's layer kinds. "full": K/V of every token; "window": the last W tokens;
# "chunked": the tokens of the current chunk; "linear": a recurrent state (delta-net, lightning, Mamba);
# "both": attention and SSM side by side (Falcon-H1); "none": an MLP-only block.
KINDS = {"full_attention": "full", "attention": "full", "global": "full", "full": "full", "global_attention": "full",
         "indexed_attention": "full", "sliding_attention": "window", "sliding": "window", "local": "window",
         "local_attention": "window", "chunked_attention": "chunked", "linear_attention": "linear",
         "mamba": "linear", "mamba2": "linear", "ssm": "linear", "conv": "linear", "hybrid": "both", "mlp": "none", "moe": "none",
         "-": "none", "E": "none", "M": "linear", "*": "full",
         # DeepSeek-V4: each keeps a sliding window, the compressed entries beside it (config_fields.compressed_layers)
         "compressed_sparse_attention": "window", "heavily_compressed_attention": "window"}
# fields that mean the cache holds something the calculator does not model, and what that is
NOT_MODELLED = {
    "cross_attention_layers": "cross-attention layers cache the image encoder's K/V beside the text's",
    "is_encoder_decoder": "an encoder-decoder's cross-attention caches the encoder output per sequence",
    "kv_lora_rank_per_layer": "per-layer MLA latent widths",
    "use_cla": "cross-layer attention: adjacent layers share one K/V (Hunyuan's CLA)",
}


def nas_blocks(f: Fields) -> list[dict] | None:
    """DeciLM / Nemotron-NAS (Llama-3.3-Nemotron-Super-49B): ``block_configs`` sizes each layer — its attention
    (``n_heads_in_group`` query heads per K/V head, or ``no_op``: none) and its FFN (``ffn_mult``, or ``no_op``); the
    file's top-level num_key_value_heads and intermediate_size are null. Per layer ``{"kv": K/V heads or 0,
    "ffn": the FFN's inner width or 0}`` (DeciLM's modeling_decilm.py ``_ffn_mult_to_intermediate_size``:
    int(2 × ffn_mult × hidden / 3) rounded up to a multiple of 256), or None for a file without blocks. What the
    blocks may also hold and is not modelled — attention replaced by a linear map, windowed or sink attention,
    sparsified layers — is refused by name."""
    blocks = f.raw("block_configs")
    if blocks is None:
        return None
    n = f.int("num_hidden_layers", lo=1, hi=512)
    if not isinstance(blocks, list) or len(blocks) != n or not all(
            isinstance(b, dict) and isinstance(b.get("attention"), dict) and isinstance(b.get("ffn"), dict)
            for b in blocks):
        raise InputError(f"{f.where}: field 'block_configs' must be {n} objects, one per layer, each with "
                         "'attention' and 'ffn'")
    heads, hidden = f.int("num_attention_heads", lo=1, hi=1024), f.int("hidden_size", lo=1)
    out = []
    for i, b in enumerate(blocks):
        a, m = b["attention"], b["ffn"]
        for part, what in ((a, "attention"), (m, "ffn")):
            if part.get("replace_with_linear") or part.get("sparsify"):
                raise InputError(f"{f.where}: block_configs[{i}].{what}: a layer replaced by a linear map or "
                                 "sparsified is not modelled")
        if a.get("window_length") or a.get("num_sink_tokens"):
            raise InputError(f"{f.where}: block_configs[{i}].attention: windowed or sink attention in one layer is "
                             "not modelled")
        kv = 0
        if not a.get("no_op"):
            group = validate.number(a.get("n_heads_in_group"), f"{f.where}: block_configs[{i}].attention."
                                    "n_heads_in_group", lo=1, hi=heads, integer=True)
            if heads % group:
                raise InputError(f"{f.where}: block_configs[{i}].attention.n_heads_in_group ({group}) must divide "
                                 f"num_attention_heads ({heads})")
            kv = heads // group
        width = 0
        if not m.get("no_op"):
            mult = validate.number(m.get("ffn_mult"), f"{f.where}: block_configs[{i}].ffn.ffn_mult", lo=0.001,
                                   hi=64)
            width = int(2 * mult * hidden / 3)
            width = -(-width // 256) * 256
        out.append({"kv": kv, "ffn": width})
    counts = {b["kv"] for b in out if b["kv"]}
    if len(counts) > 1:
        raise InputError(f"{f.where}: block_configs: K/V head counts that differ by layer "
                         f"({', '.join(map(str, sorted(counts)))}): not modelled")
    return out


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
    blocks = nas_blocks(f)
    if blocks is not None:                     # Nemotron-NAS: attention where a block keeps it, else an FFN alone
        return ["full" if b["kv"] else "none" for b in blocks]
    kinds = _stated_kinds(f, f.file, n)
    if kinds is None:
        types = f.defaults.get("layer_types") or f.defaults.get("layers_block_type")
        if isinstance(types, list) and types and len(types) != n:
            period = next(p for p in range(1, len(types) + 1)
                          if all(types[i] == types[i % p] for i in range(len(types))))
            types = [types[i % period] for i in range(n)]
        kinds = named_kinds(f, types, n) if types else _stated_kinds(f, f.defaults, n)
    if kinds is not None:
        return kinds
    if attention_free(f):
        return ["linear"] * n
    window, longest = f.raw("sliding_window"), f.raw("max_position_embeddings")
    if window and f.raw("use_sliding_window") is not False and not (
            isinstance(window, int) and isinstance(longest, int) and window >= longest):
        return ["window"] * n
    # no window, or one no shorter than the longest context (Phi-4-mini: 262,144 for 131,072 positions): every
    # token stays in the cache, as in full attention
    return ["full"] * n


MAMBA_BLOCK = ("state_size", "conv_kernel", "expand")   # transformers' MambaConfig / Mamba2Config fields


def attention_free(f: Fields) -> bool:
    """A stack of Mamba blocks and nothing else (Mamba, Mamba-2, FalconMamba): the block's state fields
    (``state_size``, ``conv_kernel``, ``expand``) and no field that places attention layers. Every layer is
    recurrent; the cache holds no K/V, only one state per sequence and layer."""
    if any(f.raw(k) is None for k in MAMBA_BLOCK):
        return False
    return not any(f.raw(k) for k in ("layer_types", "layers_block_type", "hybrid_override_pattern",
                                      "attn_layer_period", "attn_layer_indices", "attn_type_list"))


def named_kinds(f: Fields, types, n: int) -> list[str]:
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
        return named_kinds(f, types, n)
    pattern = src.get("hybrid_override_pattern")
    if isinstance(pattern, str):                           # Nemotron-H: M (Mamba-2) * (attention) - (MLP) E (MoE)
        if len(pattern) != n:
            raise InputError(f"{f.where}: hybrid_override_pattern has {len(pattern)} entries for "
                             f"num_hidden_layers={n}")
        return [KINDS[c] for c in pattern]
    hybrid = src.get("hybrid_layer_pattern")               # MiMo-V2-Flash: 1 a sliding-window layer, 0 a full one
    if hybrid is not None:                                 # (before its attention_chunk_size, which no layer uses)
        if not isinstance(hybrid, list) or len(hybrid) != n or any(
                isinstance(x, bool) or x not in (0, 1) for x in hybrid):
            raise InputError(f"{f.where}: field 'hybrid_layer_pattern' must be {n} values of 0 (full attention) or "
                             f"1 (sliding window), got {validate.show(hybrid)}")
        return ["window" if x else "full" for x in hybrid]
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
    kda = src.get("linear_attn_config")                   # Kimi Linear: 1-based lists of KDA and attention layers
    if isinstance(kda, dict) and isinstance(kda.get("kda_layers"), list) \
            and isinstance(kda.get("full_attn_layers"), list):
        listed = kda["kda_layers"] + kda["full_attn_layers"]
        if sorted(x for x in listed if isinstance(x, int) and not isinstance(x, bool)) != list(range(1, n + 1)):
            raise InputError(f"{f.where}: linear_attn_config's kda_layers and full_attn_layers must number every "
                             f"layer 1 to {n} once, got {validate.show(kda['kda_layers'])} and "
                             f"{validate.show(kda['full_attn_layers'])}")
        return ["full" if i + 1 in kda["full_attn_layers"] else "linear" for i in range(n)]
    idxs = src.get("full_attn_idxs")                       # LFM2: attention at these layers, short convolutions
    if isinstance(idxs, list) and f.raw("conv_L_cache") is not None:     # elsewhere (Lfm2Config.__post_init__)
        if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n for i in idxs):
            raise InputError(f"{f.where}: field 'full_attn_idxs' must list layer indices below {n}, got "
                             f"{validate.show(idxs)}")
        return ["full" if i in idxs else "linear" for i in range(n)]
    if src.get("full_attention_interval") and (f.raw("linear_num_key_heads") or f.raw("linear_key_head_dim")):
        return ["linear" if local else "full" for local in _periodic(n, f.int("full_attention_interval", lo=1))]
    p = src.get("sliding_window_pattern") or src.get("_sliding_window_pattern")
    if p and f.raw("sliding_window") and f.raw("use_sliding_window") is not False:
        if isinstance(p, str):
            # letters (EXAONE 4: "LLLG"), repeated from layer 0, and the last layer global whatever its letter
            # (Exaone4Config's sliding_window_pattern); a file that lists its layer_types is read by those first
            return ["window" if p[i % len(p)] == "L" and i < n - 1 else "full" for i in range(n)]
        p = validate.number(p, f"{f.where}: field 'sliding_window_pattern'", lo=1, hi=512, integer=True)
        return ["window" if local else "full" for local in _periodic(n, p)]
    return None


def ssm_fields(f: Fields, n_layers: int) -> dict:
    """The recurrent layers' state shape, by the fields that describe it (the state size itself comes from the
    lesson-03 laws in ``profiles.ssm_from_dict``)."""
    g = f.int
    kda = f.raw("linear_attn_config")
    if isinstance(kda, dict) or (f.raw("linear_num_heads") is not None and f.raw("linear_head_dim") is not None):
        # Kimi Delta Attention: q, k, v of num_heads × head_dim through short convolutions, a head_dim² state per
        # head kept in float32 by vLLM whatever the cache dtype (mamba_utils.py kda_state_shape / kda_state_dtype)
        kda = kda if isinstance(kda, dict) else {}

        def pick(key, name):
            v = kda.get(key, f.raw(name))
            return validate.number(v, f"{f.where}: field 'linear_attn_config.{key}'", lo=1, hi=4096, integer=True)
        return {"kind": "kda", "n_layers": n_layers, "n_heads": pick("num_heads", "linear_num_heads"),
                "head_dim": pick("head_dim", "linear_head_dim"),
                "d_conv": pick("short_conv_kernel_size", "linear_conv_kernel_dim"), "state_dtype": "fp32"}
    if f.raw("linear_num_key_heads") is not None or f.raw("linear_key_head_dim") is not None:
        out = {"kind": "gated_deltanet", "n_layers": n_layers, "n_k_heads": g("linear_num_key_heads", lo=1),
               "n_v_heads": g("linear_num_value_heads", lo=1), "k_head_dim": g("linear_key_head_dim", lo=1),
               "v_head_dim": g("linear_value_head_dim", lo=1), "d_conv": g("linear_conv_kernel_dim", lo=1)}
        state = f.dtype("mamba_ssm_cache_dtype", "mamba_ssm_dtype")
        if state is not None:
            # the checkpoint names the state's dtype (Qwen3.5: "mamba_ssm_dtype": "float32"), which vLLM follows
            out["state_dtype"] = state
        return out
    heads = f.first("mamba_n_heads", "mamba_num_heads", "n_mamba_heads")
    if heads is not None:
        def pick(*names):          # the name the file uses, else the first the defaults give
            return next((n for n in names if n in f.file), None) or next(
                (n for n in names if f.raw(n) is not None), names[0])
        # Bamba / Granite / Falcon-H1 names, Nemotron-H's, Zamba2's (n_mamba_heads, mamba_headdim, mamba_ngroups)
        hn = pick("mamba_n_heads", "mamba_num_heads", "n_mamba_heads")
        hd = pick("mamba_d_head", "mamba_head_dim", "mamba_headdim")
        ds = pick("mamba_d_state", "ssm_state_size")
        dc = pick("mamba_d_conv", "conv_kernel")
        ng = pick("mamba_n_groups", "n_groups", "mamba_ngroups")
        if f.raw(hd) in (None, "auto") and f.raw("mamba_d_ssm"):
            head_dim = g("mamba_d_ssm", lo=1) // g(hn, lo=1)
        else:
            head_dim = g(hd, lo=1)
        out = {"kind": "mamba2", "n_layers": n_layers, "n_heads": g(hn, lo=1), "head_dim": head_dim,
               "d_state": g(ds, lo=1), "d_conv": g(dc, lo=1), "n_groups": g(ng, lo=1)}
        cache = f.dtype("mamba_ssm_cache_dtype")
        archs = f.top.get("architectures")
        if cache is not None or (isinstance(archs, list) and "NemotronHForCausalLM" in archs):
            # vLLM keeps Nemotron-H's SSM state in the checkpoint's mamba_ssm_cache_dtype, float32 by default
            # (vllm/model_executor/models/config.py, NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE)
            out["state_dtype"] = cache or "fp32"
        return out
    if f.raw("mamba_expand") is not None and f.raw("mamba_d_state") is not None:
        return {"kind": "mamba1", "n_layers": n_layers, "d_inner": g("mamba_expand", lo=1) * g("hidden_size", lo=1),
                "d_state": g("mamba_d_state", lo=1), "d_conv": g("mamba_d_conv", lo=1)}
    if attention_free(f):
        # Mamba-2 (Mamba2Config: num_heads × head_dim = expand × hidden, n_groups B/C groups), else Mamba-1
        # (MambaConfig: intermediate_size = expand × hidden channels, each with a state_size state)
        if f.file.get("n_groups") is not None or f.defaults.get("n_groups") is not None:
            return {"kind": "mamba2", "n_layers": n_layers, "n_heads": g("num_heads", lo=1),
                    "head_dim": g("head_dim", lo=1), "d_state": g("state_size", lo=1),
                    "d_conv": g("conv_kernel", lo=1), "n_groups": g("n_groups", lo=1)}
        d_inner = g("intermediate_size", g("expand", lo=1) * g("hidden_size", lo=1), lo=1)
        return {"kind": "mamba1", "n_layers": n_layers, "d_inner": d_inner, "d_state": g("state_size", lo=1),
                "d_conv": g("conv_kernel", lo=1)}
    if f.raw("conv_L_cache") is not None:
        # LFM2's gated short convolution: a depthwise convolution over the hidden size, its window of conv_L_cache
        # inputs (Lfm2ShortConv; vLLM's MambaStateShapeCalculator.short_conv_state_shape)
        return {"kind": "short_conv", "n_layers": n_layers, "d_inner": g("hidden_size", lo=1),
                "d_conv": g("conv_L_cache", lo=1, hi=64)}
    if f.raw("block_size") is not None or f.raw("attn_type_list") is not None or f.raw("linear_attn_alpha_factor"):
        # lightning attention (MiniMax): per head a head_dim × head_dim matrix, no convolution
        heads = g("num_attention_heads", lo=1)
        return {"kind": "lightning", "n_layers": n_layers, "n_heads": heads, "head_dim": head_dim_of(f, heads)}
    raise InputError(f"{f.where}: recurrent (linear-attention) layers whose state shape the config does not give "
                     "(no Mamba, gated DeltaNet or lightning-attention fields): not modelled")


def kv_heads(f: Fields, heads: int) -> int:
    """K/V heads, by every way a config states them: ``num_key_value_heads``; multi-query attention with K/V
    groups (ChatGLM's ``multi_query_attention`` + ``multi_query_group_num``, Falcon's ``num_kv_heads`` under its
    ``new_decoder_architecture``) or with one shared head (``multi_query``: GPT-BigCode, Falcon-7B); else one
    per query head (MHA)."""
    if f.raw("num_key_value_heads") is not None:
        return f.int("num_key_value_heads", lo=1, hi=1024)
    blocks = nas_blocks(f)
    if blocks is not None:                     # Nemotron-NAS: the one K/V head count its attention blocks share
        return max(b["kv"] for b in blocks) or 1
    if f.flag("multi_query_attention") and f.raw("multi_query_group_num") is not None:
        return f.int("multi_query_group_num", lo=1, hi=1024)
    if f.raw("num_kv_heads") is not None and (f.flag("new_decoder_architecture") or not f.flag("multi_query")):
        return f.int("num_kv_heads", lo=1, hi=1024)
    return 1 if f.flag("multi_query") or f.flag("multi_query_attention") else heads


def kv_widths_by_type(f: Fields, heads: int, n_kv: int, head_dim: int) -> tuple[tuple, tuple]:
    """((K/V heads, key width, value width) of a full-attention layer, the same of a sliding-window layer), by the
    fields that give a layer type its own:

    - Gemma 4 (``Gemma4TextConfig.__post_init__``, vllm/model_executor/models/gemma4.py): the global (full) layers'
      heads are ``global_head_dim`` wide, and they have ``num_global_key_value_heads`` K/V heads when
      ``attention_k_eq_v`` (the value is the key's projection, cached beside it all the same); the sliding layers
      keep ``num_key_value_heads`` × ``head_dim``;
    - MiMo-V2-Flash (vllm/model_executor/models/mimo_v2_flash.py): its sliding layers' ``swa_num_key_value_heads``,
      ``swa_head_dim`` and ``swa_v_head_dim``, the full layers' values ``v_head_dim`` wide beside keys of
      ``head_dim`` (its sliding layers' query heads, ``swa_num_attention_heads``, must equal the full layers').

    Without these fields both are ``(n_kv, head_dim, head_dim)``."""
    full = window = (n_kv, head_dim, head_dim)
    if any(f.raw(k) is not None for k in ("swa_num_key_value_heads", "swa_head_dim", "swa_v_head_dim")):
        if f.raw("swa_num_attention_heads") is not None and \
                f.int("swa_num_attention_heads", lo=1, hi=1024) != heads:
            raise InputError(f"{f.where}: swa_num_attention_heads ({f.raw('swa_num_attention_heads')}) differs from "
                             f"num_attention_heads ({heads}): query heads that differ by layer type are not modelled")
        k = f.int("swa_head_dim", head_dim, lo=1, hi=4096)
        window = (f.int("swa_num_key_value_heads", n_kv, lo=1, hi=1024), k, f.int("swa_v_head_dim", k, lo=1, hi=4096))
        full = (n_kv, head_dim, f.int("v_head_dim", head_dim, lo=1, hi=4096))
    elif f.raw("global_head_dim") is not None or f.raw("num_global_key_value_heads") is not None:
        g = f.int("global_head_dim", head_dim, lo=1, hi=4096)
        g_kv = n_kv
        if f.raw("num_global_key_value_heads") is not None and f.flag("attention_k_eq_v", True):
            g_kv = f.int("num_global_key_value_heads", lo=1, hi=1024)
        full = (g_kv, g, g)
    elif f.raw("v_head_dim") is not None:
        full = window = (n_kv, head_dim, f.int("v_head_dim", lo=1, hi=4096))
    return full, window                 # heads divisible by each: checked with the profile (profiles.py)


# DeepSeek-V4's layer types as transformers' DeepseekV4Config names them, and the per-layer compress_ratios of the
# published files (_COMPRESS_RATIO_TO_LAYER_TYPE): 0 a layer with its sliding window alone, 4 compressed sparse
# attention (an indexer, overlapping groups), 128 heavily compressed attention (neither). Every such layer also keeps
# its sliding window, so layer_kinds reads each as a window layer.
V4_LAYER_TYPES = {"sliding_attention": 0, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}
COMPRESS_RATIOS = {r: t for t, r in V4_LAYER_TYPES.items()}
INDEXED_TYPE = "compressed_sparse_attention"


def compress_schedule(f: Fields, n: int) -> list[tuple[str, int]] | None:
    """DeepSeek-V4's (layer type, compression ratio) per layer, or None for another model: from the file's
    ``compress_ratios`` (one per layer; entries past the ``n`` layers are the multi-token-prediction module's, which
    transformers does not build), else from ``layer_types`` naming the compressed types with ``compress_rates``
    (transformers' own format), as transformers' DeepseekV4Config reads both."""
    ratios = f.raw("compress_ratios")
    if ratios is not None:
        where = f"{f.where}: field 'compress_ratios'"
        allowed = ", ".join(str(r) for r in COMPRESS_RATIOS)
        if not isinstance(ratios, list) or len(ratios) < n:
            raise InputError(f"{where} must list one ratio per layer ({n}), each one of {allowed}; got "
                             f"{validate.show(ratios)}")
        bad = [r for r in ratios[:n] if isinstance(r, bool) or r not in COMPRESS_RATIOS]
        if bad:
            raise InputError(f"{where}: ratio {validate.show(bad[0])} not modelled; allowed: {allowed}")
        return [(COMPRESS_RATIOS[r], r) for r in ratios[:n]]
    types = f.raw("layer_types")
    if not isinstance(types, list) or not any(t in V4_LAYER_TYPES and V4_LAYER_TYPES[t] for t in types):
        return None
    rates = {**{t: r for t, r in V4_LAYER_TYPES.items() if r}, **(f.raw("compress_rates") or {})}
    out = []
    for t in types[:n]:
        if t not in V4_LAYER_TYPES:
            raise InputError(f"{f.where}: layer type {validate.show(t)} beside compressed layers: not modelled")
        out.append((t, validate.number(rates.get(t, 0), f"{f.where}: field 'compress_rates'.{t}", lo=0, hi=1 << 20,
                                       integer=True)))
    return out


def compressed_layers(f: Fields, n: int) -> tuple | None:
    """DeepSeek-V4's compressed layers (``compress_schedule``): a tuple of (ratio, layers, index_head_dim) per kind
    of compressed layer in use — the compressed sparse attention layers with the indexer's key of
    ``index_head_dim`` beside each entry, the heavily compressed ones without — or None for another model."""
    schedule = compress_schedule(f, n)
    if schedule is None:
        return None
    out = []
    for t in ("compressed_sparse_attention", "heavily_compressed_attention"):
        layers = [r for kind, r in schedule if kind == t]
        if layers:
            if not layers[0]:
                raise InputError(f"{f.where}: field 'compress_rates'.{t} must be a positive integer, got 0")
            out.append((layers[0], len(layers), f.int("index_head_dim", lo=1, hi=4096) if t == INDEXED_TYPE else 0))
    return tuple(out)


def sparse_index(f: Fields, n: int) -> tuple[int, int] | None:
    """MiniMax-M3's block-sparse attention (``sparse_attention_config``, read as transformers'
    ``MiniMaxM3VLTextConfig`` reads it): (the layers whose lightning indexer caches a key per token — those
    ``sparse_attention_freq`` marks 1 — and the key's width ``sparse_index_dim``), or None without one. The indexer
    caches one key head per token and no value (``sparse_disable_index_value`` on every sparse layer); an index value
    cached beside it is refused by name."""
    cfg = f.raw("sparse_attention_config")
    if cfg is None or cfg is False:
        return None
    where = f"{f.where}: field 'sparse_attention_config'"
    if not isinstance(cfg, dict):
        raise InputError(f"{where} must be a JSON object, got {validate.show(cfg)}")
    if cfg.get("use_sparse_attention") is False:
        return None
    freq = cfg.get("sparse_attention_freq")
    off = cfg.get("sparse_disable_index_value", [])
    for key, v in (("sparse_attention_freq", freq), ("sparse_disable_index_value", off)):
        if not isinstance(v, list) or len(v) < n or any(isinstance(x, bool) or x not in (0, 1) for x in v):
            raise InputError(f"{where}.{key} must be {n} values of 0 or 1, got {validate.show(v)}")
    sparse = [i for i in range(n) if freq[i]]
    if any(not off[i] for i in sparse):
        raise InputError(f"{where}: sparse layers whose indexer caches an index value beside its key "
                         "(sparse_disable_index_value 0): not modelled")
    dim = validate.number(cfg.get("sparse_index_dim"), f"{where}.sparse_index_dim", lo=1, hi=4096, integer=True)
    return (len(sparse), dim) if sparse else None


def head_dim_of(f: Fields, heads: int) -> int:
    hd = f.raw("head_dim")
    if hd is not None:
        return f.int("head_dim", lo=1, hi=4096)
    return f.int("hidden_size", lo=1) // heads


def experts(f: Fields) -> tuple[int, int]:
    """(routed experts per MoE layer, experts each token uses): 0, 0 for a dense model."""
    e = f.first("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts") or 0
    if isinstance(e, list) or not e or e == 1:
        return 0, 0
    k = f.first("num_experts_per_tok", "experts_per_token", "moe_topk", "num_experts_per_token",
                "top_k_experts")                                        # Gemma 4
    if isinstance(k, list):
        k = k[0] if len(set(k)) == 1 else None
    if k is None:
        raise InputError(f"{f.where}: {e} experts but no experts-per-token field (num_experts_per_tok)")
    e = validate.number(e, f"{f.where}: experts", lo=2, hi=4096, integer=True)
    k = validate.number(k, f"{f.where}: field 'num_experts_per_tok'", lo=1, hi=e, integer=True)
    return e, k
