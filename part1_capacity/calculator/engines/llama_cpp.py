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
from part1_capacity.calculator.base.errors import InputError
from course.shared.units import round_up

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
    if profile.index_head_dim and not profile.is_mla:
        raise InputError("llama.cpp: block-sparse attention's indexer keys beside K/V (MiniMax-M3): how llama.cpp "
                         "caches them is not modelled; plan it with --engine law")
    out = {}
    if profile.is_mla:
        out["K"] = laws.mla_bytes(tokens_full, profile.n_full_layers, profile.kv_lora_rank,
                                  profile.qk_rope_head_dim, kv_bytes)
        out["V"] = 0
    else:
        out["K"], out["V"] = _k_and_v(tokens_full, profile.n_full_layers, profile.n_kv_heads, profile.head_dim,
                                      profile.kv_v_dim, kv_bytes)
    if profile.n_window_layers:
        heads, k, v = profile.window_kv
        out["K_swa"], out["V_swa"] = _k_and_v(tokens_window, profile.n_window_layers, heads, k, v, kv_bytes)
    return out


def _k_and_v(tokens, n_layers, heads, k_dim, v_dim, kv_bytes):
    """The K and the V tensors of ``n_layers`` layers holding ``tokens`` cells, each at its own width
    (llama-kv-cache.cpp: ``n_embd_k_gqa(il)`` and ``n_embd_v_gqa(il)`` per layer — llama-hparams.cpp takes a window
    layer's head count from ``n_head_kv_arr`` and its widths from ``n_embd_head_k_swa`` / ``n_embd_head_v_swa``):
    the law with values as wide as the keys, once for each."""
    return (laws.kv_bytes(tokens, n_layers, heads, k_dim, kv_bytes) / 2,
            laws.kv_bytes(tokens, n_layers, heads, v_dim, kv_bytes) / 2)


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


# --- the other buffers a context reports: model, output (logits), compute --------------------------------------------
F32 = 4                   # logits, activations and the flash-attention-free KQ are float32
F16 = 2                   # the KQ mask with flash attention (llama-graph.cpp build_attn_inp_kq_mask)
GGUF_ALIGNMENT = 32       # gguf.h GGUF_DEFAULT_ALIGNMENT: each tensor's data starts on a multiple of it


def model_buffer_bytes(tensor_nbytes, alignment: int = GGUF_ALIGNMENT) -> int:
    """The mmap'd model buffer one backend reports (``load_tensors: CPU_Mapped model buffer size``): the file range
    from the first tensor's data to the end of the last (llama-model-loader.cpp ``get_mapping_range``); in the file
    every tensor but the last is followed by padding up to ``alignment`` bytes (gguf.cpp). ``tensor_nbytes``: the
    bytes of each tensor the backend holds, in file order."""
    sizes = [int(n) for n in tensor_nbytes]
    if not sizes:
        return 0
    return sum(pad(n, alignment) for n in sizes[:-1]) + sizes[-1]


def output_buffer_bytes(n_vocab: int, n_seq: int = 1, n_embd: int = 0, embeddings: bool = False) -> int:
    """The output buffer (``llama_context: CPU  output buffer size``), llama-context.cpp ``output_reserve(n_seq_max)``:
    float32 logits for ``max(n_outputs, n_seq_max)`` rows of the vocabulary, plus as many embedding rows when the
    context returns embeddings."""
    rows = max(1, int(n_seq))
    return (int(n_vocab) + (int(n_embd) if embeddings else 0)) * rows * F32


@dataclass(frozen=True)
class GraphShape:
    """What the compute graph of one micro-batch allocates per token: widths in elements."""
    n_vocab: int
    n_embd: int
    n_head: int
    q_width: int              # n_head × the query head dimension (MLA: its absorbed width)
    n_ff: int                 # the widest feed-forward (dense, or routed experts × used experts)
    post_norms: bool = False  # gemma2/3: post-attention and post-feed-forward norms keep one more activation
    recurrent_width: int = 0  # a recurrent layer's live activations per token: input projection + convolution
    #                           input and output + scan output and its gated norm (0: no recurrent layers)


def recurrent_width(in_proj: int, conv: int, d_inner: int, x_proj: int = 0, d_state: int = 0, n_group: int = 0,
                    n_v_heads: int = 0, delta_net: bool = False) -> int:
    """Float32 activations per token a recurrent layer keeps alive at once (``GraphShape.recurrent_width``): its
    input projection (``in_proj`` wide, kept until the gate applies), the convolution's input and output (``conv``
    channels each) and the scan's output and gated norm (``d_inner`` each) — ``src/models/mamba-base.cpp``
    ``build_mamba2_layer``; Mamba-1 (``build_mamba_layer``) also keeps ``x_db`` (``x_proj`` wide) and ``dt``
    (``d_inner``) for the scan; the delta-net (``src/models/qwen3next.cpp``) repeats queries and keys to the value
    heads when it has fewer key heads (``n_group``) than value heads."""
    width = in_proj + 2 * conv + 2 * d_inner
    if x_proj:
        width += x_proj + d_inner
    if delta_net and n_group and n_group != n_v_heads:
        width += 2 * d_state * n_v_heads
    return width


