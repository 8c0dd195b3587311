"""plan/plan.py: the plan's JSON contract (every key a user's script reads, none renamed or dropped), its numbers by
hand on a small case, which implication the numbers call for, and the plans where nothing or only the weights fit.
Argument-free tests (tools/mutation.py --verify runs them against the module's surviving mutants)."""
import pytest

from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.hardware.accelerators import Accelerator
from part1_capacity.calculator.plan import speed
from part1_capacity.calculator.plan.plan import IMPLICATIONS, Workload, implication_key, make_plan
from part1_capacity.calculator.readers.loader import load_model

TOP = {"accelerator", "accelerator_memory_bytes", "accelerator_memory_marketed_bytes", "accelerator_memory_source",
       "layout_notice", "accelerators_added_by_kv", "accelerators_needed", "accelerators_without_kv", "bottleneck",
       "decode", "implication", "kv_bytes_per_sequence", "kv_bytes_per_token", "kv_bytes_stored", "kv_bytes_total",
       "kv_to_weights_ratio", "model", "nodes_needed", "nodes_without_kv", "overflow", "overflow_bytes",
       "overflow_tiers", "parallelism", "parallelism_without_kv", "prefill", "state_bytes_per_sequence", "structure",
       "verdict", "weights_bytes", "weights_bytes_source", "weights_groups", "workload"}
PHASE = {"arithmetic_intensity", "basis", "bound", "bytes", "communication_s", "flops", "ridge_point", "time_kind",
         "time_s"}


def small():
    # Llama-3.1-8B on H100, 1,000 tokens × 3 sequences, tensor 4 pinned
    return make_plan("llama-3.1-8b", "h100", Workload(context=1000, batch=3, tensor_parallel=4))


def test_the_plans_json_keys():
    d = small().to_dict()
    assert set(d) == TOP
    assert d["workload"] == {"context": 1000, "batch": 3, "prompt": 1000, "tensor_parallel": 4,
                             "pipeline_parallel": None, "nodes": None, "engine": "law", "weights_dtype": "bf16",
                             "kv_dtype": "bf16", "state_dtype": "bf16", "usable_fraction": 0.9,
                             "overhead_bytes": 2 * 2 ** 30}
    assert set(d["prefill"]) == PHASE
    assert set(d["decode"]) == PHASE | {"tokens_per_s", "pipeline_microbatches", "pipeline_bubble_fraction"}
    assert d["overflow"] == {} and d["overflow_tiers"] == [] and d["overflow_bytes"] == 0.0
    assert d["parallelism_without_kv"]["tensor"] == 4 and (d["nodes_needed"], d["nodes_without_kv"]) == (1, 1)
    w = make_plan("llama-3.1-8b", "h100", Workload(context=1000, prompt=10, pipeline_parallel=2, nodes=1,
                                                   usable_fraction=0.5, overhead_bytes=0)).to_dict()["workload"]
    assert (w["prompt"], w["pipeline_parallel"], w["nodes"], w["usable_fraction"], w["overhead_bytes"]) == (
        10, 2, 1, 0.5, 0)


def test_a_small_plan_by_hand():
    p = small()
    d = p.to_dict()
    # one sequence: 32 layers × 8 K/V heads × 128 × 2 (K, V) × 2 bytes × 1,000 tokens = 131,072,000 bytes; 3 of them
    assert (d["kv_bytes_per_sequence"], d["state_bytes_per_sequence"], d["kv_bytes_total"]) == (
        131_072_000, 0.0, 393_216_000)
    # stored over the 4 tensor ranks: each holds 2 of the 8 heads of all 3 sequences, 3 × 32,768,000 × 4
    assert d["kv_bytes_stored"] == 393_216_000
    # weights 8.03e9 × 2 bytes; prefill reads them once and writes one prompt's cache; decode reads them and the
    # cache of the replica's 3 sequences
    assert d["weights_bytes"] == 16.06e9
    assert d["prefill"]["bytes"] == 16.06e9 + 131_072_000
    assert d["decode"]["bytes"] == 16.06e9 + 3 * 131_072_000
    # the phases' times are the passes' times (deploy.pass_time), their basis the accelerator's
    assert d["prefill"]["time_s"] == p.prefill_split.time_s and d["decode"]["time_s"] == p.decode_split.time_s
    assert d["prefill"]["basis"] == d["decode"]["basis"] == speed.basis(p.accelerator, "bf16")
    assert d["prefill"]["time_kind"] == speed.time_kind(p.accelerator, "bf16")
    assert d["prefill"]["communication_s"] == p.prefill_split.communication_s
    # 3 tokens per step of the one replica
    assert d["decode"]["tokens_per_s"] == pytest.approx(3 / d["decode"]["time_s"])
    # a prompt is one sequence: one micro-batch even on 2 pipeline stages
    two = make_plan("llama-3.1-8b", "h100", Workload(context=1000, batch=3, tensor_parallel=1, pipeline_parallel=2))
    assert two.prefill_split.microbatches == 1 and two.decode_split.microbatches == 2
    # a hybrid: its state beside the K/V (the law's state_bytes at bf16)
    j = make_plan("jamba-1.5-mini", "h100", Workload(context=1000)).to_dict()
    jamba = load_model("jamba-1.5-mini")
    assert j["state_bytes_per_sequence"] == jamba.state_bytes(2)
    assert j["kv_bytes_per_sequence"] == jamba.attention_cache_bytes(1000, 2) + jamba.state_bytes(2)


