"""Lesson 05's grades mean the learner did the work: each degenerate answer (zeros, ones, the input echoed, uniform,
random, a constant, the identity, noise around the right answer) earns 0 points in total."""
import numpy as np
import pytest

from part0_foundations.l05_rag import checks as rag_checks
from part0_foundations.l05_rag.index import flat_index_bytes
from part0_foundations.l05_rag.rag import Chunk, cosine_top_k, format_prompt, format_source
from tests.support.rules import DEGENERATE_KINDS as KINDS, lesson_points


def rag_degenerate(kind):
    rng = np.random.default_rng(9)

    def chunk_text(text, source, size, overlap):
        if kind == "zeros":
            return []
        if kind in ("ones", "identity"):          # the whole text, one chunk
            return [Chunk(source, 0, len(text), text)] if text else []
        if kind == "echo":
            return [text]
        if kind == "constant":
            return [Chunk(source, 0, 1, text[:1])]
        step = size if kind == "uniform" else size - overlap + 1 if kind == "noise" else int(rng.integers(1, size + 1))
        return [Chunk(source, s, min(s + size, len(text)), text[s:s + size]) for s in range(0, len(text), step)]

    def top_k(queries, docs, k):
        n = np.atleast_2d(queries).shape[0]
        ids = np.tile(np.arange(k), (n, 1))
        if kind == "random":
            ids = np.stack([rng.permutation(len(docs))[:k] for _ in range(n)])
        if kind in ("echo", "identity", "noise"):   # the right ids, scores not the cosines
            _, ids = cosine_top_k(queries, docs, k)
        fill = {"zeros": 0.0, "ones": 1.0, "uniform": 1.0 / len(docs), "constant": 0.37}.get(kind)
        scores = np.full(ids.shape, fill if fill is not None else 0.5, dtype=np.float32)
        if kind == "noise":
            scores = cosine_top_k(queries, docs, k)[0] + 1e-3
        return scores, ids

    def build_prompt(question, hits, budget, count_tokens=None):
        if kind == "zeros":
            return "", []
        if kind in ("echo", "ones"):
            return question, list(hits)
        if kind in ("uniform", "identity"):      # every hit, whatever the budget
            return format_prompt(question, [format_source(i, h.chunk) for i, h in enumerate(hits, 1)]), list(hits)
        if kind == "noise":                       # the best hit only
            return format_prompt(question, [format_source(1, hits[0].chunk)]), hits[:1]
        return "Answer:", []

    def index_bytes(n, d):
        return {"zeros": 0, "ones": 1, "echo": n, "uniform": 4 * d, "random": int(rng.integers(0, 10**6)),
                "constant": 4096, "identity": 4 * n * d}.get(kind, flat_index_bytes(n, d) + 1)

    return {"chunk_text": chunk_text, "cosine_top_k": top_k, "build_prompt": build_prompt,
            "flat_index_bytes": index_bytes}


@pytest.mark.parametrize("kind", KINDS)
def test_rag_degenerate_answers_earn_nothing(kind):
    earned, failed = lesson_points(rag_checks.LESSON, rag_degenerate(kind))
    assert earned == 0, [c.id for c in rag_checks.LESSON.checks if c.id not in failed]
