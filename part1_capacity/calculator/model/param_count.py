"""A model's parameters, counted from its ``config.json`` fields alone: pure Python, no ``transformers``, no torch.

``count_parameters`` lists the text model's (name, shape) pairs: embeddings, attention (GQA with its biases, norms,
sinks and gates; MLA with DeepSeek-V3.2's indexer), dense and expert MLPs (routed, shared, dense-first layers) and
recurrent blocks (Mamba-1, Mamba-2, gated DeltaNet, lightning attention). ``count_model_parameters`` adds the vision
tower a multimodal checkpoint loads with it (SigLIP for Gemma 3, the Qwen3-VL tower, Llama 4's), named as
``transformers`` names them so ``MULTIMODAL`` tells them apart.

What the fields do not say — how many norms a layer has, whether a family's q/k/v carry biases whatever its
``attention_bias``, whether its experts are gated — is each family's modelling code in ``transformers`` (5.24, the
pinned version): ``LAYOUTS`` below, one row per family, each checked against ``transformers``' own model built on
PyTorch's meta device for a published config (tests/calculator/model/test_families.py): the totals are equal to the parameter.
Names follow ``transformers``' modules where a rule reads them (``.experts.`` for the routed experts, ``gate`` and
``router`` for routers a quantized checkpoint keeps in bf16); a fused matrix may stand for two of theirs.
"""
from __future__ import annotations

import re

from part1_capacity.calculator.base import validate
from part1_capacity.calculator.model.config_fields import (Fields, attention_free, boolean, experts, head_dim_of,
                                                           kv_heads, kv_widths_by_type, layer_kinds, nas_blocks,
                                                           ssm_fields)
from part1_capacity.calculator.base.errors import InputError

# a parameter of a vision or audio tower (or its projector): loaded by a server, not run for a text token
MULTIMODAL = re.compile(r"(^|\.)(vision_tower|vision_model|visual|multi_modal_projector|audio_tower|"
                        r"embed_vision|embed_audio|audio_model|vision_embed|mm_projector)\.")


def numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def is_routed_expert(name: str) -> bool:
    return ".experts." in name


# --- what each family's modelling code builds beyond its fields (transformers 5.24, models/<type>/modeling_*.py) ---
# norms: the per-layer norms of hidden_size; qkv_bias: q/k/v biases whatever attention_bias says (Qwen2);
# qk_norm: "head" (q_norm/k_norm of head_dim), "full" (of heads × head_dim: OLMo 2); gated_query: q_proj doubled for
# an output gate per head (Qwen3-Next, Qwen3.5); sinks: a learned sink logit per head (gpt-oss);
# expert_bias: router and expert biases (gpt-oss); plain: un-gated MLPs and experts, up and down only
# (Nemotron-H's squared ReLU); expert_width: the field of the routed experts' width; shared: the field of the
# always-on shared expert's width; shared_gate: a sigmoid gate of one output on it (Qwen2-MoE family);
# always_moe: every layer routes, one expert or many (Hunyuan); mamba_norm: the field that switches the gated norm
# of a Mamba-2 mixer (always there unless named); o_bias: False when attention_bias biases q/k/v alone and never
# the output projection (GLM-4.5: Glm4MoeAttention builds o_proj with bias=False); norm_bias: LayerNorms with a
# bias beside their weight (PhiMoE); ff_adjust: LFM2's MLP width rule; dense_first: the field of the dense layers
# before the first routed one (first_k_dense_replace unless named).
_QWEN_NEXT = {"qk_norm": "head", "gated_query": True, "shared_gate": True,
              "shared": "shared_expert_intermediate_size"}
_GEMMA = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm")
LAYOUTS = {
    "qwen2": {"qkv_bias": True},
    "qwen2_moe": {"shared_gate": True, "shared": "shared_expert_intermediate_size"},
    "qwen3": {"qk_norm": "head"}, "qwen3_moe": {"qk_norm": "head"},
    "qwen3_vl_moe_text": {"qk_norm": "head"}, "qwen3_vl_text": {"qk_norm": "head"},
    "qwen3_next": _QWEN_NEXT, "qwen3_5_moe_text": _QWEN_NEXT,
    "gemma2": {"norms": _GEMMA}, "gemma3_text": {"norms": _GEMMA, "qk_norm": "head"},
    "olmo2": {"norms": ("post_attention_layernorm", "post_feedforward_layernorm"), "qk_norm": "full"},
    "gpt_oss": {"sinks": True, "expert_bias": True, "expert_width": "intermediate_size"},
    "hunyuan_v1_moe": {"qk_norm": "head", "always_moe": True, "expert_width": "intermediate_size",
                       "shared": "intermediate_size"},
    "granitemoehybrid": {"expert_width": "intermediate_size", "shared": "shared_intermediate_size"},
    "nemotron_h": {"norms": ("norm",), "plain": True, "shared": "moe_shared_expert_intermediate_size"},
    "falcon_h1": {"norms": ("input_layernorm", "pre_ff_layernorm"), "mamba_norm": "mamba_rms_norm"},
    "llama4_text": {"shared": "intermediate_size"},
    "glm4_moe": {"o_bias": False},
    "mpt": {"plain": True},                       # MptMLP: up, GELU, down
    # EXAONE 4's reordered norms: after attention and after the MLP, none before; q/k RMS norms per head
    "exaone4": {"norms": ("post_attention_layernorm", "post_feedforward_layernorm"), "qk_norm": "head"},
    # rows read from each family's modeling file and checked at its class's default size (configs.census):
    # Cohere's parallel block, attention and MLP on one LayerNorm (no bias) of the same input
    "cohere": {"norms": ("input_layernorm",)}, "cohere2": {"norms": ("input_layernorm",)},
    "cohere2_moe": {"norms": ("input_layernorm",)},
    # GLM-4: norms before and after both attention and the MLP; attention_bias biases q/k/v, never o_proj
    "glm4": {"norms": ("input_layernorm", "post_attention_layernorm", "post_self_attn_layernorm",
                       "post_mlp_layernorm"), "o_bias": False},
    "glm": {"o_bias": False},
    # OLMo 3 and FlexOlmo keep OLMo 2's layer: norms after attention and after the MLP, q/k norms over all heads
    "olmo3": {"norms": ("post_attention_layernorm", "post_feedforward_layernorm"), "qk_norm": "full"},
    "flex_olmo": {"norms": ("post_attention_layernorm", "post_feedforward_layernorm"), "qk_norm": "full"},
    "hunyuan_v1_dense": {"qk_norm": "head"},     # query_layernorm / key_layernorm of head_dim
    "minimax_m2": {"qk_norm": "full"}, "olmoe": {"qk_norm": "full"},
    # PhiMoE: LayerNorms with biases
    "phimoe": {"norm_bias": True},
    # Granite with sliding windows: a learned sink logit per head, as gpt-oss
    "granite_swa": {"sinks": True}, "granitemoe_swa": {"sinks": True},
    # LFM2: a norm before the operator (attention or short convolution) and one before the MLP, q/k norms per head,
    # its MLP width adjusted from block_ff_dim (_adjusted_width)
    "lfm2": {"norms": ("operator_norm", "ffn_norm"), "qk_norm": "head", "ff_adjust": True},
    # Qwen3.5 dense: Qwen3-Next's gated query and per-head q/k norms, no experts; Arcee (AFM): an un-gated MLP
    "qwen3_5_text": {"qk_norm": "head", "gated_query": True}, "arcee": {"plain": True},
    # LFM2-MoE: LFM2's layer with routed experts after its first num_dense_layers dense ones (its MLP width as stated)
    "lfm2_moe": {"norms": ("operator_norm", "ffn_norm"), "qk_norm": "head", "dense_first": "num_dense_layers"},
    # Gemma 4 (models/gemma4/modeling_gemma4.py): Gemma's four norms, q/k norms of each layer type's head width; no
    # v_proj on global layers under attention_k_eq_v (the key's projection is the value); with enable_moe_block a
    # router and routed experts BESIDE the dense MLP, and three more norms; per-layer embeddings (PLE) when
    # hidden_size_per_layer_input; the last num_kv_shared_layers without k/v projections and norms (their MLP
    # twice as wide under use_double_wide_mlp)
    "gemma4_text": {"norms": _GEMMA, "qk_norm": "head", "gemma4": True},
    # MiMo-V2-Flash: a learned sink logit per head on its sliding-window layers; values v_head_dim wide
    "mimo_v2_flash": {"window_sinks": True},
    # MiniMax-M3 (its own code; transformers' MiniMaxM3VLTextConfig reads the same fields): q/k norms per head, its
    # dense layers dense_intermediate_size wide, a shared expert of shared_intermediate_size, and on each block-sparse
    # layer the lightning indexer's q (index heads × width) and k (one head) projections and their norms
    "minimax_m3": {"qk_norm": "head", "dense_width": "dense_intermediate_size", "shared": "shared_intermediate_size",
                   "indexer": True},
}


