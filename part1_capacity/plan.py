"""Workload + model + accelerator → a plan: memory, accelerators (with and without the KV cache), roofline of
prefill and decode, the kind of bottleneck and where an overflowing cache can go.

Memory per accelerator (bytes): ``usable = memory × usable_fraction − overhead`` where the overhead is the stated
allowance for activations and the runtime (CUDA context, graphs, allocator slack). A deployment is
``tensor × pipeline × data`` accelerators: each of the ``data`` replicas holds the weights split over its
``tensor × pipeline`` ranks and the caches of its share of the sequences. Tensor parallelism splits K/V heads,
but a rank holds at least one: with fewer K/V heads than ranks they are **replicated**; the MLA latent has no
heads to split and is **replicated on every rank**; recurrent state splits by its heads. Pipeline stages split
layers (weights and caches). The search takes the fewest accelerators (then fewer pipeline stages, then a
smaller tensor group). Numbers for one replica's tensor group are the ones a `vllm serve` would be given.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from part1_capacity import roofline, weights
from part1_capacity.dtypes import KV_DTYPES, get_dtype
from part1_capacity.errors import InputError
from part1_capacity.hardware import GIB, Accelerator, load_accelerator
from part1_capacity.loader import load_model
from part1_capacity.profiles import ModelProfile
from part1_capacity.tiers import tiers_for

DEFAULT_USABLE_FRACTION = 0.90      # vLLM's default gpu_memory_utilization
DEFAULT_OVERHEAD_BYTES = 2 * GIB    # activations of a chunked prefill + runtime; vLLM profiles 1–4 GiB at start-up


@dataclass
class Workload:
    """What the customer runs. ``context`` = prompt + output tokens per sequence; ``batch`` = concurrent sequences."""
    context: int
    batch: int = 1
    weights_dtype: str | None = None      # None: the model's native precision
    kv_dtype: str = "bf16"
    state_dtype: str | None = None        # recurrent state; None: the model's own (SSM.state_dtype), else kv_dtype
    usable_fraction: float = DEFAULT_USABLE_FRACTION
    overhead_bytes: float = DEFAULT_OVERHEAD_BYTES
    prompt: int | None = None             # prefill length; None: the whole context
    tensor_parallel: int | None = None    # pinned tensor-parallel degree; None: the search picks it

    def validate(self, model: ModelProfile) -> "Workload":
        for name in ("context", "batch"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
                raise InputError(f"{name}: must be a positive integer, got {v!r}")
        if self.context > model.max_context:
            raise InputError(f"context: {self.context} exceeds {model.id}'s maximum context of "
                             f"{model.max_context} tokens")
        if self.prompt is not None and not (0 < self.prompt <= self.context):
            raise InputError(f"prompt: must be between 1 and context ({self.context}), got {self.prompt}")
        if not 0 < self.usable_fraction <= 1:
            raise InputError(f"usable_fraction: must be in (0, 1], got {self.usable_fraction}")
        if self.overhead_bytes < 0:
            raise InputError(f"overhead: must be >= 0, got {self.overhead_bytes}")
        t = self.tensor_parallel
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t <= 0):
            raise InputError(f"tensor_parallel: must be a positive integer, got {t!r}")
        if t is not None and not splits_heads(model, t):
            raise InputError(f"tensor_parallel: {t} does not split {model.id}'s {model.n_heads} attention heads and "
                             f"{model.n_kv_heads} K/V heads evenly; allowed: "
                             f"{', '.join(str(d) for d in range(1, model.n_heads + 1) if splits_heads(model, d))}")
        self.weights_dtype = get_dtype(self.weights_dtype or model.native_dtype, "weights_dtype").name
        self.kv_dtype = get_dtype(self.kv_dtype, "kv_dtype", KV_DTYPES).name
        # Servers keep some hybrids' state wider than the KV cache (vLLM: Nemotron-H SSM state in float32).
        default_state = (model.ssm.state_dtype if model.ssm else "") or self.kv_dtype
        self.state_dtype = get_dtype(self.state_dtype or default_state, "state_dtype", KV_DTYPES).name
        return self


# --- tensor-parallel rules ---------------------------------------------------------------------------------------
def splits_heads(model: ModelProfile, t: int) -> bool:
    """vLLM's rule: the query heads divide by ``t``; K/V heads divide by it or are replicated (``t`` a multiple)."""
    return model.n_heads % t == 0 and (model.n_kv_heads % t == 0 or t % model.n_kv_heads == 0)


