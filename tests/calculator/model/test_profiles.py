"""Model profiles (calculator/model/profiles.py): how a profile dict is validated and what a profile reports, on
made-up profiles whose numbers are worked by hand."""
import pytest

from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.model.profiles import profile_from_dict

# every field each recurrent kind requires, in the order ssm_from_dict reads them
SSM_FIELDS = {
    "mamba1": {"d_inner": 8, "d_state": 4, "d_conv": 4},
    "mamba2": {"n_heads": 2, "head_dim": 4, "d_state": 4, "d_conv": 4, "n_groups": 1},
    "gated_deltanet": {"n_k_heads": 2, "n_v_heads": 2, "k_head_dim": 4, "v_head_dim": 4, "d_conv": 4},
    "kda": {"n_heads": 2, "head_dim": 4, "d_conv": 4},
    "short_conv": {"d_inner": 8, "d_conv": 3},
    "lightning": {"n_heads": 2, "head_dim": 4},
}


def _hybrid(kind, **ssm):
    """4 blocks, 2 of them recurrent of ``kind``: the rest of the profile is valid."""
    return {"id": "h", "n_layers": 4, "n_heads": 4, "n_kv_heads": 4, "head_dim": 8, "hidden_size": 32,
            "params_total": 1e6, "max_context": 1024, "ssm": {"kind": kind, "n_layers": 2, **ssm}}


def _refusal(d) -> str:
    with pytest.raises(InputError) as e:
        profile_from_dict(d)
    return str(e.value)


def test_every_missing_or_zero_state_field_is_named_under_the_models_ssm():
    """Each field a recurrent kind needs, left out or 0, is refused in one line that names the model's ssm block
    and the field: "model 'h'.ssm: missing field 'd_state'"."""
    for kind, fields in SSM_FIELDS.items():
        for key in ("n_layers", *fields):
            without = _hybrid(kind, **fields)
            del without["ssm"][key]
            assert _refusal(without) == f"model 'h'.ssm: missing field '{key}'", (kind, key)
            zero = _hybrid(kind, **fields)
            zero["ssm"][key] = 0
            assert _refusal(zero) == f"model 'h'.ssm: field '{key}' must be a positive integer, got 0", (kind, key)


def test_a_profiles_dict_names_its_structure_and_leaves_out_the_extras():
    """4 layers, 4 query heads sharing 2 K/V heads: GQA, all 4 layers full attention. The JSON names the structure,
    repeats n_full_layers under its older name n_attn_layers, and leaves out the file's own "_" notes."""
    p = profile_from_dict({"id": "G", "n_layers": 4, "n_heads": 4, "n_kv_heads": 2, "head_dim": 8, "hidden_size": 32,
                           "params_total": 1e6, "max_context": 1024, "_note": "a made-up model"})
    assert p.extra == {"_note": "a made-up model"}
    d = p.to_dict()
    assert (d["id"], d["structure"], d["n_full_layers"], d["n_attn_layers"]) == ("g", "gqa", 4, 4)
    assert "extra" not in d and "_note" not in d


def test_state_shapes_without_a_convolution_and_the_state_dtype():
    """Lightning attention keeps per head a head_dim × head_dim matrix and no convolution: 2 heads × 4 × 4 = 32
    elements, 0 of them convolution. A short convolution is all convolution: (d_conv − 1) × channels =
    (3 − 1) × 8 = 16. No state_dtype given: "" (the engine's default); one given is read case-insensitively."""
    light = profile_from_dict(_hybrid("lightning", **SSM_FIELDS["lightning"])).ssm
    assert (light.state_elements, light.conv_elements, light.n_heads, light.state_dtype) == (32, 0, 2, "")
    conv = profile_from_dict(_hybrid("short_conv", **SSM_FIELDS["short_conv"])).ssm
    assert (conv.state_elements, conv.conv_elements, conv.n_heads) == (16, 16, 8)
    assert profile_from_dict(_hybrid("lightning", state_dtype="FP32", **SSM_FIELDS["lightning"])).ssm.state_dtype \
        == "fp32"


def test_an_unknown_kind_or_a_state_dtype_no_cache_holds_is_refused_by_name():
    assert _refusal(_hybrid("rwkv")) == ("model 'h'.ssm.kind: unknown 'rwkv'; allowed: mamba1, mamba2, "
                                         "gated_deltanet, lightning, short_conv, kda")
    # q4_0 is a weights format, not a dtype a cache or state is kept in: the cache dtypes are listed
    msg = _refusal(_hybrid("lightning", state_dtype="q4_0", **SSM_FIELDS["lightning"]))
    assert msg.startswith("model 'h'.ssm.state_dtype: unknown dtype 'q4_0'"), msg
    assert msg.endswith("; allowed: fp32, bf16, fp16, fp8, int8, q8_0"), msg


