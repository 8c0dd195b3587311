"""Checks of the KV-bytes-from-config exercise: called by the notebook's autograder cells, by
tests/autograder/test_kv_from_config.py and by the reference tests. Each takes the learner's function and raises
CheckFailed with a message for the learner.

The expected figure for each published ``config.json`` is the calculator's own (``part1_capacity.calculator.model.configs`` reads the
file the way ``transformers`` does, then lesson 03's law), never the reference solution of this exercise.
"""
from __future__ import annotations

import copy
import json
import numbers
from pathlib import Path

from course.grading.contract import Check, Lesson, call, expect
from part0_foundations.l03_kv_cache import laws
from part1_capacity.calculator.base.dtypes import bytes_per_element
from part1_capacity.calculator.model.profiles import bundled_models

# Published config.json files, copied verbatim with their sources (tests/data/configs/README.md), and the bundled
# calculator profile of the same model (its figures sourced in part1_capacity/calculator/data/models.json).
CONFIGS = Path(__file__).resolve().parents[3] / "tests" / "data" / "configs"
FULL_ATTENTION = {"gpt2": "gpt2", "qwen2.5-0.5b": "qwen2.5-0.5b", "qwen3-8b": "qwen3-8b",
                  "llama-3.1-70b": "llama-3.1-70b", "mistral-nemo-12b": "mistral-nemo-12b"}
MLA = {"deepseek-r1": "deepseek-v3"}  # DeepSeek-R1 is the DeepSeek-V3 architecture
BYTES_PER_ELEMENT = (2, 1, bytes_per_element("q8_0"))  # bf16, fp8, q8_0 (34 bytes per block of 32: 1.0625)


def read_config(name: str) -> dict:
    """The published config.json of a model, as a dict."""
    return json.loads((CONFIGS / name / "config.json").read_text())


def calculator_kv_bytes_per_token(profile_id: str, bytes_per_element: float) -> float:
    """What the calculator says for the model: its bundled profile, then lesson 03's law."""
    return bundled_models()[profile_id].kv_bytes_per_token(bytes_per_element)


def variants():
    """Files a family could publish, made from the real ones, with the law's answer from their own fields:
    (label, config, bytes per element → expected bytes per token)."""
    llama = read_config("llama-3.1-70b")
    mha = {k: v for k, v in llama.items() if k not in ("num_key_value_heads", "head_dim")}
    mha["num_hidden_layers"] = 10
    yield ("llama-3.1-70b without num_key_value_heads or head_dim (so MHA, head_dim = hidden / heads), 10 layers",
           mha, lambda b: laws.kv_bytes_per_token(10, 64, 8192 // 64, b))
    mqa = dict(llama, num_key_value_heads=1, head_dim=256)
    yield ("llama-3.1-70b made MQA (1 K/V head) with head_dim 256", mqa, lambda b: laws.kv_bytes_per_token(80, 1, 256, b))
    r1 = read_config("deepseek-r1")
    small = dict(r1, num_hidden_layers=27, kv_lora_rank=256, qk_rope_head_dim=32)
    yield ("deepseek-r1 with 27 layers, kv_lora_rank 256, qk_rope_head_dim 32", small,
           lambda b: laws.mla_bytes_per_token(27, 256, 32, b))


def _hint(cfg: dict, got: float, want: float) -> str:
    if got * 2 == want:
        return " — half the answer: a token stores a key AND a value in each K/V head"
    if got == want * 2 and cfg.get("kv_lora_rank"):
        return " — twice the answer: MLA caches one latent per token, not a key and a value"
    heads = cfg.get("num_attention_heads")
    if heads and cfg.get("num_key_value_heads") and got == want * heads / cfg["num_key_value_heads"]:
        return " — this counts every query head; only the K/V heads (num_key_value_heads) are cached"
    if cfg.get("head_dim") and heads and cfg["head_dim"] != cfg["hidden_size"] // heads:
        return " — this file sets head_dim itself; it is not hidden_size / num_attention_heads here"
    return ""


def _agree(fn, label: str, cfg: dict, want_for) -> None:
    for b in BYTES_PER_ELEMENT:
        got = call(fn, copy.deepcopy(cfg), b, what=f"kv_bytes_per_token(<{label}>, {b:g})")
        expect(isinstance(got, numbers.Real) and not isinstance(got, bool),
               f"{label}: kv_bytes_per_token must return a number of bytes, got {type(got).__name__}")
        want = want_for(b)
        expect(abs(float(got) - want) <= 1e-9 * want,
               f"{label} at {b:g} bytes per element: you give {float(got):,.2f} bytes per token, the law gives "
               f"{want:,.2f}{_hint(cfg, float(got), want)}")


def _published(fn, table: dict) -> None:
    for name, profile_id in table.items():
        _agree(fn, f"{name} config.json", read_config(name),
               lambda b, pid=profile_id: calculator_kv_bytes_per_token(pid, b))


def check_full_attention(kv_bytes_per_token):
    """MHA, GQA and MQA models (GPT-2, Qwen2.5, Qwen3, Llama 3.1, Mistral NeMo): 2 × layers × K/V heads × head_dim
    × bytes, read from each family's own field names, at bf16, fp8 and q8_0."""
    _published(kv_bytes_per_token, FULL_ATTENTION)
    for label, cfg, want_for in variants():
        if not cfg.get("kv_lora_rank"):
            _agree(kv_bytes_per_token, label, cfg, want_for)


def check_mla(kv_bytes_per_token):
    """MLA models (DeepSeek-R1, and a smaller variant of it): layers × (kv_lora_rank + qk_rope_head_dim) × bytes,
    no factor 2."""
    _published(kv_bytes_per_token, MLA)
    for label, cfg, want_for in variants():
        if cfg.get("kv_lora_rank"):
            _agree(kv_bytes_per_token, label, cfg, want_for)


LESSON = Lesson(
    package="part1_capacity.exercises.kv_from_config",
    reference=("part1_capacity.exercises.kv_from_config.reference",),
    given=("read_config",),
    checks=(
        Check("full_attention", "kv_bytes_per_token", check_full_attention, 3),
        Check("mla", "kv_bytes_per_token", check_mla, 2),
    ),
)
"""The exercise's contract: the notebook's test cells, tests/autograder and the checks' own tests all read it."""
ALL = LESSON.table()
