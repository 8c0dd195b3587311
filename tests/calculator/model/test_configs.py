"""Real Hugging Face config.json files → profiles: KV per token, state, parameters, and the errors for bad files.

Expectations are computed here from the config fields by hand (or quoted from model cards), and compared with the
bundled profiles, which were typed in separately from the model cards and reference implementations.
"""
import json
import shutil
from pathlib import Path

import pytest

from part1_capacity.cli import main
from part1_capacity.calculator.model.configs import FAMILIES
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.plan.plan import make_plan
from part1_capacity.calculator.readers.loader import load_model

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "configs"
ALL = sorted(p.parent.name for p in CONFIGS.glob("*/config.json"))

# config folder -> (bundled profile it must agree with or None, published parameter count or None)
PUBLISHED = {
    "llama-3.1-70b": ("llama-3.1-70b", 70.55e9), "mistral-nemo-12b": ("mistral-nemo-12b", 12.25e9),
    "mistral-7b-v0.1": (None, 7.3e9),
    "qwen2.5-0.5b": ("qwen2.5-0.5b", 0.494e9), "qwen3-8b": ("qwen3-8b", 8.19e9), "gpt2": ("gpt2", 124.44e6),
    "deepseek-v2.5": (None, 236e9), "deepseek-r1": ("deepseek-v3", 671e9), "gemma-2-9b": ("gemma-2-9b", 9.24e9),
    "gemma-3-12b-it": (None, None), "gemma-3-27b-it": ("gemma-3-27b", 27.4e9), "gpt-oss-20b": ("gpt-oss-20b", 20.9e9),
    "jamba-1.5-mini": ("jamba-1.5-mini", 52e9), "nemotron-h-8b": ("nemotron-h-8b", 8e9),
    "nemotron-3-nano-30b-a3b": ("nemotron-3-nano-30b-a3b", 31.6e9),
    "granite-4.0-h-tiny": ("granite-4.0-h-tiny", 7e9), "qwen3-next-80b-a3b": ("qwen3-next-80b-a3b", 80e9),
    "falcon-h1-0.5b": (None, None),
    # model cards: Mixtral 46.7B; Qwen3-235B-A22B 235B; Qwen3-Coder-480B-A35B 480B; Llama 4 Scout 109B (with its
    # vision encoder); Qwen3.5-35B-A3B 35B; DeepSeek-V3.2 685B of which 14B the MTP module a server skips (671B).
    # Not checked: Qwen3-VL-30B-A3B (published as "30B"), Kimi-K2 ("1T"; the technical report's 1.04T is not the
    # 1.026T its config builds, see the README).
    "mixtral-8x7b": (None, 46.7e9), "qwen3-235b-a22b": (None, 235e9), "qwen3-coder-480b-a35b": (None, 480e9),
    "qwen3-vl-30b-a3b": (None, None), "qwen3.5-35b-a3b": (None, 35e9), "llama-4-scout": (None, 109e9),
    "kimi-k2": (None, None), "deepseek-v3.2": (None, 671e9), "minimax-m1": (None, 456e9),
    # model cards: Qwen2-57B-A14B "57B"; Phi-4-mini-instruct "3.8B"; Hunyuan-A13B "80 billion total". OLMo-2-1124-13B's
    # card says "13B": its checkpoint index's 54,864,793,600 bytes of float32 hold 13,716,198,400 (see the README)
    "qwen2-57b-a14b": (None, 57e9), "phi-4-mini-instruct": (None, 3.8e9), "olmo-2-1124-13b": (None, 13_716_198_400),
    "hunyuan-a13b-instruct": (None, 80e9),
    # model card: GLM-4.5-Air "106 billion total parameters" (its 12B active not checked: see the README)
    "glm-4.5-air": (None, 106e9),
    # model cards: Llama 4 Maverick "400B" total (with its vision encoder); Mamba-2.8B "2.8B"
    "llama-4-maverick": (None, 400e9), "mamba-2.8b-hf": (None, 2.8e9),
    # model card: Mistral-Small-3.1-24B "24 billion parameters" (its vision tower included)
    "mistral-small-3.1-24b": (None, 24e9),
    # model card: Nemotron-H-56B-Base-8K "56B" (counted by hand in test_a_config_saved_with_infinity_is_read)
    "nemotron-h-56b-base-8k": (None, 56e9),
    # model card: Nemotron 3 Super "120B total" (counted by hand in test_latent_experts_route_in_the_latent_width)
    "nemotron-3-super-120b-a12b": (None, 120e9),
    # model card: EXAONE-4.0-1.2B "1.07B" without embeddings: + 102,400 × 2,048 tied = 1.28B (by hand below)
    "exaone-4.0-1.2b": (None, 1.28e9),
    # model card: Phi-3-small-8k-instruct "7B" (the Hub's safetensors total: 7.39B; by hand below)
    "phi-3-small-8k-instruct": (None, 7.39e9),
    # MPT-7B-Instruct: its checkpoint index's 13,298,573,312 bytes of bfloat16 hold 6,649,286,656 (see the README)
    "mpt-7b-instruct": (None, 6_649_286_656),
    # LFM2-1.2B, named for 1.2B: 1,170,340,608 by hand (test_families.py), within 2.5 % of its name, not 2 %
    "lfm2-1.2b": (None, None),
    # Kimi-Linear-48B-A3B, "48B": 49,122,675,072 by hand (test_families.py), 2.3 % above the rounded name
    "kimi-linear-48b-a3b": (None, None),
    # Llama-3.3-Nemotron-Super-49B-v1 "49B": 49,867,145,216 by hand (test_layers_sized_one_by_one_are_read_block_by_block)
    "llama-3.3-nemotron-super-49b-v1": (None, 49.867e9),
    # model card: QwQ-32B "32.5B" parameters
    "qwq-32b": (None, 32.5e9),
    # model card: Phi-4 "14B parameters"; the Hub's safetensors total 14.7B (40 × 340.8M + 2 × 100,352 × 5,120 by hand)
    "phi-4": (None, 14.7e9),
    # Gemma 4 26B A4B: its card's 25.2B total leaves out the ~550M vision encoder the count includes (25.81B); the
    # text model is checked within 1 % of 25.2B, and 3.8B active, in test_families.py
    "gemma-4-26b-a4b": (None, None),
    # Gemma 4 31B: its card's 30.7B is the text model (the vision tower beside it): checked in test_families.py
    "gemma-4-31b-it-nvfp4": (None, None),
    # model card: MiMo-V2-Flash "309B total parameters"
    "mimo-v2-flash": (None, 309e9),
    # MiniMax-M3: "428 billion" total at its release (its vision tower included; this text file counts 426.17B,
    # equal to transformers' MiniMaxM3VLTextConfig build of the same fields: test_families.py)
    "minimax-m3": (None, 428e9),
    # model card: DeepSeek-V4-Flash "284B" total, 13B active (the MTP layer its checkpoint adds not built; the count,
    # 284,332,230,231, equals transformers' DeepseekV4ForCausalLM meta build: test_families.py)
    "deepseek-v4-flash": (None, 284e9),
    # Kimi-K3: no total on its card; its checkpoint's tensors (96 safetensors files) hold 2,779,931,837,184
    # parameters, two MXFP4 weights per packed byte, its vision tower included (by hand in test_families.py)
    "kimi-k3": (None, 2_779_931_837_184),
}


