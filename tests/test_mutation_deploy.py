"""The deployment search (part1_capacity/calculator/deploy.py) on cases worked by hand: a batch that does not divide
by the replicas, and a decode step split into pipeline stages (the all-reduces of a stage's layers only)."""
from types import SimpleNamespace as NS

import pytest

from part1_capacity.calculator import deploy
from part1_capacity.calculator.hardware import load_accelerator
from part1_capacity.calculator.loader import load_model
from part1_capacity.calculator.plan import Workload
from part1_capacity.calculator.resolve import resolve

GIB = 2 ** 30


def test_a_replica_holds_the_rounded_up_share_of_an_odd_batch():
    # Llama-3.1-70B on H100, 32K context, batch 17, tensor 4 × data 2: ⌈17 / 2⌉ = 9 sequences in one replica (not 8).
    m, acc = load_model("llama-3.1-70b"), load_accelerator("h100")
    r = resolve(m, acc, Workload(context=32768, batch=17))
    dep = deploy._deployment(r, 32768, 17, deploy.Shape(4, 1), 2, True)
    assert dep.sequences_per_replica == 9 and dep.accelerators == 8 and dep.nodes == 1
    # Weights per rank: 70.55e9 parameters × 2 B (bf16) / 4 ranks = 35.275e9 B.
    assert dep.weights_per_rank == pytest.approx(70.55e9 * 2 / 4, rel=1e-12)
    # Cache per rank: 80 layers × max(1, 8 // 4) = 2 K/V heads × 2 (K, V) × 128 × 2 B = 81,920 B per token;
    # × 32,768 tokens = 2.5 GiB per sequence; × 9 sequences = 22.5 GiB.
    assert dep.cache_per_rank == 9 * 2.5 * GIB


def test_pipeline_stages_each_run_only_their_layers_all_reduces():
    m, acc = load_model("llama-3.1-70b"), load_accelerator("h100")
    r = resolve(m, acc, Workload(context=4096, batch=8))
    assert acc.interconnect == 900e9 and acc.max_tp == 8           # H100 SXM datasheet: NVLink 4, 900 GB/s
    dep = NS(tensor=2, pipeline=4, expert=1)
    st = deploy.rank_step_time(r, 8, 8, 1e12, 1e9, 1e9, dep)
    # 8 sequences on 4 stages: 4 micro-batches of 2 tokens; one all-reduce moves 2 × 8,192 (hidden) × 2 B
    # = 32,768 B over 2 ranks: 8 µs + 2·(2−1)/2 × 32,768 B / 450e9 B/s (one direction) = 8.0728178 µs.
    ar = 8e-6 + 32768 / 450e9
    # two per layer; a stage holds 80 / 4 = 20 layers; 4 stages in turn: 4 × 20 × 2 × ar = 160 × ar = 1.2917 ms
    # (not 4 × 80 × 2 × ar: each stage reduces only its own layers).
    assert st.communication_s == pytest.approx(160 * ar, rel=1e-12)
    assert st.time_s == pytest.approx(st.rank_s + st.communication_s, rel=1e-12)
    assert (st.microbatches, st.bubble_fraction) == (4, 0.0)
    # 2 sequences on 4 stages: 2 micro-batches of 1 token (16,384 B per all-reduce), half the step a stage waits.
    st2 = deploy.rank_step_time(r, 2, 2, 1e12, 1e9, 1e9, dep)
    assert (st2.microbatches, st2.bubble_fraction) == (2, 0.5)
    assert st2.communication_s == pytest.approx(160 * (8e-6 + 16384 / 450e9), rel=1e-12)
