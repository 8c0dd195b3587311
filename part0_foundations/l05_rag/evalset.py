"""A labelled set of questions about the course site, and retrieval metrics over it.

Each question lists the page(s) that answer it (paths relative to ``site/``). A question counts as *found at rank
r* when the r-th retrieved chunk is the first one that comes from one of its pages. Then, over the questions:

- recall@k = share of questions found at rank ≤ k;
- MRR (mean reciprocal rank) = mean of 1/r (0 when never found).

Questions whose pages are not (yet) on the site are left out and counted: the set stays meaningful as the site
grows, and pages that land later get their questions scored as soon as they exist. Answers were written by reading
the pages; a question must be answerable from its page and should not be answerable from the others.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from course.shared import tables
from course.shared.minilm import site_questions
from part0_foundations.l05_rag import index as ix
from part0_foundations.l05_rag.embed import Embedder
from part0_foundations.l05_rag.pipeline import OVERLAP, SIZE
from part0_foundations.l05_rag.rag import chunk_corpus, load_corpus

# The questions live in the course's shared data (lesson 04 embeds some of them too): one list, two lessons.
QUESTIONS: list[tuple[str, tuple[str, ...]]] = site_questions()


def active_questions(pages) -> tuple[list[tuple[str, tuple[str, ...]]], int]:
    """(questions whose relevant pages all exist in ``pages``, how many were left out)."""
    pages = set(pages)
    active = [(q, rel) for q, rel in QUESTIONS if all(r in pages for r in rel)]
    return active, len(QUESTIONS) - len(active)


def first_relevant_rank(ranked_sources: list[str], relevant) -> int:
    """1-based rank of the first source in ``relevant``; 0 when none is."""
    for r, src in enumerate(ranked_sources, 1):
        if src in relevant:
            return r
    return 0


def metrics(ranks: list[int]) -> dict:
    """recall@1, recall@5 and MRR from first-relevant ranks (0 = not found)."""
    if not ranks:
        raise ValueError("ranks: no questions to score")
    r = np.asarray(ranks)
    found = r > 0
    return {"questions": len(ranks),
            "recall@1": float(np.mean(found & (r <= 1))),
            "recall@5": float(np.mean(found & (r <= 5))),
            "mrr": float(np.mean(np.where(found, 1.0 / np.maximum(r, 1), 0.0)))}


def evaluate(folder, kind: str = "flat", size: int = SIZE, overlap: int = OVERLAP,
             embedder: Embedder | None = None, nprobe: int = 1) -> dict:
    """Index ``folder`` (in memory), retrieve every active question over all chunks, score the ranks.

    Returns the metrics plus ``per_question`` [(question, relevant pages, rank)], ``left_out``, ``chunks``.
    """
    embedder = embedder or Embedder()
    docs = load_corpus(folder)
    chunks = chunk_corpus(docs, size, overlap)
    active, left_out = active_questions(docs)
    if not active:
        raise ValueError(f"folder: none of the labelled pages is under {Path(folder)}")
    vectors = embedder.encode([c.text for c in chunks])
    index = ix.build_flat(vectors) if kind == "flat" else ix.build_ivf(vectors, nprobe=nprobe)
    q = embedder.encode([question for question, _ in active])
    _, ids = ix.search(index, q, len(chunks))  # every chunk ranked: the MRR needs no cut-off
    ranks = [first_relevant_rank([chunks[i].source for i in row if i >= 0], rel) for row, (_, rel) in zip(ids, active)]
    out = metrics(ranks)
    out.update(kind=kind, chunks=len(chunks), documents=len(docs), left_out=left_out,
               per_question=[(question, rel, r) for (question, rel), r in zip(active, ranks)])
    return out


def format_table(result: dict) -> str:
    """The metrics as a Markdown table row set."""
    return tables.table("| index | pages | chunks | questions | recall@1 | recall@5 | MRR |", [[
        result['kind'], result['documents'], result['chunks'], result['questions'], f"{result['recall@1']:.2f}",
        f"{result['recall@5']:.2f}", f"{result['mrr']:.2f}"]]) + "\n"
