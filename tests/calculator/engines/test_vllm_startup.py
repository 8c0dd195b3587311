"""What vLLM logs at start-up (part1_capacity/calculator/engines/vllm_memory.py): its KV budget, blocks,
tokens and concurrency, against published start-up logs (each point with its source in
part1_capacity/experiments/engine/data/vllm_startup_logs.json) and hand-worked examples from vLLM's source."""
import json
from pathlib import Path

import pytest

from part1_capacity.calculator.engines import vllm_memory as vm
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.hardware.accelerators import accelerator_from_dict, load_accelerator
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.experiments.engine import vllm_startup
from tests.support.in_process import capacity

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
    s = vm.startup(load_model("llama-3.1-8b"), load_accelerator("rtx-3090"), 8192, 8.03e9 * 2, flags=V019)
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
    from part1_capacity.calculator.hardware.accelerators import bundled_accelerators

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
    # an RTX 4090 sold as "24 GB" (24 GiB of GDDR6X): PyTorch's total is 23.64 GiB
    s = vm.startup(load_model("llama-3.1-8b"), load_accelerator("rtx-4090"), 8192, 16e9)
    assert s.budget["total_bytes"] == pytest.approx(23.64 * GIB)
    # a user's file with the marketed figure only: that figure, said to be the datasheet's
    bare = accelerator_from_dict({"id": "mine", "memory_gib": 24, "bandwidth_gb_s": 1000, "bf16_tflops": 100})
    s = vm.startup(load_model("llama-3.1-8b"), bare, 8192, 16e9)
    assert s.budget["total_bytes"] == 24 * GIB and any("datasheet figure" in n for n in s.notes)


def test_eight_bit_column_says_when_a_type_runs_at_the_16_bit_rate():
    # the A100 has INT8 tensor cores (624 TOPS dense) and no FP8 ones: FP8 weights multiply at its BF16 rate
    from part1_capacity.calculator.hardware.accelerators import eight_bit_cell

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

    m = load_model(str(Path(__file__).parents[2] / "data" / "configs" / "mixtral-8x7b" / "config.json"))
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
    from part1_capacity.calculator.model.profiles import bundled_models

    carried = {i: m for i, m in bundled_models().items() if m.vocab_size}
    assert {"llama-3.1-8b", "gemma-3-27b", "deepseek-v2-lite", "gpt-oss-120b"} <= set(carried)
    for i, m in carried.items():
        assert f"vocabulary {m.vocab_size:,}" in m.source and "vocab_size" in m.source, i
    assert carried["deepseek-v2-lite"].experts_per_token == 6 and carried["deepseek-v2-lite"].moe_intermediate_size \
        == 1408


# --- every rule of the start-up figures at its edges, worked by hand -------------------------------------------------
# Llama-3.1-8B (32 layers, 8 K/V heads of 128) throughout unless named: one token of one layer is 8 × (128 + 128) × 2 B
# = 4 KiB, so a block of 16 tokens over all 32 layers is 2 MiB and one token of all layers 128 KiB.
from dataclasses import replace as _replace
from types import SimpleNamespace

NEED_MORE = ("Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine. "
             "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")
V019 = vm.StartupFlags(vllm_version="0.19")   # the release whose rules the hand derivations below follow
CUDA_GRAPHS = ("CUDA graphs: captured after the cache is allocated, outside this budget "
               "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0, the default, vllm/envs.py); they take memory beyond the "
               "utilization share")
KV_GIVEN = ("--kv-cache-memory given: vLLM skips the memory profiling and uses it as is (gpu_worker.py "
            "determine_available_memory)")
BUDGET_KEYS = {"total_bytes", "utilization", "weights_bytes", "activation_bytes", "non_torch_bytes", "cuda_graph_bytes"}


def _llama(L, kv=None, acc="h100", **kw):
    # the figures below are derived by hand from v0.19's rules (the default until a newer release was modelled)
    flags = vm.StartupFlags(kv_cache_memory_bytes=kv, vllm_version="0.19",
                            **{k: kw.pop(k) for k in list(kw) if k in ("block_size",)})
    return vm.startup(load_model("llama-3.1-8b"), load_accelerator(acc), L, 16e9, flags=flags, **kw)