NEW_FAMILIES = ("mixtral-8x7b", "qwen3-235b-a22b", "qwen3-coder-480b-a35b", "qwen3-vl-30b-a3b", "qwen3.5-35b-a3b",
                "llama-4-scout", "kimi-k2", "deepseek-v3.2", "minimax-m1", "qwen2-57b-a14b", "phi-4-mini-instruct",
                "olmo-2-1124-13b", "hunyuan-a13b-instruct", "glm-4.5-air", "llama-4-maverick",
                "mistral-small-3.1-24b")


def cfg(name):
    return json.loads((CONFIGS / name / "config.json").read_text())


def test_every_family_the_calculator_claims_has_a_real_config():
    families = {cfg(n).get("model_type") for n in ALL} | {cfg(n).get("text_config", {}).get("model_type") for n in ALL}
    assert set(FAMILIES) <= families
    assert set(PUBLISHED) == set(ALL)
    readme = (CONFIGS / "README.md").read_text()
    for mt, (_, repo) in FAMILIES.items():
        assert repo.split()[0] in readme, (mt, repo)          # the site names the file the tests read


def _hand_attention_layers(c):
    """Full-attention and window layer counts, read by hand from each family's own convention."""
    t = c.get("text_config", c)
    L = t.get("num_hidden_layers", t.get("n_layer", t.get("n_layers")))
    mt = c["model_type"]
    if "layer_types" in t:
        full = sum(x in ("full_attention", "attention") for x in t["layer_types"])
        return full, sum(x == "sliding_attention" for x in t["layer_types"])
    if mt == "mistral" and t.get("sliding_window"):      # Mistral-7B-v0.1: every layer windowed
        return 0, L
    if mt == "gemma2":
        return L // 2, L - L // 2
    if mt == "gemma3":
        return L // 6, L - L // 6
    if "hybrid_layer_pattern" in t:                      # MiMo-V2-Flash: 1 marks a sliding-window layer
        return t["hybrid_layer_pattern"].count(0), t["hybrid_layer_pattern"].count(1)
    if mt == "jamba":
        return sum(i % 8 == 4 for i in range(L)), 0
    if mt == "nemotron_h":
        return t["hybrid_override_pattern"].count("*"), 0
    if mt == "qwen3_next":
        return L // 4, 0
    if "attention_chunk_size" in t:                      # Llama 4: every 4th layer global (NoPE), the rest chunked
        return L // 4, L - L // 4
    if "attn_type_list" in t:                            # MiniMax: 1 marks a softmax-attention layer
        return sum(t["attn_type_list"]), 0
    if mt == "mamba":                                    # Mamba: every block a Mamba mixer, no attention
        return 0, 0
    if "full_attn_idxs" in t:                            # LFM2: attention at the listed layers, convolutions elsewhere
        return len(t["full_attn_idxs"]), 0
    if "block_configs" in t:                             # Nemotron-NAS: the blocks that keep their attention
        return sum(not b["attention"]["no_op"] for b in t["block_configs"]), 0
    if "compress_ratios" in t:                           # DeepSeek-V4: every layer keeps its window
        return 0, L
    if "linear_attn_config" in t:                        # Kimi Linear: MLA at the listed layers, KDA elsewhere
        return len(t["linear_attn_config"]["full_attn_layers"]), 0
    return L, 0


@pytest.mark.parametrize("name", ALL)
def test_kv_bytes_per_token_from_the_config_fields(name):
    c = cfg(name)
    t = c.get("text_config", c)
    m = load_model(str(CONFIGS / name / "config.json"))
    full, window = _hand_attention_layers(c)
    if t.get("kv_lora_rank"):                            # MLA: latent + rope key, no factor 2 (Hunyuan: null)
        index = t["index_head_dim"] if "index_topk" in t else 0    # V3.2: the indexer's key too
        layers = full if "linear_attn_config" in t else t["num_hidden_layers"]     # Kimi Linear: its MLA layers
        expected = layers * (t["kv_lora_rank"] + t["qk_rope_head_dim"] + index) * 2
    elif "compress_ratios" in t:                         # DeepSeek-V4: once its windows are full, an entry (and on
        # ratio-4 layers the indexer's key) per r tokens on each compressed layer, the MTP layer's ratio not counted
        ratios = t["compress_ratios"][:t["num_hidden_layers"]]
        expected = sum((t["head_dim"] + (t["index_head_dim"] if r == 4 else 0)) * 2 / r for r in ratios if r)
    elif not full and not window:                        # no attention layer: nothing cached per token
        expected = 0
    else:
        heads = t.get("num_attention_heads", t.get("n_head", t.get("n_heads")))
        hidden = t.get("hidden_size", t.get("n_embd", t.get("d_model")))
        head_dim = t.get("head_dim") or hidden // heads
        kv = t.get("num_key_value_heads", heads)
        if "block_configs" in t:                         # Nemotron-NAS: query heads per K/V head, per block
            kv = heads // next(b["attention"]["n_heads_in_group"] for b in t["block_configs"]
                               if not b["attention"]["no_op"])
        v_dim = head_dim
        if "global_head_dim" in t:                       # Gemma 4: its global layers' own width, K/V heads if k = v
            head_dim = v_dim = t["global_head_dim"]
            kv = t["num_global_key_value_heads"] if t.get("attention_k_eq_v") else kv
        if "swa_head_dim" in t:                          # MiMo-V2-Flash: values narrower than keys
            v_dim = t["v_head_dim"]
        expected = full * kv * (head_dim + v_dim) * 2
        sparse = t.get("sparse_attention_config")
        if sparse:                                       # MiniMax-M3: the indexer's key on each block-sparse layer
            expected += sum(sparse["sparse_attention_freq"]) * sparse["sparse_index_dim"] * 2
    assert m.kv_bytes_per_token(2) == expected
    assert (m.n_full_layers, m.n_window_layers) == (full, window) or t.get("kv_lora_rank")
    if window:
        assert m.window == t.get("sliding_window") or m.window == t["attention_chunk_size"]