def test_a_moe_pass_reads_no_more_weights_than_there_are():
    d = make_plan("deepseek-v3", "h200", Workload(context=4096, batch=4, weights_dtype="fp8")).to_dict()
    assert d["decode"]["bytes"] < d["weights_bytes"] + 4 * d["kv_bytes_per_sequence"] * 8   # 8: replication bound
    assert d["prefill"]["bytes"] <= d["weights_bytes"] + d["kv_bytes_per_sequence"]


def test_which_implication_the_numbers_call_for():
    assert [implication_key(b, a) for b, a in (("weights", None), ("weights", 0), ("weights", 1), ("weights", 2),
                                                ("kv_cache", 3), ("kv_cache", 0))] == [
        "weights", "weights", "weights_and_kv", "weights_and_kv", "kv_cache", "kv_cache"]
    # a plan where the cache adds nothing says so in its implication; one where it adds, the table's line
    d = small().to_dict()
    assert d["accelerators_added_by_kv"] == 0 and d["implication"] == d["verdict"]
    big = make_plan("llama-3.1-70b", "h200", context=131072, batch=64).to_dict()
    assert big["accelerators_added_by_kv"] > 0 and big["implication"] == IMPLICATIONS["kv_cache"]


def test_when_nothing_or_only_the_weights_fit():
    # a 1 GB card: Llama-3.1-8B's 16 GB of weights fit on no deployment of it
    tiny = Accelerator("tiny", "tiny", "datacenter", 1e9, 1e12, flops_16=1e14, max_tp=1, node_size=1)
    d = make_plan("llama-3.1-8b", tiny, context=1000).to_dict()
    assert (d["accelerators_needed"], d["nodes_needed"], d["nodes_without_kv"], d["prefill"], d["decode"]) == (
        None, None, None, None, None)
    assert d["overflow"] == {} and d["kv_bytes_stored"] == 0.0
    # a 24 GB card, one stage pinned: 24e9 × 0.9 − 2 GiB = 19.45e9 usable holds the 16.06e9 of weights, but one
    # sequence of 128K tokens (16 GiB = 17.18e9) does not fit beside them: no deployment with the cache, the phases
    # timed on the weights-only one, the overflow shown
    mid = Accelerator("mid", "mid", "datacenter", 24e9, 1e12, flops_16=1e14, max_tp=1, node_size=1)
    p = make_plan("llama-3.1-8b", mid, Workload(context=131072, pipeline_parallel=1))
    d = p.to_dict()
    assert p.deployment is None and d["accelerators_without_kv"] == 1 and d["decode"] is not None
    assert d["kv_bytes_stored"] == 0.0 and d["overflow_bytes"] > 0
    tier = d["overflow_tiers"][0]
    assert tier["decode_tokens_per_s"] == pytest.approx(1 / tier["decode_step_s"])


def test_a_node_budget_nothing_fits_in_is_one_line():
    for nodes, words in ((1, "on 1 node of 8"), (2, "on 2 nodes of 8")):
        with pytest.raises(InputError) as e:
            make_plan("llama-3.1-405b", "h100", Workload(context=131072, batch=64, nodes=nodes))
        assert str(e.value).startswith(f"nodes: nothing fits {words} NVIDIA H100"), str(e.value)


