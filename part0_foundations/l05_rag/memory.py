"""What an index costs in memory: formula bytes, file bytes, RSS anonymous / file-backed, page-cache residency.

Run it in a fresh process (``python -m part0_foundations.l05_rag.memory --n 100000``) so the RSS is this
experiment's alone (no torch, no model). It writes an index of ``n`` random unit vectors of ``d`` floats to a
temporary folder on disk, then walks through the ways of opening it and reads, after each step, the kernel's own
counters (``course.machine.memstat``): RssAnon and RssFile of this process (``/proc/self/status``) and how much
of the file sits in the page cache (``mincore``). The folder is removed at the end.

Safety floor: it refuses to run unless MemAvailable is at least 4× the index size (it holds the vectors and one
copy of the index at most) and the index is under 2 GiB.
"""
from __future__ import annotations

import argparse
import gc
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from course.machine import memstat
from part0_foundations.l05_rag import index as ix

REPO = Path(__file__).resolve().parents[2]
MAX_INDEX_BYTES = 2 << 30
RESULT = Path(__file__).resolve().parent / "results" / "memory.json"  # the saved run the site page shows


def _snapshot(step: str, path: Path, file_bytes: int) -> dict:
    rss = memstat.rss_split()
    pages, total = memstat.resident_pages(path)
    return {"step": step, "rss_anon": rss.anon, "rss_file": rss.file,
            "page_cache": min(pages * memstat.PAGE_SIZE, file_bytes), "resident_pages": pages, "file_pages": total}


def random_unit_vectors(n: int, d: int, seed: int = 0) -> np.ndarray:
    """(n, d) float32 rows of unit length, written in blocks so the float64 temporaries stay small."""
    rng = np.random.default_rng(seed)
    x = np.empty((n, d), dtype=np.float32)
    for s in range(0, n, 16384):
        block = rng.standard_normal((min(16384, n - s), d), dtype=np.float32)
        x[s:s + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return x


def measure(n: int = 100_000, d: int = 384, queries: int = 16, workdir: str | Path | None = None) -> dict:
    """Build, write and reopen a flat index (and an IVF one) of ``n`` vectors; return the steps and the bytes."""
    import faiss

    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int (vectors), got {n!r}")
    formula = ix.flat_index_bytes(n, d)
    if formula > MAX_INDEX_BYTES:
        raise ValueError(f"n: an index of {formula:,} bytes is over the {MAX_INDEX_BYTES:,}-byte limit of this demo")
    avail = memstat.meminfo().available
    if avail < 4 * formula:
        raise ValueError(f"n: needs 4 × {formula:,} bytes available, the machine has {avail:,}; use a smaller n")
    base = Path(workdir) if workdir else REPO / "_build" / "tmp"
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="l05-mem-", dir=base))
    try:
        path = tmp / "flat.faiss"
        x = random_unit_vectors(n, d)
        q = x[:queries] + 0.01  # near-duplicates of stored vectors: the answers are known (ids 0..queries-1)
        file_bytes = ix.write_index(ix.build_flat(x), path)
        nlist = 64
        ivf = ix.build_ivf(x[: min(n, 40 * nlist)], nlist=nlist)  # train on a sample: k-means needs ~40/list
        ivf.add(x[min(n, 40 * nlist):])
        ivf_path = tmp / "ivf.faiss"
        ivf_bytes = ix.write_index(ivf, ivf_path)
        del x, ivf
        gc.collect()

        steps = []
        memstat.drop_file_pages(path)
        steps.append(_snapshot("written, pages dropped", path, file_bytes))
        index = faiss.read_index(str(path))
        steps.append(_snapshot("read_index (a copy)", path, file_bytes))
        del index
        memstat.drop_file_pages(path)
        index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP)
        steps.append(_snapshot("IO_FLAG_MMAP alone", path, file_bytes))
        del index
        memstat.drop_file_pages(path)
        index = ix.open_index(path, mmap=True)
        steps.append(_snapshot("IO_FLAG_MMAP + IO_FLAG_MMAP_IFC", path, file_bytes))
        _, ids = ix.search(index, q, 5)
        correct = bool((ids[:, 0] == np.arange(len(q))).all())
        steps.append(_snapshot(f"after {len(q)} searches", path, file_bytes))
        del index
        gc.collect()
        steps.append(_snapshot("index closed", path, file_bytes))

        # IVF opened with IO_FLAG_MMAP: a search reads only the nprobe lists it probes.
        memstat.drop_file_pages(ivf_path)
        ivf = ix.open_index(ivf_path, mmap=True)
        ivf.nprobe = 1
        ix.search(ivf, q[:1], 5)
        ivf_pages, ivf_total = memstat.resident_pages(ivf_path)
        del ivf
        return {"n": n, "d": d, "vector_bytes": 4 * n * d, "formula_bytes": formula, "file_bytes": file_bytes,
                "page_size": memstat.PAGE_SIZE, "filesystem": memstat.filesystem_type(path), "steps": steps,
                "searches_correct": correct, "ivf": {"nlist": nlist, "nprobe": 1, "file_bytes": ivf_bytes,
                "formula_bytes": ix.ivf_flat_index_bytes(n, d, nlist),
                "resident_fraction_after_1_search": ivf_pages / ivf_total}}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m part0_foundations.l05_rag.memory", description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=100_000, help="vectors in the index (default 100000)")
    p.add_argument("--d", type=int, default=384, help="floats per vector (default 384, all-MiniLM-L6-v2)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--save", action="store_true", help=f"also save it as {RESULT.relative_to(REPO)} (the site's copy)")
    a = p.parse_args(argv)
    try:
        r = measure(a.n, a.d)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if a.save:
        from course.machine import records

        saved = {**records.run_record(["--n", str(a.n), "--d", str(a.d), "--save"],
                                      program="python -m part0_foundations.l05_rag.memory"), **r}
        RESULT.parent.mkdir(exist_ok=True)
        RESULT.write_text(json.dumps(saved, indent=1) + "\n")
    if a.json:
        print(json.dumps(r))
        return 0
    print(f"n={r['n']:,} d={r['d']}: formula {r['formula_bytes']:,} B, file {r['file_bytes']:,} B ({r['filesystem']})")
    for s in r["steps"]:
        print(f"  {s['step']:<34} RssAnon {s['rss_anon'] / 2**20:8.1f} MiB  RssFile {s['rss_file'] / 2**20:8.1f} MiB"
              f"  page cache {s['page_cache'] / 2**20:8.1f} MiB")
    print(f"  IVF{r['ivf']['nlist']} opened with IO_FLAG_MMAP, 1 search at nprobe=1: "
          f"{100 * r['ivf']['resident_fraction_after_1_search']:.1f}% of its file in the page cache")
    return 0


if __name__ == "__main__":
    sys.exit(main())