def tp_degrees(model: ModelProfile, acc: Accelerator, pinned: int | None = None) -> list[int]:
    """Tensor-parallel degrees that fit the accelerator's group and split the heads evenly (as vLLM requires);
    only ``pinned`` when the workload pins one (refused if the accelerator's group is smaller)."""
    if pinned is not None:
        if pinned > acc.max_tp:
            raise InputError(f"tensor_parallel: {pinned} exceeds the {acc.max_tp} {acc.name} joined by one fast "
                             f"interconnect; allowed: 1..{acc.max_tp}")
        return [pinned]
    out = []
    t = 1
    while t <= acc.max_tp:
        if splits_heads(model, t):
            out.append(t)
        t *= 2
    return out or [1]


def kv_fraction_per_rank(model: ModelProfile, tp: int) -> float:
    """Share of one sequence's attention cache a tensor-parallel rank holds.

    GQA/MHA/MQA: ``max(n_kv_heads/tp, 1) / n_kv_heads`` — at least one K/V head per rank, replicated when
    ``n_kv_heads < tp``. MLA: 1 — the latent is replicated on every rank."""
    if model.is_mla:
        return 1.0
    return max(model.n_kv_heads / tp, 1) / model.n_kv_heads


def state_fraction_per_rank(model: ModelProfile, tp: int) -> float:
    """Recurrent state splits by its heads across tensor-parallel ranks."""
    if model.ssm is None:
        return 0.0
    return max(model.ssm.n_heads / tp, 1) / model.ssm.n_heads


# --- the search, vectorized over any grid of (T, batch) -----------------------------------------------------------
def search_deployment(model: ModelProfile, acc: Accelerator, wl: Workload, T, batch, with_cache=True):
    """Fewest accelerators for ``batch`` sequences of ``T`` tokens (numpy arrays broadcast together).

    Returns arrays ``(n, tp, pp, dp)``; ``n`` is ``inf`` where nothing fits (one sequence's cache does not fit a
    rank even split over every layer). Exact and vectorized. For a tensor degree ``tp`` and ``x`` pipeline
    stages a replica holds ``g(x) = ⌊(U·x − W/tp) / s⌋`` sequences (``U`` usable bytes per rank, ``W`` weights,
    ``s`` one sequence's cache on a tensor rank), so ``n(x) = tp · x · ⌈B / g(x)⌉``. Rather than trying every
    ``x``, the loop runs over the replica count ``d``: the fewest stages giving ``g(x) ≥ ⌈B/d⌉`` is
    ``x_d = ⌈(⌈B/d⌉ + W/(tp·s)) · s/U⌉``. Since ``n_d ≥ tp · (B + d·W/(tp·s)) · s/U`` grows with ``d``,
    the loop stops as soon as that bound passes the best found. Ties go to fewer pipeline stages."""
    T = np.asarray(T, dtype=np.float64)
    B = np.asarray(batch, dtype=np.float64)
    shape = np.broadcast(T, B).shape
    size = int(np.prod(shape))
    U = acc.memory_bytes * wl.usable_fraction - wl.overhead_bytes
    L = model.n_layers
    best_n, best_tp, best_pp, best_dp = (np.full(size, np.inf), np.zeros(size), np.zeros(size), np.zeros(size))

    def update(idx, n, tp, x, d):
        better = (n < best_n[idx]) | ((n == best_n[idx]) & (x < best_pp[idx]))
        sel = idx[better]
        best_n[sel], best_tp[sel], best_pp[sel], best_dp[sel] = n[better], tp, x[better], d[better]

    if U > 0:
        W = weights_bytes(model, wl)
        Bf = np.broadcast_to(B, shape).ravel()
        attn = np.zeros(size)
        state = 0.0
        if with_cache:
            attn = np.broadcast_to(model.attention_cache_bytes(T, get_dtype(wl.kv_dtype).bytes), shape).ravel()
            state = float(model.state_bytes(get_dtype(wl.state_dtype).bytes))
        for tp in tp_degrees(model, acc, wl.tensor_parallel):
            x_free = np.floor(W / (tp * U)) + 1          # fewest stages leaving any room beside the weights
            if x_free > L:
                continue
            s = attn * kv_fraction_per_rank(model, tp) + state * state_fraction_per_rank(model, tp)
            no_cache = s <= 0
            if no_cache.any():
                idx = np.nonzero(no_cache)[0]
                update(idx, np.full(idx.size, tp * x_free), tp, np.full(idx.size, x_free), np.ones(idx.size))
            idx = np.nonzero(~no_cache)[0]
            a = U / np.where(no_cache, 1.0, s)             # sequences per stage-worth of memory
            c = W / tp / np.where(no_cache, 1.0, s)
            g_L = np.floor(a * L - c)
            idx = idx[g_L[idx] >= 1]                       # elsewhere one sequence never fits: n stays inf
            d = np.ceil(Bf[idx] / g_L[idx])
            while idx.size:
                ai, ci, Bi = a[idx], c[idx], Bf[idx]
                m = np.ceil(Bi / d)
                x = np.maximum(np.ceil((m + ci) / ai), x_free)
                x = np.where(np.floor(ai * x - ci) < m, x + 1, x)             # floating-point guard
                ok = x <= L
                dp = np.ceil(Bi / np.maximum(np.floor(ai * x - ci), 1))
                update(idx[ok], (tp * x * dp)[ok], tp, x[ok], dp[ok])
                d = d + 1
                keep = (tp * (Bi + ci * d) / ai <= best_n[idx]) & (tp * d * x_free <= best_n[idx]) & (d <= Bi)
                idx, d = idx[keep], d[keep]
    return tuple(a.reshape(shape) for a in (best_n, best_tp, best_pp, best_dp))


