"""What engines allocate (part1_capacity/calculator/engines): vLLM's rules on hand-worked examples from vLLM's source, the
plan's --engine keys, the side-by-side comparison and the recurrent-state dtype servers keep.

Every expected number is worked by hand below from the bundled model's published shape and the rule as vLLM's
source states it (file named beside each test); removing or changing a rule breaks the example.
"""
import json

import pytest

from part1_capacity.calculator import engines
from part1_capacity.calculator.engines import vllm
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.plan.plan import Workload, for_plan, make_plan
from part1_capacity.calculator.readers.loader import load_model
from tests.support.in_process import capacity

KIB, MIB = 2 ** 10, 2 ** 20


# --- vLLM: vllm/v1/kv_cache_interface.py, vllm/v1/core/kv_cache_utils.py -----------------------------------------
def test_full_attention_rounds_to_blocks_of_16():
    # Llama-3.1-8B: 32 layers × 8 K/V heads × 128 × 2 (K, V) × 2 B = 128 KiB per token; 1,000 tokens → 63 blocks.
    r = vllm.reservation(load_model("llama-3.1-8b"), 1000, tp=1, kv_bytes=2)
    assert r.block_size == 16 and r.bytes_per_request == 63 * 16 * 128 * KIB
    assert r.bytes_per_token == 128 * KIB


def test_kv_heads_replicated_when_tp_exceeds_them():
    # vllm/model_executor/models/llama.py: num_kv_heads = max(1, total_num_kv_heads // tp_size)
    assert vllm.kv_heads_per_rank(8, 4) == 2 and vllm.kv_heads_per_rank(8, 16) == 1 and vllm.kv_heads_per_rank(1, 8) == 1
    falcon = load_model("falcon-7b")          # MQA: one K/V head, kept whole on each of 4 ranks
    assert vllm.attention_page_per_token(falcon, 4, 2) == 1 * 2 * falcon.head_dim * 2


def test_mla_latent_whole_on_every_rank():
    # DeepSeek-V3: kv_lora_rank 512 + rope 64 = 576 values × 2 B per layer per token, on every rank (MLAAttentionSpec)
    ds = load_model("deepseek-v3")
    assert vllm.attention_page_per_token(ds, 8, 2) == vllm.attention_page_per_token(ds, 1, 2) == 576 * 2


def test_sliding_window_reservation_and_the_disabled_manager():
    # gpt-oss-120b: 18 full + 18 sliding layers (window 128), 8 K/V heads × 64; page = 16 × 8 × 2 × 64 × 2 B = 32 KiB.
    # Full: ⌈32,768 / 16⌉ = 2,048 pages; sliding: ⌈min(127 + 8,192, 32,768) / 16⌉ + 1 = 521; group size 18.
    g = load_model("gpt-oss-120b")
    r = vllm.reservation(g, 32768, tp=1, kv_bytes=2, batched_tokens=8192)
    assert r.group_size == 18 and r.bytes_per_request == 18 * 32 * KIB * (2048 + 521)
    off = vllm.reservation(g, 32768, tp=1, kv_bytes=2, batched_tokens=8192, hybrid_manager=False)
    assert off.bytes_per_request == 36 * 32 * KIB * 2048          # every layer at full length


def test_layer_groups_padded_to_the_group_size():
    # Gemma-3-27B: 52 sliding + 10 full layers → group size 10 (52 ≥ 1.5 × 10); 6 sliding groups = 60, 8 empty layers.
    r = vllm.reservation(load_model("gemma-3-27b"), 32768, tp=1, kv_bytes=2)
    assert r.group_size == 10 and r.groups == {"full": 1, "sliding": 6}


def test_mamba_hybrid_block_size_unified_with_the_state_page():
    # Nemotron-3-Nano: attention page per token 2 K/V heads × 2 × 128 × 2 B = 1,024 B. One Mamba-2 layer's state:
    # conv 3 × (64·64 + 2·8·128) = 18,432 values in bf16 + SSM 64 × 64 × 128 = 524,288 in fp32 = 2,134,016 B.
    # vllm/platforms/interface.py: block = 16 × ⌈2,134,016 / (16 × 1,024)⌉ = 16 × 131 = 2,096 tokens.
    # 6 attention + 23 Mamba layers → group size 6, 4 Mamba groups; 32,768 tokens → ⌈32,768 / 2,096⌉ = 16 blocks.
    n = load_model("nemotron-3-nano-30b-a3b")
    r = vllm.reservation(n, 32768, tp=1, kv_bytes=2, conv_bytes=2, ssm_bytes=4)
    assert r.block_size == 2096 and r.page_bytes == 2096 * 1024
    assert r.groups == {"full": 1, "state": 4}
    assert r.bytes_per_request == 6 * 2096 * 1024 * (16 + 4)
    with pytest.raises(InputError, match="disable-hybrid-kv-cache-manager"):
        vllm.reservation(n, 32768, hybrid_manager=False)


