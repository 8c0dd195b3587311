"""Accelerators: memory, bandwidth, dense peak compute per precision class, interconnect.

Loaded from the bundled table (``data/accelerators.json``, each entry with its source and a status: vendor,
derived or unverified) or from a JSON file path holding one entry in the same format — e.g. a profile of this
machine measured by the engine-check experiments.

Two memory figures per accelerator, each named where it is shown:
- **marketed** (``memory_bytes``; JSON ``memory_gb`` = 10⁹ bytes, or ``memory_gib`` for devices sold in binary
  units such as GeForce cards and Apple unified memory): the number on the box;
- **runtime** (``engine_memory_bytes``; JSON ``engine_memory_gib`` with ``engine_memory_source``): the total the
  runtime reports to an engine — CUDA's ``cudaMemGetInfo`` total (``torch.cuda.mem_get_info``), ROCm's, a TPU
  chip's HBM, Apple's GPU working-set limit (``recommendedMaxWorkingSetSize``). An "80 GB" H100 reports 79.19 GiB.
Every sizing reads ``runtime_memory`` (the runtime figure, or the marketed one when none is known, said so).

Units inside the dataclass: bytes, bytes/s, FLOP/s. The JSON uses GB (1e9), GB/s and TFLOP/s as datasheets do.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from part1_capacity.calculator.base import validate
from part1_capacity.calculator.base.dtypes import closest, get_dtype
from part1_capacity.calculator.base.errors import InputError
from course.shared.units import GB, GIB

DATA = Path(__file__).resolve().parents[1] / "data"
# The serving engines the calculator models, defined once: an accelerator lists those it runs, ``--emit`` writes
# their commands, and the engines' rules size a cache with them or with the textbook law (engines.ENGINES).
SERVING_ENGINES = ("vllm", "llama.cpp")
ENGINES = list(SERVING_ENGINES)   # an accelerator's default ``engines`` (kept under its old name)


@dataclass(frozen=True)
class Accelerator:
    id: str
    name: str
    kind: str                     # datacenter, laptop, phone, edge, host
    memory_bytes: float
    bandwidth: float              # memory bandwidth, bytes/s
    flops_16: float               # dense 16-bit matmul peak, FLOP/s
    flops_fp8: float = 0.0        # dense fp8 peak (0: not supported → 16-bit peak)
    flops_int8: float = 0.0       # dense int8 peak (0: not supported → 16-bit peak)
    interconnect: float = 0.0     # device-to-device bytes/s (0: none)
    interconnect_name: str = ""
    max_tp: int = 1               # devices in one fast-interconnect group (scale-up domain): the largest TP group
    node_size: int = 1            # devices per server/host: the unit pipeline stages and replicas are spread over
    peer_link: float = 0.0        # bytes/s to ONE peer, both directions (0: same as ``interconnect``)
    engines: tuple = ("vllm", "llama.cpp")   # serving engines that run on it
    status: str = "vendor"
    source: str = ""
    kernels: object = field(default=None, compare=False)   # Kernels (below): measured per-type kernel costs (hosts)
    engine_memory_bytes: float = 0.0   # total memory as the runtime reports it to the engine (0: not recorded)
    engine_memory_source: str = ""     # where that figure was read (a start-up log, a runtime query)
    unified_memory: bool = False       # CPU and GPU share one memory: the weights sit in it once
    marketed_number: float = 0.0       # the memory as sold, in the vendor's "GB" (memory_gb or memory_gib as given)

    @property
    def runtime_memory_bytes(self) -> float:
        """Bytes one device holds as its runtime reports them (what every sizing counts): ``engine_memory_bytes``,
        or the marketed figure when no runtime total is recorded."""
        return runtime_memory(self)[0]

    def peak_flops(self, weights_dtype: str) -> float:
        """Dense peak for matmuls with weights of this dtype, by the dtype's compute class (``DType.compute``,
        the one rule in dtypes.py): "fp8"/"int8" use that 8-bit peak when this accelerator has one, everything
        else (and an 8-bit type on an accelerator without 8-bit units) the 16-bit peak."""
        compute = get_dtype(weights_dtype, "weights_dtype").compute
        eight_bit = {"fp8": self.flops_fp8, "int8": self.flops_int8}.get(compute, 0.0)
        return eight_bit or self.flops_16

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json_entry(self) -> dict:
        """This accelerator in the JSON format ``load_accelerator`` reads (GB, GB/s, TFLOP/s), e.g. to save a
        profile of a measured machine: ``json.dump(acc.to_json_entry(), f)``."""
        d = {"id": self.id, "name": self.name, "kind": self.kind, "memory_gb": self.memory_bytes / GB,
             "bandwidth_gb_s": self.bandwidth / GB, "bf16_tflops": self.flops_16 / 1e12,
             "interconnect_gb_s": self.interconnect / GB, "interconnect": self.interconnect_name,
             "max_tp": self.max_tp, "node_size": self.node_size, "peer_link_gb_s": self.peer_link / GB,
             "engines": list(self.engines), "status": self.status, "source": self.source}
        if self.flops_fp8:
            d["fp8_tflops"] = self.flops_fp8 / 1e12
        if self.flops_int8:
            d["int8_tflops"] = self.flops_int8 / 1e12
        if self.kernels is not None:
            d["kernels"] = asdict(self.kernels)
        if self.engine_memory_bytes:
            d["engine_memory_gib"] = self.engine_memory_bytes / GIB
            d["engine_memory_source"] = self.engine_memory_source
        if self.unified_memory:
            d["unified_memory"] = True
        return d


MARKETED_SOURCE = "datasheet figure (no runtime-reported total recorded for this accelerator)"


def runtime_memory(acc) -> tuple[float, str]:
    """Bytes of one device as its runtime reports them, and where that figure comes from: the recorded runtime
    total (``engine_memory_bytes``), else the marketed ``memory_bytes``, labelled so. Reads any object with those
    attributes (a measured host profile, a test's stand-in)."""
    seen = getattr(acc, "engine_memory_bytes", 0.0) or 0.0
    if seen:
        return float(seen), getattr(acc, "engine_memory_source", "") or "accelerators.json"
    return float(acc.memory_bytes), MARKETED_SOURCE


def marketed_gb(acc) -> float:
    """The memory as sold, in the vendor's "GB" (an RTX 4090's 24, an H100's 80): the figure given in the data."""
    return getattr(acc, "marketed_number", 0.0) or acc.memory_bytes / GB


def memory_label(acc) -> str:
    """One device's memory for a reader: the runtime's total in GiB, the marketed figure in GB beside it — or the
    marketed figure alone, said to be what was counted, when no runtime total is recorded."""
    runtime, source = runtime_memory(acc)
    if source == MARKETED_SOURCE:
        return f"{marketed_gb(acc):,.4g} GB as marketed (no runtime-reported total recorded)"
    return f"{runtime / GIB:,.2f} GiB as the runtime reports it (marketed {marketed_gb(acc):,.4g} GB)"


MEMORY_UNITS = ("memory: marketed GB as sold (10^9 bytes; GeForce and Apple \"GB\" are binary), runtime GiB "
                "(2^30 bytes) as the device's runtime reports its total to an engine — what every plan counts; "
                "* = none recorded, the marketed bytes counted")


def runtime_cell(acc) -> str:
    """The runtime column of a table in GiB (``MEMORY_UNITS``): the recorded total, or the marketed bytes starred."""
    runtime, source = runtime_memory(acc)
    return f"{runtime / GIB:,.2f}" + ("*" if source == MARKETED_SOURCE or source.startswith("unverified") else "")


def memory_fields(acc) -> dict:
    """The plan's JSON keys for the memory it counted per accelerator (bytes), the marketed figure beside it."""
    runtime, source = runtime_memory(acc)
    return {"accelerator_memory_bytes": runtime, "accelerator_memory_source": source,
            "accelerator_memory_marketed_bytes": float(acc.memory_bytes)}


@dataclass(frozen=True)
class Kernels:
    """Measured kernel constants of one host at one thread count (``experiments/engine/kernels.py``; used by ``speed.py``)."""
    threads: int
    op_overhead_s: float
    types: dict        # ggml type name → {decode_s_per_weight, compute_s_per_weight, prefill_s_per_weight_token, ...}
    source: str = ""

    def cost(self, ggml_type: str, key: str) -> float:
        if ggml_type not in self.types:
            raise InputError(f"kernels: no measurement for weight type '{ggml_type}'; measured: "
                             f"{', '.join(self.types)}")
        return float(self.types[ggml_type][key])


def kernels_from_dict(d: dict, where: str = "kernels") -> Kernels:
    """Validate the ``kernels`` entry of an accelerator (one thread count's constants)."""
    try:
        k = Kernels(int(d["threads"]), float(d["op_overhead_s"]), dict(d["types"]), str(d.get("source", "")))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{where}: expected threads, op_overhead_s and types ({exc})") from None
    for t, c in k.types.items():
        for key in ("decode_s_per_weight", "prefill_s_per_weight_token"):
            v = c.get(key) if isinstance(c, dict) else None
            if not isinstance(v, (int, float)) or not v > 0 or v != v or v == float("inf"):
                raise InputError(f"{where}: type '{t}' needs a positive finite '{key}', got {v!r}")
    return k



# What a real device can be, with room on both sides (the smallest phone NPU to beyond today's largest
# accelerator): a figure outside gives times of 10^300 s or a device that holds nothing, never a useful plan.
PHYSICAL = {"memory_gb": (0.01, 1e5), "memory_gib": (0.01, 1e5), "engine_memory_gib": (0.01, 1e5),
            "bandwidth_gb_s": (0.1, 1e5),
            "bf16_tflops": (1e-3, 1e5), "fp8_tflops": (1e-3, 1e5), "int8_tflops": (1e-3, 1e5),
            "interconnect_gb_s": (0.01, 1e5), "peer_link_gb_s": (0.01, 1e5)}

def eight_bit_cell(acc) -> str:
    """"fp8 / int8" dense TFLOP/s for a table; a type without its own units runs at the 16-bit rate
    (``Accelerator.peak_flops``) and says so — an A100's FP8 weights multiply at its BF16 rate."""
    fp8 = f"{acc.flops_fp8 / 1e12:,.0f}" if acc.flops_fp8 else "16-bit rate"
    int8 = f"{acc.flops_int8 / 1e12:,.0f}" if acc.flops_int8 else "16-bit rate"
    return f"{fp8} / {int8}"


def _num(d, key, where, required=True, positive=True):
    """A datasheet figure of ``d`` (GB, GB/s, TFLOP/s): finite and within ``PHYSICAL``'s range for its field;
    0 for an optional figure left out (or given as 0: "none")."""
    v = d.get(key)
    if v is None:
        if required:
            raise InputError(f"{where}: missing field '{key}'")
        return 0.0
    lo, hi = PHYSICAL[key]
    x = float(validate.number(v, f"{where}: field '{key}'", lo=0, lo_open=positive, hi=hi))
    if x and x < lo:
        raise InputError(f"{where}: field '{key}' {x:g} is below any real device; allowed: {lo:g} to {hi:g}"
                         + ("" if positive else " (or 0: none)"))
    return x


def accelerator_from_dict(d: dict, where: str = "accelerator") -> Accelerator:
    """Validate one accelerator entry (the bundled table's format) and build an ``Accelerator``."""
    if not isinstance(d, dict):
        raise InputError(f"{where}: expected a JSON object with id, memory_gb, bandwidth_gb_s, bf16_tflops")
    aid = validate.printable(str(d.get("id") or "").strip().lower())
    if not aid:
        raise InputError(f"{where}: missing field 'id'")
    w = f"accelerator '{aid}'"
    runtime = _num(d, "engine_memory_gib", w, required=False) * GIB
    if "memory_gib" in d:
        number = _num(d, "memory_gib", w)
        mem = number * GIB
    elif "memory_gb" in d:
        number = _num(d, "memory_gb", w)
        mem = number * GB
    elif runtime:        # only what the runtime reports: the box's figure is unknown, the runtime's stands for it
        number, mem = runtime / GB, runtime
    else:
        raise InputError(f"{w}: missing memory: give 'memory_gb' (as sold, 10^9 bytes; 'memory_gib' for binary "
                         f"units) or 'engine_memory_gib' (the total the runtime reports, 2^30 bytes), or both")
    if runtime > mem * GIB / GB * 1.0001:   # a runtime reports at most what is installed ("GB" may be binary)
        raise InputError(f"{w}: field 'engine_memory_gib' {runtime / GIB:g} GiB exceeds the memory installed "
                         f"({mem / GB:g} GB, up to {mem * GIB / GB / GIB:.4g} GiB if that GB is binary); give the "
                         "total the runtime reports, at most the installed memory")
    if runtime and "engine_memory_source" not in d:
        d = {**d, "engine_memory_source": f"given in {where}"}
    max_tp = d.get("max_tp", 1)
    if isinstance(max_tp, bool) or not isinstance(max_tp, int) or not 1 <= max_tp <= 65536:
        raise InputError(f"{w}: field 'max_tp' must be an integer from 1 to 65536, got {validate.show(max_tp)}")
    node = d.get("node_size", max_tp)
    if isinstance(node, bool) or not isinstance(node, int) or not 1 <= node <= 65536:
        raise InputError(f"{w}: field 'node_size' must be an integer from 1 to 65536, got {validate.show(node)}")
    kind = str(d.get("kind", "datacenter"))
    engines = d.get("engines", ENGINES if kind in ("datacenter", "host") else ["llama.cpp"])
    if not isinstance(engines, list) or not engines or any(e not in ENGINES for e in engines):
        raise InputError(f"{w}: field 'engines' must be a list of {', '.join(ENGINES)}, got {engines!r}")
    interconnect = _num(d, "interconnect_gb_s", w, required=False, positive=False) * GB
    return Accelerator(
        id=aid, name=validate.printable(str(d.get("name") or aid)), kind=kind, memory_bytes=mem,
        bandwidth=_num(d, "bandwidth_gb_s", w) * GB, flops_16=_num(d, "bf16_tflops", w) * 1e12,
        flops_fp8=_num(d, "fp8_tflops", w, required=False, positive=False) * 1e12,
        flops_int8=_num(d, "int8_tflops", w, required=False, positive=False) * 1e12,
        interconnect=interconnect, interconnect_name=str(d.get("interconnect", "")), max_tp=max_tp, node_size=node,
        peer_link=_num(d, "peer_link_gb_s", w, required=False, positive=False) * GB or interconnect,
        engines=tuple(engines), status=str(d.get("status", "vendor")),
        source=str(d.get("source", "")),
        kernels=kernels_from_dict(d["kernels"], f"{w}.kernels") if d.get("kernels") else None,
        engine_memory_bytes=runtime,
        engine_memory_source=str(d.get("engine_memory_source", "")),
        unified_memory=d.get("unified_memory") is True, marketed_number=number,
    )


@lru_cache(maxsize=1)
def bundled_accelerators() -> dict[str, Accelerator]:
    rows = json.loads((DATA / "accelerators.json").read_text())["accelerators"]
    return {a.id: a for a in (accelerator_from_dict(r) for r in rows)}


def load_accelerator(name_or_path) -> Accelerator:
    """A bundled accelerator by id (case-insensitive), or one entry from a JSON file path."""
    s = str(name_or_path).strip()
    if s.endswith(".json") or "/" in s:
        p = Path(s)
        d = validate.load_json(p, "accelerator", max_bytes=validate.MIB)    # strict: no NaN/Infinity, capped
        if isinstance(d, dict) and "accelerators" in d and isinstance(d["accelerators"], list) and d["accelerators"]:
            d = d["accelerators"][0]
        return accelerator_from_dict(d, f"accelerator file {p.name}")
    table = bundled_accelerators()
    key = s.lower()
    if key not in table:
        raise InputError(f"accelerator: unknown '{s}'{closest(key, table)}; allowed: {', '.join(table)} "
                         f"or a JSON file path")
    return table[key]
