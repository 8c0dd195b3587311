"""Workload + model + accelerator → a plan: memory, the deployment (nodes, tensor/pipeline/data/expert
parallelism, with and without the KV cache), prefill and decode times on it, the bottleneck, a verdict that
follows from the numbers, and where an overflowing cache can go.

The deployment rules and the search live in ``deploy.py`` (one place: usable memory per accelerator, each rank's
share of the cache, the split's step times); the weight bytes in ``weights.py``; the roofline in ``roofline.py``.
This module only assembles them. Units: bytes, seconds.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from part1_capacity.calculator.plan import deploy, speed
from part1_capacity.calculator import engines
from part1_capacity.calculator.sizing import roofline
from part1_capacity.calculator.model import weights
from part1_capacity.calculator.engines import vllm_memory
from part1_capacity.calculator.base.dtypes import get_dtype
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.hardware.accelerators import Accelerator, load_accelerator, memory_fields
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.model.profiles import ModelProfile
from part1_capacity.calculator.plan.resolve import (  # noqa: F401  (Workload and its defaults: plan's names since the start)
    DEFAULT_OVERHEAD_BYTES, DEFAULT_USABLE_FRACTION, Resolved, Workload, resolve)
from part1_capacity.calculator.hardware.tiers import tiers_for


IMPLICATIONS = {
    "weights": ("weights dominate memory: propose fewer bits per weight, more memory per accelerator or sharding the "
                "weights (tensor/expert parallelism); a tiered KV memory would not address this customer's problem"),
    "kv_cache": ("the KV cache dominates memory: propose KV quantization (fp8), prefix caching, fewer or shorter "
                 "concurrent sequences per accelerator, or offloading KV to a slower tier (host DRAM, CXL) — "
                 "tiered KV memory fits this customer"),
    # the weights are the larger share (so the bottleneck), yet the cache still adds accelerators of its own
    "weights_and_kv": ("weights dominate memory, yet the KV cache adds accelerators of its own: fewer bits per "
                       "weight, more memory per accelerator or sharding the weights shrink the accelerators the "
                       "weights need; KV quantization (fp8), fewer or shorter concurrent sequences, or a slower tier "
                       "for the cache remove the ones the cache adds — a tiered KV memory helps with those only"),
}


def implication_key(bottleneck: str, added_by_kv: int | None) -> str:
    """Which IMPLICATIONS entry a plan's numbers call for: the larger share names the bottleneck; when that is the
    weights and the cache still adds accelerators, the answer has two parts."""
    return "weights_and_kv" if bottleneck == "weights" and (added_by_kv or 0) > 0 else bottleneck


NOTHING_TO_PROPOSE = "fits; nothing to propose for memory"


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
    deployment: deploy.Deployment | None
    deployment_without_kv: deploy.Deployment | None
    kv_bytes_stored: float          # across all ranks, including tensor-parallel replication
    prefill: roofline.Phase | None
    decode: roofline.Phase | None
    decode_split: deploy.StepTime | None = None
    prefill_split: deploy.StepTime | None = None
    overflow: dict = field(default_factory=dict)
    overflow_tiers: list = field(default_factory=list)
    fewest: deploy.Deployment | None = None    # the fewest-accelerator deployment (differs under a node budget)
    resolved: Resolved | None = field(default=None, compare=False, repr=False)   # what the plan was sized from

    @property
    def accelerators_needed(self) -> int | None:
        """Fewest accelerators that hold the workload (the deployment under a ``--nodes`` budget may use more)."""
        dep = self.fewest or self.deployment
        return dep.accelerators if dep else None

    @property
    def accelerators_without_kv(self) -> int | None:
        return self.deployment_without_kv.accelerators if self.deployment_without_kv else None

    @property
    def parallelism(self) -> dict:
        return self.deployment.parallelism() if self.deployment else {}

    @property
    def parallelism_without_kv(self) -> dict:
        return self.deployment_without_kv.parallelism() if self.deployment_without_kv else {}

    @property
    def overflow_bytes(self) -> float:
        return self.overflow.get("bytes", 0.0)

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

    @property
    def verdict(self) -> str:
        """What the numbers say about memory: nothing to propose when the cache adds no accelerator."""
        added = self.accelerators_added_by_kv
        if self.deployment_without_kv is None:
            return "does not fit: the weights alone exceed every allowed deployment"
        if self.deployment is None:
            return "does not fit: one sequence's cache does not fit beside its share of the weights"
        if added == 0:
            n = self.accelerators_without_kv
            return (f"{NOTHING_TO_PROPOSE}: the KV cache adds no accelerator to the {n:,} the weights need")
        with_kv = self.fewest or self.deployment
        nodes = with_kv.nodes - self.deployment_without_kv.nodes
        same = with_kv.nodes
        adds = (f"the KV cache adds {added:,} accelerator{'s' if added != 1 else ''} "
                + (f"and {nodes:,} node{'s' if nodes != 1 else ''}" if nodes > 0 else
                   "within the same node" if same == 1 else f"within the same {same:,} nodes"))
        if self.bottleneck == "kv_cache":
            return f"{adds}; {IMPLICATIONS['kv_cache']}"
        n0 = self.accelerators_without_kv
        return (f"{adds}. The weights are still the larger share of memory (the cache is "
                f"{self.kv_to_weights_ratio:.2f}× the weights), so they are the bottleneck: the {n0:,} accelerator"
                f"{'s' if n0 != 1 else ''} the weights need stay whatever is done to the cache — fewer bits per "
                f"weight, more memory per accelerator or sharding the weights shrink those. The {added:,} the cache "
                f"adds hold nothing but cache: KV quantization (fp8), fewer or shorter concurrent sequences, or a "
                f"slower tier for the cache (host DRAM, CXL) would remove them — a tiered KV memory helps with those "
                f"{added:,} and not with the rest")

    def to_dict(self) -> dict:
        wl = self.workload
        dec = self.decode_split
        return {
            "model": self.model.id, "structure": self.model.structure, "accelerator": self.accelerator.id,
            **memory_fields(self.accelerator),
            "workload": {"context": wl.context, "batch": wl.batch, "prompt": wl.prompt or wl.context,
                         "tensor_parallel": wl.tensor_parallel, "pipeline_parallel": wl.pipeline_parallel,
                         "nodes": wl.nodes, "engine": wl.engine,
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
            "nodes_needed": (self.fewest or self.deployment).nodes if self.deployment else None,
            "nodes_without_kv": self.deployment_without_kv.nodes if self.deployment_without_kv else None,
            "parallelism": self.parallelism,
            "parallelism_without_kv": self.parallelism_without_kv,
            "prefill": ({**self.prefill.to_dict(), "communication_s": self.prefill_split.communication_s,
                         "time_kind": speed.time_kind(self.accelerator, wl.weights_dtype)}
                        if self.prefill else None),
            "decode": ({**self.decode.to_dict(), "tokens_per_s": wl.batch / self.decode.time_s,
                        "communication_s": dec.communication_s, "pipeline_microbatches": dec.microbatches,
                        "pipeline_bubble_fraction": dec.bubble_fraction,
                        "time_kind": speed.time_kind(self.accelerator, wl.weights_dtype)}
                       if self.decode else None),
            "layout_notice": layout_notice(self),
            "bottleneck": self.bottleneck,
            "implication": (self.verdict if self.accelerators_added_by_kv == 0 else
                            IMPLICATIONS[implication_key(self.bottleneck, self.accelerators_added_by_kv)]),
            "verdict": self.verdict,
            "overflow_bytes": self.overflow_bytes,
            "overflow": self.overflow,
            "overflow_tiers": self.overflow_tiers,
        }


def layout_notice(plan: Plan) -> str | None:
    """One line when the workload pins one parallel degree (tensor or pipeline) and the search chose the other above
    1: every figure after it (memory per rank, the engine's cache and start-up lines) is for that layout, not for
    the pinned degree alone. None when nothing was added silently."""
    wl = plan.workload
    dep = plan.deployment or plan.deployment_without_kv
    if dep is None or (wl.tensor_parallel is None) == (wl.pipeline_parallel is None):
        return None          # nothing pinned (the search's choice is the plan) or both pinned (nothing chosen)
    if wl.tensor_parallel is not None and dep.pipeline > 1:
        return (f"tensor parallelism pinned to {wl.tensor_parallel}: the search added {dep.pipeline} pipeline "
                f"stages to fit (pin --pipeline-parallel 1 to forbid them); every figure here is for tensor "
                f"{dep.tensor} × pipeline {dep.pipeline}")
    if wl.pipeline_parallel is not None and dep.tensor > 1:
        return (f"pipeline stages pinned to {wl.pipeline_parallel}: the search chose tensor parallelism "
                f"{dep.tensor} (pin --tensor-parallel 1 to forbid it); every figure here is for tensor "
                f"{dep.tensor} × pipeline {dep.pipeline}")
    return None


def _overflow(r: Resolved, dep0: deploy.Deployment, tier_rows: list | None = None) -> tuple[dict, list]:
    """The cache that does not fit beside the weights on the weights-only deployment ``dep0``, rank by rank, and
    what a decode step slows to when each rank reads its overflow from a slower tier.

    Every rank holds its replica's share of the sequences on its tensor rank: ``⌈B/d⌉ × cache_per_rank / p``.
    Summed over the ranks this is more than the cache itself when tensor parallelism replicates it (K/V heads
    fewer than ranks; the MLA latent on every rank) — ``replication`` says by how much. The decode step is timed
    by ``deploy.pass_time`` like every other pass, once all in the device's memory and once per tier with each
    rank's overflow read from it."""
    acc = r.accelerator
    T, B = r.context, r.batch
    t, p = dep0.tensor, dep0.pipeline
    need = deploy.rank_cache_bytes(r, T, t, p, dep0.sequences_per_replica)
    free = max(r.usable_bytes - dep0.weights_per_rank, 0.0)
    over = max(need - free, 0.0)
    if over <= 0:
        return {}, []
    ranks = dep0.accelerators
    kv_total = B * r.sequence_cache_bytes(T)
    info = {"bytes": over * ranks, "bytes_per_rank": over, "ranks": ranks, "cache_per_rank": need,
            "free_per_rank": free, "replication": need * ranks / kv_total if kv_total else 1.0,
            "deployment": dep0.label()}
    # one decode step of the weights-only deployment; each rank's overflow (its stage's layers: × p for the
    # tensor rank's whole pass) read from the tier
    dec = deploy.decode_pass(r, dep0)
    t_all_hbm = deploy.pass_time(r, dec, dep0).time_s
    out = []
    for tier in tiers_for(acc, tier_rows):
        if tier.own_memory:                # the device's own memory is what overflowed
            continue
        t_step = deploy.pass_time(r, dec, dep0, tier_bytes=over * p, tier_bandwidth=tier.bandwidth).time_s
        out.append({"tier": tier.id, "name": tier.name, "capacity_bytes_per_accelerator": tier.capacity_bytes,
                    "bandwidth": tier.bandwidth, "fits": bool(tier.capacity_bytes >= over),
                    "decode_step_s": t_step, "decode_tokens_per_s": B / t_step,
                    "slowdown_vs_hbm": t_step / t_all_hbm})
    return info, out


def _phases(r: Resolved, dep: deploy.Deployment):
    """Prefill (one prompt on one replica) and decode (one step of a replica's sequences) on ``dep``: each pass
    placed on the roofline of the whole pass (bytes, intensity, bound) and timed once, by ``deploy.pass_time``."""
    model, acc, wl = r.model, r.accelerator, r.workload
    T, prompt, W = r.context, r.prompt, r.weights_bytes
    how = speed.basis(acc, wl.weights_dtype)   # a host's measured kernels, else the datasheet's stated assumption
    pre = roofline.Pass("prefill", tokens=prompt, seqs=1, flops=float(roofline.prefill_flops(model, prompt)),
                        attention_flops=float(roofline.prefill_attention_flops(model, prompt)),
                        weight_bytes=W * float(roofline.weights_read_fraction(model, prompt)),
                        cache_bytes=r.sequence_cache_bytes(prompt),
                        cache_bytes_per_rank=r.cache_per_rank(prompt, dep.tensor))
    pre_split = deploy.pass_time(r, pre, dep)
    prefill = roofline.phase(pre.flops, pre.weight_bytes + pre.cache_bytes, acc, wl.weights_dtype, dep.tensor,
                             time_s=pre_split.time_s, basis=how)
    dec = deploy.decode_pass(r, dep)
    dec_split = dep.decode or deploy.pass_time(r, dec, dep)
    placed = W * float(roofline.weights_read_fraction(model, dep.sequences_per_replica)) + dec.cache_bytes
    decode = roofline.phase(dec.flops, placed, acc, wl.weights_dtype, dep.tensor, time_s=dec_split.time_s, basis=how)
    return prefill, pre_split, decode, dec_split


def make_plan(model, accelerator, workload: Workload | None = None, tiers: list | None = None, **kw) -> Plan:
    """The plan for ``model`` (profile or name/config path) on ``accelerator`` (object, name or JSON path).
    ``tiers``: a tier table (``tiers.load_tiers``) for the overflow, default the bundled one."""
    model = model if isinstance(model, ModelProfile) else load_model(model)
    acc = accelerator if isinstance(accelerator, Accelerator) else load_accelerator(accelerator)
    r = resolve(model, acc, workload or Workload(**kw))     # validated once; the caller's workload is not changed
    wl, T, B = r.workload, r.context, r.batch
    per_seq = r.sequence_cache_bytes(T)                 # attention K/V (or latent) + recurrent state, by the law
    per_seq_state = float(model.state_bytes(r.state_bytes))
    dep = deploy.choose(r)
    unpinned = r.with_workload(nodes=None)           # memory answers: the fewest nodes, whatever the budget
    fewest = deploy.choose(unpinned) if wl.nodes else dep
    dep0 = deploy.choose(unpinned, with_cache=False)
    if wl.nodes and dep is None and fewest is not None:
        raise InputError(f"nodes: nothing fits on {wl.nodes} node{'s' if wl.nodes > 1 else ''} of "
                         f"{acc.node_size} {acc.name}; the fewest is {fewest.label()} on {fewest.nodes} nodes")
    stored = B * r.cache_per_rank(T, dep.tensor) * dep.tensor if dep else 0.0
    prefill = pre_split = decode = dec_split = None
    if dep or dep0:
        prefill, pre_split, decode, dec_split = _phases(r, dep or dep0)
    over, over_tiers = {}, []
    if dep0 and (fewest is None or fewest.accelerators > dep0.accelerators):
        over, over_tiers = _overflow(r, dep0, tiers)
    return Plan(model=model, accelerator=acc, workload=wl, kv_bytes_per_token=float(model.kv_bytes_per_token(r.kv_bytes)),
                kv_bytes_per_sequence=per_seq, state_bytes_per_sequence=per_seq_state,
                weights_bytes=r.weights_bytes, kv_bytes_total=B * per_seq, deployment=dep,
                deployment_without_kv=dep0, kv_bytes_stored=stored, prefill=prefill, decode=decode,
                decode_split=dec_split, prefill_split=pre_split, overflow=over, overflow_tiers=over_tiers,
                fewest=fewest, resolved=r)


def for_plan(plan: Plan, engine: str | None = None, hybrid_manager: bool | None = None) -> engines.EngineAllocation:
    """``allocate`` for a ``plan.Plan``: its workload, on its tensor-parallel degree (pinned, else the search's);
    ``engine`` and ``hybrid_manager`` default to the workload's (another engine: what it would allocate instead)."""
    wl = plan.workload
    tp = (wl.tensor_parallel or plan.parallelism.get("tensor")
          or plan.parallelism_without_kv.get("tensor") or 1)
    pipeline = plan.parallelism.get("pipeline") or plan.parallelism_without_kv.get("pipeline") or 1
    hybrid = wl.hybrid_kv_cache_manager if hybrid_manager is None else hybrid_manager
    return engines.allocate(plan.model, wl, tp, engine or wl.engine, plan.accelerator, hybrid, pipeline)


def startup_for_plan(plan, flags=None, hybrid_manager: bool | None = None):
    """What vLLM logs at start-up for the plan's deployment (``vllm_memory.startup``): one instance of its
    tensor × pipeline ranks, ``max_model_len`` = the workload's context, the weights at the plan's precision."""
    par = plan.parallelism or plan.parallelism_without_kv
    wl = plan.workload
    tp = wl.tensor_parallel or par.get("tensor") or 1
    pp = wl.pipeline_parallel or par.get("pipeline") or 1
    hybrid = wl.hybrid_kv_cache_manager if hybrid_manager is None else hybrid_manager
    dep = plan.deployment or plan.deployment_without_kv
    per_rank = dep.weights_per_rank if dep is not None and getattr(dep, "expert", 1) > 1 else None
    r = plan.resolved
    kvb = r.kv_bytes if r else get_dtype(wl.kv_dtype).bytes
    sb = r.state_bytes if r else get_dtype(wl.state_dtype).bytes
    return vllm_memory.startup(plan.model, plan.accelerator, wl.context, plan.weights_bytes, tp, pp, kvb,
                               get_dtype(plan.model.native_dtype).bytes, sb, hybrid, flags, per_rank)


def plan_report(plan: Plan, engine: str | None = None, flags=None, hybrid_manager: bool | None = None):
    """What ``capacity plan --json`` prints for ``plan``, once for the CLI and the calculator page: the plan's fields,
    the engine's allocation for it (default: the workload's engine) and, under vLLM on an accelerator it runs on,
    what vLLM logs at start-up. Returns (fields, the start-up figures or None — ``--emit vllm`` writes its flags
    from them)."""
    engine = engine or plan.workload.engine
    alloc = for_plan(plan, engine, hybrid_manager)
    start = None
    if engine == "vllm" and (plan.parallelism or plan.parallelism_without_kv) and "vllm" in plan.accelerator.engines:
        start = startup_for_plan(plan, flags, hybrid_manager)
    return {**plan.to_dict(), **alloc.to_fields(), **(start.to_fields() if start else {}), **extras_fields(plan)}, start


def extras_fields(plan: Plan) -> dict:
    """The LoRA adapters' and the draft model's share of the plan (within ``weights_bytes`` and the cache)."""
    r, wl, out = plan.resolved, plan.workload, {}
    if r is None:
        return out
    if wl.lora_rank:
        out["lora"] = {"rank": wl.lora_rank, "targets": list(wl.lora_targets), "max_loras": wl.max_loras,
                       "bytes": r.lora_bytes}
    if r.draft is not None:
        kv = r.draft.cache_bytes(wl.context, r.kv_bytes, r.state_bytes)
        out["draft"] = {"model": r.draft.id, "weights_bytes": r.draft_weights_bytes, "kv_bytes_per_sequence": kv,
                        "num_speculative_tokens": wl.num_speculative_tokens}
    return out
