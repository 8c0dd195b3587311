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

REPO = Path(__file__).resolve().parent.parent


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
    host = str(REPO / "part1_capacity" / "results" / "host_accelerator.json")
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


def test_a_pass_time_on_one_accelerator_is_the_split_roofline_without_measured_kernels():
    m, acc = load_model("llama-3.1-8b"), load_accelerator("h100")
    r = resolve(m, acc, Workload(context=4096, batch=1))
    dep = deploy.choose(r)
    assert dep.accelerators == 1
    ps = deploy.decode_pass(r, dep)
    # bf16 on H100: 3.35e12 B/s × the datasheet efficiency; one token reads every weight and the whole cache
    split = deploy.rank_step_time(r, ps.tokens, ps.seqs, ps.flops, ps.weight_bytes, ps.cache_bytes_per_rank, dep)
    assert deploy.pass_time(r, ps, dep) == split
    assert ps.weight_bytes == r.weights_bytes and ps.cache_bytes == r.sequence_cache_bytes(4096)