def _dense(**kw):
    """A valid dense profile: 4 layers, 4 query heads on 2 K/V heads; ``kw`` changes or adds fields."""
    return {"id": "d", "n_layers": 4, "n_heads": 4, "n_kv_heads": 2, "head_dim": 8, "hidden_size": 32,
            "params_total": 1e6, "max_context": 1024, **kw}


def test_every_refusal_of_a_profile_names_the_model_and_the_field():
    assert _refusal({k: v for k, v in _dense().items() if k != "head_dim"}) == "model 'd': missing field 'head_dim'"
    assert _refusal({k: v for k, v in _dense().items() if k != "params_total"}) == (
        "model 'd': missing field 'params_total'")
    # a whole number, not a truth value nor a fraction; 0 only where allowed
    for bad in (True, 2.5, -1, 0, "4"):
        assert _refusal(_dense(n_layers=bad)) == f"model 'd': field 'n_layers' must be a positive integer, got {bad!r}"
    assert profile_from_dict(_dense(n_layers=4.0)).n_layers == 4       # 4.0 is the whole number 4
    for bad in (True, 0, -1.5, "1e6"):
        assert _refusal(_dense(params_total=bad)) == (
            f"model 'd': field 'params_total' must be a positive number, got {bad!r}")
    assert _refusal(_dense(n_kv_heads=3)) == "model 'd': n_heads (4) must be divisible by n_kv_heads (3)"
    assert _refusal(_dense(params_active=2e6)) == "model 'd': params_active (2e+06) exceeds params_total (1e+06)"
    assert _refusal(_dense(n_full_layers=3, n_window_layers=2, window=16)) == (
        "model 'd': attention layers (3) + window layers (2) exceed n_layers (4)")
    assert _refusal(_dense(kv_lora_rank=16)) == "model 'd': MLA profile needs 'qk_rope_head_dim' beside 'kv_lora_rank'"
    assert _refusal(_dense(window_kind="global")) == (
        "model 'd': field 'window_kind' must be one of sliding, chunked, got 'global'")


def test_experts_and_a_vision_tower_are_bounded_by_the_total():
    """Of 1e6 parameters with 4e5 active: routed experts 0 … 1e6, a vision tower 0 … 1e6 − 4e5 = 6e5."""
    p = profile_from_dict(_dense(params_active=4e5, params_routed=5e5, params_multimodal=6e5))
    assert (p.params_routed, p.params_multimodal, p.is_moe) == (5e5, 6e5, False)   # 4e5 + 6e5 = the total
    q = profile_from_dict(_dense(params_active=4e5, params_routed=1e6))
    assert (q.params_routed, q.params_multimodal, q.is_moe) == (1e6, 0.0, True)
    assert profile_from_dict(_dense(params_routed=None, params_multimodal=None)).params_routed == 0.0
    for bad in (True, -1, 1.5e6, "5e5"):
        assert _refusal(_dense(params_routed=bad)) == (
            f"model 'd': field 'params_routed' must be a number between 0 and params_total, got {bad!r}")
    for bad in (True, -1, 6.5e5, "1"):
        assert _refusal(_dense(params_active=4e5, params_multimodal=bad)) == (
            "model 'd': field 'params_multimodal' must be a number between 0 and params_total − params_active, "
            f"got {bad!r}")


def test_the_window_kind_defaults_to_sliding_and_chunked_is_read():
    """Window layers without a kind slide; "chunked" makes them chunks (Llama 4). 1 full + 3 window layers of 16."""
    slide = profile_from_dict(_dense(n_window_layers=3, window=16))
    assert (slide.window_kind, slide.structure, slide.n_full_layers) == ("sliding", "sliding_window", 1)
    chunk = profile_from_dict(_dense(n_window_layers=3, window=16, window_kind="chunked"))
    assert (chunk.window_kind, chunk.structure) == ("chunked", "chunked_attention")


