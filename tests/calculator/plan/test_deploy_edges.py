"""The deployment search (part1_capacity/calculator/plan/deploy.py) on cases worked by hand: a batch that does not divide
by the replicas, and a decode step split into pipeline stages (the all-reduces of a stage's layers only)."""
from types import SimpleNamespace as NS

import pytest

from part1_capacity.calculator.plan import deploy
from part1_capacity.calculator.hardware.accelerators import load_accelerator
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.plan.plan import Workload
from part1_capacity.calculator.plan.resolve import resolve

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


# --- the search's rules on a stand-in, every figure by hand ---------------------------------------------------------
# A stand-in workload: usable U bytes per rank, weights W (We of them experts), one sequence's cache S × T / 8 on one
# of t tensor ranks (S / t at T = 8), B sequences; 2 layers, 4 heads, 2 K/V heads: tensor 1 or 2 (max_tp 2).
import math

import numpy as np

from part1_capacity.calculator.sizing import roofline
from part1_capacity.calculator.plan import speed
from part1_capacity.calculator.plan.deploy import Shape
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.plan.plan import make_plan


def stand_in(U=10.0, W=8.0, We=0.0, S=4.0, B=12, moe=False, engines=("vllm",), pp=None):
    model = NS(id="m", n_layers=2, n_heads=4, n_kv_heads=2, is_moe=moe)
    acc = NS(name="X", max_tp=2, node_size=2, engines=engines)
    wl = NS(tensor_parallel=None, pipeline_parallel=pp, nodes=None)
    return NS(model=model, accelerator=acc, workload=wl, usable_bytes=U, weights_bytes=W, expert_bytes=We,
              cache_per_rank=lambda T, t: S * T / (8 * t), context=8, batch=B)


def test_the_shapes_the_rules_allow():
    # tensor 1 without stages (tensor parallelism can still grow); tensor 2, the most, with 1 or 2 stages
    assert deploy.shapes(stand_in()) == [Shape(1, 1), Shape(2, 1), Shape(2, 2)]
    assert deploy.shapes(stand_in(moe=True)) == [Shape(1, 1), Shape(1, 1, True), Shape(2, 1), Shape(2, 2),
                                                 Shape(2, 1, True)]
    # stages pinned: every degree takes them; as many stages as layers is allowed; experts only without stages
    assert deploy.shapes(stand_in(moe=True, pp=2)) == [Shape(1, 2), Shape(2, 2)]
    with pytest.raises(InputError) as e:
        deploy.shapes(stand_in(pp=3))
    assert str(e.value) == "pipeline_parallel: 3 exceeds m's 2 layers; allowed: 1..2"
    assert not deploy.expert_parallel_possible(stand_in(moe=True, engines=("llama.cpp",)).model, NS(engines=("llama.cpp",)))
    assert not deploy.expert_parallel_possible(stand_in().model, NS(engines=("vllm",)))
    assert deploy.expert_parallel_possible(stand_in(moe=True).model, NS(engines=("vllm", "llama.cpp")))


def test_replicas_needed_without_experts():
    r = stand_in()          # U 10, W 8, S 4, B 12
    # tensor 1: room 10 − 8 = 2 < one sequence (4): nothing; tensor 2: room 10 − 4 = 6, 2 per sequence → 3 a replica,
    # 12 / 3 = 4 replicas; 2 stages: room 10 − 2 = 8, a stage holds half a sequence (1) → 8 → ⌈12 / 8⌉ = 2
    assert [deploy.replicas_needed(r, 8, 12, sh) for sh in deploy.shapes(r)] == [math.inf, 4, 2]
    # without the cache: one replica whenever the weights leave any room
    assert deploy.replicas_needed(r, 8, 12, Shape(1, 1), with_cache=False) == 1
    assert deploy.replicas_needed(stand_in(W=10.0), 8, 12, Shape(1, 1), with_cache=False) == math.inf   # room 0
    assert deploy.replicas_needed(stand_in(W=9.5), 8, 12, Shape(1, 1), with_cache=False) == 1          # room 0.5
    assert deploy.replicas_needed(stand_in(W=8.5), 8, 12, Shape(1, 1), with_cache=False) == 1          # room 1.5
    # exactly one sequence a replica (room 6, a sequence 4 at tensor 2): 12 replicas
    assert deploy.replicas_needed(stand_in(S=8.0), 8, 12, Shape(2, 1)) == 12
    # a sequence below one byte (0.5): room 6 → 12 a replica → 24 / 12 = 2; room 0.25 < 0.5 → nothing
    assert deploy.replicas_needed(stand_in(S=1.0), 8, 24, Shape(2, 1)) == 2
    assert deploy.replicas_needed(stand_in(S=1.0, W=19.5), 8, 24, Shape(2, 1)) == math.inf


