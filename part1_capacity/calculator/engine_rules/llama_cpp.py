"""What llama.cpp allocates for a context, buffer by buffer — the rules ``capacity e1`` checks against the engine.

Read in the llama.cpp that the pinned llama-cpp-python (0.3.36) vendors, ``vendor/llama.cpp/src/``; each rule names
its file. The textbook law (lesson 03) gives the bytes of one cell (one token of one sequence in one layer); these
rules say how many cells the engine allocates:

- **context padding** (``llama-context.cpp``, ``llama_context::llama_context``): ``n_ctx`` is rounded up to a
  multiple of 256; each of the ``n_seq_max`` sequences gets its own stream of ``n_ctx_seq = pad(n_ctx / n_seq_max,
  256)`` cells (``kv_unified`` false, the default), so ``n_ctx`` becomes ``n_ctx_seq × n_seq_max``.
- **full-attention layers** (``llama-kv-cache.cpp``): K and V tensors of ``n_ctx_seq`` cells × streams. MLA
  (``hparams.is_mla()``) keeps K only: the latent plus the RoPE key; V is not allocated.
- **sliding-window layers** (``llama-kv-cache-iswa.cpp``): a second cache of ``pad(min(n_ctx_seq, n_swa +
  n_ubatch), 256)`` cells per stream ("the SWA cache is always padded to 256"); with ``swa_full`` every sliding
  layer gets ``n_ctx_seq`` cells instead. ``llama_context_default_params()`` sets ``swa_full = true``; llama.cpp's
  own tools (``common``) default to ``false``, which is what the plan assumes.
- **micro-batch** (``llama-context.cpp``): ``n_batch = min(n_ctx, n_batch)``, ``n_ubatch = min(n_batch,
  n_ubatch)`` — a short context shrinks the window cache's extra cells.
- **recurrent layers** (``llama-model.cpp`` ``create_memory``, ``llama-memory-recurrent.cpp``):
  ``max(1, n_seq_max) × (1 + n_rs_seq)`` rows per layer, each the convolution state (``r``) and the SSM or
  delta-net state (``s``), both ``GGML_TYPE_F32`` whatever the K/V type.

Units: bytes and cells.
"""
from __future__ import annotations

from dataclasses import dataclass

from part0_foundations.l03_kv_cache import laws
from course.units import round_up

CELL_PAD = 256            # llama-context.cpp: GGML_PAD(n_ctx, 256), GGML_PAD(n_ctx_seq, 256)
SWA_PAD = 256             # llama-kv-cache-iswa.cpp: GGML_PAD(min(size_base, n_swa + n_ubatch), 256)
DEFAULT_N_BATCH = 2048    # llama.h / common defaults (llama-bench and the CLI tools)
DEFAULT_N_UBATCH = 512
RECURRENT_BYTES = 4       # llama-model.cpp create_memory: recurrent r and s are GGML_TYPE_F32
SOURCE = "llama.cpp vendored in llama-cpp-python 0.3.36"


def pad(n: int, multiple: int) -> int:
    """``GGML_PAD``: ``n`` rounded up to a multiple of ``multiple``."""
    return round_up(n, multiple)


@dataclass(frozen=True)
class Context:
    """The cells llama.cpp gives a context asked for ``n_ctx_requested`` tokens over ``n_seq`` sequences."""

    n_ctx_requested: int
    n_seq: int
    n_ctx: int          # total cells after padding
    n_ctx_seq: int      # cells of one stream (one sequence)
    n_stream: int
    n_ubatch: int


