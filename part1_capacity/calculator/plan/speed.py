"""How long prefill and decode take with weights of a given type: a per-weight-type cost model.

The roofline (``roofline.py``) says what bounds a pass; this module says how long the pass takes when the bound is
an engine's kernel rather than the datasheet — the work to unpack and multiply each weight differs by type.

**A host with measured kernels** (an accelerator entry carrying ``kernels``, as the engine checks save for this
machine: ``engine/kernels.py`` times llama.cpp's own ``ggml_mul_mat`` per weight type, never the runs it predicts):

- decode, one token: every matmul weight is read once and multiplied once. Per weight of type ``t`` the time is
  the measured streaming cost ``d_t`` (``decode_s_per_weight``: the kernel on weights streamed from memory, with
  the engine's thread count). Explained by what the kernel does: ``d_t ≈ b_t / BW_core + c_t`` per core (bytes per
  weight over what one core can stream, plus the measured arithmetic per weight ``c_t``, ``compute_s_per_weight``)
  — the comparison is on the engine-checks page;
- prefill of ``n`` tokens: ``n × p_t`` per weight (``prefill_s_per_weight_token``, measured on a 512-token
  product) — integer dot products for Q8_0/Q5_0/Q4_K/Q6_K, float FMAs for F32/F16;
- every graph node costs ``op_overhead_s`` (thread hand-off and barrier), ``graph_nodes_per_layer`` per layer;
- attention over the cache: its FLOPs at the F16 prefill rate (2 FLOP per weight-token), its bytes at the
  streaming rate of F16 weights — small next to the weights for the contexts measured here.

**A datasheet accelerator**: the roofline with an explicit per-type efficiency from ``data/speed.json`` (status
"assumption", each with its source): decode reads the weights at ``decode_bandwidth_efficiency`` × bandwidth,
prefill multiplies at ``prefill_peak_efficiency`` × the peak of the type's compute class.

Units: seconds, weights (parameters), bytes, FLOPs.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from part1_capacity.calculator.sizing import roofline
from part1_capacity.calculator.base.dtypes import get_dtype
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.hardware.accelerators import Kernels

DATA = Path(__file__).resolve().parents[1] / "data" / "speed.json"


@lru_cache(maxsize=1)
def speed_data() -> dict:
    return json.loads(DATA.read_text())


def gguf_mix(weights_dtype: str) -> dict[str, float]:
    """The GGUF tensor types (fractions of the weights) a calculator dtype stands for on a measured host."""
    name = get_dtype(weights_dtype, "weights_dtype").name
    table = speed_data()["gguf_types"]
    if name not in table:
        allowed = ", ".join(k for k in table if k != "about")
        raise InputError(f"weights_dtype: '{name}' has no measured CPU kernel; a measured host supports {allowed}")
    return dict(table[name])


def nodes_per_layer() -> int:
    return int(speed_data()["graph_nodes_per_layer"]["value"])


# --- the measured-kernel model -------------------------------------------------------------------------------------
def decode_matmul_seconds(mix: dict[str, float], k: Kernels) -> float:
    """One decode token's matmuls: Σ weights_t × d_t. ``mix``: ggml type → number of matmul weights."""
    return sum(n * k.cost(t, "decode_s_per_weight") for t, n in mix.items())


def prefill_matmul_seconds(mix: dict[str, float], tokens: float, k: Kernels) -> float:
    """Prefill's matmuls over ``tokens`` tokens: Σ weights_t × tokens × p_t."""
    return sum(n * tokens * k.cost(t, "prefill_s_per_weight_token") for t, n in mix.items())


def attention_seconds(flops: float, nbytes: float, k: Kernels) -> float:
    """Attention over the cache: FLOPs at the F16 product rate (2 FLOP per weight-token), bytes at the F16
    streaming rate (2 bytes per weight) — llama.cpp keeps the f16 cache and multiplies it with F16 kernels."""
    return flops / 2 * k.cost("f16", "prefill_s_per_weight_token") + nbytes / 2 * k.cost("f16", "decode_s_per_weight")


def overhead_seconds(n_layers: int, k: Kernels) -> float:
    return n_layers * nodes_per_layer() * k.op_overhead_s


@dataclass(frozen=True)
class HostEstimate:
    """A phase's time on a measured host, in parts (seconds)."""
    matmuls: float
    attention: float
    overhead: float

    @property
    def total(self) -> float:
        return self.matmuls + self.attention + self.overhead


