"""Weight bytes: how much memory a model's weights take, and where that figure comes from.

Three sources, the most exact first (``weights_bytes_source`` in plans):

- ``"safetensors"``: the checkpoint's own headers — dtype × shape of every tensor, read without the data
  (``checkpoints.py``). Exact, mixed precision included (FP8 matrices beside bf16 norms and fp32 block scales,
  MXFP4 expert blocks beside bf16 attention).
- ``"gguf"``: a GGUF file's tensor table (type and element count of every tensor), exact.
- ``"parameters × dtype"``: parameter counts × bytes per element, summed per tensor group when the groups are
  stored at different precisions. gpt-oss ships only its MoE expert weights in MXFP4 (4.25 bits); attention,
  embeddings, router and norms stay bf16 — so 20.9 B parameters take 12.8 GiB and 116.8 B take 60.8 GiB
  (gpt-oss model card, Table 1), not the 10.3 / 57.8 GiB that 4.25 bits for every parameter would give.

What a server loads is not always the whole checkpoint: DeepSeek-V3's files hold 685 B parameters, of which
14 B are the multi-token-prediction (MTP) module (one extra layer, ``model.layers.61``). vLLM skips those weights
unless MTP speculative decoding is on (``vllm/model_executor/models/deepseek_v2.py``, ``load_weights``:
``get_spec_layer_idx_from_weight_name(...)`` → ``continue  # skip spec decode layers for main model``), so a
server loads 671 B. ``weights_bytes(..., mtp=True)`` gives the other case.

Units: bytes; parameters are counts (floats, as model cards give them).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from part1_capacity.calculator.base import validate
from part1_capacity.calculator.base.dtypes import get_dtype
from part1_capacity.calculator.base.errors import InputError

SAFETENSORS, GGUF, PARAMS = "safetensors", "gguf", "parameters × dtype"
SOURCES = (SAFETENSORS, GGUF, PARAMS)


@dataclass(frozen=True)
class WeightGroup:
    """Parameters stored at one precision (``dtype``: a name from ``dtypes.DTYPES``)."""
    name: str
    params: float
    dtype: str

    @property
    def bytes(self) -> float:
        return self.params * get_dtype(self.dtype, f"weight group '{self.name}'.dtype").bytes

    def to_dict(self) -> dict:
        return {"name": self.name, "params": self.params, "dtype": self.dtype, "bytes": self.bytes}


@dataclass(frozen=True)
class Checkpoint:
    """Exact bytes read from a checkpoint's headers: what a server loads, and everything in the files."""
    source: str                  # SAFETENSORS or GGUF
    loaded_bytes: float          # tensors a server loads (vLLM skips MTP layers)
    file_bytes: float            # every tensor in the files
    by_type: dict = field(default_factory=dict)   # storage type as the file names it ("BF16", "Q4_K") → bytes
    n_tensors: int = 0
    path: str = ""

    def to_dict(self) -> dict:
        return {"source": self.source, "loaded_bytes": self.loaded_bytes, "file_bytes": self.file_bytes,
                "by_type": dict(self.by_type), "n_tensors": self.n_tensors, "path": self.path}


def groups_from_list(rows, where: str) -> tuple[WeightGroup, ...]:
    """Weight groups from a data file (``[{"name", "params", "dtype"}, ...]``), validated."""
    if rows is None:
        return ()
    if not isinstance(rows, list) or not rows:
        raise InputError(f"{where}.weight_groups: expected a non-empty list of {{name, params, dtype}}")
    out = []
    for i, r in enumerate(rows):
        w = f"{where}.weight_groups[{i}]"
        if not isinstance(r, dict):
            raise InputError(f"{w}: expected an object with name, params, dtype")
        params = validate.number(r.get("params"), f"{w}.params", lo=0, hi=1e15)
        out.append(WeightGroup(str(r.get("name") or f"group {i}"), float(params),
                               get_dtype(r.get("dtype", ""), f"{w}.dtype").name))
    return tuple(out)


def _params(model, mtp: bool) -> float:
    """Parameters a server loads: the MTP module only when MTP speculative decoding is on."""
    if mtp and model.params_checkpoint:
        return model.params_checkpoint
    return model.params_total


def weights_bytes(model, dtype: str | None = None, mtp: bool = False) -> float:
    """Bytes of the weights a server loads. ``dtype`` None or the model's native precision: the most exact
    figure known (checkpoint headers, else the per-group sum, else parameters × native dtype); another
    ``dtype``: every parameter re-quantized to it (parameters × dtype)."""
    return weights_report(model, dtype, mtp)["weights_bytes"]


def weights_report(model, dtype: str | None = None, mtp: bool = False) -> dict:
    """``{"weights_bytes", "weights_bytes_source", "weights_groups"}`` for ``model`` at ``dtype``."""
    native = dtype is None or get_dtype(dtype, "weights_dtype").name == model.native_dtype
    ckpt = getattr(model, "checkpoint", None)
    extra = _params(model, mtp) - model.params_total
    if native and ckpt is not None:
        total = ckpt.file_bytes if mtp else ckpt.loaded_bytes
        return {"weights_bytes": float(total), "weights_bytes_source": ckpt.source,
                "weights_groups": [{"name": k, "bytes": v} for k, v in sorted(ckpt.by_type.items())]}
    groups = model.weight_groups if native else ()
    if groups:
        rows = [g.to_dict() for g in groups]
        total = sum(g.bytes for g in groups)
        if extra:     # the MTP module, stored like the bulk of the model
            rows.append(WeightGroup("MTP module", extra, model.native_dtype).to_dict())
            total += rows[-1]["bytes"]
        return {"weights_bytes": float(total), "weights_bytes_source": PARAMS, "weights_groups": rows}
    name = model.native_dtype if native else get_dtype(dtype, "weights_dtype").name
    g = WeightGroup("all parameters", _params(model, mtp), name)
    return {"weights_bytes": float(g.bytes), "weights_bytes_source": PARAMS, "weights_groups": [g.to_dict()]}


def plan_fields(model, dtype: str | None, kv_bytes_total: float) -> dict:
    """The weight keys of a plan: bytes, their source and groups, and — for a checkpoint with an MTP module —
    the other case (MTP speculative decoding on: the module is loaded too) with its KV/weights ratio."""
    rep = weights_report(model, dtype)
    out = {"weights_bytes_source": rep["weights_bytes_source"], "weights_groups": rep["weights_groups"]}
    if model.params_checkpoint > model.params_total or (model.checkpoint is not None
                                                       and model.checkpoint.file_bytes > model.checkpoint.loaded_bytes):
        with_mtp = weights_bytes(model, dtype, mtp=True)
        out["weights_bytes_with_mtp"] = with_mtp
        out["kv_to_weights_ratio_with_mtp"] = kv_bytes_total / with_mtp
    return out