@pytest.mark.parametrize("name", [n for n in ALL if PUBLISHED[n][0]])
def test_config_agrees_with_the_bundled_profile(name):
    from_config = load_model(str(CONFIGS / name / "config.json"))
    bundled = load_model(PUBLISHED[name][0])
    for T in (1, 4096, 100_000):
        assert from_config.cache_bytes(T, 2) == bundled.cache_bytes(T, 2), T
    assert from_config.structure == bundled.structure
    # the widths vLLM's start-up rule reads, typed into data/models.json, are the published file's
    from part1_capacity.calculator.model.profiles import SHAPE_FIELDS
    for k in SHAPE_FIELDS:
        assert getattr(bundled, k) in (0, getattr(from_config, k)), (k, getattr(bundled, k), getattr(from_config, k))


@pytest.mark.parametrize("name", [n for n in ALL if PUBLISHED[n][1]])
def test_parameter_estimate_within_2_percent_of_the_published_count(name):
    m = load_model(str(CONFIGS / name / "config.json"))
    assert m.params_total == pytest.approx(PUBLISHED[name][1], rel=0.02)
    if name in NEW_FAMILIES:      # the families read by structure: within 1 %
        assert m.params_total == pytest.approx(PUBLISHED[name][1], rel=0.01)


def test_moe_configs_have_fewer_active_than_total_parameters():
    for name in ("deepseek-r1", "gpt-oss-20b", "jamba-1.5-mini", "qwen3-next-80b-a3b", "granite-4.0-h-tiny"):
        m = load_model(str(CONFIGS / name / "config.json"))
        assert m.params_active < 0.4 * m.params_total, name
    # DeepSeek-V3: 37B active of 671B (model card)
    assert load_model(str(CONFIGS / "deepseek-r1" / "config.json")).params_active == pytest.approx(37e9, rel=0.03)


def test_nested_text_config_and_native_precision_are_read():
    g = load_model(str(CONFIGS / "gemma-3-12b-it" / "config.json"))
    assert (g.n_layers, g.n_full_layers, g.n_window_layers, g.window) == (48, 8, 40, 1024)
    assert load_model(str(CONFIGS / "deepseek-r1" / "config.json")).native_dtype == "fp8"
    assert load_model(str(CONFIGS / "gpt-oss-20b" / "config.json")).native_dtype == "mxfp4"


