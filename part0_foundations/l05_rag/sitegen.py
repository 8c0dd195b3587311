"""Tables and the memory figure for site/part0/05_rag.md, produced by the lesson's own code over the site itself.

The corpus is the course site as it is at build time (``site/**/*.md`` minus ``generated/``). Embeddings come from
the ``Embedder`` cache (``_build/cache/``): only chunks whose text changed since the last build go through the model,
so a rebuild takes seconds; a build with a cold cache loads the model and embeds the whole site once. The memory
picture is the saved run ``results/memory.json`` (``python -m part0_foundations.l05_rag.memory --save``): it writes
and drops a 150 MB file, which is a measurement, not a page build.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from course import records
from course import i18n
from course.exercises import exercise_block
from part0_foundations.l05_rag import evalset
from part0_foundations.l05_rag import index as ix
from part0_foundations.l05_rag.embed import Embedder, count_tokens
from part0_foundations.l05_rag.memory import RESULT
from part0_foundations.l05_rag.pipeline import OVERLAP, SIZE
from part0_foundations.l05_rag.rag import Hit, build_prompt, chunk_corpus, chunk_text, load_corpus

NAME = "l05"
REPO = Path(__file__).resolve().parents[2]
QUESTION = "How does grouped-query attention shrink what a decoder must keep for every past token?"
BUDGET = 600  # tokens: room for about two chunks of ~250 tokens, so the budget visibly drops the rest


def _preview(text, n=90):
    return " ".join(text.split())[:n].replace("|", "\\|").replace("`", "'")


def _mib(b):
    return f"{b / 2**20:,.1f} MiB"


def build(out: Path):
    out = Path(out)
    emb = Embedder()
    docs = load_corpus(REPO / "site")
    chunks = chunk_corpus(docs, SIZE, OVERLAP)
    vectors = emb.encode([c.text for c in chunks])
    flat = ix.build_flat(vectors)

    # 1. Chunks: two neighbours of one page and the characters they share.
    a, b = next((c, d) for c, d in zip(chunks, chunks[1:]) if c.source == d.source)
    shared = a.text[-OVERLAP:]
    (out / "chunks.md").write_text("\n".join([
        f"{len(docs)} pages → {len(chunks)} chunks of at most {SIZE} characters, {OVERLAP} shared with the next.",
        "",
        "| chunk | source | start | end | characters | begins with |", "|---|---|---|---|---|---|",
        f"| 0 | `{a.source}` | {a.start} | {a.end} | {len(a.text)} | {_preview(a.text, 60)} |",
        f"| 1 | `{b.source}` | {b.start} | {b.end} | {len(b.text)} | {_preview(b.text, 60)} |",
        "",
        f"Chunk 1 starts {b.start - a.start} characters after chunk 0 (size − overlap), so chunk 0's last {OVERLAP} "
        f"characters are chunk 1's first: `{b.text[:OVERLAP] == shared}` (they begin "
        f"\"{_preview(shared, 40)}…\").",
    ]) + "\n")

    # 2. One vector.
    v = vectors[0]
    (out / "vector.md").write_text(
        f"Chunk 0 becomes {v.shape[0]} float32 values ({4 * v.shape[0]:,} bytes), of length "
        f"{np.linalg.norm(v):.4f}; the first six are `{np.array2string(v[:6], precision=4, separator=', ')}`.\n")

    # 3. Retrieval, and the same top-k by hand.
    qv = emb.encode([QUESTION])
    scores, ids = ix.search(flat, qv, 5)
    hits = [Hit(r + 1, float(s), chunks[i]) for r, (s, i) in enumerate(zip(scores[0], ids[0]))]
    numpy_scores = vectors @ qv[0]
    same = np.array_equal(np.argsort(-numpy_scores, kind="stable")[:5], ids[0])
    rows = ["| rank | cosine | source | characters | text |", "|---|---|---|---|---|"]
    rows += [f"| {h.rank} | {h.score:.3f} | `{h.chunk.source}` | {h.chunk.start}–{h.chunk.end} | "
             f"{_preview(h.chunk.text)}… |" for h in hits]
    rows += ["", f"The same five ids from `vectors @ query` sorted by numpy: `{same}`."]
    (out / "retrieval.md").write_text(f"Question: *{QUESTION}*\n\n" + "\n".join(rows) + "\n")

    # 4. The prompt under a budget.
    prompt, cited = build_prompt(QUESTION, hits, BUDGET, count_tokens=count_tokens)
    (out / "prompt_stats.md").write_text(
        f"Budget {BUDGET} tokens (all-MiniLM-L6-v2's WordPiece tokenizer): the prompt takes {count_tokens(prompt)} "
        f"and cites {len(cited)} of the {len(hits)} retrieved chunks (ranks "
        f"{', '.join(str(h.rank) for h in cited)}); a chunk goes in whole or not at all.\n")
    # The chunks hold Markdown (code fences too): fence the prompt with more backticks than any run inside it.
    fence = "`" * max([3] + [len(r) + 1 for r in re.findall(r"`+", prompt)])
    (out / "prompt.md").write_text(f"{fence}text\n{prompt}\n{fence}\n")

    # 5. Evaluation: the labelled questions, flat and IVF.
    res = evalset.evaluate(REPO / "site", embedder=emb)
    rows = ["| index | pages | chunks | questions | recall@1 | recall@5 | MRR |", "|---|---|---|---|---|---|---|"]
    for kind, nprobe in (("flat", None), ("ivf", 1), ("ivf", 2)):
        r = res if kind == "flat" else evalset.evaluate(REPO / "site", kind="ivf", embedder=emb, nprobe=nprobe)
        label = "IndexFlatIP (exact)" if kind == "flat" else f"IndexIVFFlat, nprobe={nprobe}"
        rows.append(f"| {label} | {r['documents']} | {r['chunks']} | {r['questions']} | {r['recall@1']:.2f} | "
                    f"{r['recall@5']:.2f} | {r['mrr']:.2f} |")
    missed = [f"- *{q}* (`{', '.join(rel)}`): rank {k or 'not found'}" for q, rel, k in res["per_question"] if k != 1]
    text = "\n".join(rows) + "\n\n"
    text += (f"{res['questions']} questions scored, {res['left_out']} left out because their page is not on the site "
             f"yet. Questions whose page was not the first hit (flat):\n\n" + ("\n".join(missed) or "- none") + "\n")
    (out / "eval.md").write_text(text)

    # 6. The approximate index against the flat one, on the same vectors.
    queries = emb.encode([q for q, _ in evalset.active_questions(docs)[0]])
    _, exact = ix.search(flat, queries, 5)
    nlist = ix.default_nlist(len(chunks))
    rows = [f"IVF-Flat with nlist = {nlist} lists (≈ √{len(chunks)}), top-5 for the {len(queries)} questions:", "",
            "| nprobe | lists scanned | recall@5 vs flat |", "|---|---|---|"]
    for nprobe in sorted({1, 2, 4, nlist} & set(range(1, nlist + 1))):
        ivf = ix.build_ivf(vectors, nlist=nlist, nprobe=nprobe)
        _, approx = ix.search(ivf, queries, 5)
        rows.append(f"| {nprobe} | {100 * nprobe / nlist:.0f}% | {ix.recall_at_k(approx, exact):.2f} |")
    (out / "ivf_recall.md").write_text("\n".join(rows) + "\n")

    # 7. Bytes of the site's own indexes: formula vs file.
    d = vectors.shape[1]
    flat_file = ix.write_index(flat, out / "_site_flat.faiss")
    ivf = ix.build_ivf(vectors, nlist=nlist)
    ivf_file = ix.write_index(ivf, out / "_site_ivf.faiss")
    for p in ("_site_flat.faiss", "_site_ivf.faiss"):
        (out / p).unlink()
    n = len(chunks)
    (out / "site_bytes.md").write_text("\n".join([
        "| index | vectors × d × 4 | formula | file on disk |", "|---|---|---|---|",
        f"| IndexFlatIP | {4 * n * d:,} | 45 + 4·{n}·{d} = {ix.flat_index_bytes(n, d):,} | {flat_file:,} |",
        f"| IndexIVFFlat, nlist={nlist} | {4 * n * d:,} | {ix.ivf_flat_index_bytes(n, d, nlist):,} | {ivf_file:,} |",
    ]) + "\n")

    _memory(out)


def _memory(out: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = json.loads(RESULT.read_text())
    steps = m["steps"]
    rec = records.read_record(m)     # a saved run may predate the shared record's keys
    host = rec["host"]
    where = f"{m['machine']}, kernel {m['kernel']}" if "kernel" in m else f"{host['cpu']}, {host['system']}"
    memory = m["mem_total"] if "mem_total" in m else host["memory_bytes"]
    rows = [f"Index of {m['n']:,} random unit vectors × {m['d']} floats: vectors {m['vector_bytes']:,} bytes, formula "
            f"{m['formula_bytes']:,}, file {m['file_bytes']:,} bytes ({m['filesystem']}). Measured "
            f"{rec['date_utc']} on this course's machine ({where}, "
            f"{memory / 2**30:.0f} GiB) with `{rec['command']}`.", "",
            "| step | RssAnon | RssFile | index file in page cache |", "|---|---|---|---|"]
    rows += [f"| {s['step']} | {_mib(s['rss_anon'])} | {_mib(s['rss_file'])} | {_mib(s['page_cache'])} "
             f"({100 * s['resident_pages'] / s['file_pages']:.0f}%) |" for s in steps]
    by = {s["step"]: s for s in steps}
    base, copy = by["written, pages dropped"], by["read_index (a copy)"]
    searched = next(s for s in steps if s["step"].startswith("after"))
    rows += ["", f"Against the {_mib(m['file_bytes'])} file: the copy added {_mib(copy['rss_anon'] - base['rss_anon'])} "
             f"of RssAnon ({100 * (copy['rss_anon'] - base['rss_anon']) / m['file_bytes']:.0f}%); the mapped index, "
             f"once searched, {_mib(searched['rss_file'] - base['rss_file'])} of RssFile "
             f"({100 * (searched['rss_file'] - base['rss_file']) / m['file_bytes']:.0f}%) and "
             f"{_mib(searched['rss_anon'] - base['rss_anon'])} of RssAnon."]
    iv = m["ivf"]
    rows += ["", f"An IVF-Flat index of the same vectors (nlist = {iv['nlist']}: file {iv['file_bytes']:,} bytes, "
             f"formula {iv['formula_bytes']:,}) opened with `IO_FLAG_MMAP`: after one search at nprobe = 1, "
             f"{100 * iv['resident_fraction_after_1_search']:.1f}% of its file is in the page cache."]
    (out / "memory.md").write_text("\n".join(rows) + "\n")

    fig, ax = plt.subplots(figsize=(9, 3.8))
    labels = [s["step"].replace(" + ", " +\n") for s in steps]
    y = np.arange(len(steps))
    h = 0.27
    ax.barh(y - h, [s["rss_anon"] / 2**20 for s in steps], h, label="RssAnon (process-private)", color="#d95f02")
    ax.barh(y, [s["rss_file"] / 2**20 for s in steps], h, label="RssFile (mapped file pages)", color="#1b9e77")
    ax.barh(y + h, [s["page_cache"] / 2**20 for s in steps], h, label="index file in page cache", color="#7570b3")
    ax.axvline(m["file_bytes"] / 2**20, color="k", ls=":", lw=1)
    ax.text(m["file_bytes"] / 2**20, len(steps) - 0.4, " index file", va="top", fontsize=8)
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("MiB")
    ax.set_title(f"Flat index of {m['n']:,} × {m['d']} float32: where its bytes live")
    ax.legend(fontsize=8, loc="lower right")
    fig.savefig(out / "memory.png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    _checks(out)


def _checks(out: Path):
    """Answers of the page's self-check questions, computed with the lesson's own functions."""
    text = "x" * 2000
    spans = [(c.start, c.end) for c in chunk_text(text, "page", SIZE, OVERLAP)]
    (out / "check_chunks.md").write_text(
        f"**{len(spans)} chunks**: windows start every {SIZE} − {OVERLAP} = {SIZE - OVERLAP} characters, at "
        + ", ".join(str(a) for a, _ in spans) + f"; they span " + ", ".join(f"{a}–{b}" for a, b in spans)
        + f" (the last one ends exactly at the end of the page, so it is shorter).\n")
    n, d = 1_000_000, 384
    b = ix.flat_index_bytes(n, d)
    (out / "check_bytes.md").write_text(
        f"\\(45 + 4nd\\) = **{b:,} bytes** ({b / 2**30:.2f} GiB): the header is nothing, the float32 vectors are "
        f"everything. Opened with mmap it costs no private memory, but a flat search reads every vector, so all "
        f"{b / 2**30:.2f} GiB must sit in the page cache for searches to stay fast.\n")
    from part0_foundations.l05_rag import notebook

    i18n.write_text(out, "exercise.md", lambda tr: exercise_block(notebook, lang=tr.lang))