def _layout(f: Fields) -> tuple[str, dict]:
    """The family whose modelling code builds this text model: the class's own type (the defaults'), else the file's
    (a repository with its own code, or a type transformers lacks: MiniMax-M1)."""
    mt = f.defaults.get("model_type") or f.file.get("model_type") or f.top.get("model_type")
    return mt, LAYOUTS.get(mt, {})


def count_parameters(config: dict, defaults: dict | None = None, where: str = "config.json"):
    """(name, shape) of the text model's parameters, from its fields alone (no vision or audio tower)."""
    f = Fields(config, defaults, where)
    mt, lay = _layout(f)
    if mt == "gpt2":
        return _gpt2(f)
    if nas_blocks(f) is not None:
        return _nas(f, defaults)
    if mt == "deepseek_v4":
        return _deepseek_v4(f, defaults)
    if attention_free(f):
        return _mamba_stack(f)
    kinds = layer_kinds(f)
    D = f.int("hidden_size", lo=1)
    V = f.int("vocab_size", lo=1)
    H = f.int("num_attention_heads", lo=1)
    KV = kv_heads(f, H)
    hd = head_dim_of(f, H)
    I, dense_I, e, k, moe_I = _widths(f, lay, D)
    out = [("model.embed_tokens.weight", (V, D))]
    if not _tied(f, defaults):
        out.append(("lm_head.weight", (V, D)))
    dense_first = f.int(lay.get("dense_first", "first_k_dense_replace"), 0) if e else 0
    mlp_only = set(f.raw("mlp_only_layers") or [])
    # every step-th layer routes: Qwen-MoE's decoder_sparse_step, Llama 4's interleave_moe_layer_step (Maverick: 2,
    # Llama4TextConfig's moe_layers = range(step - 1, layers, step)), unless the file lists its moe_layers itself
    step = f.int("interleave_moe_layer_step" if f.raw("interleave_moe_layer_step") else "decoder_sparse_step", 1,
                 lo=1, hi=512) if e else 1
    mlp_types = f.raw("mlp_layer_types")
    if isinstance(f.raw("moe_layer_freq"), list):          # one 0/1 per layer (MiMo-V2-Flash)
        mlp_types = ["moe" if x else "dense" for x in f.raw("moe_layer_freq")]
    moe_listed = f.file.get("moe_layers")
    if isinstance(moe_listed, list):
        mlp_types = ["moe" if i in moe_listed else "dense" for i in range(len(kinds))]
    ssm = ssm_fields(f, 1) if any(x in ("linear", "both") for x in kinds) else None
    pattern = f.raw("hybrid_override_pattern")
    one_op_per_block = isinstance(pattern, str) and len(pattern) == len(kinds)
    norms = lay.get("norms", ("input_layernorm", "post_attention_layernorm"))
    kinds_of_norm = ("weight", "bias") if lay.get("norm_bias") else ("weight",)    # LayerNorm's bias, or RMS alone
    widths = {"full": (KV, hd, hd), "window": (KV, hd, hd)}
    if not f.raw("kv_lora_rank"):            # K/V heads and widths of each layer type (Gemma 4, MiMo-V2-Flash)
        widths["full"], widths["window"] = kv_widths_by_type(f, H, KV, hd)
    gemma4 = lay.get("gemma4")
    shared_from = len(kinds) - (f.int("num_kv_shared_layers", 0, hi=512) if gemma4 else 0)
    if gemma4:
        out += _gemma4_per_layer_embeddings(f, D, len(kinds))
    indexed = set()
    if lay.get("indexer") and isinstance(f.raw("sparse_attention_config"), dict):
        sparse = f.raw("sparse_attention_config")
        indexed = {i for i, x in enumerate(sparse.get("sparse_attention_freq") or []) if x}
    attn_res = _attention_residuals(f)
    for i, kind in enumerate(kinds):
        p = f"model.layers.{i}"
        out += [(f"{p}.{n}.{w}", (D,)) for n in norms for w in kinds_of_norm]
        if attn_res:
            out += _attn_res(p, ("self_attention_res", "mlp_res"), D)
        if kind in ("full", "window", "chunked", "both"):
            kv, k_dim, v_dim = widths["window" if kind == "window" else "full"]
            out += _attention(f, lay, p, D, H, kv, k_dim, v_dim, window=kind == "window",
                              no_kv=i >= shared_from,
                              no_v=bool(gemma4) and kind != "window" and f.flag("attention_k_eq_v"))
        if i in indexed:
            out += _m3_indexer(f, p, D)
        if gemma4:
            out += _gemma4_block(f, p, D, len(kinds), e, moe_I, I * (2 if i >= shared_from and
                                                                      f.flag("use_double_wide_mlp") else 1))
            continue
        if kind in ("linear", "both"):
            out += _recurrent(f, lay, p, D, ssm)
        moe = bool(e) and i >= dense_first and i not in mlp_only and (i + 1) % step == 0
        if isinstance(mlp_types, list) and i < len(mlp_types):
            moe = bool(e) and mlp_types[i] in ("sparse", "moe")
        if f.raw("expert_layer_period"):          # Jamba: experts every period-th layer from the offset
            moe = bool(e) and i % f.int("expert_layer_period", lo=1) == f.int("expert_layer_offset", 0)
        if lay.get("always_moe"):
            moe = True
        if one_op_per_block:                      # Nemotron-H: a block is a mixer or an MLP, never both
            if kind != "none":
                continue
            moe = bool(e) and pattern[i] == "E"
        out += _moe(f, lay, p, D, e, moe_I, I) if moe else _mlp(f, lay, f"{p}.mlp", D, dense_I)
    out += [(f"model.norm.{w}", (D,)) for w in kinds_of_norm]
    if attn_res:
        out += _attn_res("model", ("output_attn_res",), D)
    return out


def _attention_residuals(f: Fields) -> bool:
    """Kimi-K3's attention residuals (``attn_res_block_size``): each sublayer reads a softmax-weighted mix of the
    outputs of earlier blocks of layers in place of the plain residual. The block size only says where a block
    closes; the weights are the same on every layer (``_attn_res``)."""
    if f.raw("attn_res_block_size") in (None, False, 0):
        return False
    f.int("attn_res_block_size", lo=1, hi=512)
    return True


