"""What vLLM prints at start-up: its KV-cache budget per worker, the blocks and tokens it derives, and the
concurrency it logs — read in vLLM's own source, term by term.

The budget (``vllm/v1/worker/gpu_worker.py``, ``Worker.determine_available_memory``)::

    available = gpu_memory_utilization × total memory        (requested_memory, taken at init_device)
              − weights as loaded                             (model_runner.model_memory_usage)
              − torch peak increase of the profile run        (profile_result.torch_peak_increase)
              − non-torch increase during the profile run     (profile_result.non_torch_increase)
              − CUDA-graph estimate, only when VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 (default 0,
                vllm/envs.py): by default the graphs are captured after the cache is allocated, from the
                memory beyond the utilization share

``--kv-cache-memory-bytes`` skips all of it: the worker returns that figure (``determine_available_memory``'s
first branch). "total memory" is what the CUDA runtime reports (``torch.cuda.mem_get_info``; an "80 GB" H100
reports 79.19 GiB), not the datasheet's figure: each accelerator carries it in ``data/accelerators.json``.

Then (``vllm/v1/core/kv_cache_utils.py``): blocks = ⌊available / (page × layers sharing a block)⌋ on each
worker, the minimum over workers (pipeline stages included) — ``get_kv_cache_configs``; the token count
``_report_kv_cache_config`` logs ("GPU KV cache size") = ⌊blocks / groups⌋ × block size; the concurrency it logs
= blocks ÷ one request's blocks (``get_max_concurrency_for_kv_cache_config``); and the error
``check_enough_kv_cache_memory`` raises when one request of ``max_model_len`` does not fit.

The two terms the source cannot give in closed form are modelled and labelled so: the profile run's activation
peak (``ACTIVATION`` below: the shapes ``gpu_model_runner.py`` ``profile_run`` allocates) and the non-torch
increase (``NON_TORCH``: measured on published runs). Units: bytes, tokens.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from course.shared.units import GB, GIB, KB, KIB, MB, MIB, ceil_div
from part1_capacity.calculator.engines import vllm
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.hardware.accelerators import runtime_memory
from part1_capacity.calculator.sizing import sharding

GiB = GIB                                # vLLM logs GiB (vllm/utils GiB_bytes)
VERSION = "vLLM v0.19"
# vllm/config/cache.py, CacheConfig.gpu_memory_utilization: 0.9 in v0.19 (its start-up log without the flag:
# "Requested memory: 0.900000 (util)"); later releases raise it to 0.92 (vllm-project/vllm PR #38284)
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
ACTIVATION_BYTES = 2                     # bf16/fp16 activations of the dummy forward pass
# The profile run's sampler pass (gpu_model_runner.py _dummy_sampler_run, vllm/v1/sample/sampler.py) on
# min(max_num_seqs, max_num_batched_tokens) rows of the vocabulary: logits in the model dtype (2 B), their
# float32 copy (4 B), the softmax probabilities (4 B) and the exponential noise of random sampling
# (vllm/v1/sample/ops/topk_topp_sampler.py random_sample, 4 B). Top-k/top-p are skipped in the dummy pass.
SAMPLER_BYTES_PER_LOGIT = 2 + 4 + 4 + 4
# v0.10's dummy sampler pass applied top-k/top-p with PyTorch's sort (vllm/v1/worker/gpu_model_runner.py
# _dummy_sampler_run with dummy top-k/top-p; vllm/v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p: sorted
# fp32 values, int64 indices, softmax, masks, the scattered result): measured, not derived — both v0.10.2 logs
# below give 38.5 B per logit (5.58 GiB on 1,024 rows x 151,936 on H200; 1.40 GiB on 256 rows on L40S)
SAMPLER_SORT_BYTES_PER_LOGIT = 38.5
FUSED_MOE_CHUNK = 32768                  # vllm/envs.py VLLM_FUSED_MOE_CHUNK_SIZE: the fused-MoE tokens per chunk
# Non-torch memory the profile run adds (CUDA/NCCL buffers outside PyTorch's allocator): not derivable from the
# source; the means llm-d measured with vLLM v0.19.0 on H100 (accuracy/results/v0.19.0/accuracy_report.md):
# 0.27 GiB alone, 2.08–2.17 GiB with tensor parallelism (NCCL and the symmetric-memory all-reduce buffers,
# vllm/distributed/device_communicators/), 0.07 GiB with pipeline stages only. Ranks joined by PCIe only get no
# NVLink buffers (custom_all_reduce.py: custom all-reduce is off for more than two PCIe-only GPUs): 0.21 GiB on
# 8 L40S with vLLM 0.10.2 (see RELEASES).
NON_TORCH = {"single": 0.25 * GiB, "tensor": 2.1 * GiB, "pipeline": 0.07 * GiB, "tensor_pcie": 0.21 * GiB}
# CUDA-graph memory inside the budget, from vLLM v0.21.0 on: gpu_worker.py determine_available_memory subtracts the
# estimate of gpu_model_runner.py profile_cudagraph_memory (a dummy capture of the first two graphs of each mode on a
# small profiling KV cache, the second's size extrapolated to every capture size) when
# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is set, and vllm/envs.py defaults it to 1 since v0.21.0 (the worker logs
# "CUDA graph memory profiling is enabled (default since v0.21.0)"; before, "In v0.19, CUDA graph memory profiling
# will be enabled by default" and nothing is subtracted). The estimate is a measurement of the capture, not a closed
# form of the model: modelled here as the median of the "Estimated CUDA graph memory" that seven public single-GPU
# logs print with the default capture sizes (51 piecewise + 35 or 51 full graphs): 0.24 GiB (Qwen3.5-4B, L4,
# v0.29.0), 0.53 GiB (Qwen2.5-7B AWQ, L4, v0.28.0), 0.64 GiB (Qwen3.5-4B at 8,192 batched tokens, v0.22.0), 0.78 GiB
# (a v0.18 server), 1.02 and 1.05 GiB (Gemma-3-12B and 27B, H100, v0.19.0: llm-d-planner's logs, e.g. "146.00 MiB
# first-capture + (51-1) × 10.00 MiB per-graph" piecewise), 2.35 GiB (Qwen3-8B, A100 40GB, v0.19.1; 2.44 GiB when
# captured) — the last four estimated but not yet subtracted. The same model logs 0.24 and 0.64 GiB on two servers:
# the spread is the capture's as much as the model's, so the figure is a typical one, within a factor of about 3.
# The logged "peak activation" then includes it.
CUDA_GRAPH_ESTIMATE = 0.78 * GiB


@dataclass(frozen=True)
class Release:
    """The start-up rules that changed between vLLM releases, each with the log or source file it was read in.
    ``non_torch``: per-rank non-torch memory of the profile run — alone, with tensor parallelism over a fast fabric
    (NVLink, Infinity Fabric), over PCIe only, with pipeline stages only. ``v0_scheduler``: the V0 engine's
    defaults (vllm/config.py ``SchedulerConfig``: without chunked prefill a step holds max(max_model_len, 2048)
    tokens, ``max_num_seqs`` 256) instead of V1's per-accelerator ones (arg_utils.py ``get_batch_defaults``)."""
    name: str
    default_utilization: float
    non_torch: dict
    v0_scheduler: bool
    source: str
    sampler_bytes_per_logit: float = SAMPLER_BYTES_PER_LOGIT    # the dummy sampler pass, per row x vocabulary
    cuda_graph_bytes: float = 0.0     # CUDA-graph estimate subtracted inside the budget (0: captured outside it)


