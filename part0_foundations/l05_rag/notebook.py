"""Spec of the lesson 05 notebook (see course/grading/notebook_spec.py). Run `make notebooks` after editing."""
from course.grading.notebook_spec import code, extract_definitions, given, graded, md, solution
from part0_foundations.l05_rag import checks

ASSIGNMENT = "05_rag"
NOTEBOOK = "rag.ipynb"
AUTOGRADER = "tests/autograder/test_rag.py"
SRC = checks.LESSON.source_file()
INDEX = checks.LESSON.source_file(checks.LESSON.reference[1])

CELLS = [
    md(r"""
# Lesson 05 — A RAG by hand, and what its index costs

Retrieval-augmented generation in four visible steps: **split** the documents into chunks, **embed** each chunk
as a vector, **search** for the chunks nearest a question, and **assemble a prompt** from them. You write the
chunker, the cosine top-k search (checked against FAISS), the prompt builder with its token budget, and the byte
count of a FAISS index file.

Fill in every cell marked `YOUR CODE HERE`, then run the test cells below it. The site page
*Part 0 › 05 RAG* runs the same code over the course site itself, with the real embedding model.
"""),
    code("""
import numpy as np

from part0_foundations.l05_rag import checks
from part0_foundations.l05_rag.rag import Chunk, Hit
"""),
    md(r"""
## 1. What passes between the steps (given)

A `Chunk` is a piece of one document with its source and character offsets: `text == document[start:end]`. A `Hit`
is a retrieved chunk with its rank and cosine score. Both are imported above from the package; they read:

```python
""" + extract_definitions(SRC, ["Chunk", "Hit"]) + r"""
```

`count_words` is a simple token counter (the command-line tool counts real WordPiece tokens instead).
`_check_chunk_sizes`, `_check_topk_inputs` and `_check_prompt_inputs` turn bad input into a `ValueError` that names
the argument; the three functions you write call them first.
"""),
    given(SRC, ["count_words", "_check_chunk_sizes", "_check_topk_inputs", "_check_prompt_inputs"]),
    md(r"""
## 2. Chunking with overlap

Cut `text` into windows of `size` characters, consecutive windows sharing `overlap` characters: window $i$ starts at
$i\,(\text{size}-\text{overlap})$. The last window ends exactly at `len(text)` (it may be shorter); stop as soon as a
window reaches the end, so no window lies wholly inside the previous one. An empty text gives `[]`; a text no
longer than `overlap` is still one window. Offsets count characters, not bytes.
"""),
    solution(SRC, ["chunk_text"], grade_id="chunk_impl"),
    *graded(checks.LESSON, "chunk_offsets_exact", "chunk_overlap_exact", "chunk_edge_cases", "chunk_any_length"),
    md(r"""
## 3. Cosine top-k in numpy

$$\cos(q, x_i) = \frac{q\cdot x_i}{\lVert q\rVert\,\lVert x_i\rVert}$$

Scale queries and documents to unit length, take all inner products with one matrix product, and return the `k`
best per query, best first, as `(scores, ids)` of shape `(n_queries, k)` — what `faiss.IndexFlatIP` returns on unit
vectors. A zero vector has no direction: it scores 0 with everything, never NaN. Equal cosines keep the lower id
first, so the answer is the same every run. `np.partition` finds each row's $k$-th best cosine without sorting
everything.
"""),
    solution(SRC, ["cosine_top_k"], grade_id="topk_impl"),
    *graded(checks.LESSON, "topk_matches_faiss", "topk_zero_and_ties"),
    md(r"""
## 4. The prompt, within a token budget

The template is given: a header, numbered source blocks, then the question. Add the hits best first, numbering the
included ones 1, 2, …; a hit goes in whole or not at all, and one that would push the prompt over `budget` tokens is
skipped (a shorter one after it may still fit). Count the *whole* prompt after each addition: a real tokenizer need
not add up across the joins.
"""),
    given(SRC, ["PROMPT_HEADER", "format_source", "format_prompt"]),
    solution(SRC, ["build_prompt"], grade_id="prompt_impl"),
    *graded(checks.LESSON, "prompt_budget_never_exceeded", "prompt_citations_numbered",
            "prompt_counts_whole_prompt"),
    md(r"""
## 5. What a flat index costs

`faiss.IndexFlatIP` keeps the vectors as they are: $n \times d$ float32. Its file adds a little: a 4-byte type code
(`FOURCC`, e.g. `IxFI`), the common header (`HEADER_BYTES`: `d` int32, `ntotal` int64, two unused int64 fields,
`is_trained` bool, `metric_type` int32), and the vector's length as a uint64 before the floats. Return the file size
in bytes; the check writes real FAISS files and compares.
"""),
    given(INDEX, ["HEADER_BYTES", "FOURCC"]),
    solution(INDEX, ["flat_index_bytes"], grade_id="bytes_impl"),
    *graded(checks.LESSON, "index_bytes_formula"),
    md(r"""
## 6. Now on the course itself

The same pieces, with the real embedding model (all-MiniLM-L6-v2, 384 dimensions, offline) and a FAISS index opened
with mmap, run from the command line:

```bash
python -m part0_foundations.l05_rag build site --out _build/rag
python -m part0_foundations.l05_rag ask _build/rag "Why divide attention scores by sqrt(d)?" -k 5 --budget 512
python -m part0_foundations.l05_rag.memory --n 100000   # RssAnon vs RssFile vs page cache
```

At 384 float32 per chunk, a million chunks are $10^6 \times 384 \times 4 \approx 1.5$ GB of vectors. Opened with
mmap, those bytes live in the page cache rather than in your process: the site page measures it step by step.
"""),
]
