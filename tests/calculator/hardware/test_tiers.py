"""hardware/tiers: a tier table's rows validated one line per fault, and resolved for one accelerator — its own
memory's figures from its profile, a peer's link halved to one direction, GB and ns turned into bytes and seconds."""
import json
import tempfile
from pathlib import Path

import pytest

from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.hardware import tiers
from part1_capacity.calculator.hardware.accelerators import Accelerator

ROW = {"id": " Pool ", "name": "a pool", "kinds": ["datacenter", "laptop"], "capacity_gb": 512,
       "bandwidth_gb_s": 64, "latency_ns": 2000, "status": "measured", "source": "made up for this test"}
# a made-up datacenter card: 80 GB at 3 TB/s, 400 GB/s to one peer (both directions)
ACC = Accelerator("card", "card", "datacenter", 80e9, 3e12, flops_16=1e15, peer_link=400e9)


def test_a_row_is_normalized():
    r = tiers.tier_row(ROW, "t")
    assert r == {"id": "pool", "name": "a pool", "kinds": ["datacenter", "laptop"], "capacity_gb": 512,
                 "bandwidth_gb_s": 64, "latency_ns": 2000, "status": "measured", "source": "made up for this test",
                 "measured_from": "accelerator", "published_latency_ns": 2000, "conversion": "none",
                 "own_memory": False}
    # the name defaults to the id; the published latency and its vantage are kept when given
    r = tiers.tier_row({**ROW, "name": None, "measured_from": "host CPU", "published_latency_ns": 150,
                        "conversion": "plus the PCIe round trip", "own_memory": True}, "t")
    assert (r["name"], r["measured_from"], r["published_latency_ns"], r["conversion"], r["own_memory"]) == (
        "pool", "host CPU", 150, "plus the PCIe round trip", True)


BAD = [   # (what changes in a good row, the line that refuses it)
    ({"id": ""}, "t: missing field 'id'"),
    ({"kinds": []}, "t: tier 'pool': field 'kinds' must be a non-empty list of datacenter, host, workstation, "
                    "desktop, laptop, phone, edge, got []"),
    ({"kinds": ["datacenter", "mainframe"]}, "t: tier 'pool': field 'kinds' must be a non-empty list of"),
    ({"kinds": "datacenter"}, "t: tier 'pool': field 'kinds' must be a non-empty list of"),
    ({"capacity_gb": None}, "t: tier 'pool': missing field 'capacity_gb'"),
    ({"latency_ns": None}, "t: tier 'pool': missing field 'latency_ns'"),
    ({"capacity_gb": "peer_link"}, "t: tier 'pool': field 'capacity_gb' must be a number or one of accelerator, "
                                   "got 'peer_link'"),
    ({"bandwidth_gb_s": "host"}, "t: tier 'pool': field 'bandwidth_gb_s' must be a number or one of accelerator, "
                                 "peer_link, got 'host'"),
    ({"latency_ns": "accelerator"}, "t: tier 'pool': field 'latency_ns'"),
    ({"capacity_gb": 1e8}, "t: tier 'pool': field 'capacity_gb'"),          # above 1e7 GB
    ({"bandwidth_gb_s": 0}, "t: tier 'pool': field 'bandwidth_gb_s'"),      # below 1e-3 GB/s
    ({"latency_ns": 0.5}, "t: tier 'pool': field 'latency_ns'"),            # below 1 ns
    ({"status": "guess"}, "t: tier 'pool': field 'status' must be one of vendor, derived, measured, assumption, "
                          "unverified, got 'guess'"),
    ({"source": " "}, "t: tier 'pool': field 'source' must say where the figures come from"),
    ({"source": 7}, "t: tier 'pool': field 'source' must say where the figures come from"),
    ({"own_memory": "yes"}, "t: tier 'pool': field 'own_memory' must be true or false, got 'yes'"),
    ({"published_latency_ns": -1}, "t: tier 'pool': field 'published_latency_ns'"),
    ({"published_latency_ns": 1e9 + 1}, "t: tier 'pool': field 'published_latency_ns'"),   # above 1e9 ns
]


def test_a_bad_row_is_one_line_naming_the_field():
    # one test over every case (no parameters: tools/mutation.py --verify runs argument-free tests)
    for change, message in BAD:
        with pytest.raises(InputError) as e:
            tiers.tier_row({**ROW, **change}, "t")
        assert str(e.value).startswith(message) and "\n" not in str(e.value), (change, str(e.value))


def test_a_row_that_is_no_object():
    with pytest.raises(InputError) as e:
        tiers.tier_row(["pool"], "t")
    assert str(e.value) == ("t: expected a JSON object with id, name, kinds, capacity_gb, bandwidth_gb_s, latency_ns, "
                            "status, source")


def test_long_texts_are_cut_at_2000_characters():
    # a source or conversion of 2,000 characters is kept whole; 2,001 are cut to 1,999 and an ellipsis
    for key in ("source", "conversion"):
        assert tiers.tier_row({**ROW, key: "s" * 2000}, "t")[key] == "s" * 2000
        assert tiers.tier_row({**ROW, key: "s" * 2001}, "t")[key] == "s" * 1999 + "…"