def test_plan_from_a_config_path_via_the_cli(capsys):
    path = str(CONFIGS / "mistral-nemo-12b" / "config.json")
    assert main(["plan", "--model", path, "--accelerator", "h100", "--context", "131072", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kv_bytes_per_token"] == 160 * 1024


def _write(tmp_path, d, name="config.json"):
    p = tmp_path / name
    p.write_text(d if isinstance(d, str) else json.dumps(d))
    return str(p)


def test_defaults_a_published_file_leaves_out_come_from_transformers():
    """Google's gemma-3-27b-it config states no max_position_embeddings, sliding_window_pattern or layer_types:
    transformers' Gemma3TextConfig supplies them (128K context and 5 local : 1 global, as the model card says)."""
    t = cfg("gemma-3-27b-it")["text_config"]
    assert not {"max_position_embeddings", "sliding_window_pattern", "layer_types"} & set(t)
    g = load_model(str(CONFIGS / "gemma-3-27b-it" / "config.json"))
    assert g.max_context == 131072
    assert (g.n_layers, g.n_full_layers, g.n_window_layers, g.window) == (62, 62 // 6, 62 - 62 // 6, 1024)
    # a server loads the SigLIP vision tower too (417M, Gemma 3 technical report, Table 1, + its projector);
    # a text token does not run it
    assert g.params_total - g.params_active == pytest.approx(417e6, rel=0.03)


@pytest.mark.parametrize("mutate, fragment", [
    (lambda d: d.update(model_type="t5"), "an encoder-decoder's cross-attention caches the encoder output per "
                                          "sequence ('is_encoder_decoder'): not modelled"),
    (lambda d: d.update(model_type="mllama", text_config={**cfg("llama-3.1-70b"), "cross_attention_layers": [3, 8]}),
     "cross-attention layers cache the image encoder's K/V beside the text's ('cross_attention_layers'): not modelled"),
    (lambda d: d.pop("model_type"), "model_type (missing): a config.json names its model_type"),
    (lambda d: d.pop("hidden_size"), "missing field 'hidden_size' (with num_hidden_layers, num_attention_heads, "
                                     "hidden_size, it defines the model's shape"),
    (lambda d: d.update(num_key_value_heads=7), "n_heads (64) must be divisible by n_kv_heads (7)"),
    (lambda d: d.update(num_hidden_layers=-3), "field 'num_hidden_layers': must be a positive integer"),
    (lambda d: d.update(num_attention_heads="64"), "field 'num_attention_heads': must be an integer"),
])
def test_a_bad_config_names_the_field(tmp_path, capsys, mutate, fragment):
    d = cfg("llama-3.1-70b")
    mutate(d)
    path = _write(tmp_path, d)
    with pytest.raises(InputError) as e:
        load_model(path)
    assert fragment in str(e.value)
    assert main(["plan", "--model", path, "--accelerator", "h100", "--context", "1024"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err


@pytest.mark.parametrize("text, fragment", [("{not json", "not valid JSON"), ("[1, 2]", "JSON object")])
def test_a_malformed_config_is_one_line(tmp_path, capsys, text, fragment):
    path = _write(tmp_path, text)
    assert main(["plan", "--model", path, "--accelerator", "h100", "--context", "1024"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err and "Traceback" not in err


def test_a_hybrid_field_of_the_wrong_type_is_named(tmp_path):
    d = cfg("nemotron-h-8b")
    d["ssm_state_size"] = "128"
    with pytest.raises(InputError, match="field 'ssm_state_size': must be an integer"):
        load_model(_write(tmp_path, d))


def test_context_beyond_the_config_maximum_is_refused(tmp_path):
    path = str(CONFIGS / "gemma-2-9b" / "config.json")
    with pytest.raises(InputError, match="maximum context of 8192"):
        make_plan(path, "h100", context=8193)


def test_a_config_directory_works_too(tmp_path):
    shutil.copytree(CONFIGS / "gpt2", tmp_path / "gpt2")
    assert load_model(str(tmp_path / "gpt2")).kv_bytes_per_token(2) == 2 * 12 * 12 * 64 * 2


def test_the_light_path_imports_no_transformers_torch_or_engine():
    """Bundled ids need neither transformers nor llama_cpp; only a config file imports transformers (lazily)."""
    import subprocess
    import sys
    code = ("import sys; from part1_capacity.cli import main; "
            "main(['plan', '--model', 'llama-3.1-8b', '--accelerator', 'h100', '--context', '4096', '--json']); "
            "main(['compare', '--json']); "
            "heavy = [m for m in ('transformers', 'torch', 'llama_cpp', 'gguf', 'safetensors') if m in sys.modules]; "
            "assert not heavy, heavy")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-500:]


def test_llama_4_maverick_routes_every_other_layer():
    """Maverick's interleave_moe_layer_step 2: layers 1, 3, … 47 route over 128 experts (+ one shared expert of
    intermediate_size), the other 24 are dense MLPs of intermediate_size_mlp (Llama4TextConfig's moe_layers).
    Counted by hand from the fields: the text model is 400.71B, the card's "400B"."""
    t = cfg("llama-4-maverick")["text_config"]
    D, L, V, step = t["hidden_size"], t["num_hidden_layers"], t["vocab_size"], t["interleave_moe_layer_step"]
    q = t["num_attention_heads"] * t["head_dim"]
    kv = t["num_key_value_heads"] * t["head_dim"]
    attention = 2 * D * q + 2 * D * kv
    moe_layers = L // step
    dense = (L - moe_layers) * 3 * D * t["intermediate_size_mlp"]
    routed = moe_layers * t["num_local_experts"] * 3 * D * t["intermediate_size"]
    shared = moe_layers * (3 * D * t["intermediate_size"] + t["num_local_experts"] * D)     # + the router
    text = 2 * V * D + L * (attention + 2 * D) + D + dense + routed + shared
    assert text == 400_711_848_960
    m = load_model(str(CONFIGS / "llama-4-maverick" / "config.json"))
    assert m.params_routed == routed
    assert m.params_total - text == pytest.approx(0.87e9, rel=0.01)   # the vision encoder and its projector
    # active: everything but the 127 of 128 experts a token skips, and the vision tower
    assert m.params_active == pytest.approx(text - routed * (1 - 1 / t["num_local_experts"]), rel=1e-12)
    assert m.params_active == pytest.approx(17e9, rel=0.02)                 # the card's "17B active" (17.18B)


def test_mamba_caches_one_state_per_sequence_and_no_k_v():
    """state-spaces/mamba-2.8b-hf: 64 Mamba-1 blocks, no attention (no num_attention_heads, no position limit).
    Per block and sequence: the conv state (conv_kernel − 1) × intermediate_size and the SSM state
    intermediate_size × state_size, kept in the model's float32; parameters by hand from the fields."""
    c = cfg("mamba-2.8b-hf")
    D, L, V, d_in, ds, k, r = (c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["intermediate_size"],
                               c["state_size"], c["conv_kernel"], c["time_step_rank"])
    m = load_model(str(CONFIGS / "mamba-2.8b-hf" / "config.json"))
    assert m.structure == "ssm_hybrid" and m.n_full_layers == 0 and m.kv_bytes_per_token(2) == 0
    assert m.cache_bytes(1, 2) == m.cache_bytes(1_000_000, 2)                # constant in the context
    assert m.state_bytes(4) == L * ((k - 1) * d_in + d_in * ds) * 4 == 24_903_680
    block = (D * 2 * d_in + d_in * k + d_in + d_in * (r + 2 * ds) + r * d_in + d_in + d_in * ds + d_in
             + d_in * D + D)     # in_proj, conv1d + bias, x_proj, dt_proj + bias, A_log, D, out_proj, norm
    assert m.params_total == V * D + L * block + D == 2_768_345_600         # the output head tied to the embedding
    p = make_plan(str(CONFIGS / "mamba-2.8b-hf" / "config.json"), "h100", context=1_000_000).to_dict()
    assert p["kv_bytes_per_token"] == 0 and p["state_bytes_per_sequence"] == 24_903_680
    assert p["weights_bytes"] == 2_768_345_600 * 4                          # float32 as published


# --- quantized checkpoints: what a quantization_config stores, worked by hand on Qwen2.5-0.5B's published shape ---
def _qwen05_matrices():
    """(out, in) of every linear matrix of Qwen2.5-0.5B (q, k, v, o, gate, up, down per layer), from its fields."""
    c = cfg("qwen2.5-0.5b")
    D, I, L = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    kv = c["num_key_value_heads"] * D // c["num_attention_heads"]
    return [(D, D), (kv, D), (kv, D), (D, D), (I, D), (I, D), (D, I)] * L


def _quantized(tmp_path, quant, name="q"):
    d = {**cfg("qwen2.5-0.5b"), "quantization_config": quant}
    (tmp_path / name).mkdir()
    return _write(tmp_path / name, d)


@pytest.mark.parametrize("quant, scale_bytes, zero_bytes", [
    # AutoAWQ: per 128 input weights of a row one fp16 scale and a 4-bit zero point (qzeros packed in int32)
    ({"bits": 4, "group_size": 128, "modules_to_not_convert": None, "quant_method": "awq", "version": "gemm",
      "zero_point": True}, 2, 0.5),
    # AutoGPTQ 8-bit: fp16 scales and 8-bit zero points (GPTQ stores qzeros even when symmetric)
    ({"bits": 8, "group_size": 128, "desc_act": False, "sym": True, "quant_method": "gptq"}, 2, 1),
    # llm-compressor W4A16: group scales in the model dtype (bf16), symmetric: no zero point
    ({"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
      "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": True,
                                                                        "strategy": "group", "group_size": 128}}}},
     2, 0),
])
def test_group_quantized_weights_count_their_scales_and_zero_points(tmp_path, quant, scale_bytes, zero_bytes):
    bits = quant.get("bits") or quant.get("config_groups", {}).get("group_0", {}).get("weights", {})["num_bits"]
    mats = _qwen05_matrices()
    quantized = sum(o * i for o, i in mats)
    groups = sum(o * -(-i // 128) for o, i in mats)        # ⌈in / 128⌉ groups in each of the out rows
    plain = load_model(str(CONFIGS / "qwen2.5-0.5b" / "config.json"))
    kept = plain.params_total - quantized                  # embedding (tied), q/k/v biases, norms: bf16
    expected = quantized * bits / 8 + groups * (scale_bytes + zero_bytes) + kept * 2
    p = make_plan(_quantized(tmp_path, quant), "h100", context=4096).to_dict()
    assert p["weights_bytes"] == expected
    assert groups == 24 * (7 * (896 + 128 + 128 + 896 + 4864 + 4864) + 896 * 38)   # 2,795,520 scales
    # without its scales and zero points (what the calculator counted before) the same checkpoint is smaller
    assert p["weights_bytes"] > quantized * bits / 8 + kept * 2


@pytest.mark.parametrize("quant", [
    {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
     "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float",
                                                                       "strategy": "channel", "symmetric": True}}}},
    {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0, "modules_to_not_convert": ["lm_head"]},
])
def test_fp8_checkpoints_of_other_quantizers_are_sized_as_fp8(tmp_path, quant):
    # one scale per output row (not counted: 1 in 896 or more); every linear matrix in one byte
    quantized = sum(o * i for o, i in _qwen05_matrices())
    plain = load_model(str(CONFIGS / "qwen2.5-0.5b" / "config.json"))
    m = load_model(_quantized(tmp_path, quant))
    assert m.native_dtype == "fp8"
    assert make_plan(_quantized(tmp_path, quant, "p"), "h100", context=4096).to_dict()["weights_bytes"] == (
        quantized + (plain.params_total - quantized) * 2)


def test_a_checkpoint_quantized_two_ways_is_refused_by_name(tmp_path):
    w4 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}
    quant = {"quant_method": "compressed-tensors", "config_groups": {
        "group_0": {"targets": ["re:.*mlp.*"], "weights": w4},
        "group_1": {"targets": ["re:.*self_attn.*"], "weights": {**w4, "num_bits": 8}}}}
    with pytest.raises(InputError, match="2 different weight schemes in one checkpoint .*: not modelled"):
        load_model(_quantized(tmp_path, quant))


# NVFP4 (ModelOpt's quantization_config, and llm-compressor's 4-bit floats in groups of 16): 4-bit float matrices
# and one fp8 E4M3 scale per 16 input weights of a row; MXFP4 in groups of 32 is the mxfp4 type (its 8-bit scale per
# 32 inside 4.25 bits). vLLM: ModelOptNvFp4Config (group_size 16, ignore / exclude_modules), CompressedTensorsW4A4Fp4.
_NVFP4_MODELOPT = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                   "ignore": ["lm_head", "model.layers.*.self_attn*"]}
_FP4_CT = {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "ignore": ["lm_head"],
           "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
               "num_bits": 4, "type": "float", "symmetric": True, "strategy": "tensor_group", "group_size": 16}}}}