def context(n_ctx: int, n_seq: int = 1, n_batch: int = DEFAULT_N_BATCH, n_ubatch: int = DEFAULT_N_UBATCH,
            unified: bool = False) -> Context:
    """llama-context.cpp: pad ``n_ctx`` to 256, split it into per-sequence streams padded to 256, clamp the
    batch sizes to the context."""
    total = pad(n_ctx, CELL_PAD)
    if unified:
        per_seq = total
    else:
        per_seq = pad(total // n_seq, CELL_PAD)
        total = per_seq * n_seq
    batch = min(total, n_batch)
    return Context(n_ctx, n_seq, total, per_seq, 1 if unified else n_seq, min(batch, n_ubatch))


def swa_cells(ctx: Context, window: int, swa_full: bool = False) -> int:
    """llama-kv-cache-iswa.cpp: cells of the sliding-window cache per stream."""
    if swa_full:
        return ctx.n_ctx_seq
    per_stream_window = window * (ctx.n_seq if ctx.n_stream == 1 else 1)
    return pad(min(ctx.n_ctx_seq, per_stream_window + ctx.n_ubatch), SWA_PAD)


def recurrent_cells(n_seq: int, n_rs_seq: int = 0) -> int:
    """llama-model.cpp + llama-memory-recurrent.cpp: rows of recurrent state per layer."""
    return max(1, n_seq) * (1 + n_rs_seq)


def kv_components(profile, tokens_full, tokens_window, kv_bytes) -> dict:
    """K/V bytes of every full layer holding ``tokens_full`` cells and every window layer ``tokens_window``
    (cells summed over streams), by the lesson-03 laws. Keys: K, V (and K_swa, V_swa with window layers)."""
    out = {}
    if profile.is_mla:
        out["K"] = laws.mla_bytes(tokens_full, profile.n_full_layers, profile.kv_lora_rank,
                                  profile.qk_rope_head_dim, kv_bytes)
        out["V"] = 0
    else:
        kv = laws.kv_bytes(tokens_full, profile.n_full_layers, profile.n_kv_heads, profile.head_dim, kv_bytes)
        out["K"] = out["V"] = kv / 2
    if profile.n_window_layers:
        kv = laws.kv_bytes(tokens_window, profile.n_window_layers, profile.n_kv_heads, profile.head_dim, kv_bytes)
        out["K_swa"] = out["V_swa"] = kv / 2
    return out


def state_components(profile, rows, state_bytes) -> dict:
    """Recurrent state of ``rows`` sequences: R (convolution) and S (SSM / delta-net matrix)."""
    if profile.ssm is None:
        return {}
    s = profile.ssm
    return {"R": laws.ssm_state_bytes(s.n_layers, s.conv_elements, state_bytes) * rows,
            "S": laws.ssm_state_bytes(s.n_layers, s.state_elements - s.conv_elements, state_bytes) * rows}


def law_components(profile, n_ctx: int, n_seq: int, kv_bytes: float, state_bytes: float) -> dict:
    """The textbook law for the same request: ``n_seq`` sequences of ``n_ctx / n_seq`` tokens, window layers
    holding ``min(T, W)``, one state per sequence at ``state_bytes`` — no padding, no engine rule."""
    T = n_ctx / n_seq
    out = kv_components(profile, n_seq * T, n_seq * laws.window_tokens(T, profile.window), kv_bytes)
    out.update(state_components(profile, n_seq, state_bytes))
    return {k: float(v) for k, v in out.items()}


def components(profile, n_ctx: int, n_seq: int = 1, kv_bytes: float = 2, swa_full: bool = False,
               n_rs_seq: int = 0, n_batch: int = DEFAULT_N_BATCH, n_ubatch: int = DEFAULT_N_UBATCH) -> dict:
    """Bytes of every buffer llama.cpp allocates for a context of ``n_ctx`` cells over ``n_seq`` sequences:
    K, V (full layers), K_swa, V_swa (window layers), R, S (recurrent layers), each as the engine logs it."""
    ctx = context(n_ctx, n_seq, n_batch, n_ubatch)
    window = swa_cells(ctx, profile.window, swa_full) if profile.n_window_layers else 0
    out = kv_components(profile, ctx.n_ctx_seq * ctx.n_stream, window * ctx.n_stream, kv_bytes)
    out.update(state_components(profile, recurrent_cells(n_seq, n_rs_seq), RECURRENT_BYTES))
    return {k: float(v) for k, v in out.items()}


def notes(profile, n_ctx: int, n_seq: int, swa_full: bool = False) -> list[str]:
    """The rules that move llama.cpp's figure away from the law for this model and request."""
    ctx = context(n_ctx, n_seq)
    out = []
    if ctx.n_ctx_seq * n_seq != n_ctx:
        out.append(f"context padded: {n_ctx:,} tokens over {n_seq} sequence(s) → {ctx.n_ctx_seq:,} cells per "
                   f"sequence (multiples of 256; llama-context.cpp)")
    if profile.n_window_layers:
        cells = swa_cells(ctx, profile.window, swa_full)
        out.append(f"sliding-window layers hold {cells:,} cells per sequence, not min(T, {profile.window:,}): "
                   f"window + micro-batch {ctx.n_ubatch} rounded up to 256 (llama-kv-cache-iswa.cpp)"
                   if not swa_full else "--swa-full: sliding-window layers hold the whole context")
    if profile.is_mla:
        out.append("MLA: the latent and RoPE key are cached as K, no V (llama-kv-cache.cpp)")
    if profile.ssm is not None:
        out.append(f"recurrent state kept in fp32, one row per sequence ({recurrent_cells(n_seq)}) "
                   "(llama-model.cpp create_memory, llama-memory-recurrent.cpp)")
    return out
