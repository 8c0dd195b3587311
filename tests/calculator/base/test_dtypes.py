"""base/dtypes: bits per element of every weight and cache type, the compute class each runs at, ggml's block sizes,
and the one-line refusal of an unknown name. Every figure derived here from the format's definition."""
import pytest

from part1_capacity.calculator.base import dtypes
from part1_capacity.calculator.base.dtypes import DTYPES, GGUF_BLOCKS, KV_DTYPES, get_dtype
from part1_capacity.calculator.base.errors import InputError


def test_bits_per_element_by_definition():
    # IEEE / bfloat widths; fp8 and int8 one byte; int4 half; MXFP4: 32 × 4-bit values + one 8-bit scale = 136 bits
    # per 32 = 4.25; q8_0: 32 × 8 bits + a 16-bit scale = 272 bits per 32 = 8.5; q5_0: 32 × 5 + 16 = 176 per 32 = 5.5;
    # q4_k_m: the stated Llama-3-8B average, 4.9; fp4 (E2M1): 1 sign + 2 exponent + 1 mantissa bit = 4, its fp8
    # scale per 16 values counted as a weight group of its own
    want = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4, "mxfp4": (32 * 4 + 8) / 32, "fp4": 1 + 2 + 1,
            "q8_0": (32 * 8 + 16) / 32, "q5_0": (32 * 5 + 16) / 32, "q4_k_m": 4.9}
    assert {n: d.bits for n, d in DTYPES.items()} == want
    assert {n: d.bytes for n, d in DTYPES.items()} == {n: b / 8 for n, b in want.items()}
    assert all(d.name == n for n, d in DTYPES.items())


def test_ggml_block_sizes():
    # ggml-common.h: block_q8_0 = fp16 d + 32 int8 (2 + 32 bytes); block_q5_0 = fp16 d + 4 bytes of high bits +
    # 16 bytes of nibbles (22); block_q4_K = 2 fp16 + 12 bytes of scales + 128 bytes of nibbles per 256 (144);
    # block_q6_K = 128 low nibbles + 64 high bits + 16 int8 scales + fp16 d per 256 (210)
    assert GGUF_BLOCKS == {"q8_0": (2 + 32, 32), "q5_0": (2 + 4 + 16, 32), "q4_K": (2 * 2 + 12 + 128, 256),
                           "q6_K": (128 + 64 + 16 + 2, 256)}
    assert [dtypes.gguf_bits(t) for t in ("q8_0", "q5_0", "q4_K", "q6_K")] == [8.5, 5.5, 4.5, 6.5625]


def test_compute_class_of_each_type():
    # W8A8 types run at their own peak; weight-only types are dequantized to 16 bits (fp32 counted at 16 too)
    assert {n for n, d in DTYPES.items() if d.compute != "16"} == {"fp8", "int8"}
    assert (DTYPES["fp8"].compute, DTYPES["int8"].compute) == ("fp8", "int8")


def test_cache_types():
    # written element by element: no block-quantized weight format but llama.cpp's q8_0 cache
    assert KV_DTYPES == ("fp32", "bf16", "fp16", "fp8", "int8", "q8_0")


def test_a_name_is_read_whatever_its_case_and_spaces():
    assert get_dtype(" BF16 ") is DTYPES["bf16"]
    assert get_dtype("Q8_0", "kv_dtype", KV_DTYPES) is DTYPES["q8_0"]
    assert dtypes.bytes_per_element("q8_0") == 34 / 32 and dtypes.bits_per_element("mxfp4") == 4.25


def test_an_unknown_name_is_one_line_naming_the_field_and_the_allowed():
    every = ", ".join(DTYPES)
    with pytest.raises(InputError) as e:
        get_dtype("bf61", "weights_dtype")
    assert str(e.value) == f"weights_dtype: unknown dtype 'bf61' (did you mean 'bf16'?); allowed: {every}"
    with pytest.raises(InputError) as e:
        get_dtype("zzzz")                                       # nothing close: no suggestion; the default field
    assert str(e.value) == f"dtype: unknown dtype 'zzzz'; allowed: {every}"
    # a weight-only type is no cache type: refused with the cache types only
    with pytest.raises(InputError) as e:
        get_dtype("int4", "kv_dtype", KV_DTYPES)
    assert str(e.value) == "kv_dtype: unknown dtype 'int4' (did you mean 'int8'?); allowed: " + ", ".join(KV_DTYPES)
    for f, name in ((dtypes.bytes_per_element, "state_dtype"), (dtypes.bits_per_element, "weights_dtype")):
        with pytest.raises(InputError, match=f"^{name}: unknown dtype 'x'"):
            f("x", name)
    with pytest.raises(InputError, match="^dtype: unknown dtype 'x'"):
        dtypes.bits_per_element("x")
    with pytest.raises(InputError, match="^dtype: unknown dtype 'x'"):
        dtypes.bytes_per_element("x")


def test_the_suggestion_is_the_closest_name_above_half_alike():
    # difflib's ratio: "fp61" vs "fp16" shares f, p and one of 1/6 in order — 2 × 3 / 8 = 0.75 ≥ 0.5
    assert dtypes.closest("FP61", DTYPES) == " (did you mean 'fp16'?)"
    # "qq" vs "q8_0": one q in common, 2 × 1 / 6 = 0.33 < 0.5: none
    assert dtypes.closest("qq", DTYPES) == ""
    # exactly half alike is enough: "xxbf" vs "bf16" shares "bf", 2 × 2 / 8 = 0.5 (difflib's default cutoff, 0.6,
    # would suggest nothing); every other name shares at most one letter (≤ 0.25)
    assert dtypes.closest("xxbf", DTYPES) == " (did you mean 'bf16'?)"


def test_a_configs_dtype_name():
    # transformers' torch names, with or without "torch.", to the calculator's
    assert [dtypes.config_dtype(n, "f") for n in ("bfloat16", "torch.float16", "half", "float32", "torch.float")] == [
        "bf16", "fp16", "fp16", "fp32", "fp32"]
    allowed = "bfloat16, float16, half, float32, float"
    with pytest.raises(InputError) as e:
        dtypes.config_dtype("torch.float64", "torch_dtype")
    assert str(e.value) == f"torch_dtype: 'torch.float64' is a dtype the calculator does not size weights in; allowed: {allowed}"
    with pytest.raises(InputError) as e:
        dtypes.config_dtype("int4", "dtype")
    assert str(e.value) == f"dtype: 'int4' is not a dtype name; allowed: {allowed}"
    with pytest.raises(InputError) as e:
        dtypes.config_dtype(["bfloat16"], "dtype")
    assert str(e.value) == f"dtype: must be a dtype name, got ['bfloat16']; allowed: {allowed}"
    # a long value is cut to 40 characters of its repr
    with pytest.raises(InputError) as e:
        dtypes.config_dtype("x" * 100, "dtype")
    assert str(e.value) == f"dtype: {repr('x' * 100)[:40]} is not a dtype name; allowed: {allowed}"