@pytest.mark.parametrize("quant, quantized_mats", [
    # ModelOpt NVFP4 leaving attention unconverted (its ignore globs): the MLP matrices alone
    (_NVFP4_MODELOPT, lambda mats: [m for i, m in enumerate(mats) if i % 7 >= 4]),
    # llm-compressor NVFP4: every linear matrix
    (_FP4_CT, lambda mats: mats),
])
def test_nvfp4_counts_its_fp8_scale_per_16_weights(tmp_path, quant, quantized_mats):
    mats = quantized_mats(_qwen05_matrices())
    quantized = sum(o * i for o, i in mats)
    scales = sum(o * (i // 16) for o, i in mats)           # every width of Qwen2.5-0.5B is a multiple of 16
    assert scales * 16 == quantized
    kept = load_model(str(CONFIGS / "qwen2.5-0.5b" / "config.json")).params_total - quantized
    p = make_plan(_quantized(tmp_path, quant), "h100", context=4096).to_dict()
    assert p["weights_bytes"] == quantized / 2 + scales * 1 + kept * 2      # 4.5 bits a weight, the rest bf16
    assert [g["dtype"] for g in p["weights_groups"]] == ["fp4", "fp8", "bf16"]


def test_mxfp4_in_groups_of_32_is_the_mxfp4_type(tmp_path):
    quant = json.loads(json.dumps(_FP4_CT))
    quant["config_groups"]["group_0"]["weights"]["group_size"] = 32
    quantized = sum(o * i for o, i in _qwen05_matrices())
    kept = load_model(str(CONFIGS / "qwen2.5-0.5b" / "config.json")).params_total - quantized
    p = make_plan(_quantized(tmp_path, quant), "h100", context=4096).to_dict()
    assert p["weights_bytes"] == quantized * 4.25 / 8 + kept * 2


@pytest.mark.parametrize("change, fragment", [
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}, "q/config.json: quantization_config.quant_algo: "
                                                                     "ModelOpt 'MIXED_PRECISION'"),
    ("group 8", "q/config.json: quantization_config.config_groups.weights.group_size 8: 4-bit float"),
])
def test_a_4_bit_float_scheme_not_sized_is_refused_naming_the_file(tmp_path, change, fragment):
    if change == "group 8":
        quant = json.loads(json.dumps(_FP4_CT))
        quant["config_groups"]["group_0"]["weights"]["group_size"] = 8
    else:
        quant = change
    with pytest.raises(InputError) as e:
        load_model(_quantized(tmp_path, quant))
    assert fragment in str(e.value)


def test_a_multimodal_file_silent_on_tying_keeps_its_text_models_head():
    """Mistral-Small-3.1 states tie_word_embeddings nowhere: its text config (a MistralConfig, false) decides, as
    vLLM builds the head, not Mistral3Config's own default (true), which would drop the 131,072 × 5,120 head."""
    c = cfg("mistral-small-3.1-24b")
    assert "tie_word_embeddings" not in c and "tie_word_embeddings" not in c["text_config"]
    t, v = c["text_config"], c["vision_config"]
    D, L, V, I = t["hidden_size"], t["num_hidden_layers"], t["vocab_size"], t["intermediate_size"]
    q, kv = t["num_attention_heads"] * t["head_dim"], t["num_key_value_heads"] * t["head_dim"]
    text = 2 * V * D + L * (2 * D * q + 2 * D * kv + 3 * D * I + 2 * D) + D    # embedding and its own head
    assert text == 23_572_403_200
    m = load_model(str(CONFIGS / "mistral-small-3.1-24b" / "config.json"))
    vision = m.params_total - text             # the Pixtral tower (24 layers of 1024) and the projector
    w = v["hidden_size"]
    tower = v["num_hidden_layers"] * (4 * w * w + 3 * w * v["intermediate_size"] + 2 * w)
    assert tower < vision < tower * 1.2
    assert m.params_total == pytest.approx(24e9, rel=0.001)


@pytest.mark.parametrize("fields, kv", [
    # ChatGLM (THUDM/glm-4-9b-chat's field names): multi-query attention in 2 K/V groups
    ({"multi_query_attention": True, "multi_query_group_num": 2}, 2),
    # Falcon's new decoder (falcon-40b): num_kv_heads groups although multi_query is set
    ({"multi_query": True, "new_decoder_architecture": True, "num_kv_heads": 8}, 8),
    # Falcon-7B, GPT-BigCode: multi_query, one K/V head shared by all
    ({"multi_query": True, "new_decoder_architecture": False, "num_kv_heads": 71}, 1),
    ({"multi_query": True}, 1),
    ({}, 64),                                                  # nothing said: one K/V head per query head
])
def test_kv_heads_however_a_config_states_them(tmp_path, fields, kv):
    # Llama-3.1-70B's shape (64 query heads of 128, 80 layers) with its K/V heads stated another way
    d = {k: v for k, v in cfg("llama-3.1-70b").items() if k != "num_key_value_heads"}
    d.update(fields, model_type="custom_glm_like", architectures=["CustomForCausalLM"])
    m = load_model(_write(tmp_path, d))
    assert m.n_kv_heads == kv and m.kv_bytes_per_token(2) == 2 * 80 * kv * 128 * 2


