"""The roofline of prefill and decode: FLOPs, bytes moved, arithmetic intensity, ridge point, bound, time.

A kernel is memory-bound when its arithmetic intensity (FLOP per byte moved) is below the accelerator's ridge
point (peak FLOP/s ÷ bandwidth), compute-bound above it; its time is at least ``max(FLOPs/peak, bytes/bandwidth)``
(Williams, Waterman & Patterson 2009). Counting, per forward pass:

- matmuls: ``2 × active parameters`` FLOPs per token (a multiply-add is 2 FLOPs);
- attention: per query token, per cached token it attends to, per attention layer ``4 × n_heads × head_dim``
  (QKᵀ and the weighted sum of V). MLA runs two ways (vLLM ``v1/attention/backends/mla/common.py`` module
  docstring; ``mla_attention.py`` in newer trees): **decode** absorbs the up-projections into the query and
  attends in the latent, ``2 × n_heads × (kv_lora_rank + qk_rope_head_dim) + 2 × n_heads × kv_lora_rank``;
  **prefill** takes the "compute friendly approach": it decompresses K and V and runs ordinary attention with a
  QK width of ``qk_nope_head_dim + qk_rope_head_dim`` and a V width of ``v_head_dim``,
  ``2 × n_heads × (qk_nope_head_dim + qk_rope_head_dim) + 2 × n_heads × v_head_dim`` (the decompression itself
  is a weight matmul, counted with the parameters). Window layers attend to at most ``window`` tokens;
  recurrent layers cost ``2 × state`` per token;
- bytes: the weights read once per pass (MoE: the dense part in full and the routed experts any token of the
  pass routes to — expected share ``1 − (1 − k/E)^tokens``, an independence approximation), plus the cache read
  (decode) or written (prefill).

Prefill is one prompt of ``T`` tokens processed at once; decode is one step of ``batch`` sequences each holding
``T`` tokens. Scalar arithmetic in plain Python (no numpy: the page's Python runs it too). Units: FLOPs, bytes,
seconds.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from part0_foundations.l03_kv_cache import laws

if TYPE_CHECKING:   # the types of the annotations only
    from part1_capacity.calculator.hardware.accelerators import Accelerator
    from part1_capacity.calculator.model.profiles import ModelProfile

PHASES = ("prefill", "decode")


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """Arithmetic intensity (FLOP/byte) above which a kernel is compute-bound: peak FLOP/s ÷ bytes/s."""
    return peak_flops / bandwidth


def step_time(flops, nbytes, peak_flops: float, bandwidth: float, extra_seconds: float = 0.0):
    """The roofline time of one pass: ``max(flops / peak, bytes / bandwidth + extra_seconds)`` seconds — the
    arithmetic and the memory traffic overlap, so the slower of the two sets the time. ``extra_seconds``: bytes
    read from a slower tier, added to the memory side (serially: a conservative bound)."""
    return max(float(flops) / peak_flops, float(nbytes) / bandwidth + extra_seconds)


def attention_flops_per_pair(p: ModelProfile, phase: str = "decode") -> float:
    """FLOPs for one query token attending to one cached token in one attention layer, in ``phase``
    ("prefill" or "decode": MLA runs a different form in each, see the module docstring)."""
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
    if p.is_mla:
        if phase == "prefill":   # K/V decompressed: ordinary attention, QK width nope + rope, V width v_head_dim
            return 2 * p.n_heads * (p.head_dim + p.qk_rope_head_dim) + 2 * p.n_heads * (p.v_head_dim or p.head_dim)
        return 2 * p.n_heads * (p.kv_lora_rank + p.qk_rope_head_dim) + 2 * p.n_heads * p.kv_lora_rank
    return 4 * p.n_heads * p.head_dim


def _causal_pairs(T, window=None):
    """(query, key) pairs of a causal prompt of T tokens: Σ_{i=1..T} min(i, W)."""
    T = float(T)
    if not window:
        return T * (T + 1) / 2
    W = float(window)
    return T * (T + 1) / 2 if T <= W else W * (W + 1) / 2 + (T - W) * W


def weights_read_fraction(p: ModelProfile, tokens):
    """Expected fraction of the weights one pass over ``tokens`` tokens reads (1 for a dense model).

    The dense part (attention, embeddings, shared experts, dense-first layers, routers) is read in full; each
    routed expert is read when any of the pass's tokens routes to it, with probability ``1 − (1 − k/E)^n`` for
    ``k`` of ``E`` experts per token and ``n`` tokens (independent routing): bytes = dense + routed × that share.
    ``k/E`` is the routed parameters a token uses over all routed parameters,
    ``(params_active − dense) / params_routed``. A profile that does not give its routed parameters falls back
    to the whole model read at the active share."""
    n = float(tokens)
    if p.params_routed <= 0 or p.params_active >= p.params_total:
        r = p.params_active / p.params_total
        return 1.0 - (1.0 - r) ** n
    dense = p.params_total - p.params_routed
    return (dense + p.params_routed * routed_read_share(p, n)) / p.params_total


def routed_read_share(p: ModelProfile, tokens):
    """Share of the routed experts one pass over ``tokens`` tokens reads: ``1 − (1 − k/E)^n``, ``k/E`` =
    ``(params_active − dense) / params_routed`` (1 for a dense model; the active share of the whole model when the
    profile does not give its routed parameters)."""
    if p.params_active >= p.params_total:
        return 1.0
    if p.params_routed <= 0:
        return 1.0 - (1.0 - p.params_active / p.params_total) ** float(tokens)
    used = min(max((p.params_active - (p.params_total - p.params_routed)) / p.params_routed, 0.0), 1.0)   # k / E
    return 1.0 - (1.0 - used) ** float(tokens)


def _prefill_parts(p: ModelProfile, T):
    """(matmul, attention over the cache, recurrent) FLOPs to prefill one prompt of ``T`` tokens."""
    pair = attention_flops_per_pair(p, "prefill")
    attn = pair * (p.n_full_layers * _causal_pairs(T) + p.n_window_layers * _causal_pairs(T, p.window))
    ssm = 2 * p.ssm.state_elements * p.ssm.n_layers * T if p.ssm else 0
    return 2 * p.params_active * float(T), attn, ssm


def _decode_parts(p: ModelProfile, T):
    """(matmul, attention over the cache, recurrent) FLOPs of ONE sequence's decode token at ``T`` cached tokens."""
    T = float(T)
    pair = attention_flops_per_pair(p, "decode")
    seen = p.n_full_layers * T + p.n_window_layers * laws.window_tokens(T, p.window or 1)   # the cache law's min(T, W)
    ssm = 2 * p.ssm.state_elements * p.ssm.n_layers if p.ssm else 0
    return 2 * p.params_active, pair * seen, ssm


