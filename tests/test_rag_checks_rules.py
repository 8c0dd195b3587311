"""Every rule of every lesson-05 check, with the learner's message it gives, word for word.

tests/test_rag_checks.py shows each check rejecting a plausible mistake; here the reference passes every check,
each rule is broken alone by a variant of the reference and the message is pinned whole (or, where it carries a
count of tokens the test does not restate, by its exact form), each ``call()`` label is pinned by an implementation
that raises there (``"<label> raised RuntimeError: boom"``), and each choice of input is held by the mistake it is
there to catch (a text of exactly ``size`` characters, k = 1, a budget the best hit fills to the last token, a
near-tie of cosines). Figures are worked by hand: TEXT has 209 characters; the prompt template and the question
"How big is the cache?" take 38 words (31 in the header, 7 in "Question: … Answer:"); a source block adds 4 words
("[n] page.md (chars a-b)") to its chunk's.
Plain functions without arguments, so that ``tools/mutation.py --verify`` can run them."""
import re

import numpy as np
import pytest

from course.grading import CheckFailed
from part0_foundations.l05_rag import checks
from part0_foundations.l05_rag.index import flat_index_bytes
from part0_foundations.l05_rag.rag import (Chunk, build_prompt, chunk_text, cosine_top_k, count_words, format_prompt,
                                           format_source)

BOOM = "raised RuntimeError: boom"


def message(check, impl) -> str:
    with pytest.raises(CheckFailed) as err:
        check(impl)
    return str(err.value)


def boom_when(ref, when):
    """``ref`` raising RuntimeError('boom') on the calls whose arguments satisfy ``when(*args)``."""
    def f(*args):
        if when(*args):
            raise RuntimeError("boom")
        return ref(*args)
    return f


REFERENCE = {"chunk_text": chunk_text, "cosine_top_k": cosine_top_k, "build_prompt": build_prompt,
             "flat_index_bytes": flat_index_bytes}


def test_the_reference_passes_every_check():
    for c in checks.LESSON.checks:
        c.fn(REFERENCE[c.name])


# --- chunk_text --------------------------------------------------------------------------------------------------------
def _windows(text, source, size, overlap, step=None, stop_at_end=True, make=Chunk):
    out, start, step = [], 0, step or size - overlap
    while start < len(text):
        end = min(start + size, len(text))
        out.append(make(source, start, end, text[start:end]))
        if stop_at_end and end == len(text):
            break
        start += step
    return out


class Bare:
    """A chunk without its source."""
    def __init__(self, source, start, end, text):
        self.start, self.end, self.text = start, end, text

    def __repr__(self):
        return f"Bare({self.start}, {self.end})"


def test_chunk_offsets_messages():
    c = checks.check_chunk_offsets_exact
    assert message(c, lambda t, s, size, o: tuple(chunk_text(t, s, size, o))) == (
        "chunk_text(size=50, overlap=10): return a list of Chunk, got tuple")
    # windows 0-50, 40-90, 80-130, 120-170, 160-209; one more starting at 200 lies inside the last
    assert message(c, lambda t, s, size, o: _windows(t, s, size, o, stop_at_end=False)) == (
        "chunk_text(size=50, overlap=10): expected 5 chunks for 209 characters (size 50, overlap 10), got 6")
    assert message(c, lambda t, s, size, o: _windows(t, s, size, o, make=Bare)) == (
        "chunk_text(size=50, overlap=10): chunk 0 must be a Chunk(source, start, end, text), got Bare(0, 50)")
    # no overlap: 0-50, 50-100, ... also 5 windows, the second one 10 characters late
    assert message(c, lambda t, s, size, o: _windows(t, s, size, o, step=size)) == (
        "chunk_text(size=50, overlap=10): chunk 1 should span [40, 90) (start = i·(size − overlap)), got [50, 100)")
    strip = lambda t, s, size, o: [Chunk(x.source, x.start, x.end, x.text.strip()) for x in chunk_text(t, s, size, o)]
    assert message(c, strip) == "chunk_text(size=50, overlap=10): chunk 0's text must equal text[start:end] exactly"
    upper = lambda t, s, size, o: [Chunk(x.source.upper(), x.start, x.end, x.text) for x in chunk_text(t, s, size, o)]
    assert message(c, upper) == "chunk_text(size=50, overlap=10): chunk 0 must keep its source 'doc.md', got 'DOC.MD'"


