"""llama.cpp itself, through llama-cpp-python's C API: its log, a context, its quantize API, prefill and decode.

Importing this module routes llama.cpp's log into Python (so the KV line can be read and the chatter kept off
stderr). The ctypes callback is referenced at module level: if it were garbage-collected, llama.cpp would call
freed memory and crash the process.
"""
from __future__ import annotations

import contextlib
import ctypes
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path

import llama_cpp

from part1_capacity.calculator.base.errors import InputError
from course.shared.units import MIB


# --- the log ------------------------------------------------------------------------------------------------------
_captured: list[str] = []
_capturing = [False]


def _on_log(level, text, user_data):
    if _capturing[0] and text:
        _captured.append(text.decode("utf-8", errors="replace"))


_LOG_CALLBACK = llama_cpp.llama_log_callback(_on_log)  # keep referenced: a collected callback segfaults
llama_cpp.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))
llama_cpp.llama_backend_init()


@contextlib.contextmanager
def captured_log():
    """Collect llama.cpp's log text while the block runs; yields a list filled with the complete lines."""
    lines: list[str] = []
    start = len(_captured)
    _capturing[0] = True
    try:
        yield lines
    finally:
        _capturing[0] = False
        lines.extend("".join(_captured[start:]).splitlines())
        del _captured[start:]


# `llama_kv_cache: size =   16.00 MiB (  2048 cells,   8 layers,  1/1 seqs), K (f16):    8.00 MiB, V (f16):    8.00 MiB`
KV_LINE = re.compile(
    r"llama_kv_cache: size =\s*(?P<size>[\d.]+) MiB \(\s*(?P<cells>\d+) cells,\s*(?P<layers>\d+) layers,.*?\),"
    r"\s*K \((?P<k_type>\w+)\):\s*(?P<k>[\d.]+) MiB,\s*V \((?P<v_type>\w+)\):\s*(?P<v>[\d.]+) MiB")


@dataclass(frozen=True)
class KVLine:
    """One KV-cache line of llama.cpp's log. Sizes are printed in MiB with two decimals (±0.005 MiB)."""

    size_mib: float
    cells: int
    layers: int
    k_type: str
    v_type: str
    k_mib: float
    v_mib: float
    text: str

    @property
    def size_bytes(self) -> int:
        return round(self.size_mib * MIB)


def parse_kv_lines(lines) -> list[KVLine]:
    out = []
    for line in lines:
        m = KV_LINE.search(line)
        if m:
            out.append(KVLine(float(m["size"]), int(m["cells"]), int(m["layers"]), m["k_type"], m["v_type"],
                              float(m["k"]), float(m["v"]), line.strip()))
    return out


# --- model and context ----------------------------------------------------------------------------------------
KV_TYPES = {"f16": llama_cpp.GGML_TYPE_F16, "q8_0": llama_cpp.GGML_TYPE_Q8_0, "f32": llama_cpp.GGML_TYPE_F32}


class Model:
    """A GGUF loaded by llama.cpp (memory-mapped). Use as a context manager to free it."""

    def __init__(self, path):
        path = Path(path)
        if not path.is_file():
            raise InputError(f"--gguf: no such file: {path}")
        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = 0
        with captured_log() as log:
            self.ptr = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        self.load_log = log             # the model buffer lines (load_tensors: ... model buffer size)
        if not self.ptr:
            tail = " | ".join(line for line in log if "error" in line.lower())[-300:]
            raise InputError(f"--gguf: llama.cpp could not load {path} ({tail or 'see its log'})")
        self.path = path
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(self.ptr))

    @property
    def size_bytes(self) -> int:
        """Bytes of all tensors (what llama.cpp and llama-bench call the model size)."""
        return llama_cpp.llama_model_size(self.ptr)

    @property
    def n_params(self) -> int:
        return llama_cpp.llama_model_n_params(self.ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.ptr:
            llama_cpp.llama_model_free(self.ptr)
            self.ptr = None


def context_params(n_ctx, threads, kv_type="f16", n_batch=2048, n_ubatch=512):
    """Context parameters as llama-bench sets them (n_batch 2048, n_ubatch 512, one sequence).
    A quantized V cache needs flash attention, so q8_0 turns it on; f16 leaves llama.cpp's default."""
    if kv_type not in KV_TYPES:
        raise InputError(f"kv_type: '{kv_type}' is not one of {', '.join(KV_TYPES)}")
    p = llama_cpp.llama_context_default_params()
    p.n_ctx, p.n_batch, p.n_ubatch, p.n_seq_max = n_ctx, n_batch, n_ubatch, 1
    p.n_threads = p.n_threads_batch = threads
    p.type_k = p.type_v = KV_TYPES[kv_type]
    if kv_type != "f16":
        p.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
    p.no_perf = True
    return p


@contextlib.contextmanager
def context(model: Model, n_ctx, threads=2, kv_type="f16", log=None):
    """A llama.cpp context; its creation log (where the KV line is) is appended to ``log`` when given."""
    with captured_log() as lines:
        ctx = llama_cpp.llama_init_from_model(model.ptr, context_params(n_ctx, threads, kv_type))
    if log is not None:
        log.extend(lines)
    if not ctx:
        raise InputError(f"context: llama.cpp could not create a context of {n_ctx} tokens ({kv_type} KV)")
    try:
        yield ctx
    finally:
        llama_cpp.llama_free(ctx)


def kv_cache_line(model: Model, n_ctx, kv_type="f16", threads=2) -> KVLine:
    """Open a context of ``n_ctx`` tokens and return the KV line llama.cpp logged for it."""
    log: list[str] = []
    with context(model, n_ctx, threads, kv_type, log=log):
        pass
    found = parse_kv_lines(log)
    if len(found) != 1:
        raise RuntimeError(f"expected one 'llama_kv_cache: size = ...' line, found {len(found)} in: "
                           + " | ".join(log[-20:]))
    return found[0]


# --- quantize -------------------------------------------------------------------------------------------------
FTYPES = {"F32": llama_cpp.LLAMA_FTYPE_ALL_F32, "F16": llama_cpp.LLAMA_FTYPE_MOSTLY_F16,
          "Q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, "Q5_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q5_0,
          "Q4_K_M": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M}


def quantize(src, dst, ftype: str, threads=2) -> Path:
    """``llama_model_quantize`` from ``src`` (F32) to ``dst`` in ``ftype`` (one of ``FTYPES``)."""
    if ftype not in FTYPES:
        raise InputError(f"type: '{ftype}' is not one of {', '.join(FTYPES)}")
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype, p.nthread = FTYPES[ftype], threads
    with captured_log() as log:
        rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(p))
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize to {ftype} failed ({rc}): " + " | ".join(log[-5:]))
    return Path(dst)


