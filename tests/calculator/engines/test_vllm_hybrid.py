"""vLLM's rules for a Mamba hybrid at tensor parallelism 2 (part1_capacity/calculator/engines/vllm.py), worked by
hand from the bundled Nemotron-3-Nano shape and the vLLM source files named in the module: the state page splits
across ranks (mamba_utils.py MambaStateShapeCalculator) and the state bytes carry the group size
(kv_cache_utils.py _get_kv_cache_groups_uniform_page_size)."""
from part1_capacity.calculator.engines import vllm
from part1_capacity.calculator.readers.loader import load_model


def test_nemotron_3_nano_at_tp2():
    n = load_model("nemotron-3-nano-30b-a3b")
    # One Mamba-2 layer's state (tests/calculator/engines/test_allocation.py works it at TP 1): conv 18,432 values × 2 B = 36,864 B,
    # SSM 524,288 values × 4 B = 2,097,152 B; 2,134,016 B over min(2 ranks, 64 state heads) = 2 → 1,067,008 B.
    assert vllm.state_page(n, 2, 2, 4) == 1_067_008
    # Attention page per token per rank: max(1, 2 K/V heads // 2) = 1 head × 2 (K, V) × 128 × 2 B = 512 B.
    assert vllm.attention_page_per_token(n, 2, 2) == 512
    # Block: 16 × ⌈1,067,008 / (16 × 512)⌉ = 16 × ⌈130.25⌉ = 2,096 tokens; page 2,096 × 512 = 1,073,152 B.
    # 6 attention + 23 Mamba layers: group size 6 (23 ≥ 1.5 × 6), groups full 1, state ⌈23 / 6⌉ = 4.
    # 32,768 tokens: ⌈32,768 / 2,096⌉ = 16 attention pages; 1 state page per group.
    r = vllm.reservation(n, 32768, tp=2, kv_bytes=2, conv_bytes=2, ssm_bytes=4)
    assert r.block_size == 2096 and r.page_bytes == 1_073_152
    assert r.group_size == 6 and r.groups == {"full": 1, "state": 4}
    # state: group size 6 × 4 groups × 1 page × 1,073,152 B = 25,755,648 B (without the group size: 4,292,608 B).
    assert r.state_bytes == 25_755_648
    # request: 6 × 1,073,152 × (16 + 4) = 128,778,240 B; growth per token: 6 × 1 full group × 512 B = 3,072 B.
    assert r.bytes_per_request == 128_778_240
    assert r.bytes_per_token == 3072


# --- every rule's note and boundary, on the bundled models and on small stand-in shapes worked by hand ---------------
from types import SimpleNamespace as NS  # noqa: E402

import pytest  # noqa: E402

from part1_capacity.calculator.base.errors import InputError  # noqa: E402

GIB = 2 ** 30
GROUPED = " padded in (kv_cache_utils.py _get_kv_cache_groups_uniform_page_size)"
STATE_PAGE = ("one state page per recurrent layer and request: mamba_cache_mode 'none', prefix caching off "
              "(vllm/model_executor/models/config.py MambaModelConfig); with prefix caching vLLM keeps 2 "
              "('align') or one per block ('all') (kv_cache_interface.py MambaSpec.max_memory_usage_bytes)")


def _sliding_note(pages, block, batched, steady):
    return (f"sliding-window layers budget {pages} blocks of {block} per request: window − 1 + {batched} tokens of a "
            "chunked-prefill step, capped at the context, + 1 (kv_cache_interface.py "
            "SlidingWindowSpec.max_memory_usage_bytes) — the start-up worst case vLLM's 'Maximum concurrency' log "
            f"divides by, not what a running server holds: in steady decode a request keeps about {steady} blocks per "
            "sliding layer (its window + the block being filled; older blocks are freed, "
            "vllm/v1/core/single_type_kv_cache_manager.py SlidingWindowManager.remove_skipped_blocks)")