def test_replicas_needed_over_the_sweeps_arrays():
    r = stand_in()
    # T 8 and 16: a sequence 2 and 4 at tensor 2 → 3 and 1 a replica → 4 and 12 replicas
    assert deploy.replicas_needed(r, np.array([8, 16]), 12, Shape(2, 1)).tolist() == [4.0, 12.0]
    assert deploy.replicas_needed(r, 8, np.array([12, 3]), Shape(2, 1)).tolist() == [4.0, 1.0]


def test_replicas_needed_with_experts_spread():
    r = stand_in(moe=True, We=6.0)      # dense part 2, experts 6
    # tensor 1: 2 + 6/d + ⌈12/d⌉ × 4 ≤ 10 first at d = 16 (2 + 0.375 + 4 = 6.375; d = 8 gives 10.75)
    assert deploy.replicas_needed(r, 8, 12, Shape(1, 1, True)) == 16
    # tensor 2: 1 + 3/d + ⌈12/d⌉ × 2 ≤ 10 first at d = 4 (1 + 0.75 + 6 = 7.75; d = 2 gives 14.5)
    assert deploy.replicas_needed(r, 8, 12, Shape(2, 1, True)) == 4
    # one sequence, no cache: 2 + 6 fits on one rank
    assert deploy.replicas_needed(r, 8, 1, Shape(1, 1, True), with_cache=False) == 1
    # exactly full: 2 + 8/2 + 1 × 1 = 7 of 7 at d = 2
    assert deploy.replicas_needed(stand_in(moe=True, U=7.0, W=10.0, We=8.0, S=1.0), 8, 2, Shape(1, 1, True)) == 2
    # the largest group, 256 ranks: 2,000 of experts need 200 ways → 256 (tensor 1) or 128 (× tensor 2)
    big = stand_in(moe=True, W=2000.0, We=2000.0)
    assert deploy.replicas_needed(big, 8, 1, Shape(1, 1, True), with_cache=False) == 256
    assert deploy.replicas_needed(big, 8, 1, Shape(2, 1, True), with_cache=False) == 128
    # the dense part alone overflows a rank: no group size helps
    assert deploy.replicas_needed(stand_in(moe=True, U=1.0, We=6.0), 8, 1, Shape(1, 1, True)) == math.inf


def test_fewest_accelerators_over_the_shapes():
    r = stand_in()
    # B 3: tensor 2 × 1 replica = 2 accelerators (tensor 2 × 2 stages: 4); without the cache one accelerator
    assert deploy.fewest_accelerators(r, 8, 3) == 2
    assert deploy.fewest_accelerators(r, 8, 3, with_cache=False) == 1
    # T 8 and 16 (tensor 2: 1 and 3 replicas → 2 and 6; 2 stages: 4 and 4); B 3 and 12 (2 and 8; 4 and 8)
    assert deploy.fewest_accelerators(r, np.array([8, 16]), 3).tolist() == [2.0, 4.0]
    assert deploy.fewest_accelerators(r, 8, np.array([3, 12])).tolist() == [2.0, 8.0]