def test_chunk_offsets_pairs():
    c = checks.check_chunk_offsets_exact
    # overlap 0 (64, 0): a chunker that always keeps one character of overlap is right wherever overlap > 0
    keeps_one = lambda t, s, size, o: _windows(t, s, size, o, step=size - max(o, 1))
    assert message(c, keeps_one) == (
        "chunk_text(size=64, overlap=0): chunk 1 should span [64, 128) (start = i·(size − overlap)), got [63, 127)")
    # size 1 (1, 0): one chunk per character; a chunker that needs two characters per window fails there only
    two_or_more = lambda t, s, size, o: _windows(t, s, max(size, 2), o)
    assert message(c, two_or_more) == (
        "chunk_text(size=1, overlap=0): expected 209 chunks for 209 characters (size 1, overlap 0), got 105")
    # overlap = size − 1 (40, 39): a step of 1; a chunker that steps at least 2 fails there only
    step_two = lambda t, s, size, o: _windows(t, s, size, o, step=max(size - o, 2))
    assert message(c, step_two).startswith(
        "chunk_text(size=40, overlap=39): expected 170 chunks for 209 characters (size 40, overlap 39), got ")
    # a size larger than the text (300, 100): one chunk; a chunker that always cuts at least two fails there only
    two_at_least = lambda t, s, size, o: chunk_text(t, s, min(size, len(t) - 1), min(o, len(t) - 2))
    assert message(c, two_at_least) == (
        "chunk_text(size=300, overlap=100): expected 1 chunks for 209 characters (size 300, overlap 100), got 2")


def test_chunk_overlap_messages():
    c = checks.check_chunk_overlap_exact
    assert message(c, lambda t, s, size, o: [Chunk(s, 0, len(t), t)]) == (
        "chunk_text(size=50): a 209-character text needs several chunks")
    assert message(c, lambda t, s, size, o: _windows(t, s, size, o, step=size)) == (
        "chunks 0 and 1 must share exactly 10 characters, share 0")
    # right offsets; every second chunk's text upper-cased: the shared characters differ
    def alternate(t, s, size, o):
        return [Chunk(x.source, x.start, x.end, x.text.upper() if i % 2 else x.text)
                for i, x in enumerate(chunk_text(t, s, size, o))]
    assert message(c, alternate) == "chunks 0 and 1: the end of one must be the start of the next"
    upper = lambda t, s, size, o: [Chunk(x.source, x.start, x.end, x.text.upper()) for x in chunk_text(t, s, size, o)]
    assert message(c, upper) == "chunk_text(size=50, overlap=10): the chunks must cover the text exactly once"


