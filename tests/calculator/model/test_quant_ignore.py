"""Mixed-precision checkpoints: the modules a quantization config leaves unconverted, read for every method the
calculator accepts — compressed-tensors ``ignore`` (names and ``re:`` patterns), AWQ/GPTQ/FP8/MXFP4
``modules_to_not_convert``, FP8's ``ignored_layers``, GPTQModel's ``dynamic`` skips, ModelOpt's
``exclude_modules`` — each on the quantization header of a published layout (its config.json), counted by hand."""
import json
from pathlib import Path

import pytest

from part1_capacity.calculator.model import weights
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.readers.loader import load_model

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "configs"


def _load(tmp_path, name, quant):
    d = {**json.loads((CONFIGS / name / "config.json").read_text()), "quantization_config": quant}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    return load_model(str(p))


def _bytes(m):
    return weights.weights_bytes(m, m.native_dtype)


W4G32 = {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": True,
                                                        "strategy": "group", "group_size": 32}}}
# Kimi-K2.5's rule (compressed-tensors int4): attention, shared experts and the dense MLP kept in bf16
KIMI_IGNORE = ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"]


def test_kimi_k2_int4_ignore_list_leaves_attention_shared_and_dense_in_bf16(tmp_path):
    plain = load_model(str(CONFIGS / "kimi-k2" / "config.json"))
    m = _load(tmp_path, "kimi-k2", {"quant_method": "compressed-tensors", "format": "pack-quantized",
                                    "config_groups": W4G32, "ignore": KIMI_IGNORE})
    # by hand from the config: 60 MoE layers (first_k_dense_replace 1 of 61) x 384 routed experts x 3 matrices of
    # 7,168 x 2,048 in int4; scales in bf16, one per 32 input weights of a row: gate/up 2,048 rows x 224, down
    # 7,168 rows x 64; everything else — MLA attention, the shared expert, layer 0's dense MLP, embeddings, head,
    # norms, routers — in bf16
    routed = 60 * 384 * 3 * 7168 * 2048
    scales = 60 * 384 * (2 * 2048 * (7168 // 32) + 7168 * (2048 // 32))
    assert (routed, scales) == (1_014_686_023_680, 31_708_938_240)
    assert _bytes(m) == routed / 2 + scales * 2 + (plain.params_total - routed) * 2
    assert round(_bytes(m) / 1e9) == 594
    # the same checkpoint read without its patterns (only lm_head left out) sizes attention and the rest int4
    naive = _load(tmp_path, "kimi-k2", {"quant_method": "compressed-tensors", "config_groups": W4G32,
                                        "ignore": ["lm_head"]})
    assert round(_bytes(naive) / 1e9) == 581 and _bytes(naive) < _bytes(m)


QWEN_DOWN = 24 * 896 * 4864          # Qwen2.5-0.5B: 24 layers of one 896 x 4,864 down projection


def _matrices(name="qwen2.5-0.5b"):
    c = json.loads((CONFIGS / name / "config.json").read_text())
    D, I, L = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    kv = c["num_key_value_heads"] * D // c["num_attention_heads"]
    return L * (2 * D * D + 2 * kv * D + 3 * I * D)


@pytest.mark.parametrize("quant", [
    # FP8 block (DeepSeek-style): vLLM's Fp8Config reads ignored_layers; transformers' modules_to_not_convert
    {"quant_method": "fp8", "weight_block_size": [128, 128], "ignored_layers": ["re:.*mlp\\.down_proj"]},
    {"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["down_proj"]},
    # ModelOpt FP8 (hf_quant_config's exclude_modules, wildcards)
    {"quant_method": "modelopt", "quant_algo": "FP8", "exclude_modules": ["*.mlp.down_proj"]},
    # compressed-tensors FP8 with a re: pattern
    {"quant_method": "compressed-tensors", "ignore": ["re:.*down_proj$"],
     "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float",
                                                                 "strategy": "channel"}}}},
])
def test_fp8_layouts_keep_the_modules_they_name_in_bf16(tmp_path, quant):
    plain = load_model(str(CONFIGS / "qwen2.5-0.5b" / "config.json"))
    m = _load(tmp_path, "qwen2.5-0.5b", quant)
    q = _matrices() - QWEN_DOWN
    assert _bytes(m) == q * 1 + (plain.params_total - q) * 2


def test_gptq_dynamic_skips_and_refuses_other_widths(tmp_path):
    plain = load_model(str(CONFIGS / "qwen2.5-0.5b" / "config.json"))
    base = {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True}
    m = _load(tmp_path, "qwen2.5-0.5b", {**base, "dynamic": {"-:.*mlp\\.down_proj": {}}})
    # the down projections stay bf16 with no scales; every other matrix int4 + fp16 scale + int4 zero per 128
    c = json.loads((CONFIGS / "qwen2.5-0.5b" / "config.json").read_text())
    D, I, L = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    kv = c["num_key_value_heads"] * D // c["num_attention_heads"]
    rows_groups = L * (D * (D // 128) * 2 + kv * (D // 128) * 2 + I * (D // 128) * 2)   # q,o ; k,v ; gate,up
    q = _matrices() - QWEN_DOWN
    assert _bytes(m) == q / 2 + rows_groups * (2 + 0.5) + (plain.params_total - q) * 2
    with pytest.raises(InputError, match="per-layer widths are not modelled"):
        _load(tmp_path, "qwen2.5-0.5b", {**base, "dynamic": {"+:.*down_proj": {"bits": 8}}})


@pytest.mark.parametrize("quant, message", [
    # NVFP4 is sized now (tests/calculator/model/test_configs.py test_nvfp4_counts_its_fp8_scale_per_16_weights); a scheme
    # per layer is not
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "exclude_modules": []},
     "quant_algo: ModelOpt 'MIXED_PRECISION'"),
    ({"quant_method": "fp8", "modules_to_not_convert": ["re:(a+)+$"]}, "not a regular expression"),
    ({"quant_method": "fp8", "modules_to_not_convert": ["re:(["]}, "not a regular expression"),
    ({"quant_method": "fp8", "ignored_layers": "lm_head"}, "expected a list of module names"),
])
def test_what_is_not_sized_is_refused_by_name(tmp_path, quant, message):
    with pytest.raises(InputError, match=message.replace("(", "\\(").replace("'", ".")):
        _load(tmp_path, "qwen2.5-0.5b", quant)


def test_mxfp4_keeps_what_gpt_oss_names_and_only_routed_experts_are_fp4():
    # gpt-oss-20b's own header: modules_to_not_convert names attention, router, embeddings and head; MXFP4 holds
    # the 24 layers x 32 experts x (2,880 x 5,760 gate_up + 2,880 x 2,880 down) expert matrices only
    m = load_model(str(CONFIGS / "gpt-oss-20b" / "config.json"))
    fp4 = [g for g in m.weight_groups if g.dtype == "mxfp4"]
    assert len(fp4) == 1 and fp4[0].params == 24 * 32 * (2880 * 5760 + 2880 * 2880)