def _too_long(L, need_gib, avail_gib, fit=None):
    est = f"Based on the available memory, the estimated maximum model length is {fit}. " if fit else ""
    return (f"ValueError: To serve at least one request with the models's max seq len ({L}), ({need_gib} GiB KV cache "
            f"is needed, which is larger than the available KV cache memory ({avail_gib} GiB). {est}{NEED_MORE}")


def test_engine_memory_and_where_it_comes_from():
    h100 = load_accelerator("h100")
    assert vm.engine_memory(h100) == (h100.engine_memory_bytes, h100.engine_memory_source)
    assert vm.engine_memory(SimpleNamespace(memory_bytes=24e9)) == (
        24e9, "datasheet figure (no runtime-reported total recorded for this accelerator)")
    assert vm.engine_memory(SimpleNamespace(memory_bytes=24e9, engine_memory_bytes=20e9)) == (20e9, "accelerators.json")
    assert vm.engine_memory(SimpleNamespace(memory_bytes=24e9, engine_memory_bytes=20e9, engine_memory_source="")) \
        == (20e9, "accelerators.json")


def test_defaults_at_their_edges_and_the_non_torch_term():
    # get_batch_defaults: ">= 70 GiB" includes 70 GiB itself
    assert vm.max_num_seqs(70 * GIB, "NVIDIA H100") == 1024 and vm.max_num_seqs(70 * GIB - 1, "") == 256
    # NON_TORCH (llm-d's v0.19.0 means): 0.25 GiB alone, 2.1 GiB with any tensor parallelism, 0.07 GiB pipeline only
    assert vm.non_torch_bytes(1, 1) == 0.25 * GIB and vm.non_torch_bytes(2, 1) == 2.1 * GIB
    assert vm.non_torch_bytes(1, 2) == 0.07 * GIB and vm.non_torch_bytes(2, 2) == 2.1 * GIB


def test_mla_block_size_on_every_blackwell_and_hopper_id_with_its_note():
    ds, llama = load_model("deepseek-v2-lite"), load_model("llama-3.1-8b")
    blackwell = (128, "MLA on Blackwell: CUTLASS MLA backend, block size 128 (vllm/platforms/cuda.py)")
    hopper = (64, "MLA on Hopper: FlashMLA backend, block size 64 (vllm/platforms/cuda.py)")
    default = (16, "block size 16 (vllm/config/cache.py default on CUDA)")
    for acc in ("b200", "b300", "gb200", "gb200-nvl72", "gb300"):
        assert vm.block_size(ds, acc) == blackwell, acc
    for acc in ("h100", "h200", "h20"):
        assert vm.block_size(ds, acc) == hopper, acc
    assert vm.block_size(ds, "a100") == vm.block_size(ds) == vm.block_size(llama, "h100") == default


def test_activation_term_when_the_forward_pass_is_the_larger():
    llama = load_model("llama-3.1-8b")
    # 8,192 tokens, one sequence: forward 8,192 × (3 × 4,096 + 3 × 14,336) × 2 B = 905,969,664 B; the sampler's
    # 1 × 128,256 × 14 B + 8,192 × 4,096 × 2 B = 68,904,448 B is smaller
    assert vm.activation_bytes(llama, 8192, 1, 1) == 905_969_664
    # two tensor-parallel ranks split the MLP: 8,192 × (12,288 + 21,504) × 2 B
    assert vm.activation_bytes(llama, 8192, 1, 2) == 553_648_128
    # the sampler by default (the last stage); not on an earlier pipeline stage: 2,048 × 55,296 × 2 B
    assert vm.activation_bytes(llama, 2048, 256, 1) == 256 * 128256 * 14 + 2048 * 4096 * 2
    assert vm.activation_bytes(llama, 2048, 256, 1, last_stage=False) == 226_492_416


