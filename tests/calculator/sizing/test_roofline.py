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


def test_the_ridge_point_is_one_accelerators_whatever_the_tensor_degree():
    """The ridge is a property of one accelerator: peak ÷ bandwidth. Splitting a pass over t ranks divides its FLOPs
    and its bytes alike, so its intensity and the ridge it is compared with stay put. H100 bf16: 989e12 FLOP/s ÷
    3.35e12 B/s = 295.2 FLOP/byte, on 4 ranks as on one (times 4 it would be 1,180.9)."""
    h100 = load_accelerator("h100")
    one = roofline.phase(1e12, 1e10, h100, "bf16", devices=1)
    four = roofline.phase(1e12, 1e10, h100, "bf16", devices=4)
    assert one.ridge_point == four.ridge_point == pytest.approx(989e12 / 3.35e12)
    assert four.arithmetic_intensity == one.arithmetic_intensity == 100.0      # 1e12 FLOPs / 1e10 bytes
    # the plan of a model that needs tensor parallelism: Llama-3.1-70B's 141.1 GB of bf16 weights on 80 GB H100s
    from part1_capacity.calculator.plan.plan import make_plan
    d = make_plan("llama-3.1-70b", "h100", context=8192, batch=8).to_dict()
    assert d["parallelism"]["tensor"] > 1
    assert d["decode"]["ridge_point"] == d["prefill"]["ridge_point"] == pytest.approx(989e12 / 3.35e12)


def _toy(**kw):
    """A made-up profile with just what the roofline reads: 2 heads × 4 (4 · 2 · 4 = 32 FLOPs a pair), one full and
    one window layer (window 3), 10 parameters all active, no recurrent state."""
    from types import SimpleNamespace
    base = dict(is_mla=False, n_heads=2, head_dim=4, n_full_layers=1, n_window_layers=1, window=3, ssm=None,
                params_active=10, params_total=10, params_routed=0)
    return SimpleNamespace(**{**base, **kw})


def test_prefill_counts_causal_pairs_and_the_window():
    p = _toy()
    # T = 5: full layer Σ i = 15 pairs; window 3: 1 + 2 + 3 + 3 + 3 = 12 → 32 × 27 = 864; matmuls 2 × 10 × 5 = 100
    assert roofline.prefill_attention_flops(p, 5) == 864
    assert roofline.prefill_flops(p, 5) == 964
    # T = 3 (within the window): 6 + 6 pairs → 384; T = 2: 3 + 3 → 192
    assert roofline.prefill_attention_flops(p, 3) == 384
    assert roofline.prefill_attention_flops(p, 2) == 192
    # recurrent layers: 2 × state elements per token per layer, 2 × 7 × 2 layers × 5 tokens = 140
    s = _toy(n_window_layers=0, ssm=__import__("types").SimpleNamespace(state_elements=7, n_layers=2))
    assert roofline.prefill_attention_flops(s, 5) == 32 * 15 + 140


def test_decode_reads_each_sequences_cache_once_per_token():
    p = _toy()
    # one token at 5 cached: full layer 5 pairs, window layer min(5, 3) = 3 → 32 × 8 = 256; matmuls 2 × 10 = 20;
    # two sequences: 2 × (20 + 256) = 552, of which 512 beyond the matmuls
    assert roofline.decode_flops(p, 5, 2) == 552
    assert roofline.decode_attention_flops(p, 5, 2) == 512
    s = _toy(n_window_layers=0, ssm=__import__("types").SimpleNamespace(state_elements=7, n_layers=2))
    # 5 pairs of the full layer + 2 × 7 × 2 = 28 of state per token, 3 sequences: 3 × (160 + 28) = 564
    assert roofline.decode_attention_flops(s, 5, 3) == 564
    assert roofline.decode_flops(s, 5, 3) == 564 + 3 * 20


def test_the_weights_a_pass_reads():
    # dense: all of it, whatever the tokens
    assert roofline.weights_read_fraction(_toy(), 1) == 1.0
    # no routed split given, 25 of 100 active: 1 − 0.75² = 0.4375 for 2 tokens
    assert roofline.weights_read_fraction(_toy(params_active=25, params_total=100), 2) == 0.4375
    # 100 parameters, 80 routed, 30 active: dense 20, k/E = 10 / 80 = 0.125; 2 tokens read 1 − 0.875² = 0.234375 of
    # the experts: (20 + 80 × 0.234375) / 100 = 0.3875; no token reads the dense part only (0.2)
    moe = _toy(params_active=30, params_total=100, params_routed=80)
    assert roofline.weights_read_fraction(moe, 2) == pytest.approx(0.3875)
    assert roofline.weights_read_fraction(moe, 0) == pytest.approx(0.2)
    # k/E at least 0: active below the dense part reads the dense part only
    assert roofline.weights_read_fraction(_toy(params_active=10, params_total=100, params_routed=80), 4) == 0.2
    # 90 dense, 10 routed, 99 active: k/E = 0.9, one token reads (90 + 9) / 100
    assert roofline.weights_read_fraction(_toy(params_active=99, params_total=100, params_routed=10), 1) == \
        pytest.approx(0.99)