def compute_buffer_bytes(shape: GraphShape, n_kv: int, n_kv_swa: int = 0, n_ubatch: int = DEFAULT_N_UBATCH,
                         n_outputs: int | None = None, flash_attn: bool = True) -> dict:
    """An estimate of the compute buffer (``llama_context: CPU compute buffer size``). llama-context.cpp
    ``sched_reserve`` reserves the graph of one micro-batch of ``n_ubatch`` tokens with ``min(n_ubatch,
    n_outputs_max)`` outputs (``n_outputs_max`` = ``n_batch`` by default) against the whole cache
    (``memory->init_full()``); ggml-alloc.c reuses a tensor's memory once its last consumer has run, so the buffer
    is the largest set of tensors alive together. Three candidates, each the tensors one stage keeps:

    - **output**: the normalised hidden states and the logits, ``n_ubatch × (n_embd + n_outputs/n_ubatch ×
      n_vocab)`` float32;
    - **attention**: the KQ mask of every cache (``n_kv × n_ubatch``, float16 with flash attention, float32
      without; llama-graph.cpp ``build_attn_inp_kq_mask``) — and without flash attention the scores
      ``n_kv × n_ubatch × n_head`` float32 (``build_attn_mha``: ``kq``, soft-max in place) — beside four
      ``n_ubatch × width`` float32 activations (residual, normalised input, query, attention output);
    - **feed-forward**: the masks (alive until the last attention layer) beside gate and up projections and four
      ``n_embd`` activations (residual, feed-forward input, its norm, the output; five with gemma's post-norms);
    - **recurrent** (Mamba / gated delta-net layers, ``src/models/mamba-base.cpp``, ``delta-net-base.cpp``): the
      masks beside ``recurrent_width`` float32 activations per token — the input projection (kept until its gate is
      applied), the convolution's input (state + tokens) and output, the scan's output and its gated norm.

    Not modelled: any backend's own scratch. Returns the stages and ``total`` (their maximum), in bytes."""
    out_rows = n_ubatch if n_outputs is None else min(n_outputs, n_ubatch)
    width = max(shape.n_embd, shape.q_width)
    mask_bytes = F16 if flash_attn else F32
    masks = (n_kv + n_kv_swa) * n_ubatch * mask_bytes
    scores = 0 if flash_attn else max(n_kv, n_kv_swa) * n_ubatch * shape.n_head * F32
    residual = (5 if shape.post_norms else 4) * shape.n_embd
    stages = {"output": n_ubatch * shape.n_embd * F32 + out_rows * shape.n_vocab * F32,
              "attention": masks + scores + 4 * n_ubatch * width * F32,
              "feed_forward": masks + n_ubatch * (2 * shape.n_ff + residual) * F32,
              "recurrent": masks + n_ubatch * shape.recurrent_width * F32}
    return {**{k: float(v) for k, v in stages.items()}, "total": float(max(stages.values()))}


# --- where each tensor and buffer lives: -ngl, --n-cpu-moe, --no-kv-offload ----------------------------------------
# Read in the vendored llama.cpp (``SOURCE``): src/llama-model.cpp ``load_tensors``, src/llama-kv-cache.cpp,
# common/arg.cpp (``--n-cpu-moe``), common/common.h (``LLM_FFN_EXPS_REGEX``); held against published logs of older
# builds too (tests/calculator/engines/test_llama_cpp_offload.py), which differ only in the order of the output layer (``gpu_layers``).
ALL_LAYERS = 999          # ``-ngl 999``: every repeating layer and the output layer (anything above n_layer)


@dataclass(frozen=True)
class ModelTensors:
    """A model's weight bytes as llama.cpp groups them for placement: the input embedding (``token_embd``), the
    output head (``output``; with ``tied`` the model has none of its own and llama.cpp loads a duplicate of the
    embedding in its place, ``TENSOR_DUPLICATED``), and per repeating layer all its tensors and, of those, the routed
    experts (``ffn_{up,down,gate,gate_up}_exps``: what ``--n-cpu-moe`` moves). Bytes."""
    token_embd: float
    output: float                 # the output head and its norm (with ``tied``: the duplicate's bytes)
    tied: bool
    layers: tuple                 # bytes of each repeating layer, all its tensors
    layer_experts: tuple          # of which its routed experts (0 for a dense layer)

    @property
    def n_layer(self) -> int:
        return len(self.layers)