def test_activation_term_of_a_fused_moe():
    # gpt-oss-20b (config.json: hidden 2,880, 4 of 32 experts per token, expert width 2,880), 8,192 tokens:
    # dense 8,192 × (8,640 + 8,640) × 2 B = 283,115,520; routed 8,192 × 4 × (3 × 2,880 + 2,880) = 377,487,360,
    # so the MoE pass is (8,192 × 8,640 + 377,487,360) × 2 B = 896,532,480 B
    g = load_model("gpt-oss-20b")
    assert g.hidden_size == 2880
    assert vm.activation_bytes(g, 8192, 1, 1, last_stage=False) == 896_532_480
    # TP 2: routed 8,192 × 4 × (4,320 + 2,880) = 235,929,600 → (70,778,880 + 235,929,600) × 2
    assert vm.activation_bytes(g, 8192, 1, 2, last_stage=False) == 613_416_960
    # past VLLM_FUSED_MOE_CHUNK (32,768 tokens) the routed caches stop growing: 40,000 tokens →
    # (40,000 × 8,640 + 32,768 × 4 × 11,520) × 2 B
    assert vm.activation_bytes(g, 40000, 1, 1, last_stage=False) == 3_711_098_880


def test_shapes_when_the_profile_lacks_one_width():
    llama = load_model("llama-3.1-8b")
    assert vm.shapes(llama) == ({"vocab": 128256, "intermediate": 14336}, [])
    # one width missing: only that one stands in (4 × hidden for the MLP; Llama 3's vocabulary), and the note names it
    assert vm.shapes(_replace(llama, intermediate_size=0)) == ({"vocab": 128256, "intermediate": 16384}, [
        "activation term approximate: MLP width (16,384) not in the profile"])
    assert vm.shapes(_replace(llama, vocab_size=0)) == ({"vocab": 128256, "intermediate": 14336}, [
        "activation term approximate: vocabulary (128,256) not in the profile"])
    # experts need both their width and their count; one alone is a dense model's activation
    g = load_model("gpt-oss-20b")
    assert vm.shapes(_replace(g, experts_per_token=0))[0] == {"vocab": 201088, "intermediate": 2880}
    assert vm.shapes(_replace(g, moe_intermediate_size=0))[0] == {"vocab": 201088, "intermediate": 2880}
    bare = _replace(llama, vocab_size=0, intermediate_size=0)
    s = vm.startup(bare, load_accelerator("h100"), 8192, 16e9, flags=V019)
    assert s.notes[-2:] == ["activation term approximate: vocabulary (128,256) and MLP width (16,384) not in the "
                            "profile", CUDA_GRAPHS]


@pytest.mark.parametrize("text, size", [
    ("1kib", KIB), ("3KiB", 3 * KIB), ("2mb", 2e6), ("3gb", 3e9), ("3 GB", 3e9), ("4kb", 4000), ("5b", 5), ("5B", 5),
    ("1", 1), ("1.5MiB", 1.5 * MIB), (str(2 ** 60), 2 ** 60)])
def test_every_size_unit(text, size):
    assert vm.parse_size(text) == size


@pytest.mark.parametrize("text", ["0", "0b", str(2 ** 61), "-1"])
def test_sizes_out_of_range(text):
    with pytest.raises(InputError) as e:
        vm.parse_size(text, "x")
    assert str(e.value) == f"x: must be a positive size up to 1 EiB, got '{text}'"


def test_start_up_flags_notes_and_fields_of_a_v0_19_run():
    h100 = load_accelerator("h100")
    s = _llama(8192)
    assert s.flags == {"gpu_memory_utilization": 0.9, "max_num_batched_tokens": 8192, "max_num_seqs": 1024,
                       "block_size": 16, "kv_cache_memory_bytes": None, "max_model_len": 8192,
                       "tensor_parallel_size": 1, "pipeline_parallel_size": 1, "vllm_version": "0.19"}
    assert s.given == {"vllm_version": "0.19"} and s.block_size == 16  # _llama names the release and set(s.budget) == BUDGET_KEYS
    assert s.notes == [f"total memory 79.19 GiB as the engine sees it ({h100.engine_memory_source})",
                       "block size 16 (vllm/config/cache.py default on CUDA)", CUDA_GRAPHS]
    s = _llama(16384, 58.11 * GIB)
    assert s.given == {"kv_cache_memory_bytes": 58.11 * GIB, "vllm_version": "0.19"} and set(s.budget) == BUDGET_KEYS
    assert s.notes[2:] == [KV_GIVEN]
    assert s.to_fields() == {
        "engine_kv_cache_memory_bytes": 58.11 * GIB, "engine_kv_cache_tokens": 476032,
        "engine_max_concurrency": 29752 / 1024, "engine_memory_budget": s.budget, "engine_num_blocks": 29752,
        "engine_block_size": 16, "engine_startup_flags": {**s.flags, "kv_cache_memory_bytes": 58.11 * GIB},
        "engine_startup_error": None, "engine_startup_notes": s.notes, "engine_startup_source": "vLLM v0.19",
        "engine_layout": {"tensor": 1, "pipeline": 1}}