# --- prefill and decode by hand, as llama-bench does ----------------------------------------------------------
class _ThreadpoolParams(ctypes.Structure):
    """ggml.h ``struct ggml_threadpool_params`` (GGML_MAX_N_THREADS = 512)."""
    _fields_ = [("cpumask", ctypes.c_bool * 512), ("n_threads", ctypes.c_int), ("prio", ctypes.c_int),
                ("poll", ctypes.c_uint32), ("strict_cpu", ctypes.c_bool), ("paused", ctypes.c_bool)]


def _ggml_libs():
    """ggml's base and CPU libraries as llama-cpp-python ships them (already loaded by libllama)."""
    lib = Path(llama_cpp.__file__).resolve().parent / "lib"
    for suffix in (".so", ".dylib", ".dll"):
        base, cpu = lib / f"libggml-base{suffix}", lib / f"libggml-cpu{suffix}"
        if base.exists() and cpu.exists():
            b, c = ctypes.CDLL(str(base)), ctypes.CDLL(str(cpu))
            b.ggml_threadpool_params_default.restype = _ThreadpoolParams
            b.ggml_threadpool_params_default.argtypes = [ctypes.c_int]
            c.ggml_threadpool_new.restype = ctypes.c_void_p
            c.ggml_threadpool_new.argtypes = [ctypes.POINTER(_ThreadpoolParams)]
            c.ggml_threadpool_free.argtypes = [ctypes.c_void_p]
            return b, c
    return None


@contextlib.contextmanager
def threadpool(ctx, threads):
    """Attach a persistent thread pool to ``ctx``, as llama-bench does (default polling level). Without one,
    llama.cpp starts and joins its threads for every graph: a fixed cost per decoded token that llama-bench
    does not pay. Yields False (and changes nothing) when ggml's libraries cannot be found."""
    libs = _ggml_libs()
    if libs is None:
        yield False
        return
    base, cpu = libs
    params = base.ggml_threadpool_params_default(threads)
    pool = cpu.ggml_threadpool_new(ctypes.byref(params))
    if not pool:
        yield False
        return
    lib = llama_cpp.llama_cpp._lib  # llama.h's attach/detach are not wrapped by llama-cpp-python
    lib.llama_attach_threadpool.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.llama_detach_threadpool.argtypes = [ctypes.c_void_p]
    lib.llama_attach_threadpool(ctx, pool, pool)
    try:
        yield True
    finally:
        lib.llama_detach_threadpool(ctx)
        cpu.ggml_threadpool_free(pool)


def _prompt(ctx, tokens, n_batch=2048):
    arr = (llama_cpp.llama_token * len(tokens))(*tokens)
    for i in range(0, len(tokens), n_batch):
        n = min(n_batch, len(tokens) - i)
        batch = llama_cpp.llama_batch_get_one(ctypes.cast(ctypes.byref(arr, i * ctypes.sizeof(llama_cpp.llama_token)),
                                                          ctypes.POINTER(llama_cpp.llama_token)), n)
        if llama_cpp.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed on a prompt batch")
    llama_cpp.llama_synchronize(ctx)


def _generate(ctx, n_gen, rng, n_vocab, first):
    tok = (llama_cpp.llama_token * 1)(first)
    for _ in range(n_gen):
        if llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(tok, 1)) != 0:
            raise RuntimeError("llama_decode failed on a generated token")
        llama_cpp.llama_synchronize(ctx)
        tok[0] = rng.randrange(n_vocab)


def tokens_per_second(model: Model, n_prompt=0, n_gen=0, repeats=3, threads=2, seed=0) -> list[float]:
    """One test of llama-bench by hand: pp (``n_prompt`` tokens in one batch) or tg (``n_gen`` single-token
    decodes), never both. One warm-up run, then ``repeats`` timed runs each from a cleared cache; returns the
    throughput of each run in tokens per second. Tokens are random (bos first), as in llama-bench."""
    if (n_prompt > 0) == (n_gen > 0):
        raise ValueError("exactly one of n_prompt and n_gen: prefill and decode are measured separately")
    rng = random.Random(seed)
    bos = 1
    rates = []
    with context(model, n_prompt + n_gen, threads) as ctx, threadpool(ctx, threads):
        mem = llama_cpp.llama_get_memory(ctx)
        for rep in range(repeats + 1):  # rep 0 is the warm-up
            llama_cpp.llama_memory_clear(mem, False)
            t0 = time.perf_counter()
            if n_prompt:
                _prompt(ctx, [bos] + [rng.randrange(model.n_vocab) for _ in range(n_prompt - 1)])
            else:
                _generate(ctx, n_gen if rep else 1, rng, model.n_vocab, bos)
            dt = time.perf_counter() - t0
            if rep:
                rates.append((n_prompt or n_gen) / dt)
    return rates
