"""The FAISS side: a flat inner-product index, one approximate index (IVF-Flat), their bytes, and mmap.

On unit vectors the inner product *is* the cosine, so ``IndexFlatIP`` gives exact cosine top-k (it scans every
vector). ``IndexIVFFlat`` clusters the vectors into ``nlist`` lists around k-means centroids and scans only the
``nprobe`` lists nearest the query: faster on big corpora, but it can miss neighbours (its *recall* against flat).

Bytes (from FAISS's ``faiss/impl/index_write.cpp`` and ``io_macros.h``; checked against real files by the tests):

- the common index header is d (int32, 4) + ntotal (int64, 8) + two int64 dummies (16) + is_trained (bool, 1) +
  metric_type (int32, 4) = 33 bytes; each object starts with a 4-byte fourcc;
- ``IndexFlat``: fourcc + header + vector length (uint64, 8) + the vectors, n·d·4  →  45 + 4·n·d;
- ``IndexIVFFlat``: fourcc + header + nlist and nprobe (2·8) + its quantizer (an ``IndexFlat`` of the nlist
  centroids: 45 + 4·nlist·d) + the direct map (char + empty vector, 9) + the inverted lists: fourcc, nlist, code
  size (4 + 8 + 8), list type (4) and the list sizes (8 + 8·nlist, "full" layout, when more than half the lists are
  non-empty), then per vector its code (4·d) and its id (int64, 8)
  →  139 + 4·nlist·d + 8·nlist + n·(4·d + 8);
- ``IndexHNSWFlat`` (not built in this lesson; the capacity calculator sizes it): fourcc + header + the graph
  (``write_HNSW``: level probabilities, cumulative neighbours per level, each vector's level (int32), offsets
  (uint64, n + 1), the neighbour ids (int32: 2·M slots on level 0 and M on each level above), five int32
  fields) + its storage, an ``IndexFlat`` of the n vectors. A vector reaches level l with probability M^-l, so
  it holds on average 2·M + M/(M - 1) neighbour slots; ``hnsw_flat_index_bytes`` is that expectation.

Opening with mmap: ``faiss.IO_FLAG_MMAP`` maps the *inverted lists* of an IVF index, but an ``IndexFlat`` read
with it alone is still copied into anonymous memory (faiss 1.15); its vectors are mapped only with
``faiss.IO_FLAG_MMAP_IFC`` ("IndexFlatCodes"), and that flag in turn breaks the IVF mapping ("mmap only supported
for File objects"). ``open_index(path, mmap=True)`` reads the file's fourcc and passes the right flags.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

HEADER_BYTES = 4 + 8 + 8 + 8 + 1 + 4  # d, ntotal, 2 dummies, is_trained, metric_type
FOURCC = 4
KINDS = ("flat", "ivf")


def flat_index_bytes(n: int, d: int) -> int:
    """Bytes of an ``IndexFlat`` file of ``n`` vectors of ``d`` float32: fourcc + header + vector length + floats."""
    ### BEGIN SOLUTION
    n_bytes = FOURCC + HEADER_BYTES + 8 + 4 * n * d
    ### END SOLUTION
    return n_bytes


def ivf_flat_index_bytes(n: int, d: int, nlist: int) -> int:
    """Bytes of an ``IndexIVFFlat`` file (inner product or L2), "full" list layout; see the module docstring."""
    quantizer = flat_index_bytes(nlist, d)
    direct_map = 1 + 8
    invlists = FOURCC + 8 + 8 + 4 + (8 + 8 * nlist) + n * (4 * d + 8)
    return FOURCC + HEADER_BYTES + 8 + 8 + quantizer + direct_map + invlists


def hnsw_level_probabilities(m: int) -> list[float]:
    """FAISS's ``HNSW::set_default_probas(M, 1/ln M)``: P(level = l) = M^-l·(1 - 1/M), for l while it is >= 1e-9."""
    probas, level = [], 0
    while (p := math.exp(-level * math.log(m)) * (1 - 1 / m)) >= 1e-9:
        probas.append(p)
        level += 1
    return probas


