"""Lesson 05 checks: called by the notebook's autograder cells, by tests/autograder/test_rag.py and by the reference
tests. Each takes the implementation under test and raises CheckFailed with a learner message.

Expectations are derived independently of the reference: chunk counts from the window arithmetic, top-k from
``faiss.IndexFlatIP`` (and, where cosines tie exactly or a vector is zero, from cosines worked by hand and one stable
sort), prompt budgets by counting the learner's own prompt, index bytes from files FAISS writes.
"""
from __future__ import annotations

import math
import os
import re
import tempfile

import numpy as np

from course.grading.contract import Check, Lesson, call, expect, expect_close, expect_shape
from part0_foundations.l05_rag.rag import Chunk, Hit, count_words, format_prompt, format_source

TEXT = (
    "Attention compares each query with every key. The keys and values of past tokens are cached, so the cache "
    "grows with the context. Grouped-query attention shares each key/value head between several query heads."
)


def _expected_windows(length, size, overlap):
    """(start, end) of every window, from the arithmetic: 1 window if the text fits, else 1 + ⌈(L − size)/step⌉."""
    if length == 0:
        return []
    step = size - overlap
    count = 1 if length <= size else 1 + math.ceil((length - size) / step)
    return [(i * step, min(i * step + size, length)) for i in range(count)]


def _check_chunks(chunks, text, source, size, overlap, what):
    expect(isinstance(chunks, list), f"{what}: return a list of Chunk, got {type(chunks).__name__}")
    want = _expected_windows(len(text), size, overlap)
    expect(len(chunks) == len(want),
           f"{what}: expected {len(want)} chunks for {len(text)} characters (size {size}, overlap {overlap}), "
           f"got {len(chunks)}")
    for i, (c, (start, end)) in enumerate(zip(chunks, want)):
        expect(hasattr(c, "start") and hasattr(c, "end") and hasattr(c, "text") and hasattr(c, "source"),
               f"{what}: chunk {i} must be a Chunk(source, start, end, text), got {c!r}")
        expect((c.start, c.end) == (start, end),
               f"{what}: chunk {i} should span [{start}, {end}) (start = i·(size − overlap)), got [{c.start}, {c.end})")
        expect(c.text == text[c.start:c.end], f"{what}: chunk {i}'s text must equal text[start:end] exactly")
        expect(c.source == source, f"{what}: chunk {i} must keep its source {source!r}, got {c.source!r}")


def check_chunk_offsets_exact(chunk_text):
    """Offsets are exact: text == document[start:end], windows start at i·(size − overlap), the last ends the text."""
    for size, overlap in ((50, 10), (64, 0), (40, 39), (1, 0), (300, 100)):
        chunks = call(chunk_text, TEXT, "doc.md", size, overlap, what=f"chunk_text(TEXT, 'doc.md', {size}, {overlap})")
        _check_chunks(chunks, TEXT, "doc.md", size, overlap, f"chunk_text(size={size}, overlap={overlap})")
        expect(chunks[-1].end == len(TEXT), f"size={size}, overlap={overlap}: the last chunk must end at len(text)")


def check_chunk_overlap_exact(chunk_text):
    """Neighbouring chunks share exactly ``overlap`` characters; together they cover the whole text."""
    for size, overlap in ((50, 10), (37, 12), (80, 40)):
        chunks = call(chunk_text, TEXT, "p.md", size, overlap, what=f"chunk_text(TEXT, 'p.md', {size}, {overlap})")
        expect(len(chunks) >= 2, f"chunk_text(size={size}): a {len(TEXT)}-character text needs several chunks")
        for i, (a, b) in enumerate(zip(chunks, chunks[1:])):
            shared = a.end - b.start
            expect(shared == overlap, f"chunks {i} and {i + 1} must share exactly {overlap} characters, share {shared}")
            expect(a.text[len(a.text) - overlap:] == b.text[:overlap] if overlap else True,
                   f"chunks {i} and {i + 1}: the end of one must be the start of the next")
        covered = "".join(c.text if i == 0 else c.text[overlap:] for i, c in enumerate(chunks))
        expect(covered == TEXT, f"chunk_text(size={size}, overlap={overlap}): the chunks must cover the text exactly once")


