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

from course.shared import tables
from course.machine import records
from course.shared import i18n
from course.site.exercises import exercise_block
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
    i18n.use_figure_fonts()  # the Korean figures' labels need the CJK font
    out = Path(out)
    emb = Embedder()
    docs = load_corpus(REPO / "site")
    chunks = chunk_corpus(docs, SIZE, OVERLAP)
    vectors = emb.encode([c.text for c in chunks])
    flat = ix.build_flat(vectors)

    # 1. Chunks: two neighbours of one page and the characters they share.
    a, b = next((c, d) for c, d in zip(chunks, chunks[1:]) if c.source == d.source)
    shared = a.text[-OVERLAP:]
    i18n.write_text(out, "chunks.md", lambda tr: "\n".join([
        tr("{pages} pages → {chunks} chunks of at most {size} characters, {overlap} shared with the next.",
           pages=len(docs), chunks=len(chunks), size=SIZE, overlap=OVERLAP),
        "",
        *tables.head(tr("| chunk | source | start | end | characters | begins with |")),
        tables.row(0, f"`{a.source}`", a.start, a.end, len(a.text), _preview(a.text, 60)),
        tables.row(1, f"`{b.source}`", b.start, b.end, len(b.text), _preview(b.text, 60)),
        "",
        tr("Chunk 1 starts {gap} characters after chunk 0 (size − overlap), so chunk 0's last {overlap} characters are "
           "chunk 1's first: `{same}` (they begin \"{preview}…\").", gap=b.start - a.start, overlap=OVERLAP,
           same=b.text[:OVERLAP] == shared, preview=_preview(shared, 40)),
    ]) + "\n")

    # 2. One vector.
    v = vectors[0]
    i18n.write_text(out, "vector.md", lambda tr: tr(
        "Chunk 0 becomes {n} float32 values ({bytes} bytes), of length {norm}; the first six are `{first}`.",
        n=v.shape[0], bytes=f"{4 * v.shape[0]:,}", norm=f"{np.linalg.norm(v):.4f}",
        first=np.array2string(v[:6], precision=4, separator=", ")) + "\n")

    # 3. Retrieval, and the same top-k by hand.
    qv = emb.encode([QUESTION])
    scores, ids = ix.search(flat, qv, 5)
    hits = [Hit(r + 1, float(s), chunks[i]) for r, (s, i) in enumerate(zip(scores[0], ids[0]))]
    numpy_scores = vectors @ qv[0]
    same = np.array_equal(np.argsort(-numpy_scores, kind="stable")[:5], ids[0])
    rows = [tables.row(h.rank, f"{h.score:.3f}", f"`{h.chunk.source}`", f"{h.chunk.start}–{h.chunk.end}",
                       f"{_preview(h.chunk.text)}…") for h in hits]
    i18n.write_text(out, "retrieval.md", lambda tr: tr("Question: *{question}*", question=QUESTION) + "\n\n"
                    + "\n".join(tables.head(tr("| rank | cosine | source | characters | text |")) + rows
                                 + ["", tr("The same five ids from `vectors @ query` sorted by numpy: `{same}`.",
                                           same=same)]) + "\n")

    # 4. The prompt under a budget.
    prompt, cited = build_prompt(QUESTION, hits, BUDGET, count_tokens=count_tokens)
    i18n.write_text(out, "prompt_stats.md", lambda tr: tr(
        "Budget {budget} tokens (all-MiniLM-L6-v2's WordPiece tokenizer): the prompt takes {tokens} and cites {cited} of "
        "the {hits} retrieved chunks (ranks {ranks}); a chunk goes in whole or not at all.", budget=BUDGET,
        tokens=count_tokens(prompt), cited=len(cited), hits=len(hits), ranks=", ".join(str(h.rank) for h in cited))
        + "\n")
    # The chunks hold Markdown (code fences too): fence the prompt with more backticks than any run inside it.
    fence = "`" * max([3] + [len(r) + 1 for r in re.findall(r"`+", prompt)])
    i18n.write_text(out, "prompt.md", lambda tr: f"{fence}text\n{prompt}\n{fence}\n")  # the prompt as built

    # 5. Evaluation: the labelled questions, flat and IVF.
    res = evalset.evaluate(REPO / "site", embedder=emb)
    runs = [(kind, nprobe, res if kind == "flat" else evalset.evaluate(REPO / "site", kind="ivf", embedder=emb,
                                                                         nprobe=nprobe))
            for kind, nprobe in (("flat", None), ("ivf", 1), ("ivf", 2))]

    def eval_md(tr):
        rows = tables.head(tr("| index | pages | chunks | questions | recall@1 | recall@5 | MRR |"))
        for kind, nprobe, r in runs:
            label = tr("IndexFlatIP (exact)") if kind == "flat" else f"IndexIVFFlat, nprobe={nprobe}"
            rows.append(tables.row(label, r['documents'], r['chunks'], r['questions'], f"{r['recall@1']:.2f}",
                                   f"{r['recall@5']:.2f}", f"{r['mrr']:.2f}"))
        # The questions are the evaluation set's own (English, like the pages they are asked of).
        missed = [f"- *{q}* (`{', '.join(rel)}`): " + (tr("rank {k}", k=k) if k else tr("rank not found"))
                  for q, rel, k in res["per_question"] if k != 1]
        return ("\n".join(rows) + "\n\n" + tr(
            "{scored} questions scored, {left_out} left out because their page is not on the site yet. Questions whose "
            "page was not the first hit (flat):", scored=res["questions"], left_out=res["left_out"]) + "\n\n"
            + ("\n".join(missed) or "- " + tr("none")) + "\n")

    i18n.write_text(out, "eval.md", eval_md)

    # 6. The approximate index against the flat one, on the same vectors.
    queries = emb.encode([q for q, _ in evalset.active_questions(docs)[0]])
    _, exact = ix.search(flat, queries, 5)
    nlist = ix.default_nlist(len(chunks))
    rows = []
    for nprobe in sorted({1, 2, 4, nlist} & set(range(1, nlist + 1))):
        ivf = ix.build_ivf(vectors, nlist=nlist, nprobe=nprobe)
        _, approx = ix.search(ivf, queries, 5)
        rows.append(tables.row(nprobe, f"{100 * nprobe / nlist:.0f}%", f"{ix.recall_at_k(approx, exact):.2f}"))
    i18n.write_text(out, "ivf_recall.md", lambda tr: "\n".join([
        tr("IVF-Flat with nlist = {nlist} lists (≈ √{chunks}), top-5 for the {questions} questions:", nlist=nlist,
           chunks=len(chunks), questions=len(queries)), "",
        *tables.head(tr("| nprobe | lists scanned | recall@5 vs flat |"))] + rows) + "\n")

    # 7. Bytes of the site's own indexes: formula vs file.
    d = vectors.shape[1]
    flat_file = ix.write_index(flat, out / "_site_flat.faiss")
    ivf = ix.build_ivf(vectors, nlist=nlist)
    ivf_file = ix.write_index(ivf, out / "_site_ivf.faiss")
    for p in ("_site_flat.faiss", "_site_ivf.faiss"):
        (out / p).unlink()
    n = len(chunks)
    i18n.write_text(out, "site_bytes.md", lambda tr: "\n".join([
        *tables.head(tr("| index | vectors × d × 4 | formula | file on disk |")),
        tables.row("IndexFlatIP", f"{4 * n * d:,}", f"45 + 4·{n}·{d} = {ix.flat_index_bytes(n, d):,}",
                   f"{flat_file:,}"),
        tables.row(f"IndexIVFFlat, nlist={nlist}", f"{4 * n * d:,}", f"{ix.ivf_flat_index_bytes(n, d, nlist):,}",
                   f"{ivf_file:,}"),
    ]) + "\n")

    _memory(out)