def hnsw_flat_index_bytes(n: int, d: int, m: int = 32) -> int:
    """Expected bytes of an ``IndexHNSWFlat`` file (M = ``m`` neighbours per level); see the module docstring.

    The levels are drawn at random, so a real file differs by the few upper-level vectors' slots (well under
    1 % for a thousand vectors or more)."""
    probas = hnsw_level_probabilities(m)
    upper_levels = sum(sum(probas[level:]) for level in range(1, len(probas)))  # E[level] of one vector
    graph = ((8 + 8 * len(probas)) + (8 + 4 * (len(probas) + 1)) + (8 + 4 * n) + (8 + 8 * (n + 1))
             + 8 + round(4 * n * (2 * m + m * upper_levels)) + 5 * 4)
    return FOURCC + HEADER_BYTES + graph + flat_index_bytes(n, d)


def default_nlist(n: int) -> int:
    """About √n lists (a common rule of thumb), at least 1, and at most n/8 so k-means has points to work with."""
    return max(1, min(int(math.sqrt(n)), n // 8))


def _as_vectors(vectors) -> np.ndarray:
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"vectors must be a non-empty (n, d) array, got shape {x.shape} (empty corpus?)")
    return x


def build_flat(vectors):
    """Exact inner-product index over ``vectors`` (n, d); on unit vectors its scores are cosines."""
    import faiss

    x = _as_vectors(vectors)
    index = faiss.IndexFlatIP(x.shape[1])
    index.add(x)
    return index


def build_ivf(vectors, nlist: int | None = None, nprobe: int = 1, seed: int = 0):
    """IVF-Flat with ``nlist`` k-means lists (default about √n), trained on the vectors themselves."""
    import faiss

    x = _as_vectors(vectors)
    n, d = x.shape
    nlist = default_nlist(n) if nlist is None else nlist
    if not isinstance(nlist, int) or not 1 <= nlist <= n:
        raise ValueError(f"nlist must be an int in 1..{n} (the number of vectors), got {nlist!r}")
    if not isinstance(nprobe, int) or not 1 <= nprobe <= nlist:
        raise ValueError(f"nprobe must be an int in 1..nlist={nlist}, got {nprobe!r}")
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = seed
    index.cp.min_points_per_centroid = 1  # small corpora: no warning, k-means still runs
    index.train(x)
    index.add(x)
    index.nprobe = nprobe
    return index


def search(index, queries, k: int):
    """FAISS top-k: ``(scores, ids)``, each (n_queries, k). Raises ``ValueError`` naming ``k`` or ``queries``."""
    q = np.atleast_2d(np.ascontiguousarray(queries, dtype=np.float32))
    if q.shape[1] != index.d:
        raise ValueError(f"queries: width {q.shape[1]} must equal the index's d={index.d}")
    if not isinstance(k, (int, np.integer)) or not 1 <= k <= index.ntotal:
        raise ValueError(f"k must be an int in 1..{index.ntotal} (the vectors in the index), got {k!r}")
    return index.search(q, int(k))


def recall_at_k(approx_ids: np.ndarray, exact_ids: np.ndarray) -> float:
    """Share of the exact top-k neighbours that the approximate search also returned (order ignored), in [0, 1]."""
    a, e = np.asarray(approx_ids), np.asarray(exact_ids)
    if a.shape != e.shape:
        raise ValueError(f"approx_ids: shape {a.shape} must equal exact_ids' {e.shape}")
    found = sum(len(set(row_a.tolist()) & set(row_e.tolist())) for row_a, row_e in zip(a, e))
    return found / e.size


def write_index(index, path: str | Path) -> int:
    """Write the index to ``path``; return the file's size in bytes."""
    import faiss

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    faiss.write_index(index, str(path))
    return path.stat().st_size


def open_index(path: str | Path, mmap: bool = True):
    """Read an index back. ``mmap=True`` maps the file (pages come in from the page cache as searches touch them)
    instead of copying it into the process's own memory. Raises ``ValueError`` naming ``path`` if it is missing."""
    import faiss

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path: no index file at {path} (build one first)")
    flags = 0
    if mmap:
        with open(path, "rb") as f:
            fourcc = f.read(4)
        flat = fourcc in (b"IxFI", b"IxF2", b"IxFl")
        flags = (faiss.IO_FLAG_MMAP | faiss.IO_FLAG_MMAP_IFC) if flat else faiss.IO_FLAG_MMAP
    return faiss.read_index(str(path), flags)
