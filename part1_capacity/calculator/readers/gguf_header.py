"""A bounded walk over a GGUF file's header before the ``gguf`` package reads it.

``gguf.GGUFReader`` trusts the lengths a file claims: a few hundred bytes that claim a 2⁴⁰-element metadata array
make it allocate until the machine runs out, and it builds Python objects for every array element and tensor (a
real multi-megabyte metadata array, or a table of 100,000 tensors, takes it a minute). This module reads the same
header (GGUF v2 and v3: github.com/ggml-org/ggml docs/gguf.md) with every length checked against the bytes left in
the file *before* anything is allocated, and with caps on what a real model's header holds, then hands the file
to ``GGUFReader``. Nothing is allocated in proportion to a claimed length.
"""
from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from part1_capacity.calculator.base.errors import InputError

MAGIC = b"GGUF"
VERSIONS = (2, 3)
# value type id → bytes of one element (fixed-size types); 8 = string, 9 = array
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9
# What real models' headers hold, with room: a 256K-token vocabulary with its merges is about 0.8 M array
# elements; the largest published GGUFs list a few thousand tensors per file.
MAX_ARRAY_ELEMENTS = 8_000_000     # over all metadata arrays of one file
MAX_TENSORS = 50_000
MAX_KV = 100_000
MAX_NAME = 65_536                  # bytes of one key or tensor name
MAX_DIMS = 8                       # ggml tensors have at most 4 dimensions; leave room


@dataclass(frozen=True)
class HeaderStats:
    version: int
    n_kv: int
    n_tensors: int
    array_elements: int
    header_bytes: int


class _Cursor:
    def __init__(self, data: bytes, field: str, name: str):
        self.data, self.pos, self.field, self.name = data, 0, field, name

    def refuse(self, what: str):
        raise InputError(f"{self.field}: {self.name} is not a readable GGUF file ({what})")

    def left(self) -> int:
        return len(self.data) - self.pos

    def skip(self, n: int, what: str) -> None:
        if n < 0 or n > self.left():
            self.refuse(f"{what} claims {n:,} bytes, only {self.left():,} remain in the file")
        self.pos += n

    def take(self, n: int, what: str) -> bytes:
        self.skip(n, what)
        return self.data[self.pos - n:self.pos]

    def u32(self, what: str) -> int:
        return struct.unpack("<I", self.take(4, what))[0]

    def u64(self, what: str) -> int:
        return struct.unpack("<Q", self.take(8, what))[0]

    def string(self, what: str, cap: int | None = None) -> None:
        n = self.u64(what)
        if cap is not None and n > cap:
            self.refuse(f"{what} is {n:,} bytes long; at most {cap:,} allowed")
        self.skip(n, what)


def _value(c: _Cursor, vtype: int, what: str, budget: list[int]) -> None:
    if vtype in FIXED:
        c.skip(FIXED[vtype], what)
    elif vtype == STRING:
        c.string(what)
    elif vtype == ARRAY:
        etype, count = c.u32(f"{what}: element type"), c.u64(f"{what}: length")
        budget[0] += count
        if budget[0] > MAX_ARRAY_ELEMENTS:
            c.refuse(f"{what}: metadata arrays hold more than {MAX_ARRAY_ELEMENTS:,} elements")
        if etype in FIXED:
            c.skip(count * FIXED[etype], f"{what} ({count:,} elements)")
        elif etype == STRING:
            if count * 8 > c.left():   # each string takes at least its 8-byte length
                c.refuse(f"{what} claims {count:,} strings, only {c.left():,} bytes remain in the file")
            for _ in range(count):
                c.string(what)
        elif etype == ARRAY:
            c.refuse(f"{what}: an array of arrays (not written by llama.cpp's converters)")
        else:
            c.refuse(f"{what}: unknown element type {etype}")
    else:
        c.refuse(f"{what}: unknown value type {vtype}")


def scan(path, field: str = "model") -> HeaderStats:
    """Walk the header of the GGUF at ``path`` (a regular file, already checked by the caller) with every length
    bounded by the file; an InputError naming ``field`` when it claims more than it holds or more than a real
    model's header does."""
    p = Path(path)
    with open(p, "rb") as fh:
        if p.stat().st_size < 24:
            raise InputError(f"{field}: {p.name} is not a readable GGUF file (shorter than a GGUF header)")
        # mapped, not read: only the header's pages are touched, whatever the file's size
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _walk(_Cursor(data, field, p.name))


def _walk(c: _Cursor) -> HeaderStats:
    if c.take(4, "magic") != MAGIC:
        c.refuse("it does not start with the GGUF magic number")
    version = c.u32("version")
    if version not in VERSIONS:
        c.refuse(f"version {version}; readable versions: {', '.join(map(str, VERSIONS))}")
    n_tensors, n_kv = c.u64("tensor count"), c.u64("metadata count")
    if n_kv > MAX_KV or n_kv * 13 > c.left():          # key length 8 + ≥1 byte + type 4
        c.refuse(f"it claims {n_kv:,} metadata entries")
    if n_tensors > MAX_TENSORS:
        c.refuse(f"it claims {n_tensors:,} tensors; at most {MAX_TENSORS:,} per file are read")
    budget = [0]
    for i in range(n_kv):
        c.string(f"metadata key {i}", cap=MAX_NAME)
        _value(c, c.u32(f"metadata entry {i}: type"), f"metadata entry {i}", budget)
    if n_tensors * 24 > c.left():                      # name length 8 + dims 4 + one dim 8 ... at least 24 bytes
        c.refuse(f"it claims {n_tensors:,} tensors, only {c.left():,} bytes of header remain")
    for i in range(n_tensors):
        c.string(f"tensor {i}: name", cap=MAX_NAME)
        n_dims = c.u32(f"tensor {i}: dimension count")
        if not 1 <= n_dims <= MAX_DIMS:
            c.refuse(f"tensor {i} has {n_dims} dimensions; 1 to {MAX_DIMS} allowed")
        c.skip(8 * n_dims + 4 + 8, f"tensor {i}: shape, type and offset")
    return HeaderStats(version, n_kv, n_tensors, budget[0], c.pos)


def open_reader(path, field: str = "model"):
    """``gguf.GGUFReader`` on ``path`` once :func:`scan` has bounded its header; errors as one InputError line."""
    import gguf

    scan(path, field)
    try:
        return gguf.GGUFReader(str(path))
    except InputError:
        raise
    except Exception as exc:  # the reader raises on a bad type id or a tensor beyond the file's end
        msg = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise InputError(f"{field}: {Path(path).name} is not a readable GGUF file ({msg})") from None