def _memory(out: Path):
    for lang, tr in i18n.each_language():
        _memory_in(out, tr, lang)
    _checks(out)


def _memory_in(out: Path, tr, lang: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = json.loads(RESULT.read_text())
    steps = m["steps"]
    rec = records.read_record(m)     # a saved run may predate the shared record's keys
    host = rec["host"]
    where = f"{m['machine']}, kernel {m['kernel']}" if "kernel" in m else f"{host['cpu']}, {host['system']}"
    memory = m["mem_total"] if "mem_total" in m else host["memory_bytes"]
    rows = [tr("Index of {n} random unit vectors × {d} floats: vectors {vector_bytes} bytes, formula {formula}, file "
               "{file} bytes ({filesystem}). Measured {date} on this course's machine ({where}, {gib} GiB) with "
               "`{command}`.", n=f"{m['n']:,}", d=m["d"], vector_bytes=f"{m['vector_bytes']:,}",
               formula=f"{m['formula_bytes']:,}", file=f"{m['file_bytes']:,}", filesystem=m["filesystem"],
               date=rec["date_utc"], where=where, gib=f"{memory / 2**30:.0f}", command=rec["command"]), "",
            *tables.head(tr("| step | RssAnon | RssFile | index file in page cache |"))]
    rows += [tables.row(tr(s['step']), _mib(s['rss_anon']), _mib(s['rss_file']),
                        f"{_mib(s['page_cache'])} ({100 * s['resident_pages'] / s['file_pages']:.0f}%)") for s in steps]
    by = {s["step"]: s for s in steps}
    base, copy = by["written, pages dropped"], by["read_index (a copy)"]
    searched = next(s for s in steps if s["step"].startswith("after"))
    rows += ["", tr("Against the {file} file: the copy added {copy} of RssAnon ({copy_pct}%); the mapped index, once "
                    "searched, {mapped} of RssFile ({mapped_pct}%) and {anon} of RssAnon.", file=_mib(m["file_bytes"]),
                    copy=_mib(copy["rss_anon"] - base["rss_anon"]),
                    copy_pct=f"{100 * (copy['rss_anon'] - base['rss_anon']) / m['file_bytes']:.0f}",
                    mapped=_mib(searched["rss_file"] - base["rss_file"]),
                    mapped_pct=f"{100 * (searched['rss_file'] - base['rss_file']) / m['file_bytes']:.0f}",
                    anon=_mib(searched["rss_anon"] - base["rss_anon"]))]
    iv = m["ivf"]
    rows += ["", tr("An IVF-Flat index of the same vectors (nlist = {nlist}: file {file} bytes, formula {formula}) "
                    "opened with `IO_FLAG_MMAP`: after one search at nprobe = 1, {pct}% of its file is in the page "
                    "cache.", nlist=iv["nlist"], file=f"{iv['file_bytes']:,}", formula=f"{iv['formula_bytes']:,}",
                    pct=f"{100 * iv['resident_fraction_after_1_search']:.1f}")]
    (out / i18n.localized("memory.md", lang)).write_text("\n".join(rows) + "\n")

    fig, ax = plt.subplots(figsize=(9, 3.8))
    labels = [tr(s["step"]).replace(" + ", " +\n") for s in steps]
    y = np.arange(len(steps))
    h = 0.27
    ax.barh(y - h, [s["rss_anon"] / 2**20 for s in steps], h, label=tr("RssAnon (process-private)"), color="#d95f02")
    ax.barh(y, [s["rss_file"] / 2**20 for s in steps], h, label=tr("RssFile (mapped file pages)"), color="#1b9e77")
    ax.barh(y + h, [s["page_cache"] / 2**20 for s in steps], h, label=tr("index file in page cache"), color="#7570b3")
    ax.axvline(m["file_bytes"] / 2**20, color="k", ls=":", lw=1)
    ax.text(m["file_bytes"] / 2**20, len(steps) - 0.4, " " + tr("index file"), va="top", fontsize=8)
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("MiB")
    ax.set_title(tr("Flat index of {n} × {d} float32: where its bytes live", n=f"{m['n']:,}", d=m["d"]))
    ax.legend(fontsize=8, loc="lower right")
    fig.savefig(out / i18n.localized("memory.png", lang), dpi=110, bbox_inches="tight")
    plt.close(fig)


def _checks(out: Path):
    """Answers of the page's self-check questions, computed with the lesson's own functions."""
    text = "x" * 2000
    spans = [(c.start, c.end) for c in chunk_text(text, "page", SIZE, OVERLAP)]
    i18n.write_text(out, "check_chunks.md", lambda tr: tr(
        "**{n} chunks**: windows start every {size} − {overlap} = {step} characters, at {starts}; they span {spans} "
        "(the last one ends exactly at the end of the page, so it is shorter).", n=len(spans), size=SIZE,
        overlap=OVERLAP, step=SIZE - OVERLAP, starts=", ".join(str(a) for a, _ in spans),
        spans=", ".join(f"{a}–{b}" for a, b in spans)) + "\n")
    n, d = 1_000_000, 384
    b = ix.flat_index_bytes(n, d)
    i18n.write_text(out, "check_bytes.md", lambda tr: tr(
        "\\(45 + 4nd\\) = **{bytes} bytes** ({gib} GiB): the header is nothing, the float32 vectors are everything. "
        "Opened with mmap it costs no private memory, but a flat search reads every vector, so all {gib} GiB must sit "
        "in the page cache for searches to stay fast.", bytes=f"{b:,}", gib=f"{b / 2**30:.2f}") + "\n")
    from part0_foundations.l05_rag import notebook

    i18n.write_text(out, "exercise.md", lambda tr: exercise_block(notebook, lang=tr.lang))