def test_each_structures_cache_by_hand():
    """K/V per layer and token: 2 (K and V) × 2 K/V heads × 8 × 2 bytes = 64 B.
    GQA, 4 full layers: 256 B a token, 2,560 B at 10 tokens.
    1 full + 3 window layers of 16: the slope once windows are full is the full layer's 64 B (256 B if an engine
    cached every layer whole); at 100 tokens 64 × (100 + 3 × 16) = 9,472 B; chunks of 16 reserve the same room.
    MLA (rank 16, RoPE key 4, indexer key 8) on 4 layers: 4 × (16 + 4 + 8) × 2 = 224 B a token, 2,240 at 10.
    Lightning state, 2 layers × 32 elements: 256 B in fp32 (4 B), 128 B at the K/V's 2 B when no state dtype is
    given; a model without recurrent layers holds none."""
    gqa = profile_from_dict(_dense())
    assert (gqa.kv_bytes_per_token(2), gqa.attention_cache_bytes(10, 2), gqa.state_bytes(4)) == (256, 2560, 0)
    win = profile_from_dict(_dense(n_window_layers=3, window=16))
    assert (win.kv_bytes_per_token(2), win.kv_bytes_ignoring_windows_per_token(2)) == (64, 256)
    assert win.attention_cache_bytes(100, 2) == 9472
    chunk = profile_from_dict(_dense(n_window_layers=3, window=16, window_kind="chunked"))
    assert (chunk.kv_bytes_per_token(2), chunk.attention_cache_bytes(100, 2)) == (64, 9472)
    mla = profile_from_dict(_dense(n_kv_heads=4, kv_lora_rank=16, qk_rope_head_dim=4, index_head_dim=8))
    assert (mla.structure, mla.kv_bytes_per_token(2), mla.attention_cache_bytes(10, 2)) == ("mla", 224, 2240)
    light = profile_from_dict(_hybrid("lightning", **SSM_FIELDS["lightning"]))
    # 4 blocks, 2 recurrent: 2 full layers of 4 K/V heads × 8: 2 × 2 × 4 × 8 × 2 = 256 B a token
    assert (light.structure, light.state_bytes(4)) == ("ssm_hybrid", 256)
    assert light.cache_bytes(10, 2) == 10 * 256 + 128
    assert light.cache_bytes(10, 2, 4) == 10 * 256 + 256


def test_a_kda_state_its_zero_fields_and_a_profile_without_an_id():
    """Kimi Delta Attention, 2 heads × 4, convolution of 4: q, k and v each keep d_conv − 1 = 3 inputs of
    2 × 4 channels, 3 × 3 × 8 = 72 elements of convolution, plus a 4 × 4 matrix per head, 2 × 16 = 32: 104.
    Fields that may be 0 take 0; a fraction of a parameter is still a positive number; a dict without an id is
    named by where it came from ("model" by default)."""
    from part1_capacity.calculator.model.profiles import ssm_from_dict
    kda = ssm_from_dict({"kind": "kda", "n_layers": 2, **SSM_FIELDS["kda"]}, "model 'k'")
    assert (kda.state_elements, kda.conv_elements, kda.n_heads) == (104, 72, 2)
    zero = profile_from_dict(_dense(n_window_layers=0, index_head_dim=0, n_kv_shared_layers=0, vocab_size=0))
    assert (zero.n_window_layers, zero.index_head_dim, zero.n_kv_shared_layers, zero.vocab_size) == (0, 0, 0, 0)
    assert profile_from_dict(_dense(params_total=0.5)).params_total == 0.5
    anonymous = {k: v for k, v in _dense().items() if k != "id"}
    assert profile_from_dict(anonymous).id == "model"
    assert _refusal({**anonymous, "head_dim": 0}) == "model 'model': field 'head_dim' must be a positive integer, got 0"


