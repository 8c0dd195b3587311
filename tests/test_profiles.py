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


def test_a_profiles_dict_adds_its_structure_and_the_older_key_and_leaves_out_the_extras():
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
