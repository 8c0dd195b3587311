"""Data types: name → bits (and bytes) per element, and which compute peak a weight type runs at.

Block-quantized types store a scale beside each block, so their bits per element are not whole numbers:

- ``q8_0``: 32 int8 values + one fp16 scale = 34 bytes per 32 → 8.5 bits (llama.cpp ``ggml-common.h``, block_q8_0).
- ``q5_0``: 32 values × 5 bits + fp16 scale = 22 bytes per 32 → 5.5 bits (block_q5_0).
- ``q4_k_m``: a *mix* — most tensors Q4_K (144 bytes per 256 = 4.5 bits), half of ``attn_v``/``ffn_down`` and the
  output in Q6_K (210 bytes per 256 = 6.5625 bits). The effective average depends on the model: 4.9 is the
  figure for Llama-3-8B printed by ``llama-quantize --help`` ("Q4_K_M : 4.58G" for 8.03B weights, G = GiB:
  4.58 × 2³⁰ × 8 / 8.03e9 = 4.90; the same table's "Q8_0 : 7.96G" gives 8.5, the exact Q8_0 rate). Small models
  come out lower (this repository's engine checks saw 4.8). Labelled an average, not an exact figure.
- ``mxfp4``: OCP Microscaling FP4, 32 FP4 values share one 8-bit exponent scale → 4.25 bits (OCP MX spec v1.0);
  gpt-oss ships its MoE experts in it.
- ``fp4``: the 4-bit float elements (E2M1) alone; NVFP4 checkpoints (ModelOpt's, llm-compressor's) store one fp8 E4M3
  scale per 16 of them, counted as a weight group of its own (4 + 8 / 16 = 4.5 bits per weight together).

Compute class (``DType.compute``, read by ``accelerators.Accelerator.peak_flops``): fp8 and int8 weights run matrix
products at the accelerator's fp8 or int8 peak (W8A8); 4-bit and GGUF
types are *weight-only* quantization — dequantized and multiplied at 16-bit — so they use the 16-bit peak.
fp32 is counted at the 16-bit peak too (an optimistic simplification: engines run fp32 checkpoints in bf16).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from part1_capacity.calculator.base.errors import InputError

# ggml's block-quantized types: (bytes of one block, values in it), llama.cpp ggml/src/ggml-common.h — block_q8_0
# (32 int8 + an fp16 scale), block_q5_0 (32 × 5 bits + an fp16 scale), block_q4_K and block_q6_K (super-blocks of
# 256). The one place these sizes are written; ``GGUF_BLOCKS[t][0] / GGUF_BLOCKS[t][1]`` is bytes per value.
GGUF_BLOCKS = {"q8_0": (34, 32), "q5_0": (22, 32), "q4_K": (144, 256), "q6_K": (210, 256)}


def gguf_bits(block_type: str) -> float:
    """Bits per value of one of ggml's block types (``GGUF_BLOCKS``), its scales included."""
    nbytes, values = GGUF_BLOCKS[block_type]
    return nbytes * 8 / values


@dataclass(frozen=True)
class DType:
    name: str
    bits: float          # bits per element, including block scales
    compute: str         # "16", "fp8" or "int8": which peak FLOP/s a matmul with these weights runs at
    note: str = ""

    @property
    def bytes(self) -> float:
        """Bytes per element (may be fractional for block-quantized types)."""
        return self.bits / 8


DTYPES = {d.name: d for d in (
    DType("fp32", 32, "16", "IEEE single"),
    DType("bf16", 16, "16", "bfloat16"),
    DType("fp16", 16, "16", "IEEE half"),
    DType("fp8", 8, "fp8", "e4m3/e5m2"),
    DType("int8", 8, "int8", "per-channel int8 (W8A8)"),
    DType("int4", 4, "16", "weight-only int4 (a config's group scales are a weight group of their own)"),
    DType("mxfp4", 4.25, "16", "OCP MX FP4: 32 values share an 8-bit scale"),
    DType("fp4", 4, "16", "4-bit float E2M1, NVFP4's elements (its fp8 scale per 16 values is a weight group of its own)"),
    DType("q8_0", gguf_bits("q8_0"), "16", "GGUF: 34 bytes per 32 values"),
    DType("q5_0", gguf_bits("q5_0"), "16", "GGUF: 22 bytes per 32 values"),
    DType("q4_k_m", 4.9, "16", "GGUF mix of Q4_K (4.5) and Q6_K (6.5625); Llama-3-8B average"),
)}

# KV caches are written element by element: the block-quantized weight formats are not KV formats here
# (llama.cpp's q8_0 KV cache is the exception and is allowed).
KV_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "q8_0")


# A config.json's dtype names (``torch_dtype``, ``dtype``, ``mamba_ssm_dtype``...) → the calculator's: the one table
# every reader of a config's dtype uses. transformers reads these fields as torch attribute names
# (``PretrainedConfig``: ``getattr(torch, name)`` for a string; ``torch.`` prefixed names as its older files wrote).
CONFIG_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}
# torch's other dtype names: real, but not a precision a checkpoint's weights are sized in here (float64, the
# integer and float8 types, which a checkpoint states through its quantization_config instead)
OTHER_TORCH_DTYPES = ("float64", "double", "complex32", "complex64", "complex128", "cfloat", "cdouble", "chalf",
                      "uint8", "int8", "int16", "short", "int32", "int", "int64", "long", "uint16", "uint32",
                      "uint64", "bool", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                      "float8_e8m0fnu", "float4_e2m1fn_x2", "quint8", "qint8", "qint32", "quint4x2", "auto")


def config_dtype(value, field: str) -> str:
    """The calculator's dtype for a config's dtype name (``"bfloat16"``, ``"torch.float16"``); anything else — a
    torch dtype the calculator cannot size (``"float64"``), a name torch does not have (``"int4"``), a list or a
    number — refused by ``field`` with the allowed names."""
    allowed = ", ".join(CONFIG_DTYPES)
    if not isinstance(value, str):
        raise InputError(f"{field}: must be a dtype name, got {value!r:.40}; allowed: {allowed}")
    key = value.removeprefix("torch.")
    if key in CONFIG_DTYPES:
        return CONFIG_DTYPES[key]
    what = "a dtype the calculator does not size weights in" if key in OTHER_TORCH_DTYPES else "not a dtype name"
    raise InputError(f"{field}: {value!r:.40} is {what}; allowed: {allowed}")


def closest(name: str, allowed) -> str:
    """``" (did you mean X?)"`` for the closest allowed name, or ``""``."""
    match = difflib.get_close_matches(str(name).lower(), list(allowed), n=1, cutoff=0.5)
    return f" (did you mean '{match[0]}'?)" if match else ""


def get_dtype(name: str, field: str = "dtype", allowed=None) -> DType:
    """Look up a dtype by name (case-insensitive); raise ``InputError`` naming ``field`` and the allowed values."""
    allowed = tuple(allowed or DTYPES)
    key = str(name).strip().lower()
    if key not in allowed:
        raise InputError(f"{field}: unknown dtype '{name}'{closest(key, allowed)}; allowed: {', '.join(allowed)}")
    return DTYPES[key]


def bytes_per_element(name: str, field: str = "dtype") -> float:
    """Bytes per element of dtype ``name``."""
    return get_dtype(name, field).bytes


def bits_per_element(name: str, field: str = "dtype") -> float:
    """Bits per element of dtype ``name``."""
    return get_dtype(name, field).bits
