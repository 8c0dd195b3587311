"""Lesson 05 — a RAG pipeline written by hand: split, (embed), search, put the results into a prompt.

No LangChain, no LlamaIndex: every value that passes between the steps is a plain dataclass or numpy array you can
print. Embedding lives in ``embed.py`` (sentence-transformers, offline) and the FAISS index in ``index.py``; this
file holds the three pieces learners write in the exercise notebook (between ``### BEGIN SOLUTION`` and
``### END SOLUTION``): the chunker, cosine top-k in numpy, and the prompt builder with its token budget.

Units: offsets are character positions in the source text (Python ``str`` indices); budgets are tokens as counted
by the ``count_tokens`` function you pass.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from course.shared.i18n import DEFAULT, LANGS


@dataclass(frozen=True)
class Chunk:
    """A piece of one document: ``text == document[start:end]``, offsets in characters."""

    source: str  # where it comes from, e.g. "part0/01_attention.md"
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk: its rank (1 = best), cosine score and the chunk itself."""

    rank: int
    score: float
    chunk: Chunk


def count_words(text: str) -> int:
    """A tokenizer-free token count (whitespace-separated words). The CLI counts real WordPiece tokens instead."""
    return len(text.split())


def chunk_text(text: str, source: str, size: int, overlap: int) -> list[Chunk]:
    """Split ``text`` into windows of ``size`` characters, consecutive windows sharing ``overlap`` characters.

    Window i starts at ``i * (size - overlap)``; the last window ends exactly at ``len(text)`` (it may be shorter),
    and no window is wholly inside the previous one. An empty text gives no chunks.
    Offsets count characters (``str`` indices), not bytes. A text no longer than ``overlap`` is still one window.
    Raises ``ValueError`` naming ``size`` or ``overlap`` when ``size < 1`` or not ``0 <= overlap < size``.
    """
    _check_chunk_sizes(size, overlap)
    ### BEGIN SOLUTION
    step = size - overlap
    chunks = []
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        chunks.append(Chunk(source, start, end, text[start:end]))
        if end == len(text):
            break  # the next window would lie wholly inside this one
        start += step
    ### END SOLUTION
    return chunks


