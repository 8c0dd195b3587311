"""A workload resolved once against one model and one accelerator: what the deployment search, the phases, the
overflow tiers, the sweep and the engines' rules all read, computed once and handed to each of them.

A ``Workload`` is what the customer types (strings, pins, an engine name). ``resolve`` checks it against the model
(``Workload.validate``: the engine is checked here and nowhere after), turns its dtypes into bytes per element, and
computes the numbers every later step needs: the weights' bytes, the MoE experts' share of them, the bytes of one
accelerator the engine may fill, and — memoized per context and tensor-parallel degree — one sequence's cache on one
rank. The result is frozen: nothing downstream changes the workload it was sized for. Units: bytes.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from numbers import Integral   # numpy's integers count too (registered), without importing numpy

from part1_capacity.calculator import engines
from part1_capacity.calculator.sizing import adapters
from part1_capacity.calculator.model import weights
from part1_capacity.calculator.base.dtypes import KV_DTYPES, get_dtype
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.hardware.accelerators import Accelerator, runtime_memory
from part1_capacity.calculator.model.profiles import ModelProfile
from part1_capacity.calculator.sizing import sharding
from part1_capacity.calculator.sizing.sharding import splits_heads
from course.shared.units import GIB

DEFAULT_USABLE_FRACTION = 0.90      # vLLM's default gpu_memory_utilization
DEFAULT_OVERHEAD_BYTES = 2 * GIB    # activations of a chunked prefill + runtime; vLLM profiles 1–4 GiB at start-up


@dataclass
class Workload:
    """What the customer runs. ``context`` = prompt + output tokens per sequence; ``batch`` = concurrent sequences."""
    context: int
    batch: int = 1
    weights_dtype: str | None = None      # None: the model's native precision
    kv_dtype: str = "bf16"
    state_dtype: str | None = None        # recurrent state; None: what the engine keeps (engines.default_state_dtype)
    usable_fraction: float = DEFAULT_USABLE_FRACTION
    overhead_bytes: float = DEFAULT_OVERHEAD_BYTES
    prompt: int | None = None             # prefill length; None: the whole context
    tensor_parallel: int | None = None    # pinned tensor-parallel degree; None: the search picks it
    pipeline_parallel: int | None = None  # pinned pipeline stages; None: the search picks them
    nodes: int | None = None              # pinned node budget: the best decode on at most this many nodes
    engine: str = "law"                   # whose allocation sizes the cache: law, llama.cpp, vllm (engines)
    hybrid_kv_cache_manager: bool = True  # vLLM's hybrid manager (False: --disable-hybrid-kv-cache-manager)
    lora_rank: int | None = None          # a LoRA adapter's rank (None: no adapter; adapters.py sizes it)
    lora_targets: tuple = adapters.DEFAULT_TARGETS   # the modules it adapts
    max_loras: int = 1                    # adapters served at once (vLLM's --max-loras slots)
    draft_model: str | None = None        # a speculative-decoding draft model (id, config or path; None: none)
    num_speculative_tokens: int = 0       # tokens the draft proposes per step (0: the engine's default)

    def validate(self, model: ModelProfile) -> "Workload":
        for name in ("context", "batch"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, Integral) or v <= 0:
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
        for name in ("tensor_parallel", "pipeline_parallel", "nodes"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, Integral) or v <= 0):
                raise InputError(f"{name}: must be a positive integer, got {v!r}")
        t = self.tensor_parallel
        if t is not None and not splits_heads(model, t):
            raise InputError(f"tensor_parallel: {t} does not split {model.id}'s {model.n_heads} attention heads and "
                             f"{model.n_kv_heads} K/V heads evenly; allowed: "
                             f"{', '.join(str(d) for d in range(1, model.n_heads + 1) if splits_heads(model, d))}")
        engines.check_engine(self.engine)
        self._validate_extras()
        self.weights_dtype = get_dtype(self.weights_dtype or model.native_dtype, "weights_dtype").name
        self.kv_dtype = get_dtype(self.kv_dtype, "kv_dtype", KV_DTYPES).name
        # The recurrent state stays in the dtype the engine keeps it in, whatever --kv-dtype says
        default_state = engines.default_state_dtype(model, self.engine) if model.ssm else self.kv_dtype
        self.state_dtype = get_dtype(self.state_dtype or default_state, "state_dtype", KV_DTYPES).name
        return self


    def _validate_extras(self):
        for name, hi in (("lora_rank", 4096), ("max_loras", 4096), ("num_speculative_tokens", 64)):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, Integral) or not
                                  (0 if name == "num_speculative_tokens" else 1) <= v <= hi):
                raise InputError(f"{name}: must be an integer from 1 to {hi}, got {v!r}")
        if self.lora_rank is None and (self.max_loras != 1 or tuple(self.lora_targets) != adapters.DEFAULT_TARGETS):
            raise InputError("max_loras: LoRA settings need a rank (--lora-rank R)")
        if self.lora_rank is not None:
            self.lora_targets = adapters.parse_targets(",".join(self.lora_targets))
        if self.num_speculative_tokens and not self.draft_model:
            raise InputError("num_speculative_tokens: speculative decoding needs a draft model (--draft-model M)")


# --- the formulas the resolved workload evaluates once ------------------------------------------------------------
def usable_bytes(acc, wl) -> float:
    """Bytes of one accelerator the engine may fill: ``memory × usable_fraction − overhead``, the memory being what
    the device's runtime reports (``accelerators.runtime_memory``: an "80 GB" H100 holds 79.19 GiB), not the box's."""
    return runtime_memory(acc)[0] * wl.usable_fraction - wl.overhead_bytes


def draft_cache_per_rank(draft, wl, T, tp: int):
    """The draft model's cache of one sequence at ``T`` tokens on one rank, by the same rules (0 without a draft)."""
    return 0.0 if draft is None else cache_per_rank(draft, replace(wl, draft_model=None), T, tp)


