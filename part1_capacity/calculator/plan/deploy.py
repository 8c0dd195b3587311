"""Deployments as an operator builds them: accelerators come in nodes, tensor parallelism stays inside the
fast-interconnect (scale-up) domain and divides the heads, pipeline stages go across nodes, and MoE experts may be
spread over data-parallel ranks (expert parallelism) where the engine supports it.

A deployment is ``tensor × pipeline × data`` accelerators (``t``, ``p``, ``d``):

- **tensor** ``t`` — a power of two up to the accelerator's scale-up domain (``max_tp``: 8 on an HGX board, 72
  in an NVL72 rack, a TPU slice) that splits the attention heads evenly (vLLM's rule, ``splits_heads``). Each rank
  holds ``1/t`` of the weights. K/V heads split too, but a rank holds at least one (replicated when
  ``n_kv_heads < t``); the MLA latent has no heads and is **replicated on every rank**; recurrent state splits by
  its heads.
- **pipeline** ``p`` — stages split the layers (weights and caches). Operators use them only when tensor
  parallelism is exhausted (the largest degree the heads and the scale-up domain allow): across nodes. Pinning
  ``tensor`` or ``pipeline`` lifts that rule.
- **data** ``d`` — replicas, each with its share ``⌈B/d⌉`` of the sequences.
- **expert** — MoE on an engine that supports it (vLLM ``--enable-expert-parallel``): the ``t·d`` ranks of the
  data-parallel group share the experts (each holds ``1/(t·d)`` of them) while attention and the other dense
  weights are replicated per data-parallel rank and each rank caches only its own sequences — no replication of
  the MLA latent across the group. Without the split of a checkpoint into expert and dense weights the dense part
  is taken as the active parameters (an upper bound: conservative).

Memory per rank: ``usable = memory × usable_fraction − overhead`` (``resolve.usable_bytes``, written once there).

The default choice: the fewest **nodes** (``⌈t·p·d / node_size⌉``), then the fewest accelerators in them, then the
best decode step time; ``reason`` says which rule decided. ``--nodes N`` instead takes the best decode step time on
at most ``N`` nodes.

Step times account for the split (``rank_step_time``): each rank's roofline time (``roofline.step_time``) plus
two all-reduces per layer over the interconnect (ring: ``2(t−1)/t × bytes / one-direction bandwidth``, plus a
fixed latency per collective), and the pipeline: a decode step of ``m`` sequences on ``p`` stages runs
``k = min(m, p)`` micro-batches, so it lasts ``p × stage time(m/k)`` — with fewer sequences than stages the
other stages wait (the bubble, ``1 − k/p`` of the time). Units: bytes, bytes/s, seconds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from part1_capacity.calculator.sizing import roofline
from part1_capacity.calculator.plan import speed
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.plan.resolve import Resolved
from part1_capacity.calculator.sizing.sharding import sequences_per_replica, splits_heads, weights_per_rank

# vLLM's custom all-reduce for small (decode) messages inside one NVLink node takes a few microseconds per call
# (vllm/distributed/device_communicators/custom_all_reduce.py: one-shot kernel for messages below its size limit);
# NCCL across nodes takes tens. Order-of-magnitude assumptions, not measurements: stated, not sourced figures.
ALLREDUCE_LATENCY_S = 8e-6
ALLREDUCE_LATENCY_ACROSS_NODES_S = 30e-6
ACTIVATION_BYTES = 2          # bf16 activations exchanged between ranks
MAX_EXPERT_GROUP = 256        # largest expert-parallel group searched (ranks)
KEEP_PER_SHAPE = 8            # replica counts timed per shape under a node budget (see replica_counts)


# --- the rules -----------------------------------------------------------------------------------------------------
def tp_degrees(model, acc, pinned: int | None = None) -> list[int]:
    """Tensor-parallel degrees inside the accelerator's scale-up domain that split the heads evenly (powers of
    two); only ``pinned`` when the workload pins one (refused if the domain is smaller)."""
    if pinned is not None:
        if pinned > acc.max_tp:
            raise InputError(f"tensor_parallel: {pinned} exceeds the {acc.max_tp} {acc.name} joined by one fast "
                             f"interconnect; allowed: 1..{acc.max_tp}")
        return [pinned]
    out, t = [], 1
    while t <= acc.max_tp:
        if splits_heads(model, t):
            out.append(t)
        t *= 2
    return out or [1]


def expert_parallel_possible(model, acc) -> bool:
    return model.is_moe and "vllm" in acc.engines


@dataclass(frozen=True)
class Shape:
    """A replica's shape before its replica count is chosen (``Deployment.expert`` is then the expert group's size)."""
    tensor: int
    pipeline: int
    expert_parallel: bool = False   # the experts spread over the data-parallel group


def shapes(r: Resolved) -> list[Shape]:
    """Every (tensor, pipeline, expert) shape the rules allow for this workload (pins applied)."""
    model, acc, wl = r.model, r.accelerator, r.workload
    degrees = tp_degrees(model, acc, wl.tensor_parallel)
    t_max = max(degrees)
    L = model.n_layers
    pp = wl.pipeline_parallel
    if pp is not None and pp > L:
        raise InputError(f"pipeline_parallel: {pp} exceeds {model.id}'s {L} layers; allowed: 1..{L}")
    out = []
    for t in degrees:
        if pp is not None:
            stages = [pp]
        elif t == t_max or wl.tensor_parallel is not None:
            stages = range(1, L + 1)
        else:
            stages = [1]       # a pipeline inside the node while tensor parallelism could still grow: not used
        out += [Shape(t, p) for p in stages]
        if expert_parallel_possible(model, acc) and (pp or 1) == 1:
            out.append(Shape(t, 1, True))
    return out


def replicas_needed(r: Resolved, T, B, shape: Shape, with_cache: bool = True):
    """Fewest data-parallel replicas ``d`` that hold ``B`` sequences of ``T`` tokens in ``shape`` (``inf`` where
    none does). Python numbers for a plan; the sweep passes numpy arrays, broadcast together (``_ops``).

    Without expert parallelism a replica of ``t·p`` ranks holds ``g = ⌊(U − W/(t·p)) / (s/p)⌋`` sequences
    (``U`` usable bytes per rank, ``W`` weights, ``s`` one sequence's cache on a tensor rank), so ``d = ⌈B/g⌉``.
    With it, a rank holds ``W_dense/t + W_experts/(t·d)`` of weights and ``⌈B/d⌉·s``: the fewest ``d``, a power of
    two (so the experts divide evenly over the group), with ``t·d`` at most ``MAX_EXPERT_GROUP`` (ranks beyond
    the batch still hold their share of the experts and run empty steps, as vLLM's data-parallel ranks do)."""
    xp = _ops(T, B)
    if xp is _Scalars:
        T, B = float(T), float(B)
    U, W = r.usable_bytes, r.weights_bytes
    t, p = shape.tensor, shape.pipeline
    s = rank_cache_bytes(r, T, t, p) if with_cache else 0.0
    if not shape.expert_parallel:
        room = U - weights_per_rank(W, t, p)
        if room <= 0:
            return math.inf
        g = xp.floor(room / xp.where(s > 0, s, 1.0))
        d = xp.where(s > 0, sequences_per_replica(B, xp.maximum(g, 1)), 1.0)
        return xp.where((s > 0) & (g < 1), math.inf, d)
    We = r.expert_bytes
    d = math.inf
    dk = 1
    while t * dk <= MAX_EXPERT_GROUP:  # expert groups in powers of two (how the experts divide evenly)
        ok = xp.isinf(d) & (weights_per_rank(W, t, 1, We, dk) + sequences_per_replica(B, dk) * s <= U)
        d = xp.where(ok, float(dk), d)
        if not xp.any(xp.isinf(d)):
            break
        dk *= 2
    return d


def fewest_accelerators(r: Resolved, T, B, with_cache: bool = True):
    """Fewest accelerators over every allowed shape (``inf`` where nothing fits) — the count a sweep shows (numpy
    arrays in, an array out that the caller broadcasts to its grid); equal to the chosen plan's count (the plan
    breaks ties among shapes by decode time)."""
    xp = _ops(T, B)
    best = math.inf
    for sh in shapes(r):
        best = xp.minimum(best, sh.tensor * sh.pipeline * replicas_needed(r, T, B, sh, with_cache))
    return best


def _ops(*xs):
    """The elementwise functions for these inputs: the arrays' own namespace (numpy's, through the array API's
    ``__array_namespace__``) when the sweep passes its grid, else ``_Scalars``. The plan path is scalar
    arithmetic and this module imports no numpy, so the same code runs in the page's Python, which has none."""
    for x in xs:
        namespace = getattr(x, "__array_namespace__", None)
        if namespace is not None:
            return namespace()
    return _Scalars


def _whole(f):
    return lambda x: float(f(x)) if math.isfinite(x) else x   # numpy's floor/ceil: inf and nan pass through


class _Scalars:
    """numpy's names and meaning for the few functions the search uses, on Python floats."""
    floor = staticmethod(_whole(math.floor))
    maximum = staticmethod(max)
    minimum = staticmethod(min)
    isinf = staticmethod(math.isinf)
    any = staticmethod(bool)

    @staticmethod
    def where(condition, if_true, if_false):
        return if_true if condition else if_false


# --- time of a step on a deployment --------------------------------------------------------------------------------
def allreduce_seconds(acc, ranks: int, nbytes: float, across_nodes: bool) -> float:
    """One ring all-reduce of ``nbytes`` over ``ranks`` devices: ``2(r−1)/r × bytes / bandwidth`` one direction
    (the interconnect figure is both directions) plus a fixed latency — larger when the ranks span more than one
    scale-up domain (``across_nodes``; the bandwidth term then still uses the fast link: optimistic)."""
    if ranks <= 1:
        return 0.0
    one_way = acc.interconnect / 2 if acc.interconnect else 0.0
    lat = ALLREDUCE_LATENCY_ACROSS_NODES_S if across_nodes else ALLREDUCE_LATENCY_S
    return lat + (2 * (ranks - 1) / ranks * nbytes / one_way if one_way else math.inf)


@dataclass
class StepTime:
    time_s: float              # the whole step (decode: every sequence of the replica gains one token)
    rank_s: float              # roofline time of the ranks' arithmetic and memory traffic
    communication_s: float     # all-reduces (tensor) and expert exchange
    microbatches: int
    bubble_fraction: float     # share of the step a pipeline stage waits


def rank_step_time(r: Resolved, tokens, seqs, flops, weight_bytes_read, cache_bytes, dep,
                   tier_bytes: float = 0.0, tier_bandwidth: float = math.inf) -> StepTime:
    """Time of one pass of ``tokens`` new tokens over ``seqs`` sequences on deployment ``dep``: ``flops`` and
    ``weight_bytes_read`` for the whole model pass of one replica, ``cache_bytes`` the cache the pass reads or
    writes on one tensor rank (all layers), of which ``tier_bytes`` come from a slower tier at ``tier_bandwidth``
    bytes/s (added to the memory side: ``roofline.step_time``'s extra seconds). Pipeline: ``k = min(seqs, p)``
    micro-batches, ``p × stage time``."""
    model, acc = r.model, r.accelerator
    t, p = dep.tensor, dep.pipeline
    k = max(1, min(int(seqs), p))
    peak, bandwidth = speed.rates(acc, r.workload.weights_dtype)     # the roofline × the per-type efficiency (data)
    stage = float(roofline.step_time(flops / (k * t * p),
                                     weight_bytes_read / (t * p) + (cache_bytes - tier_bytes) / (k * p),
                                     peak, bandwidth, tier_bytes / (k * p) / tier_bandwidth))
    tok = tokens / k
    comm_layer = 2 * allreduce_seconds(acc, t, tok * model.hidden_size * ACTIVATION_BYTES,
                                       across_nodes=t > acc.max_tp)   # never: tensor ranks share the fast link
    if dep.expert > 1:          # dispatch + combine of the tokens over the expert group, approximated likewise
        comm_layer += 2 * allreduce_seconds(acc, dep.expert, tok * model.hidden_size * ACTIVATION_BYTES,
                                            across_nodes=dep.expert > acc.max_tp)
    comm = comm_layer * model.n_layers / p
    total = p * (stage + comm)
    return StepTime(total, p * stage, p * comm, k, 1 - k / p)


# --- the deployment search -----------------------------------------------------------------------------------------
@dataclass
class Deployment:
    tensor: int
    pipeline: int
    data: int
    expert: int                # ranks sharing the experts (1: no expert parallelism)
    nodes: int
    accelerators: int
    sequences_per_replica: int
    weights_per_rank: float
    cache_per_rank: float      # bytes of cache one rank holds (its sequences, its layers)
    decode: StepTime | None = None
    reason: str = ""
    alternatives: list = field(default_factory=list)

    def parallelism(self) -> dict:
        return {"tensor": self.tensor, "pipeline": self.pipeline, "data": self.data, "expert": self.expert,
                "nodes": self.nodes, "reason": self.reason, "sequences_per_replica": self.sequences_per_replica}

    def label(self) -> str:
        s = f"tensor {self.tensor} × pipeline {self.pipeline} × data {self.data}"
        return s + (f", experts over {self.expert}" if self.expert > 1 else "")


def _deployment(r: Resolved, T, B, sh: Shape, d: int, with_cache: bool) -> Deployment:
    t, p = sh.tensor, sh.pipeline
    m = sequences_per_replica(B, d)
    if sh.expert_parallel:
        w_rank = weights_per_rank(r.weights_bytes, t, p, r.expert_bytes, d)
    else:
        w_rank = weights_per_rank(r.weights_bytes, t, p)
    n = t * p * d
    return Deployment(t, p, d, t * d if sh.expert_parallel else 1, math.ceil(n / r.accelerator.node_size), n, m, w_rank,
                      rank_cache_bytes(r, T, t, p, m) if with_cache else 0.0)


def rank_cache_bytes(r: Resolved, T, t: int, p: int, seqs=1):
    """Bytes of cache one rank holds: ``seqs`` sequences of ``T`` tokens on its tensor rank
    (``Resolved.cache_per_rank``), its stage's ``1/p`` of the layers."""
    return seqs * r.cache_per_rank(T, t) / p


def decode_pass(r: Resolved, dep: Deployment) -> roofline.Pass:
    """One decode step of ``dep``'s replica: each of its ``m`` sequences gains a token. The weights each rank reads:
    the dense part in full and, under expert parallelism, the experts it holds that the step's tokens route to."""
    model, T, m = r.model, r.context, dep.sequences_per_replica
    W = r.weights_bytes
    if dep.expert > 1:      # dense part read in full by every rank; each rank reads the experts it holds
        frac = float(roofline.weights_read_fraction(model, m * (dep.expert // dep.tensor)))
        w_read = (W - r.expert_bytes) + r.expert_bytes / (dep.expert // dep.tensor) * frac
    else:
        w_read = W * float(roofline.weights_read_fraction(model, m))
    return roofline.Pass("decode", tokens=m, seqs=m, flops=float(roofline.decode_flops(model, T, m)),
                         attention_flops=float(roofline.decode_attention_flops(model, T, m)),
                         weight_bytes=w_read, cache_bytes=m * r.sequence_cache_bytes(T),
                         cache_bytes_per_rank=m * r.cache_per_rank(T, dep.tensor))


def decode_time(r: Resolved, dep: Deployment) -> StepTime:
    """One decode step of ``dep``: each of its replicas' sequences gains a token."""
    return pass_time(r, decode_pass(r, dep), dep)


def pass_time(r: Resolved, ps: roofline.Pass, dep, tier_bytes: float = 0.0,
              tier_bandwidth: float = math.inf) -> StepTime:
    """Seconds of one pass on ``dep``: the one place a pass becomes time. A host with measured kernels for the
    weights' type, on one accelerator, times it with those kernels (``speed.measured_seconds``); otherwise each
    rank's roofline at the type's efficiencies, plus the all-reduces and the pipeline (``rank_step_time``).
    ``tier_bytes`` of the pass's cache on one tensor rank (all layers) read from a slower tier of
    ``tier_bandwidth`` bytes/s: their time is added to the memory side (serially: a conservative bound), to
    measured kernels' time likewise."""
    split = rank_step_time(r, ps.tokens, ps.seqs, ps.flops, ps.weight_bytes, ps.cache_bytes_per_rank, dep,
                           tier_bytes, tier_bandwidth)
    if dep.accelerators == 1:
        measured = speed.measured_seconds(r.model, r.accelerator, r.workload.weights_dtype, ps)
        if measured is not None:
            measured += tier_bytes / tier_bandwidth
            return StepTime(measured, measured, split.communication_s, split.microbatches, split.bubble_fraction)
    return split


def candidates(r: Resolved, with_cache: bool = True, max_nodes: int | None = None,
               counted: list | None = None) -> list[Deployment]:
    """Every allowed deployment with its fewest replicas (and, under ``max_nodes``, with the replica counts that can
    win: ``replica_counts``). ``counted``, when given, receives how many deployments fit the budget in all —
    the ones not timed included."""
    T, B, acc = r.context, r.batch, r.accelerator
    out = []
    for sh in shapes(r):
        d = float(replicas_needed(r, T, B, sh, with_cache))
        if not math.isfinite(d):
            continue
        d = int(d)
        top = d
        if max_nodes is not None:
            top = max(d, min(B, max_nodes * acc.node_size // (sh.tensor * sh.pipeline)))
        for dd in replica_counts(d, top, B, sh):
            out.append(_deployment(r, T, B, sh, dd, with_cache))
        if counted is not None and max_nodes is not None:
            room = max_nodes * acc.node_size // (sh.tensor * sh.pipeline)     # most replicas within the budget
            counted.append(sum(dd <= room for dd in replica_counts(d, top, B, sh)) if sh.expert_parallel
                           else max(0, min(B, room) - d + 1))
    return out


def replica_counts(d: int, top: int, B: int, sh: Shape, keep: int = KEEP_PER_SHAPE) -> list[int]:
    """The replica counts worth timing between the fewest ``d`` and the budget's ``top``, in a bounded number.

    Expert groups come in powers of two (at most ``log2(MAX_EXPERT_GROUP)`` of them). Otherwise a replica's decode
    step depends on the replica count only through its sequences ``m = ⌈B/dd⌉``, and more replicas never slow it:
    of every run of counts sharing one ``m`` only the smallest can win (fewest accelerators), and the winners and
    the runners-up shown come from the smallest ``m``. So: ``d`` itself, and the smallest count of each of the
    ``keep`` smallest values of ``m`` — at most ``keep + 1`` counts, however large the node budget and the batch
    (a sweep over every count took minutes for a billion nodes and a million sequences)."""
    if sh.expert_parallel:
        out, dd = [], 1
        while dd <= top and sh.tensor * dd <= MAX_EXPERT_GROUP:
            if dd >= d:
                out.append(dd)
            dd *= 2
        return out
    per = sequences_per_replica
    counts, m = {d}, per(B, top)
    while len(counts) <= keep and m <= per(B, d):
        dd = max(d, per(B, m))                  # the fewest replicas that give m sequences each
        counts.add(dd)
        m = per(B, dd - 1) if dd > d else m + 1  # the next larger m (fewer replicas)
        if dd == d:
            break
    return sorted(counts)


def choose(r: Resolved, with_cache: bool = True) -> Deployment | None:
    """The deployment an operator would pick (see the module docstring), with the reason; None if nothing fits."""
    nodes, acc = r.workload.nodes, r.accelerator
    fitting: list[int] = []
    cands = candidates(r, with_cache, max_nodes=nodes, counted=fitting)
    if nodes is not None:
        cands = [c for c in cands if c.nodes <= nodes]
        if not cands:
            return None
        for c in cands:
            c.decode = decode_time(r, c)
        cands.sort(key=lambda c: (c.decode.time_s, c.accelerators, c.pipeline))
        best = cands[0]
        best.reason = (f"nodes pinned to {nodes}: of {sum(fitting)} deployments that fit on at most {nodes} "
                       f"node{'s' if nodes > 1 else ''}, {best.label()} has the best decode step")
        best.alternatives = cands[1:4]
        return best
    if not cands:
        return None
    fewest = min(c.nodes for c in cands)
    cands = [c for c in cands if c.nodes == fewest]
    least = min(c.accelerators for c in cands)
    cands = [c for c in cands if c.accelerators == least]
    for c in cands:
        c.decode = decode_time(r, c)
    cands.sort(key=lambda c: (c.decode.time_s, c.pipeline, c.tensor))
    best = cands[0]
    where = f"{fewest} node{'s' if fewest > 1 else ''} of {acc.node_size}"
    if len(cands) == 1:
        best.reason = f"fewest nodes ({where}) and fewest accelerators in them ({least}): the only such deployment"
    else:
        other = cands[1]
        best.reason = (f"fewest nodes ({where}), fewest accelerators in them ({least}); of {len(cands)} such "
                       f"deployments {best.label()} decodes fastest ({best.decode.time_s * 1e3:,.1f} ms per step, "
                       f"next {other.label()}: {other.decode.time_s * 1e3:,.1f} ms)")
    best.alternatives = cands[1:4]
    return best
