"""Deployments an operator would run: pinned parallelism, nodes, and the search's choice (hand-worked)."""
import pytest

from tests.support.in_process import run
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.plan import deploy
from part1_capacity.calculator.plan.plan import Workload, make_plan

GIB = 2 ** 30


def test_pinned_tensor_parallel_llama70b_h100():
    # By hand: an H100 holds 79.19 GiB as its runtime reports it (data/accelerators.json), so it offers
    # 79.19 GiB × 0.9 − 2 GiB = 74.38 GB. Llama-3.1-70B bf16 = 141.1 GB → 35.28 GB per rank at tensor 4, leaving
    # 39.10 GB. One 32K sequence: 32,768 × 80 layers × 8 K/V heads × 128 × 2 (K, V) × 2 B = 10 GiB, a quarter per
    # rank = 2.68 GB → 14 sequences per group of 4, so 16 sequences need 2 groups.
    usable = 79.19 * GIB * 0.9 - 2 * GIB
    per_seq_rank = 32768 * 80 * 8 * 128 * 2 * 2 / 4
    per_group = int((usable - 70.55e9 * 2 / 4) // per_seq_rank)
    assert per_group == 14
    plan = make_plan("llama-3.1-70b", "h100", Workload(context=32768, batch=16, tensor_parallel=4))
    assert plan.parallelism["tensor"] == 4 and plan.parallelism["data"] == 2
    assert plan.accelerators_needed == 8


@pytest.mark.parametrize("tp, fragment", [(3, "allowed: 1, 2, 4, 8"), (16, "exceeds"), (0, "positive")])
def test_bad_tensor_parallel_is_one_line_exit_2(capsys, tp, fragment):
    code, _, err = run(capsys, "plan", "--model", "llama-3.1-70b", "--accelerator", "h100", "--context", "4096",
                       "--tensor-parallel", str(tp))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert fragment in err


def test_tensor_parallel_in_the_workload_is_validated():
    with pytest.raises(InputError, match="tensor_parallel"):
        make_plan("llama-3.1-8b", "h100", Workload(context=1024, tensor_parallel=True))


# --- hand-worked deployments -------------------------------------------------------------------------------------
# what each device's runtime reports (data/accelerators.json: 79.19 and 139.80 GiB), × 0.9 − 2 GiB
H100_USABLE = 79.19 * GIB * 0.9 - 2 * GIB       # 74.38 GB per H100
H200_USABLE = 139.80 * GIB * 0.9 - 2 * GIB      # 132.95 GB per H200


def test_llama70b_h100_32k_x16_is_tensor_8_in_one_node():
    # Weights 141.1 GB; one 32K sequence 10 GiB of K/V (8 K/V heads: a half per rank at TP 2, a quarter at 4, an
    # eighth at 8). TP 2: 70.55 GB of weights per rank < 74.38 holds the weights alone, but leaves 3.83 GB: not one
    # sequence's 5.37 GB. TP 4: 14 sequences per group (test above) → 2 groups = 8. TP 8: 17.6 GB weights +
    # 16 × 1.34 GB = 39.1 GB per rank: one group = 8. Pipeline stages inside the node are not used while tensor
    # parallelism can grow. Both use 8 H100s of one node; decode (memory-bound) reads per rank 17.6 + 21.5 = 39.1 GB
    # at TP 8 against 35.3 + 8 × 2.68 = 56.8 GB at TP 4: TP 8 is faster.
    assert 70.55e9 < H100_USABLE < 70.55e9 + 32768 * 80 * 8 * 128 * 2 * 2 / 2
    plan = make_plan("llama-3.1-70b", "h100", Workload(context=32768, batch=16))
    par = plan.parallelism
    assert (par["tensor"], par["pipeline"], par["data"], par["nodes"]) == (8, 1, 1, 1)
    assert plan.accelerators_needed == 8 and plan.accelerators_without_kv == 2    # weights alone: TP 2
    assert "fewest nodes" in par["reason"] and "decodes fastest" in par["reason"]
    assert par["expert"] == 1


def test_llama405b_h100_pipeline_goes_across_nodes():
    # 405.85e9 × 2 B = 811.7 GB; one node of 8 H100 holds 8 × 69.85 = 558.8 GB: no. Tensor 8 (the most the node
    # allows) × 2 pipeline stages = 16 H100 on 2 nodes: 811.7 / 16 = 50.7 GB per rank.
    assert 405.85e9 * 2 > 8 * H100_USABLE and 405.85e9 * 2 / 16 < H100_USABLE
    plan = make_plan("llama-3.1-405b", "h100", Workload(context=8192, batch=1))
    par = plan.parallelism
    assert (par["tensor"], par["pipeline"], par["data"], par["nodes"]) == (8, 2, 1, 2)
    # one sequence, two stages: one micro-batch, so each stage waits half the step
    assert plan.decode_split.microbatches == 1 and plan.decode_split.bubble_fraction == pytest.approx(0.5)


def test_deepseek_v3_h200_128k_x32_uses_expert_parallelism():
    # fp8 weights 671 GB: experts ≈ 671 × (1 − 37/671) = 634 GB, the rest ≤ 37 GB. The MLA latent of one 128K
    # sequence: 61 layers × 576 × 2 B × 131,072 = 9.21 GB, whole on every tensor rank.
    # Tensor 8 alone: 83.9 GB weights + 9.21 GB per sequence → 4 sequences per 8 ranks → 64 H200; 4 pipeline
    # stages: 21 GB + 32 × 2.3 GB fits → 32. Expert parallelism, tensor 1: 8 ranks give 37 + 79.3 + 4 × 9.21 =
    # 153 GB > 124.75; 16 give 37 + 39.6 + 2 × 9.21 = 95 GB: fits → 16 H200 on 2 nodes.
    latent = 61 * 576 * 2 * 131072
    assert 37e9 + 634e9 / 8 + 4 * latent > H200_USABLE > 37e9 + 634e9 / 16 + 2 * latent
    plan = make_plan("deepseek-v3", "h200", Workload(context=131072, batch=32))
    par = plan.parallelism
    assert plan.accelerators_needed == 16 and par["nodes"] == 2
    assert par["expert"] == 16 and par["tensor"] * par["data"] == 16 and par["pipeline"] == 1


def test_gpt_oss_120b_h100_128k_x16_two_in_one_node():
    # Weights (model card groups): experts 114.71e9 × 4.25 bits + 2.12e9 bf16 = 60.94 + 4.24 = 65.18 GB (< 74.38:
    # one H100 holds the weights alone). A 128K sequence: 18 full layers × 8 K/V heads × 64 × 2 × 2 B × 131,072 =
    # 4.83 GB (+ the 128-token windows). One H100 leaves 9.2 GB: one sequence, so 16 replicas. Tensor 2: 32.6 GB
    # weights + 2.42 GB per sequence → 17 per pair ≥ 16 → 2.
    W = 114.71e9 * 4.25 / 8 + 2.12e9 * 2
    seq = 18 * 8 * 64 * 2 * 2 * 131072
    assert W + seq < H100_USABLE < W + 2 * seq and W / 2 + 16 * seq / 2 < H100_USABLE
    plan = make_plan("gpt-oss-120b", "h100", Workload(context=131072, batch=16))
    assert plan.accelerators_without_kv == 1
    assert plan.accelerators_needed == 2 and plan.parallelism["nodes"] == 1


def test_qwen25_7b_tpu_v5e_heads_limit_the_tensor_degree():
    # 28 query heads: tensor 8 does not divide them, so 1, 2 or 4. Weights 15.24 GB; a v5e offers
    # 16 GiB × 0.9 − 2 GiB = 13.31 GB. Tensor 2: 7.62 GB + 0.94 GB per 32K sequence → 4 per pair → 2 pairs = 4;
    # tensor 4: 3.81 + 8 × 0.47 GB fits → 4. Same count; tensor 4 reads less per chip per step.
    plan = make_plan("qwen2.5-7b", "tpu-v5e", Workload(context=32768, batch=8))
    assert plan.accelerators_needed == 4 and plan.parallelism["tensor"] == 4 and plan.parallelism["nodes"] == 1


def test_pinned_pipeline_and_nodes():
    plan = make_plan("llama-3.1-70b", "h100", Workload(context=32768, batch=16, pipeline_parallel=2))
    assert plan.parallelism["pipeline"] == 2
    budget = make_plan("llama-3.1-70b", "h100", Workload(context=32768, batch=16, nodes=2))
    assert budget.parallelism["nodes"] <= 2 and "nodes pinned to 2" in budget.parallelism["reason"]
    assert budget.accelerators_needed == 8                    # what the workload needs, whatever the budget
    assert budget.decode.time_s <= make_plan("llama-3.1-70b", "h100", Workload(context=32768, batch=16)).decode.time_s


# --- verdicts that follow from the numbers -----------------------------------------------------------------------
def test_nothing_added_by_kv_means_nothing_to_propose(capsys):
    plan = make_plan("llama-3.1-8b", "h100", Workload(context=4096, batch=1))
    assert plan.accelerators_added_by_kv == 0
    assert plan.to_dict()["verdict"].startswith("fits; nothing to propose for memory")
    code, out, _ = run(capsys, "plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "4096")
    assert code == 0 and "nothing to propose for memory" in out and "tiered KV" not in out


def test_weights_bottleneck_with_cache_adding_accelerators_says_why():
    # DeepSeek-V3 on H200, 64 × 128K: the cache is the smaller share (0.88 × the weights), so the bottleneck is the
    # weights, yet it adds accelerators. The verdict must not say a tiered memory would not help (it removes those).
    plan = make_plan("deepseek-v3", "h200", Workload(context=131072, batch=64))
    assert plan.bottleneck == "weights" and 0 < plan.kv_to_weights_ratio < 1 and plan.accelerators_added_by_kv > 0
    d = plan.to_dict()
    n0, added = plan.accelerators_without_kv, plan.accelerators_added_by_kv
    assert "would not" not in d["verdict"] and "would not" not in d["implication"]
    assert f"the {n0:,} accelerators the weights need stay whatever is done to the cache" in d["verdict"]
    assert f"a tiered KV memory helps with those {added:,} and not with the rest" in d["verdict"]
    # with no accelerator added by the cache, the weights' implication still says a KV tier would not help
    small = make_plan("deepseek-v3", "h200", Workload(context=4096, batch=1)).to_dict()
    assert small["accelerators_added_by_kv"] == 0 and small["bottleneck"] == "weights"


def test_overflow_larger_than_the_cache_says_why(capsys):
    # DeepSeek-V3, tensor 8 pinned: the weights-only deployment is 8 H200 (83.9 GB each, 40.9 GB free). Each rank
    # holds the whole latent of all 32 sequences (294.7 GB) — 8 copies — so the overflow (8 × 253.9 GB) exceeds
    # the 294.7 GB cache; the line must say so.
    argv = ["plan", "--model", "deepseek-v3", "--accelerator", "h200", "--context", "128K", "--batch", "32",
            "--tensor-parallel", "8"]
    plan = make_plan("deepseek-v3", "h200", Workload(context=131072, batch=32, tensor_parallel=8))
    o = plan.overflow
    assert o["ranks"] == 8 and o["replication"] == pytest.approx(8)
    assert plan.overflow_bytes == pytest.approx(8 * (o["cache_per_rank"] - o["free_per_rank"]))
    assert plan.overflow_bytes > plan.kv_bytes_total
    code, out, _ = run(capsys, *argv)
    line = next(x for x in out.splitlines() if x.startswith("KV overflow"))
    assert "× 8 =" in line and "more than the" in line and "every tensor rank holds all of it" in line


def test_sweep_leaves_the_callers_workload_alone():
    from part1_capacity.calculator.uses.sweep import sweep

    wl = Workload(context=1024, batch=1, kv_dtype="fp8")
    s = sweep("llama-3.1-8b", "h100", [1024, 8192], [1, 4], wl)
    assert (wl.context, wl.batch, wl.weights_dtype) == (1024, 1, None)      # not resized nor validated in place
    assert s.workload.context == 8192 and s.workload.batch == 4
    plan_wl = Workload(context=4096)
    make_plan("llama-3.1-8b", "h100", plan_wl)
    assert plan_wl.weights_dtype is None


def test_a_node_budget_too_small_is_one_line_exit_2(capsys):
    # 811.7 GB of Llama-3.1-405B weights need more than one node of 8 H100 (558.8 GB usable)
    code, _, err = run(capsys, "plan", "--model", "llama-3.1-405b", "--accelerator", "h100", "--context", "8K",
                       "--nodes", "1")
    assert code == 2 and err.count("\n") == 1 and "nodes: nothing fits on 1 node" in err and "2 nodes" in err


def test_decode_step_counts_the_tensor_parallel_all_reduces():
    # Llama-3.1-70B at tensor 8, 16 sequences: per layer two all-reduces of 16 tokens × 8,192 × 2 B = 262,144 B;
    # a ring moves 2·7/8 of it over NVLink's 450 GB/s each way (1.02 µs) plus the stated 8 µs per collective;
    # × 2 × 80 layers = 1.44 ms on top of the ranks' roofline time.
    from part1_capacity.calculator.plan import deploy

    plan = make_plan("llama-3.1-70b", "h100", Workload(context=32768, batch=16))
    per = 2 * 7 / 8 * 16 * 8192 * 2 / 450e9 + deploy.ALLREDUCE_LATENCY_S
    assert plan.decode_split.communication_s == pytest.approx(2 * 80 * per)
    assert plan.decode.time_s == pytest.approx(plan.decode_split.rank_s + plan.decode_split.communication_s)
    one = make_plan("llama-3.1-8b", "h100", Workload(context=4096))
    assert one.parallelism["tensor"] == 1 and one.decode_split.communication_s == 0


def test_the_overflow_decode_is_timed_by_pass_time():
    """The overflow's decode steps go through ``deploy.pass_time``, the one place a pass becomes time: all in the
    device's memory the step is the weights-only deployment's own decode step; read from a tier it is longer by each
    rank's overflow read at the tier's bandwidth instead of the device's. Llama-3.1-70B on 2 H200 (tensor 2) at
    128K × 64, as in test_calculator_cli's overflow test: 32 × 40 GiB of cache against 139.80 GiB (as the runtime
    reports an H200) × 0.9 − 2 GiB − 70.55e9 free, 1,311.99e9 bytes over on each rank; one micro-batch and a
    memory-bound step, so host DRAM (63 GB/s) adds 1.31199e12 × (1/63e9 − 1/4.8e12) = 20.55 s."""
    from course.shared.units import GIB
    from part1_capacity.calculator.plan import speed

    plan = make_plan("llama-3.1-70b", "h200", Workload(context=131072, batch=64))
    r, dep0 = plan.resolved, plan.deployment_without_kv
    assert (dep0.tensor, dep0.pipeline, dep0.data) == (2, 1, 1)
    over = 32 * 40 * GIB - (139.80 * GIB * 0.9 - 2 * GIB - 70.55e9)
    in_memory = deploy.decode_time(r, dep0).time_s
    bandwidth = speed.rates(r.accelerator, "bf16")[1]
    assert bandwidth == 4.8e12
    for tier in plan.overflow_tiers:
        assert tier["decode_step_s"] / tier["slowdown_vs_hbm"] == pytest.approx(in_memory, rel=1e-12)
        assert tier["decode_step_s"] - in_memory == pytest.approx(over * (1 / tier["bandwidth"] - 1 / bandwidth))
    dram = next(t for t in plan.overflow_tiers if t["tier"] == "host-dram")
    assert dram["decode_step_s"] - in_memory == pytest.approx(20.55, abs=0.005)
