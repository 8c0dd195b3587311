"""Spec of the lesson 02 notebook (see course/grading/notebook_spec.py). Run `make notebooks` after editing."""
from course.grading.notebook_spec import code, given, graded, md, solution
from part0_foundations.l02_encoder_decoder import checks

ASSIGNMENT = "02_encoder_decoder"
NOTEBOOK = "encoder_decoder.ipynb"
AUTOGRADER = "tests/autograder/test_encoder_decoder.py"
SRC = checks.LESSON.source_file()

CELLS = [
    md(r"""
# Lesson 02 — The encoder–decoder Transformer

You will write the two layers of the original Transformer ("Attention Is All You Need") on top of lesson 01's
`MultiHeadAttention` — the **encoder layer** and the **decoder layer with cross-attention** — and **greedy
decoding**. Then you load a trained checkpoint into *your* layers and watch them turn human-written dates into ISO:

| input | output |
|---|---|
| `3 March 2021`, `March 3, 2021`, `03/03/21`, `Wed, 3 Mar 2021`, `2021년 3월 3일`, `the 3rd of March '21` | `2021-03-03` |

Every layer is post-norm, as in the paper: $x \leftarrow \mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$.
Masks follow lesson 01: boolean, `True` = may attend. Fill in every cell marked `YOUR CODE HERE`, then run the
test cells below it. Nothing here trains: the checkpoint ships with the course.
"""),
    code("""
import math

import torch
from torch import nn

from part0_foundations.l01_attention import MultiHeadAttention
from part0_foundations.l02_encoder_decoder import checks, data
from part0_foundations.l02_encoder_decoder.evaluate import EncoderCutOff
from part0_foundations.l02_encoder_decoder.model import Seq2SeqConfig, load_model

torch.set_num_threads(1)  # the models here are tiny: one thread is faster than two waiting for each other
"""),
    md(r"""
## 1. Positions and the feed-forward network (given)

Attention does not see order, so each token gets a position vector added to its embedding:
$PE_{pos,2i} = \sin(pos/10000^{2i/d})$, $PE_{pos,2i+1} = \cos(pos/10000^{2i/d})$. The feed-forward network is the
same two-layer MLP applied to every position.
"""),
    given(SRC, ["sinusoidal_positions", "FeedForward"]),
    md(r"""
## 2. The encoder layer

The encoder sees the whole source at once: **bidirectional** self-attention (no causal mask), but padded source
positions must not be attended to — pass `mask` (shape `(B, 1, S)`, `True` at real characters) to the
self-attention. Then the feed-forward network. Each sub-layer: `x = norm(x + dropout(sublayer(x)))`.
"""),
    solution(SRC, ["EncoderLayer"], grade_id="encoder_layer_impl"),
    *graded(checks.LESSON, "encoder_layer_matches_torch", "encoder_layer_ignores_padding"),
    md(r"""
## 3. The decoder layer: causal self-attention, then cross-attention

Three sub-layers. **Causal self-attention** over the output written so far (position $t$ may only see positions
$\le t$). **Cross-attention**: queries from the decoder, keys and values from `memory`, the encoder output — this
is how the decoder reads the source; `memory_mask` hides its padding. Then the feed-forward network. With
`return_cross_weights=True`, also return the cross-attention weights `(B, n_heads, T, S)`.
"""),
    solution(SRC, ["DecoderLayer"], grade_id="decoder_layer_impl"),
    *graded(checks.LESSON, "decoder_layer_matches_torch", "decoder_layer_causal", "decoder_layer_reads_source"),
    md(r"""
## 4. The stacks and the model (given)

`Encoder` and `Decoder` stack your layers; `Seq2Seq` adds one embedding shared by source, target and output
(scaled by $\sqrt{d_{model}}$) and the positions. `encode(src)` runs once per input; `decode(tgt, memory,
memory_mask)` returns next-token logits at every target position.
"""),
    given(SRC, ["Encoder", "Decoder", "Seq2Seq"]),
    md(r"""
## 5. Greedy decoding

Encode the batch once. Start every row with `<bos>`; at each step decode the whole prefix, take the most likely next
token of the last position, and append it. A row that has produced `<eos>` only receives `<pad>` from then on. Stop
as soon as every row has its `<eos>`, and never generate more than `max_len` tokens. Return the generated tokens
without the `<bos>` column.
"""),
    solution(SRC, ["greedy_decode"], grade_id="greedy_decode_impl"),
    *graded(checks.LESSON, "greedy_decode_batched", "greedy_decode_translates"),
    md(r"""
## 6. The trained checkpoint, in your layers

`load_model(model_cls=Seq2Seq)` builds the model from *your* `EncoderLayer` and `DecoderLayer` (through the
`Seq2Seq` above) and loads the shipped weights with `torch.load(weights_only=True)`. If your layers compute what the
reference computes, they translate dates.
"""),
    *graded(checks.LESSON, "checkpoint_in_your_layers"),
    code("""
model = load_model(model_cls=Seq2Seq)
texts = ["3 March 2021", "March 3, 2021", "03/03/21", "Wed, 3 Mar 2021", "2021년 3월 3일", "the 3rd of March '21"]
for text, row in zip(texts, greedy_decode(model, data.source_tensor(texts), data.TARGET_LEN)):
    print(f"{text:>24} -> {data.decode_ids(row)}")
"""),
    md(r"""
## 7. Cut the encoder off

The same decoder, with the encoder output replaced by zeros: cross-attention now reads nothing about the input.
What is left is a model of what dates look like in general.
"""),
    code("""
test = data.fixed_examples("test")[:300]
src = data.source_tensor([text for text, *_ in test])
for name, m in (("full model", model), ("encoder cut off", EncoderCutOff(model))):
    preds = [data.decode_ids(row) for row in greedy_decode(m, src, data.TARGET_LEN)]
    right = sum(p == iso for p, (_, iso, _) in zip(preds, test))
    print(f"{name:16s} exact match {right}/{len(test)}   e.g. {test[0][0]!r} -> {preds[0]}")
"""),
]
