"""Hostile GGUF files: every length a header claims is checked against the file before anything is allocated.

The hostile files are written byte by byte (GGUF v3: github.com/ggml-org/ggml docs/gguf.md), since the ``gguf``
package's writer cannot write a lie. Each is refused with one line naming what it claims, in a subprocess held to
256 MiB of address space and a few seconds of CPU: the reader that trusted the lengths allocated until the
machine ran out.
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from part1_capacity.calculator.readers import gguf_header
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.readers.loader import load_model
from tests.calculator.readers.test_checkpoints import write_gguf

REPO = Path(__file__).resolve().parents[3]
U32, U64, STR, ARR = 4, 10, 8, 9


def s(text: str) -> bytes:
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def header(n_tensors: int, kvs: list[bytes], tensors: bytes = b"") -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, len(kvs)) + b"".join(kvs) + tensors


def kv_u32(key, v):
    return s(key) + struct.pack("<II", U32, v)


def kv_str(key, v):
    return s(key) + struct.pack("<I", STR) + s(v)


def kv_array(key, etype, count, payload=b""):
    return s(key) + struct.pack("<IIQ", ARR, etype, count) + payload


LLAMA = [kv_str("general.architecture", "llama"), kv_u32("llama.block_count", 2),
         kv_u32("llama.embedding_length", 64), kv_u32("llama.context_length", 2048)]

HOSTILE = {
    # a few hundred bytes claiming a 2^40-element array: the old reader appended until memory ran out
    "huge_array": (header(0, LLAMA + [kv_array("tokenizer.ggml.scores", 6, 2 ** 40)]),
                   "metadata arrays hold more than 8,000,000 elements"),
    "array_beyond_file": (header(0, LLAMA + [kv_array("tokenizer.ggml.scores", 6, 10 ** 6)]),
                          "claims 4,000,000 bytes, only 0 remain"),
    "huge_string_array": (header(0, LLAMA + [kv_array("tokenizer.ggml.tokens", STR, 10 ** 6)]),
                          "claims 1,000,000 strings, only 0 bytes remain"),
    "huge_string": (header(0, LLAMA + [s("general.name") + struct.pack("<IQ", STR, 2 ** 50)]),
                    "claims 1,125,899,906,842,624 bytes"),
    "huge_key": (header(0, [struct.pack("<Q", 2 ** 62) + bytes(16)]), "is 4,611,686,018,427,387,904 bytes long; at most 65,536"),
    "many_tensors": (header(10 ** 9, LLAMA), "claims 1,000,000,000 tensors; at most 50,000"),
    "tensor_table_beyond_file": (header(1000, LLAMA), "claims 1,000 tensors, only 0 bytes of header remain"),
    "many_entries": (b"GGUF" + struct.pack("<IQQ", 3, 0, 2 ** 60), "claims 1,152,921,504,606,846,976 metadata entries"),
    "array_of_arrays": (header(0, LLAMA + [kv_array("x", ARR, 1)]), "array of arrays"),
    "unknown_type": (header(0, LLAMA + [s("x") + struct.pack("<I", 77)]), "unknown value type 77"),
    "bad_version": (b"GGUF" + struct.pack("<IQQ", 99, 0, 0), "version 99"),
    "tensor_dims": (header(1, LLAMA, s("t") + struct.pack("<I", 4000) + bytes(32)), "4000 dimensions"),
    "truncated": (header(0, LLAMA)[:-3], "claims 4 bytes, only 1 remain"),
    "short": (b"GGUF", "shorter than a GGUF header"),
}

PROBE = """
import resource, sys, json
resource.setrlimit(resource.RLIMIT_AS, (256 * 2**20, 256 * 2**20))
resource.setrlimit(resource.RLIMIT_CPU, (20, 20))
from part1_capacity import cli
sys.exit(cli.main(["plan", "--model", sys.argv[1], "--accelerator", "h100", "--context", "8"]))
"""


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_header_is_refused_in_bounded_memory(tmp_path, name):
    data, fragment = HOSTILE[name]
    p = tmp_path / f"{name}.gguf"
    p.write_bytes(data)
    run = subprocess.run([sys.executable, "-c", PROBE, str(p)], capture_output=True, text=True, timeout=60,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 2, run.stderr[-500:]
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr[-500:]
    assert fragment in lines[0] and f"{name}.gguf" in lines[0]


def test_a_real_header_is_walked_to_its_end(tmp_path):
    import gguf
    p = tmp_path / "tiny.gguf"
    write_gguf(p)
    stats = gguf_header.scan(p)
    r = gguf.GGUFReader(str(p))
    # the walk ends where the reader's tensor table ends (tensor data starts at the next alignment boundary)
    assert stats.n_tensors == len(r.tensors) == 3
    assert stats.n_kv == len(r.fields) - 3        # the reader lists the header's three counts as fields too
    assert stats.header_bytes <= r.data_offset < stats.header_bytes + 32


def gguf_with(tmp_path, name, **fields) -> Path:
    """A tiny llama GGUF whose attention fields are replaced by ``fields`` (raw gguf writer calls)."""
    import gguf
    import numpy as np
    p = tmp_path / f"{name}.gguf"
    w = gguf.GGUFWriter(str(p), "llama")
    base = {"block_count": 2, "context_length": 2048, "embedding_length": 64, "attention.head_count": 4,
            "attention.head_count_kv": 2}
    for key, v in {**base, **fields}.items():
        k = f"llama.{key}"
        if isinstance(v, list):
            w.add_array(k, v)
        else:
            w.add_uint32(k, v)
    w.add_tensor("token_embd.weight", np.zeros((10, 64), np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return p


@pytest.mark.parametrize("fields, message", [
    ({"attention.head_count_kv": 0}, "attention.head_count_kv must be >= 1 on at least one layer"),
    ({"block_count": [2, 2]}, "'llama.block_count' must be one number, got a list of 2"),
    ({"attention.head_count": ["four", "four"]}, "GGUF field 'llama.attention.head_count'"),
])
def test_metadata_that_describes_no_model_is_refused(tmp_path, fields, message):
    p = gguf_with(tmp_path, "odd", **fields)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_model(str(p))


def test_a_split_part_that_is_the_first_part_again_is_refused(tmp_path):
    import gguf
    import numpy as np
    first = tmp_path / "m-00001-of-00002.gguf"
    w = gguf.GGUFWriter(str(first), "llama")
    w.add_uint16("split.count", 2)
    for add, v in ((w.add_block_count, 2), (w.add_context_length, 2048), (w.add_embedding_length, 64),
                   (w.add_head_count, 4), (w.add_head_count_kv, 2)):
        add(v)
    w.add_tensor("t.weight", np.zeros((10, 64), np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    (tmp_path / "m-00002-of-00002.gguf").symlink_to(first)
    with pytest.raises(InputError, match="is the same file as another part of the split GGUF"):
        load_model(str(first))
