"""Write llama-architecture GGUF files with the ``gguf`` package, and read a model's shape back from any GGUF.

The weights are random (normal, std 0.02): an engine's memory and speed depend on the shapes and the storage
type, not on the values. The tokenizer is the minimal one llama.cpp accepts (model "llama"): ``<unk>``, ``<s>``,
``</s>``, the 256 byte tokens, then plain pieces.

Tensors are streamed to disk one at a time, so a 2 GB F32 model never sits in memory whole.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from part1_capacity.calculator.readers import gguf_header
from part1_capacity.calculator.base import validate
from part1_capacity.calculator.readers.checkpoints import gguf_field
from part1_capacity.calculator.base.errors import InputError


@dataclass(frozen=True)
class LlamaShape:
    """A llama-architecture decoder (RMSNorm, RoPE, GQA attention, SwiGLU feed-forward)."""

    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_ff: int              # a multiple of 256: K-quants pack rows in super-blocks of 256
    vocab_size: int = 512
    n_ctx_train: int = 32768

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def n_params(self) -> int:
        """Parameters in every tensor the file holds (embeddings, output, norms included)."""
        d, kv = self.d_model, self.n_kv_heads * self.head_dim
        per_layer = 2 * d + d * d + 2 * d * kv + d * d + 3 * d * self.d_ff
        return 2 * self.vocab_size * d + d + self.n_layers * per_layer

    def to_dict(self) -> dict:
        return {**asdict(self), "head_dim": self.head_dim, "n_params": self.n_params()}


# Small enough for tests in seconds (~1.6 M parameters), with the structure of a real model (GQA, SwiGLU).
TINY = LlamaShape(n_layers=2, d_model=256, n_heads=4, n_kv_heads=2, d_ff=768)

# Widths with real-model proportions (head_dim 64-128, GQA, d_ff ≈ 2.7 × d_model rounded to 256).
_WIDTHS = ((256, 4, 2, 768), (512, 8, 4, 1536), (1024, 8, 4, 2816), (1536, 12, 4, 4096),
           (2048, 16, 4, 5632), (3072, 24, 8, 8192), (4096, 32, 8, 11008))


def shape_for_params(n_params: int) -> LlamaShape:
    """The narrowest ladder width that reaches ``n_params`` with at most ``d_model / 64`` layers (deep and narrow
    models are rare), with enough layers to reach at least ``n_params``."""
    if not isinstance(n_params, int) or n_params < TINY.n_params():
        raise InputError(f"--params: must be an integer ≥ {TINY.n_params():,} (the tiny model), got {n_params!r}")
    for d, h, hkv, ff in _WIDTHS:
        one = LlamaShape(1, d, h, hkv, ff)
        per_layer = one.n_params() - LlamaShape(0, d, h, hkv, ff).n_params()
        layers = max(1, math.ceil((n_params - LlamaShape(0, d, h, hkv, ff).n_params()) / per_layer))
        if layers <= d // 64:
            return LlamaShape(layers, d, h, hkv, ff)
    raise InputError(f"--params: at most {LlamaShape(64, *_WIDTHS[-1]).n_params():,} supported, got {n_params:,}")


def tokenizer_vocab(vocab_size: int):
    import gguf

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    n_plain = vocab_size - len(tokens)
    if n_plain < 1:
        raise InputError(f"vocab_size: must be > {len(tokens)} (specials and byte tokens), got {vocab_size}")
    tokens += [f"\u2581t{i}" for i in range(n_plain)]
    types += [gguf.TokenType.NORMAL] * n_plain
    scores = [0.0] * 259 + [-float(i) for i in range(n_plain)]
    return tokens, scores, [int(t) for t in types]


def add_tokenizer(w, vocab_size: int) -> None:
    """Write the synthetic llama tokenizer (``tokenizer_vocab``: <unk>=0, <s>=1, </s>=2, byte tokens, plain
    tokens) into a ``gguf.GGUFWriter``: every model this package writes carries the same one."""
    tokens, scores, types = tokenizer_vocab(vocab_size)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)


def _tensors(shape: LlamaShape):
    """(name, numpy shape) in file order. numpy shape is (rows, cols) = (out, in); GGUF stores it reversed."""
    d, kv, ff = shape.d_model, shape.n_kv_heads * shape.head_dim, shape.d_ff
    yield "token_embd.weight", (shape.vocab_size, d)
    for i in range(shape.n_layers):
        b = f"blk.{i}."
        yield b + "attn_norm.weight", (d,)
        yield b + "attn_q.weight", (d, d)
        yield b + "attn_k.weight", (kv, d)
        yield b + "attn_v.weight", (kv, d)
        yield b + "attn_output.weight", (d, d)
        yield b + "ffn_norm.weight", (d,)
        yield b + "ffn_gate.weight", (ff, d)
        yield b + "ffn_up.weight", (ff, d)
        yield b + "ffn_down.weight", (d, ff)
    yield "output_norm.weight", (d,)
    yield "output.weight", (shape.vocab_size, d)


def write_llama_gguf(path, shape: LlamaShape, seed: int = 0, dtype: str = "f32", progress=None) -> Path:
    """Write a llama-architecture GGUF of ``shape`` to ``path``: matrices in ``dtype`` ("f32" or "f16"), norms in
    F32 (as llama.cpp keeps 1-D tensors); ``progress(done_bytes, total_bytes)`` after each tensor."""
    import gguf

    if dtype not in ("f32", "f16"):
        raise InputError(f"dtype: '{dtype}' is not one of f32, f16")
    matrix = np.dtype(np.float32 if dtype == "f32" else np.float16)

    if shape.d_ff % 256 or shape.d_model % 256:
        raise InputError("shape: d_model and d_ff must be multiples of 256 (K-quant super-blocks)")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(f"course-llama-{shape.n_params() / 1e6:.0f}M-random")
    w.add_context_length(shape.n_ctx_train)
    w.add_embedding_length(shape.d_model)
    w.add_block_count(shape.n_layers)
    w.add_feed_forward_length(shape.d_ff)
    w.add_head_count(shape.n_heads)
    w.add_head_count_kv(shape.n_kv_heads)
    w.add_rope_dimension_count(shape.head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(shape.vocab_size)
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if dtype == "f32" else gguf.LlamaFileType.MOSTLY_F16)
    add_tokenizer(w, shape.vocab_size)

    specs = [(name, shp, np.dtype(np.float32) if len(shp) == 1 else matrix) for name, shp in _tensors(shape)]
    for name, shp, dt in specs:
        w.add_tensor_info(name, shp, dt, int(np.prod(shp)) * dt.itemsize)
    total = sum(int(np.prod(shp)) * dt.itemsize for _, shp, dt in specs)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(seed)
    done = 0
    for name, shp, dt in specs:
        if name.endswith("norm.weight"):
            t = np.ones(shp, dtype=np.float32)
        else:
            t = rng.standard_normal(shp, dtype=np.float32)
            t *= 0.02
        t = t.astype(dt, copy=False)
        w.write_tensor_data(t)
        done += t.nbytes
        if progress:
            progress(done, total)
    w.close()
    return path


# --- reading any GGUF ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GGUFShape:
    """What the KV formula needs, read from a GGUF's metadata (per layer values must be uniform)."""

    architecture: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim_k: int
    head_dim_v: int
    hidden_size: int
    n_ctx_train: int
    n_params: int
    file_type: int | None = None   # general.file_type (0: all F32, 1: mostly F16, 7: Q8_0, ...)
    name: str = ""