def weights_bytes(model: ModelProfile, wl: Workload) -> float:
    """Bytes of the weights a server loads at the workload's weight precision."""
    return weights.weights_bytes(model, wl.weights_dtype)


IMPLICATIONS = {
    "weights": ("weights dominate memory: propose fewer bits per weight, more memory per accelerator or sharding the "
                "weights (tensor/expert parallelism); a tiered KV memory would not address this customer's problem"),
    "kv_cache": ("the KV cache dominates memory: propose KV quantization (fp8), prefix caching, fewer or shorter "
                 "concurrent sequences per accelerator, or offloading KV to a slower tier (host DRAM, CXL) — "
                 "tiered KV memory fits this customer"),
}


@dataclass
class Plan:
    model: ModelProfile
    accelerator: Accelerator
    workload: Workload
    kv_bytes_per_token: float
    kv_bytes_per_sequence: float
    state_bytes_per_sequence: float
    weights_bytes: float
    kv_bytes_total: float
    accelerators_needed: int | None
    accelerators_without_kv: int | None
    parallelism: dict
    parallelism_without_kv: dict
    kv_bytes_stored: float          # across all ranks, including tensor-parallel replication
    prefill: roofline.Phase | None
    decode: roofline.Phase | None
    overflow_bytes: float
    overflow_tiers: list = field(default_factory=list)

    @property
    def kv_to_weights_ratio(self) -> float:
        return self.kv_bytes_total / self.weights_bytes

    @property
    def bottleneck(self) -> str:
        return "kv_cache" if self.kv_bytes_total > self.weights_bytes else "weights"

    @property
    def accelerators_added_by_kv(self) -> int | None:
        if self.accelerators_needed is None or self.accelerators_without_kv is None:
            return None
        return self.accelerators_needed - self.accelerators_without_kv

    def to_dict(self) -> dict:
        wl = self.workload
        return {
            "model": self.model.id, "structure": self.model.structure, "accelerator": self.accelerator.id,
            "workload": {"context": wl.context, "batch": wl.batch, "prompt": wl.prompt or wl.context,
                         "tensor_parallel": wl.tensor_parallel,
                         "weights_dtype": wl.weights_dtype, "kv_dtype": wl.kv_dtype, "state_dtype": wl.state_dtype,
                         "usable_fraction": wl.usable_fraction, "overhead_bytes": wl.overhead_bytes},
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_bytes_per_sequence": self.kv_bytes_per_sequence,
            "state_bytes_per_sequence": self.state_bytes_per_sequence,
            "weights_bytes": self.weights_bytes,
            **weights.plan_fields(self.model, wl.weights_dtype, self.kv_bytes_total),
            "kv_bytes_total": self.kv_bytes_total,
            "kv_bytes_stored": self.kv_bytes_stored,
            "kv_to_weights_ratio": self.kv_to_weights_ratio,
            "accelerators_needed": self.accelerators_needed,
            "accelerators_without_kv": self.accelerators_without_kv,
            "accelerators_added_by_kv": self.accelerators_added_by_kv,
            "parallelism": self.parallelism,
            "parallelism_without_kv": self.parallelism_without_kv,
            "prefill": self.prefill.to_dict() if self.prefill else None,
            "decode": ({**self.decode.to_dict(), "tokens_per_s": wl.batch / self.decode.time_s}
                       if self.decode else None),
            "bottleneck": self.bottleneck,
            "implication": IMPLICATIONS[self.bottleneck],
            "overflow_bytes": self.overflow_bytes,
            "overflow_tiers": self.overflow_tiers,
        }


def _deployment(n, tp, pp, dp):
    if not np.isfinite(n):
        return None, {}
    return int(n), {"tensor": int(tp), "pipeline": int(pp), "data": int(dp)}


