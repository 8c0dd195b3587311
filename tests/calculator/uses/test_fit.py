"""`capacity fit`: the longest context at a batch and the most sequences at a context that fit the accelerators
one has — worked by hand for the textbook law, and held at the exact boundary against `make_plan` (the plan at the
answer fits, the plan one block more does not) for the law, llama.cpp and vLLM."""
import json
import math

import pytest

from part1_capacity.calculator.uses.fit import BLOCK, fit
from part1_capacity.calculator.hardware.accelerators import load_accelerator
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.plan.plan import make_plan
from part1_capacity.calculator.plan.resolve import Workload, resolve
from tests.support.in_process import capacity


def _fits(model, acc, n, **kw) -> bool:
    need = make_plan(model, acc, Workload(**kw)).accelerators_needed
    return need is not None and need <= n


def test_longest_context_by_hand():
    # Llama-3.1-8B bf16 on one RTX 4090: the usable bytes resolve gives; weights 8.03e9 × 2 B; one token of one
    # sequence costs 32 layers × 8 K/V heads × 128 × 2 (K and V) × 2 B = 131,072 B.
    m, a = load_model("llama-3.1-8b"), load_accelerator("rtx-4090")
    usable = resolve(m, a, Workload(context=1)).usable_bytes      # memory × 0.9 − 2 GiB (resolve.usable_bytes)
    expected = math.floor((usable - 8.03e9 * 2) / 131_072)
    f = fit(m, a, Workload(context=1, batch=1), "context")
    assert f.value == expected and f.limited_by == "memory"
    # two sequences: each gets half the room
    assert fit(m, a, Workload(context=1, batch=2), "context").value == math.floor((usable - 8.03e9 * 2) / 131_072 / 2)


def test_most_sequences_by_hand():
    # the same room at 4,096 tokens: ⌊room / (4,096 × 131,072 B)⌋ sequences
    m, a = load_model("llama-3.1-8b"), load_accelerator("rtx-4090")
    room = resolve(m, a, Workload(context=1)).usable_bytes - 8.03e9 * 2
    f = fit(m, a, Workload(context=4096, batch=1), "batch")
    assert f.value == math.floor(room / (4096 * 131_072))


@pytest.mark.parametrize("engine", ["law", "llama.cpp", "vllm"])
@pytest.mark.parametrize("model,acc,dtype,batch", [("llama-3.1-8b", "rtx-4090", "q4_k_m", 2),
                                                   ("gemma-2-9b", "rtx-3090", "q8_0", 12),   # sliding window
                                                   ("qwen3-8b", "m1-max", "bf16", 8),
                                                   ("deepseek-v2-lite", "rtx-4090", "q8_0", 16),    # MLA, MoE
                                                   ("nemotron-h-8b", "rtx-3090", "bf16", 24)])     # hybrid
def test_context_boundary_is_exact(engine, model, acc, dtype, batch):
    m, a = load_model(model), load_accelerator(acc)
    kv = "fp16" if engine != "law" else "bf16"
    f = fit(m, a, Workload(context=1, batch=batch, weights_dtype=dtype, kv_dtype=kv, engine=engine), "context")
    T = f.value
    assert f.limited_by == "memory" and T is not None
    common = dict(batch=batch, weights_dtype=dtype, kv_dtype=kv, engine=engine)
    assert _fits(m, a, 1, context=T, **common)
    assert not _fits(m, a, 1, context=T + BLOCK[engine], **common)


@pytest.mark.parametrize("engine", ["law", "llama.cpp", "vllm"])
def test_batch_boundary_is_exact(engine):
    m, a = load_model("llama-3.1-8b"), load_accelerator("rtx-4090")
    common = dict(context=8192, weights_dtype="q4_k_m", kv_dtype="fp16", engine=engine)
    f = fit(m, a, Workload(batch=1, **common), "batch")
    assert f.value and f.value > 1
    assert _fits(m, a, 1, batch=f.value, **common)
    assert not _fits(m, a, 1, batch=f.value + 1, **common)


def test_several_accelerators_hold_more():
    # two H200s hold Llama-3.1-70B bf16 (141 GB) where one (141 GB × 0.9 − 2 GiB usable) cannot; the boundary holds on two
    m, a = load_model("llama-3.1-70b"), load_accelerator("h200")
    assert fit(m, a, Workload(context=1, batch=1), "context").limited_by == "weights"
    f = fit(m, a, Workload(context=1, batch=8), "context", accelerators=2)
    assert f.value is not None
    assert _fits(m, a, 2, context=f.value, batch=8)
    assert not _fits(m, a, 2, context=f.value + 1, batch=8)


def test_model_maximum_context_limits_before_memory():
    # Qwen2.5-0.5B on an 80 GB H100: its whole 32K context fits many times over
    m = load_model("qwen2.5-0.5b")
    f = fit(m, load_accelerator("h100"), Workload(context=1, batch=1), "context")
    assert f.value == m.max_context and f.limited_by == "model_max_context"


def test_cli_json_and_text():
    r = capacity("fit", "--model", "llama-3.1-8b", "--accelerator", "rtx-4090", "--batch", "1", "--json")
    d = json.loads(r.stdout)
    assert r.returncode == 0 and d["max_context"] > 0 and d["limited_by"] == "memory"
    assert d["plan_at_answer"]["accelerators_needed"] == 1
    r = capacity("fit", "--model", "llama-3.1-8b", "--accelerator", "rtx-4090", "--context", "8192")
    assert r.returncode == 0 and "most concurrent sequences at context 8,192" in r.stdout and "limited by" in r.stdout
    r = capacity("fit", "--model", "llama-3.1-70b", "--accelerator", "rtx-4090", "--batch", "1")
    assert r.returncode == 0 and "the weights alone do not fit" in r.stdout


@pytest.mark.parametrize("argv,field", [
    (["--batch", "1", "--context", "4096"], "--context"),      # both: one of the two
    ([], "--batch"),                                          # neither
    (["--batch", "1", "--accelerators", "0"], "--accelerators"),
    (["--batch", "1", "--engine", "tgi"], "--engine"),
])
def test_bad_input_is_one_line(argv, field):
    r = capacity("fit", "--model", "llama-3.1-8b", "--accelerator", "rtx-4090", *argv)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and field in r.stderr
