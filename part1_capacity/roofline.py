"""The roofline of prefill and decode: FLOPs, bytes moved, arithmetic intensity, ridge point, bound, time.

A kernel is memory-bound when its arithmetic intensity (FLOP per byte moved) is below the accelerator's ridge
point (peak FLOP/s ÷ bandwidth), compute-bound above it; its time is at least ``max(FLOPs/peak, bytes/bandwidth)``
(Williams, Waterman & Patterson 2009). Counting, per forward pass:

- matmuls: ``2 × active parameters`` FLOPs per token (a multiply-add is 2 FLOPs);
- attention: per query token, per cached token it attends to, per attention layer ``4 × n_heads × head_dim``
  (QKᵀ and the weighted sum of V); MLA as engines decode it (weights absorbed, attending in the latent):
  ``2 × n_heads × (kv_lora_rank + qk_rope_head_dim) + 2 × n_heads × kv_lora_rank``. Window layers attend to at
  most ``window`` tokens; recurrent layers cost ``2 × state`` per token;
- bytes: the weights read once per pass (MoE: the experts any token of the pass routes to — expected fraction
  ``1 − (1 − active/total)^tokens``, an independence approximation), plus the cache read (decode) or written
  (prefill).

Prefill is one prompt of ``T`` tokens processed at once; decode is one step of ``batch`` sequences each holding
``T`` tokens. All functions accept numpy arrays for ``T`` and ``batch``. Units: FLOPs, bytes, seconds.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from part1_capacity.hardware import Accelerator
from part1_capacity.profiles import ModelProfile


def attention_flops_per_pair(p: ModelProfile) -> float:
    """FLOPs for one query token attending to one cached token in one attention layer."""
    if p.is_mla:
        return 2 * p.n_heads * (p.kv_lora_rank + p.qk_rope_head_dim) + 2 * p.n_heads * p.kv_lora_rank
    return 4 * p.n_heads * p.head_dim


def _causal_pairs(T, window=None):
    """(query, key) pairs of a causal prompt of T tokens: Σ_{i=1..T} min(i, W)."""
    T = np.asarray(T, dtype=np.float64)
    if not window:
        return T * (T + 1) / 2
    W = float(window)
    capped = W * (W + 1) / 2 + (T - W) * W
    return np.where(T <= W, T * (T + 1) / 2, capped)


def weights_read_fraction(p: ModelProfile, tokens):
    """Expected fraction of the weights one pass over ``tokens`` tokens reads (1 for a dense model)."""
    r = p.params_active / p.params_total
    return 1.0 - (1.0 - r) ** np.asarray(tokens, dtype=np.float64)


def prefill_flops(p: ModelProfile, T):
    """FLOPs to prefill one prompt of ``T`` tokens."""
    pair = attention_flops_per_pair(p)
    attn = pair * (p.n_full_layers * _causal_pairs(T) + p.n_window_layers * _causal_pairs(T, p.window))
    ssm = 2 * p.ssm.state_elements * p.ssm.n_layers * np.asarray(T) if p.ssm else 0
    return 2 * p.params_active * np.asarray(T, dtype=np.float64) + attn + ssm


def decode_flops(p: ModelProfile, T, batch):
    """FLOPs of one decode step: ``batch`` new tokens, each attending to its sequence's ``T`` cached tokens."""
    T = np.asarray(T, dtype=np.float64)
    pair = attention_flops_per_pair(p)
    seen = p.n_full_layers * T + p.n_window_layers * np.minimum(T, p.window or 1)
    ssm = 2 * p.ssm.state_elements * p.ssm.n_layers if p.ssm else 0
    return np.asarray(batch, dtype=np.float64) * (2 * p.params_active + pair * seen + ssm)


@dataclass
class Phase:
    """One phase on the roofline (numbers for the whole model pass, on the plan's accelerators)."""
    flops: float
    bytes: float
    arithmetic_intensity: float   # FLOP/byte
    ridge_point: float            # FLOP/byte of the accelerator at the weights' precision
    bound: str                    # "compute" or "memory"
    time_s: float                 # max(FLOPs / peak, bytes / bandwidth) on `devices` accelerators

    def to_dict(self) -> dict:
        return {k: float(v) if not isinstance(v, str) else v for k, v in asdict(self).items()}


def phase(flops, nbytes, acc: Accelerator, weights_dtype: str, devices: int = 1,
          extra_seconds: float = 0.0) -> Phase:
    """Place a pass on the roofline. ``devices`` split FLOPs and bytes evenly (ideal tensor parallelism);
    ``extra_seconds`` adds time spent reading from a slower tier (serially: a conservative bound)."""
    peak = acc.peak_flops(weights_dtype)
    ridge = peak / acc.bandwidth
    ai = float(flops) / float(nbytes)
    t_compute = float(flops) / (peak * devices)
    t_memory = float(nbytes) / (acc.bandwidth * devices) + extra_seconds
    bound = "compute" if t_compute >= t_memory else "memory"
    return Phase(float(flops), float(nbytes), ai, ridge, bound, max(t_compute, t_memory))
