"""vLLM's start-up lines, predicted beside what published runs logged (``data/vllm_startup_logs.json``).

Each point names its model, accelerator, flags, vLLM version and source. Three kinds (see the file's ``_about``):
the logged "Available KV cache memory" against the calculator's budget; the KV memory vLLM's own formula gives
from the terms a run logged; and the "GPU KV cache size" a logged KV memory yields (what ``--kv-cache-memory``
reproduces: only the log's rounding to 0.01 GiB remains). Units: GiB (2^30 bytes), tokens.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from course.shared import tables
from part1_capacity.calculator.model import weights
from part1_capacity.calculator.base.dtypes import get_dtype
from part1_capacity.calculator.engines import vllm_memory as vm
from part1_capacity.calculator.hardware.accelerators import load_accelerator
from part1_capacity.calculator.readers.loader import load_model

DATA = Path(__file__).resolve().parent / "data" / "vllm_startup_logs.json"
ROOT = Path(__file__).resolve().parents[3]             # the repository: where a point's ``config`` path starts
GiB = vm.GiB
KV_BOUND = 0.05          # predicted KV memory within 5 % of the logged one
TOKENS_BOUND = 0.003     # token capacity within 0.3 % when the KV memory is given


@dataclass
class Check:
    point: dict
    quantity: str        # "KV memory (GiB)" or "KV cache size (tokens)"
    logged: float
    predicted: float
    bound: float

    @property
    def error(self) -> float:
        return self.predicted / self.logged - 1

    @property
    def within(self) -> bool:
        return abs(self.error) <= self.bound


def load_points() -> list[dict]:
    return json.loads(DATA.read_text())["points"]


def predict(p: dict) -> vm.Startup:
    """What the calculator predicts for point ``p``: nothing given but its model (a bundled id, or ``config``: a
    published config.json in the repository), accelerator, flags and vLLM release — or, for "tokens_given_kv",
    the logged KV memory as ``--kv-cache-memory``."""
    m = load_model(str(ROOT / p["config"]) if p.get("config") else p.get("model_id", p["model"]))
    acc, f = load_accelerator(p["accelerator"]), p["flags"]
    kvb = get_dtype(f.get("kv_cache_dtype", "bf16")).bytes
    given = p["logged"]["kv_gib"] * GiB if p["kind"] == "tokens_given_kv" else None
    flags = vm.StartupFlags(gpu_memory_utilization=f.get("gpu_memory_utilization"), kv_cache_memory_bytes=given,
                            max_num_seqs=f.get("max_num_seqs"), max_num_batched_tokens=f.get("max_num_batched_tokens"),
                            vllm_version=p["vllm"].split()[0])
    w = weights.weights_bytes(m, f.get("weights_dtype", m.native_dtype))
    return vm.startup(m, acc, f["max_model_len"], w, f.get("tensor_parallel", 1), f.get("pipeline_parallel", 1),
                      kv_bytes=kvb, flags=flags)


def checks(points: list[dict] | None = None) -> list[Check]:
    out = []
    for p in points or load_points():
        s, lg = predict(p), p["logged"]
        if p["kind"] == "kv_memory":
            out.append(Check(p, "KV memory (GiB)", lg["kv_gib"], s.kv_cache_memory_bytes / GiB, KV_BOUND))
        elif p["kind"] == "kv_terms":
            kv = lg["requested_gib"] - lg["weights_gib"] - lg["activation_gib"] - lg["non_torch_gib"]
            out.append(Check(p, "KV memory (GiB)", kv, s.kv_cache_memory_bytes / GiB, KV_BOUND))
        else:
            out.append(Check(p, "KV cache size (tokens)", lg["tokens"], s.kv_cache_tokens, TOKENS_BOUND))
            if "concurrency" in lg:
                out.append(Check(p, "maximum concurrency (×)", lg["concurrency"], s.max_concurrency, TOKENS_BOUND))
    return out


def _flags(p: dict) -> str:
    f = p["flags"]
    parts = [f"--max-model-len {f['max_model_len']}"]
    if f.get("tensor_parallel", 1) > 1:
        parts.append(f"-tp {f['tensor_parallel']}")
    if f.get("pipeline_parallel", 1) > 1:
        parts.append(f"-pp {f['pipeline_parallel']}")
    if "gpu_memory_utilization" in f:
        parts.append(f"--gpu-memory-utilization {f['gpu_memory_utilization']}")
    if p["kind"] == "tokens_given_kv":
        parts.append(f"KV {p['logged']['kv_gib']} GiB given")
    if f.get("kv_cache_dtype") == "fp8":
        parts.append("--kv-cache-dtype fp8")
    if f.get("weights_dtype"):
        parts.append(f"{f['weights_dtype']} weights")
    return ", ".join(parts)


def _english(message: str, **values) -> str:
    return message.format(**values) if values else message


def table(cs: list[Check] | None = None, tr=_english) -> str:
    """The engine-checks page's table: model, accelerator, flags, logged, predicted, error, source (``tr``: its
    words in the site's other language)."""
    cs = cs if cs is not None else checks()
    rows = tables.head(tr("| model | accelerator | vLLM | flags | quantity | logged | predicted | error | source |"), "lllllrrr")
    for c in cs:
        p = c.point
        fmt = (lambda v: f"{v:,.0f}") if "tokens" in c.quantity else (lambda v: f"{v:,.2f}")
        what = tr(c.quantity) + (tr(" from the logged terms") if p["kind"] == "kv_terms" else "")
        rows.append(tables.row(p['model'], p['accelerator'], p['vllm'], _flags(p), what, fmt(c.logged),
                               fmt(c.predicted), f"{c.error:+.2%}", p['source']))
    worst_kv = max((abs(c.error) for c in cs if "GiB" in c.quantity), default=0.0)
    worst_tok = max((abs(c.error) for c in cs if "GiB" not in c.quantity), default=0.0)
    rows += ["", tr("Largest error: KV memory {kv} (bound {kv_bound}), token capacity and concurrency with the KV memory "
                    "given {tok} (bound {tok_bound}).", kv=f"{worst_kv:.2%}", kv_bound=f"{KV_BOUND:.0%}",
                    tok=f"{worst_tok:.3%}", tok_bound=f"{TOKENS_BOUND:.1%}")]
    return "\n".join(rows) + "\n"


