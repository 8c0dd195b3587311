"""Part 1's exercises: the reference solutions pass every check, hand-worked figures, and every check rejects
wrong implementations a learner could write (each with the mistake named)."""
import math

import pytest

from course.grading.contract import CheckFailed
from part1_capacity.exercises.kv_from_config import checks as kv_checks
from part1_capacity.exercises.kv_from_config.checks import read_config
from part1_capacity.exercises.kv_from_config.reference import kv_bytes_per_token
from part1_capacity.exercises.one_more_accelerator import checks as acc_checks
from part1_capacity.exercises.one_more_accelerator.reference import added_by_kv, first_context_adding_an_accelerator


# --- KV bytes per token from config.json ---------------------------------------------------------------------------
@pytest.mark.parametrize("name, bpe, want", [
    ("gpt2", 2, 2 * 12 * 12 * 64 * 2),                    # n_layer 12, n_head 12, n_embd 768 → head_dim 64, MHA
    ("qwen2.5-0.5b", 2, 2 * 24 * 2 * 64 * 2),             # 24 layers, 2 K/V heads, 896 / 14 = 64
    ("llama-3.1-70b", 1, 2 * 80 * 8 * 128 * 1),           # 80 layers, 8 K/V heads, head_dim 128, fp8
    ("mistral-nemo-12b", 2, 2 * 40 * 8 * 128 * 2),        # head_dim 128 set in the file (5120 / 32 would be 160)
    ("deepseek-r1", 2, 61 * (512 + 64) * 2),              # MLA: 61 layers × (latent 512 + RoPE key 64)
    ("deepseek-v2.5", 34 / 32, 60 * (512 + 64) * 34 / 32),
])
def test_reference_by_hand(name, bpe, want):
    assert kv_bytes_per_token(read_config(name), bpe) == want


@pytest.mark.parametrize("check_id", list(kv_checks.ALL))
def test_kv_reference_passes(check_id):
    kv_checks.ALL[check_id][1](kv_bytes_per_token)


def _no_factor_2(cfg, b):
    return kv_bytes_per_token(cfg, b) / 2


def _query_heads(cfg, b):  # every query head cached, as if all models were MHA
    c = dict(cfg)
    c.pop("num_key_value_heads", None)
    return kv_bytes_per_token(c, b)


def _head_dim_from_hidden(cfg, b):  # ignores a head_dim set in the file
    c = dict(cfg)
    c.pop("head_dim", None)
    return kv_bytes_per_token(c, b)


def _mla_as_gqa(cfg, b):  # reads an MLA file as if it had K/V heads
    c = {k: v for k, v in cfg.items() if k != "kv_lora_rank"}
    return kv_bytes_per_token(c, b)


def _mla_times_2(cfg, b):
    return kv_bytes_per_token(cfg, b) * (2 if cfg.get("kv_lora_rank") else 1)


def _llama_names_only(cfg, b):  # fails on GPT-2's n_layer / n_head / n_embd
    return 2 * cfg["num_hidden_layers"] * cfg.get("num_key_value_heads", cfg["num_attention_heads"]) * \
        cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"]) * b


def _integer_bytes(cfg, b):  # rounds q8_0's 34/32 bytes per element down to 1
    return kv_bytes_per_token(cfg, int(b))


@pytest.mark.parametrize("wrong, hint", [
    (_no_factor_2, "key AND a value"), (_query_heads, "num_key_value_heads"), (_head_dim_from_hidden, "head_dim"),
    (_llama_names_only, "raised"), (_integer_bytes, "bytes per element"),
])
def test_full_attention_check_rejects(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        kv_checks.check_full_attention(wrong)


@pytest.mark.parametrize("wrong, hint", [(_mla_as_gqa, "the law gives"), (_mla_times_2, "one latent per token")])
def test_mla_check_rejects(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        kv_checks.check_mla(wrong)


def test_kv_checks_reject_a_non_number():
    with pytest.raises(CheckFailed, match="number of bytes"):
        kv_checks.check_full_attention(lambda cfg, b: f"{kv_bytes_per_token(cfg, b)} bytes")


# --- the context that adds an accelerator --------------------------------------------------------------------------
@pytest.mark.parametrize("check_id", list(acc_checks.ALL))
def test_search_reference_passes(check_id):
    acc_checks.ALL[check_id][1](first_context_adding_an_accelerator)


def test_search_on_a_real_deployment_by_hand():
    """Llama 3.1 70B on H100s, 8 sequences: at the context found, the cache of the batch no longer fits beside the
    weights, one token less it does."""
    added = added_by_kv("llama-3.1-70b", "h100", 8)
    T = first_context_adding_an_accelerator(added, 131072)
    assert added(T) >= 1 and added(T - 1) == 0
    # By hand: the weights (70.55e9 parameters × 2 B) fit on tensor 2, each H100 offering 79.19 GiB (its runtime's
    # total) × 0.9 − 2 GiB = 74.38 GB, so 3.83 GB per rank are left; 8 sequences at 320 KiB per token
    # (2 × 80 × 8 × 128 × 2 bytes), half on each rank, outgrow it past 3.83e9 / (8 × 327,680 / 2) = 2,921.4 tokens.
    free = 79.19 * 2 ** 30 * 0.9 - 2 * 2 ** 30 - 70.55e9 * 2 / 2
    assert T == math.floor(free / (8 * 327680 / 2)) + 1 == 2922


def _linear(added, max_context):
    for t in range(1, max_context + 1):
        if added(t) != 0:
            return t
    return None


def _off_by_one(added, max_context):  # returns the last context that still adds nothing
    t = first_context_adding_an_accelerator(added, max_context)
    return None if t is None else t - 1


def _powers_of_two(added, max_context):  # doubles the context and stops at the first power of two that adds one
    t = 1
    while t <= max_context:
        if added(t) != 0:
            return t
        t *= 2
    return None


def _max_instead_of_none(added, max_context):
    t = first_context_adding_an_accelerator(added, max_context)
    return max_context if t is None else t


def _zero_based(added, max_context):  # bisects over 0 … max_context and asks about context 0
    lo, hi = -1, max_context
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if added(mid) == 0 else (lo, mid)
    return hi if added(max_context) != 0 else None


@pytest.mark.parametrize("wrong, hint", [(_linear, "bisection"), (_off_by_one, "you return"),
                                         (_powers_of_two, "you return"), (_zero_based, "context 0")])
def test_bisection_check_rejects(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        acc_checks.check_bisection(wrong)


@pytest.mark.parametrize("wrong", [_max_instead_of_none, lambda added, m: 0])
def test_none_check_rejects(wrong):
    with pytest.raises(CheckFailed, match="None"):
        acc_checks.check_none_when_never(wrong)


@pytest.mark.parametrize("wrong, hint", [(_off_by_one, "adds no accelerator yet"),
                                         (lambda added, m: m, "is not the first"),
                                         (lambda added, m: None, "expected a context")])
def test_real_deployment_check_rejects(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        acc_checks.check_real_deployments(wrong)


def test_counted_budget_is_bisection():
    c = acc_checks.Counted(5, 131072)
    assert c.budget == math.ceil(math.log2(131072)) + 2 == 19