def test_the_engine_and_start_up_figures_are_for_the_plans_deployment():
    from part1_capacity.calculator import engines
    from part1_capacity.calculator.engines import vllm_memory
    from part1_capacity.calculator.plan.plan import for_plan, plan_report, startup_for_plan
    # Llama-3.1-405B at 8K × 1 on H100: the search takes tensor 8 × pipeline 2 (test_deploy); nothing pinned
    p = make_plan("llama-3.1-405b", "h100", Workload(context=8192, batch=1, kv_dtype="fp8"))
    m, acc, wl = p.model, p.accelerator, p.workload
    assert (p.parallelism["tensor"], p.parallelism["pipeline"]) == (8, 2)
    assert for_plan(p).to_dict() == engines.allocate(m, wl, 8, "law", acc, True, 2).to_dict()
    assert for_plan(p, "vllm", False).to_dict() == engines.allocate(m, wl, 8, "vllm", acc, False, 2).to_dict()
    flags = vllm_memory.StartupFlags(block_size=32, max_num_seqs=7)
    want = vllm_memory.startup(m, acc, 8192, p.weights_bytes, 8, 2, 1.0, 2.0, 1.0, False, flags, None)
    assert startup_for_plan(p, flags, False).to_fields() == want.to_fields()
    fields, start = plan_report(p, "vllm", flags, False)
    assert start.to_fields() == want.to_fields() and fields["engine"] == "vllm"
    assert {k: fields[k] for k in want.to_fields()} == want.to_fields()
    assert {k: fields[k] for k in for_plan(p, "vllm", False).to_fields()} == for_plan(p, "vllm", False).to_fields()
    # the workload's own engine and hybrid manager by default; no vLLM start-up under the law
    fields, start = plan_report(p)
    assert start is None and fields["engine"] == "law" and "kv_cache_tokens" not in str(sorted(fields))
    # a hybrid under vLLM, K/V in fp8 and the state in bf16: the workload's own engine and dtypes
    j = make_plan("jamba-1.5-mini", "h100", Workload(context=4096, kv_dtype="fp8", engine="vllm"))
    t, pp = j.parallelism["tensor"], j.parallelism["pipeline"]
    want = vllm_memory.startup(j.model, j.accelerator, 4096, j.weights_bytes, t, pp, 1.0, 2.0, 2.0, True, None, None)
    assert startup_for_plan(j).to_fields() == want.to_fields()
    assert plan_report(j)[1].to_fields() == want.to_fields()
    assert for_plan(j).to_dict() == engines.allocate(j.model, j.workload, t, "vllm", j.accelerator, True, pp).to_dict()
    # sliding windows under vLLM: the hybrid manager as the workload says unless told otherwise
    g = make_plan("gemma-2-9b", "h100", Workload(context=8192, engine="vllm"))
    t, pp = g.parallelism["tensor"], g.parallelism["pipeline"]
    on = vllm_memory.startup(g.model, g.accelerator, 8192, g.weights_bytes, t, pp, 2.0, 2.0, 2.0, True)
    off = vllm_memory.startup(g.model, g.accelerator, 8192, g.weights_bytes, t, pp, 2.0, 2.0, 2.0, False)
    assert on.to_fields() != off.to_fields()
    assert startup_for_plan(g).to_fields() == on.to_fields()
    assert startup_for_plan(g, None, False).to_fields() == off.to_fields()
    assert plan_report(g, hybrid_manager=False)[1].to_fields() == off.to_fields()
    assert for_plan(g, hybrid_manager=False).to_dict() == engines.allocate(g.model, g.workload, t, "vllm",
                                                                          g.accelerator, False, pp).to_dict()
    assert for_plan(g).to_dict() == engines.allocate(g.model, g.workload, t, "vllm", g.accelerator, True, pp).to_dict()
    # pinned degrees win
    pin = make_plan("llama-3.1-8b", "h100", Workload(context=1000, tensor_parallel=2, pipeline_parallel=2))
    assert for_plan(pin).to_dict() == engines.allocate(pin.model, pin.workload, 2, "law", pin.accelerator, True,
                                                        2).to_dict()
    want = vllm_memory.startup(pin.model, pin.accelerator, 1000, pin.weights_bytes, 2, 2, 2.0, 2.0, 2.0, True)
    assert startup_for_plan(pin).to_fields() == want.to_fields()
    # expert parallelism: the start-up budget takes the deployment's weights per rank (DeepSeek-V3, test_deploy)
    e = make_plan("deepseek-v3", "h200", Workload(context=131072, batch=32))
    dep = e.deployment
    assert dep.expert == 16
    want = vllm_memory.startup(e.model, e.accelerator, 131072, e.weights_bytes, dep.tensor, 1, 2.0, 2.0, 2.0, True,
                               None, dep.weights_per_rank)
    assert startup_for_plan(e).to_fields() == want.to_fields()
    # nothing fits at all: one rank, one stage
    tiny = Accelerator("tiny", "tiny", "datacenter", 1e9, 1e12, flops_16=1e14, max_tp=1, node_size=1)
    n = make_plan("llama-3.1-8b", tiny, context=1000)
    assert for_plan(n).to_dict() == engines.allocate(n.model, n.workload, 1, "law", tiny, True, 1).to_dict()
    # the weights-only deployment when the cache fits nowhere (the 24 GB card, one stage)
    mid = Accelerator("mid", "mid", "datacenter", 24e9, 1e12, flops_16=1e14, max_tp=1, node_size=1)
    w = make_plan("llama-3.1-8b", mid, Workload(context=131072, pipeline_parallel=1))
    assert w.parallelism == {} and for_plan(w).tensor_parallel == 1