def terms(tr=_english) -> str:
    """The figures the page's prose relies on, from the data and the rules: an H100's memory as its runtime
    reports it against the datasheet's, the non-PyTorch memory assumed, the default utilization."""
    h100 = load_accelerator("h100")
    nt = vm.NON_TORCH
    return tr("An {name} reports {runtime} GiB to the runtime; counted as the datasheet's {sheet} × 10⁹ bytes it would "
              "be {sheet_gib} GiB, {short} short before anything else. Non-PyTorch memory assumed per worker: {single} "
              "GiB alone, {tensor} GiB with tensor parallelism over NVLink, {pcie} GiB over PCIe only, {pipeline} GiB with pipeline stages only "
              "(vLLM v0.19; `--vllm-version` picks another release's figures: from v0.21 a CUDA-graph estimate of {graph} GiB "
              "inside the budget). Default `gpu_memory_utilization`: {util}.", name=h100.name, runtime=f"{h100.engine_memory_bytes / GiB:.2f}",
              sheet=f"{h100.memory_bytes / 1e9:.0f}", sheet_gib=f"{h100.memory_bytes / GiB:.1f}",
              short=f"{1 - h100.memory_bytes / h100.engine_memory_bytes:.0%}", single=f"{nt['single'] / GiB:.2f}",
              tensor=f"{nt['tensor'] / GiB:.1f}", pcie=f"{nt['tensor_pcie'] / GiB:.2f}", pipeline=f"{nt['pipeline'] / GiB:.2f}",
              util=f"{vm.DEFAULT_GPU_MEMORY_UTILIZATION:g}", graph=f"{vm.CUDA_GRAPH_ESTIMATE / GiB:.2f}") + "\n"