def test_a_deployments_shares_per_rank():
    r = stand_in(W=100.0, We=80.0)
    r.accelerator.node_size = 8
    # tensor 2 × 4 stages × 3 replicas of 10 sequences: 4 a replica; weights 100 / 8; a stage's cache 4 × 2 / 4
    d = deploy._deployment(r, 8, 10, Shape(2, 4), 3, True)
    assert (d.tensor, d.pipeline, d.data, d.expert, d.nodes, d.accelerators, d.sequences_per_replica,
            d.weights_per_rank, d.cache_per_rank) == (2, 4, 3, 1, 3, 24, 4, 12.5, 2.0)
    # experts over tensor 2 × 4: dense 20 / 2 + experts 80 / 8 = 20; 3 sequences × 2
    d = deploy._deployment(r, 8, 10, Shape(2, 1, True), 4, True)
    assert (d.expert, d.nodes, d.accelerators, d.weights_per_rank, d.cache_per_rank) == (8, 1, 8, 20.0, 6.0)
    assert deploy._deployment(r, 8, 10, Shape(2, 4), 3, False).cache_per_rank == 0


def test_candidates_and_how_many_fit_a_node_budget():
    r = stand_in(moe=True, We=6.0)      # nodes of 2
    key = lambda d: (d.tensor, d.pipeline, d.data, d.expert)
    # without a budget, each shape's fewest replicas (tensor 1 alone holds nothing)
    assert [key(d) for d in deploy.candidates(r)] == [(1, 1, 16, 16), (2, 1, 4, 1), (2, 2, 2, 1), (2, 1, 4, 8)]
    assert deploy.candidates(r)[1].cache_per_rank == 3 * 2.0          # 3 sequences of 2 on a rank of tensor 2
    # 7 nodes = 14 accelerators: tensor 2 up to 7 replicas (4 and 6 give 3 and 2 sequences each); 2 stages up to 3
    # (2, 3); experts over tensor 2 up to 7 (4; 8 is too many). Fitting: 7 − 4 + 1 = 4 counts, 3 − 2 + 1 = 2, one
    # expert group; 16 replicas of tensor 1 exceed 14
    counted = []
    cands = deploy.candidates(r, max_nodes=7, counted=counted)
    assert [key(d) for d in cands] == [(1, 1, 16, 16), (2, 1, 4, 1), (2, 1, 6, 1), (2, 2, 2, 1), (2, 2, 3, 1),
                                       (2, 1, 4, 8)]
    assert counted == [0, 4, 2, 1]
    counted = []
    deploy.candidates(r, max_nodes=8, counted=counted)                # 16: 1 group of 16, 8 − 4 + 1, 4 − 2 + 1, 4 and 8
    assert counted == [1, 5, 3, 2]
    counted = []
    deploy.candidates(r, max_nodes=1, counted=counted)                # 2 accelerators: none of them fits
    assert counted == [0, 0, 0, 0]


def test_replica_counts_of_expert_groups():
    # powers of two from the fewest, at most the budget and 256 ranks in a group
    assert deploy.replica_counts(1, 4, 5, Shape(1, 1, True)) == [1, 2, 4]
    assert deploy.replica_counts(1, 1000, 5, Shape(2, 1, True)) == [1, 2, 4, 8, 16, 32, 64, 128]


def test_a_deployments_words():
    d = deploy.Deployment(2, 1, 4, 8, 1, 8, 3, 20.0, 6.0, reason="r")
    assert d.label() == "tensor 2 × pipeline 1 × data 4, experts over 8"
    assert d.parallelism() == {"tensor": 2, "pipeline": 1, "data": 4, "expert": 8, "nodes": 1, "reason": "r",
                               "sequences_per_replica": 3}
    d.expert = 2
    assert d.label() == "tensor 2 × pipeline 1 × data 4, experts over 2"
    d.expert = 1
    assert d.label() == "tensor 2 × pipeline 1 × data 4"


def test_whole_numbers_on_python_floats_as_numpy_gives_them():
    ceil, floor = deploy._whole(math.ceil), deploy._whole(math.floor)
    assert ceil(2.1) == 3.0 and isinstance(ceil(2.1), float) and floor(2.9) == 2.0
    assert floor(math.inf) == math.inf and math.isnan(ceil(math.nan))


