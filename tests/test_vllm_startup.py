"""What vLLM logs at start-up (part1_capacity/calculator/engine_rules/vllm_memory.py): its KV budget, blocks,
tokens and concurrency, against published start-up logs (each point with its source in
part1_capacity/experiments/engine/data/vllm_startup_logs.json) and hand-worked examples from vLLM's source."""
import json
from pathlib import Path

import pytest

from part1_capacity.calculator.engine_rules import vllm_memory as vm
from part1_capacity.calculator.errors import InputError
from part1_capacity.calculator.hardware import load_accelerator
from part1_capacity.calculator.loader import load_model
from part1_capacity.experiments.engine import vllm_startup
from tests.in_process import capacity

GIB, MIB, KIB = 2 ** 30, 2 ** 20, 2 ** 10


@pytest.mark.parametrize("point", vllm_startup.load_points(), ids=lambda p: p["id"])
def test_published_start_up_lines_reproduce_within_the_bounds(point):
    assert point["source"] and point["vllm"]
    bound = 0.003 if point["kind"] == "tokens_given_kv" else 0.05
    for c in vllm_startup.checks([point]):       # tokens (and the logged concurrency) or the KV memory
        assert abs(c.predicted / c.logged - 1) <= bound, (point["id"], c.quantity, c.logged, c.predicted)


def test_given_kv_memory_blocks_tokens_and_concurrency_by_hand():
    # Llama-3.1-8B: one block of all 32 layers = 16 tokens × 8 K/V heads × (128 + 128) × 2 B × 32 = 2 MiB;
    # 58.11 GiB → ⌊58.11 × 512⌋ = 29,752 blocks = 476,032 tokens; 16,384 tokens = 1,024 blocks → 29.0547×
    # (kv_cache_utils.py get_num_blocks, _report_kv_cache_config, get_max_concurrency_for_kv_cache_config)
    s = vm.startup(load_model("llama-3.1-8b"), load_accelerator("h100"), 16384, 16e9,
                   flags=vm.StartupFlags(kv_cache_memory_bytes=58.11 * GIB))
    assert s.num_blocks == 29752 and s.kv_cache_tokens == 29752 * 16
    assert s.max_concurrency == pytest.approx(29752 / 1024)
    assert s.kv_cache_memory_bytes == pytest.approx(58.11 * GIB) and s.error is None


def test_budget_terms_by_hand_on_an_rtx_3090():
    # 23.58 GiB × 0.9 (vLLM v0.19's default, vllm/config/cache.py) − 8.03e9 × 2 B − activation − 0.25 GiB; the
    # activation: the sampler pass on
    # min(256, 2048) rows × 128,256 logits × 14 B + 2,048 × 4,096 × 2 B of hidden state (2,048 batched tokens
    # and 256 sequences: vLLM's defaults under 70 GiB, vllm/engine/arg_utils.py)
    s = vm.startup(load_model("llama-3.1-8b"), load_accelerator("rtx-3090"), 8192, 8.03e9 * 2)
    b = s.budget
    act = 256 * 128256 * 14 + 2048 * 4096 * 2
    assert b["activation_bytes"] == act and b["non_torch_bytes"] == 0.25 * GIB and b["cuda_graph_bytes"] == 0
    assert b["utilization"] == 0.9
    assert s.kv_cache_memory_bytes == pytest.approx(23.58 * GIB * 0.9 - 16.06e9 - act - 0.25 * GIB)
    assert set(b) >= {"total_bytes", "utilization", "weights_bytes", "activation_bytes", "non_torch_bytes",
                      "cuda_graph_bytes"}