def test_a_host_with_measured_kernels_times_each_phase_by_its_own_kernels():
    from part1_capacity.calculator.hardware.accelerators import kernels_from_dict
    from part1_capacity.calculator.sizing import roofline
    ps = 1e-12
    cost = {"decode_s_per_weight": 100 * ps, "compute_s_per_weight": 25 * ps, "prefill_s_per_weight_token": 40 * ps}
    k = kernels_from_dict({"threads": 2, "op_overhead_s": 1e-6, "types": {"q8_0": cost, "f16": cost}, "source": "test"})
    host = Accelerator("box", "box", "host", 64e9, 100e9, flops_16=1e12, kernels=k)
    p = make_plan("llama-3.1-8b", host, Workload(context=1000, batch=2, weights_dtype="q8_0"))
    m = p.model
    mix = {t: f * m.params_active for t, f in speed.gguf_mix("q8_0").items()}
    # the prompt by the prefill kernels, the step of 2 sequences by the decode kernels (speed.py's host model)
    pre = speed.host_prefill(mix, 1000, m.n_layers, roofline.prefill_attention_flops(m, 1000), k).total
    dec = speed.host_decode(mix, m.n_layers, roofline.decode_attention_flops(m, 1000, 2), 2 * 131_072_000, k, 2).total
    d = p.to_dict()
    assert d["prefill"]["time_s"] == pytest.approx(pre) and d["decode"]["time_s"] == pytest.approx(dec)
    assert d["prefill"]["basis"] == speed.basis(host, "q8_0") != speed.basis(None, "q8_0")
    assert d["prefill"]["time_kind"] == d["decode"]["time_kind"] == "measured-kernel estimate"