def test_zamba2s_mamba_2_field_names_give_a_mamba_2_state(tmp_path):
    # Zamba2Config's names (n_mamba_heads, mamba_headdim, mamba_ngroups) on Zamba2-2.7B's sizes: every one of the
    # 54 layers holds a Mamba-2 mixer (its "hybrid" layers add the shared attention block). Per layer and
    # sequence: conv (4 − 1) × (80 × 64 + 2 × 1 × 64) and SSM 80 × 64 × 64 values, in bf16 (the B/C conv share
    # was missing when the fields were read as Mamba-1's)
    d = {"model_type": "zamba2", "architectures": ["Zamba2ForCausalLM"], "hidden_size": 2560,
         "num_hidden_layers": 54, "num_attention_heads": 32, "num_key_value_heads": 32, "mamba_d_state": 64,
         "mamba_d_conv": 4, "mamba_expand": 2, "mamba_headdim": 64, "mamba_ngroups": 1, "n_mamba_heads": 80,
         "intermediate_size": 10240, "vocab_size": 32000, "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
         "hybrid_layer_ids": [6, 12, 18, 24, 30, 36, 42, 47, 51]}
    m = load_model(_write(tmp_path, d))
    assert m.ssm.kind == "mamba2" and m.ssm.n_layers == 54
    assert m.state_bytes(2) == 54 * (3 * (80 * 64 + 2 * 64) + 80 * 64 * 64) * 2 == 37_089_792


def test_a_config_saved_with_infinity_is_read(tmp_path):
    """nvidia/Nemotron-H-56B-Base-8K's published file holds "time_step_limit": [0.0, Infinity] — what transformers
    writes for Mamba-2's unbounded default — and was refused as not JSON. It is read now: 118 blocks, 10 attention
    (*), 54 Mamba-2 (M), 54 squared-ReLU MLPs (-), counted by hand from the fields; Infinity in a field the
    calculator reads is still refused by name."""
    c = cfg("nemotron-h-56b-base-8k")
    assert c["time_step_limit"][1] == float("inf")
    pat, D, V, I = c["hybrid_override_pattern"], c["hidden_size"], c["vocab_size"], c["intermediate_size"]
    H, KV, hd = c["num_attention_heads"], c["num_key_value_heads"], c["attention_head_dim"]
    nh, mhd, ng, ds, k = c["mamba_num_heads"], c["mamba_head_dim"], c["n_groups"], c["ssm_state_size"], c["conv_kernel"]
    d_in = nh * mhd
    conv = d_in + 2 * ng * ds                                   # x, B and C go through the convolution
    attention = 2 * D * H * hd + 2 * D * KV * hd + D            # q, o; k, v; the block's norm
    mlp = 2 * D * I + D                                         # up, down (no gate); norm
    mamba = ((d_in + conv + nh) * D + conv * k + conv + 3 * nh + d_in + D * d_in + D)
    # in_proj (z, xBC, dt), conv1d + bias, dt_bias / A_log / D, the gated norm, out_proj, the block's norm
    total = 2 * V * D + pat.count("*") * attention + pat.count("-") * mlp + pat.count("M") * mamba + D
    assert total == 56_324_350_464
    m = load_model(str(CONFIGS / "nemotron-h-56b-base-8k" / "config.json"))
    assert m.params_total == total
    assert m.kv_bytes_per_token(2) == pat.count("*") * 2 * KV * hd * 2 == 40_960
    # per Mamba layer and sequence: conv state (k − 1) × conv channels, SSM state heads × head dim × state size;
    # in float32 (the plan's: vLLM keeps Nemotron-H's state so)
    assert m.state_bytes(4) == pat.count("M") * ((k - 1) * conv + nh * mhd * ds) * 4 == 919_240_704
    p = make_plan(str(CONFIGS / "nemotron-h-56b-base-8k" / "config.json"), "h100", context=8192).to_dict()
    assert p["state_bytes_per_sequence"] == 919_240_704
    bad = Path(_write(tmp_path, {**c, "num_hidden_layers": float("inf")}))     # json.dumps writes Infinity
    assert '"num_hidden_layers": Infinity' in bad.read_text()
    with pytest.raises(InputError, match="field 'num_hidden_layers': must be a finite number"):
        load_model(str(bad))


def test_latent_experts_route_in_the_latent_width():
    """NVIDIA-Nemotron-3-Super-120B-A12B: its 512 routed experts read and write moe_latent_size (1024), not the
    hidden size (4096): one projection down and one back per MoE block (NemotronHMoE's fc1/fc2_latent_proj).
    Read at the hidden size the experts were counted 458.6B for the card's 120B. By hand from the fields: 88
    blocks, 40 Mamba-2 (M), 40 MoE (E), 8 attention (*)."""
    c = cfg("nemotron-3-super-120b-a12b")
    pat, D, V = c["hybrid_override_pattern"], c["hidden_size"], c["vocab_size"]
    H, KV, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    e, k_used, I, lat = c["n_routed_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"], c["moe_latent_size"]
    shared_I = c["moe_shared_expert_intermediate_size"]
    nh, mhd, ng, ds, k = c["mamba_num_heads"], c["mamba_head_dim"], c["n_groups"], c["ssm_state_size"], c["conv_kernel"]
    d_in = nh * mhd
    conv = d_in + 2 * ng * ds
    attention = 2 * D * H * hd + 2 * D * KV * hd + D
    routed = e * 2 * I * lat                                   # up (I × latent) and down (latent × I), no gate
    moe = D + e * D + routed + 2 * D * lat + 2 * D * shared_I  # norm, router, experts, latent projections, shared
    mamba = (d_in + conv + nh) * D + conv * k + conv + 3 * nh + d_in + D * d_in + D
    total = 2 * V * D + pat.count("*") * attention + pat.count("E") * moe + pat.count("M") * mamba + D
    assert total == 120_668_687_360
    m = load_model(str(CONFIGS / "nemotron-3-super-120b-a12b" / "config.json"))
    assert m.params_total == total and m.params_routed == pat.count("E") * routed
    assert m.params_active == total - pat.count("E") * routed * (1 - k_used / e)     # 12.77B with the embeddings
    assert m.kv_bytes_per_token(2) == pat.count("*") * 2 * KV * hd * 2 == 8_192