RELEASES = {
    "0.6": Release("0.6", 0.9, {"single": 1.79 * GiB, "tensor": 3.58 * GiB, "pipeline": 1.79 * GiB,
                                "tensor_pcie": 0.25 * GiB, "single_pcie": 0.35 * GiB, "pipeline_pcie": 0.33 * GiB},
                   True,
                   "vLLM v0.6 (V0 engine, vllm/worker/worker.py determine_num_available_blocks): non-torch memory "
                   "1.79 GiB alone and 3.58 GiB per rank at tensor 2 on H100 (vllm-project/vllm PR #10511's "
                   "memory-profiling log, v0.6.5); 0.25 GiB per rank on two PCIe RTX 4090s (vllm-project/vllm "
                   "issue #13061, v0.7.2, whose 0.19 GiB activation peak at a 128K context shows a 2,048-token "
                   "chunked step and no large sampler pass); on a card without NVLink (GeForce) alone 0.35 GiB, "
                   "the 'non_torch_memory=0.35GiB' three RTX 3090 runs of vllm-project/vllm issue #10517 logged "
                   "(v0.6.4, Llama-3.1-8B at 20K, 29K and 35K tokens: the same figure whatever the context), "
                   "and with pipeline stages 0.33 GiB per stage ('non_torch_memory takes 0.33GiB' on two RTX 5090, "
                   "vllm-project/vllm issue #14452, v0.8.5 V0) — read in those logs, not derived. Not modelled: "
                   "later V0 releases logged less alone whatever the card (0.09 GiB on an A100, v0.8.2; 0.07-0.08 GiB "
                   "on an RTX 4090, v0.9.0), so the H100's 1.79 GiB may belong to v0.6.5's profiler rather than to "
                   "the card"),
    "0.10": Release("0.10", 0.9, {"single": 0.25 * GiB, "tensor": 1.38 * GiB, "pipeline": 0.07 * GiB,
                                  "tensor_pcie": 0.21 * GiB}, False,
                    "vLLM v0.10 (V1 engine, vllm/v1/worker/gpu_worker.py): non-torch memory 1.38 GiB per rank at "
                    "tensor 2 over NVLink (Qwen3-Next-80B-A3B on 2 H200, v0.10.2 'Free memory on device' line) and "
                    "0.21 GiB per rank at tensor 8 over PCIe (Qwen3-235B-A22B-FP8 on 8 L40S, v0.10.2); alone and "
                    "with pipeline stages as v0.19 measured; the dummy sampler sorts for top-k/top-p",
                    SAMPLER_SORT_BYTES_PER_LOGIT),
    "0.19": Release("0.19", 0.9, dict(NON_TORCH), False,
                    "vLLM v0.19 (vllm/v1/worker/gpu_worker.py): non-torch memory as llm-d measured on H100 "
                    "(accuracy/results/v0.19.0), over PCIe as v0.10.2 logged on L40S; gpu_memory_utilization 0.9 "
                    "(vllm/config/cache.py)"),
    "0.20": Release("0.20", 0.92, dict(NON_TORCH), False,
                    "vLLM after v0.19: CacheConfig.gpu_memory_utilization 0.92 (vllm-project/vllm PR #38284; a "
                    "v0.29.0 server on an L4 logs 'Desired GPU memory utilization is (0.92, 20.27 GiB)' with no "
                    "flag); the other terms as v0.19"),
    "0.21": Release("0.21", 0.92, dict(NON_TORCH), False,
                    "vLLM v0.21 and later: the CUDA-graph estimate is subtracted inside the budget "
                    "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 1 since v0.21.0, vllm/envs.py; "
                    "vllm/v1/worker/gpu_worker.py determine_available_memory: requested − non-KV memory − "
                    "cudagraph_memory_estimate_applied), modelled as 0.78 GiB per worker (CUDA_GRAPH_ESTIMATE: the "
                    "median of seven public logs' estimates, 0.24–2.35 GiB); gpu_memory_utilization 0.92; the other "
                    "terms as v0.19",
                    cuda_graph_bytes=CUDA_GRAPH_ESTIMATE),
}
DEFAULT_RELEASE = max(RELEASES, key=lambda k: tuple(map(int, k.split("."))))  # the newest modelled