def host_decode(mix, n_layers, attn_flops, attn_bytes, k: Kernels, batch: int = 1) -> HostEstimate:
    """One decode step of ``batch`` sequences. Beyond batch 1 each extra token pays the weights' arithmetic
    (the 512-token product rate) while the weights are read once — an extrapolation: measured at batch 1 only."""
    extra = prefill_matmul_seconds(mix, batch - 1, k) if batch > 1 else 0.0
    return HostEstimate(decode_matmul_seconds(mix, k) + extra, attention_seconds(attn_flops, attn_bytes, k),
                        overhead_seconds(n_layers, k))


def host_prefill(mix, tokens, n_layers, attn_flops, k: Kernels, output_weights: dict | None = None) -> HostEstimate:
    """Prefill of one prompt of ``tokens`` tokens. ``output_weights`` (ggml type → weights): the output
    projection, which llama.cpp applies to the last token only (a one-token product, at the decode rate)."""
    out = decode_matmul_seconds(output_weights, k) if output_weights else 0.0
    return HostEstimate(prefill_matmul_seconds(mix, tokens, k) + out, attention_seconds(attn_flops, 0.0, k),
                        overhead_seconds(n_layers, k))


# --- the datasheet model --------------------------------------------------------------------------------------------
def datasheet_assumption(weights_dtype: str) -> dict:
    """The per-type efficiencies assumed for a datasheet accelerator, with their source."""
    name = get_dtype(weights_dtype, "weights_dtype").name
    return speed_data()["datasheet"]["types"][name]


def rates(acc, weights_dtype: str) -> tuple[float, float]:
    """(FLOP/s, bytes/s) a pass with weights of this type runs at on ``acc`` by the roofline: the peak of the type's
    compute class × ``prefill_peak_efficiency`` and the bandwidth × ``decode_bandwidth_efficiency`` (data/speed.json;
    a host with measured kernels gets its own times from ``measured_seconds`` instead)."""
    a = datasheet_assumption(weights_dtype)
    return (acc.peak_flops(weights_dtype) * a["prefill_peak_efficiency"],
            acc.bandwidth * a["decode_bandwidth_efficiency"])


def basis(acc, weights_dtype: str) -> str:
    """Where a plan's phase times come from, in words, with the source of the assumption."""
    name = get_dtype(weights_dtype, "weights_dtype").name
    k = getattr(acc, "kernels", None)
    if k is not None and name in speed_data()["gguf_types"]:
        return (f"measured kernels of this host ({k.threads} thread{'s' if k.threads > 1 else ''}; "
                f"{' + '.join(gguf_mix(name))} weights): {k.source}")
    a = datasheet_assumption(name)
    return (f"datasheet roofline for {name}: {a['decode_bandwidth_efficiency']:g} × bandwidth, "
            f"{a['prefill_peak_efficiency']:g} × peak (assumption: {a['source']})")


def measured_seconds(model, acc, weights_dtype: str, ps) -> float | None:
    """Seconds of the pass ``ps`` (``roofline.Pass``) from the host's measured kernels, or None when ``acc`` has none
    or the type was not measured. Matmul weights are taken as ``params_active`` (embedding lookups included: a
    small over-count); attention is the pass's own attention FLOPs and, in decode, the cache it reads."""
    k = getattr(acc, "kernels", None)
    if k is None or get_dtype(weights_dtype).name not in speed_data()["gguf_types"]:
        return None
    mix = {t: f * model.params_active for t, f in gguf_mix(weights_dtype).items()}
    if ps.phase == "prefill":
        return host_prefill(mix, ps.tokens, model.n_layers, ps.attention_flops, k).total
    return host_decode(mix, model.n_layers, ps.attention_flops, ps.cache_bytes, k, int(ps.seqs)).total


LOWER_BOUND = "roofline lower bound"


def time_kind(acc, weights_dtype: str) -> str:
    """What a plan's phase time is: "measured-kernel estimate" (a host with measured kernels for this type),
    ``LOWER_BOUND`` (a datasheet accelerator whose assumed efficiencies are all 1.0: the time the peak and the
    bandwidth allow, which no engine beats) or "roofline with assumed efficiencies"."""
    name = get_dtype(weights_dtype, "weights_dtype").name
    if getattr(acc, "kernels", None) is not None and name in speed_data()["gguf_types"]:
        return "measured-kernel estimate"
    a = datasheet_assumption(name)
    if a["decode_bandwidth_efficiency"] >= 1.0 and a["prefill_peak_efficiency"] >= 1.0:
        return LOWER_BOUND
    return "roofline with assumed efficiencies"