def test_the_accelerators_name_and_id_pick_the_defaults():
    # an A100 80GB holds ≥ 70 GiB but is named in get_batch_defaults' exception: 2,048 / 256
    s = _llama(8192, acc="a100")
    assert (s.flags["max_num_batched_tokens"], s.flags["max_num_seqs"]) == (2048, 256)
    assert _llama(8192, acc="tpu-v6e").flags["max_num_batched_tokens"] == 1024     # by its id
    # MLA on an H200 (by id): FlashMLA's 64-token blocks
    s = vm.startup(load_model("deepseek-v2-lite"), load_accelerator("h200"), 8192, 32e9, flags=V019)
    assert s.block_size == 64 and s.notes[1].startswith("MLA on Hopper")
    # an accelerator known only by its memory (no name, id, runtime figure or unified flag): 80e9 B = 74.5 GiB
    bare = SimpleNamespace(memory_bytes=80e9)
    s = vm.startup(load_model("deepseek-v2-lite"), bare, 8192, 32e9, flags=V019)
    assert (s.flags["max_num_batched_tokens"], s.flags["max_num_seqs"], s.block_size) == (8192, 1024, 16)
    assert s.notes[:3] == ["total memory 74.51 GiB as the engine sees it (datasheet figure (no runtime-reported "
                           "total recorded for this accelerator))", "block size 16 (vllm/config/cache.py default on "
                           "CUDA)", CUDA_GRAPHS]


def test_unified_memory_is_said():
    s = vm.startup(load_model("llama-3.1-8b"), load_accelerator("m4-max"), 8192, 16e9)
    assert s.notes[2] == ("unified memory: CPU and GPU share it, so the weights are loaded into it once and the budget "
                          "above is all there is (no separate host copy to add)")


def test_block_size_flag():
    # --block-size 32: a block of all layers is 4 MiB → ⌊58.11 × 256⌋ = 14,876 blocks = 476,032 tokens; a request of
    # 16,384 tokens is 512 blocks
    s = _llama(16384, 58.11 * GIB, block_size=32)
    assert (s.block_size, s.num_blocks, s.kv_cache_tokens) == (32, 14876, 476032)
    assert s.max_concurrency == 14876 / 512 and s.notes[1] == "--block-size 32"
    assert s.given == {"kv_cache_memory_bytes": 58.11 * GIB, "block_size": 32, "vllm_version": "0.19"}


def test_pipeline_stages_blocks_budget_and_note():
    # PP 2, 16 + 16 layers, 1.5 GiB each: a block of a stage's layers is 1 MiB → 1,536 blocks = 24,576 tokens; a
    # request of 16,384 tokens needs 1,024 blocks (2 GiB, 1 GiB per stage: it fits). Both stages have as many blocks,
    # so the first decides: its weights are half of 16e9 and its activation the forward pass alone (no sampler)
    s = _llama(16384, 1.5 * GIB, pp=2)
    assert (s.num_blocks, s.kv_cache_tokens, s.max_concurrency, s.error) == (1536, 24576, 1.5, None)
    assert s.budget["weights_bytes"] == 8e9 and s.budget["activation_bytes"] == 905_969_664
    assert s.notes[-1] == ("pipeline stages of 16, 16 layers (vllm/distributed/utils.py get_pp_indices), weights "
                           "counted in proportion to layers: the stage with the fewest blocks decides")
    # PP 3: 11, 11, 10 layers; the first 11-layer stage decides: ⌊1.5 GiB / (2 MiB × 11/32)⌋ = ⌊2,234.2⌋ blocks,
    # its weights 16e9 × 11/32
    s = _llama(16384, 1.5 * GIB, pp=3)
    assert (s.num_blocks, s.budget["weights_bytes"]) == (2234, 5.5e9)
    assert "pipeline stages of 11, 11, 10 layers" in s.notes[-1]
    assert not any("pipeline" in n for n in _llama(16384, 1.5 * GIB).notes)
    # weights per rank given (expert parallelism): a stage holds its share of them
    s = vm.startup(load_model("llama-3.1-8b"), load_accelerator("h100"), 8192, 16e9, tp=2, pp=2,
                   weights_per_rank=3e9)
    assert s.budget["weights_bytes"] == 3e9


