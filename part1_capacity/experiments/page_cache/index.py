"""A FAISS flat (brute-force) index file written in FAISS's own on-disk layout, streamed in chunks.

``faiss.write_index`` needs the whole index in RAM first (5 GB for the default experiment); the layout is simple
enough to stream instead. The test suite checks the bytes are identical to ``faiss.serialize_index`` and the file
opens with ``faiss.read_index(path, faiss.IO_FLAG_MMAP_IFC)`` — a real index, mapped, not copied.

Layout of an ``IndexFlatL2`` (faiss/impl/index_write.cpp), little-endian:

    b"IxF2" | d:int32 | ntotal:int64 | 2 × int64 dummy (1 << 20) | is_trained:uint8 | metric_type:int32
    | n_floats:uint64 (= ntotal·d) | ntotal·d float32 vectors

The byte counts are lesson 05's (``l05_rag.index.flat_index_bytes``: fourcc 4 + the common header 33 + the vector
length 8 = 45 bytes before the vectors); this module only writes them. ``_LAYOUT`` packs those 45 bytes, and the
tests check its size against lesson 05's count and both against a file FAISS itself wrote.
"""
from __future__ import annotations

import os
import struct

import numpy as np

from part0_foundations.l05_rag.index import flat_index_bytes

DIM = 384  # all-MiniLM-L6-v2 embeddings, the model of lesson 05
METRIC_L2 = 1  # faiss::METRIC_L2 (METRIC_INNER_PRODUCT is 0)
# fourcc, d, ntotal, two dummies, is_trained, metric_type, vector length: flat_index_bytes(0, d) bytes in all
_LAYOUT = struct.Struct("<4siqqqBiQ")


def vectors_offset(d: int = DIM) -> int:
    """Bytes before the first vector of a flat index file (lesson 05's count for an empty index)."""
    return flat_index_bytes(0, d)


def header(d: int, ntotal: int) -> bytes:
    """The bytes FAISS writes before the vectors of an IndexFlatL2 with ``ntotal`` vectors of dimension ``d``."""
    return _LAYOUT.pack(b"IxF2", d, ntotal, 1 << 20, 1 << 20, 1, METRIC_L2, ntotal * d)


def n_vectors_for(n_bytes: int, d: int = DIM) -> int:
    """How many float32 vectors of dimension ``d`` fit in a file of at most ``n_bytes`` bytes (header included)."""
    return max(0, (n_bytes - vectors_offset(d)) // (4 * d))


def file_bytes(ntotal: int, d: int = DIM) -> int:
    """Size in bytes of the index file holding ``ntotal`` vectors (lesson 05's formula)."""
    return flat_index_bytes(ntotal, d)


def write_flat_index(path, n_bytes: int, d: int = DIM, seed: int = 0, chunk_bytes: int = 64 << 20,
                     progress=None) -> int:
    """Write an IndexFlatL2 of random float32 vectors, at most ``n_bytes`` bytes; returns the vector count.

    Vectors are uniform in [0, 1) from ``numpy.random.default_rng(seed)``, generated ``chunk_bytes`` at a time so the
    writer's own memory stays small whatever the index size. ``progress(done_bytes, total_bytes)`` is called per chunk.
    The file is fsync'ed: its pages are clean page cache afterwards (evictable, like a freshly loaded index).
    """
    ntotal = n_vectors_for(n_bytes, d)
    if ntotal < 1:
        raise ValueError(f"n_bytes: {n_bytes} is too small for one {d}-dim vector ({file_bytes(1, d)} bytes)")
    rng = np.random.default_rng(seed)
    per_chunk = max(1, chunk_bytes // (4 * d))
    total = file_bytes(ntotal, d)
    with open(path, "wb") as f:
        f.write(header(d, ntotal))
        done = 0
        while done < ntotal:
            n = min(per_chunk, ntotal - done)
            f.write(rng.random((n, d), dtype=np.float32).tobytes())
            done += n
            if progress:
                progress(file_bytes(done, d), total)
        f.flush()
        os.fsync(f.fileno())
    return ntotal


def vectors(path, d: int = DIM) -> np.ndarray:
    """The vectors of a flat index file as a read-only memory map, shape (ntotal, d), float32 (no copy)."""
    with open(path, "rb") as f:
        fourcc, dd, ntotal, *_ = _LAYOUT.unpack(f.read(_LAYOUT.size))
    if fourcc != b"IxF2" or dd != d:
        raise ValueError(f"{path}: not an IndexFlatL2 of dimension {d} (found {fourcc!r}, d={dd})")
    return np.memmap(path, dtype=np.float32, mode="r", offset=vectors_offset(d), shape=(ntotal, d))


def open_faiss(path):
    """The index opened by FAISS itself with its vectors memory-mapped (``IO_FLAG_MMAP_IFC``), not read into RAM."""
    import faiss

    return faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC)
