"""The tensor-parallel split rules (part1_capacity/calculator/sizing/sharding.py) on small hand-worked shapes, one rule per
test, so each rule's mutant (results/mutation/REPORT.md) fails here. The rules are vLLM's: see the module docstring."""
from types import SimpleNamespace as NS

from part1_capacity.calculator.sizing import sharding


def test_heads_must_split_and_kv_heads_divide_or_be_divided():
    # 6 query heads over 4 ranks: 6 % 4 = 2, no split however the 2 K/V heads fit (2 divides 4).
    assert sharding.splits_heads(NS(n_heads=6, n_kv_heads=2), 4) is False
    # 8 query heads, 3 K/V heads over 2 ranks: 3 % 2 = 1 and 2 % 3 = 2 — the K/V heads neither divide nor are divided.
    assert sharding.splits_heads(NS(n_heads=8, n_kv_heads=3), 2) is False
    # 8 query, 2 K/V heads over 4 ranks: 8 % 4 = 0 and 4 % 2 = 0 (each K/V head replicated on 2 ranks).
    assert sharding.splits_heads(NS(n_heads=8, n_kv_heads=2), 4) is True


def test_kv_heads_per_rank_is_a_whole_number_of_heads():
    # 5 K/V heads over 2 ranks: 5 // 2 = 2 whole heads (not 2.5); 8 over 16: max(1, 0) = 1 (replicated).
    assert sharding.kv_heads_per_rank(5, 2) == 2 and isinstance(sharding.kv_heads_per_rank(5, 2), int)
    assert sharding.kv_heads_per_rank(8, 16) == 1


def test_state_fraction_per_rank():
    # no recurrent state: 0; 64 state heads over 2 ranks: 1 / min(2, 64) = 1/2; over 128 ranks: 1 / 64.
    assert sharding.state_fraction_per_rank(NS(ssm=None), 4) == 0.0
    assert sharding.state_fraction_per_rank(NS(ssm=NS(n_heads=64)), 2) == 0.5
    assert sharding.state_fraction_per_rank(NS(ssm=NS(n_heads=64)), 128) == 1 / 64


def test_what_one_rank_holds_by_hand():
    from part1_capacity.calculator.readers.loader import load_model
    from part1_capacity.calculator.sizing.sharding import (cache_parts_per_rank, cache_per_rank,
                                                           sequences_per_replica, weights_per_rank)
    # ⌈B/d⌉: 7 sequences on 2 replicas → 4 on the busiest; 8 → 4; 1 on 4 → 1; floats (the sweep's grid) alike
    assert [sequences_per_replica(b, d) for b, d in ((7, 2), (8, 2), (1, 4), (7.0, 2.0))] == [4, 4, 1, 4.0]
    # 100 bytes of weights on tensor 2 × pipeline 2: 25 each; with 60 of them experts spread over 4 replicas
    # (pipeline 1): the 40 dense over 2 ranks, the 60 over 2 × 4 → 20 + 7.5
    assert weights_per_rank(100.0, 2, 2) == 25.0
    assert weights_per_rank(100.0, 2, 1, 60.0, 4) == 27.5
    # Llama-3.1-8B at 1,000 tokens in bf16: 32 layers × 8 K/V heads × 128 × 2 (K and V) × 2 bytes × 1,000 =
    # 131,072,000 bytes; tensor 4 keeps 2 of the 8 heads (a quarter), tensor 16 one (replicated: an eighth); no state
    m = load_model("llama-3.1-8b")
    assert cache_parts_per_rank(m, 1000, 2, 2, 4) == (32_768_000, 0)
    assert cache_per_rank(m, 1000, 2, 2, 16) == 16_384_000