def test_nemotron_3_nano_at_tp2_notes():
    # Block 2,096 (worked above); the state page 1,067,008 B = 1.02 MiB, padded to 1,073,152 B = 1.02 MiB;
    # 4 state groups × 6 = 24 places for 23 Mamba layers: 1 empty; 16 × 2,096 = 33,536 ≠ 32,768: rounded up.
    r = vllm.reservation(load_model("nemotron-3-nano-30b-a3b"), 32768, tp=2, kv_bytes=2, conv_bytes=2, ssm_bytes=4)
    assert r.notes == [
        "attention block size raised to 2,096 tokens so a page holds one sequence's state of a recurrent layer "
        "(1.02 MiB, padded to 1.02 MiB) (vllm/platforms/interface.py _align_hybrid_block_size)",
        STATE_PAGE, "layers grouped by 6: 1 empty state layer(s)" + GROUPED,
        "context rounded up to whole blocks of 2096 tokens"]
    # the defaults are vLLM's: bf16 K/V and conv state, fp32 SSM state, 8,192 batched tokens, TP 1
    assert vllm.reservation(load_model("nemotron-3-nano-30b-a3b"), 32768) == \
        vllm.reservation(load_model("nemotron-3-nano-30b-a3b"), 32768, 1, 2, 2, 4, 8192)
    with pytest.raises(InputError) as err:
        vllm.reservation(load_model("nemotron-3-nano-30b-a3b"), 32768, hybrid_manager=False)
    assert str(err.value) == ("--disable-hybrid-kv-cache-manager: vLLM cannot serve a Mamba / linear-attention hybrid "
                              "without the hybrid KV cache manager (kv_cache_utils.py raises)")


def test_replicated_kv_heads_and_mla_notes():
    llama = load_model("llama-3.1-8b")          # 8 K/V heads; 1,024 tokens = 64 whole blocks: no rounding note
    assert vllm.reservation(llama, 1024, tp=1).notes == [] and vllm.reservation(llama, 1024, tp=8).notes == []
    assert vllm.reservation(llama, 1024, tp=16).notes == [
        "K/V heads replicated: 8 K/V heads over 16 ranks → 1 head per rank (vllm/model_executor/models/llama.py)"]
    assert vllm.reservation(llama, 1024).state_bytes == 0          # no recurrent layers: no state pages
    ds = load_model("deepseek-v3")
    assert vllm.reservation(ds, 1024, tp=1).notes == []
    assert vllm.reservation(ds, 1024, tp=2).notes == [
        "MLA latent kept whole on every rank (vllm/model_executor/layers/mla.py)"]


def _attention(full, window_layers, window=129, ssm=None):
    return NS(is_mla=False, n_kv_heads=1, head_dim=64, kv_v_dim=64, window_kv=(1, 64, 64), index_head_dim=0,
              n_full_layers=full,
              n_window_layers=window_layers,
              window=window, ssm=ssm)


def test_three_layer_types_grouped_and_padded():
    # Page per token: 1 K/V head × 2 × 64 × 2 B = 256 B. State page: 1,024 conv values × 2 B + 15,360 SSM values
    # × 4 B = 63,488 B (0.06 MiB); block 16 × ⌈63,488 / (16 × 256)⌉ = 16 × 16 = 256 tokens; page 65,536 B (0.06 MiB).
    # 4 full, 6 sliding, 9 state layers: group size 4 (9 ≥ 1.5 × 4); groups 1, 2, 3 — 2 empty sliding, 3 empty state.
    # 1,000 tokens: full ⌈1,000 / 256⌉ = 4 pages; sliding ⌈min(128 + 8,192, 1,000) / 256⌉ + 1 = 5; state 1;
    # steady sliding ⌈min(129, 1,000) / 256⌉ + 1 = 2. Total 4 × 65,536 × (4 + 2 × 5 + 3 × 1) = 4,456,448 B.
    p = _attention(4, 6, ssm=NS(n_heads=8, n_layers=9, conv_elements=1024, state_elements=16384))
    r = vllm.reservation(p, 1000)
    assert (r.block_size, r.page_bytes, r.group_size) == (256, 65536, 4)
    assert r.groups == {"full": 1, "sliding": 2, "state": 3}
    assert r.bytes_per_request == 4_456_448 and r.bytes_per_token == 4 * 256 and r.state_bytes == 4 * 3 * 65536
    assert r.notes == [
        "attention block size raised to 256 tokens so a page holds one sequence's state of a recurrent layer "
        "(0.06 MiB, padded to 0.06 MiB) (vllm/platforms/interface.py _align_hybrid_block_size)",
        STATE_PAGE, "layers grouped by 4: 2 empty sliding layer(s), 3 empty state layer(s)" + GROUPED,
        _sliding_note(5, 256, "8,192", 2), "context rounded up to whole blocks of 256 tokens"]


