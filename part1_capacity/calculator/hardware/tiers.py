"""Memory tiers where KV cache can live, per kind of accelerator: a data-centre GPU's HBM, a peer's HBM, host
DRAM, CXL, NVMe; a workstation card's GDDR, host DRAM over PCIe, NVMe; a laptop's or desktop's unified memory and its
SSD; a phone's LPDDR and UFS flash; an edge module's LPDDR and NVMe.

Figures are per accelerator (``data/tiers.json``, each row with its source and the accelerator kinds it applies
to), all with one definition: bandwidth in one direction per accelerator, latency load-to-use from the accelerator
(figures published from the host CPU are converted, and the conversion is stated beside them). A row's capacity or
bandwidth "accelerator" is the device's own memory (from its profile; ``own_memory`` marks it, and it is never an
overflow tier); "peer_link" is its link to ONE peer (``Accelerator.peer_link``), halved to one direction. A user's
table (``capacity plan --tiers FILE``) has the same format and the same checks. Units: bytes, bytes/s, seconds.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

from part1_capacity.calculator.base import validate
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.hardware.accelerators import GB, Accelerator, runtime_memory

DATA = Path(__file__).resolve().parents[1] / "data"


@dataclass(frozen=True)
class Tier:
    id: str
    name: str
    capacity_bytes: float   # per accelerator
    bandwidth: float        # bytes/s, one direction, per accelerator
    latency_s: float        # load-to-use, from the accelerator
    status: str
    source: str
    measured_from: str = "accelerator"   # vantage of the published latency (converted when not the accelerator)
    own_memory: bool = False             # the device's own memory (HBM, GDDR, unified, LPDDR): not an overflow tier

    def to_dict(self) -> dict:
        return asdict(self)


# every kind an accelerator entry may have (hardware.accelerator_from_dict); the bundled table covers each
KINDS = ("datacenter", "host", "workstation", "desktop", "laptop", "phone", "edge")
STATUSES = ("vendor", "derived", "measured", "assumption", "unverified")
ACCELERATOR_FIGURES = {"capacity_gb": ("accelerator",), "bandwidth_gb_s": ("accelerator", "peer_link")}
RANGES = {"capacity_gb": (1e-3, 1e7), "bandwidth_gb_s": (1e-3, 1e5), "latency_ns": (1.0, 1e9)}


def tier_row(d, where: str) -> dict:
    """Validate one row of a tier table (the bundled ``data/tiers.json`` format) and return it normalized. The
    rules of accelerator files: one line naming the field and what is allowed; figures within physical ranges;
    every row sourced."""
    if not isinstance(d, dict):
        raise InputError(f"{where}: expected a JSON object with id, name, kinds, capacity_gb, bandwidth_gb_s, "
                         "latency_ns, status, source")
    tid = validate.printable(str(d.get("id") or "").strip().lower())
    if not tid:
        raise InputError(f"{where}: missing field 'id'")
    w = f"{where}: tier '{tid}'"
    out = {"id": tid, "name": validate.printable(str(d.get("name") or tid))}
    kinds = d.get("kinds")
    if not isinstance(kinds, list) or not kinds or any(k not in KINDS for k in kinds):
        raise InputError(f"{w}: field 'kinds' must be a non-empty list of {', '.join(KINDS)}, got "
                         f"{validate.show(kinds)}")
    out["kinds"] = list(kinds)
    for key, (lo, hi) in RANGES.items():
        v = d.get(key)
        if v is None:
            raise InputError(f"{w}: missing field '{key}'")
        if isinstance(v, str) and key in ACCELERATOR_FIGURES:
            if v not in ACCELERATOR_FIGURES[key]:
                raise InputError(f"{w}: field '{key}' must be a number or one of "
                                 f"{', '.join(ACCELERATOR_FIGURES[key])}, got {validate.show(v)}")
            out[key] = v
        else:
            out[key] = validate.number(v, f"{w}: field '{key}'", lo=lo, hi=hi)
    if d.get("status") not in STATUSES:
        raise InputError(f"{w}: field 'status' must be one of {', '.join(STATUSES)}, got "
                         f"{validate.show(d.get('status'))}")
    out["status"] = d["status"]
    source = d.get("source")
    if not isinstance(source, str) or not source.strip():
        raise InputError(f"{w}: field 'source' must say where the figures come from")
    out["source"] = validate.printable(source, limit=2000)
    out["measured_from"] = validate.printable(str(d.get("measured_from", "accelerator")))
    out["published_latency_ns"] = validate.number(d.get("published_latency_ns", out["latency_ns"]),
                                                  f"{w}: field 'published_latency_ns'", lo=0, hi=1e9)
    out["conversion"] = validate.printable(str(d.get("conversion", "none")), limit=2000)
    own = d.get("own_memory", False)
    if not isinstance(own, bool):
        raise InputError(f"{w}: field 'own_memory' must be true or false, got {validate.show(own)}")
    out["own_memory"] = own
    return out


def tier_rows(doc, where: str) -> list[dict]:
    """A whole tier table: ``{"tiers": [...]}`` or a bare list, each row validated, ids unique."""
    rows = doc.get("tiers") if isinstance(doc, dict) else doc
    if not isinstance(rows, list) or not rows:
        raise InputError(f"{where}: expected {{\"tiers\": [...]}} with at least one tier")
    out = [tier_row(r, f"{where} row {i + 1}") for i, r in enumerate(rows)]
    ids = [r["id"] for r in out]
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup:
        raise InputError(f"{where}: tier id '{dup}' appears twice")
    return out


def load_tiers(path) -> list[dict]:
    """A user's tier table (``capacity plan --tiers FILE``), read with the checks of accelerator files."""
    p = Path(path)
    return tier_rows(validate.load_json(p, "tiers", max_bytes=validate.MIB), f"tiers file {p.name}")


@lru_cache(maxsize=1)
def tier_table() -> list[dict]:
    """The bundled table, validated like a user's."""
    return tier_rows(json.loads((DATA / "tiers.json").read_text()), "bundled tiers.json")


def tiers_for(acc: Accelerator, rows: list[dict] | None = None) -> list[Tier]:
    """The tier table (``rows``, default the bundled one) resolved for one accelerator: the rows for its kind, with
    'accelerator' figures taken from its profile and 'peer_link' its link to one peer, halved to one direction."""
    out = []
    for t in tier_table() if rows is None else rows:
        if acc.kind not in t["kinds"]:
            continue
        cap = runtime_memory(acc)[0] if t["capacity_gb"] == "accelerator" else t["capacity_gb"] * GB
        bw = t["bandwidth_gb_s"]
        if bw == "accelerator":
            bw = acc.bandwidth
        elif bw == "peer_link":
            bw = acc.peer_link / 2             # vendors quote both directions
        else:
            bw = bw * GB
        if bw <= 0:                            # e.g. an accelerator with no peer link has no peer to borrow from
            continue
        out.append(Tier(t["id"], t["name"], cap, bw, t["latency_ns"] * 1e-9, t["status"], t["source"],
                        t["measured_from"], t["own_memory"]))
    return out