def release(version: str | None = None) -> tuple[Release, list]:
    """The rules of the vLLM release ``version`` ("0.10", "0.10.2", "v0.19.0"; None: ``DEFAULT_RELEASE``): those of
    the newest release in ``RELEASES`` not newer than it, and a note when the rules were read in an earlier
    release than the one asked for."""
    if version is None:
        return RELEASES[DEFAULT_RELEASE], []
    import re
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[.+-]?[0-9A-Za-z.]*)?", str(version).strip())
    if not m:
        raise InputError(f"--vllm-version: expected a release such as 0.10.2 or 0.19, got '{version}'")
    asked = (int(m.group(1)), int(m.group(2)))
    known = sorted(RELEASES, key=lambda k: tuple(map(int, k.split("."))))
    older = [k for k in known if tuple(map(int, k.split("."))) <= asked]
    if not older:
        raise InputError(f"--vllm-version: {version} predates the releases modelled; allowed: "
                         f"{known[0]} or later ({', '.join(known)} and the releases between)")
    r = RELEASES[older[-1]]
    note = [] if r.name == f"{asked[0]}.{asked[1]}" else [
        f"vLLM {version}: the rules of v{r.name}, the newest release modelled that is not newer"]
    return r, note
ERROR_URL = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/"

# The activation term reads the model's vocabulary and MLP widths from its profile (profiles.SHAPE_FIELDS: from
# data/models.json for a bundled id, from the config.json otherwise). A profile without them (a GGUF file) is sized
# with these stand-ins, and the note says so.
FALLBACK_VOCAB = 128256


max_num_batched_tokens = vllm.max_num_batched_tokens     # the default per accelerator lives in vllm.py


def max_num_seqs(engine_memory: float, name: str = "") -> int:
    """``vllm serve``'s default (arg_utils.py, ``get_batch_defaults``): 1024 on GPUs with ≥ 70 GiB other than the
    A100, else 256."""
    return 1024 if engine_memory >= 70 * GiB and "a100" not in name.lower() else 256


BLACKWELL = ("b200", "b300", "gb200", "gb300", "rtx-5090", "rtx-pro-6000", "dgx-spark")