def cache_per_rank(model, wl, T, tp: int):
    """Bytes of ONE sequence's cache (all layers) that one tensor-parallel rank holds at ``T`` tokens: by the law
    ``sharding.cache_per_rank`` (attention K/V or the MLA latent and recurrent state, each × its share). With
    ``wl.engine`` llama.cpp or vllm, what that engine allocates instead (``engines``). ``T`` may be a numpy
    array (the sweep's grid)."""
    if getattr(wl, "engine", "law") != "law":
        return engines.sequence_bytes_per_rank(model, wl, T, tp)
    return sharding.cache_per_rank(model, T, get_dtype(wl.kv_dtype).bytes, get_dtype(wl.state_dtype).bytes, tp)


def expert_bytes(model, wl, weights_bytes: float) -> tuple[float, str]:
    """Bytes of the MoE expert weights (what expert parallelism spreads) and how they were found."""
    native = wl.weights_dtype == model.native_dtype
    groups = [g for g in model.weight_groups if "expert" in g.name.lower()] if native else []
    if groups:
        return float(min(sum(g.bytes for g in groups), weights_bytes)), "the checkpoint's expert weight group"
    return (weights_bytes * (1 - (model.params_active + model.params_multimodal) / model.params_total),
            "total − active parameters (dense part ≤ active; a vision tower is no expert)")


@dataclass(frozen=True)
class Resolved:
    """A validated workload on one model and one accelerator, with the numbers every step reads (bytes)."""
    model: ModelProfile
    accelerator: Accelerator
    workload: Workload            # validated: canonical dtype names, the engine checked
    kv_bytes: float               # bytes per cached K/V element
    state_bytes: float            # bytes per recurrent-state element
    weights_bytes: float          # the weights at the workload's precision
    expert_bytes: float           # the MoE experts' part of ``weights_bytes`` (0 for a dense model)
    expert_source: str            # how ``expert_bytes`` was found
    usable_bytes: float           # of one accelerator, for weights and cache
    lora_bytes: float = 0.0       # LoRA adapters (or vLLM's slots) within ``weights_bytes``
    draft: ModelProfile | None = None   # the draft model, if any
    draft_weights_bytes: float = 0.0    # its weights, within ``weights_bytes``
    _memo: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def context(self) -> int:
        return self.workload.context

    @property
    def batch(self) -> int:
        return self.workload.batch

    @property
    def prompt(self) -> int:
        return self.workload.prompt or self.workload.context

    def cache_per_rank(self, T, tp: int):
        """``cache_per_rank`` for this workload, computed once per (T, tp) for scalar ``T``."""
        if not isinstance(T, (int, float)):
            return (cache_per_rank(self.model, self.workload, T, tp)
                    + draft_cache_per_rank(self.draft, self.workload, T, tp))
        key = ("rank", T, tp)
        if key not in self._memo:
            self._memo[key] = float(cache_per_rank(self.model, self.workload, T, tp)
                                    + draft_cache_per_rank(self.draft, self.workload, T, tp))
        return self._memo[key]

    def sequence_cache_bytes(self, T) -> float:
        """One sequence's whole cache at ``T`` tokens by the law: attention K/V (or latent) + recurrent state."""
        key = ("sequence", T)
        if key not in self._memo:
            self._memo[key] = float(self.model.cache_bytes(T, self.kv_bytes, self.state_bytes))
        return self._memo[key]

    def with_workload(self, **changes) -> "Resolved":
        """The same resolution with workload fields changed that no number above depends on (pins, node budget)."""
        return replace(self, workload=replace(self.workload, **changes), _memo=self._memo)


def resolve(model: ModelProfile, acc: Accelerator, workload: Workload) -> Resolved:
    """Check ``workload`` against ``model`` (a copy: the caller's is not changed) and compute, once, what sizing it on
    ``acc`` needs."""
    wl = replace(workload).validate(model)
    W = weights.weights_bytes(model, wl.weights_dtype)
    if not W > 0:      # every ratio and share downstream divides by it
        raise InputError(f"model: {model.id}'s weights come to 0 bytes at {wl.weights_dtype} (a checkpoint whose "
                         f"tensors are empty); give a checkpoint with its weights")
    We, source = expert_bytes(model, wl, W)
    lora = (adapters.lora_bytes(model, wl.engine, wl.lora_rank, wl.lora_targets, wl.max_loras)
            if wl.lora_rank else 0.0)
    draft, draft_w = None, 0.0
    if wl.draft_model:
        from part1_capacity.calculator.readers.loader import load_model     # the draft: any model the loader reads

        draft = wl.draft_model if isinstance(wl.draft_model, ModelProfile) else load_model(wl.draft_model)
        draft_w = weights.weights_bytes(draft, wl.weights_dtype)
    return Resolved(model, acc, wl, get_dtype(wl.kv_dtype).bytes, get_dtype(wl.state_dtype).bytes,
                    W + lora + draft_w, We, source, usable_bytes(acc, wl), lora, draft, draft_w)
