"""The roofline's arithmetic on hand-worked examples: MLA attention FLOPs per phase, the one step-time rule, the one
ridge point and the one 8-bit peak rule."""
import pytest

from part1_capacity.calculator.sizing import roofline
from part1_capacity.calculator.base.dtypes import DTYPES
from part1_capacity.calculator.hardware.accelerators import Accelerator, load_accelerator
from part1_capacity.calculator.readers.loader import load_model


def test_mla_attention_flops_differ_between_prefill_and_decode():
    # DeepSeek-V3 config.json: 128 heads, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, kv_lora_rank 512.
    p = load_model("deepseek-v3")
    # prefill decompresses K/V (vLLM MLA common.py docstring, "compute friendly approach"): QK width 128 + 64 = 192,
    # V width 128 → 2·128·192 + 2·128·128 = 49,152 + 32,768
    assert roofline.attention_flops_per_pair(p, "prefill") == 81_920
    # decode attends in the latent (weights absorbed): 2·128·(512 + 64) + 2·128·512 = 147,456 + 131,072
    assert roofline.attention_flops_per_pair(p, "decode") == 278_528


def test_mla_prefill_flops_use_the_decompressed_form():
    p = load_model("deepseek-v3")
    T = 131_072
    attention = roofline.prefill_flops(p, T) - 2 * p.params_active * T
    pairs = T * (T + 1) / 2
    assert attention == pytest.approx(81_920 * p.n_full_layers * pairs)
    # the absorbed form would overstate it 278,528 / 81,920 = 3.4×
    assert attention != pytest.approx(278_528 * p.n_full_layers * pairs)


def test_mla_prefill_v_width_falls_back_to_head_dim():
    p = load_model("deepseek-v3")
    from dataclasses import replace

    q = replace(p, v_head_dim=0)
    assert roofline.attention_flops_per_pair(q, "prefill") == 2 * 128 * (128 + 64) + 2 * 128 * 128


def test_gqa_attention_flops_are_the_same_in_both_phases():
    p = load_model("llama-3.1-8b")   # 32 heads × 128: 4 · 32 · 128
    assert roofline.attention_flops_per_pair(p, "prefill") == roofline.attention_flops_per_pair(p, "decode") == 16_384
    with pytest.raises(ValueError):
        roofline.attention_flops_per_pair(p, "training")


def test_step_time_is_the_slower_of_arithmetic_and_memory():
    # 2e12 FLOP at 1e12 FLOP/s = 2 s; 1e9 bytes at 1e9 B/s = 1 s → 2 s (compute-bound)
    assert roofline.step_time(2e12, 1e9, 1e12, 1e9) == pytest.approx(2.0)
    # 3 GB at 1 GB/s = 3 s > 2 s → 3 s (memory-bound)
    assert roofline.step_time(2e12, 3e9, 1e12, 1e9) == pytest.approx(3.0)
    # a slower tier adds to the memory side: 1 s + 1.5 s = 2.5 s > 2 s
    assert roofline.step_time(2e12, 1e9, 1e12, 1e9, extra_seconds=1.5) == pytest.approx(2.5)


def test_ridge_point_is_one_rule():
    h100 = load_accelerator("h100")   # 989 TFLOP/s bf16, 1,979 fp8, 3.35 TB/s
    assert roofline.ridge_point(989e12, 3.35e12) == pytest.approx(295.2, abs=0.1)
    assert roofline.ridge_point(h100.peak_flops("bf16"), h100.bandwidth) == pytest.approx(989e12 / 3.35e12)
    assert roofline.ridge_point(h100.peak_flops("fp8"), h100.bandwidth) == pytest.approx(1979e12 / 3.35e12)


def test_peak_follows_the_dtype_compute_class():
    assert {n: d.compute for n, d in DTYPES.items() if d.compute != "16"} == {"fp8": "fp8", "int8": "int8"}
    acc = Accelerator("x", "x", "host", 1e9, 1e9, flops_16=1e12, flops_fp8=0.0, flops_int8=4e12)
    assert acc.peak_flops("int8") == 4e12
    assert acc.peak_flops("fp8") == 1e12        # no fp8 units: the 16-bit peak
    assert acc.peak_flops("q8_0") == 1e12       # GGUF types are weight-only: 16-bit class
    assert acc.peak_flops("fp32") == 1e12
