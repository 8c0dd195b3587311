"""The claims ledger and the archetype data: a bad entry is rejected with a message that names it."""
import copy
import tomllib

import pytest

from part1_capacity.archetypes import catalog, ledger
from part1_capacity.calculator.base.errors import InputError

GOOD = {
    "id": "example-hbm",
    "archetypes": ["neocloud"],
    "text": "An example part carries {value} of HBM.",
    "value": 80,
    "unit": "GB",
    "source": "Example datasheet",
    "status": "verified",
    "checked": "read in the datasheet",
}


def _reject(entry, *needles):
    with pytest.raises(InputError) as exc:
        ledger.parse_ledger({"claim": [entry]}, "test ledger")
    msg = str(exc.value)
    for n in needles:
        assert n in msg, f"{n!r} not in {msg!r}"
    assert "\n" not in msg
    return msg


def test_a_good_entry_is_accepted():
    led = ledger.parse_ledger({"claim": [GOOD]}, "test ledger")
    (c,) = led.verified()
    assert c.statement() == "An example part carries 80 GB of HBM."
    assert led.quarantined() == []


@pytest.mark.parametrize("missing", ["", "   ", None])
def test_entry_without_source_is_rejected_by_name(missing):
    entry = dict(GOOD)
    if missing is None:
        del entry["source"]
    else:
        entry["source"] = missing
    _reject(entry, "example-hbm", "source")


@pytest.mark.parametrize("bad", ["80 GB", "eighty", True, -3, 0, float("nan"), float("inf"), [10], [9, 3], [1, "2"], {}])
def test_entry_with_malformed_value_is_rejected_by_name(bad):
    _reject({**GOOD, "value": bad}, "example-hbm", "value")


def test_entry_without_id_is_named_by_position():
    entry = dict(GOOD)
    del entry["id"]
    msg = _reject(entry, "claim #1", "id")
    assert "missing" in msg


@pytest.mark.parametrize("field,value,needle", [
    ("unit", "gigabytes", "unit"),
    ("status", "probably", "allowed: verified, unverified"),
    ("text", "An example part carries 80 GB of HBM.", "{value}"),
    ("text", "In 2025 a part carried {value}.", "number outside"),
    ("archetypes", [], "archetypes"),
    ("id", "Bad Id", "id"),
])
def test_other_malformed_fields_are_rejected(field, value, needle):
    _reject({**GOOD, field: value}, needle, "test ledger")


def test_verified_claim_must_say_where_it_was_checked():
    entry = dict(GOOD)
    del entry["checked"]
    _reject(entry, "example-hbm", "checked")
    # the same claim, honestly marked unverified, is accepted and quarantined
    led = ledger.parse_ledger({"claim": [{**entry, "status": "unverified"}]}, "test ledger")
    assert led.verified() == [] and [c.id for c in led.quarantined()] == ["example-hbm"]


def test_duplicate_ids_and_unknown_archetypes_are_rejected():
    with pytest.raises(InputError, match="example-hbm.*duplicate"):
        ledger.parse_ledger({"claim": [GOOD, GOOD]}, "test ledger")
    with pytest.raises(InputError, match="example-hbm.*'nobody'"):
        ledger.parse_ledger({"claim": [{**GOOD, "archetypes": ["nobody"]}]}, "test ledger",
                            archetype_ids=["neocloud"])


def test_bad_ledger_file_through_the_cli_is_one_line_exit_2(tmp_path, capsys):
    from part1_capacity.cli import main

    bad = tmp_path / "draft.toml"
    bad.write_text('[[claim]]\nid = "draft-one"\narchetypes = ["neocloud"]\ntext = "A part has {value}."\n'
                   'value = "lots"\nunit = "GB"\nsource = "a slide"\nstatus = "unverified"\n')
    assert main(["claims", "--ledger", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "draft-one" in err and "value" in err and "Traceback" not in err


# --- the bundled data ---------------------------------------------------------------------------------------------
def _doc():
    return tomllib.loads(catalog.DEFAULT_ARCHETYPES.read_text())


def test_bundled_ledger_and_archetypes_load():
    led = ledger.load_ledger()
    arch = catalog.load_archetypes(ledger=led)
    assert list(arch) == ["hyperscaler-silicon", "merchant-vendor", "neocloud", "smartphone", "edge-robotics"]
    # edge and robotics has no verified claim today: marked, and without calculator inputs
    assert not arch["edge-robotics"].evidence and arch["edge-robotics"].workload is None
    for a in arch.values():
        if a.id != "edge-robotics":
            assert a.evidence and a.workload is not None, a.id
    # the quarantine is not empty, so the "never shown" tests below test something
    assert led.quarantined()
    assert {c.id for c in led.verified()}.isdisjoint(c.id for c in led.quarantined())


def test_workload_ids_resolve_in_the_calculator_data():
    from part1_capacity.calculator.base.dtypes import get_dtype
    from part1_capacity.calculator.hardware.accelerators import load_accelerator
    from part1_capacity.calculator.readers.loader import load_model

    for a in catalog.load_archetypes().values():
        if a.workload:
            load_model(a.workload.model)
            load_accelerator(a.workload.accelerator)
            get_dtype(a.workload.weights_dtype, "weights_dtype")
            get_dtype(a.workload.kv_dtype, "kv_dtype")


def test_a_number_in_archetype_prose_is_rejected():
    doc = _doc()
    doc["archetype"][2]["decision_cycle"] = "Contracts run for 4 years."
    with pytest.raises(InputError, match="neocloud.*decision_cycle.*claims ledger"):
        catalog.parse_archetypes(doc, ledger.load_ledger())


def test_an_archetype_without_evidence_may_not_carry_calculator_inputs():
    doc = _doc()
    doc["archetype"][4]["workload"] = {**doc["archetype"][3]["workload"]}
    with pytest.raises(InputError, match="edge-robotics.*no verified claim"):
        catalog.parse_archetypes(doc, ledger.load_ledger())


def test_evidence_follows_the_ledger_not_a_flag():
    """Quarantining an archetype's only verified claims takes its evidence (and so its numbers) away."""
    doc = tomllib.loads(ledger.DEFAULT_LEDGER.read_text())
    demoted = copy.deepcopy(doc)
    for c in demoted["claim"]:
        if "smartphone" in c["archetypes"]:
            c["status"] = "unverified"
    led = ledger.parse_ledger(demoted)
    adoc = _doc()
    del adoc["archetype"][3]["workload"]["model"], adoc["archetype"][3]["workload"]["accelerator"]
    for k in ("context", "concurrency", "weights_dtype", "kv_dtype"):
        del adoc["archetype"][3]["workload"][k]
    arch = catalog.parse_archetypes(adoc, led)
    assert not arch["smartphone"].evidence


def test_unknown_archetype_name_lists_the_allowed_ones():
    arch = catalog.load_archetypes()
    assert catalog.get_archetype("NeoCloud", arch).id == "neocloud"
    with pytest.raises(InputError, match="neocloud.*allowed: hyperscaler-silicon"):
        catalog.get_archetype("neoclod", arch)
