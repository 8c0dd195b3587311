"""The pipeline end to end, on disk: build an index over a folder, open it again (mmap), retrieve for a question.

A store is a folder with three files, each readable on its own:

- ``index.faiss``  the FAISS index (row i = chunk i);
- ``chunks.jsonl`` one chunk per line: source, start, end, text;
- ``meta.json``    how it was built: model, chunk size, overlap, index kind, counts and bytes.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from part0_foundations.l05_rag import index as ix
from part0_foundations.l05_rag.embed import DIM, MODEL_NAME, Embedder
from part0_foundations.l05_rag.rag import Chunk, Hit, chunk_corpus, load_corpus

SIZE, OVERLAP = 800, 200  # characters: ~200 WordPiece tokens, under the model's 256-token input limit


@dataclass
class Store:
    index: object          # a faiss.Index
    chunks: list[Chunk]
    meta: dict


def build_store(folder, out_dir, size: int = SIZE, overlap: int = OVERLAP, kind: str = "flat",
                embedder: Embedder | None = None, nprobe: int = 2) -> dict:
    """Chunk every Markdown file under ``folder``, embed, index, write the store to ``out_dir``; return its meta.

    ``nprobe`` (IVF only, capped at nlist) is saved in the index file: searches of the reopened index use it."""
    if kind not in ix.KINDS:
        raise ValueError(f"kind must be one of {', '.join(ix.KINDS)}, got {kind!r}")
    docs = load_corpus(folder)
    chunks = chunk_corpus(docs, size, overlap)
    vectors = (embedder or Embedder()).encode([c.text for c in chunks])
    if kind == "flat":
        index = ix.build_flat(vectors)
    else:
        nlist = ix.default_nlist(len(vectors))
        index = ix.build_ivf(vectors, nlist=nlist, nprobe=min(nprobe, nlist))
    out = Path(out_dir)
    file_bytes = ix.write_index(index, out / "index.faiss")
    with open(out / "chunks.jsonl", "w") as f:
        for c in chunks:
            f.write(json.dumps(asdict(c)) + "\n")
    n, d = vectors.shape
    formula = ix.flat_index_bytes(n, d) if kind == "flat" else ix.ivf_flat_index_bytes(n, d, index.nlist)
    meta = {"model": MODEL_NAME, "dim": d, "size": size, "overlap": overlap, "kind": kind,
            "documents": len(docs), "chunks": n, "index_file_bytes": file_bytes, "index_formula_bytes": formula}
    if kind == "ivf":
        meta.update(nlist=index.nlist, nprobe=index.nprobe)
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def open_store(out_dir, mmap: bool = True) -> Store:
    """Open a store written by ``build_store``. Raises ``ValueError`` naming ``index`` when the folder is not one."""
    out = Path(out_dir)
    missing = [n for n in ("index.faiss", "chunks.jsonl", "meta.json") if not (out / n).is_file()]
    if missing:
        raise ValueError(f"index: {out} is not an index folder (missing {', '.join(missing)}); run `build` first")
    meta = json.loads((out / "meta.json").read_text())
    chunks = [Chunk(**json.loads(line)) for line in (out / "chunks.jsonl").read_text().splitlines() if line]
    index = ix.open_index(out / "index.faiss", mmap=mmap)
    if index.ntotal != len(chunks) or index.d != DIM:
        raise ValueError(f"index: {out} is inconsistent ({index.ntotal} vectors of d={index.d}, {len(chunks)} chunks)")
    return Store(index, chunks, meta)


def retrieve(store: Store, question: str, k: int, embedder: Embedder | None = None) -> list[Hit]:
    """The ``k`` chunks nearest the question, best first. Raises ``ValueError`` naming ``question`` or ``k``."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty string")
    n = store.index.ntotal
    if not isinstance(k, (int, np.integer)) or not 1 <= k <= n:
        raise ValueError(f"k must be an int in 1..{n} (the chunks in the index), got {k!r}")
    q = (embedder or Embedder()).encode([question.strip()])
    scores, ids = ix.search(store.index, q, k)
    return [Hit(rank=r + 1, score=float(s), chunk=store.chunks[int(i)])
            for r, (s, i) in enumerate(zip(scores[0], ids[0])) if i >= 0]
