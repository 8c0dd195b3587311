"""What fits on the accelerators one has: the longest context at a batch, or the most sequences at a context.

``capacity plan`` answers "how many accelerators"; a single-GPU or laptop user asks the inverse. ``fit`` holds
the accelerators fixed (one by default) and searches the workload: the largest ``T`` (or ``B``) for which the
fewest accelerators the plan needs (``deploy.fewest_accelerators``, the count ``make_plan`` reports) is at most the
given number. The cache grows monotonically in both, so a bisection finds the exact boundary: the plan at the
answer fits, the plan one *block* more does not. A block is what the sizing rounds to — one token for the textbook
law, 256 cells for llama.cpp (``llama_cpp.CELL_PAD``: a context is padded to it), one KV block for vLLM
(``vllm.BLOCK_SIZE`` tokens) — and one sequence for the batch.

Units: tokens, sequences, bytes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from part1_capacity.calculator.plan import deploy
from part1_capacity.calculator.engines import llama_cpp, vllm
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.plan.resolve import Workload, resolve

MAX_BATCH = 2 ** 20          # the batch searched up to (the CLI's own limit of --batch)
BLOCK = {"law": 1, "llama.cpp": llama_cpp.CELL_PAD, "vllm": vllm.BLOCK_SIZE}   # tokens one step of the sizing adds

LIMITS = {
    "memory": "memory: one more {unit} of cache does not fit beside the weights",
    "model_max_context": "the model's maximum context ({max_context:,} tokens), not memory",
    "batch_limit": "the search's limit of {max_batch:,} sequences, not memory",
    "weights": "the weights alone do not fit",
    "one_token": "the cache of the smallest workload does not fit beside the weights",
}


@dataclass
class Fit:
    """The answer: ``max_context`` at ``batch`` or ``max_batch`` at ``context`` (None: nothing fits)."""
    model: object
    accelerator: object
    accelerators: int
    workload: Workload           # the resolved workload at the answer (or at the smallest one when none fits)
    searched: str                # "context" or "batch"
    value: int | None            # the answer
    limited_by: str              # a LIMITS key
    block: int                   # tokens (context) or sequences (batch) one step more adds

    @property
    def reason(self) -> str:
        unit = "sequence" if self.searched == "batch" else "token" if self.block == 1 else \
            f"block of {self.block} tokens"
        return LIMITS[self.limited_by].format(unit=unit, max_context=self.model.max_context, max_batch=MAX_BATCH)

    def to_dict(self) -> dict:
        wl = self.workload
        out = {"model": self.model.id, "accelerator": self.accelerator.id, "accelerators": self.accelerators,
               "engine": wl.engine, "weights_dtype": wl.weights_dtype, "kv_dtype": wl.kv_dtype,
               "searched": self.searched, "limited_by": self.limited_by, "reason": self.reason,
               "block": self.block}
        if self.searched == "context":
            out.update(batch=wl.batch, max_context=self.value)
        else:
            out.update(context=wl.context, max_batch=self.value)
        return out


def fits(r, T: int, B: int, n: int) -> bool:
    """Whether ``B`` sequences of ``T`` tokens fit on ``n`` accelerators: the plan's fewest accelerators ≤ ``n``."""
    need = float(deploy.fewest_accelerators(r, float(T), float(B)))
    return math.isfinite(need) and need <= n


def _largest(ok, lo: int, hi: int) -> int:
    """The largest ``x`` in [lo, hi] with ``ok(x)``, given ``ok(lo)`` and ``ok`` true up to a point, false after."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def fit(model, accelerator, workload: Workload, search: str, accelerators: int = 1) -> Fit:
    """The longest context (``search="context"``, at ``workload.batch``) or the most sequences (``"batch"``, at
    ``workload.context``) that fit ``accelerators`` of ``accelerator``."""
    if search not in ("context", "batch"):
        raise InputError(f"fit: search must be context or batch, got {search!r}")
    if isinstance(accelerators, bool) or not isinstance(accelerators, int) or accelerators < 1:
        raise InputError(f"accelerators: must be a positive integer, got {accelerators!r}")
    T_max = model.max_context
    wl = replace(workload, context=T_max if search == "context" else workload.context)
    r = resolve(model, accelerator, wl)          # validated once: dtypes, engine, context within the model's
    wl = r.workload
    n = accelerators
    block = BLOCK[wl.engine] if search == "context" else 1
    weights_only = float(deploy.fewest_accelerators(r, 1.0, 1.0, with_cache=False))
    if not math.isfinite(weights_only) or weights_only > n:
        return Fit(model, accelerator, n, replace(wl, context=1) if search == "context" else replace(wl, batch=1),
                   search, None, "weights", block)
    if search == "context":
        B = wl.batch
        if not fits(r, 1, B, n):
            return Fit(model, accelerator, n, replace(wl, context=1), search, None, "one_token", block)
        if fits(r, T_max, B, n):
            return Fit(model, accelerator, n, replace(wl, context=T_max), search, T_max, "model_max_context", block)
        T = _largest(lambda t: fits(r, t, B, n), 1, T_max)
        return Fit(model, accelerator, n, replace(wl, context=T), search, T, "memory", block)
    T = wl.context
    if not fits(r, T, 1, n):
        return Fit(model, accelerator, n, replace(wl, batch=1), search, None, "one_token", block)
    if fits(r, T, MAX_BATCH, n):
        return Fit(model, accelerator, n, replace(wl, batch=MAX_BATCH), search, MAX_BATCH, "batch_limit", block)
    B = _largest(lambda b: fits(r, T, b, n), 1, MAX_BATCH)
    return Fit(model, accelerator, n, replace(wl, batch=B), search, B, "memory", block)
