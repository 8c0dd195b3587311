"""Every refusal of the bounded GGUF header walk (part1_capacity/calculator/readers/gguf_header.py) on a header written by
hand, with the exact message, and every bound at its edge (the largest accepted, the smallest refused).

The layout (github.com/ggml-org/ggml docs/gguf.md): magic "GGUF", u32 version, u64 tensor count, u64 metadata
count = 24 bytes; each metadata entry: u64 key length + key + u32 type + value (type 0 = one u8 byte, 8 = u64
length + bytes, 9 = u32 element type + u64 count + elements, 10 = u64); each tensor: u64 name length + name + u32
dimension count + 8 bytes per dimension + u32 type + u64 offset."""
import struct

import pytest

from part1_capacity.calculator.readers import gguf_header
from part1_capacity.calculator.base.errors import InputError

u32 = lambda x: struct.pack("<I", x)      # noqa: E731
u64 = lambda x: struct.pack("<Q", x)      # noqa: E731


def head(n_tensors=0, n_kv=0, version=3):
    return b"GGUF" + u32(version) + u64(n_tensors) + u64(n_kv)


def s(text: bytes):
    return u64(len(text)) + text


def refusal(tmp_path, data, what, field=None):
    p = tmp_path / "x.gguf"
    p.write_bytes(data)
    with pytest.raises(InputError) as err:
        gguf_header.scan(p) if field is None else gguf_header.scan(p, field)
    assert str(err.value) == f"{field or 'model'}: x.gguf is not a readable GGUF file ({what})"


def scan(tmp_path, data):
    p = tmp_path / "x.gguf"
    p.write_bytes(data)
    return gguf_header.scan(p)


ENTRY = s(b"k") + u32(0) + b"\0"          # one metadata entry: key "k", a u8 value (8 + 1 + 4 + 1 = 14 bytes)
TENSOR = s(b"") + u32(1) + u64(4) + u32(0) + u64(0)   # one 1-D tensor: 8 + 4 + 8 + 4 + 8 = 32 bytes


CASES = [
    # (what the file holds, the refusal in its parentheses)
    (b"GGUF" + b"\0" * 19, "shorter than a GGUF header"),                              # 23 bytes
    (b"GGUX" + b"\0" * 20, "it does not start with the GGUF magic number"),
    (head(version=4), "version 4; readable versions: 2, 3"),
    (head(version=0xFFFFFFFF), "version 4294967295; readable versions: 2, 3"),       # unsigned
    # 1 entry needs at least 13 bytes (key length 8 + 1 + type 4); 12 left
    (head(n_kv=1) + b"\0" * 12, "it claims 1 metadata entries"),
    (head(n_kv=100_001) + b"\0" * 13, "it claims 100,001 metadata entries"),
    (head(n_kv=2 ** 63), "it claims 9,223,372,036,854,775,808 metadata entries"),     # unsigned
    (head(n_tensors=50_001), "it claims 50,001 tensors; at most 50,000 per file are read"),
    # a tensor needs at least 24 bytes; 23 left
    (head(n_tensors=1) + b"\0" * 23, "it claims 1 tensors, only 23 bytes of header remain"),
    # 24 left: name length 0, 1 dimension, then 20 bytes of shape, type and offset wanted, 12 there
    (head(n_tensors=1) + s(b"") + u32(1) + b"\0" * 12, "tensor 0: shape, type and offset claims 20 bytes, only 12 "
                                                       "remain in the file"),
    (head(n_kv=1) + u64(1000) + b"\0" * 13, "metadata key 0 claims 1,000 bytes, only 13 remain in the file"),
    (head(n_kv=1) + u64(65_537) + b"\0" * 13, "metadata key 0 is 65,537 bytes long; at most 65,536 allowed"),
    (head(n_tensors=1) + u64(65_537) + b"\0" * 16, "tensor 0: name is 65,537 bytes long; at most 65,536 allowed"),
    (head(n_kv=1) + s(b"ab") + b"\0" * 3, "metadata entry 0: type claims 4 bytes, only 3 remain in the file"),
    (head(n_kv=1) + s(b"") + u32(10) + b"\0" * 4, "metadata entry 0 claims 8 bytes, only 4 remain in the file"),
    (head(n_kv=1) + s(b"") + u32(8) + u64(50), "metadata entry 0 claims 50 bytes, only 0 remain in the file"),
    # a string value whose own length is cut short: 2 entries need 26 bytes; the second's string length has 1
    (head(n_kv=2) + s(b"") + u32(0) + b"\0" + s(b"") + u32(8) + b"\0",
     "metadata entry 1 claims 8 bytes, only 1 remain in the file"),
    (head(n_kv=1) + s(b"") + u32(13) + b"\0", "metadata entry 0: unknown value type 13"),
    (head(n_kv=1) + s(b"") + u32(9) + b"\0" * 2, "metadata entry 0: element type claims 4 bytes, only 2 remain in "
                                                 "the file"),
    (head(n_kv=1) + s(b"") + u32(9) + u32(0) + b"\0" * 3, "metadata entry 0: length claims 8 bytes, only 3 remain "
                                                          "in the file"),
    (head(n_kv=1) + s(b"") + u32(9) + u32(0) + u64(100) + b"\0" * 10,
     "metadata entry 0 (100 elements) claims 100 bytes, only 10 remain in the file"),
    (head(n_kv=1) + s(b"") + u32(9) + u32(0) + u64(8_000_001),
     "metadata entry 0: metadata arrays hold more than 8,000,000 elements"),
    # two strings need at least 16 bytes; 15 left
    (head(n_kv=1) + s(b"") + u32(9) + u32(8) + u64(2) + b"\0" * 15,
     "metadata entry 0 claims 2 strings, only 15 bytes remain in the file"),
    (head(n_kv=1) + s(b"") + u32(9) + u32(8) + u64(1) + u64(100) + b"\0" * 3,
     "metadata entry 0 claims 100 bytes, only 3 remain in the file"),
    (head(n_kv=1) + s(b"") + u32(9) + u32(9) + u64(1), "metadata entry 0: an array of arrays (not written by "
                                                        "llama.cpp's converters)"),
    (head(n_kv=1) + s(b"") + u32(9) + u32(13) + u64(1), "metadata entry 0: unknown element type 13"),
    (head(n_tensors=1) + s(b"a" * 14) + b"\0" * 2, "tensor 0: dimension count claims 4 bytes, only 2 remain in the "
                                                   "file"),
    (head(n_tensors=1) + s(b"") + u32(9) + b"\0" * 12, "tensor 0 has 9 dimensions; 1 to 8 allowed"),
    (head(n_tensors=1) + s(b"") + u32(0) + b"\0" * 12, "tensor 0 has 0 dimensions; 1 to 8 allowed"),
]


