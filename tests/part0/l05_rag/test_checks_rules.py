"""Every rule of every lesson-05 check, with the learner's message it gives, word for word.

tests/part0/l05_rag/test_checks.py shows each check rejecting a plausible mistake; here the reference passes every check,
each rule is broken alone by a variant of the reference and the message is pinned whole (or, where it carries a
count of tokens the test does not restate, by its exact form), each ``call()`` label is pinned by an implementation
that raises there (``"<label> raised RuntimeError: boom"``), and each choice of input is held by the mistake it is
there to catch (a text of exactly ``size`` characters, k = 1, a budget the best hit fills to the last token, a
near-tie of cosines). Figures are worked by hand: TEXT has 209 characters; the prompt template and the question
"How big is the cache?" take 38 words (31 in the header, 7 in "Question: … Answer:"); a source block adds 4 words
("[n] page.md (chars a-b)") to its chunk's.
Plain functions without arguments, so that ``tools/mutation.py --verify`` can run them."""
import re
from types import SimpleNamespace

import numpy as np

from part0_foundations.l05_rag import checks
from part0_foundations.l05_rag.index import flat_index_bytes
from part0_foundations.l05_rag.rag import (PROMPT_HEADER, Chunk, build_prompt, chunk_text, cosine_top_k, count_words,
                                           format_prompt, format_source)
from tests.support.rules import BOOM, message, states
from tests.part0.l05_rag.test_checks import prompt_adds_up_blocks


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


def test_chunk_overlap_two_chunks_are_enough():
    # "several" is two or more: two halves of TEXT (209 characters, h = 104) sharing exactly ``overlap`` characters,
    # [0, 104 + overlap) and [104, 209), pass this check; their sizes are the offsets check's rule, which refuses
    # them: 1 + ⌈(209 − 50) / 40⌉ = 5 windows of 50 expected
    def halves(t, s, size, o):
        h = len(t) // 2
        return [Chunk(s, 0, h + o, t[:h + o]), Chunk(s, h, len(t), t[h:])]
    checks.check_chunk_overlap_exact(halves)
    assert message(checks.check_chunk_offsets_exact, halves) == (
        "chunk_text(size=50, overlap=10): expected 5 chunks for 209 characters (size 50, overlap 10), got 2")


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
            (checks.check_chunk_edge_cases, "chunk_text('y' * 31, 'e.md', 30, 5)", lambda t, s, z, o: t == "y" * 31)):
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


def _bytes_windows(t, s, size, o):
    """Windows over the UTF-8 bytes: offsets in bytes, each window's text the characters its bytes hold whole."""
    b = t.encode("utf-8")
    return [Chunk(s, x.start, x.end, b[x.start:x.end].decode("utf-8", errors="ignore"))
            for x in _windows(b.decode("latin-1"), s, size, o)]