def _overflow(model, acc, wl, W, tp, pp, per_seq_rank_attn_state, decode_flops, weights_read):
    """KV that does not fit the weights-only deployment, and what decode slows to when read from each tier."""
    usable = acc.memory_bytes * wl.usable_fraction - wl.overhead_bytes
    w_rank = W / (tp * pp)
    need = wl.batch * per_seq_rank_attn_state          # cache bytes each rank must hold
    free = max(usable - w_rank, 0.0)
    over = max(need - free, 0.0)
    if over <= 0:
        return 0.0, []
    n_ranks = tp * pp
    # decode reads weights_read/(tp·pp) and all of its cache per rank per step; pipeline stages run in turn
    flops_rank = decode_flops / n_ranks
    peak = acc.peak_flops(wl.weights_dtype)
    out = []
    hbm_bytes = weights_read / n_ranks + min(need, free)
    t_all_hbm = pp * float(roofline.step_time(flops_rank, weights_read / n_ranks + need, peak, acc.bandwidth))
    for tier in tiers_for(acc):
        if tier.id == "hbm":
            continue
        t_step = pp * float(roofline.step_time(flops_rank, hbm_bytes, peak, acc.bandwidth, over / tier.bandwidth))
        out.append({"tier": tier.id, "name": tier.name, "capacity_bytes_per_accelerator": tier.capacity_bytes,
                    "bandwidth": tier.bandwidth, "fits": bool(tier.capacity_bytes >= over),
                    "decode_step_s": t_step, "decode_tokens_per_s": wl.batch / t_step,
                    "slowdown_vs_hbm": t_step / t_all_hbm})
    return over * n_ranks, out


def make_plan(model, accelerator, workload: Workload | None = None, **kw) -> Plan:
    """The plan for ``model`` (profile or name/config path) on ``accelerator`` (object, name or JSON path)."""
    model = model if isinstance(model, ModelProfile) else load_model(model)
    acc = accelerator if isinstance(accelerator, Accelerator) else load_accelerator(accelerator)
    wl = (workload or Workload(**kw)).validate(model)
    T, B = wl.context, wl.batch
    kvb, sb = get_dtype(wl.kv_dtype).bytes, get_dtype(wl.state_dtype).bytes
    W = weights_bytes(model, wl)
    per_seq_attn = float(model.attention_cache_bytes(T, kvb))
    per_seq_state = float(model.state_bytes(sb))
    kv_total = B * (per_seq_attn + per_seq_state)

    n, tp, pp, dp = (float(x) for x in search_deployment(model, acc, wl, T, B))
    n0, tp0, pp0, dp0 = (float(x) for x in search_deployment(model, acc, wl, T, B, with_cache=False))
    needed, par = _deployment(n, tp, pp, dp)
    without, par0 = _deployment(n0, tp0, pp0, dp0)
    stored = 0.0
    if par:
        stored = kv_total and B * (per_seq_attn * kv_fraction_per_rank(model, par["tensor"])
                                   + per_seq_state * state_fraction_per_rank(model, par["tensor"])) * par["tensor"]
        par["sequences_per_replica"] = int(np.ceil(B / par["data"]))
    # Roofline, on one replica's tensor group (pipeline stages run one after another for a token).
    wbytes = get_dtype(wl.weights_dtype).bytes
    read_params = model.params_total
    prompt = wl.prompt or T
    prefill = decode = None
    replica = par or par0
    if replica:
        seqs = par.get("sequences_per_replica", B) if par else B
        f_pre = float(roofline.prefill_flops(model, prompt))
        b_pre = read_params * wbytes * float(roofline.weights_read_fraction(model, prompt)) + float(
            model.cache_bytes(prompt, kvb, sb))
        prefill = roofline.phase(f_pre, b_pre, acc, wl.weights_dtype, replica["tensor"])
        f_dec = float(roofline.decode_flops(model, T, seqs))
        w_read = read_params * wbytes * float(roofline.weights_read_fraction(model, seqs))
        b_dec = w_read + seqs * (per_seq_attn + per_seq_state)
        decode = roofline.phase(f_dec, b_dec, acc, wl.weights_dtype, replica["tensor"])
    over, over_tiers = 0.0, []
    if par0 and (needed is None or needed > without):
        per_rank = (per_seq_attn * kv_fraction_per_rank(model, par0["tensor"])
                    + per_seq_state * state_fraction_per_rank(model, par0["tensor"])) / par0["pipeline"]
        f_dec = float(roofline.decode_flops(model, T, B))
        w_read = read_params * wbytes * float(roofline.weights_read_fraction(model, B))
        over, over_tiers = _overflow(model, acc, wl, W, par0["tensor"], par0["pipeline"], per_rank, f_dec, w_read)
    return Plan(model, acc, wl, float(model.kv_bytes_per_token(kvb)), per_seq_attn + per_seq_state, per_seq_state,
                W, kv_total, needed, without, par, par0, float(stored), prefill, decode, over, over_tiers)