def block_size(profile, acc_id: str = "") -> tuple[int, str]:
    """The block size vLLM picks when ``--block-size`` is not given (vllm/platforms/cuda.py
    ``check_and_update_config``): 16 tokens, except MLA backends — FlashMLA (Hopper) needs 64, CUTLASS MLA
    (datacenter Blackwell) 128."""
    if profile.is_mla:
        if any(acc_id.startswith(b) for b in ("b200", "b300", "gb200", "gb300")):
            return 128, "MLA on Blackwell: CUTLASS MLA backend, block size 128 (vllm/platforms/cuda.py)"
        if acc_id.startswith(("h100", "h200", "h20")):
            return 64, "MLA on Hopper: FlashMLA backend, block size 64 (vllm/platforms/cuda.py)"
    return vllm.BLOCK_SIZE, "block size 16 (vllm/config/cache.py default on CUDA)"


engine_memory = runtime_memory     # total memory of one device as the engine reads it, and where it comes from


def pp_layers(n_layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage (vllm/distributed/utils.py ``get_pp_indices``): an even share, the remainder
    one each to the stages before the last, counting back from the second-to-last."""
    parts = [n_layers // pp] * pp
    for i in range(2, n_layers % pp + 2):
        parts[-i] += 1
    return parts


def shapes(profile) -> tuple[dict, list]:
    """The widths the activation term uses (vocabulary, MLP, and for experts one expert's width and top-k), and a
    note when the profile lacks them and stand-ins were used (FALLBACK_VOCAB, 4 × hidden)."""
    vocab, inter = profile.vocab_size, profile.intermediate_size
    s = {"vocab": vocab or FALLBACK_VOCAB, "intermediate": inter or 4 * profile.hidden_size}
    if profile.moe_intermediate_size and profile.experts_per_token:
        s.update(moe_intermediate=profile.moe_intermediate_size, top_k=profile.experts_per_token)
    if vocab and inter:
        return s, []
    missing = [f"{what} ({s[key]:,})" for what, key, v in (("vocabulary", "vocab", vocab),
                                                          ("MLP width", "intermediate", inter)) if not v]
    return s, [f"activation term approximate: {' and '.join(missing)} not in the profile"]


# --- the multimodal encoder's share of the profile run -----------------------------------------------------------
# vllm/v1/worker/gpu_model_runner.py profile_run: for a model with multimodal inputs it first runs the encoder on a
# dummy batch of the modality with the most tokens per item (_get_mm_dummy_batch: that many copies of one item "of
# the maximum feature size"), keeps the encoder outputs in the encoder cache while the text model's dummy pass and
# the sampler run, and clears them after. How many items (vllm/v1/worker/utils.py MultiModalBudget, get_max_items;
# vllm/multimodal/utils compute_encoder_budget): the encoder budget is max(max_num_batched_tokens, one item's
# tokens); items = max(1, min(budget // item tokens, max_num_seqs × per-prompt items)), per-prompt items being
# max(1, max_model_len // item tokens) under the default limit. It logs "Encoder cache will be initialized with a
# budget of B tokens, and profiled with N image items of the maximum feature size".
PIXEL_BYTES = 4          # the HF image processor's float32 pixels, moved to the GPU as they are (_get_mm_dummy_batch)
# Qwen-VL image processors' default max_pixels: 16,384 merged tokens per image (transformers Qwen2VLImageProcessor,
# max_pixels = 16384 × (patch × merge)²); vLLM logs "a budget of 16384 tokens, and profiled with 1 image items"
QWEN_VL_MAX_IMAGE_TOKENS = 16384
QWEN_VL_TYPES = ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe")


@dataclass(frozen=True)
class VisionTower:
    """The vision encoder's widths as its config.json states them, and one dummy item's size: ``patches`` run
    through the tower and ``tokens`` handed to the text model (after pooling or merging)."""
    kind: str
    hidden: int
    intermediate: int
    patches: int
    tokens: int
    pixels_per_patch: int
    rotary: bool            # rotary position embeddings on the patches (Qwen-VL): q and k copied once more


def vision_tower(profile) -> tuple[VisionTower | None, list]:
    """The vision tower vLLM profiles, read from the profile's ``vision_config`` (configs.py keeps it), and a note
    when the checkpoint has one whose profile is not modelled. SigLIP (Gemma 3: one image = (image_size /
    patch_size)² patches pooled to ``mm_tokens_per_image`` tokens, vllm/model_executor/models/siglip.py,
    gemma3_mm.py) and the Qwen3-VL / Qwen3.5 tower (vllm/model_executor/models/qwen3_vl.py: a 2 × 2 merge of
    16-pixel patches over 2 frames)."""
    vc = (profile.extra or {}).get("_vision_config")
    if not isinstance(vc, dict):
        return None, []
    kind = str(vc.get("model_type") or "")
    try:
        if kind == "siglip_vision_model" and profile.extra.get("_mm_tokens_per_image"):
            side = int(vc["image_size"]) // int(vc["patch_size"])
            return VisionTower(kind, int(vc["hidden_size"]), int(vc["intermediate_size"]), side * side,
                               int(profile.extra["_mm_tokens_per_image"]),
                               int(vc.get("num_channels") or 3) * int(vc["patch_size"]) ** 2, False), []
        if kind in QWEN_VL_TYPES:
            merge = int(vc.get("spatial_merge_size") or 2)
            pix = int(vc.get("in_channels") or 3) * int(vc.get("temporal_patch_size") or 2) * int(vc["patch_size"]) ** 2
            return VisionTower(kind, int(vc["hidden_size"]), int(vc["intermediate_size"]),
                               QWEN_VL_MAX_IMAGE_TOKENS * merge * merge, QWEN_VL_MAX_IMAGE_TOKENS, pix, True), []
    except (KeyError, TypeError, ValueError):
        pass
    return None, [f"vision encoder ({kind or 'unnamed'}): vLLM profiles it inside the budget; its share is not "
                  "modelled here"]


def encoder_items(tower: VisionTower, batched: int, seqs: int, max_model_len: int) -> int:
    """Dummy items vLLM runs the encoder on (MultiModalBudget.get_max_items, default per-prompt limit)."""
    budget = max(batched, tower.tokens)
    per_prompt = max(1, max_model_len // tower.tokens)
    return max(1, min(budget // tower.tokens, seqs * per_prompt))


def encoder_bytes(tower: VisionTower, items: int, text_hidden: int, tp: int) -> tuple[float, float]:
    """(the encoder pass's peak, the outputs it leaves in the encoder cache) on one rank, in bytes. One layer's
    transient at a time over every patch of every item, the larger of its two halves: attention — layer input,
    normed input, q/k/v (3 × hidden / tp), rotated q and k (2 × hidden / tp, Qwen-VL), attention output
    (hidden / tp); MLP — layer input, normed input, fc1 output and its activation (2 × intermediate / tp); beside
    them the dummy pixels (PIXEL_BYTES each). The outputs: items × tokens × the text model's hidden width."""
    h, i = tower.hidden, tower.intermediate
    attn = 2 * h + (3 * h + (2 * h if tower.rotary else 0) + h) / tp
    mlp = 2 * h + 2 * i / tp
    patches = items * tower.patches
    peak = patches * max(attn, mlp) * ACTIVATION_BYTES + patches * tower.pixels_per_patch * PIXEL_BYTES
    return float(peak), float(items * tower.tokens * text_hidden * ACTIVATION_BYTES)


def activation_bytes(profile, batched: int, seqs: int, tp: int, last_stage: bool = True,
                     sampler_bytes: float = SAMPLER_BYTES_PER_LOGIT, encoder: tuple = (0.0, 0.0)) -> float:
    """The torch peak increase of ``profile_run`` (gpu_model_runner.py) on one rank: the larger of
    - the dummy forward pass over ``batched`` tokens, one layer's transient at a time: hidden state, residual and
      layer input (3 × hidden) + the MLP's gate/up output and its activation (3 × intermediate / tp), or for MoE the
      fused-MoE caches per routed token (vllm/model_executor/layers/fused_moe/fused_moe.py intermediate_cache1..3:
      top_k × (3 × moe_intermediate / tp + hidden)), chunked at ``FUSED_MOE_CHUNK`` tokens;
    - the sampler pass on ``min(seqs, batched)`` rows of the (tensor-parallel gathered) vocabulary
      (``SAMPLER_BYTES_PER_LOGIT``) while the forward pass's hidden states are still held — on the last
      pipeline stage only (``profile_run`` samples where ``get_pp_group().is_last_rank``);
    - for a multimodal model, ``encoder`` = (the encoder pass's peak, its cached outputs): the encoder runs first,
      and its outputs stay cached through the text pass and the sampler (``encoder_bytes``)."""
    s, _ = shapes(profile)
    h = profile.hidden_size
    mlp = 3 * s["intermediate"] / tp
    forward = batched * (3 * h + mlp) * ACTIVATION_BYTES
    if "moe_intermediate" in s:
        routed = min(batched, FUSED_MOE_CHUNK) * s["top_k"] * (3 * s["moe_intermediate"] / tp + h)
        forward = max(forward, (batched * 3 * h + routed) * ACTIVATION_BYTES)
    enc_peak, enc_cached = encoder
    if not last_stage:
        return float(max(forward + enc_cached, enc_peak))
    rows = min(seqs, batched)
    sampler = rows * s["vocab"] * sampler_bytes + batched * h * ACTIVATION_BYTES
    return float(max(max(forward, sampler) + enc_cached, enc_peak))


def fast_link(acc) -> bool:
    """Whether tensor-parallel ranks of ``acc`` are joined by a fabric with NVLink-class buffers (NVLink, Infinity
    Fabric, ICI, NeuronLink) rather than PCIe alone (GeForce, L40S, L4 — or an accelerator with no interconnect)."""
    name = str(getattr(acc, "interconnect_name", "") or "").lower()
    return bool(name) and not name.startswith(("pcie", "none", "thunderbolt"))


def non_torch_bytes(tp: int, pp: int, acc=None, rel: Release | None = None) -> float:
    """Per-rank non-torch memory of the profile run for ``rel`` (default the current release): with tensor
    parallelism over a fast fabric or over PCIe, with pipeline stages only, or alone."""
    nt = (rel or RELEASES[DEFAULT_RELEASE]).non_torch
    if tp > 1:
        return nt["tensor"] if acc is None or fast_link(acc) else nt["tensor_pcie"]
    key = "pipeline" if pp > 1 else "single"
    # a release that logged a different figure on cards without NVLink (V0 on GeForce) names it "<key>_pcie"
    if acc is not None and not fast_link(acc) and f"{key}_pcie" in nt:
        return nt[f"{key}_pcie"]
    return nt[key]


@dataclass
class StartupFlags:
    """The ``vllm serve`` flags that decide the start-up budget (None: vLLM's default for the accelerator)."""
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: float | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    vllm_version: str | None = None            # the release whose rules apply (None: DEFAULT_RELEASE)


@dataclass
class Startup:
    """What one vLLM instance logs at start-up, per worker (rank)."""
    kv_cache_memory_bytes: float           # "Available KV cache memory" (per rank; the smallest stage's)
    kv_cache_tokens: int                   # "GPU KV cache size: N tokens"
    max_concurrency: float                 # "Maximum concurrency for L tokens per request: C×"
    num_blocks: int
    block_size: int
    budget: dict                           # total_bytes, utilization, weights_bytes, activation_bytes, ...
    flags: dict                            # the flag values used (defaults resolved)
    error: str | None = None               # vLLM's own error when one request of max_model_len does not fit
    notes: list = field(default_factory=list)
    given: dict = field(default_factory=dict)   # the flags set explicitly (what ``--emit vllm`` passes on)
    source: str = VERSION                       # the release whose rules gave these figures

    def to_fields(self) -> dict:
        return {"engine_kv_cache_memory_bytes": self.kv_cache_memory_bytes,
                "engine_kv_cache_tokens": self.kv_cache_tokens,
                "engine_max_concurrency": self.max_concurrency,
                "engine_memory_budget": dict(self.budget),
                "engine_num_blocks": self.num_blocks, "engine_block_size": self.block_size,
                "engine_startup_flags": dict(self.flags), "engine_startup_error": self.error,
                "engine_startup_notes": list(self.notes), "engine_startup_source": self.source,
                "engine_layout": {"tensor": self.flags.get("tensor_parallel_size", 1),
                                  "pipeline": self.flags.get("pipeline_parallel_size", 1)}}


def _reservation(profile, T, tp, kvb, conv, ssm, batched, hybrid, block):
    return vllm.reservation(profile, T, tp, kvb, conv, ssm, batched, hybrid, block_size=block)


def estimate_max_model_len(profile, available: float, tp, kvb, conv, ssm, batched, hybrid, block, hi: int) -> int:
    """The largest max_model_len one request of which fits in ``available`` (kv_cache_utils.py
    ``estimate_max_model_len``: a binary search over the same per-request reservation)."""
    lo, best = 1, 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if _reservation(profile, mid, tp, kvb, conv, ssm, batched, hybrid, block).bytes_per_request <= available:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def _not_enough(max_model_len: int, need: float, available: float, fit: int) -> str:
    """vLLM's own error (kv_cache_utils.py ``check_enough_kv_cache_memory``), word for word."""
    if available <= 0:
        return ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                f"when initializing the engine. See {ERROR_URL} for more details.")
    est = f"Based on the available memory, the estimated maximum model length is {fit}. " if fit > 0 else ""
    return (f"ValueError: To serve at least one request with the models's max seq len ({max_model_len}), "
            f"({need / GiB:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"({available / GiB:.2f} GiB). {est}Try increasing `gpu_memory_utilization` or decreasing "
            f"`max_model_len` when initializing the engine. See {ERROR_URL} for more details.")


def _stages(profile, layers, r, per_block_all, budget, given, stage_weights, act, max_model_len, fit):
    """Every worker holds its pipeline stage's layers; the fewest blocks over the workers decide
    (kv_cache_utils.py ``get_kv_cache_configs``) and each worker checks that one request of its layers fits
    (``check_enough_kv_cache_memory``). ``stage_weights``: all layers' weights on one rank; ``act(last, first)``:
    the profile run's peak on a stage (the sampler runs on the last, the vision encoder on the first). Updates
    ``budget`` with the deciding stage's terms; returns (blocks, that stage's KV memory, vLLM's error or None)."""
    blocks, stage_avail, error = None, 0.0, None
    requested = budget["total_bytes"] * budget["utilization"]
    for i, n in enumerate(layers):
        share = n / profile.n_layers
        act_i = act(i == len(layers) - 1, i == 0)
        avail = given if given is not None else (requested - stage_weights * share - act_i - budget["non_torch_bytes"]
                                                 - budget["cuda_graph_bytes"])
        b = int(max(avail, 0.0) // (per_block_all * share))
        if blocks is None or b < blocks:
            blocks, stage_avail = b, avail
            budget.update(weights_bytes=stage_weights * share, activation_bytes=act_i)
        need = r.bytes_per_request * share
        if error is None and (avail <= 0 or need > avail):
            error = _not_enough(max_model_len, need, avail, fit(avail / share) if avail > 0 else 0)
    return blocks, float(stage_avail), error


def startup(profile, acc, max_model_len: int, weights_bytes: float, tp: int = 1, pp: int = 1,
            kv_bytes: float = 2, conv_bytes: float = 2, ssm_bytes: float = 4, hybrid_manager: bool = True,
            flags: StartupFlags | None = None, weights_per_rank: float | None = None) -> Startup:
    """vLLM's start-up figures for ``profile`` served with ``max_model_len`` on ``tp × pp`` ranks of ``acc``,
    ``weights_bytes`` being the whole model's weights as loaded; ``weights_per_rank`` (the deployment's, e.g. with
    expert parallelism spreading the experts) replaces ``weights_bytes / (tp × pp)`` when given."""
    f = flags or StartupFlags()
    rel, rel_notes = release(f.vllm_version)
    total, total_src = engine_memory(acc)
    name, aid = getattr(acc, "name", ""), getattr(acc, "id", "")
    util = rel.default_utilization if f.gpu_memory_utilization is None else f.gpu_memory_utilization
    if rel.v0_scheduler:
        # V0 (vllm/engine/arg_utils.py, vllm/config.py SchedulerConfig): chunked prefill on by default above 32K
        # contexts with 2,048 tokens a step; below it one step holds a whole max_model_len prompt
        batched = f.max_num_batched_tokens or (2048 if max_model_len > 32768 else max(max_model_len, 2048))
        seqs = f.max_num_seqs or 256
    else:
        batched = f.max_num_batched_tokens or max_num_batched_tokens(total, name, aid)
        seqs = f.max_num_seqs or max_num_seqs(total, name)
    block, block_note = (f.block_size, f"--block-size {f.block_size}") if f.block_size else block_size(profile, aid)
    notes = [f"total memory {total / GiB:.2f} GiB as the engine sees it ({total_src})", block_note] + rel_notes
    if getattr(acc, "unified_memory", False):
        notes.append("unified memory: CPU and GPU share it, so the weights are loaded into it once and the budget "
                     "above is all there is (no separate host copy to add)")
    layers = pp_layers(profile.n_layers, pp)
    r = _reservation(profile, max_model_len, tp, kv_bytes, conv_bytes, ssm_bytes, batched, hybrid_manager, block)
    block = r.block_size                  # raised for Mamba hybrids (page-size unification)
    notes += r.notes
    n_groups = sum(r.groups.values())
    # one block on one rank for all its layers: vLLM allocates group_size tensors, each shared by one layer of every
    # group (kv_cache_utils.py get_kv_cache_config_from_groups), so a block costs page × group_size
    per_block_all = r.page_bytes * r.group_size
    if weights_per_rank is not None:
        weights_bytes = weights_per_rank * tp * pp      # the stages' shares below are then this rank's
    weights_rank = sharding.weights_per_rank(weights_bytes, tp, pp)
    tower, tower_notes = vision_tower(profile)
    encoder = (0.0, 0.0)
    if tower is not None:
        items = encoder_items(tower, batched, seqs, max_model_len)
        encoder = encoder_bytes(tower, items, profile.hidden_size, tp)
        notes.append(f"vision encoder profiled inside the budget: {items} dummy image(s) of {tower.tokens:,} tokens "
                     f"({tower.patches:,} patches each; encoder budget {max(batched, tower.tokens):,} tokens), peak "
                     f"{encoder[0] / GiB:.2f} GiB, {encoder[1] / GiB:.2f} GiB of outputs cached through the text "
                     "pass (gpu_model_runner.py profile_run)")
    notes += tower_notes
    act = activation_bytes(profile, batched, seqs, tp, sampler_bytes=rel.sampler_bytes_per_logit, encoder=encoder)
    notes += shapes(profile)[1]
    given_kv = None if f.kv_cache_memory_bytes is None else float(f.kv_cache_memory_bytes)
    nt = non_torch_bytes(tp, pp, acc, rel)
    budget = {"total_bytes": total, "utilization": util, "weights_bytes": weights_rank, "activation_bytes": act,
              "non_torch_bytes": nt, "cuda_graph_bytes": rel.cuda_graph_bytes}
    if f.kv_cache_memory_bytes is not None:
        notes.append("--kv-cache-memory given: vLLM skips the memory profiling and uses it as is "
                     "(gpu_worker.py determine_available_memory)")
    elif rel.cuda_graph_bytes:
        notes.append(f"CUDA graphs: their estimate is taken inside this budget (vLLM v{rel.name}: "
                     "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 by default, vllm/envs.py), modelled at "
                     f"{rel.cuda_graph_bytes / GiB:.2f} GiB per worker: vLLM measures it on a dummy capture, "
                     "0.24 to 2.35 GiB in public logs; vLLM logs it inside 'peak activation'")
    else:
        notes.append("CUDA graphs: captured after the cache is allocated, outside this budget "
                     "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0, the default, vllm/envs.py); they take memory "
                     "beyond the utilization share")
    def fit(available):
        return estimate_max_model_len(profile, available, tp, kv_bytes, conv_bytes, ssm_bytes, batched,
                                      hybrid_manager, block, max_model_len)

    def stage_act(last, first=True):
        # the vision tower sits on the first pipeline stage: its dummy pass and cached outputs are that stage's
        return activation_bytes(profile, batched, seqs, tp, last, rel.sampler_bytes_per_logit,
                                encoder if first else (0.0, 0.0))

    blocks, stage_avail, error = _stages(profile, layers, r, per_block_all, budget, given_kv,
                                         sharding.weights_per_rank(weights_bytes, tp), stage_act, max_model_len, fit)
    per_request_blocks = max(1, ceil_div(int(round(r.bytes_per_request)), int(per_block_all)))
    if pp > 1:
        notes.append(f"pipeline stages of {', '.join(map(str, layers))} layers (vllm/distributed/utils.py "
                     "get_pp_indices), weights counted in proportion to layers: the stage with the fewest blocks "
                     "decides")
    tokens = blocks // n_groups * block
    conc = blocks / per_request_blocks
    if n_groups > 1 and int(conc * max_model_len) != tokens:
        notes.append(f"'GPU KV cache size' is {tokens:,} tokens as vLLM v0.19 logs it (blocks ÷ {n_groups} KV cache "
                     f"groups × block size, kv_cache_utils.py _report_kv_cache_config); later releases log "
                     f"concurrency × max_model_len = {int(conc * max_model_len):,} instead")
    if "sliding" in r.groups or "chunked" in r.groups:
        kind = "sliding" if "sliding" in r.groups else "chunked"
        start = "window − 1" if kind == "sliding" else "the chunk"
        held = "the window + the block being filled" if kind == "sliding" else "the current chunk"
        notes.append(f"the concurrency above counts each request at its start-up worst case ({start} + a full "
                     f"{batched:,}-token prefill chunk per {kind} layer); a running server holds only {held} per "
                     f"{kind} layer, so steady state fits more requests than logged")
    flags_used = {"gpu_memory_utilization": util, "max_num_batched_tokens": batched, "max_num_seqs": seqs,
                  "block_size": block, "kv_cache_memory_bytes": f.kv_cache_memory_bytes,
                  "max_model_len": max_model_len, "tensor_parallel_size": tp, "pipeline_parallel_size": pp}
    given = {k: v for k, v in vars(f).items() if v is not None}
    if tp > 1 and not fast_link(acc) and f.kv_cache_memory_bytes is None:
        notes.append(f"tensor ranks joined by PCIe only: non-torch memory {nt / GiB:.2f} GiB per rank, no NVLink "
                     "all-reduce buffers (vllm/distributed/device_communicators/custom_all_reduce.py)")
    flags_used["vllm_version"] = rel.name
    return Startup(float(stage_avail), int(tokens), float(conc), int(blocks), int(block), budget, flags_used, error,
                   notes, given, f"vLLM v{rel.name}")


def parse_size(text: str, field_name: str = "kv_cache_memory") -> float:
    """``12.22GiB``, ``512MiB``, ``13e9``, ``13GB`` or plain bytes → bytes (GiB/MiB/KiB binary, GB/MB/KB decimal)."""
    s = str(text).strip()
    units = {"gib": GIB, "mib": MIB, "kib": KIB, "gb": GB, "mb": MB, "kb": KB, "b": 1}
    low = s.lower()
    mult = 1
    for u in ("gib", "mib", "kib", "gb", "mb", "kb", "b"):
        if low.endswith(u):
            mult, low = units[u], low[: -len(u)].strip()
            break
    try:
        v = float(low) * mult
    except ValueError:
        raise InputError(f"{field_name}: expected a size such as 12.22GiB, 512MiB, 13e9 or bytes, got '{text}'") \
            from None
    if not (v > 0) or v > 2 ** 60:
        raise InputError(f"{field_name}: must be a positive size up to 1 EiB, got '{text}'")
    return v
