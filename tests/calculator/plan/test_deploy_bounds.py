"""The deployment search under a node budget is bounded by what can change the answer, and answers as the full
sweep over every replica count did.

The reference here is the old search itself: every replica count from the fewest to what the budget allows,
each timed. On workloads small enough to sweep, the bounded search must pick the same deployment with the same
runners-up; on a billion nodes and a million sequences it must time a bounded number of candidates.
"""
from __future__ import annotations

import pytest

from part1_capacity.calculator.plan import deploy
from part1_capacity.calculator.plan.resolve import resolve
from part1_capacity.calculator.plan.deploy import MAX_EXPERT_GROUP, KEEP_PER_SHAPE, candidates, choose, shapes
from part1_capacity.calculator.hardware.accelerators import load_accelerator
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.plan.plan import Workload


def every_count(d, top, B, sh, keep=None):
    """The old sweep: every replica count the budget allows (powers of two for expert groups)."""
    return [dd for dd in range(d, top + 1)
            if not sh.expert_parallel or (dd & (dd - 1) == 0 and sh.tensor * dd <= MAX_EXPERT_GROUP)]


CASES = [
    ("llama-3.1-70b", "h100", 32768, 17, 2),
    ("llama-3.1-70b", "h100", 32768, 150, 4),
    ("llama-3.1-8b", "l4", 8192, 61, 3),
    ("qwen3-8b", "h200", 131072, 97, 6),
    ("deepseek-v3", "h200", 131072, 64, 8),
    ("gpt-oss-120b", "h100", 131072, 33, 5),
    ("nemotron-3-nano-30b-a3b", "a100", 262144, 45, 2),
]


@pytest.mark.parametrize("model, acc, context, batch, nodes", CASES)
def test_the_bounded_search_picks_what_the_full_sweep_picked(monkeypatch, model, acc, context, batch, nodes):
    m, a = load_model(model), load_accelerator(acc)
    r = resolve(m, a, Workload(context=context, batch=batch, nodes=nodes))
    fast = choose(r)
    monkeypatch.setattr(deploy, "replica_counts", every_count)
    slow = choose(r)
    assert (fast is None) == (slow is None)
    if fast is None:
        return
    key = lambda dep: (dep.tensor, dep.pipeline, dep.data, dep.expert, dep.accelerators)
    assert key(fast) == key(slow)
    assert fast.decode.time_s == slow.decode.time_s
    assert fast.reason == slow.reason          # "of N deployments that fit": every fitting count, timed or not


def test_a_huge_budget_and_batch_time_a_bounded_number_of_candidates():
    m, a = load_model("llama-3.1-70b"), load_accelerator("h100")
    r = resolve(m, a, Workload(context=32768, batch=1_000_000, nodes=1_000_000_000))
    n_shapes = len(shapes(r))
    cands = candidates(r, max_nodes=r.workload.nodes)
    assert 0 < len(cands) <= n_shapes * (KEEP_PER_SHAPE + 1)
    assert choose(r).nodes <= r.workload.nodes


@pytest.mark.parametrize("d, top, B", [(1, 10, 10), (3, 1000, 999), (7, 7, 50), (2, 5000, 123457), (1, 1, 1)])
def test_replica_counts_hold_the_smallest_count_of_each_smallest_m(d, top, B):
    sh = deploy.Shape(2, 1)
    got = deploy.replica_counts(d, top, B, sh)
    full = every_count(d, top, B, sh)
    by_m = {}
    for dd in full:                       # the smallest count for each m = ⌈B/dd⌉
        by_m.setdefault(-(-B // dd), dd)
    want = sorted({d} | {by_m[m] for m in sorted(by_m)[:KEEP_PER_SHAPE]})
    assert got == want