def check_chunk_edge_cases(chunk_text):
    """An empty text gives no chunks; a short text one chunk; a text of exactly ``size`` one chunk, not two."""
    got = call(chunk_text, "", "empty.md", 10, 2, what="chunk_text('', 'empty.md', 10, 2)")
    expect(isinstance(got, list) and len(got) == 0, f"an empty text must give no chunks ([]), got {got!r}")
    got = call(chunk_text, "short", "s.md", 10, 2, what="chunk_text('short', 's.md', 10, 2)")
    _check_chunks(got, "short", "s.md", 10, 2, "a text shorter than size")
    exact = "x" * 30
    got = call(chunk_text, exact, "e.md", 30, 5, what="chunk_text('x' * 30, 'e.md', 30, 5)")
    _check_chunks(got, exact, "e.md", 30, 5, "a text of exactly size characters")
    got = call(chunk_text, "y" * 31, "e.md", 30, 5, what="chunk_text('y' * 31, 'e.md', 30, 5)")
    _check_chunks(got, "y" * 31, "e.md", 30, 5, "a text one character longer than size")


# Hangul syllables are 3 bytes each in UTF-8: offsets counted in bytes, or text cut from the bytes, differ here.
MIXED = "KV 캐시는 문맥과 함께 자란다: the cache grows with the context, 문장마다 조금씩."


def check_chunk_any_length(chunk_text):
    """Every text length from 0 to 40 (a Korean and English text, offsets in characters) with every size from 1 to 6
    and every overlap below it gives exactly the windows of the arithmetic — a text no longer than the overlap is
    one window — and each chunk's text is text[start:end]."""
    for size in range(1, 7):
        for overlap in range(size):
            for length in range(41):
                text = MIXED[:length]
                chunks = call(chunk_text, text, "k.md", size, overlap,
                              what=f"chunk_text(a {length}-character text, 'k.md', {size}, {overlap})")
                what = f"a {length}-character text (size {size}, overlap {overlap})"
                expect(isinstance(chunks, list), f"{what}: return a list of Chunk, got {type(chunks).__name__}")
                got = [(getattr(c, "start", None), getattr(c, "end", None)) for c in chunks]
                want = _expected_windows(length, size, overlap)
                expect(got == want, f"{what}: expected the windows {want}, got {got}")
                for i, c in enumerate(chunks):
                    expect(getattr(c, "text", None) == text[c.start:c.end],
                           f"{what}: chunk {i} must be text[{c.start}:{c.end}] = {text[c.start:c.end]!r} "
                           f"(offsets count characters, not bytes), got {getattr(c, 'text', None)!r}")


def _faiss_top_k(queries, docs, k):
    import faiss

    def unit(x):
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    index = faiss.IndexFlatIP(docs.shape[1])
    index.add(unit(docs))
    return index.search(unit(np.atleast_2d(queries)), k)


def _expect_faiss_order(ids, queries, docs, k, what):
    """ids equal FAISS's wherever the order is unambiguous; inside a near-tie (cosines within 1e-5, where float32
    rounding may order either way) any id with the right cosine is accepted."""
    _, want = _faiss_top_k(queries, docs, k)
    q = np.atleast_2d(queries).astype(np.float64)
    d = docs.astype(np.float64)
    sims = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (d / np.linalg.norm(d, axis=1, keepdims=True)).T
    ids = np.asarray(ids)
    for r in range(len(q)):
        expect(len(set(ids[r].tolist())) == k, f"{what}: query {r} returned the same id twice")
        expect(bool(((ids[r] >= 0) & (ids[r] < len(docs))).all()), f"{what}: query {r} returned ids outside 0..{len(docs) - 1}")
        order = np.sort(sims[r])[::-1]
        for j in range(k):
            above = order[j - 1] - order[j] if j > 0 else np.inf
            below = order[j] - order[j + 1] if j + 1 < len(order) else np.inf
            if min(above, below) > 1e-5:
                expect(ids[r, j] == want[r, j], f"{what}: query {r}, position {j}: id {ids[r, j]}, FAISS says "
                       f"{want[r, j]} (normalize both sides, sort by decreasing cosine)")
            else:
                expect(abs(sims[r, ids[r, j]] - order[j]) < 1e-5, f"{what}: query {r}, position {j}: wrong id")


