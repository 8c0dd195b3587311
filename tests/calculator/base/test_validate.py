"""The one input checker: numbers, files and JSON, each hostile case refused with one line naming the field."""
import json
import os

import pytest

from part1_capacity.calculator.base import validate
from part1_capacity.calculator.base.errors import InputError


@pytest.mark.parametrize("v, kw, fragment", [
    (float("nan"), {}, "finite"),
    (float("inf"), {"integer": True}, "finite"),
    (True, {}, "must be a number"),
    ("32", {"integer": True}, "must be an integer"),
    (None, {}, "must be a number"),
    (2.5, {"integer": True}, "must be an integer"),
    (0, {"lo": 1}, ">= 1"),
    (10 ** 12, {"lo": 1, "hi": 512}, "<= 512"),
    (10 ** 400, {"hi": 10}, "<= 10"),
    (0.0, {"lo": 0, "lo_open": True}, "> 0"),
])
def test_number_refuses(v, kw, fragment):
    with pytest.raises(InputError) as e:
        validate.number(v, "layers", **kw)
    msg = str(e.value)
    assert msg.startswith("layers: ") and fragment in msg and "\n" not in msg and len(msg) < 200


def test_number_accepts_and_converts():
    assert validate.number(32.0, "x", integer=True) == 32 and isinstance(validate.number(32.0, "x", integer=True), int)
    assert validate.number(0.5, "x", lo=0, hi=1) == 0.5
    import numpy as np
    assert validate.positive_int(np.int64(7), "x") == 7


@pytest.mark.parametrize("text, value", [("131072", 131072), ("128K", 131072), ("1M", 2 ** 20), ("1_000", 1000)])
def test_parse_int(text, value):
    assert validate.parse_int(text, "context") == value


@pytest.mark.parametrize("text, fragment", [("9" * 400, "400 digits"), ("abc", "expected an integer"),
                                            ("0", "a positive integer <= 1,000,000,000"),
                                            ("1099511627776", "a positive integer <= 1,000,000,000")])
def test_parse_int_refuses(text, fragment):
    with pytest.raises(InputError, match="batch: ") as e:
        validate.parse_int(text, "batch", hi=10 ** 9)
    assert fragment in str(e.value)


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e300", "x"])
def test_parse_float_refuses(text):
    with pytest.raises(InputError, match="overhead_gib: "):
        validate.parse_float(text, "overhead_gib", lo=0, hi=1e6)


@pytest.mark.parametrize("text, fragment", [
    ('{"a": NaN}', "NaN"), ('{"a": Infinity}', "Infinity"), ('{"a": -Infinity}', "-Infinity"),
    ('{"a": 1e400}', "too large"), ('{"a": ' + "1" * 400 + "}", "400 digits"),
    ("[" * 200_000 + "]" * 200_000, "nested too deeply"), ("{not json", "not valid JSON"),
])
def test_loads_json_is_strict(text, fragment):
    with pytest.raises(InputError) as e:
        validate.loads_json(text, "model: config.json")
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_a_config_json_reads_infinity_as_transformers_writes_it():
    # Mamba-2's time_step_limit default (0.0, inf), saved by json.dumps as Infinity; NaN is no class's default
    assert validate.loads_json('{"a": [0.0, Infinity, -Infinity]}', "model", infinity=True) == {
        "a": [0.0, float("inf"), float("-inf")]}
    with pytest.raises(InputError, match="NaN is not a number JSON allows"):
        validate.loads_json('{"a": NaN}', "model", infinity=True)


def test_read_text_refuses_what_is_not_a_small_utf8_file(tmp_path):
    with pytest.raises(InputError, match="is a directory"):
        validate.read_text(tmp_path, "ledger")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="is a FIFO"):          # opened non-blocking: no hang
        validate.read_text(fifo, "ledger")
    with pytest.raises(InputError, match="is a device"):
        validate.read_text("/dev/zero", "ledger")
    with pytest.raises(InputError, match="cannot read"):
        validate.read_text("/proc/self/mem", "accelerator")
    latin = tmp_path / "latin.toml"
    latin.write_bytes("café".encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8 text .byte 0xe9 at offset 3"):
        validate.read_text(latin, "ledger")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (validate.MIB + 1))
    with pytest.raises(InputError, match="larger than 1 MiB"):
        validate.read_text(big, "accelerator", max_bytes=validate.MIB)
    with pytest.raises(InputError, match="no file at"):
        validate.read_text(tmp_path / "missing.json", "accelerator")
    ok = tmp_path / "ok.json"
    ok.write_text('{"a": 1}', encoding="utf-8")
    assert validate.load_json_object(ok, "accelerator") == {"a": 1}


def test_dumps_json_is_strict_and_names_the_key():
    assert json.loads(validate.dumps_json({"a": [1.5]})) == {"a": [1.5]}
    with pytest.raises(InputError, match="'decode.time_s' is not a finite number"):
        validate.dumps_json({"decode": {"time_s": float("inf")}, "ok": 1})
