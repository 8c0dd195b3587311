"""The course's headline comparison: the four cache structures side by side on one accelerator and one workload.

GQA (Mistral-NeMo-12B), MLA (DeepSeek-V3), a sliding-window hybrid (gpt-oss-120b) and an SSM hybrid
(Nemotron-3-Nano-30B-A3B) at 128K tokens, 64 concurrent sequences, each model's weights at its native precision and
the KV cache in bf16, on an H200. ``capacity compare`` and the calculator page both show it.
"""
from __future__ import annotations

from dataclasses import replace

from part1_capacity.calculator import engines
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.plan.plan import Workload, for_plan, make_plan

DEFAULT_MODELS = ("mistral-nemo-12b", "deepseek-v3", "gpt-oss-120b", "nemotron-3-nano-30b-a3b")
DEFAULT_ACCELERATOR = "h200"
DEFAULT_CONTEXT = 131072
DEFAULT_BATCH = 64


def compare(models, accelerator, workload: Workload) -> list[dict]:
    """One plan (as a dict) per model, each on its own copy of ``workload`` (validation fills in dtypes)."""
    return [make_plan(load_model(name), accelerator, replace(workload)).to_dict() for name in models]


def compare_engines(models, accelerator, workload) -> list[dict]:
    """For each model: the plan's tensor-parallel degree and the law, llama.cpp and vLLM allocations side by side
    (``capacity compare --engines``)."""
    out = []
    for name in models:
        plan = make_plan(name, accelerator, replace(workload))
        rows = []
        for engine in engines.ENGINES:
            try:
                rows.append(for_plan(plan, engine).to_dict())
            except InputError as exc:
                rows.append(engines.EngineAllocation(engine, None, None, None, 0, [str(exc)]).to_dict())
        out.append({"model": plan.model.id, "structure": plan.model.structure, "accelerator": plan.accelerator.id,
                    "context": workload.context, "batch": workload.batch, "engines": rows})
    return out