def check_topk_matches_faiss(cosine_top_k):
    """Same ids as faiss.IndexFlatIP on normalized vectors, same scores to 1e-5, best first, (n_queries, k) arrays."""
    rng = np.random.default_rng(5)
    docs = rng.standard_normal((200, 32)).astype(np.float32) * rng.uniform(0.5, 3, (200, 1)).astype(np.float32)
    queries = rng.standard_normal((7, 32)).astype(np.float32)
    for k in (1, 5, 200):
        res = call(cosine_top_k, queries, docs, k, what=f"cosine_top_k(queries, docs, k={k})")
        expect(isinstance(res, tuple) and len(res) == 2, "cosine_top_k must return (scores, ids)")
        scores, ids = res
        expect_shape(scores, (7, k), f"scores for k={k}")
        expect_shape(ids, (7, k), f"ids for k={k}")
        want_scores, _ = _faiss_top_k(queries, docs, k)
        _expect_faiss_order(ids, queries, docs, k, f"k={k}")
        expect_close(scores, want_scores, f"k={k}: cosine scores vs faiss", atol=1e-5)
    one = call(cosine_top_k, queries[0], docs, 3, what="cosine_top_k(one 1-D query, docs, 3)")
    expect_shape(one[1], (1, 3), "ids for a single 1-D query")
    _expect_faiss_order(one[1], queries[:1], docs, 3, "a 1-D query")


# Six directions worked by hand: doc 2 is doc 0 doubled and doc 4 is doc 3 tripled (equal cosines, exactly), doc 1
# is zero (cosine 0 with everything), doc 5 lies at 45° (cosine √½ with docs 0 and 3). TIE_DOCS repeats them 4 times:
# row i is SIX[i % 6].
SIX = np.array([[1, 0, 0], [0, 0, 0], [2, 0, 0], [0, 1, 0], [0, 3, 0], [1, 1, 0]], dtype=np.float32)
TIE_DOCS = np.tile(SIX, (4, 1))
TIE_QUERIES = np.array([[1, 0, 0], [0, 0, 0], [0, 2, 0], [-1, 0, 0]], dtype=np.float32)


def _tie_top_k(queries, docs, k):
    """The expected answer, a second way: float64 cosines (0 for a zero vector, as faiss.normalize_L2 leaves it) and
    one stable sort of every doc by decreasing cosine, so equal cosines keep the lower id first."""
    def unit(x):
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)

    sims = unit(queries.astype(np.float64)) @ unit(docs.astype(np.float64)).T
    ids = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sims, ids, axis=1), ids


def check_topk_zero_and_ties(cosine_top_k):
    """A zero vector (a query or a doc) has cosine 0 with everything, never NaN; equal cosines keep the lower id first;
    negative cosines rank below zero ones. On 24 docs of six directions repeated, for k = 1, 10 and 24."""
    for k in (1, 10, 24):
        res = call(cosine_top_k, TIE_QUERIES, TIE_DOCS, k, what=f"cosine_top_k(queries, 24 docs with ties, k={k})")
        expect(isinstance(res, tuple) and len(res) == 2, "cosine_top_k must return (scores, ids)")
        scores, ids = res
        expect_shape(scores, (4, k), f"scores for k={k}")
        expect_shape(ids, (4, k), f"ids for k={k}")
        expect(bool(np.isfinite(np.asarray(scores, dtype=np.float64)).all()),
               f"k={k}: scores must be numbers, got NaN: a zero vector has cosine 0 with everything (divide only by "
               f"norms above 0)")
        want_scores, want_ids = _tie_top_k(TIE_QUERIES, TIE_DOCS, k)
        for r in range(4):
            got = np.asarray(ids[r]).tolist()
            expect(got == want_ids[r].tolist(), f"k={k}, query {TIE_QUERIES[r].tolist()}: ids {got}, expected "
                   f"{want_ids[r].tolist()} (by decreasing cosine; equal cosines, the lower id first)")
        expect_close(scores, want_scores, f"k={k}: cosines worked by hand (1, √½, 0, −√½, −1)", atol=1e-6,
                     rtol=0)


