"""Resolve once, size once, time once: a workload is resolved against the model and the accelerator into one
frozen object, the weights and each sequence's cache are computed once for the whole plan, and one function turns
a pass into seconds (so the deployment's reason and the plan's decode time are the same number)."""
import dataclasses
import json
import re

import pytest

from part1_capacity.calculator.plan import deploy, resolve as resolve_mod
from part1_capacity.calculator.sizing import roofline
from part1_capacity.calculator.model import weights
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.hardware.accelerators import load_accelerator
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.plan.plan import Workload, make_plan, plan_report
from part1_capacity.calculator.plan.resolve import resolve
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_a_resolved_workload_is_frozen_and_leaves_the_callers_workload_alone():
    m, acc = load_model("llama-3.1-8b"), load_accelerator("h100")
    wl = Workload(context=8192, batch=4, kv_dtype="fp8")
    r = resolve(m, acc, wl)
    assert wl.weights_dtype is None                       # the caller's copy is not filled in
    assert r.workload.weights_dtype == "bf16" and r.kv_bytes == 1 and r.state_bytes == 1
    # Llama-3.1-8B: 8.03e9 parameters × 2 B (bf16)
    assert r.weights_bytes == pytest.approx(8.03e9 * 2, rel=1e-3)
    # H100: 79.19 GiB, what its runtime reports (data/accelerators.json), not the marketed 80e9 B × 0.90 − 2 GiB
    assert r.usable_bytes == pytest.approx(79.19 * 2 ** 30 * 0.9 - 2 * 2 ** 30)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.weights_bytes = 1.0
    with pytest.raises(InputError, match="--engine: unknown 'tgi'"):
        resolve(m, acc, Workload(context=8192, engine="tgi"))


def test_a_plan_sizes_the_weights_once_and_each_cache_once(monkeypatch):
    calls = {"weights": 0, "cache": []}
    real_w, real_c = weights.weights_bytes, resolve_mod.cache_per_rank

    def counted_weights(*a, **k):
        calls["weights"] += 1
        return real_w(*a, **k)

    def counted_cache(model, wl, T, tp):
        calls["cache"].append((T, tp))
        return real_c(model, wl, T, tp)

    monkeypatch.setattr(resolve_mod.weights, "weights_bytes", counted_weights)
    monkeypatch.setattr(resolve_mod, "cache_per_rank", counted_cache)
    make_plan("llama-3.1-70b", "h100", Workload(context=32768, batch=17))
    assert calls["weights"] == 1
    # the search tries hundreds of shapes; each (context, tensor degree) is computed once
    assert len(calls["cache"]) == len(set(calls["cache"]))


def test_the_reason_quotes_the_decode_time_the_plan_reports():
    # On a host with measured kernels the phases are timed by those kernels; the deployment search ranks its
    # candidates with the same function, so the milliseconds in the reason are the plan's own decode step.
    host = str(REPO / "results" / "part1" / "host_accelerator.json")
    d, _ = plan_report(make_plan("nemotron-3-nano-30b-a3b", host,
                                 Workload(context=8192, batch=1, weights_dtype="q4_k_m")))
    quoted = re.search(r"decodes fastest \(([\d.,]+) ms per step", d["parallelism"]["reason"])
    assert quoted, d["parallelism"]["reason"]
    assert float(quoted.group(1).replace(",", "")) == round(d["decode"]["time_s"] * 1e3, 1)
    assert d["decode"]["time_kind"] == "measured-kernel estimate"


def test_attention_flops_are_counted_directly_not_by_subtraction():
    # Llama-3.1-8B: 32 layers, 32 heads × 128: 4 × 32 × 128 = 16,384 FLOPs per (query, key) pair per layer.
    m = load_model("llama-3.1-8b")
    T = 1000
    pairs = T * (T + 1) / 2                                # causal prompt
    assert roofline.prefill_attention_flops(m, T) == 16384 * 32 * pairs
    assert roofline.prefill_flops(m, T) == 2 * m.params_active * T + 16384 * 32 * pairs
    # decode: 3 sequences, each of 1000 cached tokens
    assert roofline.decode_attention_flops(m, T, 3) == 3 * 16384 * 32 * T


def test_the_engine_travels_in_the_workload():
    plan = make_plan("gpt-oss-120b", "h100", Workload(context=131072, batch=64, engine="vllm",
                                                      hybrid_kv_cache_manager=False))
    fields, start = plan_report(plan)
    assert fields["engine"] == "vllm" and start is not None
    # with the manager disabled (the workload says so) every sliding layer holds the whole context: 36 layers ×
    # 8 K/V heads × 2 (K, V) × 64 × 2 B per token, per sequence, on the plan's ranks
    assert fields["engine_kv_bytes_total"] == 64 * 36 * 8 * 2 * 64 * 2 * 131072
    assert json.loads(json.dumps(fields))["workload"]["engine"] == "vllm"


