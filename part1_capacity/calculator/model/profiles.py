"""Model profiles: the few numbers of a model's architecture that decide its inference memory.

A ``ModelProfile`` is loaded from the bundled table (``data/models.json``, every entry with its source);
``part1_capacity.calculator.model.configs`` builds one from a Hugging Face ``config.json`` and
``part1_capacity.calculator.readers.loader.load_model`` picks the way by its argument. Cache sizes come from the
lesson-03 laws (``part0_foundations.l03_kv_cache.laws``) — no cache formula is written here.

Units: bytes; ``T`` is tokens in context of one sequence (an int or a numpy array).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from part0_foundations.l03_kv_cache import laws
from part1_capacity.calculator.base.dtypes import closest
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.model.weights import groups_from_list

DATA = Path(__file__).resolve().parents[1] / "data"
STRUCTURES = tuple(laws.STRUCTURES)   # the structure ids, defined once beside the laws
# the shapes beyond the cache that an engine's start-up rule reads (vLLM's profile run: the vocabulary for the
# sampler, the MLP and expert widths for the activations), from the model's config.json
SHAPE_FIELDS = ("vocab_size", "intermediate_size", "moe_intermediate_size", "experts_per_token")
# K/V widths per layer type beside n_kv_heads and head_dim (the full layers'): see ModelProfile
KV_WIDTH_FIELDS = ("head_dim_v", "window_n_kv_heads", "window_head_dim", "window_head_dim_v")


@dataclass(frozen=True)
class SSM:
    """The recurrent layers of a hybrid: their kind, count and per-layer state shape."""
    kind: str                  # "mamba1", "mamba2", "gated_deltanet", "lightning", "short_conv" or "kda"
    n_layers: int
    state_elements: int        # constant state of one layer for one sequence, in elements
    n_heads: int = 1           # how the state splits under tensor parallelism
    conv_elements: int = 0     # of state_elements, the convolution's share (the rest: the SSM / delta-net matrix)
    state_dtype: str = ""      # the dtype the checkpoint asks servers to keep it in ("": the engine's default)


@dataclass(frozen=True)
class ModelProfile:
    id: str
    name: str
    n_layers: int              # all blocks
    n_heads: int               # query heads
    n_kv_heads: int            # K/V heads (== n_heads: MHA; 1: MQA)
    head_dim: int
    hidden_size: int
    params_total: float        # parameters (MoE: all experts)
    params_active: float       # parameters used per token (dense: == params_total)
    max_context: int
    n_full_layers: int         # full-attention layers: their K/V grow with T
    n_window_layers: int = 0   # sliding-window (or chunked) layers: hold min(T, window) tokens
    window: int = 0
    window_kind: str = "sliding"   # "sliding" (the last W tokens) or "chunked" (the tokens of the current chunk)
    kv_lora_rank: int = 0      # MLA: latent width (0: not MLA)
    qk_rope_head_dim: int = 0  # MLA: decoupled RoPE key cached beside the latent
    v_head_dim: int = 0        # MLA: per-head value width after decompression (0: head_dim = qk_nope_head_dim)
    index_head_dim: int = 0    # a sparse-attention indexer's key cached per token (DeepSeek-V3.2, MiniMax-M3)
    n_index_layers: int = 0    # the layers with an indexer (0: every attention layer, DeepSeek-V3.2's MLA)
    n_kv_shared_layers: int = 0   # layers that reuse an earlier layer's K/V and cache nothing (Gemma 3n)
    # K/V widths per layer type (not MLA): n_kv_heads and head_dim are the full layers'; a value head of another
    # width than the key (MiMo-V2-Flash: 128 beside 192) and window layers with heads and widths of their own
    # (Gemma 4: 8 × 256 on sliding layers, 2 × 512 on global ones). 0: as the full layers (window_head_dim_v: as
    # the window layers' keys when window_head_dim is set, else as the full layers' values).
    head_dim_v: int = 0
    window_n_kv_heads: int = 0
    window_head_dim: int = 0
    window_head_dim_v: int = 0
    ssm: SSM | None = None
    params_checkpoint: float = 0.0   # what the published checkpoint holds, if it differs (e.g. an MTP module)
    native_dtype: str = "bf16"
    model_dtype: str = ""    # the dtype the model computes in (torch_dtype; "": native_dtype), e.g. bf16 for FP8
    params_routed: float = 0.0     # of params_total, the routed experts (0: not known, or dense)
    params_multimodal: float = 0.0  # of params_total, a vision/audio tower no text token runs (0: none, or not known)
    vocab_size: int = 0            # tokens in the vocabulary (0: not known)
    intermediate_size: int = 0     # the MLP's inner width (0: not known)
    moe_intermediate_size: int = 0  # one routed expert's inner width (0: dense, or not known)
    experts_per_token: int = 0     # routed experts each token uses (0: dense, or not known)
    hf_repo: str = ""        # the Hugging Face repository a server loads
    source: str = ""
    weight_groups: tuple = ()      # weights.WeightGroup per storage precision (empty: all at native_dtype)
    checkpoint: object = field(default=None, compare=False)   # weights.Checkpoint: exact bytes from headers
    extra: dict = field(default_factory=dict, compare=False)

    # --- what kind of model ---------------------------------------------------------------------------------
    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def index_layers(self) -> int:
        """Layers whose indexer caches a key per token (0 without an indexer)."""
        return (self.n_index_layers or self.n_full_layers) if self.index_head_dim else 0

    def _index_keys_per_token(self, kv_bytes_per_element: float) -> float:
        """Not MLA (whose law holds its indexer's keys): the indexer keys beside K/V (MiniMax-M3)."""
        if self.is_mla:
            return 0
        return laws.index_key_bytes_per_token(self.index_layers, self.index_head_dim, kv_bytes_per_element)

    @property
    def kv_v_dim(self) -> int:
        """The full layers' value width per K/V head (not MLA)."""
        return self.head_dim_v or self.head_dim

    @property
    def window_kv(self) -> tuple[int, int, int]:
        """(K/V heads, key width, value width) of one window layer (not MLA)."""
        k = self.window_head_dim or self.head_dim
        v = self.window_head_dim_v or (self.window_head_dim if self.window_head_dim else self.kv_v_dim)
        return self.window_n_kv_heads or self.n_kv_heads, k, v

    @property
    def kv_widths_differ(self) -> bool:
        """K/V heads or widths that differ by layer type, or values narrower or wider than keys."""
        return (self.kv_v_dim, self.window_kv) != (self.head_dim, (self.n_kv_heads, self.head_dim, self.head_dim))

    def _window_widths(self) -> dict:
        kv, k, v = self.window_kv
        return {"v_head_dim": self.kv_v_dim, "window_kv_heads": kv, "window_head_dim": k, "window_v_head_dim": v}

    @property
    def compute_dtype(self) -> str:
        """The dtype the model computes in (activations, and what engines size "auto" caches and state by): the
        checkpoint's torch_dtype, else its native precision when that is a float type, else bf16 (an FP8 or
        4-bit checkpoint computes in bf16)."""
        if self.model_dtype:
            return self.model_dtype
        return self.native_dtype if self.native_dtype in ("fp32", "bf16", "fp16") else "bf16"

    @property
    def is_moe(self) -> bool:
        """Routed experts: fewer parameters run per token than the text model holds. A multimodal checkpoint's
        vision tower (also not run per text token) is not an expert: Gemma 3's is dense."""
        return self.params_active + self.params_multimodal < self.params_total

    @property
    def structure(self) -> str:
        """One of STRUCTURES: the attention structure that decides how the cache grows."""
        if self.ssm is not None:
            return "ssm_hybrid"
        if self.n_window_layers and self.window_kind == "chunked":
            return "chunked_attention"
        if self.n_window_layers:
            return "sliding_window"
        if self.is_mla:
            return "mla"
        if self.n_kv_heads == self.n_heads:
            return "mha"
        return "mqa" if self.n_kv_heads == 1 else "gqa"

    # --- cache sizes, from the lesson-03 laws -------------------------------------------------------------
    def kv_bytes_per_token(self, kv_bytes_per_element: float) -> float:
        """Bytes one more token adds to one sequence's cache once windows are full (the growing slope)."""
        if self.is_mla:
            return laws.mla_bytes_per_token(self.n_full_layers, self.kv_lora_rank, self.qk_rope_head_dim,
                                            kv_bytes_per_element, self.index_head_dim)
        if self.n_window_layers:
            return laws.sliding_window_growth_bytes_per_token(self.n_full_layers, self.n_kv_heads, self.head_dim,
                                                               kv_bytes_per_element, self.kv_v_dim)
        return (laws.kv_bytes_per_token(self.n_full_layers, self.n_kv_heads, self.head_dim, kv_bytes_per_element,
                                        self.kv_v_dim) + self._index_keys_per_token(kv_bytes_per_element))

    def kv_bytes_ignoring_windows_per_token(self, kv_bytes_per_element: float) -> float:
        """Slope if every window layer cached the whole context (what an engine without window support does)."""
        kv, k, v = self.window_kv
        return (laws.kv_bytes_per_token(self.n_full_layers, self.n_kv_heads, self.head_dim, kv_bytes_per_element,
                                        self.kv_v_dim)
                + laws.kv_bytes_per_token(self.n_window_layers, kv, k, kv_bytes_per_element, v))

    def attention_cache_bytes(self, T, kv_bytes_per_element: float):
        """K/V (or MLA latent) bytes of one sequence holding ``T`` tokens; windows capped at their size."""
        if self.is_mla:
            return laws.mla_bytes(T, self.n_full_layers, self.kv_lora_rank, self.qk_rope_head_dim,
                                  kv_bytes_per_element, self.index_head_dim)
        if self.n_window_layers and self.window_kind == "chunked":
            return laws.chunked_attention_bytes(T, self.n_full_layers, self.n_window_layers, self.window,
                                                self.n_kv_heads, self.head_dim, kv_bytes_per_element)
        if self.n_window_layers:
            return laws.sliding_window_bytes(T, self.n_full_layers, self.n_window_layers, self.window,
                                             self.n_kv_heads, self.head_dim, kv_bytes_per_element,
                                             **self._window_widths())
        return (laws.kv_bytes(T, self.n_full_layers, self.n_kv_heads, self.head_dim, kv_bytes_per_element,
                              self.kv_v_dim) + T * self._index_keys_per_token(kv_bytes_per_element))

    def state_bytes(self, state_bytes_per_element: float) -> float:
        """Constant recurrent state of one sequence (0 without SSM layers)."""
        if self.ssm is None:
            return 0
        return laws.ssm_state_bytes(self.ssm.n_layers, self.ssm.state_elements, state_bytes_per_element)

    def cache_bytes(self, T, kv_bytes_per_element: float, state_bytes_per_element: float | None = None):
        """Everything one sequence caches at ``T`` tokens: attention K/V (or latent) plus any recurrent state."""
        sb = kv_bytes_per_element if state_bytes_per_element is None else state_bytes_per_element
        return self.attention_cache_bytes(T, kv_bytes_per_element) + self.state_bytes(sb)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["structure"] = self.structure
        d["n_attn_layers"] = self.n_full_layers      # the key's older name, kept for readers of the JSON
        d.pop("extra")
        return d


# --- construction and validation -------------------------------------------------------------------------------
def _positive_int(d: dict, key: str, where: str, allow_zero=False) -> int:
    if key not in d:
        raise InputError(f"{where}: missing field '{key}'")
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v or v < 0 or (v == 0 and not allow_zero):
        raise InputError(f"{where}: field '{key}' must be a positive integer, got {v!r}")
    return int(v)


def _positive_number(d: dict, key: str, where: str) -> float:
    if key not in d:
        raise InputError(f"{where}: missing field '{key}'")
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise InputError(f"{where}: field '{key}' must be a positive number, got {v!r}")
    return float(v)


def ssm_from_dict(s: dict, where: str) -> SSM:
    """Build an SSM block from its config fields; the state size comes from the lesson-03 law for its kind."""
    kind = s.get("kind")
    n = _positive_int(s, "n_layers", where + ".ssm")
    w = where + ".ssm"
    if kind == "mamba1":
        elems = laws.mamba1_state_elements(_positive_int(s, "d_inner", w), _positive_int(s, "d_state", w),
                                           _positive_int(s, "d_conv", w))
        heads = _positive_int(s, "d_inner", w)
        conv = laws.mamba1_conv_state_elements(heads, s["d_conv"])
    elif kind == "mamba2":
        heads = _positive_int(s, "n_heads", w)
        elems = laws.mamba2_state_elements(heads, _positive_int(s, "head_dim", w), _positive_int(s, "d_state", w),
                                           _positive_int(s, "d_conv", w), _positive_int(s, "n_groups", w))
        conv = laws.mamba2_conv_state_elements(heads, s["head_dim"], s["d_state"], s["d_conv"], s["n_groups"])
    elif kind == "gated_deltanet":
        heads = _positive_int(s, "n_v_heads", w)
        elems = laws.gated_deltanet_state_elements(_positive_int(s, "n_k_heads", w), heads,
                                                   _positive_int(s, "k_head_dim", w),
                                                   _positive_int(s, "v_head_dim", w), _positive_int(s, "d_conv", w))
        conv = laws.gated_deltanet_conv_state_elements(s["n_k_heads"], heads, s["k_head_dim"], s["v_head_dim"],
                                                       s["d_conv"])
    elif kind == "kda":
        heads = _positive_int(s, "n_heads", w)
        elems = laws.kda_state_elements(heads, _positive_int(s, "head_dim", w), _positive_int(s, "d_conv", w))
        conv = laws.kda_conv_state_elements(heads, s["head_dim"], s["d_conv"])
    elif kind == "short_conv":
        heads = _positive_int(s, "d_inner", w)          # channels: what tensor parallelism splits
        elems = conv = laws.short_conv_state_elements(heads, _positive_int(s, "d_conv", w))
    elif kind == "lightning":
        heads = _positive_int(s, "n_heads", w)
        elems = laws.lightning_state_elements(heads, _positive_int(s, "head_dim", w))
        conv = 0
    else:
        raise InputError(f"{w}.kind: unknown '{kind}'; allowed: mamba1, mamba2, gated_deltanet, lightning, "
                         "short_conv, kda")
    state_dtype = ""
    if s.get("state_dtype"):
        from part1_capacity.calculator.base.dtypes import KV_DTYPES, get_dtype

        state_dtype = get_dtype(s["state_dtype"], w + ".state_dtype", KV_DTYPES).name
    return SSM(kind, n, int(elems), heads, int(conv), state_dtype)


def _choice(d: dict, key: str, allowed, where: str) -> str:
    v = d.get(key, allowed[0])
    if v not in allowed:
        raise InputError(f"{where}: field '{key}' must be one of {', '.join(allowed)}, got {v!r}")
    return v


def _routed(d: dict, total: float, where: str) -> float:
    """The routed experts' parameters (0: unknown or dense), at most the total."""
    v = d.get("params_routed") or 0.0
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= total:
        raise InputError(f"{where}: field 'params_routed' must be a number between 0 and params_total, got {v!r}")
    return float(v)


def _multimodal(d: dict, total: float, active: float, where: str) -> float:
    """A vision/audio tower's parameters (0: none or unknown), at most what the text model does not run."""
    v = d.get("params_multimodal") or 0.0
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= total - active:
        raise InputError(f"{where}: field 'params_multimodal' must be a number between 0 and params_total − "
                         f"params_active, got {v!r}")
    return float(v)


def profile_from_dict(d: dict, where: str = "model") -> ModelProfile:
    """Validate a profile dict (the bundled table's format) and build a ``ModelProfile``."""
    pid = str(d.get("id") or where)
    w = f"model '{pid}'"
    n_layers = _positive_int(d, "n_layers", w)
    n_heads = _positive_int(d, "n_heads", w)
    n_kv = _positive_int(d, "n_kv_heads", w)
    if n_heads % n_kv:
        raise InputError(f"{w}: n_heads ({n_heads}) must be divisible by n_kv_heads ({n_kv})")
    head_dim = _positive_int(d, "head_dim", w)
    hidden = _positive_int(d, "hidden_size", w)
    total = _positive_number(d, "params_total", w)
    active = float(d.get("params_active") or total)
    if active > total:
        raise InputError(f"{w}: params_active ({active:g}) exceeds params_total ({total:g})")
    n_win = _positive_int(d, "n_window_layers", w, allow_zero=True) if "n_window_layers" in d else 0
    window = _positive_int(d, "window", w) if n_win else 0
    ssm = ssm_from_dict(d["ssm"], w) if d.get("ssm") else None
    full_key = "n_full_layers" if "n_full_layers" in d else "n_attn_layers"   # the older name is still read
    if full_key in d:
        n_attn = _positive_int(d, full_key, w, allow_zero=True)
    else:
        n_attn = n_layers - n_win - (ssm.n_layers if ssm else 0)
    if n_attn < 0 or n_attn + n_win > n_layers:
        raise InputError(f"{w}: attention layers ({n_attn}) + window layers ({n_win}) exceed n_layers ({n_layers})")
    kv_lora = int(d.get("kv_lora_rank") or 0)
    rope = int(d.get("qk_rope_head_dim") or 0)
    if kv_lora and not rope:
        raise InputError(f"{w}: MLA profile needs 'qk_rope_head_dim' beside 'kv_lora_rank'")
    v_dim = _positive_int(d, "v_head_dim", w) if kv_lora and d.get("v_head_dim") is not None else 0
    widths = {k: _positive_int(d, k, w, allow_zero=True) for k in KV_WIDTH_FIELDS if d.get(k) is not None}
    if kv_lora and any(widths.values()):
        raise InputError(f"{w}: K/V widths per layer type ({', '.join(k for k, v in widths.items() if v)}) beside "
                         "an MLA latent: not modelled")
    wkv = widths.get("window_n_kv_heads") or 0
    if wkv and n_heads % wkv:
        raise InputError(f"{w}: n_heads ({n_heads}) must be divisible by window_n_kv_heads ({wkv})")
    if (n_win == 0 or d.get("window_kind") == "chunked") and any(widths.get(k) for k in KV_WIDTH_FIELDS[1:]):
        raise InputError(f"{w}: window_n_kv_heads, window_head_dim and window_head_dim_v need sliding-window layers "
                         "(n_window_layers > 0, window_kind sliding)")
    index_dim = _positive_int(d, "index_head_dim", w, allow_zero=True) if "index_head_dim" in d else 0
    n_index = _positive_int(d, "n_index_layers", w, allow_zero=True) if "n_index_layers" in d else 0
    if n_index > n_attn or (n_index and not index_dim):
        raise InputError(f"{w}: n_index_layers ({n_index}) must be at most the full-attention layers ({n_attn}), "
                         "beside an index_head_dim")
    if index_dim and not kv_lora and (n_win or ssm is not None):
        raise InputError(f"{w}: indexer keys beside K/V with window or recurrent layers: not modelled")
    max_ctx = _positive_int(d, "max_context", w)
    from part1_capacity.calculator.base.dtypes import get_dtype  # noqa: WPS433 (validate the native dtype name)

    native = get_dtype(d.get("native_dtype", "bf16"), f"{w}.native_dtype").name
    return ModelProfile(
        id=pid.lower(), name=str(d.get("name") or pid), n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv,
        head_dim=head_dim, hidden_size=hidden, params_total=total, params_active=active, max_context=max_ctx,
        n_full_layers=n_attn, n_window_layers=n_win, window=window, kv_lora_rank=kv_lora, qk_rope_head_dim=rope,
        v_head_dim=v_dim, window_kind=_choice(d, "window_kind", ("sliding", "chunked"), w),
        index_head_dim=index_dim, n_index_layers=n_index,
        n_kv_shared_layers=(_positive_int(d, "n_kv_shared_layers", w, allow_zero=True)
                            if "n_kv_shared_layers" in d else 0),
        **widths,
        model_dtype=get_dtype(d["model_dtype"], f"{w}.model_dtype").name if d.get("model_dtype") else "",
        params_routed=_routed(d, total, w), params_multimodal=_multimodal(d, total, active, w),
        **{k: _positive_int(d, k, w, allow_zero=True) for k in SHAPE_FIELDS if d.get(k) is not None},
        ssm=ssm, params_checkpoint=float(d.get("params_checkpoint") or 0.0), native_dtype=native,
        hf_repo=str(d.get("hf_repo", "")), source=str(d.get("source", "")),
        weight_groups=groups_from_list(d.get("weight_groups"), w),
        extra={k: v for k, v in d.items() if k.startswith("_")},
    )


@lru_cache(maxsize=1)
def bundled_models() -> dict[str, ModelProfile]:
    """The bundled profiles by id."""
    rows = json.loads((DATA / "models.json").read_text())["models"]
    return {p.id: p for p in (profile_from_dict(r) for r in rows)}