# --- the recurrent-state dtype --------------------------------------------------------------------------------------
def test_nemotron_h_state_defaults_to_fp32_as_vllm_keeps_it():
    """vLLM keeps Nemotron-H's SSM state in float32 unless the checkpoint says otherwise:
    vllm/model_executor/models/config.py, NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE = "float32"
    (the checkpoint's config.json sets mamba_ssm_cache_dtype: float32). Nemotron-3-Nano: 23 Mamba-2 layers ×
    (3 × 6,144 + 524,288) = 12,482,560 values; at 4 bytes 49,930,240 B (47.6 MiB), not 23.8 MiB at bf16."""
    p = make_plan("nemotron-3-nano-30b-a3b", "h100", Workload(context=8192))
    assert p.workload.state_dtype == "fp32"
    assert p.state_bytes_per_sequence == 23 * (3 * 6144 + 524288) * 4
    # an explicit --state-dtype still wins; hybrids without an engine default follow the KV dtype
    assert make_plan("nemotron-3-nano-30b-a3b", "h100", Workload(context=8192, state_dtype="bf16")) \
        .state_bytes_per_sequence == 23 * (3 * 6144 + 524288) * 2
    assert make_plan("qwen3-next-80b-a3b", "h100", Workload(context=8192)).workload.state_dtype == "bf16"


# --- the plan and the comparison -------------------------------------------------------------------------------
def test_plan_engine_keys_and_law_unchanged():
    base = json.loads(capacity("plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "1000",
                               "--json").stdout)
    out = capacity("plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "1000", "--json",
                   "--engine", "vllm")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    for key in ("engine", "engine_kv_bytes_per_token", "engine_kv_bytes_total", "engine_state_bytes", "engine_notes"):
        assert key in d
    assert d["engine"] == "vllm" and d["engine_kv_bytes_total"] == 63 * 16 * 128 * KIB
    assert base["engine"] == "law" and base["engine_kv_bytes_total"] == base["kv_bytes_total"] == 1000 * 128 * KIB
    for key in ("kv_bytes_per_token", "kv_bytes_per_sequence", "kv_bytes_total", "weights_bytes"):
        assert d[key] == base[key]                                     # the law's own figures stay the law's
    assert base["workload"]["engine"] == "law" and d["workload"]["engine"] == "vllm"


def test_llama_cpp_engine_pads_the_window_cache():
    # gpt-oss-120b, one sequence of 1,000 tokens: full layers 1,024 cells, window layers 768 (128 + 512 → 768).
    p = make_plan("gpt-oss-120b", "h100", Workload(context=1000))
    a = engines.allocate(p.model, p.workload, 1, "llama.cpp")
    per_cell = 18 * 8 * 64 * 2 * 2
    assert a.kv_bytes_total == per_cell * (1024 + 768)