def _hits(lengths, seed=0):
    rng = np.random.default_rng(seed)
    words = "cache attention token memory index vector page budget query head layer".split()
    hits, pos = [], 0
    for r, n in enumerate(lengths, 1):
        text = " ".join(rng.choice(words, n))
        hits.append(Hit(rank=r, score=float(1 - r / 100), chunk=Chunk(f"page{r}.md", pos, pos + len(text), text)))
        pos += len(text)
    return hits


def _cited_numbers(prompt):
    return [int(m) for m in re.findall(r"^\[(\d+)\] ", prompt, flags=re.M)]


def check_prompt_budget_never_exceeded(build_prompt):
    """For every budget, count_tokens(prompt) ≤ budget; a skipped chunk really did not fit; all fit when there is room."""
    q = "How big is the cache?"
    hits = _hits([40, 120, 15, 60, 5, 80])
    base = count_words(format_prompt(q, []))
    exact = count_words(format_prompt(q, [format_source(1, hits[0].chunk)]))  # the best hit fits to the last token
    for budget in sorted({base, base + 10, base + 30, exact, base + 70, base + 150, base + 250, base + 400}):
        res = call(build_prompt, q, hits, budget, count_words, what=f"build_prompt(q, hits, budget={budget})")
        expect(isinstance(res, tuple) and len(res) == 2, "build_prompt must return (prompt, cited_hits)")
        prompt, cited = res
        used = count_words(prompt)
        expect(used <= budget, f"budget={budget}: the prompt takes {used} tokens, over the budget")
        ranks = [h.rank for h in cited]
        expect(ranks == sorted(ranks) and set(ranks) <= {h.rank for h in hits},
               f"budget={budget}: the cited hits must be some of the given hits, in their order, got ranks {ranks}")
        # Greedy, best first, skipping what does not fit: each hit left out must not have fitted at its turn.
        blocks = []
        for h in hits:
            trial = blocks + [format_source(len(blocks) + 1, h.chunk)]
            fits = count_words(format_prompt(q, trial)) <= budget
            expect(fits == (h in cited), f"budget={budget}: hit of rank {h.rank} "
                   + ("fitted but was left out" if fits else "did not fit but was included"))
            if fits:
                blocks = trial
        expect(prompt == format_prompt(q, blocks),
               f"budget={budget}: build the prompt with format_prompt(question, blocks) and format_source(n, chunk)")
    prompt, cited = call(build_prompt, q, hits, 10_000, count_words, what="build_prompt(q, hits, budget=10000)")
    expect(len(cited) == len(hits), "with room for everything, every hit must be cited")


def check_prompt_citations_numbered(build_prompt):
    """Sources are numbered [1], [2], … in rank order, with their page and character offsets, each chunk whole."""
    q = "Which page explains the index?"
    hits = _hits([12, 30, 8], seed=1)
    prompt, cited = call(build_prompt, q, hits, 10_000, count_words, what="build_prompt(q, hits, 10000)")
    expect(_cited_numbers(prompt) == [1, 2, 3], f"sources must be numbered [1], [2], [3]; found {_cited_numbers(prompt)}")
    for n, h in enumerate(hits, 1):
        c = h.chunk
        expect(f"[{n}] {c.source} (chars {c.start}-{c.end})" in prompt,
               f"source [{n}] must name its page and offsets: '[{n}] {c.source} (chars {c.start}-{c.end})'")
        expect(c.text.strip() in prompt, f"source [{n}]: the chunk text must appear whole")
    expect(prompt.rstrip().endswith("Answer:") and f"Question: {q}" in prompt, "the question must come after the sources")
    # With a budget that drops the 30-word chunk, numbering stays consecutive: [1], [2].
    budget = count_words(format_prompt(q, [format_source(1, hits[0].chunk), format_source(2, hits[2].chunk)]))
    prompt, cited = call(build_prompt, q, hits, budget, count_words, what=f"build_prompt(q, hits, {budget})")
    expect([h.rank for h in cited] == [1, 3], f"budget={budget}: expected ranks 1 and 3 cited, got {[h.rank for h in cited]}")
    expect(_cited_numbers(prompt) == [1, 2], "numbers must be consecutive over the cited chunks: [1], [2]")


def count_quarters(text):
    """A token counter that does not add up across joins, as a real tokenizer need not: one token per 4 characters,
    rounded down (two pieces of 6 characters count 1 + 1, joined they count 3)."""
    return len(text) // 4


