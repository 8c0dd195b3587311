"""Reference solution: the shortest context at which the KV cache adds an accelerator to a deployment.

``added_by_kv(T)`` is the number of accelerators the cache of ``T``-token sequences adds (``capacity plan``'s
``accelerators_added_by_kv``): 0 while the cache fits beside the weights, then 1, 2, ... as ``T`` grows (it never
falls when ``T`` grows: a longer sequence's cache is never smaller). Units: tokens.
"""
from __future__ import annotations

from part1_capacity.calculator.plan.plan import Workload, make_plan


def added_by_kv(model: str, accelerator: str, batch: int, kv_dtype: str = "bf16"):
    """``T ↦`` accelerators the KV cache adds for ``batch`` sequences of ``T`` tokens (None: nothing fits)."""

    def added(context: int):
        return make_plan(model, accelerator, Workload(context=context, batch=batch, kv_dtype=kv_dtype)) \
            .accelerators_added_by_kv

    return added


def first_context_adding_an_accelerator(added, max_context: int):
    """The smallest ``T`` in ``1 … max_context`` with ``added(T) != 0`` (an accelerator added, or nothing fits),
    or None when even ``max_context`` adds none. Bisection: about log2(max_context) calls of ``added``."""
    ### BEGIN SOLUTION
    first = None
    if added(max_context) != 0:
        lo, hi = 0, max_context  # added(lo) == 0 (T = 0: no cache at all), added(hi) != 0
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if added(mid) == 0:
                lo = mid
            else:
                hi = mid
        first = hi
    ### END SOLUTION
    return first