def test_pipeline_stage_too_small_for_one_request():
    # 65,536 tokens = 8 GiB, 4 GiB per stage, against 1.5 GiB: a stage of 16 layers holds 3 GiB of all-layer blocks,
    # 1,536 blocks of 16 = 24,576 tokens
    assert _llama(65536, 1.5 * GIB, pp=2).error == _too_long(65536, "4.00", "1.50", 24576)


def test_vllms_error_at_its_edges():
    assert _llama(16384, 0.0).error == ("ValueError: No available memory for the cache blocks. Try increasing "
                                        "`gpu_memory_utilization` when initializing the engine. See "
                                        "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more "
                                        "details.")
    assert _llama(16384, 1.0).error == _too_long(16384, "2.00", "0.00")         # 1 byte: nothing fits
    # exactly one request: 16,384 tokens = 1,024 blocks = 2 GiB fits in 2 GiB
    s = _llama(16384, 2 * GIB)
    assert (s.error, s.num_blocks, s.max_concurrency) == (None, 1024, 1.0)
    # 32,768 tokens in 2 GiB: the estimate is the longest request that fits, 16,384 exactly
    assert _llama(32768, 2 * GIB).error == _too_long(32768, "4.00", "2.00", 16384)
    # blocks of one token (128 KiB over all layers): 1 token fits in 128 KiB, 3 tokens in 384 KiB
    assert _llama(3, 128 * KIB, block_size=1).error == _too_long(3, "0.00", "0.00", 1)
    assert _llama(4, 384 * KIB, block_size=1).error == _too_long(4, "0.00", "0.00", 3)


def test_a_request_of_one_block():
    s = _llama(16, 58.11 * GIB)             # 16 tokens: one block per request, 29,752 of them
    assert s.max_concurrency == 29752


def test_kv_cache_groups_note_and_when_it_is_left_out():
    g, h100 = load_model("gemma-2-9b"), load_accelerator("h100")
    s = vm.startup(g, h100, 8192, 18e9, flags=vm.StartupFlags(kv_cache_memory_bytes=54.12 * GIB))
    # 21,111 blocks (worked above) × 8,192 / 1,025 = 168,723.2
    assert ("'GPU KV cache size' is 168,880 tokens as vLLM v0.19 logs it (blocks ÷ 2 KV cache groups × block size, "
            "kv_cache_utils.py _report_kv_cache_config); later releases log concurrency × max_model_len = 168,723 "
            "instead") in s.notes
    assert s.notes[-1] == ("the concurrency above counts each request at its start-up worst case (window − 1 + a full "
                           "8,192-token prefill chunk per sliding layer); a running server holds only the window + "
                           "the block being filled per sliding layer, so steady state fits more requests than logged")
    # 12,304 tokens = 769 full blocks + ⌈min(4,095 + 8,192, 12,304) / 16⌉ + 1 = 769 sliding: 1,538 blocks. With 3,076
    # blocks, concurrency 2 × 12,304 = 24,608 = 3,076 // 2 × 16: both releases log the same, no note
    one_block = 21 * 128 * KIB
    s = vm.startup(g, h100, 12304, 18e9, flags=vm.StartupFlags(kv_cache_memory_bytes=3076 * one_block))
    assert s.kv_cache_tokens == 24608 and s.max_concurrency == 2
    assert not any("'GPU KV cache size'" in n for n in s.notes)
    # one group: never the note, even when concurrency × max_model_len is not the token count (1,000 tokens = 63 blocks)
    assert not any("'GPU KV cache size'" in n for n in _llama(1000, 58.11 * GIB).notes)


