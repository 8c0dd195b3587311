"""LoRA adapters and a speculative-decoding draft model in the plan's memory (calculator/sizing/adapters.py,
plan/resolve.py) and in `--emit`: the bytes worked by hand from the model's shapes."""
import json

import pytest

from part1_capacity.calculator.sizing import adapters
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.uses.fit import fit
from part1_capacity.calculator.hardware.accelerators import load_accelerator
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.plan.plan import make_plan
from part1_capacity.calculator.plan.resolve import Workload, resolve
from tests.support.in_process import capacity

# Llama-3.1-8B: hidden 4096, 32 query heads and 8 K/V heads of 128, MLP 14336, 32 layers, bf16
Q, KV, D, I, L = 4096, 1024, 4096, 14336, 32


def test_one_adapter_on_peft_default_targets_by_hand():
    # q_proj (4096 → 4096) and v_proj (4096 → 1024): rank × (in + out) per layer, 32 layers, 2 bytes
    m = load_model("llama-3.1-8b")
    assert adapters.lora_params(m, 16) == 16 * ((D + Q) + (D + KV)) * L
    assert adapters.lora_bytes(m, "law", 16, adapters.DEFAULT_TARGETS, 1) == 16 * ((D + Q) + (D + KV)) * L * 2


def test_vllm_preallocates_every_linear_layer_at_its_rank():
    # vLLM: max_loras slots × max_lora_rank (12 → 16, the next rank it accepts) × every linear layer
    m = load_model("llama-3.1-8b")
    per_layer = (D + Q) + 2 * (D + KV) + (Q + D) + 2 * (D + I) + (I + D)
    assert adapters.lora_bytes(m, "vllm", 12, ("q_proj",), 4) == 4 * 16 * per_layer * L * 2
    assert adapters.vllm_rank(16) == 16 and adapters.vllm_rank(17) == 32
    with pytest.raises(InputError, match="--lora-rank"):
        adapters.vllm_rank(600)


def test_lora_and_draft_weights_join_the_plan():
    m, a = load_model("llama-3.1-8b"), load_accelerator("rtx-4090")
    base = resolve(m, a, Workload(context=4096))
    r = resolve(m, a, Workload(context=4096, lora_rank=8, lora_targets=("q_proj", "k_proj", "v_proj", "o_proj"),
                               draft_model="qwen2.5-0.5b"))
    lora = 8 * ((D + Q) + 2 * (D + KV) + (Q + D)) * L * 2
    draft = 0.494e9 * 2                                   # Qwen2.5-0.5B, 494 M parameters at bf16
    assert r.weights_bytes == pytest.approx(base.weights_bytes + lora + draft)
    # the draft's own cache: 24 layers × 2 K/V heads × 64 × 2 (K and V) × 2 bytes per token
    assert r.cache_per_rank(4096, 1) - base.cache_per_rank(4096, 1) == 4096 * 24 * 2 * 64 * 2 * 2


def test_a_draft_model_shortens_the_longest_context():
    m, a = load_model("llama-3.1-8b"), load_accelerator("rtx-4090")
    alone = fit(m, a, Workload(context=1, batch=1), "context").value
    with_draft = fit(m, a, Workload(context=1, batch=1, draft_model="llama-3.1-8b"), "context")
    assert with_draft.value is None or with_draft.value < alone
    small = fit(m, a, Workload(context=1, batch=1, draft_model="qwen2.5-0.5b"), "context").value
    assert small < alone
    plan = make_plan(m, a, Workload(context=small, batch=1, draft_model="qwen2.5-0.5b"))
    assert plan.accelerators_needed == 1


def test_emit_writes_the_engines_flags():
    base = ["plan", "--model", "llama-3.1-8b", "--accelerator", "rtx-4090", "--context", "8192", "--kv-dtype",
            "fp16", "--lora-rank", "12", "--max-loras", "2", "--draft-model", "qwen2.5-0.5b",
            "--num-speculative-tokens", "4"]
    r = capacity(*base, "--emit", "vllm")
    assert r.returncode == 0 and "--enable-lora" in r.stdout and "--max-loras 2" in r.stdout
    assert "--max-lora-rank 16" in r.stdout
    spec = r.stdout.split("--speculative-config ")[1].split("\n")[0].strip().strip("'")
    assert json.loads(spec) == {"model": "Qwen/Qwen2.5-0.5B-Instruct", "num_speculative_tokens": 4}
    r = capacity(*base, "--emit", "llama.cpp")
    assert r.returncode == 0 and r.stdout.count("--lora ") == 2 and "-md " in r.stdout and "--draft-max 4" in r.stdout
    d = json.loads(capacity(*base, "--json").stdout)
    assert d["lora"]["bytes"] == 2 * 12 * ((D + Q) + (D + KV)) * L * 2 and d["draft"]["model"] == "qwen2.5-0.5b"


@pytest.mark.parametrize("argv,field", [
    (["--max-loras", "2"], "--lora-rank"),
    (["--lora-rank", "8", "--lora-targets", "qkv"], "--lora-targets"),
    (["--num-speculative-tokens", "3"], "--draft-model"),
    (["--lora-rank", "0"], "--lora-rank"),
    (["--draft-model", "no-such-model"], "model"),
])
def test_bad_input_is_one_line(argv, field):
    r = capacity("plan", "--model", "llama-3.1-8b", "--accelerator", "rtx-4090", "--context", "4096", *argv)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and field in r.stderr


def test_lora_on_mla_is_refused_not_guessed():
    r = capacity("plan", "--model", "deepseek-v2-lite", "--accelerator", "h100", "--context", "4096",
                 "--lora-rank", "8")
    assert r.returncode == 2 and "--lora-rank" in r.stderr and "mla" in r.stderr