def prefill_flops(p: ModelProfile, T):
    """FLOPs to prefill one prompt of ``T`` tokens."""
    matmul, attn, ssm = _prefill_parts(p, T)
    return matmul + attn + ssm


def prefill_attention_flops(p: ModelProfile, T):
    """The part of ``prefill_flops`` beyond the weights' matmuls: attention over the cache and recurrent state."""
    _, attn, ssm = _prefill_parts(p, T)
    return attn + ssm


def decode_flops(p: ModelProfile, T, batch):
    """FLOPs of one decode step: ``batch`` new tokens, each attending to its sequence's ``T`` cached tokens."""
    matmul, attn, ssm = _decode_parts(p, T)
    return float(batch) * (matmul + attn + ssm)


def decode_attention_flops(p: ModelProfile, T, batch):
    """The part of ``decode_flops`` beyond the weights' matmuls: attention over the cache and recurrent state."""
    _, attn, ssm = _decode_parts(p, T)
    return float(batch) * (attn + ssm)


@dataclass(frozen=True)
class Pass:
    """One forward pass of one replica over the whole model — what ``deploy.pass_time`` turns into seconds."""
    phase: str                    # "prefill" (one prompt) or "decode" (one step of ``seqs`` sequences)
    tokens: float                 # new tokens in the pass (prefill: the prompt; decode: one per sequence)
    seqs: float                   # sequences those tokens belong to
    flops: float                  # all of it: matmuls + attention (``prefill_flops`` / ``decode_flops``)
    attention_flops: float        # the part beyond the weights' matmuls
    weight_bytes: float           # weights the ranks read
    cache_bytes: float            # cache read or written, by the law, whole model
    cache_bytes_per_rank: float   # the same on one tensor rank (replication and the engine's rules included)


@dataclass
class Phase:
    """One phase on the roofline (numbers for the whole model pass, on the plan's accelerators)."""
    flops: float
    bytes: float
    arithmetic_intensity: float   # FLOP/byte
    ridge_point: float            # FLOP/byte of the accelerator at the weights' precision
    bound: str                    # "compute" or "memory"
    time_s: float                 # max(FLOPs / peak, bytes / bandwidth) on `devices` accelerators
    basis: str = "roofline"       # where time_s comes from (speed.py: measured kernels or a datasheet assumption)

    def to_dict(self) -> dict:
        return {k: float(v) if not isinstance(v, str) else v for k, v in asdict(self).items()}


def phase(flops, nbytes, acc: Accelerator, weights_dtype: str, devices: int = 1,
          extra_seconds: float = 0.0, time_s: float | None = None, basis: str = "roofline") -> Phase:
    """Place a pass on the roofline. ``devices`` split FLOPs and bytes evenly (ideal tensor parallelism);
    ``extra_seconds`` adds time spent reading from a slower tier (serially: a conservative bound). ``time_s``:
    the pass's time when something finer gives it (``deploy.pass_time``: the split, the efficiencies, measured
    kernels — said by ``basis``); else the roofline's own ``max(FLOPs / peak, bytes / bandwidth)``."""
    peak = acc.peak_flops(weights_dtype)
    ai = float(flops) / float(nbytes)
    t_compute = float(flops) / (peak * devices)
    t_memory = float(nbytes) / (acc.bandwidth * devices) + extra_seconds
    bound = "compute" if t_compute >= t_memory else "memory"
    if time_s is None:
        time_s = step_time(flops, nbytes, peak * devices, acc.bandwidth * devices, extra_seconds)
    return Phase(float(flops), float(nbytes), ai, ridge_point(peak, acc.bandwidth), bound, float(time_s), basis)