def test_sliding_window_budget_boundaries():
    # window 129, default 8,192 batched tokens: ⌈min(128 + 8,192, 32,768) / 16⌉ + 1 = 520 + 1 = 521 blocks;
    # 8,191 batched: ⌈8,319 / 16⌉ + 1 = 520 + 1 = 521; window 130 with 8,191: ⌈8,320 / 16⌉ + 1 = 521 — and
    # window 131: ⌈8,321 / 16⌉ + 1 = 522. Page per token 256 B, page 4,096 B, group size 2 (2 < 1.5 × 2).
    assert vllm.reservation(_attention(2, 2, window=129), 32768).bytes_per_request == 2 * 4096 * (2048 + 521)
    assert vllm.reservation(_attention(2, 2, window=131), 32768, batched_tokens=8191).bytes_per_request == \
        2 * 4096 * (2048 + 522)
    assert vllm.reservation(_attention(2, 2, window=130), 32768, batched_tokens=8191).bytes_per_request == \
        2 * 4096 * (2048 + 521)
    # steady decode: ⌈min(129, 32,768) / 16⌉ + 1 = 10 blocks
    assert _sliding_note(521, 16, "8,192", 10) in vllm.reservation(_attention(2, 2, window=129), 32768).notes


def test_only_sliding_layers_and_the_disabled_manager():
    # 4 sliding layers, no full one, manager off: all 4 at full length, one type, each its own page.
    r = vllm.reservation(_attention(0, 4), 1024, hybrid_manager=False)
    assert r.groups == {"full": 1} and r.group_size == 4 and r.bytes_per_request == 4 * 16 * 256 * 64
    assert r.notes == ["--disable-hybrid-kv-cache-manager: sliding-window layers allocated at full length "
                       "(vllm/v1/core/kv_cache_utils.py unify_hybrid_kv_cache_specs)"]
    # 20 full + 4 sliding: group size 4 (20 ≥ 6), 5 full groups: growth 4 × 5 × 256 B per token
    assert vllm.reservation(_attention(20, 4), 1024).bytes_per_token == 4 * 5 * 256
    # sliding layers only (manager on): no full group, no growth with the context
    assert vllm.reservation(_attention(0, 4), 1024).bytes_per_token == 0


def test_group_size_and_batched_token_boundaries():
    # group by the largest type when it is < 1.5 × the smallest: 12 < 15 → 12; 15 is not < 15 → 10
    assert vllm._group_size({"full": 10, "sliding": 12}) == 12
    assert vllm._group_size({"full": 10, "sliding": 15}) == 10
    # exactly 70 GiB reported counts as large (>=): 8,192; just below: 2,048; an A100 of 80 GB: 2,048
    assert vllm.max_num_batched_tokens(70 * GIB) == 8192 and vllm.max_num_batched_tokens(70 * GIB - 1) == 2048
    assert vllm.max_num_batched_tokens(80 * GIB, "NVIDIA A100 80GB") == 2048
    assert vllm.max_num_batched_tokens(16 * GIB, "TPU", "tpu-v5e") == 512


def test_ssm_cache_dtype_refusal_names_the_allowed_values():
    with pytest.raises(InputError) as err:
        vllm.mamba_ssm_cache_dtype_args(load_model("nemotron-3-nano-30b-a3b"), "fp8")
    assert str(err.value) == "state_dtype: vLLM's --mamba-ssm-cache-dtype takes fp32, bf16, fp16, not fp8"