def _uniform(value, key):
    if isinstance(value, list):
        distinct = set(v for v in value if v)  # 0 marks a layer without attention (recurrent hybrids)
        if len(distinct) != 1:
            raise InputError(f"{key}: per-layer values {sorted(distinct)} differ; E1 needs one value for all layers")
        return distinct.pop()
    return value


def read_shape(path) -> GGUFShape:
    """The attention shape of the model in a GGUF file, from its metadata (``<arch>.block_count`` etc.)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"--gguf: no such file: {path}")
    r = gguf_header.open_reader(path, "--gguf")
    arch = gguf_field(r, "general.architecture")
    for sliding in ("attention.sliding_window", "ssm.state_size", "attention.kv_lora_rank"):
        if gguf_field(r, f"{arch}.{sliding}") is not None:
            raise InputError(f"--gguf: architecture '{arch}' has {sliding}; E1 checks full-attention models "
                             "(llama, mistral, qwen2, qwen3 and similar)")
    need = {k: gguf_field(r, f"{arch}.{k}") for k in ("block_count", "embedding_length", "attention.head_count")}
    missing = [k for k, v in need.items() if v is None]
    if missing:
        raise InputError(f"--gguf: metadata field {arch}.{missing[0]} is missing")

    def count(value, key, hi):   # a whole number of heads, layers or widths: 1..hi, never a string or NaN
        return validate.number(_uniform(value, f"{arch}.{key}"), f"--gguf: metadata field {arch}.{key}", lo=1,
                               hi=hi, integer=True)

    n_layers = count(need["block_count"], "block_count", 4096)
    d_model = count(need["embedding_length"], "embedding_length", 2 ** 20)
    n_heads = count(need["attention.head_count"], "attention.head_count", 65536)
    kv = gguf_field(r, f"{arch}.attention.head_count_kv")
    n_kv = n_heads if kv is None else count(kv, "attention.head_count_kv", n_heads)
    k_len = gguf_field(r, f"{arch}.attention.key_length")
    v_len = gguf_field(r, f"{arch}.attention.value_length")
    k_len = d_model // n_heads if k_len is None else count(k_len, "attention.key_length", 65536)
    v_len = d_model // n_heads if v_len is None else count(v_len, "attention.value_length", 65536)
    if k_len < 1:
        raise InputError(f"--gguf: embedding_length {d_model} < head_count {n_heads}: no head dimension left")
    n_params = sum(int(np.prod(t.shape)) for t in r.tensors)
    n_ctx = gguf_field(r, f"{arch}.context_length") or 0
    return GGUFShape(arch, int(n_layers), int(n_heads), int(n_kv), int(k_len), int(v_len),
                     int(d_model), int(n_ctx), n_params, gguf_field(r, "general.file_type"),
                     validate.printable(str(gguf_field(r, "general.name") or path.stem)))


def weight_types(path) -> dict[str, dict[str, int]]:
    """Weights per ggml type name (``f32``, ``q4_K`` ...) in three groups, as llama.cpp's llama graph uses them:
    ``matmul`` (every 2-D tensor of the blocks: multiplied by every token), ``output`` (``output.weight``: in
    prefill applied to the last token only) and ``lookup`` (``token_embd.weight``: rows read, never multiplied)."""
    out: dict[str, dict[str, int]] = {"matmul": {}, "output": {}, "lookup": {}}
    for t in gguf_header.open_reader(path, "--gguf").tensors:
        if len(t.shape) < 2 or int(min(t.shape)) == 1:
            continue                                 # norms and biases: vectors
        name = t.tensor_type.name.lower().replace("_k", "_K")
        group = "lookup" if t.name.startswith("token_embd") else "output" if t.name.startswith("output.") \
            else "matmul"
        out[group][name] = out[group].get(name, 0) + int(t.n_elements)
    return out
