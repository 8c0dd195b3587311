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

from part0_foundations.l05_rag import index as ix
from part0_foundations.l05_rag.embed import Embedder
from part0_foundations.l05_rag.pipeline import OVERLAP, SIZE
from part0_foundations.l05_rag.rag import chunk_corpus, load_corpus

HOME, INSTR, ATT, P1, RAG = "index.md", "instructors.md", "part0/01_attention.md", "part1/index.md", "part0/05_rag.md"
ENC, KV, ENG = "part0/02_encoder_decoder.md", "part0/03_kv_cache.md", "part1/engine_checks.md"
INT8, CALC, ARCH, E3 = "part0/04_gpt2_int8.md", "part1/calculator.md", "part1/archetypes.md", "part1/e3_page_cache.md"

QUESTIONS: list[tuple[str, tuple[str, ...]]] = [
    # The home page
    ("Who is this course written for?", (HOME,)),
    ("How much mathematics do I need to follow the course?", (HOME,)),
    ("What are the two ways to take the course, alone or in a class?", (HOME,)),
    ("Where do I find the notebooks to fill in when studying on my own?", (HOME,)),
    ("What does the capacity calculator turn into accelerators needed and roofline bounds?", (HOME, P1)),
    # Instructors
    ("How do I collect student submissions before autograding them?", (INSTR,)),
    ("Why read scores from the gradebook rather than from nbgrader validate?", (INSTR,)),
    ("Which folder holds the source notebooks with solutions and hidden tests?", (INSTR,)),
    ("What does make notebooks regenerate, and with which tool?", (INSTR,)),
    ("How do I produce HTML feedback for my students?", (INSTR,)),
    ("Why is the nbgrader execution time limit per cell raised to 300 seconds?", (INSTR,)),
    ("Where is each solution written exactly once?", (INSTR,)),
    ("How can I grade a single notebook without the nbgrader workflow?", (INSTR, HOME, ATT)),
    # Lesson 01
    ("Why are attention scores divided by the square root of the head dimension?", (ATT,)),
    ("What is grouped-query attention and what does it share between query heads?", (ATT,)),
    ("How does multi-query attention differ from multi-head attention?", (ATT,)),
    ("Why is the row maximum subtracted before taking the exponential in softmax?", (ATT,)),
    ("What weight does a masked score of minus infinity get?", (ATT,)),
    ("How can one new query token during decoding see every cached key?", (ATT,)),
    ("What is cross-attention, where do its keys and values come from?", (ATT, ENC)),
    ("Which PyTorch functions is my attention implementation compared against?", (ATT,)),
    ("What error do I get when n_kv_heads does not divide n_heads?", (ATT,)),
    ("Why is attention the only part of a Transformer whose working set grows with the text?", (ATT,)),
    # Lesson 05 (this lesson's own page)
    ("How is a document split into overlapping chunks with character offsets?", (RAG,)),
    ("How many bytes does a flat FAISS inner-product index file take for n vectors?", (RAG,)),
    ("What is the recall of the IVF index against the exact flat index?", (RAG,)),
    ("Why does a process that opened the index with mmap look small in RSS while the page cache holds the index?",
     (RAG, E3)),
    ("Which embedding model turns the chunks into vectors, and how many dimensions do they have?", (RAG,)),
    ("How does the prompt builder keep the prompt within its token budget?", (RAG,)),
    ("How are the sources numbered and cited in the assembled prompt?", (RAG,)),
    ("What do recall@5 and mean reciprocal rank measure on the labelled questions?", (RAG,)),
    ("What does mincore tell about an index file in the page cache?", (RAG, E3)),
    ("Why does IO_FLAG_MMAP alone still copy a flat index into anonymous memory?", (RAG,)),
    ("How many characters do two neighbouring chunks share, and why overlap them at all?", (RAG,)),
    ("How does IVF trade recall for speed with nlist and nprobe?", (RAG,)),
    # Lesson 02
    ("What translation task is the encoder-decoder Transformer trained on?", (ENC,)),
    ("How are two-digit years made unambiguous in the date data set?", (ENC,)),
    ("What happens to exact match when the encoder output is replaced by zeros?", (ENC,)),
    ("Why does the cross-attention cache of an encoder-decoder not grow while the output is written?", (ENC,)),
    ("What is teacher forcing in training the decoder?", (ENC,)),
    ("How does greedy decoding stop for a batch when some rows have written the end token?", (ENC,)),
    ("What does the translate command do with an input that is not a supported date form?", (ENC,)),
    ("Where are layer norms placed in the encoder layer, post-norm as in the original paper?", (ENC,)),
    # Lesson 03
    ("Why does the MLA cache have no factor of 2 for keys and values?", (KV,)),
    ("How does a sliding-window layer store its cache in a ring buffer?", (KV,)),
    ("Why must the RoPE key be cached separately from the MLA latent?", (KV,)),
    ("Does the state of an SSM layer grow with the number of tokens?", (KV,)),
    ("What is the difference between prefill and a decode step with a KV cache?", (KV,)),
    ("What text was the small character-level GPT of the KV-cache lesson trained on?", (KV,)),
    ("How does per-step latency differ with and without the KV cache?", (KV,)),
    # Lesson 04
    ("Why does quantize_dynamic skip GPT-2's attention and MLP projections?", (INT8,)),
    ("How is a Conv1D weight converted to an nn.Linear weight?", (INT8,)),
    ("Why does quantizing the tied lm_head increase memory instead of reducing it?", (INT8,)),
    ("What is the difference between one scale per tensor and one scale per output channel?", (INT8,)),
    ("What corpus is the small GPT-2 of the INT8 lesson trained on?", (INT8,)),
    ("What replaces torch.ao quantize_dynamic in torchao?", (INT8,)),
    ("How is the signal-to-quantization-noise ratio defined?", (INT8,)),
    # Part 1: the calculator
    ("Which command plans a deployment of a model on an accelerator for a given context and batch?", (CALC,)),
    ("Why does tensor parallelism not always split the KV cache across ranks?", (CALC,)),
    ("What fraction of accelerator memory may the engine use by default, like vLLM's gpu_memory_utilization?",
     (CALC,)),
    ("Why is the bottleneck of DeepSeek-V3 with MLA the weights rather than the KV cache?", (CALC, ARCH)),
    ("How does the calculator decide whether prefill or decode is compute-bound or memory-bound?", (CALC,)),
    ("Which GGUF quantization types does the calculator know, with their real bits per weight?", (CALC,)),
    # Part 1: the engine checks
    ("How is the KV slope read from llama.cpp's log and fitted against the formula?", (ENG,)),
    ("Why does a q8_0 KV cache take 34/32 bytes per element?", (ENG,)),
    ("Why are prompt processing and token generation measured separately, never as one tokens-per-second?",
     (ENG,)),
    ("How are the memory bandwidth and matmul throughput of this host measured for the roofline?", (ENG,)),
    ("Why can the engine checks use GGUF models with random weights?", (ENG,)),
    # Part 1: archetypes
    ("What decides the nature of a customer's problem, according to the archetypes page?", (ARCH,)),
    ("Why does the edge and robotics archetype show no numbers at all?", (ARCH,)),
    ("When does capacity propose recommend a separate tier for the KV cache?", (ARCH,)),
    ("What makes a claim verified or unverified in the evidence ledger?", (ARCH,)),
    # Part 1: E3
    ("Why does p99 latency notice page-cache eviction before the median does?", (E3,)),
    ("What does the hog process do in the page-cache experiment?", (E3,)),
    ("How is the knee of the latency curve defined in experiment E3?", (E3,)),
    ("What should I monitor for an mmap-opened index instead of free memory?", (E3,)),
    ("What does MADV_RANDOM change about read-around on a page fault?", (E3,)),
]


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
    return "\n".join([
        "| index | pages | chunks | questions | recall@1 | recall@5 | MRR |",
        "|---|---|---|---|---|---|---|",
        f"| {result['kind']} | {result['documents']} | {result['chunks']} | {result['questions']} | "
        f"{result['recall@1']:.2f} | {result['recall@5']:.2f} | {result['mrr']:.2f} |",
    ]) + "\n"