def test_chunk_any_length_messages():
    c = checks.check_chunk_any_length
    # the first call: an empty text, size 1, overlap 0
    assert message(c, lambda t, s, size, o: tuple(chunk_text(t, s, size, o))) == (
        "a 0-character text (size 1, overlap 0): return a list of Chunk, got tuple")
    # windows started while start < len(text) − overlap: a text no longer than the overlap gets none. First at
    # size 2, overlap 1 and one character, which is one window [0, 1).
    below_overlap = lambda t, s, size, o: [Chunk(s, a, min(a + size, len(t)), t[a:a + size])
                                           for a in range(0, len(t) - o, size - o)]
    assert message(c, below_overlap) == "a 1-character text (size 2, overlap 1): expected the windows [(0, 1)], got []"
    # offsets in bytes: MIXED begins "KV 캐", 4 characters and 6 bytes (Hangul takes 3), so at size 1 six windows
    assert checks.MIXED[:4] == "KV 캐" and len("KV 캐".encode()) == 6
    assert message(c, _bytes_windows) == (
        "a 4-character text (size 1, overlap 0): expected the windows [(0, 1), (1, 2), (2, 3), (3, 4)], got "
        "[(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6)]")

    # offsets in characters, text cut from the bytes: byte 3 alone is a third of 캐, decoded to nothing
    def text_from_bytes(t, s, size, o):
        b = t.encode("utf-8")
        return [Chunk(s, x.start, x.end, b[x.start:x.end].decode("utf-8", errors="ignore"))
                for x in chunk_text(t, s, size, o)]
    assert message(c, text_from_bytes) == (
        "a 4-character text (size 1, overlap 0): chunk 3 must be text[3:4] = '캐' (offsets count characters, not "
        "bytes), got ''")
    # chunks that are not Chunks: neither offsets nor text to read
    assert message(c, lambda t, s, size, o: [(x.start, x.end) for x in chunk_text(t, s, size, o)]) == (
        "a 1-character text (size 1, overlap 0): expected the windows [(0, 1)], got [(None, None)]")
    no_text = lambda t, s, size, o: [SimpleNamespace(start=x.start, end=x.end) for x in chunk_text(t, s, size, o)]
    assert message(c, no_text) == (
        "a 1-character text (size 1, overlap 0): chunk 0 must be text[0:1] = 'K' (offsets count characters, not "
        "bytes), got None")


def test_chunk_any_length_inputs_and_labels():
    c = checks.check_chunk_any_length
    seen = []
    c(lambda t, s, size, o: seen.append((t, s, size, o)) or chunk_text(t, s, size, o))
    # every length 0..40 with every size 1..6 and overlap 0..size − 1 (21 pairs): 21 × 41 calls, in that order
    assert seen == [(checks.MIXED[:n], "k.md", size, o) for size in range(1, 7) for o in range(size) for n in range(41)]
    assert len(checks.MIXED) >= 40 and checks.MIXED[:40].isascii() is False
    assert message(c, boom_when(chunk_text, lambda t, s, z, o: True)) == (
        f"chunk_text(a 0-character text, 'k.md', 1, 0) {BOOM}")
    assert message(c, boom_when(chunk_text, lambda t, s, z, o: (len(t), z, o) == (40, 6, 5))) == (
        f"chunk_text(a 40-character text, 'k.md', 6, 5) {BOOM}")

    # the largest text, size and overlap are asked: a chunker wrong only there is refused
    def wrong_at(length, size, overlap):
        return lambda t, s, z, o: chunk_text(t, s, z, o)[:-1] if (len(t), z, o) == (length, size, overlap) else \
            chunk_text(t, s, z, o)
    assert message(c, wrong_at(40, 6, 5)).startswith("a 40-character text (size 6, overlap 5): expected the windows ")
    assert message(c, wrong_at(40, 1, 0)).startswith("a 40-character text (size 1, overlap 0): expected the windows ")


def test_chunk_any_length_windows_by_hand():
    # the check's arithmetic, against windows worked by hand
    assert checks._expected_windows(0, 3, 1) == []
    assert checks._expected_windows(2, 5, 3) == [(0, 2)]              # shorter than the overlap: one window
    assert checks._expected_windows(3, 5, 3) == [(0, 3)]              # as long as the overlap
    assert checks._expected_windows(7, 3, 1) == [(0, 3), (2, 5), (4, 7)]
    assert checks._expected_windows(8, 3, 1) == [(0, 3), (2, 5), (4, 7), (6, 8)]
    assert checks._expected_windows(6, 6, 5) == [(0, 6)]


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
    assert states(message(c, lambda q, d, k: (cosine_top_k(q, d, k)[0] + 5e-5, cosine_top_k(q, d, k)[1])),
                  "k=1: cosine scores vs faiss: differs from the reference by up to {} (allowed {} + {}·|ref|)",
                  5e-5, 1e-5, 1e-5)
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
    # the same inputs every run, whatever numpy's global generator holds
    runs = []
    for seed in (1, 2):
        np.random.seed(seed)
        seen = []
        c(lambda q, d, k: seen.append((np.array(q), np.array(d))) or cosine_top_k(q, d, k))
        runs.append(seen)
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(*runs))