def uniform_tensors(weights_bytes: float, expert_bytes: float, n_layer: int, embd_bytes: float,
                    tied: bool, output_bytes: float | None = None) -> ModelTensors:
    """``ModelTensors`` when only totals are known: the embedding (``n_vocab × n_embd`` at its bytes per weight) and,
    untied, an output head (``output_bytes``, default the embedding's size); the rest of ``weights_bytes`` spread
    evenly over the ``n_layer`` layers, the experts too. Exact for a model of identical layers at one precision; a
    mixed-precision GGUF (Q4_K_M gives some layers more bits) or dense-first MoE layers move bytes between layers."""
    output = embd_bytes if output_bytes is None else output_bytes
    rest = weights_bytes - embd_bytes - (0.0 if tied else output)
    if rest < 0:
        rest, embd_bytes, output = weights_bytes, 0.0, 0.0      # vocabulary unknown or larger than the total
    per, per_x = rest / n_layer, min(expert_bytes, rest) / n_layer
    return ModelTensors(embd_bytes, output, tied, (per,) * n_layer, (per_x,) * n_layer)


OUTPUT_FIRST = "ggml-org/llama.cpp pull request #18148 (December 2025): the output layer is offloaded first"


def gpu_layers(n_layer: int, n_gpu_layers: int, output_first: bool = True) -> tuple[range, bool]:
    """The repeating layers on the GPU and whether the output layer is. llama-model.cpp ``load_tensors`` treats the
    output layer as "layer ``n_layer``" of one rule and offloads the highest-numbered layers: in the vendored llama.cpp
    (``i_gpu_start = max(n_layer + 1 − n_gpu_layers, 0)``, since ``OUTPUT_FIRST``) the output layer goes first, then
    the last ``n_gpu_layers − 1`` repeating layers; before that change (``output_first=False``: the published logs of
    older builds) the last ``n_gpu_layers`` repeating layers went first (``i_gpu_start = max(n_layer −
    n_gpu_layers, 0)``) and the output layer only when ``n_gpu_layers > n_layer``. The input layer never does ("there
    is very little benefit to offloading the input layer, so always keep it on the CPU")."""
    ngl = max(0, min(int(n_gpu_layers), n_layer + 1))
    if output_first:
        start = max(n_layer + 1 - ngl, 0)
        return range(min(start, n_layer), n_layer), ngl > 0
    start = max(n_layer - ngl, 0)
    return range(start, n_layer), ngl > n_layer


def place_weights(t: ModelTensors, n_gpu_layers: int, n_cpu_moe: int = 0, output_first: bool = True) -> dict:
    """Weight bytes per device for ``-ngl n_gpu_layers --n-cpu-moe n_cpu_moe`` (``gpu_layers``: which layers):
    ``{"accelerator": …, "host": …}``
    with their parts. ``--n-cpu-moe N`` (common/arg.cpp) adds one buffer-type override per layer ``i < N``, the
    pattern ``blk\\.i\\.ffn_(up|down|gate|gate_up)_(ch|)exps`` (common/common.h ``llm_ffn_block_regex`` with
    ``LLM_FFN_EXPS_REGEX``) bound
    to the CPU: the routed experts of the FIRST N layers stay in host memory whatever ``-ngl`` says; shared experts,
    the router and attention follow their layer. A tied output head on the host shares the embedding's mapped bytes
    (nothing more is read from the file); on the GPU its duplicate is a real copy."""
    on_gpu, output_gpu = gpu_layers(t.n_layer, n_gpu_layers, output_first)
    acc = {"layers": 0.0, "output": 0.0}
    host = {"token_embd": t.token_embd, "layers": 0.0, "experts": 0.0, "output": 0.0}
    experts = {"accelerator": 0.0, "host": 0.0}    # routed experts within each device's bytes
    for i, (b, x) in enumerate(zip(t.layers, t.layer_experts)):
        if i not in on_gpu:
            host["layers"] += b
            experts["host"] += x
        elif i < n_cpu_moe:                 # an offloaded layer whose routed experts stay on the host
            acc["layers"] += b - x
            host["experts"] += x
            experts["host"] += x
        else:
            acc["layers"] += b
            experts["accelerator"] += x
    if output_gpu:
        acc["output"] = t.output
    elif not t.tied:
        host["output"] = t.output
    return {"accelerator": {**acc, "total": sum(acc.values())}, "host": {**host, "total": sum(host.values())},
            "gpu_layers": len(on_gpu), "output_on_accelerator": output_gpu, "experts": experts}


def place_cache(layer_cache: tuple, n_gpu_layers: int, kv_offload: bool = True, output_first: bool = True) -> dict:
    """Cache bytes per device: llama-kv-cache.cpp (and llama-memory-recurrent.cpp) put each layer's K/V (or state)
    in the buffer type of ``model.dev_layer(il)`` when ``offload`` (the context's ``offload_kqv``), else in the CPU
    buffer: the cache of an offloaded layer is on the GPU unless ``--no-kv-offload``. ``layer_cache``: bytes of
    each layer's cache."""
    on_gpu, _ = gpu_layers(len(layer_cache), n_gpu_layers, output_first)
    gpu = sum(c for i, c in enumerate(layer_cache) if i in on_gpu) if kv_offload else 0.0
    return {"accelerator": float(gpu), "host": float(sum(layer_cache) - gpu)}