def test_without_the_hybrid_manager_sliding_layers_are_full():
    g, h100 = load_model("gemma-2-9b"), load_accelerator("h100")
    # all 42 layers full: a block is 42 × 128 KiB = 5.25 MiB → ⌊54.12 GiB / 5.25 MiB⌋ = 10,555 blocks
    s = vm.startup(g, h100, 8192, 18e9, hybrid_manager=False,
                   flags=vm.StartupFlags(kv_cache_memory_bytes=54.12 * GIB))
    assert s.num_blocks == 10555
    # with it, 1,000 blocks of 21 × 128 KiB: a request of T ≤ 12,287 needs 2⌈T/16⌉ + 1 blocks → T ≤ 7,984; 16,384
    # tokens need 1,024 + 769 = 1,793 blocks = 4.60 GiB
    s = vm.startup(g, h100, 16384, 18e9, flags=vm.StartupFlags(kv_cache_memory_bytes=1000 * 21 * 128 * KIB))
    assert s.error == _too_long(16384, "4.60", "2.56", 7984)


def test_a_mamba_hybrid_with_vllms_default_state_dtypes():
    # Nemotron-3-Nano at TP 1 (tests/calculator/engines/test_allocation.py): bf16 conv + fp32 SSM state → blocks of 2,096 tokens, a
    # block of all groups 6 × 2,096 × 1,024 B; a request is 1 full + 4 state pages per group = 5 blocks up to 2,096
    # tokens, 20 at 32,768
    n = load_model("nemotron-3-nano-30b-a3b")
    block = 6 * 2096 * 1024
    s = vm.startup(n, load_accelerator("h100"), 32768, 60e9, flags=vm.StartupFlags(kv_cache_memory_bytes=5 * block))
    assert (s.block_size, s.num_blocks) == (2096, 5)
    assert "the estimated maximum model length is 2096. " in s.error