def test_all_reduce_times():
    fast, none = NS(interconnect=900e9), NS(interconnect=0.0)
    assert deploy.allreduce_seconds(fast, 1, 1e6, False) == 0.0
    assert deploy.allreduce_seconds(none, 2, 1e3, False) == math.inf          # no link between the ranks
    # 4 ranks, 1 MB: 2 × 3/4 × 1e6 B over 450 GB/s one way, + 8 µs (one node) or 30 µs (across nodes)
    assert deploy.allreduce_seconds(fast, 4, 1e6, False) == pytest.approx(8e-6 + 1.5e6 / 450e9, rel=1e-12)
    assert deploy.allreduce_seconds(fast, 4, 1e6, True) == pytest.approx(30e-6 + 1.5e6 / 450e9, rel=1e-12)


def _timed(max_tp=4):
    acc = NS(interconnect=900e9, max_tp=max_tp, peak_flops=lambda dtype: 1e15, bandwidth=1e12)
    return NS(model=NS(hidden_size=1000, n_layers=4), accelerator=acc, workload=NS(weights_dtype="bf16"))


def test_a_stage_is_the_slower_of_its_arithmetic_and_its_memory():
    r = _timed()
    dep = NS(tensor=2, pipeline=2, expert=1)
    # 8 sequences on 2 stages: 2 micro-batches. Memory: 8e9 / 4 of weights + 4e9 / (2 × 2) of cache = 3e9 B at
    # 1e12 B/s = 3 ms; arithmetic 4e12 / 8 = 5e11 FLOP at 1e15 = 0.5 ms. All-reduce of 4 tokens × 1,000 × 2 B
    # over 2 ranks: 8 µs + 8,000 / 450e9; 2 a layer × 2 layers a stage × 2 stages
    ar = 8e-6 + 8000 / 450e9
    st = deploy.rank_step_time(r, 8, 8, 4e12, 8e9, 4e9, dep)
    assert (st.rank_s, st.microbatches, st.bubble_fraction) == (pytest.approx(6e-3, rel=1e-12), 2, 0.0)
    assert st.communication_s == pytest.approx(8 * ar, rel=1e-12)
    # 40e12 FLOP: 5e12 a rank and micro-batch = 5 ms, more than the memory's 3 ms
    assert deploy.rank_step_time(r, 8, 8, 40e12, 8e9, 4e9, dep).rank_s == pytest.approx(10e-3, rel=1e-12)
    # tensor ranks beyond the scale-up domain pay the across-nodes latency: 2 tokens, 4,000 B, 2 × 4 layers
    st = deploy.rank_step_time(_timed(max_tp=1), 2, 2, 0.0, 0.0, 0.0, NS(tensor=2, pipeline=1, expert=1))
    assert st.communication_s == pytest.approx(8 * (30e-6 + 4000 / 450e9), rel=1e-12)


def test_expert_groups_add_their_exchange_to_the_tensor_all_reduces():
    r = _timed()          # scale-up domain of 4
    tensor = 8e-6 + 16000 / 450e9              # 8 tokens × 1,000 × 2 B over 2 ranks
    # experts over 4 ranks (inside the domain): 2 × 3/4 × 16,000 B; two of each a layer, 4 layers
    st = deploy.rank_step_time(r, 8, 8, 0.0, 0.0, 0.0, NS(tensor=2, pipeline=1, expert=4))
    assert st.communication_s == pytest.approx(4 * (2 * tensor + 2 * (8e-6 + 1.5 * 16000 / 450e9)), rel=1e-12)
    # over 8 ranks (across domains): 30 µs
    st = deploy.rank_step_time(r, 8, 8, 0.0, 0.0, 0.0, NS(tensor=2, pipeline=1, expert=8))
    assert st.communication_s == pytest.approx(4 * (2 * tensor + 2 * (30e-6 + 1.75 * 16000 / 450e9)), rel=1e-12)
    # two expert ranks without tensor parallelism: only the exchange, 2 × 1/2 × 16,000 B
    st = deploy.rank_step_time(r, 8, 8, 0.0, 0.0, 0.0, NS(tensor=1, pipeline=1, expert=2))
    assert st.communication_s == pytest.approx(4 * 2 * (8e-6 + 16000 / 450e9), rel=1e-12)