def test_a_phase_on_the_roofline():
    acc = Accelerator("x", "x", "host", 1e9, 1e9, flops_16=1e12)
    # 2e12 FLOPs, 1e9 bytes on 2 devices: compute 2e12 / 2e12 = 1 s, memory 1e9 / 2e9 = 0.5 s → compute, 1 s;
    # intensity 2,000 FLOP/byte against a ridge of 1e12 / 1e9 = 1,000
    ph = roofline.phase(2e12, 1e9, acc, "bf16", devices=2)
    assert (ph.flops, ph.bytes, ph.arithmetic_intensity, ph.ridge_point, ph.bound, ph.time_s, ph.basis) == (
        2e12, 1e9, 2000.0, 1000.0, "compute", 1.0, "roofline")
    # a slower tier's 0.75 s on the memory side: 1.25 s > 1 s → memory-bound, 1.25 s
    ph = roofline.phase(2e12, 1e9, acc, "bf16", devices=2, extra_seconds=0.75)
    assert (ph.bound, ph.time_s) == ("memory", 1.25)
    # equal sides count as compute-bound; a time given from elsewhere is kept with its basis
    ph = roofline.phase(1e12, 1e9, acc, "bf16", time_s=7, basis="measured kernels")
    assert (ph.bound, ph.time_s, ph.basis) == ("compute", 7.0, "measured kernels")
    assert ph.to_dict() == {"flops": 1e12, "bytes": 1e9, "arithmetic_intensity": 1000.0, "ridge_point": 1000.0,
                            "bound": "compute", "time_s": 7.0, "basis": "measured kernels"}
    assert all(type(v) is float for k, v in ph.to_dict().items() if k not in ("bound", "basis"))


def test_the_roofline_edges_by_hand():
    p = _toy()
    # T = 1 against a window of 3: 1 pair in each layer → 32 × 2 = 64 (the full-window formula would give
    # 3·4/2 + (1 − 3)·3 = 0 for the window layer)
    assert roofline.prefill_attention_flops(p, 1) == 64
    # prefill with recurrent layers: matmuls 2 × 10 × 5 = 100 + attention 32 × 15 = 480 + state 2 × 7 × 2 × 5 = 140
    s = _toy(n_window_layers=0, ssm=__import__("types").SimpleNamespace(state_elements=7, n_layers=2))
    assert roofline.prefill_flops(s, 5) == 720
    # the phase by default is decode (MLA: the absorbed form, 278,528 for DeepSeek-V3); an unknown phase names both
    v3 = load_model("deepseek-v3")
    assert roofline.attention_flops_per_pair(v3) == 278_528
    with pytest.raises(ValueError, match=r"^phase must be one of \('prefill', 'decode'\), got 'training'$"):
        roofline.attention_flops_per_pair(v3, "training")
    # one routed parameter is still a routed split: 100 parameters, 1 routed, 99.5 active → dense 99, k/E 0.5;
    # 2 tokens read (99 + 1 × 0.75) / 100 = 0.9975 (the whole-model fallback would say 1 − 0.005² = 0.999975)
    assert roofline.weights_read_fraction(_toy(params_active=99.5, params_total=100, params_routed=1), 2) == \
        pytest.approx(0.9975)
    # one device by default: 2e12 FLOPs at 1e12 FLOP/s = 2 s
    acc = Accelerator("x", "x", "host", 1e9, 1e9, flops_16=1e12)
    assert roofline.phase(2e12, 1e9, acc, "bf16").time_s == 2.0
    # a phase's dict is all floats but its words, whatever numbers it was built with
    d = roofline.Phase(1, 2, 3, 4, "memory", 5).to_dict()
    assert d == {"flops": 1.0, "bytes": 2.0, "arithmetic_intensity": 3.0, "ridge_point": 4.0, "bound": "memory",
                 "time_s": 5.0, "basis": "roofline"}
    assert [type(v) for v in d.values()] == [float, float, float, float, str, float, str]