def test_chunked_layers_reserve_the_chunk_and_one_prefill_step_by_hand():
    # Llama 4 Scout on 4 H100s, max_model_len 8192, 8192 batched tokens: 12 global + 36 chunked layers (chunk 8192),
    # 8 K/V heads of 128 → 2 per rank; a page of one layer = 16 tokens × 2 × 2 × 128 × 2 B = 16 KiB. Groups of
    # 12 layers (36 ≥ 1.5 × 12): 1 full + 3 chunked, a block of all of them 12 × 16 KiB. One request: full
    # ⌈8192 / 16⌉ = 512 pages, chunked ⌈min(8192 + 8192, 8192) / 16⌉ = 512 (ChunkedLocalAttentionSpec: no −1,
    # no extra page, unlike a sliding window's 513), so 4 × 512 = 2,048 blocks. 16.75 GiB / 192 KiB = 91,477
    # blocks → ⌊91,477 / 4⌋ × 16 = 365,904 tokens and 91,477 / 2,048 = 44.67× (logged from the unrounded
    # memory: 365,968 and 44.68×)
    from tests.calculator.model.test_configs import CONFIGS
    m = load_model(str(CONFIGS / "llama-4-scout" / "config.json"))
    s = vm.startup(m, load_accelerator("h100"), 8192, 0, tp=4,
                   flags=vm.StartupFlags(kv_cache_memory_bytes=16.75 * GIB, max_num_batched_tokens=8192))
    assert s.num_blocks == int(16.75 * GIB // (12 * 16 * KIB)) == 91477
    assert s.kv_cache_tokens == 91477 // 4 * 16 == 365904
    assert s.max_concurrency == 91477 / 2048
    assert round(s.max_concurrency, 2) == 44.67


# --- the vision encoder's share of the profile run (vllm_memory.vision_tower / encoder_bytes) -------------------
CONFIGS = Path(__file__).resolve().parents[2] / "data" / "configs"


def test_gemma3_encoder_profile_by_hand():
    # Gemma-3-12B's SigLIP tower (config.json vision_config): 896 / 14 = 64 → 4,096 patches per image, pooled to
    # mm_tokens_per_image 256 tokens; hidden 1,152, MLP 4,304; 3 × 14 × 14 = 588 pixels per patch
    m = load_model(str(CONFIGS / "gemma-3-12b-it" / "config.json"))
    tower, notes = vm.vision_tower(m)
    assert (tower.patches, tower.tokens, tower.hidden, tower.intermediate, tower.pixels_per_patch) == (
        4096, 256, 1152, 4304, 588) and notes == []
    # H100 defaults: 8,192 batched tokens → 8,192 // 256 = 32 images (vLLM logs "profiled with 32 image items");
    # an L4's 2,048 → 8; a budget below one image still profiles one
    assert vm.encoder_items(tower, 8192, 1024, 8192) == 32
    assert vm.encoder_items(tower, 2048, 256, 8192) == 8
    assert vm.encoder_items(tower, 128, 256, 8192) == 1
    # 131,072 patches × the MLP half (2 × 1,152 + 2 × 4,304 = 10,912 > attention's 6 × 1,152) × 2 B, plus their
    # float32 pixels 131,072 × 588 × 4 B; the cache keeps 32 × 256 tokens × 3,840 (the text width) × 2 B
    peak, cached = vm.encoder_bytes(tower, 32, m.hidden_size, 1)
    assert peak == 131072 * 10912 * 2 + 131072 * 588 * 4 == 3_168_796_672
    assert cached == 32 * 256 * 3840 * 2
    # at H100 defaults the sampler pass still decides; the cached outputs sit on top of it
    s = vm.startup(m, load_accelerator("h100"), 8192, 24e9, flags=vm.StartupFlags(gpu_memory_utilization=0.95))
    text_only = vm.activation_bytes(m, 8192, 1024, 1)
    assert s.budget["activation_bytes"] == text_only + cached
    assert any("32 dummy image(s)" in n for n in s.notes)


def test_qwen3_vl_encoder_profile_by_hand():
    # Qwen3-VL-30B-A3B: one image of 16,384 merged tokens (vLLM: "a budget of 16384 tokens, and profiled with 1
    # image items") = 65,536 patches of 3 × 2 × 16 × 16 = 1,536 pixels; attention half 2 × 1,152 + 6 × 1,152 (q, k,
    # v, rotated q and k, output) = 9,216 < MLP half 10,912
    m = load_model(str(CONFIGS / "qwen3-vl-30b-a3b" / "config.json"))
    tower, _ = vm.vision_tower(m)
    assert (tower.patches, tower.tokens, tower.pixels_per_patch, tower.rotary) == (65536, 16384, 1536, True)
    assert vm.encoder_items(tower, 8192, 1024, 32768) == 1
    peak, cached = vm.encoder_bytes(tower, 1, m.hidden_size, 1)
    assert peak == 65536 * 10912 * 2 + 65536 * 1536 * 4 and cached == 16384 * 2048 * 2
    # tensor parallelism splits the tower's q/k/v and MLP widths, not the layer input and its norm
    peak2, _ = vm.encoder_bytes(tower, 1, m.hidden_size, 2)
    assert peak2 == 65536 * (2 * 1152 + 4304) * 2 + 65536 * 1536 * 4
    # the encoder pass is larger than the text pass at an L4's 2,048 batched tokens: it decides the peak
    s = vm.startup(m, load_accelerator("l4"), 4096, 31e9)
    assert s.budget["activation_bytes"] == peak


def test_text_models_and_unmodelled_towers_have_no_encoder_term():
    llama = load_model("llama-3.1-8b")
    assert vm.vision_tower(llama) == (None, [])
    # a tower of a kind not modelled (Mistral Small 3.1's Pixtral) is named in a note, and adds nothing
    m = load_model(str(CONFIGS / "mistral-small-3.1-24b" / "config.json"))
    tower, notes = vm.vision_tower(m)
    assert tower is None and notes and "pixtral" in notes[0]
    s = vm.startup(m, load_accelerator("h100"), 8192, 48e9)
    assert s.budget["activation_bytes"] == vm.activation_bytes(m, 8192, 1024, 1)
    assert any("pixtral" in n for n in s.notes)


def test_the_encoder_sits_on_the_first_pipeline_stage():
    m = load_model(str(CONFIGS / "gemma-3-12b-it" / "config.json"))
    acc = load_accelerator("h100")
    tower, _ = vm.vision_tower(m)
    enc = vm.encoder_bytes(tower, 32, m.hidden_size, 1)
    pp2 = vm.startup(m, acc, 8192, 24e9, 1, 2)
    one = vm.startup(m, acc, 8192, 24e9, 1, 1)
    # the last stage samples without the encoder's cached outputs; the first holds the encoder but no sampler
    first = vm.activation_bytes(m, 8192, 1024, 1, last_stage=False, encoder=enc)
    last = vm.activation_bytes(m, 8192, 1024, 1, last_stage=True)
    assert first == enc[0] and last < one.budget["activation_bytes"]
    assert pp2.budget["activation_bytes"] in (first, last)
