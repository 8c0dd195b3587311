"""Families read by structure: the cache of each published config worked by hand under lesson 03's laws, the pure
reader against the transformers-backed one, the pure parameter count against transformers' meta-device build, and
the two corrections (MoE decode bytes, the recurrent state's default dtype) against their old values.

The configs are the published files (tests/data/configs/README.md names each repository and the copy read):
``mixtral-8x7b`` mistralai/Mixtral-8x7B-v0.1, ``qwen3-235b-a22b`` Qwen/Qwen3-235B-A22B, ``qwen3-coder-480b-a35b``
Qwen/Qwen3-Coder-480B-A35B-Instruct, ``qwen3-vl-30b-a3b`` Qwen/Qwen3-VL-30B-A3B-Instruct, ``qwen3.5-35b-a3b``
Qwen/Qwen3.5-35B-A3B, ``llama-4-scout`` meta-llama/Llama-4-Scout-17B-16E-Instruct, ``kimi-k2``
moonshotai/Kimi-K2-Instruct, ``deepseek-v3.2`` deepseek-ai/DeepSeek-V3.2 (all as vendored by NVIDIA's aiconfigurator,
``aic-core/src/aiconfigurator_core/model_configs/<org>--<name>_config.json``), ``minimax-m1`` MiniMaxAI/MiniMax-M1
(the config.json of a dump of that repository's files), ``qwen2-57b-a14b`` Qwen/Qwen2-57B-A14B (TensorRT-LLM's
Qwen2-MoE test), ``phi-4-mini-instruct`` microsoft/Phi-4-mini-instruct, ``olmo-2-1124-13b`` allenai/OLMo-2-1124-13B,
``hunyuan-a13b-instruct`` tencent/Hunyuan-A13B-Instruct (Tencent's GitHub repository's models/config.json),
``glm-4.5-air`` zai-org/GLM-4.5-Air (as vendored by a fork of aiconfigurator, ``triple-mu/aiconfigurator``).
"""
import json
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from part0_foundations.l03_kv_cache import laws
from part1_capacity.calculator.model import configs, hf_config, param_count
from part1_capacity.calculator.sizing import roofline
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.plan.plan import Workload, make_plan
from part1_capacity.cli import main

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "configs"


def path(name):
    return str(CONFIGS / name / "config.json")


def cfg(name):
    return json.loads((CONFIGS / name / "config.json").read_text())


# --- attention cache per sequence, to the byte, worked by hand -------------------------------------------------
# (config, T, bytes per element) → bytes of one sequence's attention cache
HAND = [
    # Mixtral-8x7B: 32 layers × 8 K/V heads × 128 × 2 (K and V) × 2 bytes = 131,072 per token
    ("mixtral-8x7b", 32768, 2, 32768 * 131_072),
    # Qwen3-235B-A22B: 94 × 4 × 128 × 2 × 2 = 192,512 per token
    ("qwen3-235b-a22b", 40960, 2, 40960 * 192_512),
    # Qwen3-Coder-480B: 62 × 8 × 128 × 2 × 2 = 253,952 per token
    ("qwen3-coder-480b-a35b", 100_000, 2, 100_000 * 253_952),
    # Qwen3-VL-30B-A3B (text_config): 48 × 4 × 128 × 2 × 2 = 98,304 per token
    ("qwen3-vl-30b-a3b", 8192, 2, 8192 * 98_304),
    # Llama 4 Scout, chunked attention: 48 layers, every 4th global (NoPE): 12 global hold T, 36 chunked hold
    # min(T, 8192); per layer per token 8 × 128 × 2 × 2 = 4,096 bytes
    ("llama-4-scout", 4096, 2, 4096 * 48 * 4096),
    ("llama-4-scout", 100_000, 2, 4096 * (12 * 100_000 + 36 * 8192)),
    # DeepSeek-V3.2: MLA latent 512 + RoPE key 64 + indexer key 128 per layer per token, 61 layers, no factor 2
    ("deepseek-v3.2", 1000, 2, 1000 * 61 * (512 + 64 + 128) * 2),
    # Kimi-K2: MLA, 61 × (512 + 64) × 2 = 70,272 per token (fp8: half)
    ("kimi-k2", 131072, 1, 131072 * 61 * 576),
    # Qwen3.5-35B-A3B: 10 of 40 layers full attention (every 4th), 2 K/V heads × 256 × 2 × 2 = 2,048 each
    ("qwen3.5-35b-a3b", 262144, 2, 262144 * 10 * 2048),
    # MiniMax-M1: 10 of 80 layers softmax attention (attn_type_list 1), 8 × 128 × 2 × 2 = 4,096 each
    ("minimax-m1", 1_000_000, 2, 1_000_000 * 10 * 4096),
    # Qwen2-57B-A14B: 28 layers × 4 K/V heads × head_dim 128 (3584 / 28 heads) × 2 (K and V) × 2 bytes = 57,344 per
    # token; "use_sliding_window": false, so its sliding_window of 131,072 windows nothing
    ("qwen2-57b-a14b", 8192, 2, 8192 * 57_344),
    # Phi-4-mini: 32 × 8 × 128 (3072 / 24) × 2 × 2 = 131,072 per token. Its sliding_window (262,144) is longer than its
    # 131,072 positions: no token ever leaves the window, every layer holds the whole context
    ("phi-4-mini-instruct", 8192, 2, 8192 * 131_072),
    ("phi-4-mini-instruct", 131_072, 2, 131_072 * 131_072),
    # OLMo-2-1124-13B, MHA: 40 × 40 K/V heads × 128 (5120 / 40) × 2 × 2 = 819,200 per token, at its 4,096 positions
    ("olmo-2-1124-13b", 4096, 2, 4096 * 819_200),
    # Hunyuan-A13B: 32 × 8 × 128 (4096 / 32, its attention_head_dim) × 2 × 2 = 131,072 per token; "use_cla": false,
    # so no layer borrows another's K/V
    ("hunyuan-a13b-instruct", 8192, 2, 8192 * 131_072),
    # GLM-4.5-Air: 46 layers × 8 K/V heads × head_dim 128 (stated: not 4096 / 96) × 2 × 2 = 188,416 per token.
    # "partial_rotary_factor": 0.5 rotates half of each head, the cache still holds all of it; the MTP layer
    # ("num_nextn_predict_layers": 1) is not part of the model transformers builds and is not counted
    ("glm-4.5-air", 8192, 2, 8192 * 188_416),
    ("glm-4.5-air", 131_072, 2, 131_072 * 188_416),
]


@pytest.mark.parametrize("name, T, b, expected", HAND)
def test_attention_cache_per_sequence_to_the_byte(name, T, b, expected):
    assert load_model(path(name)).attention_cache_bytes(T, b) == expected


def test_chunked_layers_hold_the_current_chunk_and_reserve_a_whole_one():
    # 10,000 tokens with chunks of 8,192: the second chunk holds 1,808; room for 8,192 is kept
    assert laws.chunk_tokens(10_000, 8192) == 1808
    assert laws.chunk_tokens(8192, 8192) == 8192 and laws.chunk_tokens(8193, 8192) == 1
    assert laws.chunk_room_tokens(10_000, 8192) == 8192 and laws.chunk_room_tokens(100, 8192) == 100
    m = load_model(path("llama-4-scout"))
    assert (m.structure, m.window_kind, m.n_full_layers, m.n_window_layers, m.window) == (
        "chunked_attention", "chunked", 12, 36, 8192)


# --- recurrent state, in the dtype the engines keep it ---------------------------------------------------------
def test_recurrent_state_by_structure_and_dtype():
    # MiniMax-M1 lightning attention: 70 layers × 64 heads × 128 × 128 (a key-value matrix per head), kept in the
    # model dtype (bf16) by vLLM
    m = load_model(path("minimax-m1"))
    assert (m.ssm.kind, m.ssm.n_layers) == ("lightning", 70)
    assert m.state_bytes(2) == 70 * 64 * 128 * 128 * 2
    # Qwen3.5-35B-A3B gated DeltaNet: 30 layers × (conv 3 × (2 × 16 × 128 + 32 × 128) + 32 × 128 × 128); the
    # checkpoint asks for a float32 state ("mamba_ssm_dtype": "float32")
    q = load_model(path("qwen3.5-35b-a3b"))
    assert q.ssm.state_elements * q.ssm.n_layers == 30 * (3 * (2 * 16 * 128 + 32 * 128) + 32 * 128 * 128)
    assert q.ssm.state_dtype == "fp32"
    plan = make_plan(path("qwen3.5-35b-a3b"), "h100", context=4096, kv_dtype="fp8")
    assert plan.state_bytes_per_sequence == 30 * 548_864 * 4