def test_the_range_ends_are_allowed():
    # the stated physical ranges are closed: 1e-3 and 1e7 GB, 1e-3 and 1e5 GB/s, 1 and 1e9 ns
    for lo_hi in ({"capacity_gb": 1e-3, "bandwidth_gb_s": 1e-3, "latency_ns": 1},
                  {"capacity_gb": 1e7, "bandwidth_gb_s": 1e5, "latency_ns": 1e9}):
        assert tiers.tier_row({**ROW, **lo_hi}, "t")["capacity_gb"] == lo_hi["capacity_gb"]
    # a published latency from 0 to 1e9 ns
    for ns in (0, 1e9):
        assert tiers.tier_row({**ROW, "published_latency_ns": ns}, "t")["published_latency_ns"] == ns


def test_a_table_is_a_list_of_rows_with_unique_ids():
    assert [r["id"] for r in tiers.tier_rows({"tiers": [ROW, {**ROW, "id": "b"}]}, "t")] == ["pool", "b"]
    assert [r["id"] for r in tiers.tier_rows([ROW], "t")] == ["pool"]
    with pytest.raises(InputError, match=r"^t row 2: tier 'pool': field 'status'"):
        tiers.tier_rows([ROW, {**ROW, "status": "x"}], "t")
    with pytest.raises(InputError, match=r"^t: tier id 'pool' appears twice$"):
        tiers.tier_rows([ROW, {**ROW, "id": "POOL"}], "t")
    for empty in ({"tiers": []}, [], {"rows": [ROW]}, "x"):
        with pytest.raises(InputError, match=r'^t: expected \{"tiers": \[\.\.\.\]\} with at least one tier$'):
            tiers.tier_rows(empty, "t")
    with pytest.raises(InputError, match=r"^t row 1: expected a JSON object"):
        tiers.tier_rows([7], "t")
    folder = tempfile.TemporaryDirectory()
    tmp_path = Path(folder.name)
    f = tmp_path / "mine.json"
    f.write_text(json.dumps({"tiers": [ROW]}))
    assert tiers.load_tiers(f)[0]["id"] == "pool"
    f.write_text(json.dumps({"tiers": [{**ROW, "status": "x"}]}))
    with pytest.raises(InputError, match=r"^tiers file mine.json row 1: tier 'pool': field 'status'"):
        tiers.load_tiers(f)
    # a user's table is read with the checks of accelerator files: at most 1 MiB, refused by the field 'tiers'
    f.write_text(json.dumps({"tiers": [{**ROW, "source": "s" * (1 << 20)}]}))
    with pytest.raises(InputError, match=r"^tiers: .*mine.json is larger than 1 MiB; expected a small text file$"):
        tiers.load_tiers(f)
    with pytest.raises(InputError, match=r"^tiers: no file at .*absent.json$"):
        tiers.load_tiers(tmp_path / "absent.json")


def test_tiers_resolved_for_one_accelerator():
    rows = tiers.tier_rows([
        {**ROW, "id": "edge-only", "kinds": ["edge"]},         # not this kind: skipped, the rest still read
        {**ROW, "id": "own", "capacity_gb": "accelerator", "bandwidth_gb_s": "accelerator", "own_memory": True},
        {**ROW, "id": "peer", "capacity_gb": "accelerator", "bandwidth_gb_s": "peer_link"},
        ROW,
        {**ROW, "id": "phone-only", "kinds": ["phone"]},
    ], "t")
    got = {t.id: t for t in tiers.tiers_for(ACC, rows)}
    assert list(got) == ["own", "peer", "pool"]                      # the phone's row is not this kind's
    assert (got["own"].capacity_bytes, got["own"].bandwidth, got["own"].own_memory) == (80e9, 3e12, True)
    assert (got["peer"].capacity_bytes, got["peer"].bandwidth) == (80e9, 200e9)   # 400 GB/s both ways, halved
    # 512 GB = 5.12e11 bytes, 64 GB/s = 6.4e10 bytes/s, 2,000 ns = 2e-6 s
    p = got["pool"]
    assert (p.capacity_bytes, p.bandwidth, p.latency_s, p.status, p.source, p.measured_from, p.own_memory) == (
        512e9, 64e9, 2000 * 1e-9, "measured", "made up for this test", "accelerator", False)
    assert p.to_dict()["capacity_bytes"] == 512e9 and p.to_dict()["name"] == "a pool"
    # a card with no peer link has no peer to borrow from: that row is left out
    alone = Accelerator("solo", "solo", "datacenter", 80e9, 3e12, flops_16=1e15)
    assert [t.id for t in tiers.tiers_for(alone, rows)] == ["own", "pool"]
    # any link at all is a peer to borrow from: 1 byte/s both ways, 0.5 one way
    slow = Accelerator("slow", "slow", "datacenter", 80e9, 3e12, flops_16=1e15, peer_link=1.0)
    assert {t.id: t.bandwidth for t in tiers.tiers_for(slow, rows)}["peer"] == 0.5


def test_the_bundled_table_covers_every_kind():
    table = tiers.tier_table()
    assert {k for r in table for k in r["kinds"]} == set(tiers.KINDS)
    assert tiers.tier_table() is table                     # read and validated once