def test_the_engine_figures_follow_the_deployment_that_holds_the_cache():
    import dataclasses
    from part1_capacity.calculator import engines
    from part1_capacity.calculator.engines import vllm_memory
    from part1_capacity.calculator.plan.plan import for_plan, plan_report, startup_for_plan
    # Llama-3.1-70B on H200 at 128K × 64: the weights alone take tensor 2, the cache tensor 8 × pipeline 3 — the
    # engine's figures are for the latter
    p = make_plan("llama-3.1-70b", "h200", Workload(context=131072, batch=64, engine="vllm"))
    assert (p.parallelism["tensor"], p.parallelism["pipeline"]) == (8, 3)
    assert (p.parallelism_without_kv["tensor"], p.parallelism_without_kv["pipeline"]) == (2, 1)
    assert for_plan(p).to_dict() == engines.allocate(p.model, p.workload, 8, "vllm", p.accelerator, True, 3).to_dict()
    want = vllm_memory.startup(p.model, p.accelerator, 131072, p.weights_bytes, 8, 3, 2.0, 2.0, 2.0, True)
    assert startup_for_plan(p).to_fields() == want.to_fields()
    # a plan carried without its resolution (built by hand) reads the dtypes from its workload
    assert startup_for_plan(dataclasses.replace(p, resolved=None)).to_fields() == want.to_fields()
    # the cache fits nowhere: the weights-only deployment's degrees. A 12 GB card of 2 per node: 12e9 × 0.9 − 2 GiB
    # = 8.65e9 a rank; 16.06e9 of weights need 2 ranks, one 128K sequence (17.18e9) does not fit beside them
    card = Accelerator("c12", "c12", "datacenter", 12e9, 1e12, flops_16=1e14, max_tp=2, node_size=2)
    t2 = make_plan("llama-3.1-8b", card, Workload(context=131072, pipeline_parallel=1, engine="vllm"))
    assert t2.parallelism == {} and (t2.parallelism_without_kv["tensor"], t2.parallelism_without_kv["pipeline"]) == (2, 1)
    assert for_plan(t2).to_dict() == engines.allocate(t2.model, t2.workload, 2, "vllm", card, True, 1).to_dict()
    fields, start = plan_report(t2)
    want = vllm_memory.startup(t2.model, card, 131072, t2.weights_bytes, 2, 1, 2.0, 2.0, 2.0, True)
    assert start.to_fields() == want.to_fields()
    p2 = make_plan("llama-3.1-8b", card, Workload(context=131072, tensor_parallel=1, pipeline_parallel=2))
    assert p2.parallelism == {} and p2.parallelism_without_kv["pipeline"] == 2
    assert for_plan(p2).to_dict() == engines.allocate(p2.model, p2.workload, 1, "law", card, True, 2).to_dict()
    # vLLM's batch of tokens follows the card's own memory, not an 80 GiB default
    assert for_plan(t2, "vllm").to_dict() == engines.allocate(t2.model, t2.workload, 2, "vllm", card, True, 1).to_dict()
    # the report's engine fields use the hybrid manager it was given (gemma-2's sliding windows)
    g = make_plan("gemma-2-9b", "h100", Workload(context=8192, engine="vllm"))
    fields, _ = plan_report(g, hybrid_manager=False)
    off = for_plan(g, hybrid_manager=False).to_fields()
    assert off != for_plan(g).to_fields() and {k: fields[k] for k in off} == off
    # nothing fits: one rank, one stage for vLLM's start-up too
    tiny = Accelerator("tiny", "tiny", "datacenter", 1e9, 1e12, flops_16=1e14, max_tp=1, node_size=1)
    n = make_plan("llama-3.1-8b", tiny, context=1000)
    assert n.prefill is None and n.decode_split is None and n.prefill_split is None
    want = vllm_memory.startup(n.model, tiny, 1000, n.weights_bytes, 1, 1, 2.0, 2.0, 2.0, True)
    assert startup_for_plan(n).to_fields() == want.to_fields()


def test_plan_numbers_on_harder_cases():
    # a one-token prompt of an MoE model reads a small share of its experts, never more than all its weights
    d = make_plan("deepseek-v3", "h200", Workload(context=4096, prompt=1, weights_dtype="fp8")).to_dict()
    assert d["prefill"]["bytes"] < d["weights_bytes"]
    # at another precision than the checkpoint's, the weights are every parameter at it (DeepSeek-V3 in bf16)
    b = make_plan("deepseek-v3", "h200", Workload(context=4096, weights_dtype="bf16")).to_dict()
    assert [g["dtype"] for g in b["weights_groups"]] == ["bf16"] and b["weights_groups"][0]["name"] == "all parameters"
    # under a node budget the memory answer is still the fewest: 16 H100 on 2 nodes for Llama-3.1-405B (test_deploy)
    p = make_plan("llama-3.1-405b", "h100", Workload(context=8192, batch=1, nodes=4))
    assert p.to_dict()["nodes_needed"] == p.fewest.nodes == 2


def test_an_overflow_on_two_stages_reads_each_ranks_share_from_the_tier():
    # Llama-3.1-70B on H200 at 128K × 64, tensor 1 × pipeline 2 pinned: the weights-only deployment is 2 stages of
    # one replica, 64 sequences in 2 micro-batches; each rank reads its overflow from the tier: p × over / (k·p) per
    # stage, p stages → over × 2/2 at the tier's bandwidth instead of the device's
    from course.shared.units import GIB
    from part1_capacity.calculator.plan import deploy
    plan = make_plan("llama-3.1-70b", "h200", Workload(context=131072, batch=64, tensor_parallel=1,
                                                       pipeline_parallel=2))
    r, dep0 = plan.resolved, plan.deployment_without_kv
    assert (dep0.tensor, dep0.pipeline, dep0.data) == (1, 2, 1)
    # each rank: 64 × 40 GiB / 2 stages of cache against 139.80 GiB (the runtime's H200) × 0.9 − 2 GiB − 70.55e9 free
    over = 64 * 40 * GIB / 2 - (139.80 * GIB * 0.9 - 2 * GIB - 70.55e9)
    assert plan.overflow["bytes_per_rank"] == pytest.approx(over)
    in_memory = deploy.decode_time(r, dep0).time_s
    for tier in plan.overflow_tiers:
        assert tier["decode_step_s"] - in_memory == pytest.approx(over * (1 / tier["bandwidth"] - 1 / 4.8e12))