def _attn_res(p: str, names: tuple, D: int):
    """The weights of attention residuals, on every layer whatever ``attn_res_block_size`` (the tensors of
    moonshotai/Kimi-K3's 93 layers: ``self_attention_res_norm`` [7,168], ``self_attention_res_proj`` [1, 7,168] and
    the two ``mlp_res_*`` alike; one ``output_attn_res_*`` pair before the head): per mix an RMS norm of the hidden
    size and a one-output projection, the pseudo-query that scores each source."""
    return [x for n in names for x in ((f"{p}.{n}_norm.weight", (D,)), (f"{p}.{n}_proj.weight", (1, D)))]


def _widths(f: Fields, lay: dict, D: int) -> tuple[int, int, int, int, int]:
    """(intermediate_size, the dense layers' MLP width, routed experts, experts per token, one expert's width)."""
    inter = f.raw("intermediate_size")
    inter = inter[0] if isinstance(inter, list) else inter
    # no width stated: MPT states its MLP as expansion_ratio × hidden (4 by default, GPT-2's 4 × hidden alike)
    I = validate.number(inter or f.int("expansion_ratio", 4, lo=1, hi=64) * D, f"{f.where}: field 'intermediate_size'",
                        lo=1, integer=True)
    if lay.get("ff_adjust"):
        I = _adjusted_width(f)
    dense_I = f.int("intermediate_size_mlp", I, lo=1)          # Llama 4: its dense layers are wider than its experts
    if lay.get("dense_width"):
        dense_I = f.int(lay["dense_width"], I, lo=1)
    e, k = experts(f)
    if lay.get("always_moe") and not e:
        e = f.int("num_experts", 1, lo=1)
    width = lay.get("expert_width", "moe_intermediate_size")
    moe_I = (I if width == "intermediate_size" else _one_width(f, width, I)) if e else 0
    return I, dense_I, e, k, moe_I


