"""vLLM's rules for a Mamba hybrid at tensor parallelism 2 (part1_capacity/calculator/engine_rules/vllm.py), worked by
hand from the bundled Nemotron-3-Nano shape and the vLLM source files named in the module: the state page splits
across ranks (mamba_utils.py MambaStateShapeCalculator) and the state bytes carry the group size
(kv_cache_utils.py _get_kv_cache_groups_uniform_page_size)."""
from part1_capacity.calculator.engine_rules import vllm
from part1_capacity.calculator.loader import load_model


def test_nemotron_3_nano_at_tp2():
    n = load_model("nemotron-3-nano-30b-a3b")
    # One Mamba-2 layer's state (tests/test_engine_alloc.py works it at TP 1): conv 18,432 values × 2 B = 36,864 B,
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