def test_compare_engines_shows_three_figures_per_model():
    out = capacity("compare", "--engines", "--models", "gpt-oss-120b,nemotron-3-nano-30b-a3b", "--context", "32768",
                   "--batch", "2", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [r["model"] for r in rows] == ["gpt-oss-120b", "nemotron-3-nano-30b-a3b"]
    for r in rows:
        assert [e["engine"] for e in r["engines"]] == ["law", "llama.cpp", "vllm"]
        assert all(e["kv_bytes_total"] > 0 for e in r["engines"])
    assert any("2,096" in n for n in rows[1]["engines"][2]["notes"])


def test_bad_engine_is_one_line_exit_2():
    for args, field in ((("plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "1000",
                          "--engine", "sglang"), "--engine"),
                        (("plan", "--model", "nemotron-3-nano-30b-a3b", "--accelerator", "h100", "--context", "1000",
                          "--engine", "vllm", "--disable-hybrid-kv-cache-manager"), "hybrid"),
                        (("plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "1000",
                          "--engine", "vllm", "--kv-dtype", "q8_0"), "kv_dtype")):
        out = capacity(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert field in out.stderr and "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_mamba_ssm_cache_dtype_flag_only_when_the_plan_differs_from_vllm():
    # vllm/model_executor/models/config.py: Nemotron-H defaults to float32; other hybrids follow the model dtype.
    nemo, qwen, dense = (load_model(m) for m in ("nemotron-3-nano-30b-a3b", "qwen3-next-80b-a3b", "llama-3.1-8b"))
    assert vllm.mamba_ssm_cache_dtype_args(nemo, "fp32") == []
    assert vllm.mamba_ssm_cache_dtype_args(nemo, "bf16") == ["--mamba-ssm-cache-dtype", "bfloat16"]
    assert vllm.mamba_ssm_cache_dtype_args(qwen, "bf16") == []
    assert vllm.mamba_ssm_cache_dtype_args(qwen, "fp32") == ["--mamba-ssm-cache-dtype", "float32"]
    assert vllm.mamba_ssm_cache_dtype_args(dense, "fp32") == []
    with pytest.raises(InputError, match="state_dtype"):
        vllm.mamba_ssm_cache_dtype_args(nemo, "fp8")


def test_fp8_kv_helps_a_mamba_hybrid_less_than_the_law_says():
    # The attention page per token halves (512 B), so vLLM doubles the block to keep one state per page:
    # 16 × ⌈2,134,016 / (16 × 512)⌉ = 16 × 261 = 4,176 tokens. At 4,096 tokens one request then takes
    # bf16: 6 × 2,096 × 1,024 × (⌈4,096/2,096⌉ = 2 + 4) B;  fp8: 6 × 4,176 × 512 × (1 + 4) B — 17 % less, not 50 %.
    n = load_model("nemotron-3-nano-30b-a3b")
    bf16 = vllm.reservation(n, 4096, kv_bytes=2, conv_bytes=2, ssm_bytes=4)
    fp8 = vllm.reservation(n, 4096, kv_bytes=1, conv_bytes=2, ssm_bytes=4)
    assert fp8.block_size == 4176
    assert bf16.bytes_per_request == 6 * 2096 * 1024 * 6 and fp8.bytes_per_request == 6 * 4176 * 512 * 5
    assert 0.15 < 1 - fp8.bytes_per_request / bf16.bytes_per_request < 0.20


def test_engine_sizes_the_deployment():
    # gpt-oss-120b, 64 × 128K on H100s: with vLLM's hybrid manager disabled every sliding layer holds the whole
    # context — the cache doubles (18 → 36 layers at full length) and the plan needs more accelerators.
    base = dict(context=131072, batch=64)
    law = make_plan("gpt-oss-120b", "h100", Workload(**base))
    on = make_plan("gpt-oss-120b", "h100", Workload(**base, engine="vllm"))
    off = make_plan("gpt-oss-120b", "h100", Workload(**base, engine="vllm", hybrid_kv_cache_manager=False))
    assert law.accelerators_needed <= on.accelerators_needed < off.accelerators_needed
    a = for_plan(off, "vllm", hybrid_manager=False)
    assert a.kv_bytes_total == 64 * 36 * 8 * 2 * 64 * 2 * 131072     # every layer, every token, bf16
    with pytest.raises(InputError, match="--engine"):
        make_plan("gpt-oss-120b", "h100", Workload(**base, engine="tgi"))


def test_emit_vllm_says_the_state_dtype_and_the_disabled_manager():
    def emit(*extra):
        out = capacity("plan", "--accelerator", "h100", "--context", "32768", "--batch", "8", "--emit", "vllm", *extra)
        assert out.returncode == 0, out.stderr
        return out.stdout

    assert "--mamba-ssm-cache-dtype" not in emit("--model", "nemotron-3-nano-30b-a3b")      # fp32 both sides
    assert "--mamba-ssm-cache-dtype bfloat16" in emit("--model", "nemotron-3-nano-30b-a3b", "--state-dtype", "bf16")
    assert "--mamba-ssm-cache-dtype float32" in emit("--model", "qwen3-next-80b-a3b", "--state-dtype", "fp32")
    assert "--disable-hybrid-kv-cache-manager" in emit("--model", "gpt-oss-120b", "--engine", "vllm",
                                                       "--disable-hybrid-kv-cache-manager")


def test_vllm_only_flag_refused_under_another_engine():
    # a flag that would be silently ignored is refused: the reader would believe the plan used it
    for engine in ("law", "llama.cpp"):
        out = capacity("plan", "--model", "gemma-3-27b", "--accelerator", "h100", "--context", "8192",
                       "--engine", engine, "--disable-hybrid-kv-cache-manager")
        assert out.returncode == 2 and "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and "--engine vllm" in out.stderr, out.stderr
    out = capacity("plan", "--model", "gemma-3-27b", "--accelerator", "h100", "--context", "8192",
                   "--engine", "vllm", "--disable-hybrid-kv-cache-manager", "--json")
    assert out.returncode == 0, out.stderr


def test_vllm_figure_on_an_accelerator_vllm_does_not_serve_says_so():
    out = capacity("compare", "--engines", "--models", "llama-3.1-8b", "--accelerator", "m4-max", "--context", "8192",
                   "--batch", "1", "--json")
    assert out.returncode == 0, out.stderr
    engines = {e["engine"]: e for e in json.loads(out.stdout)[0]["engines"]}
    assert any("does not run on" in n for n in engines["vllm"]["notes"])
    assert not any("does not run on" in n for n in engines["llama.cpp"]["notes"])
    on_h100 = json.loads(capacity("plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "8192",
                                  "--engine", "vllm", "--json").stdout)
    assert not any("does not run on" in n for n in on_h100["engine_notes"])