def cosine_top_k(queries: np.ndarray, docs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` documents most similar to each query by cosine similarity, best first — like FAISS's ``search``.

    queries: (n_queries, d) or (d,); docs: (n_docs, d). Rows need not be normalized: both sides are scaled to unit
    length here, so the inner product is the cosine. Returns ``(scores, ids)``, each (n_queries, k): float32 cosines
    in decreasing order and int64 row indices into ``docs``. A zero vector has no direction: it scores 0 with
    everything (as ``faiss.normalize_L2`` leaves it), never NaN. Equal cosines keep the lower id first, so the
    order is the same every run.
    Raises ``ValueError`` naming ``k`` (not in 1..n_docs), ``docs`` (empty) or ``queries`` (wrong width).
    """
    queries, docs = _check_topk_inputs(queries, docs, k)
    ### BEGIN SOLUTION
    def unit(x):
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        return x / np.where(norms > 0, norms, 1.0)  # a zero vector stays zero (cosine 0 with everything)

    sims = unit(queries) @ unit(docs).T  # (n_queries, n_docs)
    # np.partition finds each row's k-th best cosine in O(n) without sorting everything. Every doc above it is in;
    # of the docs equal to it, the lowest ids fill the k places (argpartition would pick among them at random).
    kth = -np.partition(-sims, k - 1, axis=1)[:, k - 1:k]
    above = sims > kth
    tied = sims == kth
    tied &= np.cumsum(tied, axis=1) <= k - above.sum(axis=1, keepdims=True)
    ids = np.nonzero(above | tied)[1].reshape(len(sims), k)  # k per row, in id order
    # Only those k are sorted, stably, so equal cosines keep the lower id first.
    order = np.argsort(-np.take_along_axis(sims, ids, axis=1), axis=1, kind="stable")
    ids = np.take_along_axis(ids, order, axis=1).astype(np.int64)
    scores = np.take_along_axis(sims, ids, axis=1).astype(np.float32)
    ### END SOLUTION
    return scores, ids


PROMPT_HEADER = (
    "Answer the question using only the numbered sources below. "
    "Cite every claim with its source number in brackets, like [1]. "
    "If the sources do not contain the answer, say so.\n\nSources:\n"
)


def format_source(number: int, chunk: Chunk) -> str:
    """One numbered source block of the prompt: ``[n] source (chars start-end)`` then the chunk text."""
    return f"[{number}] {chunk.source} (chars {chunk.start}-{chunk.end})\n{chunk.text.strip()}\n\n"


def format_prompt(question: str, blocks: list[str]) -> str:
    """The whole prompt: header, the source blocks in order, then the question."""
    return PROMPT_HEADER + "".join(blocks) + f"Question: {question.strip()}\nAnswer:"


def build_prompt(question: str, hits: list[Hit], budget: int, count_tokens=count_words) -> tuple[str, list[Hit]]:
    """Assemble the prompt from the best hits that fit in ``budget`` tokens; return it and the hits it cites.

    Hits are taken in the order given (best first) and numbered 1, 2, ... in the prompt as they are included; a hit
    goes in whole or not at all, and a hit that does not fit is skipped (a shorter later one may still fit).
    ``count_tokens(format_prompt(...))`` of the result never exceeds ``budget``.
    Raises ``ValueError`` naming ``question`` (empty) or ``budget`` (not even the question fits).
    """
    _check_prompt_inputs(question, budget, count_tokens)
    ### BEGIN SOLUTION
    blocks, cited = [], []
    for hit in hits:
        candidate = blocks + [format_source(len(blocks) + 1, hit.chunk)]
        # Count the whole prompt, not the block alone: a tokenizer need not be additive across joins.
        if count_tokens(format_prompt(question, candidate)) <= budget:
            blocks, cited = candidate, cited + [hit]
    prompt = format_prompt(question, blocks)
    ### END SOLUTION
    return prompt, cited


# --- input checks, after the idea: bad input becomes a ValueError naming the argument ------------------------------
def _check_chunk_sizes(size, overlap):
    """Validate chunk_text's window sizes (characters)."""
    if not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive int (characters), got {size!r}")
    if not isinstance(overlap, int) or not 0 <= overlap < size:
        raise ValueError(f"overlap must be an int with 0 <= overlap < size ({size}), got {overlap!r}")


def _check_topk_inputs(queries, docs, k):
    """Validate cosine_top_k's inputs; return (queries, docs) as float32, queries 2-D."""
    queries = np.atleast_2d(np.asarray(queries, dtype=np.float32))
    docs = np.asarray(docs, dtype=np.float32)
    if docs.ndim != 2 or docs.shape[0] == 0:
        raise ValueError(f"docs must be a non-empty (n_docs, d) array, got shape {docs.shape}")
    if queries.ndim != 2 or queries.shape[1] != docs.shape[1]:
        raise ValueError(f"queries: width {queries.shape[-1]} must equal the docs' width d={docs.shape[1]}")
    if not isinstance(k, (int, np.integer)) or not 1 <= k <= docs.shape[0]:
        raise ValueError(f"k must be an int in 1..{docs.shape[0]} (the number of docs), got {k!r}")
    for name, x in (("queries", queries), ("docs", docs)):
        if not np.isfinite(x).all():
            raise ValueError(f"{name} must be finite numbers: found NaN or inf")
    return queries, docs


def _check_prompt_inputs(question, budget, count_tokens):
    """Validate build_prompt's question and budget (tokens): the template and the question alone must fit."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty string")
    if not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be a positive int (tokens), got {budget!r}")
    base = count_tokens(format_prompt(question, []))
    if base > budget:
        raise ValueError(f"budget: the template and question alone take {base} tokens, more than budget={budget}")


def is_translation(path: Path) -> bool:
    """``x.ko.md``: a page's translation (course/shared/i18n.py's suffix layout), not a page of its own."""
    return any(path.name.endswith(f".{lang}{path.suffix}") for lang in LANGS if lang != DEFAULT)


def load_corpus(folder: str | Path, pattern: str = "**/*.md", exclude: tuple[str, ...] = ("generated",)) -> dict[str, str]:
    """{relative path: text} of the files under ``folder`` matching ``pattern``, sorted by path.

    Paths with a folder named in ``exclude`` are left out (the site's ``generated/`` snippets are parts of pages
    made by code, not pages), and so are the site's translations (``page.ko.md`` beside ``page.md``): the corpus is
    the English edition, which the English encoder reads. Raises ``ValueError`` naming ``folder`` when it does not
    exist or holds no non-empty matching file.
    """
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(f"folder: {root} is not a directory")
    docs = {}
    for p in sorted(root.glob(pattern)):
        rel = p.relative_to(root)
        if p.is_file() and not set(rel.parts[:-1]) & set(exclude) and not is_translation(p):
            text = p.read_text(encoding="utf-8", errors="replace")
            if text.strip():
                docs[rel.as_posix()] = text
    if not docs:
        raise ValueError(f"folder: no non-empty files matching {pattern!r} under {root} (empty corpus)")
    return docs


def chunk_corpus(docs: dict[str, str], size: int, overlap: int) -> list[Chunk]:
    """Every document's chunks, in path order. Raises ``ValueError`` naming ``docs`` when nothing is left."""
    chunks = [c for source, text in docs.items() for c in chunk_text(text, source, size, overlap)]
    if not chunks:
        raise ValueError("docs: the corpus produced no chunks (empty corpus)")
    return chunks