def test_vllms_own_error_when_max_model_len_does_not_fit():
    # 131,072 tokens × 128 KiB = 16.00 GiB for one request; the RTX 3090 leaves about 5.6 GiB
    s = vm.startup(load_model("llama-3.1-8b"), load_accelerator("rtx-3090"), 131072, 8.03e9 * 2)
    assert s.error.startswith("ValueError: To serve at least one request with the models's max seq len (131072), "
                              "(16.00 GiB KV cache is needed, which is larger than the available KV cache memory (")
    fit = int(s.error.split("estimated maximum model length is ")[1].split(".")[0])
    assert fit % 16 == 0 and fit * 128 * KIB <= s.kv_cache_memory_bytes < (fit + 16) * 128 * KIB
    none = vm.startup(load_model("llama-3.1-70b"), load_accelerator("rtx-3090"), 4096, 141e9)
    assert none.error.startswith("ValueError: No available memory for the cache blocks.")


def test_defaults_per_accelerator_as_vllm_picks_them():
    # vllm/engine/arg_utils.py get_batch_defaults (vllm serve): ≥ 70 GiB and not an A100 → 8192 / 1024;
    # otherwise 2048 / 256; TPU v6e 1024, v5e 512, v5p 256
    assert vm.max_num_batched_tokens(79.19 * GIB, "NVIDIA H100") == 8192
    assert vm.max_num_batched_tokens(79.15 * GIB, "NVIDIA A100 80GB") == 2048
    assert vm.max_num_batched_tokens(23.58 * GIB, "RTX 3090") == 2048
    assert [vm.max_num_batched_tokens(16e9, "", t) for t in ("tpu-v6e", "tpu-v5e", "tpu-v5p")] == [1024, 512, 256]
    assert vm.max_num_seqs(79.19 * GIB, "NVIDIA H100") == 1024 and vm.max_num_seqs(79 * GIB, "A100") == 256


def test_mla_block_sizes():
    # vllm/platforms/cuda.py: FlashMLA (Hopper) 64, CUTLASS MLA (Blackwell) 128, else 16
    ds = load_model("deepseek-v3")
    assert vm.block_size(ds, "h200")[0] == 64 and vm.block_size(ds, "b200")[0] == 128
    assert vm.block_size(load_model("llama-3.1-8b"), "h200")[0] == 16


def test_pipeline_stages_split_layers_as_vllm_does():
    # vllm/distributed/utils.py get_pp_indices: 61 layers on 4 stages → 15 each, the 1 left to the third
    assert vm.pp_layers(61, 4) == [15, 15, 16, 15] and vm.pp_layers(32, 2) == [16, 16]
    assert vm.pp_layers(62, 4) == [15, 16, 16, 15]


def test_sizes_parse_and_bad_ones_are_refused():
    assert vm.parse_size("12.22GiB") == pytest.approx(12.22 * GIB) and vm.parse_size("13e9") == 13e9
    assert vm.parse_size("512MiB") == 512 * MIB and vm.parse_size("1000") == 1000
    with pytest.raises(InputError, match="kv_cache_memory: expected a size such as 12.22GiB"):
        vm.parse_size("lots")
    with pytest.raises(InputError, match="kv_cache_memory: must be a positive size"):
        vm.parse_size("-3GiB")