def test_layers_sized_one_by_one_are_read_block_by_block(tmp_path):
    """nvidia/Llama-3_3-Nemotron-Super-49B-v1 (DeciLM, model_type nemotron-nas) sizes each of its 80 layers in
    block_configs: 31 have no attention at all, 49 keep 64 / 8 = 8 K/V heads of 128, the FFN widths differ by layer
    (int(2 × ffn_mult × 8,192 / 3) rounded up to 256: 5.25 → 28,672 on 49 layers, 2.625 → 14,336 on 6, 1.3125 →
    7,168 on 10, 1.0 → 5,632 on 8, 0.5 → 2,816 on 6, 3.28125 → 17,920 on 1); its top-level num_key_value_heads and
    intermediate_size are null. Read as a plain 80-layer decoder it came out 88.0B and 2,621,440 B of K/V per token.
    By hand: embedding and head 2 × 128,256 × 8,192 = 2,101,346,304; an attention block (norm 8,192, q and o
    2 × 8,192², k and v 2 × 1,024 × 8,192) 151,003,136 × 49 = 7,399,153,664; an FFN block (norm 8,192, gate, up and
    down 3 × 8,192 × width): 34,527,911,936 + 2,113,978,368 + 1,761,689,600 + 1,107,361,792 + 415,285,248 +
    440,410,112 = 40,366,637,056; the final norm 8,192. Total 49,867,145,216 (its card: "49B"). K/V per token:
    49 × 2 × 8 × 128 × 2 bytes = 200,704."""
    path = CONFIGS / "llama-3.3-nemotron-super-49b-v1" / "config.json"
    c = json.loads(path.read_text())
    attn = [b["attention"] for b in c["block_configs"]]
    assert sum(a["no_op"] for a in attn) == 31 and {a["n_heads_in_group"] for a in attn if not a["no_op"]} == {8}
    m = load_model(str(path))
    assert m.params_total == 49_867_145_216
    assert (m.n_layers, m.n_full_layers, m.n_kv_heads, m.head_dim) == (80, 49, 8, 128)
    assert m.kv_bytes_per_token(2) == 200_704 and m.intermediate_size == 28_672
    # a block holding what is not modelled is refused by name: K/V head counts that differ between layers
    c["block_configs"][0]["attention"]["n_heads_in_group"] = 4
    p = tmp_path / "config.json"
    p.write_text(json.dumps(c))
    with pytest.raises(InputError, match="block_configs: K/V head counts that differ by layer \\(8, 16\\)"):
        load_model(str(p))


def test_a_sliding_window_pattern_written_in_letters(tmp_path):
    """EXAONE 4 writes its period as letters ("sliding_window_pattern": "LLLG" in EXAONE-4.0-32B, EXAONE 4.5 and
    K-EXAONE, beside their layer_types), which was refused as not an integer before the layer types were read.
    On EXAONE-4.0-1.2B's published file (full attention, no window: its pattern null), counted by hand: q/o
    2 × 2,048², k/v 2 × 512 × 2,048, q/k norms 2 × 64, two norms after attention and MLP, a 3 × 2,048 × 4,096 MLP,
    a tied embedding. Then its 30 layers with the 32B's window (4,096) and letters: layers 3, 7, … 27 global."""
    c = cfg("exaone-4.0-1.2b")
    D, L, V, I = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["intermediate_size"]
    H, KV, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    layer = 2 * D * H * hd + 2 * D * KV * hd + 2 * hd + 2 * D + 3 * D * I
    m = load_model(str(CONFIGS / "exaone-4.0-1.2b" / "config.json"))
    assert m.params_total == V * D + L * layer + D == 1_279_391_488
    assert m.kv_bytes_per_token(2) == L * 2 * KV * hd * 2 == 61_440
    period = ["sliding_attention"] * 3 + ["full_attention"]
    lllg = {**c, "sliding_window": 4096, "sliding_window_pattern": "LLLG", "layer_types": (period * 8)[:L]}
    w = load_model(_write(tmp_path, lllg))
    full = len(range(3, L, 4))                                  # 7 global layers, 23 within the window
    assert (w.n_full_layers, w.n_window_layers, w.window) == (full, L - full, 4096)
    assert w.kv_bytes_per_token(2) == full * 2 * KV * hd * 2 == 14_336
    assert w.cache_bytes(100_000, 2) == (full * 100_000 + (L - full) * 4096) * 2 * KV * hd * 2
    # the letters alone, read without transformers (the browser's path): repeated from layer 0, the last global
    from part1_capacity.calculator.model.configs import profile_from_fields
    alone = {k: v for k, v in lllg.items() if k != "layer_types"}
    p = profile_from_fields(alone, {}, parameters=[("p", (1,))])
    assert (p.n_full_layers, p.n_window_layers) == (full + 1, L - full - 1)    # layer 29 (an L) global too
    with pytest.raises(InputError, match="field 'sliding_window_pattern' must be a number or a string of L"):
        load_model(_write(tmp_path, {**lllg, "sliding_window_pattern": "LLXG"}))


def test_phi_3_smalls_own_field_names_and_its_tied_head():
    """microsoft/Phi-3-small-8k-instruct ships its own code (model_type phi3small, no transformers class): its MLP
    width is ff_intermediate_size (was not read: 4 × hidden = 16,384 assumed) and it says nothing of tying, which
    its class inherits from PretrainedConfig as true (was untied). It came out 8.61B for the Hub's 7.39B. By hand:
    fused q/k/v (32 + 2 × 8) × 128 × 4,096, the output projection, the GeGELU MLP's up (2 × 14,336) and down, two
    norms per layer, a tied embedding (LayerNorm biases, 0.27M, not counted). Its block-sparse layers (every other
    one) keep every token's K/V: the vertical stride reaches back to the first block."""
    c = cfg("phi-3-small-8k-instruct")
    D, L, V, I = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["ff_intermediate_size"]
    H, KV = c["num_attention_heads"], c["num_key_value_heads"]
    hd = D // H
    layer = (H + 2 * KV) * hd * D + H * hd * D + 3 * I * D + 2 * D
    m = load_model(str(CONFIGS / "phi-3-small-8k-instruct" / "config.json"))
    assert m.params_total == V * D + L * layer + D == 7_390_629_888
    assert m.kv_bytes_per_token(2) == L * 2 * KV * hd * 2 == 131_072
    from part1_capacity.calculator.uses.browser import profile_from_text      # the page's pure path reads it alike
    assert profile_from_text(json.dumps(c)).params_total == m.params_total


