"""The tensor-parallel split rules (part1_capacity/calculator/sizing/sharding.py) on small hand-worked shapes, one rule per
test, so each rule's mutant (tests/mutation/REPORT.md) fails here. The rules are vLLM's: see the module docstring."""
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