def test_cli_keys_and_flags():
    r = capacity("plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "16384", "--engine",
                 "vllm", "--kv-cache-memory", "58.11GiB", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["engine_kv_cache_tokens"] == 476032 and d["engine_kv_cache_memory_bytes"] == pytest.approx(58.11 * GIB)
    assert d["engine_max_concurrency"] == pytest.approx(29752 / 1024)
    assert set(d["engine_memory_budget"]) >= {"total_bytes", "utilization", "weights_bytes", "activation_bytes",
                                              "non_torch_bytes", "cuda_graph_bytes"}
    bad = capacity("plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "4096",
                   "--gpu-memory-utilization", "0.8")
    assert bad.returncode == 2 and "--gpu-memory-utilization: a vLLM start-up flag, only with --engine vllm" in bad.stderr
    bad = capacity("plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "4096", "--engine",
                   "vllm", "--kv-cache-memory", "many")
    assert bad.returncode == 2 and "expected a size such as 12.22GiB" in bad.stderr


def test_hybrid_grouping_by_hand_gemma2():
    # Gemma-2-9B, 21 full + 21 sliding layers (window 4,096), 8 K/V heads of 256: a page of 16 tokens is
    # 16 × 8 × 512 × 2 B = 128 KiB; one group of 21 layers per type → a block of all groups' first layers is
    # 21 × 128 KiB; 54.12 GiB → 21,111 blocks; 2 groups → 21,111 // 2 × 16 = 168,880 tokens (vLLM's log);
    # a request of 8,192: 512 full blocks + ⌈min(4,095 + 8,192, 8,192) / 16⌉ + 1 = 513 sliding → 21,111 / 1,025
    s = vm.startup(load_model("gemma-2-9b"), load_accelerator("h100"), 8192, 18e9,
                   flags=vm.StartupFlags(kv_cache_memory_bytes=54.12 * GIB))
    assert s.num_blocks == int(54.12 * GIB // (21 * 128 * KIB)) == 21111
    assert s.kv_cache_tokens == 21111 // 2 * 16 and s.max_concurrency == pytest.approx(21111 / 1025)


def test_sliding_window_concurrency_labelled_start_up_worst_case():
    s = vm.startup(load_model("gemma-2-9b"), load_accelerator("h100"), 8192, 9.24e9 * 2)
    assert any("start-up worst case" in n and "steady state" in n for n in s.notes)


def test_datasheet_times_are_labelled_lower_bounds_in_text_and_json():
    # data/speed.json: every datasheet efficiency is 1.0, so a datasheet time is the roofline's lower bound
    speed = json.loads((Path(vm.__file__).parent.parent / "data" / "speed.json").read_text())
    bf16 = speed["datasheet"]["types"]["bf16"]
    assert bf16["decode_bandwidth_efficiency"] == 1.0 and bf16["prefill_peak_efficiency"] == 1.0
    r = capacity("plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "8192", "--json")
    d = json.loads(r.stdout)
    assert d["decode"]["time_kind"] == d["prefill"]["time_kind"] == "roofline lower bound"
    assert "time_s" in d["decode"] and "tokens_per_s" in d["decode"]          # no key dropped
    text = capacity("plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "8192").stdout
    assert "roofline lower bounds" in text and "time ≥" in text


def test_accelerators_carry_the_memory_the_engine_sees_with_its_source():
    from part1_capacity.calculator.hardware import bundled_accelerators

    accs = bundled_accelerators()
    new = ("rtx-3090", "rtx-4090", "rtx-5090", "rtx-pro-6000", "l40s", "h20", "b300", "mi355x", "m1-max", "m1-ultra",
           "m2-max", "m2-ultra", "m3-max", "m3-ultra", "m4-max", "ryzen-ai-max-395", "dgx-spark")
    assert set(new) <= set(accs)
    for a in accs.values():
        assert a.source, a.id
        if a.engine_memory_bytes:
            # at most the installed memory (a datasheet "80 GB" is often 80 GiB: up to 2^30/10^9 more)
            assert a.engine_memory_source and a.engine_memory_bytes <= a.memory_bytes * GIB / 1e9, a.id
    # the H100 as its runtime reports it (79.19 GiB in vLLM's log), not 80 GB = 74.5 GiB
    assert accs["h100"].engine_memory_bytes == pytest.approx(79.19 * GIB)
    assert "79.19" in accs["h100"].engine_memory_source
    # macOS's GPU working-set cap: 96 GiB of a 128 GiB M4 Max as llama.cpp logs it (103079.22 MB = 96 × 2^30 B)
    assert accs["m4-max"].engine_memory_bytes == 103079.22e6 // GIB * GIB
    assert all(accs[i].unified_memory for i in ("m4-max", "m3-ultra", "ryzen-ai-max-395", "dgx-spark"))
    assert not accs["h100"].unified_memory


def test_start_up_uses_the_engine_visible_memory_not_the_datasheet():
    s = vm.startup(load_model("llama-3.1-8b"), load_accelerator("h100"), 8192, 16e9)
    assert s.budget["total_bytes"] == pytest.approx(79.19 * GIB)
    s = vm.startup(load_model("llama-3.1-8b"), load_accelerator("rtx-4090"), 8192, 16e9)
    assert s.budget["total_bytes"] == 24 * GIB and any("datasheet figure" in n for n in s.notes)


def test_eight_bit_column_says_when_a_type_runs_at_the_16_bit_rate():
    # the A100 has INT8 tensor cores (624 TOPS dense) and no FP8 ones: FP8 weights multiply at its BF16 rate
    from part1_capacity.calculator.hardware import eight_bit_cell

    a100, h100 = load_accelerator("a100"), load_accelerator("h100")
    assert eight_bit_cell(a100) == "16-bit rate / 624" and a100.peak_flops("fp8") == a100.flops_16
    assert eight_bit_cell(h100) == "1,979 / 1,979"
    r = capacity("list", "accelerators")
    assert "fp8 / int8" in r.stdout and "16-bit rate / 624" in r.stdout


def test_the_activation_term_reads_the_widths_from_the_profile():
    """Mixtral-8x7B's published config (tests/data/configs/mixtral-8x7b): vocab_size 32,000, intermediate_size
    14,336 (each expert's width too), 2 experts per token, hidden 4,096. Over 8,192 batched tokens, 256 sequences,
    one rank: the dense pass 8,192 × (3 × 4,096 + 3 × 14,336) × 2 = 905,969,664; the fused-MoE pass
    (8,192 × 3 × 4,096 + 8,192 × 2 × (3 × 14,336 + 4,096)) × 2 = 1,744,830,464; the sampler
    256 × 32,000 × 14 + 8,192 × 4,096 × 2 = 181,796,864. The largest is the MoE pass, and nothing is approximate."""
    import dataclasses

    m = load_model(str(Path(__file__).parent / "data" / "configs" / "mixtral-8x7b" / "config.json"))
    assert (m.vocab_size, m.intermediate_size, m.moe_intermediate_size, m.experts_per_token) == (32000, 14336,
                                                                                                14336, 2)
    assert vm.shapes(m) == ({"vocab": 32000, "intermediate": 14336, "moe_intermediate": 14336, "top_k": 2}, [])
    assert vm.activation_bytes(m, 8192, 256, 1) == 1_744_830_464
    # without the widths (a GGUF file's profile): 4 × hidden and vLLM's Llama-3 vocabulary stand in, and it says so.
    # The dense pass 8,192 × (3 × 4,096 + 3 × 16,384) × 2 = 1,006,632,960 outgrows the sampler
    # 256 × 128,256 × 14 + 67,108,864 = 526,794,752
    bare = dataclasses.replace(m, vocab_size=0, intermediate_size=0, moe_intermediate_size=0, experts_per_token=0)
    assert vm.shapes(bare)[1] == ["activation term approximate: vocabulary (128,256) and MLP width (16,384) not in "
                                  "the profile"]
    assert vm.activation_bytes(bare, 8192, 256, 1) == 1_006_632_960


def test_bundled_widths_are_in_the_data_file_with_their_source():
    """The widths moved out of the engine rule into data/models.json: each bundled model that carries them names the
    config field they come from in its source."""
    from part1_capacity.calculator.profiles import bundled_models

    carried = {i: m for i, m in bundled_models().items() if m.vocab_size}
    assert {"llama-3.1-8b", "gemma-3-27b", "deepseek-v2-lite", "gpt-oss-120b"} <= set(carried)
    for i, m in carried.items():
        assert f"vocabulary {m.vocab_size:,}" in m.source and "vocab_size" in m.source, i
    assert carried["deepseek-v2-lite"].experts_per_token == 6 and carried["deepseek-v2-lite"].moe_intermediate_size \
        == 1408