R = 2 ** -0.5  # cos 45°


def _stable(queries, docs, k, unit_q=None, unit_d=None, key=None):
    """Float64 cosines, zero rows left at zero unless ``unit_q``/``unit_d`` say otherwise; docs ordered by ``key``
    (default: decreasing cosine, then increasing id)."""
    def safe(x):
        n = np.linalg.norm(x, axis=1, keepdims=True)
        return np.divide(x, n, out=np.zeros_like(x), where=n > 0)
    q = (unit_q or safe)(np.atleast_2d(queries).astype(np.float64))
    d = (unit_d or safe)(np.asarray(docs, dtype=np.float64))
    sims = q @ d.T
    rows = [sorted(range(len(d)), key=(lambda i, r=r: key(sims[r, i], i)) if key else (lambda i, r=r: (-sims[r, i], i)))[:k]
            for r in range(len(q))]
    ids = np.array(rows, dtype=np.int64)
    return np.take_along_axis(sims, ids, axis=1).astype(np.float32), ids


def _naive_unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_topk_zero_and_ties_by_hand():
    # TIE_DOCS row i is SIX[i % 6]: cosine with [1, 0, 0] is 1 for i % 6 in {0, 2}, √½ for 5, 0 otherwise
    assert np.array_equal(checks.TIE_DOCS, np.array([checks.SIX[i % 6] for i in range(24)]))
    scores, ids = checks._tie_top_k(checks.TIE_QUERIES, checks.TIE_DOCS, 10)
    assert ids.tolist() == [[0, 2, 6, 8, 12, 14, 18, 20, 5, 11],    # [1, 0, 0]: the 1s, then √½
                            list(range(10)),                       # the zero query: every cosine 0, ids in order
                            [3, 4, 9, 10, 15, 16, 21, 22, 5, 11],  # [0, 2, 0]
                            [1, 3, 4, 7, 9, 10, 13, 15, 16, 19]]   # [−1, 0, 0]: the zeros first
    assert np.allclose(scores, [[1] * 8 + [R] * 2, [0] * 10, [1] * 8 + [R] * 2, [0] * 10])
    scores, ids = checks._tie_top_k(checks.TIE_QUERIES, checks.TIE_DOCS, 24)
    # [−1, 0, 0], all 24: the twelve zeros, then the four at −√½, then the eight at −1, each group in id order
    assert ids[3].tolist() == [1, 3, 4, 7, 9, 10, 13, 15, 16, 19, 21, 22, 5, 11, 17, 23, 0, 2, 6, 8, 12, 14, 18, 20]
    assert np.allclose(scores[3], [0] * 12 + [-R] * 4 + [-1] * 8)
    # another valid implementation passes: plain sorting, float64
    checks.check_topk_zero_and_ties(_stable)