def test_a_decode_pass_reads_the_experts_its_ranks_hold():
    m = load_model("gpt-oss-20b")
    r = resolve(m, load_accelerator("h100"), Workload(context=4096, batch=4))
    W, We = r.weights_bytes, r.expert_bytes
    wrf = roofline.weights_read_fraction
    ps = deploy.decode_pass(r, NS(tensor=1, expert=1, sequences_per_replica=3))
    assert (ps.phase, ps.tokens, ps.seqs) == ("decode", 3, 3)
    assert ps.weight_bytes == W * wrf(m, 3) and ps.weight_bytes < W        # 3 tokens touch part of the experts
    assert ps.flops == roofline.decode_flops(m, 4096, 3)
    assert ps.attention_flops == roofline.decode_attention_flops(m, 4096, 3)
    # experts over 2 ranks: each reads the dense part and its half of the experts, hit by the group's 6 tokens
    ps = deploy.decode_pass(r, NS(tensor=1, expert=2, sequences_per_replica=3))
    assert ps.weight_bytes == (W - We) + We / 2 * wrf(m, 6)
    # experts over tensor 2 × 4 replicas: a quarter of them, 12 tokens
    ps = deploy.decode_pass(r, NS(tensor=2, expert=8, sequences_per_replica=3))
    assert ps.weight_bytes == (W - We) + We / 4 * wrf(m, 12)


def test_a_decode_pass_reads_each_sequences_cache():
    # Llama-3.1-8B, 4,096 tokens: 32 layers × 8 K/V heads × 128 × 2 × 2 B = 128 KiB a token → 512 MiB a sequence,
    # half of it on each of 2 tensor ranks; 3 sequences
    r = resolve(load_model("llama-3.1-8b"), load_accelerator("h100"), Workload(context=4096, batch=3))
    ps = deploy.decode_pass(r, NS(tensor=2, expert=1, sequences_per_replica=3))
    assert (ps.cache_bytes, ps.cache_bytes_per_rank) == (3 * 512 * 2 ** 20, 3 * 256 * 2 ** 20)


def test_one_accelerator_with_measured_kernels_times_the_pass_with_them(tmp_path):
    import json

    ps = 1e-12
    kernels = {"threads": 2, "op_overhead_s": 1e-6, "source": "test",
               "types": {"f16": {"decode_s_per_weight": 200 * ps, "prefill_s_per_weight_token": 50 * ps},
                         "q8_0": {"decode_s_per_weight": 100 * ps, "prefill_s_per_weight_token": 40 * ps}}}
    path = tmp_path / "host.json"
    path.write_text(json.dumps({"id": "test-host", "kind": "host", "memory_gb": 24, "bandwidth_gb_s": 20,
                                "bf16_tflops": 0.1, "kernels": kernels}))
    from part1_capacity.calculator.model.profiles import profile_from_dict
    model = profile_from_dict({"id": "m", "n_layers": 10, "n_heads": 8, "n_kv_heads": 8, "head_dim": 64,
                               "hidden_size": 512, "params_total": 1e9, "max_context": 4096})
    p = make_plan(model, load_accelerator(str(path)), Workload(context=100, weights_dtype="q8_0", kv_dtype="fp16"))
    # decode (tests/calculator/plan/test_speed.py works it): 1e9 × 100 ps + attention 51.2 µs + the f16 cache 204.8 µs + 10 × 19 µs;
    # one accelerator: no communication, one micro-batch
    t = 0.1 + 51.2e-6 + 204.8e-6 + 190e-6
    sp = p.decode_split
    assert (sp.time_s, sp.rank_s, sp.communication_s, sp.microbatches, sp.bubble_fraction) == (
        pytest.approx(t), pytest.approx(t), 0.0, 1, 0.0)
    assert p.decode.time_s == pytest.approx(t)


