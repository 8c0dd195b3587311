"""Spec of the lesson 04 notebook (see course/grading/notebook_spec.py). Run `make notebooks` after editing."""
from course.grading.notebook_spec import code, given, graded, md, solution
from part0_foundations.l04_gpt2_int8 import checks

ASSIGNMENT = "04_gpt2_int8"
NOTEBOOK = "gpt2_int8.ipynb"
AUTOGRADER = "tests/autograder/test_gpt2_int8.py"
SRC = checks.LESSON.source_file()

CELLS = [
    md(r"""
# Lesson 04 — GPT-2 to INT8

You will take a real `transformers` GPT-2 (`GPT2LMHeadModel`) apart just enough to quantize it: convert its
`Conv1D` projections to `nn.Linear`, write a symmetric INT8 quantizer with one scale per tensor and one per output
channel, and see why the tied `lm_head` must stay in FP32.

$$q = \mathrm{clamp}\!\left(\mathrm{round}\!\left(\frac{w}{s}\right), -128, 127\right), \qquad \hat w = q\,s,
\qquad s = \frac{\max |w|}{127}$$

Fill in every cell marked `YOUR CODE HERE`, then run the test cells below it. The site page
*Part 0 › 04 GPT-2 to INT8* explains each step and shows the full comparison.
"""),
    code("""
import copy

import torch
from torch import nn
from transformers.pytorch_utils import Conv1D

from part0_foundations.l04_gpt2_int8 import checks, data
from part0_foundations.l04_gpt2_int8.int8 import is_tied, quantize_with_torch, state_bytes

torch.set_num_threads(2)
"""),
    md(r"""
## 1. The anatomy that matters

The lesson ships a small model with GPT-2's exact architecture, trained by `train.py` on the Python Language
Reference. Look at one block: the four projections are `Conv1D`, not `nn.Linear`, and `lm_head` reads the very same
tensor as the input embedding `wte`.
"""),
    code("""
model, tokenizer = data.load_model()
print(model.transformer.h[0])
print("lm_head tied to wte:", model.lm_head.weight is model.transformer.wte.weight)
print("Conv1D weight (in, out):", tuple(model.transformer.h[0].mlp.c_fc.weight.shape))
"""),
    md(r"""
## 2. Conv1D → nn.Linear

`Conv1D` computes $xW + b$ with $W$ stored as (in, out); `nn.Linear` computes $xW^\top + b$ with $W$ stored as
(out, in). Replace every `Conv1D` (recursively, in place) by an `nn.Linear` holding the transposed weight and the same
bias. Leave everything else alone: `lm_head` is already an `nn.Linear`, and it must stay tied to `wte`.
"""),
    solution(SRC, ["conv1d_to_linear"], grade_id="conv1d_impl"),
    *graded(checks.LESSON, "conversion_exact", "lm_head_untouched_and_tied"),
    md(r"""
## 3. Symmetric INT8, one scale per tensor

Given: the INT8 range and the smallest magnitude used for a scale (an all-zero tensor would otherwise give
$s = 0$ and $w / s = \mathrm{NaN}$).
"""),
    given(SRC, ["QMIN", "QMAX", "MIN_MAX_ABS"]),
    md(r"""
Return `(q, scale)`: `q` an `int8` tensor of `w`'s shape, `scale` a 0-dim float32 tensor. Without a `scale`,
use $\max|w| / 127$. Round half to even (`torch.round`), then clamp to $[-128, 127]$.
"""),
    solution(SRC, ["quantize_per_tensor"], grade_id="per_tensor_impl"),
    *graded(checks.LESSON, "per_tensor_matches_torch", "rounding_and_clamping"),
    md(r"""
## 4. One scale per output channel

An `nn.Linear` weight is (out, in): axis 0 is the output channel. Each channel gets its own
$s_c = \max_j |w_{cj}| / 127$, so a channel of small weights is no longer rounded with the step of the largest one.
"""),
    solution(SRC, ["quantize_per_channel"], grade_id="per_channel_impl"),
    *graded(checks.LESSON, "per_channel_matches_torch", "per_channel_not_worse"),
    md(r"""
## 5. Back to float

$\hat w = q \cdot s$; a 1-D `scale` holds one value per channel along `axis`.
"""),
    solution(SRC, ["dequantize"], grade_id="dequantize_impl"),
    *graded(checks.LESSON, "dequantize"),
    md(r"""
## 6. On the real model

Convert the shipped model with your function, then compare the error of both schemes on every block Linear (SQNR,
the signal-to-quantization-noise ratio in dB: higher is better) and let `torch.ao` quantize it. Then quantize
`lm_head` too and look at what happens to the tie and to the bytes: `wte` must stay FP32 for the input lookup, so
the INT8 `lm_head` is an *extra* copy.
"""),
    code("""
fp32 = conv1d_to_linear(data.load_model()[0])
for name, m in fp32.named_modules():
    if isinstance(m, nn.Linear) and name.startswith("transformer.h.0."):
        w = m.weight.detach()
        errs = []
        for q, s in (quantize_per_tensor(w), quantize_per_channel(w, axis=0)):
            noise = ((w - dequantize(q, s, axis=0)) ** 2).sum()
            errs.append(10 * torch.log10((w**2).sum() / noise).item())
        print(f"{name:28s} SQNR per tensor {errs[0]:5.1f} dB   per channel {errs[1]:5.1f} dB")
"""),
    code("""
windows = data.token_windows(tokenizer, data.heldout_text(), 128, 2048)
rows = [("fp32", fp32)]
for scheme in ("per_tensor", "per_channel"):
    rows.append((f"torch.ao {scheme}", quantize_with_torch(fp32, scheme)[0]))
rows.append(("torch.ao per_channel + lm_head", quantize_with_torch(fp32, "per_channel", include_lm_head=True)[0]))
for label, m in rows:
    print(f"{label:32s} {state_bytes(m):>10,} B  tied={is_tied(m)!s:5}  perplexity {data.perplexity(m, windows):.3f}")
"""),
    md(r"""
The site page has the full table (logit error, perplexity, latency, the hand-written weight-only route) for the
shipped model, and `python -m part0_foundations.l04_gpt2_int8.compare --model-dir PATH` produces it for a real
GPT-2 124M saved with `save_pretrained`.

The shipped model is too small and too briefly trained to have outlier channels, so the two schemes come out alike
on it. The next section uses a real pretrained transformer.
"""),
    md(r"""
## 7. A real pretrained layer: MiniLM

Lesson 05's sentence encoder, all-MiniLM-L6-v2, was pretrained for real. Write `int8_round_trip(linear)`: a copy of
an `nn.Linear` whose weight is replaced by its INT8 round trip with **one scale per output channel** — your
`quantize_per_channel` on the right axis, then your `dequantize` — leaving the bias and the original layer as they
are. The checks apply it to a MiniLM layer with outlier channels (its weight SQNR must match the reference's and beat
one scale per tensor) and to all 36 encoder layers (the sentence embeddings must match the reference INT8 model's).
"""),
    solution(SRC, ["int8_round_trip"], grade_id="round_trip_impl"),
    *graded(checks.LESSON, "minilm_layer_sqnr", "minilm_embeddings_match"),
    md(r"""
The whole study — per-layer SQNR and outlier spread, embedding cosine and retrieval recall for per-tensor and
per-channel weights, and activations rounded per tensor or per token — is run in lesson 05, which scores
retrieval (its `int8_minilm` study); the site page shows its saved run.
"""),
]