def test_the_state_dtype_never_follows_the_kv_dtype(capsys):
    """Granite-4.0-H-Small: 36 Mamba-2 layers × (conv 3 × (128 × 64 + 2 × 128) + SSM 128 × 64 × 128) = 38,661,120
    elements. With --kv-dtype fp8 the state stays in the model dtype (bf16) for vLLM and the law: 77,322,240
    bytes (the old default followed the KV dtype: 38,661,120), and in f32 for llama.cpp."""
    elements = 36 * (3 * (128 * 64 + 2 * 128) + 128 * 64 * 128)
    assert elements == 38_661_120
    for engine, width in (("law", 2), ("vllm", 2), ("llama.cpp", 4)):
        assert main(["plan", "--model", "granite-4.0-h-small", "--accelerator", "h100", "--context", "4096",
                     "--kv-dtype", "fp8" if engine != "llama.cpp" else "q8_0", "--engine", engine, "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        assert d["state_bytes_per_sequence"] == elements * width, engine
        assert d["state_bytes_per_sequence"] != elements * 1
    # a dtype asked for explicitly still wins
    p = make_plan("granite-4.0-h-small", "h100", context=4096, kv_dtype="fp8", state_dtype="fp8")
    assert p.state_bytes_per_sequence == elements


# --- the MoE decode bytes ---------------------------------------------------------------------------------------
def test_moe_decode_reads_dense_weights_whole_and_experts_by_share():
    """DeepSeek-V3 (bundled: 671B total, 37B active, routed 58 × 256 × 3 × 7168 × 2048 = 653,908,770,816):
    dense = 17,091,229,184; a token uses (37e9 − dense) / routed = 0.030446 of the routed experts. Two tokens:
    (dense + routed × (1 − (1 − 0.030446)²)) / 671e9 = 0.08391; the old law read the whole model at the active share,
    1 − (1 − 37/671)² = 0.10724 (27.8 % more)."""
    m = load_model("deepseek-v3")
    assert m.params_routed == 653_908_770_816
    share = (37e9 - 17_091_229_184) / 653_908_770_816
    assert share == pytest.approx(0.030446, abs=1e-6)
    two = (17_091_229_184 + 653_908_770_816 * (1 - (1 - share) ** 2)) / 671e9
    assert two == pytest.approx(0.08391, abs=1e-5)
    assert float(roofline.weights_read_fraction(m, 2)) == pytest.approx(two, rel=1e-12)
    old = 1 - (1 - 37 / 671) ** 2
    assert old == pytest.approx(0.10724, abs=1e-5)
    assert float(roofline.weights_read_fraction(m, 2)) < old / 1.25
    # one token reads exactly the active parameters; a dense model always reads everything
    assert float(roofline.weights_read_fraction(m, 1)) * 671e9 == pytest.approx(37e9, rel=1e-12)
    assert float(roofline.weights_read_fraction(load_model("llama-3.1-8b"), 32)) == 1.0


def test_a_plan_decode_step_uses_the_corrected_bytes():
    plan = make_plan("deepseek-v3", "h200", context=4096, batch=2)
    step = plan.decode_split
    assert step is not None
    frac = float(roofline.weights_read_fraction(plan.model, 2))
    assert frac < 1 - (1 - 37 / 671) ** 2


# --- the seam: pure reader and count against the transformers-backed ones ------------------------------------------
ALL = sorted(p.parent.name for p in CONFIGS.glob("*/config.json"))


@pytest.mark.parametrize("name", ALL)
def test_pure_reader_with_class_defaults_agrees_with_transformers(name):
    """profile_from_fields with only the model type's class defaults (what a Python without transformers holds)
    gives the same cache as the file resolved by transformers."""
    d = cfg(name)
    mt = hf_config.known_model_type(d)
    resolved = hf_config.defaults_for(d) if mt else {}
    table = hf_config.class_defaults(mt) if mt else {}
    params = [("p", (1,))]
    a = configs.profile_from_fields(d, resolved, parameters=params)
    b = configs.profile_from_fields(d, table, parameters=params)
    for T in (1, 5000, 200_000):
        assert a.cache_bytes(T, 2) == b.cache_bytes(T, 2), T
    assert (a.structure, a.n_full_layers, a.n_window_layers, a.window) == (
        b.structure, b.n_full_layers, b.n_window_layers, b.window)


# the pure count equals transformers' meta-device build for every published config transformers has a class for
EXACT = [n for n in ALL if hf_config.known_model_type(cfg(n))]


@lru_cache(maxsize=None)
def meta(name):
    """transformers' own parameter list for a published config, built on the meta device (imports torch)."""
    return tuple(hf_config.meta_parameters(cfg(name)))


def total(params, keep=lambda n: True):
    return sum(param_count.numel(s) for n, s in params if keep(n))


@pytest.mark.parametrize("name", EXACT)
def test_pure_parameter_count_equals_the_meta_device_count(name):
    """The text model alone, and the whole model a server loads (vision tower and projector included)."""
    d = cfg(name)
    text = lambda n: not param_count.MULTIMODAL.search(n)                        # noqa: E731
    resolved = hf_config.defaults_for(d)
    assert total(param_count.count_parameters(d, resolved)) == total(meta(name), text)
    assert total(param_count.count_model_parameters(d, resolved)) == total(meta(name))


def test_every_published_config_with_a_class_is_counted():
    """MiniMax-M1, Phi-3-small, Llama-3.3-Nemotron-Super (DeciLM), MiniMax-M3 and Kimi-K3 have no transformers class
    (their own code): they are counted from their fields, and their cards or counts by hand check those counts
    (test_parameters_within_one_percent_of_the_card; Phi-3-small's 7.39B and the Nemotron-Super's 49.87B block by
    block in test_calculator_configs.py; MiniMax-M3 against transformers' MiniMaxM3VLTextConfig below)."""
    assert set(ALL) - set(EXACT) == {"minimax-m1", "phi-3-small-8k-instruct", "llama-3.3-nemotron-super-49b-v1",
                                     "minimax-m3", "kimi-k3"}


def test_the_pure_layer_imports_nothing_heavy():
    code = ("import json, sys; from part1_capacity.calculator.model import configs; "
            f"d = json.load(open({path('mixtral-8x7b')!r})); "
            "p = configs.profile_from_fields(d, {}); "
            "assert p.params_total == 46_702_792_704, p.params_total; "
            "heavy = [m for m in ('transformers', 'torch', 'numpy') if m in sys.modules]; "
            "assert not heavy, heavy")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-800:]


# --- parameters within 1 % of the model cards, vision towers counted in the total only ---------------------------
@pytest.mark.parametrize("name, total, active", [
    ("minimax-m1", 456e9, None),              # model card: 456B total
    ("mixtral-8x7b", 46.7e9, 12.9e9),         # 46.7B total, 12.9B active
    ("llama-4-scout", 109e9, None),           # 109B total with the vision encoder ("17B active" is rounded)
    # https://huggingface.co/Qwen/Qwen2-57B-A14B: "57B-A14B", 57B in total. By hand: embeddings and head
    # 2 × 151,936 × 3,584 = 1,089,081,344; per layer attention 2 × 3,584² + 2 × 512 × 3,584 + biases 4,608 =
    # 29,365,760, 64 experts × 3 × 3,584 × 2,560 = 1,761,607,680, the shared expert 3 × 3,584 × 20,480 = 220,200,960,
    # router 64 × 3,584 and shared gate 3,584 = 232,960, norms 7,168: 2,011,413,504 × 28 layers; + final norm 3,584
    # = 57,408,658,944 (0.72 % above 57B)
    ("qwen2-57b-a14b", 57e9, None),
    # https://huggingface.co/microsoft/Phi-4-mini-instruct: "3.8B parameters". By hand: tied embeddings
    # 200,064 × 3,072 = 614,596,608; per layer q/k/v 5,120 × 3,072 + o 3,072² + MLP 3 × 8,192 × 3,072 + norms
    # 6,144 = 100,669,440 × 32; + final norm = 3,836,021,760 (0.95 % above 3.8B)
    ("phi-4-mini-instruct", 3.8e9, None),
    # https://huggingface.co/tencent/Hunyuan-A13B-Instruct: "80 billion total parameters". By hand: tied embeddings
    # 128,167 × 4,096 = 524,972,032; per layer attention 2 × 4,096² + 2 × 1,024 × 4,096 + q/k norms 256 =
    # 41,943,296, router 64 × 4,096, 64 experts × 3 × 4,096 × 3,072 = 2,415,919,104, the shared MLP
    # 3 × 4,096 × 3,072 = 37,748,736, norms 8,192: 2,495,881,472 × 32; + final norm = 80,393,183,232 (0.49 % above)
    ("hunyuan-a13b-instruct", 80e9, None),
    # https://huggingface.co/zai-org/GLM-4.5-Air: "GLM-4.5-Air adopts a more compact design with 106 billion total
    # parameters". By hand: embeddings and head 2 × 151,552 × 4,096 = 1,241,513,984; per layer attention q
    # 4,096 × 12,288 + k, v 2 × 4,096 × 1,024 + o 12,288 × 4,096 + q/k/v biases (attention_bias; o_proj has none)
    # 14,336 = 109,066,240 and norms 8,192; layer 0 dense 3 × 4,096 × 10,944 = 134,479,872 → 243,554,304; layers
    # 1-45 route 128 experts of 3 × 4,096 × 1,408 = 2,214,592,512, one shared expert of that width 17,301,504 and
    # a router 128 × 4,096 = 524,288 → 2,341,492,736 × 45 = 105,367,173,120; + final norm 4,096 =
    # 106,852,245,504 (0.80 % above 106B; the router's score-correction bias is a buffer, the MTP layer not built)
    ("glm-4.5-air", 106e9, None),
])
def test_parameters_within_one_percent_of_the_card(name, total, active):
    m = load_model(path(name))
    assert m.params_total == pytest.approx(total, rel=0.01)
    if active:
        assert m.params_active == pytest.approx(active, rel=0.01)


def test_olmo_2_counts_exactly_what_its_checkpoint_holds():
    """OLMo-2-1124-13B's card says only "13B" (https://huggingface.co/allenai/OLMo-2-1124-13B, 5.5 % below the count,
    too coarse for 1 %). Its checkpoint index (model.safetensors.index.json, vendored beside the config: see
    tests/data/configs/README.md) holds total_size 54,864,793,600 bytes of float32 ("torch_dtype": "float32"):
    54,864,793,600 / 4 = 13,716,198,400 parameters. By hand: embeddings and head 2 × 100,352 × 5,120 =
    1,027,604,480; per layer q/k/v/o 4 × 5,120² + full-width q/k norms 2 × 5,120 + MLP 3 × 13,824 × 5,120 + norms
    2 × 5,120 = 317,214,720 × 40; + final norm 5,120 = 13,716,198,400."""
    m = load_model(path("olmo-2-1124-13b"))
    assert m.params_total == 54_864_793_600 / 4 == 13_716_198_400
    assert m.native_dtype == "fp32" and m.structure == "mha"


def test_a_vision_tower_counts_in_the_total_not_in_the_active_parameters():
    m = load_model(path("llama-4-scout"))
    text = total(param_count.count_parameters(cfg("llama-4-scout"), hf_config.defaults_for(cfg("llama-4-scout"))))
    assert m.params_total > text                     # the vision encoder is loaded
    routed_unused = m.params_routed * (1 - 1 / 16)   # 1 of 16 experts per token
    assert m.params_active == pytest.approx(text - routed_unused, rel=1e-9)


# --- refusals name the structure ----------------------------------------------------------------------------------
@pytest.mark.parametrize("change, fragment", [
    ({"layer_types": ["full_attention"] * 31 + ["cross_attention"]},
     "layer type 'cross_attention' is a layer the calculator does not model"),
    ({"swa_num_key_value_heads": 4, "swa_num_attention_heads": 16},
     "query heads that differ by layer type are not modelled"),
    ({"num_kv_shared_layers": 40}, "num_kv_shared_layers (40) must be fewer than the layers (32)"),
    ({"model_type": "hunyuan", "use_cla": True},
     "cross-layer attention: adjacent layers share one K/V (Hunyuan's CLA) ('use_cla'): not modelled"),
])
def test_refusals_name_what_is_not_modelled(tmp_path, change, fragment):
    d = {**cfg("hunyuan-a13b-instruct" if change.get("model_type") == "hunyuan" else "mixtral-8x7b"), **change}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    with pytest.raises(InputError) as e:
        load_model(str(p))
    assert fragment in str(e.value)


def test_experts_whose_width_differs_by_layer_are_refused_by_name(tmp_path):
    """A width per layer is read when every layer has the same one (Hunyuan states 32 × 3,072); different widths are
    a structure the count does not model, and the message says so."""
    d = {**cfg("qwen2-57b-a14b"), "moe_intermediate_size": [2560] * 27 + [1280]}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    with pytest.raises(InputError, match="experts whose width differs by layer are not modelled"):
        load_model(str(p))
    d["moe_intermediate_size"] = [2560] * 28
    p.write_text(json.dumps(d))
    assert load_model(str(p)).params_total == load_model(path("qwen2-57b-a14b")).params_total


def test_hunyuan_is_built_although_its_class_leaves_head_dim_empty():
    """transformers 5.24's HunYuanMoEV1Config declares head_dim None and derives nothing when a file leaves it out
    (Tencent's file states attention_head_dim 128 instead); its attention then computes None ** -0.5, so the model
    cannot be built as the class leaves it. hf_config fills in hidden_size // num_attention_heads = 4096 // 32 = 128,
    what the class's own rotary code computes, and builds it."""
    import torch
    import transformers

    d = cfg("hunyuan-a13b-instruct")
    c = hf_config.build(d, "config.json")
    assert "head_dim" not in d and d["attention_head_dim"] == 128 and c.head_dim is None
    with pytest.raises(TypeError), torch.device("meta"):
        transformers.AutoModelForCausalLM.from_config(c)
    shapes = dict(meta("hunyuan-a13b-instruct"))
    assert shapes["model.layers.0.self_attn.q_proj.weight"] == (32 * 128, 4096)
    assert shapes["model.layers.0.self_attn.query_layernorm.weight"] == (128,)
    assert total(meta("hunyuan-a13b-instruct")) == 80_393_183_232


@pytest.mark.parametrize("name, context, hand", [
    ("qwen2-57b-a14b", "8K", 8192 * 57_344), ("phi-4-mini-instruct", "8K", 8192 * 131_072),
    ("olmo-2-1124-13b", "4K", 4096 * 819_200), ("hunyuan-a13b-instruct", "8K", 8192 * 131_072),
    ("glm-4.5-air", "8K", 8192 * 188_416),
])
def test_the_new_families_plan_from_the_command_line(capsys, name, context, hand):
    """`capacity plan --model <config.json> --accelerator h100 --context 8K --batch 1 --json` (OLMo 2 at its 4K
    maximum: 8K is refused, beyond its 4,096 positions); the cache per sequence is the one worked by hand above."""
    assert main(["plan", "--model", path(name), "--accelerator", "h100", "--context", context, "--batch", "1",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kv_bytes_per_sequence"] == hand
    if name == "olmo-2-1124-13b":
        assert main(["plan", "--model", path(name), "--accelerator", "h100", "--context", "8K", "--json"]) == 2
        assert "maximum context of 4096" in capsys.readouterr().err


def test_layers_that_reuse_k_v_cache_nothing(tmp_path):
    """Gemma 3n's num_kv_shared_layers: the last layers reuse an earlier layer's K/V (no cache of their own).
    Mixtral with the last 8 of 32 layers sharing: 24 layers × 131,072 / 32 bytes per token."""
    d = {**cfg("mixtral-8x7b"), "num_kv_shared_layers": 8}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    assert load_model(str(p)).kv_bytes_per_token(2) == 24 * 8 * 128 * 2 * 2


def test_a_config_that_leaves_out_its_shape_is_refused(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(InputError, match="missing field 'num_hidden_layers'"):
        load_model(str(p))


def test_a_model_type_transformers_lacks_plans_from_the_fields_it_states(tmp_path):
    """Kimi-K2 names its own code (model_type kimi_k2) but the DeepseekV3ForCausalLM class: read through that
    class. MiniMax-M1 names neither a type nor a class transformers has: read from its own fields, and said so."""
    assert hf_config.known_model_type(cfg("kimi-k2")) == "deepseek_v3"
    m = load_model(path("minimax-m1"))
    assert "read from its own fields" in m.source
    # a config with no known type or class still needs its shape
    d = {k: v for k, v in cfg("minimax-m1").items() if k != "hidden_size"}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    with pytest.raises(InputError, match="missing field 'hidden_size'"):
        load_model(str(p))


# --- the pure path the CLI takes for counted types, against the transformers path --------------------------------
def test_the_stored_defaults_are_transformers_own():
    """data/config_defaults.json holds each counted type's class defaults as the pinned transformers gives them
    (regenerate with `python -m part1_capacity.calculator.model.configs` after changing the pin)."""
    table = configs.stored_defaults()
    assert table["transformers"] == hf_config.version()
    checked = table["checked_at_default_size"]
    assert not set(checked) & set(configs.COUNTED)
    assert set(table["model_types"]) == set(configs.COUNTED) | set(checked)
    assert set(checked) <= set(hf_config.decoder_types())
    assert table["known_types"] == hf_config.known_types()
    assert table["known_architectures"] == hf_config.known_architectures()
    for mt in table["model_types"]:
        assert table["model_types"][mt] == json.loads(json.dumps(hf_config.class_defaults(mt), default=str)), mt


# types stored because their count equals transformers' build at the class's default size, whose layouts are rows
# read from their modeling files (param_count.LAYOUTS): the smoke of the long check of every stored type below
ROWS_CHECKED_AT_DEFAULT_SIZE = ("cohere2", "glm4", "olmo3", "seed_oss", "phimoe", "granitemoe_swa", "minimax_m2",
                                "qwen3_5", "arcee")


@pytest.mark.parametrize("mt", ROWS_CHECKED_AT_DEFAULT_SIZE)
def test_a_type_checked_at_its_default_size_counts_as_transformers_builds_it(mt):
    assert mt in configs.stored_defaults()["checked_at_default_size"]
    pure, meta = configs.census(mt)
    assert pure == meta


@pytest.mark.long(smoke="tests/calculator/model/test_families.py::test_a_type_checked_at_its_default_size_counts_as_transformers_builds_it[cohere2]")
def test_every_type_at_default_size_counts_as_transformers_builds_it():
    """The stored table's claim, re-run on the installed transformers: every type it plans without transformers
    beyond the counted ones is counted, at its class's default size, exactly as transformers builds it."""
    wrong = {}
    for mt in configs.stored_defaults()["checked_at_default_size"]:
        c = configs.census(mt)
        if c is None or c[0] != c[1]:
            wrong[mt] = c
    assert wrong == {}


def test_a_type_counted_wrong_at_its_default_size_is_left_to_transformers(tmp_path):
    """The census stores only what it counts exactly: a layout row made wrong on purpose (Cohere's one norm per
    layer dropped) takes the type out of the table, and a type the pure reader refuses is never stored."""
    from part1_capacity.calculator.model import param_count

    row = param_count.LAYOUTS.pop("cohere2")
    try:
        pure, meta = configs.census("cohere2")
        assert pure != meta
        table = configs.write_stored_defaults(tmp_path / "defaults.json", checked=["cohere2", "bart"])
    finally:
        param_count.LAYOUTS["cohere2"] = row
    assert table["checked_at_default_size"] == [] and "cohere2" not in table["model_types"]
    assert configs.census("bart") is None          # an encoder-decoder: refused, not stored


@pytest.mark.parametrize("name", ALL)
def test_the_stored_table_knows_which_files_transformers_has_a_class_for(name):
    """The pure path asks the stored table, not transformers, whether a file has a class (MiniMax-M1 has none)."""
    assert configs.transformers_has_class(cfg(name)) == (hf_config.known_model_type(cfg(name)) is not None)


STORED = [n for n in ALL if configs.stored_type(cfg(n))]


def test_every_counted_type_has_a_published_config_counted_exactly():
    """A published file of a type only checked at its default size would be counted by hand here: such a type
    joins COUNTED."""
    types = {configs.stored_type(cfg(n)) for n in STORED}
    assert types == set(configs.COUNTED)
    assert set(STORED) <= set(EXACT)


def test_every_published_config_with_a_class_plans_without_transformers():
    """Each published file transformers has a class for is read through the stored table (no transformers)."""
    assert set(STORED) == set(EXACT)


@pytest.mark.parametrize("name", STORED)
def test_the_pure_path_plans_exactly_as_the_transformers_path(name):
    d = cfg(name)
    pure = configs.profile_from_config(d, "config.json", model_id=name)          # stored defaults, pure count
    full = configs.profile_from_fields(d, hf_config.defaults_for(d), "config.json", name, list(meta(name)))
    assert pure == full


def test_a_counted_config_plans_without_transformers_or_torch():
    """Text-only, multimodal (its vision tower counted too), hybrid, a type named only by its class, and one
    transformers has no class for."""
    names = ("mixtral-8x7b", "gemma-3-27b-it", "qwen3-vl-30b-a3b", "nemotron-h-8b", "hunyuan-a13b-instruct", "gpt2",
             "minimax-m1", "glm-4.5-air")
    code = ("import sys; from part1_capacity.cli import main; "
            f"paths = {[path(n) for n in names]!r}; "
            "assert all(main(['plan', '--model', p, '--accelerator', 'h100', '--context', '1024', '--json']) == 0 "
            "for p in paths); "
            "heavy = [m for m in ('transformers', 'torch') if m in sys.modules]; assert not heavy, heavy")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-800:]


def test_families_are_listed_by_structure_from_their_profiles():
    ps = [load_model(path(n)) for n in ("llama-4-scout", "minimax-m1", "qwen3.5-35b-a3b", "deepseek-v3.2")]
    assert configs.families_by_structure(ps) == {"chunked_attention": ["llama-4-scout"],
                                                 "ssm_hybrid": ["minimax-m1", "qwen3.5-35b-a3b"],
                                                 "mla": ["deepseek-v3.2"]}
    assert configs.structure_summary(ps[0]) == ("chunked attention, 36 of 48 layers chunked (chunk 8,192), "
                                                "8 K/V heads for 40, MoE")
    assert configs.structure_summary(ps[3]) == "MLA latent + indexer keys, MoE"
    # a vision tower makes active < total, but is no expert
    assert "MoE" not in configs.structure_summary(load_model(path("gemma-3-27b-it")))


def test_per_layer_mlp_widths_and_a_disabled_zero_window_are_read(tmp_path):
    """Gemma 3n states one MLP width per layer; Qwen2-MoE's class writes sliding_window 0 when use_sliding_window
    is false. Both are valid files (a zero window with the window on is still refused)."""
    d = {**cfg("mixtral-8x7b"), "intermediate_size": [14336] * 32, "sliding_window": 0, "use_sliding_window": False}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    m = load_model(str(p))
    assert m.kv_bytes_per_token(2) == 131_072 and m.n_window_layers == 0
    d["use_sliding_window"] = True
    p.write_text(json.dumps(d))
    with pytest.raises(InputError, match="field 'sliding_window': must be a positive integer"):
        load_model(str(p))


# --- LFM2: gated short convolutions beside GQA (LiquidAI/LFM2-1.2B, tests/data/configs/lfm2-1.2b) ---------------
def test_lfm2_counts_its_layers_by_hand_and_caches_a_convolution_window():
    """Counted by hand from the file: 16 layers, attention at full_attn_idxs 2, 5, 8, 10, 12, 14, short
    convolutions elsewhere (Lfm2Config derives layer_types so), hidden 2,048, 32 heads of 64, 8 K/V heads.
    Parameters: tied embedding 65,536 × 2,048 = 134,217,728; the MLP's block_ff_dim 12,288 auto-adjusted to
    int(2 × 12,288 / 3) = 8,192 (× 1.0, a multiple of 256): 3 × 2,048 × 8,192 = 50,331,648 per layer, with two norms
    of 2,048 → 50,335,744 × 16 = 805,371,904; an attention layer q 2,048² + k, v 2 × 512 × 2,048 + out 2,048² + q/k
    norms 2 × 64 = 10,485,888 × 6 = 62,915,328; a convolution layer, depthwise weight 2,048 × 3 + in_proj
    3 × 2,048 × 2,048 + out_proj 2,048² = 16,783,360 × 10 = 167,833,600; the final norm 2,048. Total 1,170,340,608.
    Cache: 6 layers × 2 (K, V) × 8 × 64 × 2 bytes = 12,288 bytes per token; each of the 10 convolution layers
    keeps its last conv_L_cache − 1 = 2 inputs of 2,048 channels, 4,096 elements, in the state dtype."""
    m = load_model(path("lfm2-1.2b"))
    assert m.params_total == m.params_active == 1_170_340_608
    assert (m.n_full_layers, m.ssm.kind, m.ssm.n_layers, m.ssm.state_elements) == (6, "short_conv", 10, 4096)
    assert m.kv_bytes_per_token(2) == 12_288
    assert m.cache_bytes(1000, 2) == 1000 * 12_288 + 10 * 4096 * 2
    # vLLM: one state page per convolution layer, (conv_L_cache − 1) × channels / TP in the model dtype
    # (vllm/model_executor/layers/mamba/mamba_utils.py short_conv_state_shape / short_conv_state_dtype)
    from part1_capacity.calculator.engines import llama_cpp, vllm
    assert vllm.state_page(m, 1, conv_bytes=2, ssm_bytes=4) == 2 * 2048 * 2
    assert vllm.state_page(m, 2, conv_bytes=2, ssm_bytes=4) == 2 * 1024 * 2
    # llama.cpp: the recurrent cache's R rows hold the convolution window in f32, no S (src/llama-hparams.cpp n_embd_r)
    assert llama_cpp.state_components(m, 1, 4) == {"R": 10 * 4096 * 4, "S": 0}


def test_lfm2_attention_layers_listed_out_of_range_are_refused_by_name(tmp_path):
    d = cfg("lfm2-1.2b")
    d["full_attn_idxs"] = [2, 5, 16]
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    with pytest.raises(InputError, match="full_attn_idxs"):
        load_model(str(p))


# --- Kimi Linear: Kimi Delta Attention beside MLA (moonshotai/Kimi-Linear-48B-A3B-Instruct) ------------------------
def test_kimi_linear_counts_by_hand_and_keeps_its_delta_state_in_float32():
    """Counted by hand from the file: 27 layers, MLA at the 1-based full_attn_layers 4, 8, …, 24, 27 (7 layers), KDA
    at the 20 others; hidden 2,304, vocabulary 163,840, untied head.
    Embedding and head 2 × 163,840 × 2,304 = 754,974,720; two norms per layer 4,608 × 27 = 124,416. An MLA layer
    (no q_lora_rank): q 32 × (128 + 64) × 2,304 = 14,155,776, kv_a (512 + 64) × 2,304 = 1,327,104 and its norm 512,
    kv_b 32 × (128 + 128) × 512 = 4,194,304, o 2,304 × 4,096 = 9,437,184: 29,114,880 × 7 = 203,804,160. A KDA layer
    (32 heads of 128, qkv 4,096): q, k, v 3 × 4,096 × 2,304 = 28,311,552, the convolution 3 × 4,096 × 4 = 49,152, the
    forget gate 128 × 2,304 + 4,096 × 128 + dt_bias 4,096 + A_log 32, beta 32 × 2,304, the output gate
    128 × 2,304 + 4,096 × 128, o_norm 128, o 2,304 × 4,096: 39,514,272 × 20 = 790,285,440. Layer 0 a dense MLP
    3 × 2,304 × 9,216 = 63,700,992; layers 1-26 a router 256 × 2,304, 256 experts of 3 × 2,304 × 1,024 and one shared
    expert of that width: 1,819,607,040 × 26 = 47,309,783,040. The final norm 2,304. Total 49,122,675,072.
    Cache: 7 MLA layers × (512 + 64) × 2 bytes = 8,064 bytes per token. State of a KDA layer: the convolution
    (4 − 1) × 3 × 4,096 = 36,864 elements and the recurrent 32 × 128 × 128 = 524,288, which vLLM keeps in float32
    (mamba_utils.py kda_state_dtype) and llama.cpp too (its R and S rows, src/llama-hparams.cpp n_embd_r/n_embd_s)."""
    m = load_model(path("kimi-linear-48b-a3b"))
    assert m.params_total == 49_122_675_072
    assert (m.n_full_layers, m.kv_lora_rank, m.qk_rope_head_dim) == (7, 512, 64)
    assert (m.ssm.kind, m.ssm.n_layers, m.ssm.conv_elements, m.ssm.state_elements) == ("kda", 20, 36_864, 561_152)
    assert m.ssm.state_dtype == "fp32"
    assert m.kv_bytes_per_token(2) == 8064
    assert m.cache_bytes(1000, 2, 4) == 1000 * 8064 + 20 * 561_152 * 4
    from part1_capacity.calculator.engines import llama_cpp, vllm
    # vLLM's state page: the convolution in the model dtype, the recurrent matrix in float32, split over TP ranks
    assert vllm.state_page(m, 1, conv_bytes=2, ssm_bytes=4) == 36_864 * 2 + 524_288 * 4
    assert vllm.state_page(m, 2, conv_bytes=2, ssm_bytes=4) == (36_864 * 2 + 524_288 * 4) / 2
    assert llama_cpp.state_components(m, 1, 4) == {"R": 20 * 36_864 * 4, "S": 20 * 524_288 * 4}


def test_kimi_linear_layers_listed_twice_or_missed_are_refused_by_name(tmp_path):
    d = cfg("kimi-linear-48b-a3b")
    d["linear_attn_config"]["full_attn_layers"] = [4, 8, 12, 16, 20, 24, 26]
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    with pytest.raises(InputError, match="kda_layers and full_attn_layers must number every layer 1 to 27"):
        load_model(str(p))


# --- headers win over the formula: every published config's model written as a header-only checkpoint ---------------
SAFETENSORS = {"bf16": ("BF16", 2), "fp16": ("F16", 2), "fp32": ("F32", 4)}


@pytest.mark.parametrize("name", EXACT)
def test_a_checkpoints_headers_and_the_formula_agree_and_the_plan_says_which(tmp_path, name):
    """A model folder holding the config.json (its quantization_config left out: the unquantized release) and one
    safetensors file whose header lists every tensor transformers builds for it, in the file's own dtype (the data
    region a sparse hole): the plan takes the headers' bytes and says so; the config.json alone gives the same bytes
    by the formula (parameters × dtype) and says that."""
    import struct

    from part1_capacity.calculator.model import weights

    d = json.loads(json.dumps(cfg(name)))
    for part in (d, d.get("text_config") or {}):
        part.pop("quantization_config", None)
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(d))
    formula = load_model(str(folder / "config.json"))
    dtype, size = SAFETENSORS[formula.native_dtype]
    header, off = {}, 0
    for tensor, shape in meta(name):
        n = param_count.numel(shape) * size
        header[tensor] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    with open(folder / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        f.truncate(8 + len(h) + off)                   # the tensors' bytes: a hole, nothing written
    headers = load_model(str(folder))
    by_headers, by_formula = weights.weights_report(headers), weights.weights_report(formula)
    assert (by_headers["weights_bytes_source"], by_formula["weights_bytes_source"]) == ("safetensors",
                                                                                        "parameters × dtype")
    assert by_headers["weights_bytes"] == by_formula["weights_bytes"] == off


# --- Kimi-K3: a kimi_linear text model of its own code (moonshotai/Kimi-K3), its shapes from its checkpoint -------
def test_kimi_k3_counts_its_own_blocks_by_hand():
    """Counted by hand from the file (text_config): 93 layers, MLA at the 24 1-based full_attn_layers 4, 8, …, 92, 93,
    KDA at the 69 others; hidden 7,168, vocabulary 163,840, untied head; every shape below is a tensor of the
    published checkpoint (its 96 safetensors files' headers).
    Embedding and head 2 × 163,840 × 7,168 = 2,348,810,240; two norms per layer 93 × 2 × 7,168 = 1,333,248.
    Attention residuals (attn_res_block_size): on every layer self_attention_res_norm 7,168, self_attention_res_proj
    1 × 7,168 and the two mlp_res_* alike (28,672), and output_attn_res_norm / _proj once: 93 × 28,672 + 14,336 =
    2,680,832.
    A KDA layer (96 heads of 128: 12,288): q, k, v 3 × 12,288 × 7,168 = 264,241,152, the three convolutions
    3 × 12,288 × 4 = 147,456, the forget gate f_a 128 × 7,168 = 917,504 and f_b 12,288 × 128 = 1,572,864, dt_bias
    12,288, A_log 96, beta 96 × 7,168 = 688,128, the full-rank output gate (use_full_rank_gate) g_proj
    12,288 × 7,168 = 88,080,384, o_norm 128, o 7,168 × 12,288 = 88,080,384: 443,740,384 × 69 = 30,618,086,496.
    An MLA layer: kv_a (512 + 64) × 7,168 = 4,128,768 and its norm 512, kv_b 96 × (128 + 128) × 512 = 12,582,912,
    q_a 1,536 × 7,168 = 11,010,048 and its norm 1,536, q_b 96 × (128 + 64) × 1,536 = 28,311,552, o 7,168 × 12,288 =
    88,080,384 and the output gate (mla_use_output_gate) g_proj 12,288 × 7,168 = 88,080,384: 232,196,096 × 24 =
    5,572,706,304.
    Layer 0 a dense MLP 3 × 7,168 × 33,792 = 726,663,168. Layers 1-92: 896 routed experts that read and write the
    latent width (routed_expert_hidden_size 3,584): 896 × 3 × 3,072 × 3,584 = 29,595,009,024; the latent
    projections routed_expert_down_proj 3,584 × 7,168 and routed_expert_up_proj 7,168 × 3,584 and the norm
    (latent_moe_use_norm) 3,584 = 51,383,808; two shared experts of the expert width, 3 × 7,168 × 6,144 =
    132,120,576; the router 896 × 7,168 = 6,422,528: 29,784,935,936 × 92 = 2,740,214,106,112. The final norm 7,168.
    Text model 2,779,484,393,568.
    The vision tower (vision_config, no biases): the patch convolution 1,024 × 3 × 14 × 14 = 602,112, the position
    grid 64 × 64 × 1,024 = 4,194,304; 27 blocks of two norms 2 × 1,024, wqkv 3 × 1,536 × 1,024 = 4,718,592, wo
    1,024 × 1,536 = 1,572,864, fc0 and fc1 2 × 4,096 × 1,024 = 8,388,608: 14,681,088 × 27 = 396,389,376; the final
    norm 1,024; the projector of 2 × 2 merged patches of 1,024 (4,096): 4,096 × 4,096 = 16,777,216 and
    7,168 × 4,096 = 29,360,128 and its norm 7,168: 447,358,976. Total 2,779,931,752,544.
    The checkpoint's tensors hold 2,779,931,837,184 parameters (two MXFP4 weights per packed byte): 84,640 more, its
    A_log of 128 entries for 96 heads (69 × 32) and the router's score-correction bias (92 × 896), which the count
    leaves out as it does for Kimi Linear — 3 × 10⁻⁸ of the total, well within 1 %."""
    m = load_model(path("kimi-k3"))
    assert m.params_total == 2_779_484_393_568 + 447_358_976
    assert sum(param_count.numel(s) for _, s in param_count.count_parameters(cfg("kimi-k3"))) == 2_779_484_393_568
    assert m.params_total == pytest.approx(2_779_931_837_184, rel=0.01)
    assert m.params_routed == 92 * 29_595_009_024
    # the cache as Kimi Linear's: 24 MLA layers × (512 + 64) × 2 bytes per token; 69 KDA states
    assert (m.n_full_layers, m.kv_bytes_per_token(2), m.ssm.kind, m.ssm.n_layers) == (24, 27_648, "kda", 69)


def test_kimi_k3s_mxfp4_experts_alone_are_packed():
    """Its compressed-tensors MXFP4 scheme packs the routed experts alone: 2,722,740,830,208 weights × 4.25 bits
    = 1,446,456,066,048 bytes, the checkpoint's weight_packed (half a byte each) and weight_scale (one byte per 32)
    bytes to the byte. Everything else is bf16, the latent and residual projections too (stored BF16 though the
    ignore list does not name them), and the vision tower: 56,743,563,360 + 447,358,976 = 57,190,922,336 × 2 =
    114,381,844,672 bytes."""
    from part1_capacity.calculator.model import weights

    groups = {g["dtype"]: (g["params"], g["bytes"]) for g in weights.weights_report(load_model(path("kimi-k3")))
              ["weights_groups"]}
    assert groups == {"mxfp4": (2_722_740_830_208, 1_446_456_066_048), "bf16": (57_190_922_336, 114_381_844_672)}


@pytest.mark.parametrize("change, fewer", [
    ({"attn_res_block_size": None}, 2_680_832),                   # the residual mixes' norms and projections
    ({"mla_use_output_gate": False}, 24 * 12_288 * 7_168),        # g_proj on the 24 MLA layers
    ({"latent_moe_use_norm": False}, 92 * 3_584),                 # routed_expert_norm on the 92 MoE layers
    # the KDA output gate low-rank (g_a 128 × 7,168 + g_b 12,288 × 128) in place of g_proj 12,288 × 7,168
    ({"linear_attn_config": {"use_full_rank_gate": False}}, 69 * (12_288 * 7_168 - 128 * 7_168 - 12_288 * 128)),
    # experts of the hidden width (more, so "fewer" is negative) and no latent projections or norm:
    # 92 × (896 × 3 × 3,072 × (3,584 − 7,168) + 51,383,808)
    ({"routed_expert_hidden_size": None}, 92 * (896 * 3 * 3_072 * (3_584 - 7_168) + 51_383_808)),
])
def test_each_kimi_k3_block_counts_where_its_field_says(tmp_path, change, fewer):
    d = cfg("kimi-k3")
    t = d["text_config"]
    for k, v in change.items():
        if isinstance(v, dict):
            t[k] = {**t[k], **v}
        elif v is None:
            del t[k]
        else:
            t[k] = v
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    assert load_model(str(p)).params_total == 2_779_484_393_568 + 447_358_976 - fewer


@pytest.mark.parametrize("field, value", [("attn_bias", True), ("mm_projector_type", "patchmerger"),
                                          ("merge_kernel_size", [2])])
def test_a_kimi_k3_vision_tower_not_the_published_one_is_refused_by_name(tmp_path, field, value):
    """Biases, another projector or a merge kernel that is not two sizes would change the tower's count."""
    d = cfg("kimi-k3")
    d["vision_config"][field] = value
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    with pytest.raises(InputError, match=f"vision_config: field '{field}'"):
        load_model(str(p))


@pytest.mark.parametrize("field, value, message", [
    ("latent_moe_use_norm", "false", "field 'latent_moe_use_norm'"),
    ("routed_expert_hidden_size", -1, "field 'routed_expert_hidden_size'"),
    ("attn_res_block_size", "12", "field 'attn_res_block_size'"),
    ("linear_attn_config", {"use_full_rank_gate": "true"}, "linear_attn_config.use_full_rank_gate"),
])
def test_kimi_k3s_fields_are_checked_by_name(tmp_path, field, value, message):
    d = cfg("kimi-k3")
    t = d["text_config"]
    t[field] = {**t[field], **value} if isinstance(value, dict) else value
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    with pytest.raises(InputError, match=re.escape(message)):
        load_model(str(p))


@pytest.mark.parametrize("field", ["conv_bias", "block_auto_adjust_ff_dim", "tie_embedding"])
def test_lfm2s_switches_must_be_json_booleans(tmp_path, field):
    """"false" as a string would read as true (biases counted, the MLP width adjusted, the head tied)."""
    d = {**cfg("lfm2-1.2b"), field: "false"}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    with pytest.raises(InputError, match=f"field '{field}'"):
        load_model(str(p))


# --- K/V heads and widths per layer type: Gemma 4, MiMo-V2-Flash ------------------------------------------------
# google/gemma-4-26B-A4B (text_config): 30 layers, every 6th global (5 full, 25 sliding, window 1,024); the sliding
# layers keep 8 K/V heads × 256, the global ones global_head_dim 512 and, with attention_k_eq_v,
# num_global_key_value_heads 2 (the value is the key's projection, cached beside it all the same).
# XiaomiMiMo/MiMo-V2-Flash: 48 layers, hybrid_layer_pattern 1 on 39 sliding layers (window 128), 0 on 9 full ones;
# keys 192 wide, values 128 (v_head_dim, swa_v_head_dim); 4 K/V heads on full layers, 8 on sliding ones.
GEMMA4_FULL = 2 * (512 + 512) * 2          # bytes per full layer per token: 2 heads × (K 512 + V 512) × 2 B = 4,096
GEMMA4_SLIDING = 8 * (256 + 256) * 2       # 8 heads × (256 + 256) × 2 B = 8,192
MIMO_FULL = 4 * (192 + 128) * 2            # 4 heads × (K 192 + V 128) × 2 B = 2,560
MIMO_SLIDING = 8 * (192 + 128) * 2         # 5,120


@pytest.mark.parametrize("name, T, expected", [
    # 5 full layers hold T, 25 sliding ones min(T, 1,024)
    ("gemma-4-26b-a4b", 512, 5 * GEMMA4_FULL * 512 + 25 * GEMMA4_SLIDING * 512),            # 115,343,360
    ("gemma-4-26b-a4b", 4096, 5 * GEMMA4_FULL * 4096 + 25 * GEMMA4_SLIDING * 1024),          # 293,601,280
    # 9 full layers hold T, 39 sliding ones min(T, 128)
    ("mimo-v2-flash", 100, 9 * MIMO_FULL * 100 + 39 * MIMO_SLIDING * 100),                   # 22,272,000
    ("mimo-v2-flash", 4096, 9 * MIMO_FULL * 4096 + 39 * MIMO_SLIDING * 128),                 # 119,930,880
])
def test_each_layer_type_caches_its_own_k_v_heads_and_widths(name, T, expected):
    m = load_model(path(name))
    assert m.attention_cache_bytes(T, 2) == expected
    assert m.kv_bytes_per_token(2) == {"gemma-4-26b-a4b": 5 * GEMMA4_FULL, "mimo-v2-flash": 9 * MIMO_FULL}[name]


def test_gemma_4_and_mimo_read_each_layer_types_fields():
    g, x = load_model(path("gemma-4-26b-a4b")), load_model(path("mimo-v2-flash"))
    assert (g.n_full_layers, g.n_window_layers, g.window, g.n_kv_heads, g.head_dim, g.kv_v_dim, g.window_kv) == \
        (5, 25, 1024, 2, 512, 512, (8, 256, 256))
    assert (x.n_full_layers, x.n_window_layers, x.window, x.n_kv_heads, x.head_dim, x.kv_v_dim, x.window_kv) == \
        (9, 39, 128, 4, 192, 128, (8, 192, 128))
    # without attention_k_eq_v, Gemma4TextConfig gives the global layers num_key_value_heads (8), still 512 wide
    c = cfg("gemma-4-26b-a4b")
    c["text_config"]["attention_k_eq_v"] = False
    assert configs.structure_fields(c)["n_kv_heads"] == 8


def test_gemma_4_and_mimo_parameters_against_their_cards():
    g, x = load_model(path("gemma-4-26b-a4b")), load_model(path("mimo-v2-flash"))
    # Gemma 4 26B A4B's card: 25.2B total, 3.8B active, its vision encoder (~550M) beside them
    assert g.params_total - g.params_multimodal == pytest.approx(25.2e9, rel=0.01)
    assert g.params_active == pytest.approx(3.8e9, rel=0.01)
    assert 0.5e9 < g.params_multimodal < 0.6e9
    # MiMo-V2-Flash's card: 309B total parameters (15B active, rounded)
    assert x.params_total == pytest.approx(309e9, rel=0.01)


def test_vllm_pages_each_layer_type_at_its_width_by_hand():
    from part1_capacity.calculator.engines import vllm
    g = load_model(path("gemma-4-26b-a4b"))
    # one rank, 32,768 tokens, 8,192 batched: the sliding page of 16 tokens is 16 × 8,192 = 131,072 B; the full
    # layers' 4,096 B per token take blocks of 32 to fill the same page (unify_kv_cache_spec_page_size). Groups of
    # 5 (25 ≥ 1.5 × 5): 1 full group of 32,768 / 32 = 1,024 blocks, 5 sliding groups of ⌈(1,023 + 8,192) / 16⌉ + 1
    # = 577 blocks.
    r = vllm.reservation(g, 32768, 1, 2, 2, 4, 8192)
    assert (r.page_bytes, r.group_size, r.groups) == (131_072, 5, {"full": 1, "sliding": 5})
    assert r.bytes_per_request == 5 * 131_072 * (1024 + 5 * 577) == 2_561_802_240
    assert r.bytes_per_token == 5 * GEMMA4_FULL
    # 8 ranks: 1 K/V head each for both kinds (the global 2 replicated): full 1 × 1,024 × 2 = 2,048 B per token, a
    # page of 32,768; the sliding 1,024 B per token now fill it in blocks of 32: ⌈9,215 / 32⌉ + 1 = 289 blocks
    r = vllm.reservation(g, 32768, 8, 2, 2, 4, 8192)
    assert r.bytes_per_request == 5 * 32_768 * (2048 + 5 * 289) == 572_293_120
    # without the hybrid manager every layer is full, each at its own width: 2,048 blocks of 16 tokens each
    r = vllm.reservation(g, 32768, 1, 2, 2, 4, 8192, hybrid_manager=False)
    assert r.bytes_per_request == 32768 * (5 * GEMMA4_FULL + 25 * GEMMA4_SLIDING) == 7_381_975_040
    x = load_model(path("mimo-v2-flash"))
    # MiMo: sliding page 16 × 5,120 = 81,920; full 2,560 per token in blocks of 32; groups of 9 (39 ≥ 13.5): 1 full,
    # ⌈39 / 9⌉ = 5 sliding of ⌈(127 + 8,192) / 16⌉ + 1 = 521 blocks
    r = vllm.reservation(x, 32768, 1, 2, 2, 4, 8192)
    assert r.bytes_per_request == 9 * 81_920 * (1024 + 5 * 521) == 2_675_589_120


def test_vllm_refuses_page_sizes_it_cannot_unify(tmp_path):
    from part1_capacity.calculator.engines import vllm
    c = cfg("gemma-4-26b-a4b")
    c["text_config"]["global_head_dim"] = 384     # full: 2 × 768 × 2 = 3,072 B per token; 16 × 3,072 ∤ 131,072
    p = tmp_path / "config.json"
    p.write_text(json.dumps(c))
    m = load_model(str(p))
    assert m.kv_bytes_per_token(2) == 5 * 3072
    with pytest.raises(InputError, match="vLLM cannot unify these layer types' page sizes"):
        vllm.reservation(m, 32768, 1, 2, 2, 4, 8192)


def test_llama_cpp_allocates_each_layer_types_k_and_v_at_its_width_by_hand():
    from part1_capacity.calculator.engines import llama_cpp
    # 32,768 cells; the sliding cache pad(min(32,768, W + 512), 256) cells: 1,536 for Gemma 4, 768 for MiMo
    g = llama_cpp.components(load_model(path("gemma-4-26b-a4b")), 32768, 1, 2)
    assert g == {"K": 5 * 2 * 512 * 32768 * 2, "V": 5 * 2 * 512 * 32768 * 2,
                 "K_swa": 25 * 8 * 256 * 1536 * 2, "V_swa": 25 * 8 * 256 * 1536 * 2}
    x = llama_cpp.components(load_model(path("mimo-v2-flash")), 32768, 1, 2)
    assert x == {"K": 9 * 4 * 192 * 32768 * 2, "V": 9 * 4 * 128 * 32768 * 2,
                 "K_swa": 39 * 8 * 192 * 768 * 2, "V_swa": 39 * 8 * 128 * 768 * 2}


def test_per_type_k_v_heads_split_by_their_own_heads_under_tensor_parallel():
    from part1_capacity.calculator.sizing import sharding
    g = load_model(path("gemma-4-26b-a4b"))
    # 4 ranks: global 2 heads → 1 (replicated), sliding 8 → 2; at T = 4,096 one rank holds
    # 5 × 1 × 1,024 × 2 × 4,096 + 25 × 2 × 512 × 2 × 1,024
    attn, state = sharding.cache_parts_per_rank(g, 4096, 2, 2, 4)
    assert (attn, state) == (5 * 1 * 1024 * 2 * 4096 + 25 * 2 * 512 * 2 * 1024, 0)
    assert sharding.splits_heads(g, 8) and not sharding.splits_heads(g, 3)


def test_the_law_counts_each_layer_types_k_and_v_widths_by_hand():
    # 2 full layers of 3 heads × (K 4 + V 2), 5 window layers of 1 head × (6 + 6), window 10, 2 bytes, T = 100:
    # 2 × 3 × 6 × 2 × 100 + 5 × 1 × 12 × 2 × 10 = 7,200 + 1,200
    assert laws.sliding_window_bytes(100, 2, 5, 10, 3, 4, 2, v_head_dim=2, window_kv_heads=1,
                                     window_head_dim=6) == 8_400
    # without per-type fields the MHA/GQA law: 2 × 3 × 4 × 2 × (2 × 100 + 5 × 10)
    assert laws.sliding_window_bytes(100, 2, 5, 10, 3, 4, 2) == 2 * 3 * 4 * 2 * 250 == 12_000
    assert laws.kv_bytes_per_token(4, 2, 192, 1, v_head_dim=128) == 4 * 2 * 320


@pytest.mark.parametrize("change, fragment", [
    ({"window_head_dim": 256}, "need sliding-window layers (n_window_layers > 0, window_kind sliding)"),
    ({"n_window_layers": 4, "window": 128, "window_n_kv_heads": 5},
     "n_heads (32) must be divisible by window_n_kv_heads (5)"),
    ({"kv_lora_rank": 512, "qk_rope_head_dim": 64, "head_dim_v": 128}, "beside an MLA latent: not modelled"),
    ({"window_n_kv_heads": -1, "n_window_layers": 4, "window": 128}, "field 'window_n_kv_heads' must be a positive"),
])
def test_per_type_k_v_fields_of_a_profile_are_checked_by_name(change, fragment):
    from part1_capacity.calculator.model.profiles import profile_from_dict
    row = {"id": "x", "n_layers": 8, "n_heads": 32, "n_kv_heads": 8, "head_dim": 128, "hidden_size": 4096,
           "params_total": 8e9, "max_context": 8192, **change}
    with pytest.raises(InputError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        profile_from_dict(row)


def test_gemma_4_31b_nvfp4_by_hand():
    """nvidia/Gemma-4-31B-IT-NVFP4: 60 layers, every 6th global (10 global, 50 sliding, window 1,024); sliding layers
    16 K/V heads × 256, global ones 4 × 512 (attention_k_eq_v); ModelOpt NVFP4 on every Linear but the attention of
    each layer, the vision tower and its projector (its `ignore`, which names transformers' modules)."""
    m = load_model(path("gemma-4-31b-it-nvfp4"))
    full, sliding = 4 * (512 + 512) * 2, 16 * (256 + 256) * 2          # 8,192 and 16,384 B per layer per token
    assert m.attention_cache_bytes(4096, 2) == 10 * full * 4096 + 50 * sliding * 1024 == 1_174_405_120
    # the card's 30.7B is the text model; the NVFP4 matrices are the 60 MLPs, gate, up and down of 5,376 × 21,504
    assert m.params_total - m.params_multimodal == pytest.approx(30.7e9, rel=0.01)
    groups = {g.dtype: g.params for g in m.weight_groups}
    assert groups["fp4"] == 60 * 3 * 5376 * 21504 == 20_808_990_720
    assert groups["fp8"] == 20_808_990_720 // 16                    # one E4M3 scale per 16 weights of a row
    assert groups["bf16"] == m.params_total - groups["fp4"]         # the scales are stored beside, not parameters


def test_minimax_m3_caches_k_v_and_its_indexer_keys_by_hand(capsys):
    """MiniMaxAI/MiniMax-M3: 60 layers of GQA, 4 K/V heads × 128; on the 57 its sparse_attention_freq marks, the
    lightning indexer caches one key of 128 per token (sparse_disable_index_value: no index value)."""
    m = load_model(path("minimax-m3"))
    per_token = 60 * 4 * (128 + 128) * 2 + 57 * 128 * 2            # 122,880 + 14,592
    assert m.kv_bytes_per_token(2) == per_token == 137_472
    assert m.attention_cache_bytes(4096, 2) == 4096 * per_token
    # 8 tensor ranks: 4 K/V heads, one per rank (replicated); the indexer's single key head whole on every rank
    from part1_capacity.calculator.sizing import sharding
    attn, _ = sharding.cache_parts_per_rank(m, 4096, 2, 2, 8)
    assert attn == 4096 * (60 * 1 * 256 * 2 + 57 * 128 * 2)
    # each engine refuses the index keys in one line naming the structure and itself
    for engine in ("vllm", "llama.cpp"):
        code = main(["plan", "--model", path("minimax-m3"), "--accelerator", "h100", "--context", "4096",
                     "--engine", engine])
        err = capsys.readouterr().err
        name = {"vllm": "vLLM"}.get(engine, engine)
        assert code == 2 and err.count("\n") == 1 and f"{name}: block-sparse attention's indexer keys" in err


def test_minimax_m3_counts_as_transformers_builds_its_text_model():
    """transformers has no class for minimax_m3 (its own code) but reads the same fields in MiniMaxM3VLTextConfig;
    that class's meta-device build is the census the pure count (the dense layers' own width, the shared expert, the
    indexer's projections and norms on 57 layers) must equal, and the release's "428 billion" within 1 %."""
    d = cfg("minimax-m3")
    meta = hf_config.meta_parameters({**d, "model_type": "minimax_m3_vl_text"}, "minimax-m3")
    pure = param_count.count_model_parameters(d, configs.OWN_CODE_DEFAULTS)
    assert total(pure) == total(meta) == 426_174_565_632
    assert load_model(path("minimax-m3")).params_total == pytest.approx(428e9, rel=0.01)


def test_deepseek_v4_caches_window_compressed_entries_and_index_keys_by_hand(capsys):
    """deepseek-ai/DeepSeek-V4-Flash: 43 layers (compress_ratios' 44th entry is the MTP layer's, not built), each
    caching one K=V vector of head_dim 512 per token for its last 128 tokens (sliding_window); 21 layers of ratio 4
    add an entry of 512 per 4 tokens with the indexer's key of 128 beside it, 20 of ratio 128 an entry of 512 per
    128 tokens; each compressor keeps a float32 state (DeepSeek's inference/model.py Compressor: kv_state and
    score_state, 2·4 × 2·512 on CSA layers, 2·4 × 2·128 for their indexer's, 128 × 512 on HCA layers)."""
    m = load_model(path("deepseek-v4-flash"))
    assert (m.structure, m.n_window_layers, m.window, m.n_kv_heads, m.head_dim) == (
        "compressed_sparse_attention", 43, 128, 1, 512)
    assert m.compressed == ((4, 21, 128), (128, 20, 0))
    assert configs.structure_summary(m) == (
        "compressed sparse attention, 43 of 43 layers sliding-window (window 128), one K=V head for 64, K/V "
        "compressed 4× on 21 layers with indexer keys, K/V compressed 128× on 20 layers, MoE")
    state = 21 * (2 * 8 * 1024 + 2 * 8 * 256) * 4 + 20 * (2 * 128 * 512) * 4      # 1,720,320 + 10,485,760
    assert state == 12_206_080
    # at its longest context, 1,048,576 tokens, bf16: windows 43 × 128 × 512 × 2 = 5,636,096; CSA 21 × 262,144
    # entries × (512 + 128) × 2 = 7,046,430,720; HCA 20 × 8,192 × 512 × 2 = 167,772,160
    T = 1_048_576
    assert m.attention_cache_bytes(T, 2) == 5_636_096 + 7_046_430_720 + 167_772_160 + state == 7_232_045_056
    # 1,000 tokens: windows full (43 × 128 × 512 × 2), 250 CSA entries, 7 HCA ones (⌊1000 / 128⌋)
    by_hand = 43 * 128 * 1024 + 21 * 250 * 640 * 2 + 20 * 7 * 512 * 2 + state
    assert m.attention_cache_bytes(1000, 2) == by_hand == 24_705_536
    # the slope once the windows are full: 21 × 640 × 2 / 4 + 20 × 512 × 2 / 128 = 6,720 + 160 B per token
    assert m.kv_bytes_per_token(2) == 6_880
    # one K=V head: whole on each of 8 tensor ranks (replicated), as the MLA latent is
    from part1_capacity.calculator.sizing import sharding
    attn, st = sharding.cache_parts_per_rank(m, 1000, 2, 2, 8)
    assert (attn, st) == (24_705_536, 0)
    # each engine refuses in one line naming the structure and itself
    for engine, name in (("vllm", "vLLM"), ("llama.cpp", "llama.cpp")):
        code = main(["plan", "--model", path("deepseek-v4-flash"), "--accelerator", "h100", "--context", "4096",
                     "--engine", engine])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and f"{name}: compressed sparse attention (DeepSeek-V4" in err


def test_deepseek_v4_counts_as_transformers_builds_it():
    """DeepSeek-V4-Flash counted from its fields equals transformers' DeepseekV4ForCausalLM meta build, 284.33B:
    the card's "284B". By hand per layer: attention q 4,096 × 1,024 + 1,024 + 32,768 × 1,024, K=V 512 × 4,096 + 512,
    output 8,192 × 4,096 + 4,096 × 8,192, 64 sinks = 106,956,352; MoE 256 × 3 × 2,048 × 4,096 + router 256 × 4,096
    + shared 3 × 2,048 × 4,096 = 6,468,665,344; two hyper-connections 2 × (24 × 16,384 + 24 + 3) = 786,486; two norms
    8,192. CSA compressor 2 × 1,024 × 4,096 + 4 × 1,024 + 512 = 8,393,216 and its indexer 2 × 256 × 4,096 + 4 × 256
    + 128 + 8,192 × 1,024 + 64 × 4,096 = 10,749,056; HCA compressor 2 × 512 × 4,096 + 128 × 512 + 512 = 4,260,352.
    Embeddings and head 2 × 129,280 × 4,096; final norm 4,096; the head's hyper-connection 4 × 16,384 + 4 + 1."""
    per_layer = 106_956_352 + 6_468_665_344 + 786_486 + 8_192
    by_hand = (43 * per_layer + 21 * (8_393_216 + 10_749_056) + 20 * 4_260_352
               + 2 * 129_280 * 4_096 + 4_096 + 65_541)
    assert by_hand == 284_332_230_231
    pure = param_count.count_model_parameters(cfg("deepseek-v4-flash"), configs.stored_defaults()["model_types"][
        "deepseek_v4"])
    assert total(pure) == by_hand == total(meta("deepseek-v4-flash"))
    m = load_model(path("deepseek-v4-flash"))
    assert m.params_total == pytest.approx(284e9, rel=0.01)
    # active: the 6 of 256 routed experts, 13.8B (the card: "13B")
    routed = 43 * 256 * 3 * 2_048 * 4_096
    assert m.params_active == by_hand - routed * (1 - 6 / 256) == 13_799_622_231


def test_compressed_law_against_transformers_deepseek_v4_cache():
    """A tiny DeepSeek-V4 run through transformers (models/deepseek_v4: DeepseekV4CSACache, DeepseekV4HCACache) for
    300 tokens then 5 decoded one at a time: each compressed layer holds ⌊T / r⌋ entries of head_dim (CSA: the
    indexer's keys of index_head_dim beside them), what the law counts; the window holds min(T, W) − 1 between steps
    (the token being decoded completes the W the law reserves, as DeepSeek's ring of window_size slots does)."""
    import torch
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

    ratios, W, hd, ihd = [0, 4, 128, 4], 8, 32, 16
    c = DeepseekV4Config(vocab_size=64, hidden_size=64, moe_intermediate_size=32, num_hidden_layers=4,
                         num_attention_heads=4, head_dim=hd, q_lora_rank=16, o_groups=2, o_lora_rank=8,
                         n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, index_n_heads=2,
                         index_head_dim=ihd, index_topk=4, sliding_window=W, hc_mult=2, num_hash_layers=0,
                         compress_ratios=ratios, qk_rope_head_dim=8, max_position_embeddings=4096)
    torch.manual_seed(0)
    model = DeepseekV4ForCausalLM(c).eval()
    with torch.no_grad():
        cache = model(torch.randint(0, 64, (1, 300)), use_cache=True).past_key_values
        for _ in range(5):
            cache = model(torch.randint(0, 64, (1, 1)), cache=cache, use_cache=True).past_key_values
    T, compressed = 305, ((4, 2, ihd), (128, 1, 0))
    held = 0
    for ratio, layer in zip(ratios, cache.layers):
        assert tuple(layer.keys.shape) == (1, 1, min(T, W) - 1, hd)          # one K=V head
        for name, entries in (getattr(layer, "compressed_kv", None) or {}).items():
            width = ihd if name == "indexer" else hd
            assert tuple(entries.shape) == (1, laws.compressed_entries(T, ratio), width)   # 76 or 2 entries
            held += entries.numel()
    # the law's growing part beyond the windows: 2 CSA layers × 76 × (32 + 16) + 1 HCA layer × 2 × 32 = 7,360
    law = laws.compressed_attention_bytes(T, 4, W, hd, 1, compressed, state_bytes_per_element=0)
    assert held == law - 4 * min(T, W) * hd == 2 * 76 * 48 + 2 * 32 == 7_360


def test_deepseek_v4_read_from_transformers_layer_types_caches_the_same():
    """A DeepSeek-V4 file as transformers saves it (layer_types naming each layer's attention, compress_rates; no
    compress_ratios) reads as the published one: the same compressed layers and cache."""
    d = cfg("deepseek-v4-flash")
    names = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}
    saved = {k: v for k, v in d.items() if k != "compress_ratios"}
    saved.update(layer_types=[names[r] for r in d["compress_ratios"][:43]],
                 compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 128})
    table = configs.stored_defaults()["model_types"]["deepseek_v4"]
    a, b = (configs.profile_from_fields(x, table, parameters=[("p", (1,))]) for x in (d, saved))
    assert a.compressed == b.compressed == ((4, 21, 128), (128, 20, 0))
    assert a.cache_bytes(100_000, 2) == b.cache_bytes(100_000, 2)


@pytest.mark.parametrize("change, fragment", [
    ({"compressed": [[4, 21]]}, "field 'compressed' must be a list of [ratio, layers, index_head_dim]"),
    ({"compressed": [[0, 21, 128]]}, "field 'ratio' must be a positive integer"),
    ({"compressed": [[4, 50, 128]]}, "compressed layers (50) exceed n_layers (43)"),
    ({"compressed": [[4, 21, 128]], "n_kv_heads": 2}, "compressed layers need every layer a sliding window of one"),
    ({"compressed": [[4, 21, 128]], "n_window_layers": 40}, "compressed layers need every layer a sliding window"),
])
def test_compressed_layers_of_a_profile_are_checked_by_name(change, fragment):
    from part1_capacity.calculator.model.profiles import profile_from_dict
    row = {"id": "x", "n_layers": 43, "n_heads": 64, "n_kv_heads": 1, "head_dim": 512, "hidden_size": 4096,
           "params_total": 284e9, "max_context": 1048576, "n_full_layers": 0, "n_window_layers": 43, "window": 128,
           **change}
    with pytest.raises(InputError, match=fragment.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        profile_from_dict(row)
    # the same row with the published compressed layers builds, and caches as the config does
    ok = profile_from_dict({**row, "n_kv_heads": 1, "n_window_layers": 43,
                            "compressed": [[4, 21, 128], [128, 20, 0]]})
    assert ok.cache_bytes(1000, 2) == load_model(path("deepseek-v4-flash")).cache_bytes(1000, 2)


def test_deepseek_v4_routed_experts_are_stored_in_fp4(tmp_path, capsys):
    """The file's expert_dtype fp4 beside its fp8 quantization_config: the routed experts, 43 × 256 × 3 × 2,048 ×
    4,096, in 4-bit floats with an E8M0 scale per 32 (mxfp4's 4.25 bits); the other matrices fp8; embeddings, head,
    norms, routers, sinks, biases and hyper-connections bf16."""
    m = load_model(path("deepseek-v4-flash"))
    groups = {g.dtype: g.params for g in m.weight_groups}
    assert groups["mxfp4"] == 43 * 256 * 3 * 2_048 * 4_096 == 277_025_390_592
    # fp8: per layer q 4,096 × 1,024 + 32,768 × 1,024, K=V 512 × 4,096, output 2 × 8,192 × 4,096, shared expert
    # 3 × 2,048 × 4,096; on CSA layers the indexer's q 8,192 × 1,024. Kept in bf16 as DeepSeek's inference code
    # stores them: the compressors' K/V and gate projections and the indexer's weights_proj
    per_layer = 4_096 * 1_024 + 32_768 * 1_024 + 512 * 4_096 + 2 * 8_192 * 4_096 + 3 * 2_048 * 4_096
    assert groups["fp8"] == 43 * per_layer + 21 * 8_192 * 1_024
    assert groups["bf16"] == m.params_total - groups["mxfp4"] - groups["fp8"]
    d = {**cfg("deepseek-v4-flash"), "expert_dtype": "int4"}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    code = main(["plan", "--model", str(p), "--accelerator", "h100", "--context", "4096"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "expert_dtype: 'int4' is not a storage type" in err


@pytest.mark.parametrize("name, change, fragment", [
    ("gemma-4-26b-a4b", {"global_head_dim": "x"}, "field 'global_head_dim': must be an integer"),
    ("gemma-4-26b-a4b", {"attention_k_eq_v": "true"}, "field 'attention_k_eq_v': must be true or false"),
    ("mimo-v2-flash", {"hybrid_layer_pattern": [0, 1]}, "field 'hybrid_layer_pattern' must be 48 values of 0"),
    ("mimo-v2-flash", {"swa_num_key_value_heads": 7}, "n_heads (64) must be divisible by window_n_kv_heads (7)"),
    ("minimax-m3", {"sparse_attention_config": [1]}, "field 'sparse_attention_config' must be a JSON object"),
    ("minimax-m3", {"sparse_attention_config": {"sparse_attention_freq": [1] * 60,
                                                "sparse_disable_index_value": [0] * 60, "sparse_index_dim": 128}},
     "indexer caches an index value beside its key (sparse_disable_index_value 0): not modelled"),
])
def test_per_layer_type_fields_refused_in_one_line_by_name(tmp_path, capsys, name, change, fragment):
    d = cfg(name)
    (d["text_config"] if "text_config" in d else d).update(change)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    code = main(["plan", "--model", str(p), "--accelerator", "h100", "--context", "4096"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and fragment in err
