"""The lesson 05 checks can fail: each one rejects a plausible wrong implementation, and accepts a different but
valid one (float64 top-k with another sort)."""
import numpy as np
import pytest

from course.grading.contract import CheckFailed
from part0_foundations.l05_rag import checks
from part0_foundations.l05_rag.rag import Chunk, count_words, format_prompt, format_source


def chunk_one_too_many(text, source, size, overlap):
    # Keeps stepping until start passes the end: adds a last chunk that lies inside the previous one.
    out, start = [], 0
    while start < len(text):
        out.append(Chunk(source, start, min(start + size, len(text)), text[start:start + size]))
        start += size - overlap
    return out


def chunk_no_overlap(text, source, size, overlap):
    return [Chunk(source, s, min(s + size, len(text)), text[s:s + size]) for s in range(0, len(text), size)]


def topk_dot_product(queries, docs, k):
    s = np.atleast_2d(queries) @ np.asarray(docs).T  # not normalized: longer docs win
    ids = np.argsort(-s, axis=1)[:, :k]
    return np.take_along_axis(s, ids, 1), ids


def topk_float64(queries, docs, k):
    q, d = np.atleast_2d(queries).astype(np.float64), np.asarray(docs, np.float64)
    if not 1 <= k <= len(d):
        raise ValueError(f"k must be in 1..{len(d)}")
    if q.shape[1] != d.shape[1]:
        raise ValueError("queries: wrong width")
    nq, nd = np.linalg.norm(q, axis=1, keepdims=True), np.linalg.norm(d, axis=1, keepdims=True)
    s = np.divide(q, nq, out=np.zeros_like(q), where=nq > 0) @ np.divide(d, nd, out=np.zeros_like(d), where=nd > 0).T
    ids = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(s, ids, 1).astype(np.float32), ids


def chunk_while_before_overlap(text, source, size, overlap):
    # Starts windows while start < len(text) − overlap: right for long texts, none for one no longer than the overlap.
    return [Chunk(source, s, min(s + size, len(text)), text[s:s + size])
            for s in range(0, len(text) - overlap, size - overlap)]


def topk_zero_gives_nan(queries, docs, k):
    q, d = np.atleast_2d(queries).astype(np.float64), np.asarray(docs, np.float64)
    with np.errstate(invalid="ignore"):
        s = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (d / np.linalg.norm(d, axis=1, keepdims=True)).T
    ids = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(s, ids, 1).astype(np.float32), ids


def prompt_adds_up_blocks(question, hits, budget, count_tokens=count_words):
    # Counts the template once and each block alone, and adds them up: right only for a counter that adds up.
    blocks, cited = [], []
    used = count_tokens(format_prompt(question, []))
    for h in hits:
        block = format_source(len(blocks) + 1, h.chunk)
        if used + count_tokens(block) <= budget:
            blocks, cited, used = blocks + [block], cited + [h], used + count_tokens(block)
    return format_prompt(question, blocks), cited


def prompt_stops_at_first_misfit(question, hits, budget, count_tokens=count_words):
    if not question.strip():
        raise ValueError("question")
    blocks, cited = [], []
    for h in hits:
        trial = blocks + [format_source(len(blocks) + 1, h.chunk)]
        if count_tokens(format_prompt(question, trial)) > budget:
            break
        blocks, cited = trial, cited + [h]
    return format_prompt(question, blocks), cited


def prompt_ignores_template(question, hits, budget, count_tokens=count_words):
    # Budgets only the chunk texts, forgetting the header and question: overflows.
    blocks, cited, used = [], [], 0
    for h in hits:
        n = count_tokens(h.chunk.text)
        if used + n <= budget:
            blocks.append(format_source(len(blocks) + 1, h.chunk))
            cited.append(h)
            used += n
    return format_prompt(question, blocks), cited


def bytes_without_header(n, d):
    return 4 * n * d


@pytest.mark.parametrize("check_id, wrong, says", [
    ("chunk_offsets_exact", chunk_one_too_many, "expected 5 chunks for 209 characters"),
    ("chunk_overlap_exact", chunk_no_overlap, "must share exactly 10 characters"),
    ("topk_matches_faiss", topk_dot_product, "normalize both sides, sort by decreasing cosine"),
    ("prompt_budget_never_exceeded", prompt_stops_at_first_misfit, "fitted but was left out"),
    ("prompt_budget_never_exceeded", prompt_ignores_template, "over the budget"),
    ("index_bytes_formula", bytes_without_header, "but FAISS writes"),
    ("chunk_any_length", chunk_while_before_overlap, "a 1-character text (size 2, overlap 1)"),
    ("topk_zero_and_ties", topk_zero_gives_nan, "got NaN"),
    ("prompt_counts_whole_prompt", prompt_adds_up_blocks, "over the budget"),
])
def test_check_rejects_a_wrong_implementation(check_id, wrong, says):
    with pytest.raises(CheckFailed) as err:
        checks.ALL[check_id][1](wrong)
    assert says in str(err.value), str(err.value)


def test_topk_checks_accept_another_valid_implementation():
    checks.check_topk_matches_faiss(topk_float64)
    checks.check_topk_zero_and_ties(topk_float64)


def test_the_visible_checks_pass_what_the_hidden_ones_refuse():
    # what the three hidden checks add: each mistake above passes every visible check of its function
    for name, wrong in (("chunk_text", chunk_while_before_overlap), ("cosine_top_k", topk_zero_gives_nan),
                        ("build_prompt", prompt_adds_up_blocks)):
        for c in checks.LESSON.checks:
            if c.name == name and not c.hidden:
                c.fn(wrong)


def test_the_given_input_checks_name_the_argument():
    # no longer graded (the learner is handed them), still one clear error each
    from part0_foundations.l05_rag.rag import build_prompt, chunk_text, cosine_top_k
    for size, overlap, name in ((10, 10, "overlap"), (10, -1, "overlap"), (0, 0, "size"), (2.5, 0, "size")):
        with pytest.raises(ValueError, match=f"^{name}"):
            chunk_text("some text", "d.md", size, overlap)
    docs = np.ones((3, 4), np.float32)
    for q, d, k, name in ((np.ones(4), docs, 4, "k"), (np.ones(4), docs, 0, "k"), (np.ones(5), docs, 1, "queries"),
                          (np.ones(4), np.ones((0, 4)), 1, "docs"), (np.full(4, np.nan), docs, 1, "queries"),
                          (np.ones(4), np.full((3, 4), np.inf), 1, "docs")):
        with pytest.raises(ValueError, match=f"^{name}"):
            cosine_top_k(q, d, k)
    for question, budget, name in (("  ", 500, "question"), ("What?", 3, "budget"), ("What?", 0, "budget")):
        with pytest.raises(ValueError, match=f"^{name}"):
            build_prompt(question, [], budget)