def test_the_reason_for_the_only_deployment():
    h100 = load_accelerator("h100")
    one = deploy.choose(resolve(load_model("llama-3.1-8b"), h100, Workload(context=4096, batch=1)))
    assert one.reason == "fewest nodes (1 node of 8) and fewest accelerators in them (1): the only such deployment"
    assert one.alternatives == []
    two = deploy.choose(resolve(load_model("llama-3.1-405b"), h100, Workload(context=8192, batch=1)))
    assert two.reason == "fewest nodes (2 nodes of 8) and fewest accelerators in them (16): the only such deployment"


def _reason_of_several(dep, nodes, node_size, accelerators, n):
    alt = dep.alternatives[0]
    return (f"fewest nodes ({nodes} node{'s' if nodes > 1 else ''} of {node_size}), fewest accelerators in them "
            f"({accelerators}); of {n} such deployments {dep.label()} decodes fastest ({dep.decode.time_s * 1e3:,.1f} "
            f"ms per step, next {alt.label()}: {alt.decode.time_s * 1e3:,.1f} ms)")


def test_the_reason_among_several_and_the_runners_up():
    # Llama-3.1-70B, 16 × 32K on H100 (tests/calculator/plan/test_deploy.py): tensor 8 or tensor 4 × 2 replicas, 8 each; tensor 8
    # reads less per rank
    dep = deploy.choose(resolve(load_model("llama-3.1-70b"), load_accelerator("h100"),
                                Workload(context=32768, batch=16)))
    assert dep.label() == "tensor 8 × pipeline 1 × data 1"
    assert [a.label() for a in dep.alternatives] == ["tensor 4 × pipeline 1 × data 2"]
    assert dep.reason == _reason_of_several(dep, 1, 8, 8, 2)
    # gpt-oss-20b, 24 × 128K on L4 (19.45 GB usable: 24e9 × 0.9 − 2 GiB). Weights 13.76 GB (10.16 GB of experts,
    # 3.60 GB dense), a sequence 3.22 GB. On 8 L4 every rank holds 24 × 3.22 / 8 = 9.67 GB of cache, whatever the
    # split, beside 13.76 / t of weights at tensor t = 2, 4, 8 (8 / t replicas), or with the experts spread over the 8:
    # 3.60 / t + 1.27 GB (t = 1, 2, 4, 8): all fit, 7 deployments. Fewer L4 do not: tensor 4 alone 3.44 + 24 × 0.81,
    # tensor 2 × 2 replicas 6.88 + 12 × 1.61, experts over 4 ranks 3.60 + 2.54 + 6 × 3.22 GB — all above 19.45
    dep = deploy.choose(resolve(load_model("gpt-oss-20b"), load_accelerator("l4"),
                                Workload(context=131072, batch=24)))
    assert dep.reason == _reason_of_several(dep, 1, 8, 8, 7)
    assert len(dep.alternatives) == 3
    times = [dep.decode.time_s] + [a.decode.time_s for a in dep.alternatives]
    assert times == sorted(times)


def test_the_reason_under_a_node_budget():
    r = resolve(load_model("llama-3.1-8b"), load_accelerator("h100"), Workload(context=4096, batch=1, nodes=1))
    # one node: tensor 1, 2, 4, 8 (a second stage needs a second node). Memory-bound: a rank reads 16.06 GB / t at
    # 3.35 TB/s (4.8 ms / t) plus, when t > 1, 64 all-reduces of about 8 µs (0.5 ms): tensor 8 is fastest
    dep = deploy.choose(r)
    assert dep.reason == ("nodes pinned to 1: of 4 deployments that fit on at most 1 node, tensor 8 × pipeline 1 × "
                          "data 1 has the best decode step")
    assert [a.label() for a in dep.alternatives] == [f"tensor {t} × pipeline 1 × data 1" for t in (4, 2, 1)]
    # two nodes: tensor 8 × 2 stages as well: 5 deployments, the best 3 of the other 4 shown
    dep = deploy.choose(r.with_workload(nodes=2))
    assert dep.reason == (f"nodes pinned to 2: of 5 deployments that fit on at most 2 nodes, {dep.label()} has the "
                          "best decode step")
    assert len(dep.alternatives) == 3 and all(a.decode.time_s >= dep.decode.time_s for a in dep.alternatives)
