"""Spec of the lesson 01 notebook (see course/grading/notebook_spec.py). Run `make notebooks` after editing."""
from course.grading.notebook_spec import code, given, graded, md, solution
from part0_foundations.l01_attention import checks

ASSIGNMENT = "01_attention"
NOTEBOOK = "attention.ipynb"
AUTOGRADER = "tests/autograder/test_attention.py"
SRC = checks.LESSON.source_file()

CELLS = [
    md(r"""
# Lesson 01 — Attention, by hand

You will write scaled dot-product attention and multi-head attention (MHA, GQA, MQA) from basic tensor
operations, then check them against PyTorch's own implementations.

$$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d}} + M\right) V$$

Fill in every cell marked `YOUR CODE HERE`, then run the test cells below it. The site page
*Part 0 › 01 Attention* explains the math and the shapes your code works on.
"""),
    code("""
import math

import torch
from torch import nn

from part0_foundations.l01_attention import checks
"""),
    md(r"""
## 1. Helpers (given)

`_check_attention_inputs`, `_check_heads` and `_check_mha_inputs` turn bad shapes and sizes into a `ValueError` that
names the argument. `causal_mask` builds the boolean mask (True = may attend), aligned to the end so that one new
query token sees the whole cache.
"""),
    given(SRC, ["_check_attention_inputs", "_check_heads", "_check_mha_inputs", "causal_mask"]),
    md(r"""
## 2. Scaled dot-product attention

Compute the scores $QK^\top/\sqrt{d}$, set masked scores to $-\infty$, subtract each row's maximum before the
exponential (so large logits cannot overflow), normalise, and multiply by $V$. A row whose every key is masked must
give zero weights, not NaN.
"""),
    solution(SRC, ["scaled_dot_product_attention"], grade_id="sdpa_impl"),
    *graded(checks.LESSON, "sdpa_matches_torch", "sdpa_causal_decode", "sdpa_stable", "sdpa_masked_weights_zero"),
    md(r"""
## 3. Multi-head attention with `n_kv_heads`

Project the queries into `n_heads` heads and the keys and values into `n_kv_heads` heads of `head_dim` each. When
`n_kv_heads < n_heads`, each K/V head serves a group of `n_heads // n_kv_heads` query heads (GQA; MQA when
`n_kv_heads == 1`). With a `context`, keys and values come from it: cross-attention. A boolean `mask` (True = may
attend) of shape `(B, Lq, Lk)`, or `(B, 1, Lk)` for padding, holds for every head alike.
"""),
    solution(SRC, ["MultiHeadAttention"], grade_id="mha_impl"),
    *graded(checks.LESSON, "mha_matches_torch", "mha_mask_every_head", "gqa_equals_repeated_mha", "mqa_and_cross_attention"),
    md(r"""
## 4. Why this matters for memory

Per token and per layer, a model caches `n_kv_heads × head_dim` keys and as many values. GQA with 8 KV heads instead
of 64 cuts that cache by 8×: lesson 03 measures it to the byte.
"""),
]