def check_prompt_counts_whole_prompt(build_prompt):
    """The prompt is counted whole with the count_tokens it is given — here one token per 4 characters, which does not
    add up across the joins — never over the budget, and each hit left out did not fit at its turn."""
    q = "How big is the cache?"
    hits = _hits([40, 120, 15, 60, 5, 80], seed=2)
    base = count_quarters(format_prompt(q, []))
    budgets = {base, base + 20, base + 60, base + 120, base + 250, base + 500, base + 900, base + 1500}
    for n in range(1, len(hits) + 1):  # each greedy prompt filled to the last token, and one token short of it
        blocks = []
        for h in hits[:n]:
            trial = blocks + [format_source(len(blocks) + 1, h.chunk)]
            if count_quarters(format_prompt(q, trial)) <= base + 1500:
                blocks = trial
        full = count_quarters(format_prompt(q, blocks))
        budgets |= {full, full - 1}
    for budget in sorted(b for b in budgets if b >= base):
        res = call(build_prompt, q, hits, budget, count_quarters,
                   what=f"build_prompt(q, hits, budget={budget}, count_tokens=count_quarters)")
        expect(isinstance(res, tuple) and len(res) == 2, "build_prompt must return (prompt, cited_hits)")
        prompt, cited = res
        used = count_quarters(prompt)
        expect(used <= budget, f"budget={budget} (one token per 4 characters): the prompt takes {used} tokens, over "
               f"the budget: count the whole prompt with count_tokens, not its pieces, nor its words")
        blocks = []
        for h in hits:
            trial = blocks + [format_source(len(blocks) + 1, h.chunk)]
            fits = count_quarters(format_prompt(q, trial)) <= budget
            expect(fits == (h in cited), f"budget={budget} (one token per 4 characters): hit of rank {h.rank} "
                   + ("fitted but was left out" if fits else "did not fit but was included"))
            if fits:
                blocks = trial
        expect(prompt == format_prompt(q, blocks), f"budget={budget} (one token per 4 characters): build the prompt "
               f"with format_prompt(question, blocks) and format_source(n, chunk)")


def check_index_bytes_formula(flat_index_bytes):
    """flat_index_bytes(n, d) equals the size of the file faiss.write_index writes for an IndexFlatIP."""
    import faiss

    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "flat.faiss")
        for n, d in ((1, 8), (100, 32), (1000, 384), (0, 16)):
            index = faiss.IndexFlatIP(d)
            if n:
                index.add(rng.standard_normal((n, d)).astype(np.float32))
            faiss.write_index(index, path)
            want = os.path.getsize(path)
            got = call(flat_index_bytes, n, d, what=f"flat_index_bytes({n}, {d})")
            expect(isinstance(got, (int, np.integer)), f"flat_index_bytes must return an int, got {type(got).__name__}")
            expect(got == want, f"flat_index_bytes({n}, {d}) = {got}, but FAISS writes {want} bytes")


LESSON = Lesson(
    package="part0_foundations.l05_rag",
    reference=("part0_foundations.l05_rag.rag", "part0_foundations.l05_rag.index"),
    checks=(
        Check("chunk_offsets_exact", "chunk_text", check_chunk_offsets_exact, 1),
        Check("chunk_overlap_exact", "chunk_text", check_chunk_overlap_exact, 1),
        Check("chunk_edge_cases", "chunk_text", check_chunk_edge_cases, 1),
        Check("chunk_any_length", "chunk_text", check_chunk_any_length, 1, hidden=True),
        Check("topk_matches_faiss", "cosine_top_k", check_topk_matches_faiss, 2),
        Check("topk_zero_and_ties", "cosine_top_k", check_topk_zero_and_ties, 1, hidden=True),
        Check("prompt_budget_never_exceeded", "build_prompt", check_prompt_budget_never_exceeded, 1),
        Check("prompt_citations_numbered", "build_prompt", check_prompt_citations_numbered, 1),
        Check("prompt_counts_whole_prompt", "build_prompt", check_prompt_counts_whole_prompt, 1, hidden=True),
        Check("index_bytes_formula", "flat_index_bytes", check_index_bytes_formula, 1),
    ),
)
"""The lesson contract: the notebook's test cells, tests/autograder and the checks' own tests all read it."""
ALL = LESSON.table()