def test_chunk_edge_messages():
    c = checks.check_chunk_edge_cases
    assert message(c, lambda t, s, size, o: [Chunk(s, 0, 0, "")] if not t else chunk_text(t, s, size, o)) == (
        "an empty text must give no chunks ([]), got [Chunk(source='empty.md', start=0, end=0, text='')]")
    assert message(c, lambda t, s, size, o: None if not t else chunk_text(t, s, size, o)) == (
        "an empty text must give no chunks ([]), got None")
    short = lambda t, s, size, o: chunk_text(t, s, size, o) if not t or len(t) >= size else [Chunk(s, 0, size, t)]
    assert message(c, short) == (
        "a text shorter than size: chunk 0 should span [0, 5) (start = i·(size − overlap)), got [0, 10)")

    # "<" for "<=": a text of exactly size characters is cut in two (0-30, 25-30)
    def one_chunk_only_if_shorter(t, s, size, o):
        if len(t) < size:
            return chunk_text(t, s, size, o)
        return _windows(t, s, size, o, stop_at_end=False) if len(t) == size else chunk_text(t, s, size, o)
    assert message(c, one_chunk_only_if_shorter) == (
        "a text of exactly size characters: expected 1 chunks for 30 characters (size 30, overlap 5), got 2")
    # ⌊⌋ for ⌈⌉ in the count: 1 + ⌊(31 − 30) / 25⌋ = 1 window, the last character left out
    floor_count = lambda t, s, size, o: chunk_text(t, s, size, o)[:1 + max(len(t) - size, 0) // (size - o)]
    assert message(c, floor_count) == (
        "a text one character longer than size: expected 2 chunks for 31 characters (size 30, overlap 5), got 1")
    # the source is kept on these texts too
    upper = lambda t, s, size, o: [Chunk(x.source.upper(), x.start, x.end, x.text) for x in chunk_text(t, s, size, o)]
    assert message(c, upper) == "a text shorter than size: chunk 0 must keep its source 's.md', got 'S.MD'"
    later = lambda t, s, size, o: chunk_text(t, s, size, o) if len(t) != 30 else [
        Chunk(s.upper(), 0, 30, t)]
    assert message(c, later) == (
        "a text of exactly size characters: chunk 0 must keep its source 'e.md', got 'E.MD'")
    last = lambda t, s, size, o: chunk_text(t, s, size, o) if len(t) != 31 else [
        Chunk(x.source.upper(), x.start, x.end, x.text) for x in chunk_text(t, s, size, o)]
    assert message(c, last) == (
        "a text one character longer than size: chunk 0 must keep its source 'e.md', got 'E.MD'")
    # the exact-size text is 30 lower-case x's, the longer one 31 y's: a chunker that upper-cases fails on each
    upper_text = lambda t, s, size, o: [Chunk(x.source, x.start, x.end, x.text.upper()) for x in chunk_text(t, s, size, o)]
    assert message(c, upper_text) == "a text shorter than size: chunk 0's text must equal text[start:end] exactly"


def test_chunk_labels():
    for check, label, when in (
            (checks.check_chunk_offsets_exact, "chunk_text(TEXT, 'doc.md', 50, 10)", lambda t, s, z, o: True),
            (checks.check_chunk_overlap_exact, "chunk_text(TEXT, 'p.md', 50, 10)", lambda t, s, z, o: True),
            (checks.check_chunk_edge_cases, "chunk_text('', 'empty.md', 10, 2)", lambda t, s, z, o: t == ""),
            (checks.check_chunk_edge_cases, "chunk_text('short', 's.md', 10, 2)", lambda t, s, z, o: t == "short"),
            (checks.check_chunk_edge_cases, "chunk_text('x' * 30, 'e.md', 30, 5)", lambda t, s, z, o: t == "x" * 30),
            (checks.check_chunk_edge_cases, "chunk_text('y' * 31, 'e.md', 30, 5)", lambda t, s, z, o: t == "y" * 31),
            (checks.check_chunk_errors, "chunk_text(TEXT, 'd.md', 50, 10)", lambda t, s, z, o: True)):
        assert message(check, boom_when(chunk_text, when)) == f"{label} {BOOM}"
    # the source each call names is the one it passes
    seen = []
    checks.check_chunk_edge_cases(lambda t, s, size, o: seen.append((t, s, size, o)) or chunk_text(t, s, size, o))
    assert seen == [("", "empty.md", 10, 2), ("short", "s.md", 10, 2), ("x" * 30, "e.md", 30, 5),
                    ("y" * 31, "e.md", 30, 5)]
    for check, src in ((checks.check_chunk_offsets_exact, "doc.md"), (checks.check_chunk_overlap_exact, "p.md")):
        seen.clear()
        check(lambda t, s, size, o: seen.append((t, s)) or chunk_text(t, s, size, o))
        assert seen and all(x == (checks.TEXT, src) for x in seen)


def test_chunk_errors_messages():
    c = checks.check_chunk_errors
    assert message(c, lambda *a: []) == "chunk_text must work on valid input before refusing bad input"

    def accepting(bad):
        """The reference, but accepting the sizes ``bad(size, overlap)`` picks (cutting with overlap size − 1)."""
        def f(t, s, size, o):
            if bad(size, o):
                return chunk_text(t, s, max(size, 1), min(max(o, 0), max(size, 1) - 1))
            return chunk_text(t, s, size, o)
        return f
    assert message(c, accepting(lambda z, o: o == z)) == (
        "overlap equal to size: expected ValueError naming 'overlap', but nothing was raised")
    assert message(c, accepting(lambda z, o: o < 0)) == (
        "a negative overlap: expected ValueError naming 'overlap', but nothing was raised")
    assert message(c, accepting(lambda z, o: z < 1)) == "size 0: expected ValueError naming 'size', but nothing was raised"

    def unnamed(t, s, size, o):
        try:
            return chunk_text(t, s, size, o)
        except ValueError:
            raise ValueError("bad value") from None
    assert message(c, unnamed) == "overlap equal to size: raised ValueError but the message does not name 'overlap': bad value"

    def names_only_size(t, s, size, o):   # every refusal names size, none names overlap
        try:
            return chunk_text(t, s, size, o)
        except ValueError:
            raise ValueError(f"bad size {size}") from None
    assert message(c, names_only_size).startswith("overlap equal to size: raised ValueError but the message does not "
                                                  "name 'overlap'")

    def negative_overlap_unnamed(t, s, size, o):
        try:
            return chunk_text(t, s, size, o)
        except ValueError:
            if o < 0:
                raise ValueError("bad value") from None
            raise
    assert message(c, negative_overlap_unnamed) == (
        "a negative overlap: raised ValueError but the message does not name 'overlap': bad value")

    def size_unnamed(t, s, size, o):
        try:
            return chunk_text(t, s, size, o)
        except ValueError:
            if size < 1:
                raise ValueError("bad value") from None
            raise
    assert message(c, size_unnamed) == "size 0: raised ValueError but the message does not name 'size': bad value"

    def type_error(t, s, size, o):
        if o == size or o < 0 or size < 1:
            raise TypeError("sizes")
        return chunk_text(t, s, size, o)
    assert message(c, type_error) == "overlap equal to size: expected ValueError naming 'overlap', got TypeError: sizes"


def test_chunk_errors_refuse_before_reading_the_text():
    # the bad sizes come with a real text and source: a chunker that returns [] for an empty text first is right
    def empty_first(t, s, size, o):
        if not t or not isinstance(s, str):
            return []
        return chunk_text(t, s, size, o)
    checks.check_chunk_errors(empty_first)
    checks.check_chunk_offsets_exact(empty_first)
    # overlap equal to size is refused, and overlap 11 > size 10 is not what is asked (a chunker refusing only
    # overlap > size is wrong)
    def only_above(t, s, size, o):
        if o == size:
            return chunk_text(t, s, size, o - 1)
        return chunk_text(t, s, size, o)
    assert message(checks.check_chunk_errors, only_above) == (
        "overlap equal to size: expected ValueError naming 'overlap', but nothing was raised")
    # size 0 with overlap 0, not overlap 1 (which would be refused for the overlap alone)
    def size_zero_ok(t, s, size, o):
        if size == 0 and o == 0:
            return []
        return chunk_text(t, s, size, o)
    assert message(checks.check_chunk_errors, size_zero_ok) == (
        "size 0: expected ValueError naming 'size', but nothing was raised")
    # -1, not a smaller negative
    def refuses_below_minus_one(t, s, size, o):
        if o == -1:
            return chunk_text(t, s, size, 0)
        return chunk_text(t, s, size, o)
    assert message(checks.check_chunk_errors, refuses_below_minus_one) == (
        "a negative overlap: expected ValueError naming 'overlap', but nothing was raised")


# --- cosine_top_k ------------------------------------------------------------------------------------------------------
def _faiss(queries, docs, k):
    import faiss
    unit = lambda x: (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    index = faiss.IndexFlatIP(docs.shape[1])
    index.add(unit(docs))
    return index.search(unit(np.atleast_2d(queries)), k)


def _data():
    rng = np.random.default_rng(5)
    docs = rng.standard_normal((200, 32)).astype(np.float32) * rng.uniform(0.5, 3, (200, 1)).astype(np.float32)
    return rng.standard_normal((7, 32)).astype(np.float32), docs


def _cosines(queries, docs):
    q, d = np.atleast_2d(queries).astype(np.float64), docs.astype(np.float64)
    return (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (d / np.linalg.norm(d, axis=1, keepdims=True)).T


def _swap_where(pick):
    """The reference with, in each query's full ranking, the neighbours (j, j + 1) that ``pick(gap)`` selects by
    their float64 cosine gap swapped; only when k is the number of docs."""
    def f(queries, docs, k):
        scores, ids = cosine_top_k(queries, docs, k)
        if k != len(docs):
            return scores, ids
        sims = _cosines(queries, docs)
        ids = ids.copy()
        for r in range(len(ids)):
            for j in range(k - 1):
                if pick(sims[r, ids[r, j]] - sims[r, ids[r, j + 1]]):
                    ids[r, j], ids[r, j + 1] = ids[r, j + 1], ids[r, j]
        return scores, ids
    return f


def test_topk_messages():
    c = checks.check_topk_matches_faiss
    assert message(c, lambda q, d, k: cosine_top_k(q, d, k)[1]) == "cosine_top_k must return (scores, ids)"
    assert message(c, lambda q, d, k: list(cosine_top_k(q, d, k))) == "cosine_top_k must return (scores, ids)"
    assert message(c, lambda q, d, k: tuple(x.squeeze() for x in cosine_top_k(q, d, k))) == (
        "scores for k=1: expected shape (7, 1), got (7,)")
    ids_only = lambda q, d, k: (cosine_top_k(q, d, k)[0], cosine_top_k(q, d, k)[1][:, :max(k - 1, 1)])
    assert message(c, ids_only) == "ids for k=5: expected shape (7, 5), got (7, 4)"
    # scores 5e-5 off: 5 × the allowed 1e-5
    assert message(c, lambda q, d, k: (cosine_top_k(q, d, k)[0] + 5e-5, cosine_top_k(q, d, k)[1])).startswith(
        "k=1: cosine scores vs faiss: differs from the reference by up to 5e-05")
    # the same id twice, an id past the last doc, an id out of order
    dup = lambda q, d, k: (lambda s, i: (s, np.concatenate([i[:, :1], i[:, :-1]], 1) if k > 1 else i))(*cosine_top_k(q, d, k))
    assert message(c, dup) == "k=5: query 0 returned the same id twice"
    past = lambda q, d, k: (lambda s, i: (s, np.where(np.arange(k) == k - 1, len(d), i) if k > 1 else i))(*cosine_top_k(q, d, k))
    assert message(c, past) == "k=5: query 0 returned ids outside 0..199"
    neg = lambda q, d, k: (lambda s, i: (s, np.where(np.arange(k) == k - 1, -1, i) if k > 1 else i))(*cosine_top_k(q, d, k))
    assert message(c, neg) == "k=5: query 0 returned ids outside 0..199"
    _, want = _faiss(*_data(), 5)
    rev = lambda q, d, k: (lambda s, i: (s, i[:, ::-1].copy()))(*cosine_top_k(q, d, k))
    assert message(c, lambda q, d, k: rev(q, d, k) if k == 5 else cosine_top_k(q, d, k)) == (
        f"k=5: query 0, position 0: id {want[0, 4]}, FAISS says {want[0, 0]} (normalize both sides, sort by "
        f"decreasing cosine)")
    # a single 1-D query answered as a flat row
    flat = lambda q, d, k: tuple(x[0] for x in cosine_top_k(q, d, k)) if np.ndim(q) == 1 else cosine_top_k(q, d, k)
    assert message(c, flat) == "ids for a single 1-D query: expected shape (1, 3), got (3,)"
    wrong_one = lambda q, d, k: (lambda s, i: (s, i[:, ::-1].copy()))(*cosine_top_k(q, d, k)) if np.ndim(q) == 1 \
        else cosine_top_k(q, d, k)
    _, want1 = _faiss(_data()[0][:1], _data()[1], 3)
    assert message(c, wrong_one) == (f"a 1-D query: query 0, position 0: id {want1[0, 2]}, FAISS says {want1[0, 0]} "
                                     f"(normalize both sides, sort by decreasing cosine)")


def test_topk_near_ties():
    c = checks.check_topk_matches_faiss
    # cosines within 1e-5 of each other (query 2 has three such neighbours at k = 200): either order passes
    c(_swap_where(lambda gap: gap < 1e-5))
    # 1e-5 to 2e-5 apart is not a tie (queries 4 and 5 have such neighbours): swapping them is refused
    msg = message(c, _swap_where(lambda gap: 1e-5 < gap < 2e-5))
    assert re.fullmatch(r"k=200: query 4, position 76: id \d+, FAISS says \d+ \(normalize both sides, sort by "
                        r"decreasing cosine\)", msg), msg

    # inside a tie (query 2, positions 59 and 60), an id whose cosine is not the tied one is refused: the worst doc
    # put at position 59
    def worst_in_tie(queries, docs, k):
        scores, ids = cosine_top_k(queries, docs, k)
        if k != len(docs):
            return scores, ids
        ids = ids.copy()
        ids[2, 59], ids[2, -1] = ids[2, -1], ids[2, 59]
        return scores, ids
    assert message(c, worst_in_tie) == "k=200: query 2, position 59: wrong id"


def test_topk_labels_and_inputs():
    c = checks.check_topk_matches_faiss
    for k in (1, 5, 200):
        assert message(c, boom_when(cosine_top_k, lambda q, d, kk, k=k: kk == k and np.ndim(q) == 2)) == (
            f"cosine_top_k(queries, docs, k={k}) {BOOM}")
    assert message(c, boom_when(cosine_top_k, lambda q, d, k: np.ndim(q) == 1)) == (
        f"cosine_top_k(one 1-D query, docs, 3) {BOOM}")
    e = checks.check_topk_errors
    assert message(e, boom_when(cosine_top_k, lambda q, d, k: True)) == f"cosine_top_k(q, docs, k=10) {BOOM}"
    # the same inputs every run, whatever numpy's global generator holds
    runs = []
    for seed in (1, 2):
        np.random.seed(seed)
        seen = []
        c(lambda q, d, k: seen.append((np.array(q), np.array(d))) or cosine_top_k(q, d, k))
        e(lambda q, d, k: seen.append((np.array(q), np.array(d))) or cosine_top_k(q, d, k))
        runs.append(seen)
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(*runs))


def test_topk_errors_messages():
    c = checks.check_topk_errors
    assert message(c, lambda q, d, k: cosine_top_k(q, d, min(k, 9))) == (
        "ids for k = n_docs: expected shape (2, 10), got (2, 9)")

    def accepting(bad):
        def f(q, d, k):
            if bad(q, d, k):
                return cosine_top_k(np.atleast_2d(q)[:, :d.shape[1]] if q.shape[-1] >= d.shape[1] else
                                    np.pad(q, ((0, 0), (0, d.shape[1] - q.shape[-1]))), d, min(max(k, 1), len(d)))
            return cosine_top_k(q, d, k)
        return f
    assert message(c, accepting(lambda q, d, k: k > len(d))) == (
        "k larger than the number of docs: expected ValueError naming 'k', but nothing was raised")
    assert message(c, accepting(lambda q, d, k: k == len(d) + 1)) == (    # k = 11, not 12
        "k larger than the number of docs: expected ValueError naming 'k', but nothing was raised")
    assert message(c, accepting(lambda q, d, k: k < 1)) == "k = 0: expected ValueError naming 'k', but nothing was raised"
    assert message(c, accepting(lambda q, d, k: q.shape[-1] != d.shape[1])) == (
        "queries of the wrong width: expected ValueError naming 'queries', but nothing was raised")
    # queries of width 5, not 6, and k = 3: a top-k that refuses widths 6 only, or checks k before the width
    assert message(c, accepting(lambda q, d, k: q.shape[-1] == 5)) == (
        "queries of the wrong width: expected ValueError naming 'queries', but nothing was raised")

    def unnamed(which):
        def f(q, d, k):
            try:
                return cosine_top_k(q, d, k)
            except ValueError as err:
                if which(q, d, k):
                    raise ValueError("bad input") from None
                raise err
        return f
    assert message(c, unnamed(lambda q, d, k: k > len(d))) == (
        "k larger than the number of docs: raised ValueError but the message does not name 'k': bad input")
    assert message(c, unnamed(lambda q, d, k: k < 1)) == "k = 0: raised ValueError but the message does not name 'k': bad input"
    assert message(c, unnamed(lambda q, d, k: q.shape[-1] != d.shape[1])) == (
        "queries of the wrong width: raised ValueError but the message does not name 'queries': bad input")


# --- build_prompt ------------------------------------------------------------------------------------------------------
Q = "How big is the cache?"
BUDGET = re.compile(r"budget=\d+: ")


def _greedy(question, hits, budget, count_tokens=count_words, fits=lambda used, budget: used <= budget,
            source=format_source, order=lambda hits: hits):
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty string")
    if count_tokens(format_prompt(question, [])) > budget:
        raise ValueError("budget: not even the question fits")
    blocks, cited = [], []
    for h in order(hits):
        trial = blocks + [source(len(blocks) + 1, h.chunk)]
        if fits(count_tokens(format_prompt(question, trial)), budget):
            blocks, cited = trial, cited + [h]
    return format_prompt(question, blocks), cited


def test_prompt_budget_messages():
    c = checks.check_prompt_budget_never_exceeded
    assert message(c, lambda *a: build_prompt(*a)[0]) == "build_prompt must return (prompt, cited_hits)"
    assert message(c, lambda *a: list(build_prompt(*a))) == "build_prompt must return (prompt, cited_hits)"

    def body_only(question, hits, budget, count_tokens=count_words):   # budgets the chunk texts alone
        blocks, cited, used = [], [], 0
        for h in hits:
            if used + count_tokens(h.chunk.text) <= budget:
                blocks, cited, used = blocks + [format_source(len(blocks) + 1, h.chunk)], cited + [h], \
                    used + count_tokens(h.chunk.text)
        return format_prompt(question, blocks), cited
    assert re.fullmatch(r"budget=38: the prompt takes \d+ tokens, over the budget", message(c, body_only))
    reversed_cited = lambda *a: (lambda p, c_: (p, c_[::-1]))(*build_prompt(*a))
    assert re.fullmatch(r"budget=\d+: the cited hits must be some of the given hits, in their order, got ranks "
                        r"\[\d+, \d+(, \d+)*\]", message(c, reversed_cited))
    # stops at the first hit that does not fit: at budget 48 (38 + 10) only rank 5 (5 words + 4) fits
    stops = lambda q, hits, budget, ct=count_words: _greedy(q, hits, budget, order=lambda hs: hs[:1]) if \
        budget < 38 + 70 else _greedy(q, hits, budget)
    assert message(c, stops) == "budget=48: hit of rank 5 fitted but was left out"
    # strict "<": the best hit fills budget 82 (38 + 4 + 40) to the last token and is left out
    assert message(c, lambda *a: _greedy(*a, fits=lambda used, budget: used < budget)) == (
        "budget=82: hit of rank 1 fitted but was left out")
    # sources without their page and offsets once the budget passes 100 tokens: 3 words fewer each, so at budget
    # 108 rank 5 gets in after ranks 1 and 3 (38 + 41 + 16 + 6 = 101), where with whole blocks it does not (110)
    compact = lambda n, ch: f"[{n}]\n{ch.text.strip()}\n\n"
    shorter = lambda q, hits, budget, ct=count_words: _greedy(q, hits, budget,
                                                             source=compact if budget > 100 else format_source)
    assert message(c, shorter) == "budget=108: hit of rank 5 did not fit but was included"
    # the same words in another order: "(1)" for "[1]"
    paren = lambda n, ch: format_source(n, ch).replace(f"[{n}]", f"({n})", 1)
    assert message(c, lambda *a: _greedy(*a, source=paren)) == (
        "budget=48: build the prompt with format_prompt(question, blocks) and format_source(n, chunk)")

    def caps_huge(question, hits, budget, count_tokens=count_words):   # a budget past 5,000 read as "no retrieval"
        return (format_prompt(question, []), []) if budget > 5000 else build_prompt(question, hits, budget, count_tokens)
    assert message(c, caps_huge) == "with room for everything, every hit must be cited"


def test_prompt_budget_inputs():
    c = checks.check_prompt_budget_never_exceeded
    # hits best first by score too: a builder that orders them by score is right
    c(lambda *a: _greedy(*a, order=lambda hs: sorted(hs, key=lambda h: -h.score)))
    checks.check_prompt_citations_numbered(lambda *a: _greedy(*a, order=lambda hs: sorted(hs, key=lambda h: -h.score)))
    # the question, the hits and count_words are passed; the same hits every run
    seen = []
    c(lambda q, hits, budget, count_tokens: seen.append((q, hits, budget, count_tokens)) or build_prompt(
        q, hits, budget, count_tokens))
    assert {x[0] for x in seen} == {Q} and all(x[3] is count_words for x in seen)
    assert [len(h.chunk.text.split()) for h in seen[0][1]] == [40, 120, 15, 60, 5, 80]
    assert sorted({x[2] for x in seen}) == [38, 48, 68, 82, 108, 188, 288, 438, 10_000]
    np.random.seed(3)
    again = []
    c(lambda q, hits, budget, count_tokens: again.append(hits) or build_prompt(q, hits, budget, count_tokens))
    assert again[0] == seen[0][1]


def test_prompt_labels():
    c = checks.check_prompt_budget_never_exceeded
    assert message(c, boom_when(build_prompt, lambda q, h, b, ct: b == 38)) == f"build_prompt(q, hits, budget=38) {BOOM}"
    assert message(c, boom_when(build_prompt, lambda q, h, b, ct: b == 10_000)) == (
        f"build_prompt(q, hits, budget=10000) {BOOM}")
    n = checks.check_prompt_citations_numbered
    assert message(n, boom_when(build_prompt, lambda q, h, b, ct: b == 10_000)) == f"build_prompt(q, hits, 10000) {BOOM}"
    assert re.fullmatch(rf"build_prompt\(q, hits, \d+\) {BOOM}",
                        message(n, boom_when(build_prompt, lambda q, h, b, ct: b != 10_000)))
    e = checks.check_prompt_errors
    assert message(e, boom_when(build_prompt, lambda q, h, b, ct: True)) == f"build_prompt('What?', hits, 500) {BOOM}"


def test_prompt_citations_messages():
    c = checks.check_prompt_citations_numbered
    zero = lambda n, ch: format_source(n - 1, ch)
    assert message(c, lambda *a: _greedy(*a, source=zero)) == "sources must be numbered [1], [2], [3]; found [0, 1, 2]"
    no_offsets = lambda n, ch: f"[{n}] {ch.source}\n{ch.text.strip()}\n\n"
    hits = checks._hits([12, 30, 8], seed=1)
    h = hits[0].chunk
    assert message(c, lambda *a: _greedy(*a, source=no_offsets)) == (
        f"source [1] must name its page and offsets: '[1] page1.md (chars 0-{h.end})'")
    cut = lambda n, ch: f"[{n}] {ch.source} (chars {ch.start}-{ch.end})\n{ch.text.strip()[:-1]}\n\n"
    assert message(c, lambda *a: _greedy(*a, source=cut)) == "source [1]: the chunk text must appear whole"
    assert message(c, lambda q, hits, b, ct=count_words: (build_prompt(q, hits, b, ct)[0] + " Thanks.",
                                                          build_prompt(q, hits, b, ct)[1])) == (
        "the question must come after the sources")
    lower_q = lambda q, hits, b, ct=count_words: (lambda p, cited: (p.replace(q, q.lower()), cited))(
        *build_prompt(q, hits, b, ct))
    assert message(c, lower_q) == "the question must come after the sources"
    # the 30-word chunk dropped at the second budget: a builder that stops at the first misfit cites rank 1 only
    stops = lambda q, hits, budget, ct=count_words: _greedy(q, hits, budget, order=lambda hs: hs[:1]) if \
        budget < 1000 else _greedy(q, hits, budget)
    assert re.fullmatch(r"budget=\d+: expected ranks 1 and 3 cited, got \[1\]", message(c, stops))
    # numbered by rank, not by place among the cited: [1], [3]
    by_rank = lambda q, hits, budget, ct=count_words: (lambda cited: (format_prompt(
        q, [format_source(h.rank, h.chunk) for h in cited]), cited))(build_prompt(q, hits, budget, ct)[1])
    assert message(c, by_rank) == "numbers must be consecutive over the cited chunks: [1], [2]"


def test_prompt_citations_trailing_whitespace_is_harmless():
    # the question comes last: a prompt that ends in a newline after "Answer:" still does
    checks.check_prompt_citations_numbered(lambda *a: (lambda p, cited: (p + "\n", cited))(*build_prompt(*a)))


def test_prompt_citations_inputs():
    # the question is "Which page explains the index?", the hits of 12, 30 and 8 words; the second budget is exactly
    # ranks 1 and 3 numbered [1], [2]: 38 (the template and a 5-word question) + (4 + 12) + (4 + 8) = 66 words
    seen = []
    checks.check_prompt_citations_numbered(
        lambda q, hits, budget, ct: seen.append((q, hits, budget)) or build_prompt(q, hits, budget, ct))
    assert [x[0] for x in seen] == ["Which page explains the index?"] * 2
    assert [len(h.chunk.text.split()) for h in seen[0][1]] == [12, 30, 8]
    assert [x[2] for x in seen] == [10_000, 66]
    # the strict "<" builder leaves rank 3 out at a budget it fills exactly
    assert message(checks.check_prompt_citations_numbered, lambda *a: _greedy(*a, fits=lambda u, b: u < b)) == (
        "budget=66: expected ranks 1 and 3 cited, got [1]")


def test_prompt_errors_messages():
    c = checks.check_prompt_errors
    assert message(c, lambda q, hits, b, ct: ("", [])) == "build_prompt must work on valid input first"
    assert message(c, lambda q, hits, b, ct: (None, [])) == "build_prompt must work on valid input first"

    def accepting(bad):
        def f(q, hits, b, ct):
            if bad(q, b):
                return format_prompt(q or "?", []), []
            return build_prompt(q, hits, b, ct)
        return f
    assert message(c, accepting(lambda q, b: not q.strip())) == (
        "an empty question: expected ValueError naming 'question', but nothing was raised")
    assert message(c, accepting(lambda q, b: b < 38)) == (
        "a budget of 3 tokens: expected ValueError naming 'budget', but nothing was raised")
    # 3 tokens, not 4: a builder refusing budgets below 4 only... is refused all the same at 3; one that accepts
    # exactly 3 is not
    assert message(c, accepting(lambda q, b: b == 3)) == (
        "a budget of 3 tokens: expected ValueError naming 'budget', but nothing was raised")

    def unnamed(which):
        def f(q, hits, b, ct):
            try:
                return build_prompt(q, hits, b, ct)
            except ValueError:
                if which(q, b):
                    raise ValueError("bad input") from None
                raise
        return f
    assert message(c, unnamed(lambda q, b: not q.strip())) == (
        "an empty question: raised ValueError but the message does not name 'question': bad input")
    assert message(c, unnamed(lambda q, b: b < 38)) == (
        "a budget of 3 tokens: raised ValueError but the message does not name 'budget': bad input")
    # the empty question is three spaces with a real budget; the small budget comes with the real question "What?"
    seen = []

    def spy(q, hits, b, ct):
        seen.append((q, len(hits), b, ct is count_words))
        return build_prompt(q, hits, b, ct)
    c(spy)
    assert seen == [("What?", 2, 500, True), ("   ", 2, 500, True), ("What?", 2, 3, True)]


# --- flat_index_bytes --------------------------------------------------------------------------------------------------
def test_index_bytes_writes_only_in_its_own_folder():
    import os
    import tempfile
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            checks.check_index_bytes_formula(flat_index_bytes)
            assert os.listdir(tmp) == []
        finally:
            os.chdir(here)


def test_index_bytes_messages():
    c = checks.check_index_bytes_formula
    # FAISS writes a 4-byte fourcc, the 33-byte header, an 8-byte length and then the 4·n·d bytes of the vectors:
    # 45 + 32 for one vector of 8
    assert message(c, lambda n, d: 4 * n * d) == "flat_index_bytes(1, 8) = 32, but FAISS writes 77 bytes"
    assert message(c, lambda n, d: float(flat_index_bytes(n, d))) == "flat_index_bytes must return an int, got float"
    assert message(c, boom_when(flat_index_bytes, lambda n, d: True)) == f"flat_index_bytes(1, 8) {BOOM}"
    # each (n, d) is asked as written: an empty index (n = 0), and a single vector (n = 1)
    seen = []
    c(lambda n, d: seen.append((n, d)) or flat_index_bytes(n, d))
    assert seen == [(1, 8), (100, 32), (1000, 384), (0, 16)]
    assert message(c, lambda n, d: flat_index_bytes(n, d) + (n == 0)) == (
        "flat_index_bytes(0, 16) = 46, but FAISS writes 45 bytes")
