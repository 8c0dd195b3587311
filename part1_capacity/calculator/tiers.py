"""Memory tiers where KV cache can overflow to: HBM, a peer's HBM, host DRAM, CXL, NVMe.

Figures are per accelerator of a data-centre server node (``data/tiers.json``, each with its source), all with one
definition: bandwidth in one direction per accelerator, latency load-to-use from the accelerator (figures published
from the host CPU are converted, and the conversion is stated beside them). The HBM tier takes its capacity and
bandwidth from the accelerator profile; the peer tier its link to ONE peer (``Accelerator.peer_link``), halved to
one direction. Units: bytes, bytes/s, seconds.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

from part1_capacity.calculator.hardware import GB, Accelerator

DATA = Path(__file__).resolve().parent / "data"


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

    def to_dict(self) -> dict:
        return asdict(self)


@lru_cache(maxsize=1)
def tier_table() -> list[dict]:
    return json.loads((DATA / "tiers.json").read_text())["tiers"]


SERVER_KINDS = ("datacenter", "host")   # the table describes a server node; a phone or laptop has none of it


def tiers_for(acc: Accelerator) -> list[Tier]:
    """The tier table resolved for one accelerator (HBM and peer figures taken from it); empty for devices that
    are not in a server node (laptop, phone, edge module), whose memory the table does not describe."""
    if acc.kind not in SERVER_KINDS:
        return []
    out = []
    for t in tier_table():
        cap = acc.memory_bytes if t["capacity_gb"] == "accelerator" else t["capacity_gb"] * GB
        bw = t["bandwidth_gb_s"]
        if bw == "accelerator":
            bw = acc.bandwidth
        elif bw == "peer_link":
            bw = acc.peer_link / 2             # vendors quote both directions
        else:
            bw = bw * GB
        if bw <= 0:                            # e.g. a phone has no peer to borrow memory from
            continue
        out.append(Tier(t["id"], t["name"], cap, bw, t["latency_ns"] * 1e-9, t["status"], t["source"],
                        t["measured_from"]))
    return out