def test_mpts_max_seq_len_is_its_position_limit():
    """mosaicml/mpt-7b-instruct states its context as max_seq_len (MptConfig has no attribute_map for it): the file
    was refused for a missing max_position_embeddings. Read now as the limit MPT's code enforces (2,048; ALiBi,
    no position table). By hand: tied embedding, per block fused q/k/v 3 × 4,096², out_proj 4,096², an up/down MLP
    of expansion_ratio 4, two weight-only norms (no_bias) — equal to its checkpoint index's 13,298,573,312 bytes of
    bfloat16; MHA, 32 K/V heads of 128."""
    c = cfg("mpt-7b-instruct")
    D, L, V, H, r = c["d_model"], c["n_layers"], c["vocab_size"], c["n_heads"], c["expansion_ratio"]
    total = V * D + L * (3 * D * D + D * D + 2 * r * D * D + 2 * D) + D
    assert total == 13_298_573_312 // 2
    m = load_model(str(CONFIGS / "mpt-7b-instruct" / "config.json"))
    assert m.max_context == c["max_seq_len"] == 2048 and m.params_total == total
    assert m.kv_bytes_per_token(2) == L * 2 * H * (D // H) * 2 == 524_288


@pytest.mark.parametrize("name", ["mimo-v2-flash", "minimax-m3"])
def test_moe_layer_freq_per_layer_plans(capsys, name):
    """Both published files state moe_layer_freq as one 0/1 per layer and were refused as "must be an integer"
    before their cache structure was read; the list is read now (1: the layer routes) and both plan."""
    path = CONFIGS / name / "config.json"
    c = json.loads(path.read_text())
    assert isinstance(c["moe_layer_freq"], list) and set(c["moe_layer_freq"]) == {0, 1}
    code = main(["plan", "--model", str(path), "--accelerator", "h100", "--context", "4096"])
    assert code == 0, capsys.readouterr().err


@pytest.mark.parametrize("change, fragment", [
    # DeepSeek-V4.1's ratios 1 and 2 (another compressor's groups) are not the published V4's
    ({"compress_ratios": [2] * 44}, "field 'compress_ratios': ratio 2 not modelled; allowed: 0, 4, 128"),
    ({"compress_ratios": [0, 4]}, "field 'compress_ratios' must list one ratio per layer (43), each one of 0, 4, 128"),
    ({"num_key_value_heads": 2}, "compressed layers ('compress_ratios') beside MLA, recurrent, shared-K/V, "
                                 "block-sparse or per-type layers, or more than one K/V head: not modelled"),
])
@pytest.mark.parametrize("engine", ["law", "vllm", "llama.cpp"])
def test_compressed_layers_not_modelled_are_refused_in_one_line(tmp_path, capsys, change, fragment, engine):
    """A DeepSeek-V4 file whose compressed layers are not the published structure: one line naming the field and
    the allowed values, before any model is built, under each engine."""
    d = {**cfg("deepseek-v4-flash"), **change}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    code = main(["plan", "--model", str(p), "--accelerator", "h100", "--context", "4096", "--engine", engine])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and fragment in err and "Traceback" not in err


def test_moe_layer_freq_per_layer_routes_the_layers_it_marks():
    # MiMo-V2-Flash's 48 layers, its first dense (moe_layer_freq[0] == 0), its per-type K/V fields set aside
    from part1_capacity.calculator.model.param_count import count_parameters
    c = json.loads((CONFIGS / "mimo-v2-flash" / "config.json").read_text())
    c = {k: v for k, v in c.items() if not k.startswith("swa_")}
    routed = [n for n, _ in count_parameters(c, {}) if n.endswith("experts.down_proj")]
    assert len(routed) == sum(c["moe_layer_freq"]) == 47 and "model.layers.0." not in " ".join(routed)


# BLOOM's shape (bigscience/bloom-560m's fields): ALiBi positions, no context field at all
_BLOOM = {"architectures": ["BloomForCausalLM"], "model_type": "bloom", "n_layer": 24, "n_head": 16,
          "hidden_size": 1024, "n_inner": None, "vocab_size": 250880, "torch_dtype": "float16"}


@pytest.mark.parametrize("field", ["model_max_length", "max_seq_length", "seq_len", "seq_length"])
def test_every_context_name_vllm_reads_is_read(tmp_path, field):
    # Baichuan2-13B states its limit as model_max_length (4,096); the others are vLLM's other names
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_BLOOM, field: 4096}))
    assert load_model(str(path)).max_context == 4096


def test_positions_without_a_stated_limit_are_refused_by_name(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_BLOOM))
    assert main(["plan", "--model", str(path), "--accelerator", "h100", "--context", "2K"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "positions with no stated limit" in err and "ALiBi" in err and "max_position_embeddings" in err, err


def test_the_global_layer_of_a_period_is_its_last():
    """A periodic pattern makes layer i global when (i + 1) is a multiple of the period (transformers' Gemma3 and
    Qwen3-Next configs). With a layer count the period does not divide, the first-of-period reading differs.
    Gemma 3 (sliding_window_pattern 6) cut to 8 layers: only layer 5 is global (1 full, 7 within the window); the
    first of each period would make layers 0 and 6 global (2). Qwen3-Next (full_attention_interval 4) cut to 6
    layers: layer 3 is attention (1), the other 5 linear; first-of-period: layers 0 and 4 (2)."""
    from part1_capacity.calculator.model.configs import profile_from_fields
    gemma = {**cfg("gemma-3-12b-it")["text_config"], "num_hidden_layers": 8}
    g = profile_from_fields(gemma, {}, parameters=[("p", (1,))])
    assert (g.n_full_layers, g.n_window_layers) == (1, 7)
    qwen = {**cfg("qwen3-next-80b-a3b"), "num_hidden_layers": 6}
    q = profile_from_fields(qwen, {}, parameters=[("p", (1,))])
    assert (q.n_full_layers, q.ssm.n_layers) == (1, 5)


def test_group_scales_round_a_partial_group_up():
    """AWQ with group_size 128 on a row of 200 input weights: 128 + 72, two groups, so ⌈200 / 128⌉ = 2 scales per
    row (rounding down would give 1). Three rows: 3 × 2 = 6 fp16 scales and, AWQ keeping zero points, 6 more."""
    from part1_capacity.calculator.model.configs import weight_groups
    awq = {"quant_method": "awq", "bits": 4, "group_size": 128}
    groups = {g.name: g for g in weight_groups([("model.layers.0.mlp.down_proj.weight", (3, 200))], "bf16", awq)}
    assert groups["awq matrices"].params == 600
    scales = next(g for n, g in groups.items() if "scales" in n)
    zeros = next(g for n, g in groups.items() if "zero points" in n)
    assert (scales.params, scales.dtype, zeros.params) == (6, "fp16", 6)