def test_each_field_of_a_profile_is_read_and_each_bad_one_refused_by_name():
    for key in ("n_layers", "n_heads", "n_kv_heads", "head_dim", "hidden_size", "max_context"):
        assert _refusal(_dense(**{key: 0})) == f"model 'd': field '{key}' must be a positive integer, got 0", key
    p = profile_from_dict(_dense())
    assert (p.n_layers, p.n_heads, p.n_kv_heads, p.head_dim, p.hidden_size, p.max_context) == (4, 4, 2, 8, 32, 1024)
    # no window layers: no window, no MLA, bf16 weights; all 4 layers full attention
    assert (p.window, p.kv_lora_rank, p.qk_rope_head_dim, p.v_head_dim, p.native_dtype) == (0, 0, 0, 0, "bf16")
    assert p.n_full_layers == 4
    # window layers need their window; counts below 0 are refused; the older name n_attn_layers is still read
    assert _refusal(_dense(n_window_layers=3)) == "model 'd': missing field 'window'"
    assert _refusal(_dense(n_window_layers=-1)) == (
        "model 'd': field 'n_window_layers' must be a positive integer, got -1")
    assert _refusal(_dense(n_full_layers=-1)) == "model 'd': field 'n_full_layers' must be a positive integer, got -1"
    # (1 full layer stated, not the 4 − 2 = 2 left beside the window layers)
    assert profile_from_dict(_dense(n_attn_layers=1, n_window_layers=2, window=16)).n_full_layers == 1
    for key in ("index_head_dim", "n_kv_shared_layers", "vocab_size", "intermediate_size"):
        assert _refusal(_dense(**{key: -1})) == f"model 'd': field '{key}' must be a positive integer, got -1", key
    assert _refusal(_dense(weight_groups=[])) == (
        "model 'd'.weight_groups: expected a non-empty list of {name, params, dtype}")
    # every layer windowed, none full (0 is allowed); 5 window layers of 4 leave -1 full layers: refused
    assert profile_from_dict(_dense(n_full_layers=0, n_window_layers=4, window=16)).n_full_layers == 0
    assert _refusal(_dense(n_window_layers=5, window=16)) == (
        "model 'd': attention layers (-1) + window layers (5) exceed n_layers (4)")
    # MLA: the value head width is read when given (0 when not), and must be positive
    mla = dict(n_kv_heads=4, kv_lora_rank=16, qk_rope_head_dim=4)
    assert (profile_from_dict(_dense(**mla, v_head_dim=12)).v_head_dim, profile_from_dict(_dense(**mla)).v_head_dim) \
        == (12, 0)
    assert _refusal(_dense(**mla, v_head_dim=0)) == "model 'd': field 'v_head_dim' must be a positive integer, got 0"
    # dtypes by name, case-insensitively; an unknown one named with its field
    assert profile_from_dict(_dense(native_dtype="FP8", model_dtype="BF16")).native_dtype == "fp8"
    assert profile_from_dict(_dense(native_dtype="FP8", model_dtype="BF16")).model_dtype == "bf16"
    assert _refusal(_dense(native_dtype="fp7")).startswith("model 'd'.native_dtype: unknown dtype 'fp7'")
    assert _refusal(_dense(model_dtype="fp7")).startswith("model 'd'.model_dtype: unknown dtype 'fp7'")


def test_a_profile_with_every_field_keeps_each_as_given():
    """Every field of the bundled table's format, each with a value of its own, lands in its own place: the profile
    equals one written out field by field (the id lower-cased, the name as given, dtypes by their canonical names,
    "_" notes kept aside). Without a name, the id as written names the model."""
    from part1_capacity.calculator.model.profiles import SSM, ModelProfile
    from part1_capacity.calculator.model.weights import WeightGroup
    d = {"id": "D", "name": "Dee", "n_layers": 6, "n_heads": 4, "n_kv_heads": 2, "head_dim": 8, "hidden_size": 32,
         "params_total": 1e6, "params_active": 4e5, "max_context": 1024, "n_full_layers": 2, "n_window_layers": 2,
         "window": 16, "window_kind": "chunked", "kv_lora_rank": 16, "qk_rope_head_dim": 4, "v_head_dim": 12,
         "index_head_dim": 8, "n_kv_shared_layers": 1, "params_checkpoint": 1.1e6, "native_dtype": "FP8",
         "model_dtype": "BF16", "params_routed": 5e5, "params_multimodal": 1e5, "vocab_size": 100,
         "intermediate_size": 64, "moe_intermediate_size": 16, "experts_per_token": 2, "hf_repo": "org/dee",
         "source": "made up", "weight_groups": [{"name": "experts", "params": 5e5, "dtype": "fp8"}],
         "ssm": {"kind": "lightning", "n_layers": 2, "n_heads": 2, "head_dim": 4}, "_why": "a test"}
    want = ModelProfile(
        id="d", name="Dee", n_layers=6, n_heads=4, n_kv_heads=2, head_dim=8, hidden_size=32, params_total=1e6,
        params_active=4e5, max_context=1024, n_full_layers=2, n_window_layers=2, window=16, window_kind="chunked",
        kv_lora_rank=16, qk_rope_head_dim=4, v_head_dim=12, index_head_dim=8, n_kv_shared_layers=1,
        ssm=SSM("lightning", 2, 32, 2, 0, ""), params_checkpoint=1.1e6, native_dtype="fp8", model_dtype="bf16",
        params_routed=5e5, params_multimodal=1e5, vocab_size=100, intermediate_size=64, moe_intermediate_size=16,
        experts_per_token=2, hf_repo="org/dee", source="made up",
        weight_groups=(WeightGroup("experts", 5e5, "fp8"),))
    got = profile_from_dict(d)
    assert got == want
    assert got.extra == {"_why": "a test"}
    bare = profile_from_dict(_dense(id="D"))
    assert (bare.id, bare.name, bare.hf_repo, bare.source, bare.weight_groups, bare.model_dtype) == (
        "d", "D", "", "", (), "")
    assert (bare.params_checkpoint, bare.vocab_size, bare.window_kind, bare.ssm) == (0.0, 0, "sliding", None)
    assert (bare.index_head_dim, bare.n_kv_shared_layers) == (0, 0)