@pytest.mark.parametrize("data, what", CASES, ids=[f"refusal-{i}" for i in range(len(CASES))])
def test_each_refusal_names_what_the_header_claims(tmp_path, data, what):
    refusal(tmp_path, data, what)


def test_the_field_is_the_one_given(tmp_path):
    refusal(tmp_path, head(version=4), "version 4; readable versions: 2, 3", field="--gguf")


def test_every_bound_at_its_edge_is_accepted(tmp_path):
    # the bare 24-byte header: version 3, nothing else (every read ends exactly at the end of the file)
    assert scan(tmp_path, head()) == gguf_header.HeaderStats(3, 0, 0, 0, 24)
    # 100,000 metadata entries (the cap), each the smallest: empty key, a u8 value: 13 bytes each, exactly what is left
    n = 100_000
    st = scan(tmp_path, head(n_kv=n) + (s(b"") + u32(0) + b"\0") * n)
    assert (st.n_kv, st.header_bytes) == (n, 24 + 13 * n)
    # 50,000 tensors (the cap) of 32 bytes; a key of 65,536 bytes (the cap); 8 dimensions (the cap)
    assert scan(tmp_path, head(n_tensors=50_000) + TENSOR * 50_000).n_tensors == 50_000
    assert scan(tmp_path, head(n_kv=1) + s(b"k" * 65_536) + u32(0) + b"\0").header_bytes == 24 + 8 + 65_536 + 5
    assert scan(tmp_path, head(n_tensors=1) + s(b"t") + u32(8) + u64(2) * 8 + u32(0) + u64(0)).n_tensors == 1
    # two empty strings: exactly 16 bytes, enough
    st = scan(tmp_path, head(n_kv=1) + s(b"") + u32(9) + u32(8) + u64(2) + u64(0) * 2)
    assert st.array_elements == 2
    # elements of all arrays add up: 3 + 4 = 7
    arrays = (s(b"a") + u32(9) + u32(0) + u64(3) + b"\0" * 3) + (s(b"b") + u32(9) + u32(1) + u64(4) + b"\0" * 4)
    assert scan(tmp_path, head(n_kv=2) + arrays).array_elements == 7


def test_the_array_element_cap_counts_every_array(tmp_path):
    # 5,000,000 + 3,000,001 u8 elements: the second array takes the file over the 8,000,000 cap
    first = s(b"a") + u32(9) + u32(0) + u64(5_000_000) + b"\0" * 5_000_000
    second = s(b"b") + u32(9) + u32(0) + u64(3_000_001)
    refusal(tmp_path, head(n_kv=2) + first + second, "metadata entry 1: metadata arrays hold more than 8,000,000 "
                                                     "elements")
    # exactly 8,000,000 is allowed
    data = head(n_kv=1) + s(b"a") + u32(9) + u32(0) + u64(8_000_000) + b"\0" * 8_000_000
    assert scan(tmp_path, data).array_elements == 8_000_000


def test_open_reader_turns_the_readers_error_into_one_line(tmp_path):
    # the header walk passes, then gguf.GGUFReader meets a tensor of ggml type 99 (no such type)
    p = tmp_path / "x.gguf"
    p.write_bytes(head(n_tensors=1) + s(b"t") + u32(1) + u64(4) + u32(99) + u64(0) + b"\0" * 64)
    with pytest.raises(InputError) as err:
        gguf_header.open_reader(p)
    assert str(err.value) == ("model: x.gguf is not a readable GGUF file (np.uint32(99) is not a valid "
                              "GGMLQuantizationType)")   # the gguf package's own words, first line
    refusal_path = tmp_path / "y.gguf"
    refusal_path.write_bytes(head(version=4))
    with pytest.raises(InputError) as err:
        gguf_header.open_reader(refusal_path)
    assert str(err.value) == "model: y.gguf is not a readable GGUF file (version 4; readable versions: 2, 3)"
    with pytest.raises(InputError) as err:
        gguf_header.open_reader(refusal_path, "--gguf")
    assert str(err.value).startswith("--gguf: y.gguf is not a readable GGUF file (version 4")
