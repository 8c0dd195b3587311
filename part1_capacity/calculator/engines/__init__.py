"""The engines layer — what engines really allocate for a workload's cache, beside the textbook law:
``capacity plan --engine``. It may import ``sizing/``, ``hardware/``, ``readers/``, ``model/`` and ``base/``.

``allocate(profile, workload, tensor_parallel, engine)`` → per-rank bytes per token, the workload's total, its
recurrent state and the notes naming each engine rule that moved the number. The rules live once each, with the
engine source file they come from: ``llama_cpp.py`` (checked against llama.cpp by ``capacity e1 --structure``)
and ``vllm.py`` (read in vLLM's source).

Conventions: ``kv_bytes_per_token`` is what one more token of one sequence adds on one tensor-parallel rank once
windows are full; ``kv_bytes_total`` and ``state_bytes`` are summed over the ranks of the deployment (so K/V
replicated by tensor parallelism counts once per rank); ``state_bytes`` is the recurrent-state part of the total.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from part1_capacity.calculator.base.dtypes import get_dtype
from part1_capacity.calculator.engines import llama_cpp, vllm
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.hardware.accelerators import SERVING_ENGINES, runtime_memory
from part1_capacity.calculator.sizing.sharding import cache_parts_per_rank, model_on_rank
from course.shared.units import GIB

ENGINES = ("law", *sorted(SERVING_ENGINES))   # who sizes a cache: the textbook law or a serving engine (by name)
LLAMA_CPP_KV = ("fp32", "fp16", "bf16", "q8_0")       # ggml cache types the calculator has a dtype for
VLLM_KV = ("fp16", "bf16", "fp8", "fp32")              # --kv-cache-dtype auto (model dtype) or fp8


def default_state_dtype(profile, engine: str) -> str:
    """The dtype an engine keeps a hybrid's recurrent state in when not told otherwise — never the K/V cache's
    dtype: llama.cpp keeps it in f32 (src/llama-model.cpp, create_memory: the recurrent memory's r and s types are
    GGML_TYPE_F32); vLLM in the checkpoint's mamba_ssm_cache_dtype or the model dtype (``vllm.py``,
    ``default_ssm_state_dtype``). The textbook law follows vLLM."""
    check_engine(engine)
    return "fp32" if engine == "llama.cpp" else vllm.default_ssm_state_dtype(profile)


@dataclass
class EngineAllocation:
    engine: str
    kv_bytes_per_token: float | None     # per tensor-parallel rank, growing layers (None: the engine refuses)
    kv_bytes_total: float | None         # the whole workload, summed over ranks
    state_bytes: float | None            # recurrent state within kv_bytes_total
    tensor_parallel: int
    notes: list = field(default_factory=list)
    pipeline_parallel: int = 1           # the stages the per-rank figure is for

    def to_fields(self) -> dict:
        """The plan's JSON keys for this allocation."""
        return {"engine": self.engine, "engine_kv_bytes_per_token": self.kv_bytes_per_token,
                "engine_kv_bytes_total": self.kv_bytes_total, "engine_state_bytes": self.state_bytes,
                "engine_tensor_parallel": self.tensor_parallel, "engine_pipeline_parallel": self.pipeline_parallel,
                "engine_notes": list(self.notes)}

    def to_dict(self) -> dict:
        return asdict(self)


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise InputError(f"--engine: unknown '{engine}'; allowed: {', '.join(ENGINES)}")
    return engine


def allocate(profile, workload, tensor_parallel: int = 1, engine: str = "law", accelerator=None,
             hybrid_manager: bool = True, pipeline: int = 1) -> EngineAllocation:
    """The cache ``engine`` allocates for ``workload`` (validated) of ``profile`` on ``tensor_parallel`` ranks;
    with ``pipeline`` stages each rank holds its stage's share of the layers (per-token figure divided by it)."""
    a = _allocate(profile, workload, tensor_parallel, engine, accelerator, hybrid_manager)
    a.pipeline_parallel = pipeline
    if pipeline > 1:
        a.kv_bytes_per_token /= pipeline
        a.notes.append(f"per rank: {pipeline} pipeline stages split the layers, each rank holds about 1/{pipeline}")
    return a