def test_tie_top_k_zero_docs_at_any_size():
    # np.divide(..., where=norm > 0) writes only the rows it divides: a zero row keeps whatever the output held, so
    # the expected answer starts it at zero (out=zeros). Row j of the docs is e_(j mod d), every third row zeroed;
    # the query of ones has cosine 1/√d with each e_j and 0 with a zero doc: the non-zero docs first, in id order,
    # then the zero ones; the zero query has cosine 0 with all, ids in order. Larger than TIE_DOCS (24 × 3), where
    # the output's memory may hold zeros anyway.
    for d, n in ((8, 24), (32, 96), (3, 300)):
        docs = np.tile(np.eye(d, dtype=np.float32), (n // d, 1))
        docs[::3] = 0
        queries = np.array([[0] * d, [1] * d], dtype=np.float32)
        scores, ids = checks._tie_top_k(queries, docs, n)
        nonzero, zero = [j for j in range(n) if j % 3], list(range(0, n, 3))
        assert ids[0].tolist() == list(range(n)) and scores[0].tolist() == [0.0] * n
        assert ids[1].tolist() == nonzero + zero
        assert np.allclose(scores[1], [d ** -0.5] * len(nonzero) + [0] * len(zero), rtol=1e-12, atol=0)
        assert scores[1, len(nonzero):].tolist() == [0.0] * len(zero)


def test_topk_zero_and_ties_messages():
    c = checks.check_topk_zero_and_ties
    assert message(c, lambda q, d, k: list(cosine_top_k(q, d, k))) == "cosine_top_k must return (scores, ids)"
    assert message(c, lambda q, d, k: cosine_top_k(q, d, k)[1]) == "cosine_top_k must return (scores, ids)"
    assert message(c, lambda q, d, k: tuple(x.squeeze() for x in cosine_top_k(q, d, k))) == (
        "scores for k=1: expected shape (4, 1), got (4,)")
    cut = lambda q, d, k: (cosine_top_k(q, d, k)[0], cosine_top_k(q, d, k)[1][:, :max(k - 1, 1)])
    assert message(c, cut) == "ids for k=10: expected shape (4, 10), got (4, 9)"
    nan = ("k=1: scores must be numbers, got NaN: a zero vector has cosine 0 with everything (divide only by norms "
           "above 0)")
    with np.errstate(invalid="ignore"):
        assert message(c, lambda q, d, k: _stable(q, d, k, unit_q=_naive_unit, unit_d=_naive_unit)) == nan
        assert message(c, lambda q, d, k: _stable(q, d, k, unit_q=_naive_unit)) == nan    # the zero query alone

        # the zero doc alone: its NaN cosines sorted last by numpy, so for [−1, 0, 0] doc 3 (cosine 0) comes first
        def nan_doc(q, d, k):
            q = np.asarray(q, np.float64)
            nq = np.linalg.norm(q, axis=1, keepdims=True)
            sims = np.divide(q, nq, out=np.zeros_like(q), where=nq > 0) @ _naive_unit(np.asarray(d, np.float64)).T
            ids = np.argsort(-sims, axis=1, kind="stable")[:, :k]
            return np.take_along_axis(sims, ids, axis=1), ids
        assert message(c, nan_doc) == ("k=1, query [-1.0, 0.0, 0.0]: ids [3], expected [1] (by decreasing cosine; "
                                       "equal cosines, the lower id first)")
    # equal cosines, the higher id first: 20 is the last of the eight docs at cosine 1
    higher = lambda q, d, k: _stable(q, d, k, key=lambda s, i: (-s, -i))
    assert message(c, higher) == ("k=1, query [1.0, 0.0, 0.0]: ids [20], expected [0] (by decreasing cosine; equal "
                                  "cosines, the lower id first)")
    # ranked by |cosine|: for [−1, 0, 0] the docs at −1 come first
    absolute = lambda q, d, k: _stable(q, d, k, key=lambda s, i: (-abs(s), i))
    assert message(c, absolute) == ("k=1, query [-1.0, 0.0, 0.0]: ids [0], expected [1] (by decreasing cosine; "
                                    "equal cosines, the lower id first)")
    # right for k < 24; the ties of the full ranking in reverse (the zero query: ids 23, 22, …, 0)
    full_reversed = lambda q, d, k: _stable(q, d, k, key=(lambda s, i: (-s, -i)) if k == len(d) else None)
    assert message(c, full_reversed).startswith("k=24, query [1.0, 0.0, 0.0]: ids [20, 18, 14, 12, 8, 6, 2, 0, 23, ")
    # argpartition's pick among the docs tied at the k-th place is not the lowest ids
    def argpartition_pick(q, d, k):
        scores, ids = _stable(q, d, k)
        if k == 10:
            ids = ids.copy()
            ids[0, 8:] = [17, 23]  # also at √½
        return scores, ids
    assert message(c, argpartition_pick) == (
        "k=10, query [1.0, 0.0, 0.0]: ids [0, 2, 6, 8, 12, 14, 18, 20, 17, 23], expected [0, 2, 6, 8, 12, 14, 18, 20, "
        "5, 11] (by decreasing cosine; equal cosines, the lower id first)")
    # scores: 2⁻¹⁹ ≈ 1.9e-6 off is refused, 2⁻²¹ ≈ 4.8e-7 passes (atol 1e-6), and 2⁻¹⁷ ≈ 7.6e-6 off on the cosines
    # of size 1 and √½ alone is refused too (no tolerance relative to the value); powers of two, exact in float32
    off = lambda e, where=lambda s: True: lambda q, d, k: (lambda s, i: (np.where(where(s), s + np.float32(e), s), i))(
        *cosine_top_k(q, d, k))
    by_hand = ("k=1: cosines worked by hand (1, √½, 0, −√½, −1): differs from the reference by up to {} (allowed 1e-06 + "
               "0·|ref|)")
    assert states(message(c, off(2 ** -19)), by_hand, 2 ** -19)
    c(off(2 ** -21))
    assert states(message(c, off(2 ** -17, where=lambda s: np.abs(s) > 0.5)), by_hand, 2 ** -17)
    assert states(message(c, lambda q, d, k: (-cosine_top_k(q, d, k)[0], cosine_top_k(q, d, k)[1])), by_hand, 2)


def test_topk_zero_and_ties_reads_scores_as_numbers():
    # scores held as Python floats in an object array (np.array(rows, dtype=object)) are numbers all the same, as
    # expect_close reads them: the right ones pass, and a NaN among them gets the NaN message, not a TypeError
    c = checks.check_topk_zero_and_ties
    c(lambda q, d, k: (lambda s, i: (s.astype(object), i))(*cosine_top_k(q, d, k)))

    def nan_zero_query(q, d, k):   # the zero query's best cosine as NaN, in an object array
        scores, ids = cosine_top_k(q, d, k)
        scores = scores.astype(object)
        scores[1, 0] = float("nan")
        return scores, ids
    assert message(c, nan_zero_query) == (
        "k=1: scores must be numbers, got NaN: a zero vector has cosine 0 with everything (divide only by norms "
        "above 0)")


def test_topk_zero_and_ties_inputs_and_labels():
    c = checks.check_topk_zero_and_ties
    seen = []
    c(lambda q, d, k: seen.append((np.array(q), np.array(d), k)) or cosine_top_k(q, d, k))
    assert [x[2] for x in seen] == [1, 10, 24]
    assert all(np.array_equal(q, [[1, 0, 0], [0, 0, 0], [0, 2, 0], [-1, 0, 0]]) and np.array_equal(d, checks.TIE_DOCS)
               and q.dtype == d.dtype == np.float32 for q, d, _ in seen)  # float32, as embeddings and FAISS have them
    assert checks.SIX.tolist() == [[1, 0, 0], [0, 0, 0], [2, 0, 0], [0, 1, 0], [0, 3, 0], [1, 1, 0]]
    for k in (1, 10, 24):
        assert message(c, boom_when(cosine_top_k, lambda q, d, kk, k=k: kk == k)) == (
            f"cosine_top_k(queries, 24 docs with ties, k={k}) {BOOM}")


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


def test_count_quarters_by_hand():
    assert checks.count_quarters("") == 0 and checks.count_quarters("abc") == 0 and checks.count_quarters("abcd") == 1
    # not additive across a join: 6 + 6 characters count 1 + 1, joined 3
    assert checks.count_quarters("abcdef") * 2 == 2 and checks.count_quarters("abcdef" * 2) == 3


QUARTERS = r"budget=\d+ \(one token per 4 characters\): "
BASE = (len(PROMPT_HEADER) + len("Question: How big is the cache?\nAnswer:")) // 4  # the template and question


def test_prompt_counts_whole_prompt_messages():
    c = checks.check_prompt_counts_whole_prompt
    assert message(c, lambda *a: build_prompt(*a)[0]) == "build_prompt must return (prompt, cited_hits)"
    assert message(c, lambda *a: list(build_prompt(*a))) == "build_prompt must return (prompt, cited_hits)"
    over = QUARTERS + (r"the prompt takes \d+ tokens, over the budget: count the whole prompt with count_tokens, "
                       r"not its pieces, nor its words")
    # counting words instead of the counter it is given: a word is more than 4 characters
    words = lambda q, hits, budget, ct: build_prompt(q, hits, budget, count_words)
    assert re.fullmatch(over, message(c, words))

    # counting the pieces and adding them up: rounding each piece down undercounts the whole
    assert re.fullmatch(over, message(c, prompt_adds_up_blocks))
    # one token over: held by the budgets one token short of a greedy prompt
    assert re.fullmatch(over, message(c, lambda *a: _greedy(*a, fits=lambda used, budget: used <= budget + 1)))
    # strict "<": held by the budgets a greedy prompt fills to the last token
    assert re.fullmatch(QUARTERS + r"hit of rank \d fitted but was left out",
                        message(c, lambda *a: _greedy(*a, fits=lambda used, budget: used < budget)))
    stops = lambda *a: _greedy(*a, order=lambda hs: hs[:1])
    assert re.fullmatch(QUARTERS + r"hit of rank \d fitted but was left out", message(c, stops))
    # the right prompt, but every hit cited: the first one left out did not fit
    assert re.fullmatch(QUARTERS + r"hit of rank \d did not fit but was included",
                        message(c, lambda q, hits, b, ct: (build_prompt(q, hits, b, ct)[0], hits)))
    # the same length in another form: "(1)" for "[1]"
    paren = lambda n, ch: format_source(n, ch).replace(f"[{n}]", f"({n})", 1)
    assert re.fullmatch(QUARTERS + r"build the prompt with format_prompt\(question, blocks\) and format_source\(n, "
                        r"chunk\)", message(c, lambda *a: _greedy(*a, source=paren)))


def test_prompt_counts_whole_prompt_inputs_and_labels():
    c = checks.check_prompt_counts_whole_prompt
    seen = []
    c(lambda q, hits, budget, ct: seen.append((q, hits, budget, ct)) or build_prompt(q, hits, budget, ct))
    assert {x[0] for x in seen} == {Q} and all(x[3] is checks.count_quarters for x in seen)
    assert [len(h.chunk.text.split()) for h in seen[0][1]] == [40, 120, 15, 60, 5, 80]
    hits = seen[0][1]
    assert hits == checks._hits([40, 120, 15, 60, 5, 80], seed=2)
    # the budgets, a second way: fixed steps above the template, and each prompt of the first n hits (all fit in
    # BASE + 1500: about 530 tokens of sources) filled to its last token and one token short of it
    question = "Question: How big is the cache?\nAnswer:"
    fills = [(len(PROMPT_HEADER) + sum(len(format_source(i + 1, h.chunk)) for i, h in enumerate(hits[:n]))
              + len(question)) // 4 for n in range(1, 7)]
    assert fills[-1] < BASE + 1500
    assert [x[2] for x in seen] == sorted({BASE + x for x in (0, 20, 60, 120, 250, 500, 900, 1500)}
                                          | set(fills) | {f - 1 for f in fills})
    assert message(c, boom_when(build_prompt, lambda q, h, b, ct: b == BASE)) == (
        f"build_prompt(q, hits, budget={BASE}, count_tokens=count_quarters) {BOOM}")
    # hits drawn with their own seed, the same every run
    np.random.seed(4)
    again = []
    c(lambda q, hits, budget, ct: again.append(hits) or build_prompt(q, hits, budget, ct))
    assert again[0] == seen[0][1]


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