def test_one_accelerator_pass_time_is_split_roofline_without_kernels():
    m, acc = load_model("llama-3.1-8b"), load_accelerator("h100")
    r = resolve(m, acc, Workload(context=4096, batch=1))
    dep = deploy.choose(r)
    assert dep.accelerators == 1
    ps = deploy.decode_pass(r, dep)
    # bf16 on H100: 3.35e12 B/s × the datasheet efficiency; one token reads every weight and the whole cache
    split = deploy.rank_step_time(r, ps.tokens, ps.seqs, ps.flops, ps.weight_bytes, ps.cache_bytes_per_rank, dep)
    assert deploy.pass_time(r, ps, dep) == split
    assert ps.weight_bytes == r.weights_bytes and ps.cache_bytes == r.sequence_cache_bytes(4096)


@pytest.mark.parametrize("change, message", [
    ({"context": 0}, "context: must be a positive integer, got 0"),
    ({"context": True}, "context: must be a positive integer, got True"),
    ({"context": 1.5}, "context: must be a positive integer, got 1.5"),
    ({"batch": -2}, "batch: must be a positive integer, got -2"),
    ({"context": 131073}, "context: 131073 exceeds llama-3.1-8b's maximum context of 131072 tokens"),
    ({"prompt": 0}, "prompt: must be between 1 and context (100), got 0"),
    ({"prompt": 101}, "prompt: must be between 1 and context (100), got 101"),
    ({"usable_fraction": 0}, "usable_fraction: must be in (0, 1], got 0"),
    ({"usable_fraction": 1.01}, "usable_fraction: must be in (0, 1], got 1.01"),
    ({"overhead_bytes": -1}, "overhead: must be >= 0, got -1"),
    ({"tensor_parallel": 0}, "tensor_parallel: must be a positive integer, got 0"),
    ({"pipeline_parallel": False}, "pipeline_parallel: must be a positive integer, got False"),
    ({"nodes": 2.0}, "nodes: must be a positive integer, got 2.0"),
    # 32 heads and 8 K/V heads: d must divide 32, and divide 8 or be a multiple of it → 1, 2, 4, 8, 16, 32
    ({"tensor_parallel": 3}, "tensor_parallel: 3 does not split llama-3.1-8b's 32 attention heads and 8 K/V heads "
                             "evenly; allowed: 1, 2, 4, 8, 16, 32"),
    ({"engine": "tgi"}, "--engine: unknown 'tgi'"),
    ({"weights_dtype": "fp9"}, "weights_dtype: unknown dtype 'fp9'"),
    ({"kv_dtype": "int4"}, "kv_dtype: unknown dtype 'int4'"),
    ({"state_dtype": "q5_0"}, "state_dtype: unknown dtype 'q5_0'"),
])
def test_a_workload_refused_in_one_line_naming_the_field(change, message):
    m = load_model("llama-3.1-8b")
    with pytest.raises(InputError) as e:
        Workload(**{"context": 100, **change}).validate(m)
    assert str(e.value).startswith(message)


def test_a_workload_at_its_limits_and_its_canonical_dtypes():
    m = load_model("llama-3.1-8b")
    wl = Workload(context=131072, batch=1, prompt=131072, usable_fraction=1, overhead_bytes=0, tensor_parallel=32,
                  pipeline_parallel=1, nodes=1, kv_dtype="FP8").validate(m)
    # no weights dtype: the model's own (bf16); names made canonical; no recurrent state: the state follows the cache
    assert (wl.weights_dtype, wl.kv_dtype, wl.state_dtype) == ("bf16", "fp8", "fp8")
    assert Workload(context=1, weights_dtype="Q8_0").validate(m).weights_dtype == "q8_0"


def test_usable_bytes_and_the_experts_share_by_hand():
    from types import SimpleNamespace as NS
    from part1_capacity.calculator.model.weights import WeightGroup
    h100 = load_accelerator("h100")
    # the memory the runtime reports (79.19 GiB of an "80 GB" H100) × 0.9 − 2 GiB; × 0.5 − 1e9
    mem = h100.runtime_memory_bytes
    assert mem == pytest.approx(79.19 * 2 ** 30, rel=1e-4)
    assert resolve_mod.usable_bytes(h100, Workload(context=1)) == mem * 0.9 - 2 ** 31
    assert resolve_mod.usable_bytes(h100, Workload(context=1, usable_fraction=0.5, overhead_bytes=1e9)) == mem * 0.5 - 1e9
    # a checkpoint's expert group, natively: its bytes (80 bf16 parameters = 160), at most the weights
    moe = NS(native_dtype="bf16", params_active=30, params_total=100, params_multimodal=0,
             weight_groups=(WeightGroup("routed experts", 80, "bf16"), WeightGroup("rest", 20, "bf16")))
    assert resolve_mod.expert_bytes(moe, NS(weights_dtype="bf16"), 200.0) == (160.0, "the checkpoint's expert weight group")
    assert resolve_mod.expert_bytes(moe, NS(weights_dtype="bf16"), 100.0)[0] == 100.0
    # another precision (or no such group): total − active, 100 bytes × (1 − 30/100) = 70
    assert resolve_mod.expert_bytes(moe, NS(weights_dtype="fp8"), 100.0) == (
        70.0, "total − active parameters (dense part ≤ active; a vision tower is no expert)")
    # a vision tower of 20 is neither active per token nor an expert: 100 bytes × (1 − (30 + 20)/100) = 50
    vlm = NS(native_dtype="bf16", params_active=30, params_total=100, params_multimodal=20, weight_groups=())
    assert resolve_mod.expert_bytes(vlm, NS(weights_dtype="fp8"), 100.0)[0] == 50.0
    dense = NS(native_dtype="bf16", params_active=100, params_total=100, params_multimodal=0,
             weight_groups=(WeightGroup("all", 100, "bf16"),))
    assert resolve_mod.expert_bytes(dense, NS(weights_dtype="bf16"), 200.0)[0] == 0.0