def _adjusted_width(f: Fields) -> int:
    """LFM2's MLP width (models/lfm2/modeling_lfm2.py Lfm2MLP): its stated ``block_ff_dim`` (which the class reads
    before ``intermediate_size``), when ``block_auto_adjust_ff_dim`` is on taken to 2/3, times
    ``block_ffn_dim_multiplier``, rounded up to a multiple of ``block_multiple_of`` (LFM2-1.2B: 12,288 → 8,192)."""
    width = validate.number(f.first("block_ff_dim", "intermediate_size"), f"{f.where}: field 'block_ff_dim'", lo=1,
                            hi=2 ** 20, integer=True)
    if not f.flag("block_auto_adjust_ff_dim"):
        return width
    width = int(2 * width / 3)
    mult = f.raw("block_ffn_dim_multiplier")
    if mult is not None:
        mult = validate.number(mult, f"{f.where}: field 'block_ffn_dim_multiplier'", lo=0.01, hi=64)
        of = f.int("block_multiple_of", 256, lo=1, hi=2 ** 16)
        width = int(mult * width)
        width = of * ((width + of - 1) // of)
    return width


def mlp_shapes(config: dict, defaults: dict | None = None, where: str = "config.json") -> dict:
    """What an engine's start-up rule reads beyond the cache (``profiles.SHAPE_FIELDS``): the vocabulary, the dense
    MLP's inner width and, for experts, one expert's width and the experts each token uses; and whether the output
    head is the token embedding (``_tie_word_embeddings``, kept in the profile's ``extra``)."""
    f = Fields(config, defaults, where)
    _, lay = _layout(f)
    blocks = nas_blocks(f)
    if blocks is not None:            # Nemotron-NAS: the widest of its per-layer MLPs (the activations' peak)
        return {"vocab_size": f.int("vocab_size", lo=1), "intermediate_size": max(b["ffn"] for b in blocks) or 1}
    _, dense_I, e, k, moe_I = _widths(f, lay, f.int("hidden_size", lo=1))
    out = {"vocab_size": f.int("vocab_size", lo=1), "intermediate_size": dense_I,
           "_tie_word_embeddings": _tied(f, defaults)}      # llama.cpp's placement reads it (plan/offload.py)
    if e and k:
        out.update(moe_intermediate_size=moe_I, experts_per_token=k)
    return out


def _tied(f: Fields, defaults: dict | None) -> bool:
    """Whether the output head is the token embedding. A multimodal file that states ``tie_word_embeddings`` at
    its top level decides there (Qwen3-VL states false while its text class defaults to true: the head is its
    own); otherwise its text config decides, stated or by its class default (the rule ``hf_config.build`` gives
    transformers' composite configs)."""
    if f.top is not f.file and f.top.get("tie_word_embeddings") is not None:
        return boolean(f.top["tie_word_embeddings"], f"{f.where}: field 'tie_word_embeddings'")
    return f.flag("tie_word_embeddings")


def _one_width(f: Fields, name: str, default: int) -> int:
    """A width stated once, or once per layer with one value (Hunyuan's moe_intermediate_size)."""
    v = f.raw(name)
    if isinstance(v, list):
        if len(set(v)) != 1:
            raise InputError(f"{f.where}: field '{name}' gives different widths by layer ({validate.show(v)}): "
                             "experts whose width differs by layer are not modelled")
        v = v[0]
    return default if v is None else validate.number(v, f"{f.where}: field '{name}'", lo=1, integer=True)


def _mlp(f: Fields, lay: dict, p: str, D: int, I: int):
    """A dense MLP: gate, up and down (one fused gate_up matrix here), or up and down alone (plain)."""
    up = I if lay.get("plain") else 2 * I
    m = [(f"{p}.gate_up_proj.weight", (up, D)), (f"{p}.down_proj.weight", (D, I))]
    if f.flag("mlp_bias"):
        m += [(f"{p}.gate_up_proj.bias", (up,)), (f"{p}.down_proj.bias", (D,))]
    return m


def _attention(f: Fields, lay: dict, p: str, D: int, H: int, KV: int, hd: int, v_hd: int | None = None,
               window: bool = False, no_kv: bool = False, no_v: bool = False):
    """One layer's attention: q of ``H × hd``, k of ``KV × hd``, v of ``KV × v_hd`` (``v_hd``: the value width,
    ``hd`` unless a layer type gives its own), o from ``H × v_hd``. ``no_v``: the key's projection serves as the
    value (Gemma 4's global layers); ``no_kv``: a layer that reuses an earlier layer's K/V holds no k/v projection
    and no k norm (Gemma 4's shared layers); ``window``: a sliding-window layer (MiMo-V2-Flash's sinks)."""
    if f.raw("kv_lora_rank"):
        return _mla(f, p, D, H)
    v_hd = hd if v_hd is None else v_hd
    q_out = 2 * H * hd if lay.get("gated_query") else H * hd
    a = [(f"{p}.self_attn.q_proj.weight", (q_out, D)), (f"{p}.self_attn.k_proj.weight", (KV * hd, D)),
         (f"{p}.self_attn.v_proj.weight", (KV * v_hd, D)), (f"{p}.self_attn.o_proj.weight", (D, H * v_hd))]
    if lay.get("qkv_bias") or f.flag("attention_bias") or f.flag("qkv_bias"):
        a += [(f"{p}.self_attn.q_proj.bias", (q_out,)), (f"{p}.self_attn.k_proj.bias", (KV * hd,)),
              (f"{p}.self_attn.v_proj.bias", (KV * v_hd,))]
        if f.flag("attention_bias") and lay.get("o_bias", True) and f.raw("attention_out_bias") is None:
            a.append((f"{p}.self_attn.o_proj.bias", (D,)))
    if f.flag("attention_out_bias"):          # Seed-OSS: the output projection's bias has its own field
        a.append((f"{p}.self_attn.o_proj.bias", (D,)))
    norm = lay.get("qk_norm")
    weightless = f.raw("attn_temperature_tuning") is not None      # Llama 4's QK norm is an L2 norm, no weights
    if norm is None and f.flag("use_qk_norm") and not weightless:
        norm = "head"
    if norm == "head":
        a += [(f"{p}.self_attn.q_norm.weight", (hd,)), (f"{p}.self_attn.k_norm.weight", (hd,))]
    elif norm == "full":
        a += [(f"{p}.self_attn.q_norm.weight", (H * hd,)), (f"{p}.self_attn.k_norm.weight", (KV * hd,))]
    if lay.get("sinks") or (window and lay.get("window_sinks")):
        a.append((f"{p}.self_attn.sinks", (H,)))
    if no_kv or no_v:
        dropped = (".k_proj.", ".v_proj.", ".k_norm.") if no_kv else (".v_proj.",)
        a = [(n, shape) for n, shape in a if not any(x in n for x in dropped)]
    return a


def _m3_indexer(f: Fields, p: str, D: int):
    """MiniMax-M3's lightning indexer on a block-sparse layer (transformers' MiniMaxM3VLIndexer): q of
    ``sparse_num_index_heads`` × ``sparse_index_dim``, k of one head, a norm on each."""
    cfg = f.raw("sparse_attention_config")
    w = f"{f.where}: field 'sparse_attention_config'"
    dim = validate.number(cfg.get("sparse_index_dim"), f"{w}.sparse_index_dim", lo=1, hi=4096, integer=True)
    heads = validate.number(cfg.get("sparse_num_index_heads"), f"{w}.sparse_num_index_heads", lo=1, hi=1024,
                            integer=True)
    a = f"{p}.self_attn.indexer"
    return [(f"{a}.q_proj.weight", (heads * dim, D)), (f"{a}.k_proj.weight", (dim, D)),
            (f"{a}.q_norm.weight", (dim,)), (f"{a}.k_norm.weight", (dim,))]


def _deepseek_v4(f: Fields, defaults: dict | None):
    """DeepSeek-V4 (transformers' models/deepseek_v4/modeling_deepseek_v4.py): per layer a shared-K/V attention
    (q through a ``q_lora_rank`` bottleneck, one K=V head, a sink logit per head, the output through ``o_groups``
    grouped projections of ``o_lora_rank``), a compressor on its compressed layers (``compress_ratios``; on ratio-4
    layers two overlapping series, so twice as wide, and the lightning indexer with a compressor of its own), the
    MoE (a router, routed experts, ``n_shared_experts`` shared ones) and the hyper-connections that mix
    ``hc_mult`` copies of the residual stream around each half; one more on the head."""
    from part1_capacity.calculator.model.config_fields import INDEXED_TYPE, compress_schedule

    D, V = f.int("hidden_size", lo=1), f.int("vocab_size", lo=1)
    H, hd = f.int("num_attention_heads", lo=1), f.int("head_dim", lo=1)
    L = f.int("num_hidden_layers", lo=1, hi=512)
    q_rank, o_groups, o_rank = f.int("q_lora_rank", lo=1), f.int("o_groups", lo=1), f.int("o_lora_rank", lo=1)
    if (H * hd) % o_groups:
        raise InputError(f"{f.where}: field 'o_groups' ({o_groups}) must divide num_attention_heads × head_dim "
                         f"({H * hd})")
    e, _ = experts(f)
    moe_I = f.int("moe_intermediate_size", lo=1)
    shared_I = moe_I * f.int("n_shared_experts", 0, hi=64)
    hc = f.int("hc_mult", lo=1, hi=64)
    schedule = compress_schedule(f, L) or [("sliding_attention", 0)] * L
    out = [("model.embed_tokens.weight", (V, D))]
    if not _tied(f, defaults):
        out.append(("lm_head.weight", (V, D)))
    for i, (kind, ratio) in enumerate(schedule):
        p, a = f"model.layers.{i}", f"model.layers.{i}.self_attn"
        out += [(f"{a}.sinks", (H,)), (f"{a}.q_a_proj.weight", (q_rank, D)), (f"{a}.q_a_norm.weight", (q_rank,)),
                (f"{a}.q_b_proj.weight", (H * hd, q_rank)), (f"{a}.kv_proj.weight", (hd, D)),
                (f"{a}.kv_norm.weight", (hd,)), (f"{a}.o_a_proj.weight", (o_groups * o_rank, H * hd // o_groups)),
                (f"{a}.o_b_proj.weight", (D, o_groups * o_rank))]
        if ratio:
            out += _v4_compressor(f"{a}.compressor", D, ratio, hd, overlap=kind == INDEXED_TYPE)
        if kind == INDEXED_TYPE:
            ihd, ih = f.int("index_head_dim", lo=1), f.int("index_n_heads", lo=1)
            c = f"{a}.compressor.indexer"
            out += _v4_compressor(c, D, ratio, ihd, overlap=True)
            out += [(f"{c}.q_b_proj.weight", (ih * ihd, q_rank)), (f"{c}.scorer.weights_proj.weight", (ih, D))]
        out += [(f"{p}.mlp.gate.weight", (e, D)), (f"{p}.mlp.experts.gate_up_proj", (e, 2 * moe_I, D)),
                (f"{p}.mlp.experts.down_proj", (e, D, moe_I))]
        if shared_I:
            out += [(f"{p}.mlp.shared_experts.gate_proj.weight", (shared_I, D)),
                    (f"{p}.mlp.shared_experts.up_proj.weight", (shared_I, D)),
                    (f"{p}.mlp.shared_experts.down_proj.weight", (D, shared_I))]
        out += [(f"{p}.input_layernorm.weight", (D,)), (f"{p}.post_attention_layernorm.weight", (D,))]
        for h in ("attn_hc", "ffn_hc"):      # pre (hc), post (hc) and residual (hc × hc) mixes from hc × D inputs
            out += [(f"{p}.{h}.fn", ((2 + hc) * hc, hc * D)), (f"{p}.{h}.base", ((2 + hc) * hc,)),
                    (f"{p}.{h}.scale", (3,))]
    return out + [("model.norm.weight", (D,)), ("model.hc_head.hc_fn", (hc, hc * D)), ("model.hc_head.hc_base", (hc,)),
                  ("model.hc_head.hc_scale", (1,))]


def _v4_compressor(c: str, D: int, ratio: int, d: int, overlap: bool):
    """A DeepSeek-V4 compressor of entries ``d`` wide: K/V and gate projections (twice as wide with overlapping
    groups), a position bias per token of the group, a norm."""
    w = 2 * d if overlap else d
    return [(f"{c}.position_bias", (ratio, w)), (f"{c}.kv_proj.weight", (w, D)), (f"{c}.gate_proj.weight", (w, D)),
            (f"{c}.kv_norm.weight", (d,))]


def _gemma4_block(f: Fields, p: str, D: int, L: int, e: int, moe_I: int, I: int):
    """Gemma 4's feed-forward part of one layer (models/gemma4/modeling_gemma4.py Gemma4TextDecoderLayer): the dense
    gated MLP; with enable_moe_block a router (a scale per hidden unit, one per expert, the projection) and the
    routed experts beside it, with three more norms; with hidden_size_per_layer_input its per-layer-input gate,
    projection and norm."""
    out = _mlp(f, {}, f"{p}.mlp", D, I)
    if f.flag("enable_moe_block"):
        out += [(f"{p}.router.scale", (D,)), (f"{p}.router.per_expert_scale", (e,)), (f"{p}.router.proj.weight", (e, D)),
                (f"{p}.experts.gate_up_proj", (e, 2 * moe_I, D)), (f"{p}.experts.down_proj", (e, D, moe_I))]
        out += [(f"{p}.{n}.weight", (D,)) for n in ("post_feedforward_layernorm_1", "post_feedforward_layernorm_2",
                                                    "pre_feedforward_layernorm_2")]
    P = f.int("hidden_size_per_layer_input", 0)
    if P:
        out += [(f"{p}.per_layer_input_gate.weight", (P, D)), (f"{p}.per_layer_projection.weight", (D, P)),
                (f"{p}.post_per_layer_input_norm.weight", (D,))]
    return out


def _gemma4_per_layer_embeddings(f: Fields, D: int, L: int):
    """Gemma 4's per-layer embeddings (PLE, Gemma4TextModel): a table of ``hidden_size_per_layer_input`` per layer
    for each of ``vocab_size_per_layer_input`` tokens, its projection from the hidden size and a norm."""
    P = f.int("hidden_size_per_layer_input", 0)
    if not P:
        return []
    return [("model.embed_tokens_per_layer.weight", (f.int("vocab_size_per_layer_input", lo=1), L * P)),
            ("model.per_layer_model_projection.weight", (L * P, D)), ("model.per_layer_projection_norm.weight", (P,))]


def _mla(f: Fields, p: str, D: int, H: int):
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
    if f.flag("mla_use_output_gate"):
        # Kimi-K3: a sigmoid gate on the attention output per head and value channel, from the layer's input
        # (its checkpoint's self_attn.g_proj [96 × 128, 7,168] on each MLA layer), without a bias
        a.append((f"{p}.self_attn.g_proj.weight", (H * v, D)))
    if f.raw("index_head_dim") and f.raw("index_n_heads"):
        ih, ihd = f.int("index_n_heads", lo=1), f.int("index_head_dim", lo=1)
        a += [(f"{p}.self_attn.indexer.wq_b.weight", (ih * ihd, q or D)),
              (f"{p}.self_attn.indexer.wk.weight", (ihd, D)), (f"{p}.self_attn.indexer.k_norm.weight", (ihd,)),
              (f"{p}.self_attn.indexer.k_norm.bias", (ihd,)),
              (f"{p}.self_attn.indexer.weights_proj.weight", (ih, D))]
    return a


def _moe(f: Fields, lay: dict, p: str, D: int, e: int, I: int, inter: int):
    """Router, routed experts (gated: gate and up fused; plain: up only), and the always-on shared expert.

    A ``moe_latent_size`` (Nemotron 3 Super) routes in a narrower space: the token is projected down to it once
    (``fc1_latent_proj``), every routed expert reads and writes that width, and one projection brings it back
    (``fc2_latent_proj``); the router and the shared expert still see the hidden size
    (models/nemotron_h/modeling_nemotron_h.py NemotronHMoE, NemotronHExperts)."""
    up = I if lay.get("plain") else 2 * I
    latent = f.int("moe_latent_size", lo=1) if f.raw("moe_latent_size") else None
    k3_latent = f.int("routed_expert_hidden_size", lo=1) if f.raw("routed_expert_hidden_size") else None
    width = latent or k3_latent or D                  # what the routed experts read and write
    m = [(f"{p}.mlp.gate.weight", (e, D)), (f"{p}.mlp.experts.gate_up_proj", (e, up, width)),
         (f"{p}.mlp.experts.down_proj", (e, width, I))]
    if latent:
        m += _linear(f"{p}.mlp.fc1_latent_proj", latent, D, f.flag("mlp_bias")) + \
            _linear(f"{p}.mlp.fc2_latent_proj", D, latent, f.flag("mlp_bias"))
    if k3_latent:
        # Kimi-K3 (routed_expert_hidden_size): the same narrowing, one projection down before the experts and one
        # up after them, no bias, and with latent_moe_use_norm an RMS norm of the latent width before the up
        # projection (its checkpoint's block_sparse_moe.routed_expert_down_proj [3,584, 7,168], routed_expert_norm
        # [3,584], routed_expert_up_proj [7,168, 3,584]); the router and the shared experts read the hidden size
        m += [(f"{p}.mlp.routed_expert_down_proj.weight", (k3_latent, D)),
              (f"{p}.mlp.routed_expert_up_proj.weight", (D, k3_latent))]
        if f.flag("latent_moe_use_norm"):
            m.append((f"{p}.mlp.routed_expert_norm.weight", (k3_latent,)))
    if lay.get("expert_bias"):                    # gpt-oss: biased router and experts
        m += [(f"{p}.mlp.gate.bias", (e,)), (f"{p}.mlp.experts.gate_up_proj_bias", (e, up)),
              (f"{p}.mlp.experts.down_proj_bias", (e, D))]
    field = lay.get("shared")
    if field == "intermediate_size":
        shared = inter
    elif field:
        shared = f.int(field, 0)
    else:                  # DeepSeek: n_shared_experts experts of the routed width (Kimi: num_shared_experts)
        n = f.first("n_shared_experts", "num_shared_experts")
        shared = (0 if n is None else validate.number(n, f"{f.where}: field 'num_shared_experts'", lo=0, hi=1024,
                                                      integer=True)) * I
    if shared:
        m += _mlp(f, lay, f"{p}.mlp.shared_experts", D, shared)
    if shared and lay.get("shared_gate"):
        m.append((f"{p}.mlp.shared_expert_gate.weight", (1, D)))
    return m


def _recurrent(f: Fields, lay: dict, p: str, D: int, s: dict):
    kind = s["kind"]
    if kind == "kda":
        # Kimi Delta Attention (models/kimi_linear/modeling_kimi_linear.py KimiLinearDeltaAttention): q, k, v, one
        # depthwise convolution over the three, the forget gate's low-rank pair with its dt_bias and A_log, a beta
        # per head, the output gate's low-rank pair, a gated norm of head_dim and the output projection
        # (Kimi-K3's use_full_rank_gate: the output gate one full projection g_proj [heads × head_dim, hidden], as
        # its checkpoint's self_attn.g_proj [12,288, 7,168] on each KDA layer)
        H, d = s["n_heads"], s["head_dim"]
        qkv = H * d
        a = f"{p}.self_attn"
        cfg = f.raw("linear_attn_config")
        full_gate = isinstance(cfg, dict) and boolean(cfg.get("use_full_rank_gate", False),
                                                      f"{f.where}: field 'linear_attn_config.use_full_rank_gate'")
        gate = [(f"{a}.g_proj.weight", (qkv, D))] if full_gate else \
            [(f"{a}.g_a_proj.weight", (d, D)), (f"{a}.g_b_proj.weight", (qkv, d))]
        return [(f"{a}.q_proj.weight", (qkv, D)), (f"{a}.k_proj.weight", (qkv, D)), (f"{a}.v_proj.weight", (qkv, D)),
                (f"{a}.conv1d.weight", (3 * qkv, 1, s["d_conv"])),
                (f"{a}.forget_gate.f_a_proj.weight", (d, D)), (f"{a}.forget_gate.f_b_proj.weight", (qkv, d)),
                (f"{a}.forget_gate.dt_bias", (qkv,)), (f"{a}.forget_gate.A_log", (1, 1, H, 1)),
                (f"{a}.b_proj.weight", (H, D))] + gate + \
            [(f"{a}.o_norm.weight", (d,)), (f"{a}.o_proj.weight", (D, qkv))]
    if kind == "short_conv":
        # LFM2's gated short convolution (Lfm2ShortConv): B, C and x from one projection, a depthwise convolution
        # over the hidden size, an output projection; biases on all three when conv_bias
        bias = f.flag("conv_bias")
        return [(f"{p}.conv.conv.weight", (D, 1, s["d_conv"]))] + [(f"{p}.conv.conv.bias", (D,))] * bias + \
            _linear(f"{p}.conv.in_proj", 3 * D, D, bias) + _linear(f"{p}.conv.out_proj", D, D, bias)
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
        proj = d_in + conv + s["n_heads"]
        m = [(f"{p}.mamba.in_proj.weight", (proj, D)), (f"{p}.mamba.conv1d.weight", (conv, 1, s["d_conv"])),
             (f"{p}.mamba.dt_bias", (s["n_heads"],)), (f"{p}.mamba.A_log", (s["n_heads"],)),
             (f"{p}.mamba.D", (s["n_heads"],)), (f"{p}.mamba.out_proj.weight", (D, d_in))]
        if f.flag("mamba_conv_bias", True) and f.flag("use_conv_bias", True):
            m.append((f"{p}.mamba.conv1d.bias", (conv,)))
        if f.flag("mamba_proj_bias") or f.flag("use_bias"):
            m += [(f"{p}.mamba.in_proj.bias", (proj,)), (f"{p}.mamba.out_proj.bias", (D,))]
        elif f.flag("projectors_bias"):           # Falcon-H1: the output projection alone
            m.append((f"{p}.mamba.out_proj.bias", (D,)))
        if "mamba_norm" not in lay or f.flag(lay["mamba_norm"]):
            m.append((f"{p}.mamba.norm.weight", (d_in,)))
        return m
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


def _mamba_stack(f: Fields):
    """Mamba, Mamba-2, FalconMamba: norm + mixer per block, no attention and no MLP, the output head tied unless
    the file says otherwise (models/mamba/modeling_mamba.py MambaMixer, models/mamba2/modeling_mamba2.py
    Mamba2Mixer: in_proj → x, z (and B, C, dt for Mamba-2), a depthwise conv1d, A_log, D, out_proj)."""
    D, V = f.int("hidden_size", lo=1), f.int("vocab_size", lo=1)
    s = ssm_fields(f, f.int("num_hidden_layers", lo=1))
    bias, conv_bias = f.flag("use_bias"), f.flag("use_conv_bias", True)
    out = [("backbone.embeddings.weight", (V, D))]
    for i in range(s["n_layers"]):
        p = f"backbone.layers.{i}"
        if s["kind"] == "mamba2":
            d_in, nh = s["n_heads"] * s["head_dim"], s["n_heads"]
            conv = d_in + 2 * s["n_groups"] * s["d_state"]
            m = [("in_proj.weight", (d_in + conv + nh, D)), ("conv1d.weight", (conv, 1, s["d_conv"])),
                 ("dt_bias", (nh,)), ("A_log", (nh,)), ("D", (nh,)), ("norm.weight", (d_in,)),
                 ("out_proj.weight", (D, d_in))]
            m += [("conv1d.bias", (conv,))] * conv_bias + [("in_proj.bias", (d_in + conv + nh,)),
                                                           ("out_proj.bias", (D,))] * bias
        else:
            d_in, ds = s["d_inner"], s["d_state"]
            rank = f.raw("time_step_rank")
            rank = -(-D // 16) if rank in (None, "auto") else f.int("time_step_rank", lo=1)
            m = [("in_proj.weight", (2 * d_in, D)), ("conv1d.weight", (d_in, 1, s["d_conv"])),
                 ("x_proj.weight", (rank + 2 * ds, d_in)), ("dt_proj.weight", (d_in, rank)), ("dt_proj.bias", (d_in,)),
                 ("A_log", (d_in, ds)), ("D", (d_in,)), ("out_proj.weight", (D, d_in))]
            m += [("conv1d.bias", (d_in,))] * conv_bias + [("in_proj.bias", (2 * d_in,)),
                                                           ("out_proj.bias", (D,))] * bias
        out += [(f"{p}.norm.weight", (D,))] + [(f"{p}.mixer.{n}", shape) for n, shape in m]
    out.append(("backbone.norm_f.weight", (D,)))
    if not f.flag("tie_word_embeddings", True):
        out.append(("lm_head.weight", (V, D)))
    return out


def _nas(f: Fields, defaults: dict | None):
    """DeciLM / Nemotron-NAS (its own code, modeling_decilm.py DeciLMDecoderLayer): a layer holds its norm and
    Llama attention unless its block's attention is a no-op, and its norm and gated MLP of the block's width unless
    that is one."""
    D, V = f.int("hidden_size", lo=1), f.int("vocab_size", lo=1)
    H = f.int("num_attention_heads", lo=1)
    hd = head_dim_of(f, H)
    out = [("model.embed_tokens.weight", (V, D))]
    if not _tied(f, defaults):
        out.append(("lm_head.weight", (V, D)))
    for i, b in enumerate(nas_blocks(f)):
        p = f"model.layers.{i}"
        if b["kv"]:
            out += [(f"{p}.input_layernorm.weight", (D,))] + _attention(f, {}, p, D, H, b["kv"], hd)
        if b["ffn"]:
            out += [(f"{p}.post_attention_layernorm.weight", (D,))] + _mlp(f, {}, f"{p}.mlp", D, b["ffn"])
    out.append(("model.norm.weight", (D,)))
    return out


def _gpt2(f: Fields):
    """GPT-2: learned positions, one fused q/k/v matrix, biases and LayerNorms everywhere, a 4 × wide plain MLP,
    the output head tied to the token embedding (models/gpt2/modeling_gpt2.py)."""
    D, V, L = f.int("hidden_size", lo=1), f.int("vocab_size", lo=1), f.int("num_hidden_layers", lo=1)
    I = f.int("n_inner", 4 * D, lo=1) if f.raw("n_inner") is not None else 4 * D
    out = [("transformer.wte.weight", (V, D)), ("transformer.wpe.weight", (f.int("max_position_embeddings", lo=1), D))]
    for i in range(L):
        p = f"transformer.h.{i}"
        out += [(f"{p}.ln_1.weight", (D,)), (f"{p}.ln_1.bias", (D,)), (f"{p}.attn.c_attn.weight", (D, 3 * D)),
                (f"{p}.attn.c_attn.bias", (3 * D,)), (f"{p}.attn.c_proj.weight", (D, D)), (f"{p}.attn.c_proj.bias", (D,)),
                (f"{p}.ln_2.weight", (D,)), (f"{p}.ln_2.bias", (D,)), (f"{p}.mlp.c_fc.weight", (D, I)),
                (f"{p}.mlp.c_fc.bias", (I,)), (f"{p}.mlp.c_proj.weight", (I, D)), (f"{p}.mlp.c_proj.bias", (D,))]
    out += [("transformer.ln_f.weight", (D,)), ("transformer.ln_f.bias", (D,))]
    if not f.flag("tie_word_embeddings", True):
        out.append(("lm_head.weight", (V, D)))
    return out


# --- the vision towers a multimodal checkpoint loads beside its language model --------------------------------------
class _Sub:
    """A sub-config's fields (``vision_config``): the file's value, else the class default's."""

    def __init__(self, config: dict, defaults: dict | None, key: str, where: str):
        self.file = config.get(key) if isinstance(config.get(key), dict) else {}
        d = (defaults or {}).get(key)
        self.defaults = d if isinstance(d, dict) else {}
        self.where = f"{where}: {key}"

    def int(self, name, default=None, lo=0):
        v = self.file.get(name, self.defaults.get(name))
        if v is None:
            if default is None:
                raise InputError(f"{self.where}: missing field '{name}'")
            return default
        return validate.number(v, f"{self.where}: field '{name}'", lo=lo, hi=2 ** 31, integer=True)

    def raw(self, name):
        return self.file.get(name, self.defaults.get(name))


def _linear(name: str, out_f: int, in_f: int, bias=True):
    return [(f"{name}.weight", (out_f, in_f))] + ([(f"{name}.bias", (out_f,))] if bias else [])


def _layernorm(name: str, n: int):
    return [(f"{name}.weight", (n,)), (f"{name}.bias", (n,))]


def _siglip(v: _Sub, p: str):
    """SigLIP's vision transformer (models/siglip/modeling_siglip.py): a patch convolution, learned positions,
    pre-norm layers with biased attention and a GELU MLP, a final LayerNorm and, when asked, a pooling head."""
    h, I, C, P = v.int("hidden_size", lo=1), v.int("intermediate_size", lo=1), v.int("num_channels", 3, lo=1), \
        v.int("patch_size", lo=1)
    out = [(f"{p}.embeddings.patch_embedding.weight", (h, C, P, P)), (f"{p}.embeddings.patch_embedding.bias", (h,)),
           (f"{p}.embeddings.position_embedding.weight", ((v.int("image_size", lo=1) // P) ** 2, h))]
    for i in range(v.int("num_hidden_layers", lo=1)):
        q = f"{p}.encoder.layers.{i}"
        out += _layernorm(f"{q}.layer_norm1", h) + _layernorm(f"{q}.layer_norm2", h)
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            out += _linear(f"{q}.self_attn.{proj}", h, h)
        out += _linear(f"{q}.mlp.fc1", I, h) + _linear(f"{q}.mlp.fc2", h, I)
    out += _layernorm(f"{p}.post_layernorm", h)
    if v.raw("vision_use_head") in (None, True):  # SiglipMultiheadAttentionPoolingHead
        out += [(f"{p}.head.probe", (1, 1, h)), (f"{p}.head.attention.in_proj_weight", (3 * h, h)),
                (f"{p}.head.attention.in_proj_bias", (3 * h,))] + _linear(f"{p}.head.attention.out_proj", h, h)
        out += _layernorm(f"{p}.head.layernorm", h) + _linear(f"{p}.head.mlp.fc1", I, h) + \
            _linear(f"{p}.head.mlp.fc2", h, I)
    return out


def _gemma3_vision(config: dict, defaults: dict | None, where: str, text_hidden: int):
    """Gemma 3: SigLIP, then a projector of one matrix and an RMS norm (models/gemma3/modeling_gemma3.py)."""
    v = _Sub(config, defaults, "vision_config", where)
    h = v.int("hidden_size", lo=1)
    return _siglip(v, "model.vision_tower") + [("model.multi_modal_projector.mm_input_projection_weight", (h, text_hidden)),
                                               ("model.multi_modal_projector.mm_soft_emb_norm.weight", (h,))]


def _qwen3_vl_vision(config: dict, defaults: dict | None, where: str, text_hidden: int):
    """The Qwen3-VL vision tower (models/qwen3_vl_moe, qwen3_5_moe): a 3-D patch convolution, learned positions,
    pre-norm blocks with one fused q/k/v matrix, a merger of spatial_merge_size² patches, and one more merger per
    deepstack layer (their norm after the merge)."""
    v = _Sub(config, defaults, "vision_config", where)
    h, I = v.int("hidden_size", lo=1), v.int("intermediate_size", lo=1)
    C, P, T = v.int("in_channels", 3, lo=1), v.int("patch_size", lo=1), v.int("temporal_patch_size", lo=1)
    merged = h * v.int("spatial_merge_size", lo=1) ** 2
    out_h = v.int("out_hidden_size", lo=1)
    out = [("model.visual.patch_embed.proj.weight", (h, C, T, P, P)), ("model.visual.patch_embed.proj.bias", (h,)),
           ("model.visual.pos_embed.weight", (v.int("num_position_embeddings", lo=1), h))]
    for i in range(v.int("depth", lo=1)):
        q = f"model.visual.blocks.{i}"
        out += _layernorm(f"{q}.norm1", h) + _layernorm(f"{q}.norm2", h)
        out += _linear(f"{q}.attn.qkv", 3 * h, h) + _linear(f"{q}.attn.proj", h, h)
        out += _linear(f"{q}.mlp.linear_fc1", I, h) + _linear(f"{q}.mlp.linear_fc2", h, I)

    def merger(q, norm_width):
        return _layernorm(f"{q}.norm", norm_width) + _linear(f"{q}.linear_fc1", merged, merged) + \
            _linear(f"{q}.linear_fc2", out_h, merged)
    out += merger("model.visual.merger", h)
    for j in range(len(v.raw("deepstack_visual_indexes") or [])):
        out += merger(f"model.visual.deepstack_merger_list.{j}", merged)
    return out


def _llama4_vision(config: dict, defaults: dict | None, where: str, text_hidden: int):
    """Llama 4's vision encoder (models/llama4/modeling_llama4.py): patches unfolded into one matrix, a class token
    and learned positions, pre-norm layers with biased attention and MLP, a pixel-shuffle adapter, and the
    projector into the text model."""
    v = _Sub(config, defaults, "vision_config", where)
    h, I, C, P = v.int("hidden_size", lo=1), v.int("intermediate_size", lo=1), v.int("num_channels", 3, lo=1), \
        v.int("patch_size", lo=1)
    p = "vision_model"
    out = [(f"{p}.class_embedding", (h,)),
           (f"{p}.positional_embedding_vlm", ((v.int("image_size", lo=1) // P) ** 2 + 1, h)),
           (f"{p}.patch_embedding.linear.weight", (h, C * P * P))]
    out += _layernorm(f"{p}.layernorm_pre", h) + _layernorm(f"{p}.layernorm_post", h)
    for i in range(v.int("num_hidden_layers", lo=1)):
        q = f"{p}.model.layers.{i}"
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            out += _linear(f"{q}.self_attn.{proj}", h, h)
        out += _linear(f"{q}.mlp.fc1", I, h) + _linear(f"{q}.mlp.fc2", h, I)
        out += _layernorm(f"{q}.input_layernorm", h) + _layernorm(f"{q}.post_attention_layernorm", h)
    pin, pout = v.int("projector_input_dim", lo=1), v.int("projector_output_dim", lo=1)
    out += _linear(f"{p}.vision_adapter.mlp.fc1", pin, I, bias=False) + \
        _linear(f"{p}.vision_adapter.mlp.fc2", pout, pout, bias=False)
    out += _linear("multi_modal_projector.linear_1", text_hidden, v.int("vision_output_dim", lo=1), bias=False)
    return out


def _pixtral_vision(config: dict, defaults: dict | None, where: str, text_hidden: int):
    """Mistral 3's Pixtral tower (models/pixtral/modeling_pixtral.py): a patch convolution without bias, an RMS
    norm, pre-norm layers of unbiased attention and a gated MLP; then the projector (models/mistral3): an RMS norm,
    a patch merger of spatial_merge_size² patches and two matrices into the text model."""
    v = _Sub(config, defaults, "vision_config", where)
    h, I, C, P = v.int("hidden_size", lo=1), v.int("intermediate_size", lo=1), v.int("num_channels", 3, lo=1), \
        v.int("patch_size", lo=1)
    p = "model.vision_tower"
    out = [(f"{p}.patch_conv.weight", (h, C, P, P)), (f"{p}.ln_pre.weight", (h,))]
    for i in range(v.int("num_hidden_layers", lo=1)):
        q = f"{p}.transformer.layers.{i}"
        out += [(f"{q}.attention_norm.weight", (h,)), (f"{q}.ffn_norm.weight", (h,))]
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            out += _linear(f"{q}.attention.{proj}", h, h, bias=False)
        out += _linear(f"{q}.feed_forward.gate_proj", I, h, bias=False) + \
            _linear(f"{q}.feed_forward.up_proj", I, h, bias=False) + _linear(f"{q}.feed_forward.down_proj", h, I, bias=False)
    top = {**(defaults or {}), **config}          # the projector's fields sit at the top level
    merge = validate.number(top.get("spatial_merge_size", 2), f"{where}: field 'spatial_merge_size'", lo=1, hi=64,
                            integer=True)
    bias, layers = bool(top.get("multimodal_projector_bias")), top.get("vision_feature_layer")
    n_feat = len(layers) if isinstance(layers, list) else 1
    q = "model.multi_modal_projector"
    return out + [(f"{q}.norm.weight", (h * n_feat,))] + \
        _linear(f"{q}.patch_merger.merging_layer", h * n_feat, h * n_feat * merge ** 2, bias=False) + \
        _linear(f"{q}.linear_1", text_hidden, h * n_feat, bias=bias) + _linear(f"{q}.linear_2", text_hidden, text_hidden,
                                                                             bias=bias)


def _gemma4_vision(config: dict, defaults: dict | None, where: str, text_hidden: int):
    """Gemma 4's vision tower (models/gemma4/modeling_gemma4.py Gemma4VisionModel): patches projected by one matrix,
    a two-axis table of learned positions, pre- and post-normed layers of unbiased attention with q/k norms per head
    and a gated MLP; then one matrix into the text model (``embed_vision``). An audio tower (Gemma 4 E2B / E4B) is
    not counted here: ``counts_in_pure_python`` leaves such a file to transformers."""
    v = _Sub(config, defaults, "vision_config", where)
    h, I, P = v.int("hidden_size", lo=1), v.int("intermediate_size", lo=1), v.int("patch_size", lo=1)
    H = v.int("num_attention_heads", lo=1)
    KV, hd = v.int("num_key_value_heads", H, lo=1), v.int("head_dim", h // H, lo=1)
    p = "model.vision_tower"
    out = [(f"{p}.patch_embedder.position_embedding_table", (2, v.int("position_embedding_size", lo=1), h)),
           (f"{p}.patch_embedder.input_proj.weight", (h, 3 * P * P))]
    for i in range(v.int("num_hidden_layers", lo=1)):
        q = f"{p}.encoder.layers.{i}"
        for proj, shape in (("q_proj", (H * hd, h)), ("k_proj", (KV * hd, h)), ("v_proj", (KV * hd, h)),
                            ("o_proj", (h, H * hd))):
            out.append((f"{q}.self_attn.{proj}.linear.weight", shape))
        out += [(f"{q}.self_attn.q_norm.weight", (hd,)), (f"{q}.self_attn.k_norm.weight", (hd,))]
        out += [(f"{q}.mlp.{m}.linear.weight", (I, h) if m != "down_proj" else (h, I))
                for m in ("gate_proj", "up_proj", "down_proj")]
        out += [(f"{q}.{n}.weight", (h,)) for n in _GEMMA]
    return out + [("model.embed_vision.embedding_projection.weight", (text_hidden, h))]


# Kimi-K3's vision_config values whose tower _kimi_k3_vision counts; another value is a tower it does not know
_K3_VISION = {"pos_emb_type": "divided_fixed", "mm_projector_type": "patchmergerv2", "mlp_type": "mlp2",
              "norm_type": "rmsnorm", "attn_bias": False, "linear_bias": False, "patch_embed_proj_bias": False}


def _kimi_k3_vision(config: dict, defaults: dict | None, where: str, text_hidden: int):
    """Kimi-K3's vision tower and projector, as its checkpoint's tensors are (moonshotai/Kimi-K3: vision_tower.* and
    mm_projector.*, no bias anywhere): a patch convolution and a learned grid of init_pos_emb_height × _width
    positions (the time positions of divided_fixed are fixed, not weights); per block an RMS norm before attention
    and one before the MLP, one fused q/k/v matrix of 3 × qkv_hidden_size, its output projection, a two-matrix MLP
    (mlp2: fc0, fc1); a final norm; then the patch merger of merge_kernel_size patches (mm_hidden_size each) through
    two matrices into the text width and a norm there."""
    v = _Sub(config, defaults, "vision_config", where)
    for name, allowed in _K3_VISION.items():
        if v.raw(name) is not None and v.raw(name) != allowed:
            raise InputError(f"{v.where}: field '{name}' {validate.show(v.raw(name))}: a Kimi-K3 vision tower other "
                             f"than the published one is not modelled (allowed: {validate.show(allowed)})")
    h, I, Q, P = v.int("vt_hidden_size", lo=1), v.int("vt_intermediate_size", lo=1), v.int("qkv_hidden_size", lo=1), \
        v.int("patch_size", lo=1)
    kernel = v.raw("merge_kernel_size")
    if not (isinstance(kernel, list) and len(kernel) == 2 and all(isinstance(k, int) and 0 < k <= 64 for k in kernel)):
        raise InputError(f"{v.where}: field 'merge_kernel_size' must be two positive integers, got "
                         f"{validate.show(kernel)}")
    p = "vision_tower"
    out = [(f"{p}.patch_embed.proj.weight", (h, 3, P, P)),
           (f"{p}.patch_embed.pos_emb.weight",
            (v.int("init_pos_emb_height", lo=1), v.int("init_pos_emb_width", lo=1), h))]
    for i in range(v.int("vt_num_hidden_layers", lo=1)):
        q = f"{p}.encoder.blocks.{i}"
        out += [(f"{q}.norm0.weight", (h,)), (f"{q}.norm1.weight", (h,)), (f"{q}.wqkv.weight", (3 * Q, h)),
                (f"{q}.wo.weight", (h, Q)), (f"{q}.mlp.fc0.weight", (I, h)), (f"{q}.mlp.fc1.weight", (h, I))]
    merged = v.int("mm_hidden_size", lo=1) * kernel[0] * kernel[1]
    return out + [(f"{p}.encoder.final_layernorm.weight", (h,)), ("mm_projector.proj.0.weight", (merged, merged)),
                  ("mm_projector.proj.2.weight", (text_hidden, merged)),
                  ("mm_projector.post_norm.weight", (text_hidden,))]


def counts_in_pure_python(config: dict) -> bool:
    """Whether ``count_model_parameters`` counts everything this file's model loads: False for a tower it does not
    know (Gemma 4's audio tower, or clipped linears with their bounds) — such a file is counted by transformers."""
    if config.get("model_type") == "gemma4":
        vision = config.get("vision_config") if isinstance(config.get("vision_config"), dict) else {}
        return config.get("audio_config") is None and not vision.get("use_clipped_linears")
    return True


# top-level model_type → the prefix transformers gives its text model's parameters in place of "model."
LANGUAGE_MODEL_PREFIX = {"gemma4": "model.language_model."}
# top-level model_type → its vision tower and projector
TOWERS = {"gemma4": _gemma4_vision, "gemma3": _gemma3_vision, "qwen3_vl_moe": _qwen3_vl_vision, "qwen3_5_moe": _qwen3_vl_vision,
          "qwen3_5": _qwen3_vl_vision, "qwen3_vl": _qwen3_vl_vision,
          "llama4": _llama4_vision, "mistral3": _pixtral_vision, "kimi_k3": _kimi_k3_vision}


def count_model_parameters(config: dict, defaults: dict | None = None, where: str = "config.json"):
    """(name, shape) of everything a server loads: the text model and, for a multimodal checkpoint of a family in
    ``TOWERS``, its vision tower and projector (named so ``MULTIMODAL`` matches them). Another family's tower is
    left out: its type is not one the pure path plans (``configs.COUNTED``)."""
    text = count_parameters(config, defaults, where)
    mt = (defaults or {}).get("model_type") or config.get("model_type")
    if mt in LANGUAGE_MODEL_PREFIX:
        # the text model's names as transformers gives them (a quantized checkpoint's exclusions name them so:
        # nvidia/Gemma-4-31B-IT-NVFP4 leaves "model.language_model.layers.0.self_attn*" unconverted)
        text = [(LANGUAGE_MODEL_PREFIX[mt] + n[len("model."):] if n.startswith("model.") else n, s) for n, s in text]
    tower = TOWERS.get(mt)
    if tower is None or not (isinstance(config.get("vision_config"), dict)
                             or isinstance((defaults or {}).get("vision_config"), dict)):
        return text
    f = Fields(config, defaults, where)
    return text + tower(config, defaults, where, f.int("hidden_size", lo=1))