def _allocate(profile, workload, tensor_parallel, engine, accelerator, hybrid_manager) -> EngineAllocation:
    check_engine(engine)
    tp = int(tensor_parallel or 1)
    T, B = workload.context, workload.batch
    kvb = get_dtype(workload.kv_dtype).bytes
    sb = get_dtype(workload.state_dtype).bytes
    if engine == "law":
        attn, state = (float(x) for x in cache_parts_per_rank(profile, T, kvb, sb, tp))
        per_tok = float(model_on_rank(profile, tp).kv_bytes_per_token(kvb))
        state_total = B * state * tp
        total = B * attn * tp + state_total
        notes = ["the textbook law (lesson 03): every token of every sequence, windows at min(T, W), "
                 f"recurrent state in {workload.state_dtype}"]
        return EngineAllocation(engine, per_tok, total, state_total, tp, notes)
    if engine == "llama.cpp":
        if workload.kv_dtype not in LLAMA_CPP_KV:
            raise InputError(f"kv_dtype: llama.cpp caches take {', '.join(LLAMA_CPP_KV)} (and other ggml block "
                             f"types), not {workload.kv_dtype}")
        comps = llama_cpp.components(profile, T * B, B, kvb)
        total = sum(comps.values())
        state = comps.get("R", 0.0) + comps.get("S", 0.0)
        notes = llama_cpp.notes(profile, T * B, B)
        if tp > 1:
            notes.append(f"llama.cpp splits layers across {tp} devices (split-mode layer): no head replication, "
                         "each device holds its layers' share")
        per_tok = float(profile.kv_bytes_per_token(kvb)) / tp
        return EngineAllocation(engine, per_tok, total, state, tp, notes)
    # vLLM
    if workload.kv_dtype not in VLLM_KV:
        raise InputError(f"kv_dtype: vLLM's --kv-cache-dtype takes auto ({', '.join(VLLM_KV[:2])}, fp32) or fp8, "
                         f"not {workload.kv_dtype}")
    conv = get_dtype(profile.native_dtype).bytes
    memory = runtime_memory(accelerator)[0] if accelerator is not None else 80 * GIB
    batched = vllm.max_num_batched_tokens(memory, getattr(accelerator, "name", ""), getattr(accelerator, "id", ""))
    r = vllm.reservation(profile, T, tp, kvb, conv, sb, batched, hybrid_manager)
    notes = list(r.notes)
    if accelerator is not None and "vllm" not in getattr(accelerator, "engines", ("vllm",)):
        notes.insert(0, f"vLLM does not run on {accelerator.name}: what it would allocate, for comparison only "
                        f"(serve it with llama.cpp)")
    if profile.ssm is not None:
        notes.append(f"state pages: convolution state in the model dtype ({profile.native_dtype}), SSM state in "
                     f"{workload.state_dtype} (vllm/model_executor/layers/mamba/mamba_utils.py)")
    return EngineAllocation(engine, r.bytes_per_token, r.bytes_per_request * B * tp, r.state_bytes * B * tp, tp,
                            notes)


def sequence_bytes_per_rank(profile, workload, T, tp: int):
    """Bytes of ONE sequence of ``T`` tokens on one of ``tp`` tensor-parallel ranks (all layers) as
    ``workload.engine`` allocates it — what the deployment search sizes ranks with under ``--engine``. ``T`` may be
    an array (the sweep's). llama.cpp: one sequence's padded cells and fp32 state, its layers split over the ranks; vLLM:
    one request's reservation on one rank."""
    kvb = get_dtype(workload.kv_dtype).bytes
    sb = get_dtype(workload.state_dtype).bytes
    if workload.engine == "llama.cpp":
        def one(t):
            return sum(llama_cpp.components(profile, int(t), 1, kvb).values()) / tp
    else:
        conv = get_dtype(profile.native_dtype).bytes

        def one(t):
            return vllm.reservation(profile, int(t), tp, kvb, conv, sb,
                                    hybrid_manager=workload.hybrid_kv_cache_manager).bytes_per_request
    namespace = getattr(T, "__array_namespace__", None)   # the sweep's grid (numpy, never imported here)
    if namespace is None or T.ndim == 0:
        return float(one(T))
    xp = namespace()
    return xp.reshape(xp.asarray([one(t) for t in T.reshape(-1)], dtype=xp.float64), T.shape)