def test_a_resolution_by_hand():
    m, h100 = load_model("llama-3.1-8b"), load_accelerator("h100")
    r = resolve(m, h100, Workload(context=1000, batch=3, kv_dtype="fp8"))
    assert (r.context, r.batch, r.prompt, r.kv_bytes, r.state_bytes) == (1000, 3, 1000, 1.0, 1.0)
    assert resolve(m, h100, Workload(context=1000, prompt=10)).prompt == 10
    # 32 layers × 8 K/V heads × 128 × 2 × 1 byte × 1,000 tokens = 65,536,000 bytes, a quarter on tensor 4 (2 of 8 heads)
    assert r.sequence_cache_bytes(1000) == 65_536_000 and r.cache_per_rank(1000, 4) == 16_384_000
    assert r.cache_per_rank(1000, 4) is r.cache_per_rank(1000, 4)          # computed once
    pinned = r.with_workload(tensor_parallel=4, nodes=1)
    assert (pinned.workload.tensor_parallel, pinned.workload.nodes, r.workload.tensor_parallel) == (4, 1, None)
    assert pinned.weights_bytes == r.weights_bytes and pinned.cache_per_rank(1000, 4) is r.cache_per_rank(1000, 4)
    empty = dataclasses.replace(m, params_total=0, params_active=0, weight_groups=(), checkpoint=None)
    with pytest.raises(InputError, match=r"^model: llama-3.1-8b's weights come to 0 bytes at bf16 \(a checkpoint"):
        resolve(empty, h100, Workload(context=10))


def test_resolve_edges_by_hand():
    from types import SimpleNamespace as NS
    from part1_capacity.calculator import engines
    m, h100 = load_model("llama-3.1-8b"), load_accelerator("h100")
    # a prompt of one token is a prompt
    assert Workload(context=100, prompt=1).validate(m).prompt == 1
    # a hybrid's recurrent state stays in what the engine keeps, not in the cache's fp8: Jamba's bf16 under the law
    # (vLLM's rule: the model dtype), llama.cpp's fp32
    jamba = load_model("jamba-1.5-mini")
    assert Workload(context=100, kv_dtype="fp8").validate(jamba).state_dtype == "bf16"
    assert Workload(context=100, kv_dtype="q8_0", engine="llama.cpp").validate(jamba).state_dtype == "fp32"
    # one sequence's cache: K/V at 1 byte (4 attention layers × 8 K/V heads × 128 × 2 × 1,000 tokens = 8,192,000)
    # plus the state at 2 bytes (the law's state_bytes(2)), each T its own entry
    r = resolve(jamba, h100, Workload(context=2000, kv_dtype="fp8"))
    assert r.sequence_cache_bytes(1000) == 8_192_000 + jamba.state_bytes(2)
    assert r.sequence_cache_bytes(2000) == 16_384_000 + jamba.state_bytes(2)
    # a workload without an engine field is the law's: 32 × 8 × 128 × 2 × 2 bytes × 1,000 = 131,072,000 on one rank
    assert resolve_mod.cache_per_rank(m, NS(kv_dtype="bf16", state_dtype="bf16"), 1000, 1) == 131_072_000
    # under llama.cpp the engine's cells: 1,000 tokens padded to 1,024 (GGML_PAD 256) → 134,217,728
    cpp = Workload(context=1000, engine="llama.cpp").validate(m)
    assert resolve_mod.cache_per_rank(m, cpp, 1000, 1) == engines.sequence_bytes_per_rank(m, cpp, 1000, 1) == 134_217_728
    # the experts' share and how it was found travel in the resolution
    assert resolve(m, h100, Workload(context=10)).expert_source == "total − active parameters (dense part ≤ active; a vision tower is no expert)"
    # half a byte of weights (one int4 parameter) is weights; only none is refused
    tiny = dataclasses.replace(m, params_total=1, params_active=1, params_routed=0, weight_groups=(), checkpoint=None)
    assert resolve(tiny, h100, Workload(context=10, weights_dtype="int4")).weights_bytes == 0.5
    # a changed pin keeps the numbers already computed (one memo for both)
    r8 = resolve(m, h100, Workload(context=1000))
    first = r8.cache_per_rank(1000, 2)
    assert r8.with_workload(nodes=3).cache_per_rank(1000, 2) is first
