"""Lesson 02 checks: called by the notebook's autograder cells, by tests/autograder/test_encoder_decoder.py and by
the reference tests. Each takes the implementation under test and raises CheckFailed with a learner message.

The references are independent of the code under test: PyTorch's own ``nn.TransformerEncoderLayer`` /
``nn.TransformerDecoderLayer`` (post-norm, ReLU: the paper's layers) with copied weights, a one-example-at-a-time
decoding loop written here, and the true ISO date computed by ``datetime``.
"""
from __future__ import annotations

import datetime as dt

import torch
from torch import nn

from course.grading import method
from course.grading.contract import (Check, Lesson, one_torch_thread, call, expect, expect_close, expect_close_naming,
                            expect_shape)
from part0_foundations.l01_attention.checks import _copy_from_torch_mha
from part0_foundations.l02_encoder_decoder import data

ATOL = 1e-5
D, H, FF = 16, 4, 32

# Dates the reference checkpoint must translate: one per form, spread over the range (derived, not looked up).
FIXED_DATES = [data.FIRST_DATE + dt.timedelta(days=(i * 1553 + 17) % 36525) for i in range(len(data.FORM_NAMES))]
FIXED_EXAMPLES = [(data.render(d, f), d.isoformat()) for d, f in zip(FIXED_DATES, data.FORM_NAMES)]


# The common mistakes, each computed with torch's layers and the same weights: a failure names the one made.
CAUSES = {
    "pre_norm": "the norm comes before the sublayer (pre-norm); this layer is post-norm: x = norm(x + sublayer(x))",
    "no_residual": "the residual is missing: x = norm(x + sublayer(x)), not norm(sublayer(x))",
    "not_causal": "self-attention is not causal: a target position may not see the later ones (causal=True)",
    "memory_mask_ignored": "cross-attention ignores memory_mask: padded source positions must get no weight",
}


def _ff(ref, x):
    return ref.linear2(torch.relu(ref.linear1(x)))


def _encoder_mistakes(ref, x, mask) -> dict:
    """CAUSES words → what torch's encoder layer (weights of ``ref``) gives with that mistake."""
    pad = ~mask.squeeze(1)
    pre = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=True)
    pre.load_state_dict(ref.state_dict())
    pre.train()

    def no_residual():
        h = ref.norm1(ref.self_attn(x, x, x, key_padding_mask=pad, need_weights=False)[0])
        return ref.norm2(_ff(ref, h))
    with torch.no_grad():
        return {CAUSES["pre_norm"]: pre(x, src_key_padding_mask=pad), CAUSES["no_residual"]: no_residual()}


def _decoder_mistakes(ref, x, memory, mask) -> dict:
    """CAUSES words → what torch's decoder layer (weights of ``ref``) gives with that mistake."""
    pad = ~mask.squeeze(1)
    causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)  # torch: True = masked out
    pre = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=True)
    pre.load_state_dict(ref.state_dict())
    pre.train()

    def no_residual():
        h = ref.norm1(ref.self_attn(x, x, x, attn_mask=causal, need_weights=False)[0])
        h = ref.norm2(ref.multihead_attn(h, memory, memory, key_padding_mask=pad, need_weights=False)[0])
        return ref.norm3(_ff(ref, h))
    with torch.no_grad():
        return {CAUSES["pre_norm"]: pre(x, memory, tgt_mask=causal, memory_key_padding_mask=pad),
                CAUSES["no_residual"]: no_residual(),
                CAUSES["not_causal"]: ref(x, memory, memory_key_padding_mask=pad),
                CAUSES["memory_mask_ignored"]: ref(x, memory, tgt_mask=causal)}


def _randomise_norms(*norms):
    # LayerNorm starts as (1, 0): random affine parameters make a swapped norm visible.
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for n in norms:
            n.weight.copy_(0.5 + torch.rand(n.weight.shape, generator=g))
            n.bias.copy_(0.1 * torch.randn(n.bias.shape, generator=g))


def _copy_linear(dst, src):
    with torch.no_grad():
        dst.weight.copy_(src.weight)
        dst.bias.copy_(src.bias)


def _copy_norm(dst, src):
    with torch.no_grad():
        dst.weight.copy_(src.weight)
        dst.bias.copy_(src.bias)


def _pad_mask(b=2, s=7, real=(7, 4)):
    """bool (b, 1, s), True at real tokens: example i has ``real[i]`` real tokens, then padding."""
    return (torch.arange(s).unsqueeze(0) < torch.tensor(real).unsqueeze(1)).unsqueeze(1)


def _encoder_pair(EncoderLayer, seed=0):
    torch.manual_seed(seed)
    ref = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True)
    ref.train()  # dropout is 0; train mode keeps PyTorch on its plain (non fused) path
    _randomise_norms(ref.norm1, ref.norm2)
    mine = call(EncoderLayer, D, H, FF, what=f"EncoderLayer(d_model={D}, n_heads={H}, d_ff={FF})")
    _copy_from_torch_mha(mine.self_attn, ref.self_attn, D)
    _copy_linear(mine.ff.linear1, ref.linear1)
    _copy_linear(mine.ff.linear2, ref.linear2)
    _copy_norm(mine.norm1, ref.norm1)
    _copy_norm(mine.norm2, ref.norm2)
    return mine, ref


def check_encoder_layer_matches_torch(EncoderLayer):
    """Equal to nn.TransformerEncoderLayer (post-norm) with the same weights, with a source padding mask."""
    mine, ref = _encoder_pair(EncoderLayer)
    x = torch.randn(2, 7, D)
    mask = _pad_mask()
    out = call(mine, x, mask, what="EncoderLayer.forward(x, mask)")
    expect_shape(out, (2, 7, D), "EncoderLayer output")
    want = ref(x, src_key_padding_mask=~mask.squeeze(1))
    real = mask.squeeze(1)
    expect_close_naming(out[real], want[real],
                        "EncoderLayer vs nn.TransformerEncoderLayer (x = norm(x + sublayer(x)))",
                        {c: o[real] for c, o in _encoder_mistakes(ref, x, mask).items()}, atol=ATOL)


def check_encoder_layer_ignores_padding(EncoderLayer):
    """Changing what sits at padded source positions leaves the real positions' outputs unchanged."""
    mine, ref = _encoder_pair(EncoderLayer, seed=1)
    x = torch.randn(2, 7, D)
    mask = _pad_mask()
    y = x.clone()
    y[1, 4:] = torch.randn(3, D) * 5
    a = call(mine, x, mask, what="EncoderLayer.forward(x, mask)")
    b = call(mine, y, mask, what="EncoderLayer.forward(x, mask)")
    expect_close(b[1, :4], a[1, :4], "real positions after changing only padded ones (pass mask to self-attention)",
                 atol=ATOL)
    unmasked = call(mine, y, what="EncoderLayer.forward(x) without a mask")
    expect(not torch.allclose(unmasked[1, :4], a[1, :4], atol=1e-3),
           "without a mask the padded positions should matter: does self-attention use x?")
    # A layer that ignores padding but does not attend (a mean over the real positions) is not the layer.
    real = mask.squeeze(1)
    expect_close_naming(a[real], ref(x, src_key_padding_mask=~real)[real],
                        "EncoderLayer vs nn.TransformerEncoderLayer (x = norm(x + sublayer(x)))",
                        {c: o[real] for c, o in _encoder_mistakes(ref, x, mask).items()}, atol=ATOL)


def _decoder_pair(DecoderLayer, seed=0):
    torch.manual_seed(seed)
    ref = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True)
    ref.train()
    _randomise_norms(ref.norm1, ref.norm2, ref.norm3)
    mine = call(DecoderLayer, D, H, FF, what=f"DecoderLayer(d_model={D}, n_heads={H}, d_ff={FF})")
    _copy_from_torch_mha(mine.self_attn, ref.self_attn, D)
    _copy_from_torch_mha(mine.cross_attn, ref.multihead_attn, D)
    _copy_linear(mine.ff.linear1, ref.linear1)
    _copy_linear(mine.ff.linear2, ref.linear2)
    for name in ("norm1", "norm2", "norm3"):
        _copy_norm(getattr(mine, name), getattr(ref, name))
    return mine, ref


def check_decoder_layer_matches_torch(DecoderLayer):
    """Equal to nn.TransformerDecoderLayer with the same weights: causal self-attention, cross-attention over the
    memory with its padding mask, feed-forward; post-norm."""
    mine, ref = _decoder_pair(DecoderLayer)
    x, memory, mask = torch.randn(2, 5, D), torch.randn(2, 7, D), _pad_mask()
    out = call(mine, x, memory, mask, what="DecoderLayer.forward(x, memory, memory_mask)")
    expect_shape(out, (2, 5, D), "DecoderLayer output")
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)  # torch: True = masked out
    want = ref(x, memory, tgt_mask=causal, memory_key_padding_mask=~mask.squeeze(1))
    expect_close_naming(out, want, "DecoderLayer vs nn.TransformerDecoderLayer",
                        _decoder_mistakes(ref, x, memory, mask), atol=ATOL)


def check_decoder_layer_causal(DecoderLayer):
    """Changing a future target token leaves every earlier decoder output unchanged (and changes its own)."""
    mine, ref = _decoder_pair(DecoderLayer, seed=2)
    x, memory, mask = torch.randn(2, 6, D), torch.randn(2, 7, D), _pad_mask()
    y = x.clone()
    y[:, 4] = torch.randn(2, D) * 3
    a = call(mine, x, memory, mask, what="DecoderLayer.forward(x, memory, memory_mask)")
    b = call(mine, y, memory, mask, what="DecoderLayer.forward(x, memory, memory_mask)")
    expect_close(b[:, :4], a[:, :4], "outputs before the changed position 4 (self-attention must be causal)",
                 atol=ATOL)
    expect(not torch.allclose(b[:, 4], a[:, 4], atol=1e-3), "the output at the changed position 4 did not change")
    # Causal and changing, yet not the layer (the input echoed): anchored on torch's layer.
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)  # torch: True = masked out
    expect_close_naming(a, ref(x, memory, tgt_mask=causal, memory_key_padding_mask=~mask.squeeze(1)),
                        "DecoderLayer vs nn.TransformerDecoderLayer", _decoder_mistakes(ref, x, memory, mask),
                        atol=ATOL)


def check_decoder_layer_reads_source(DecoderLayer):
    """Cross-attention reads the memory: changing the source changes every output position; changing only padded
    source positions changes nothing; the weights are (B, n_heads, T, S), zero on padding, rows summing to 1."""
    mine, ref = _decoder_pair(DecoderLayer, seed=3)
    x, memory, mask = torch.randn(2, 5, D), torch.randn(2, 7, D), _pad_mask()
    a = call(mine, x, memory, mask, what="DecoderLayer.forward(x, memory, memory_mask)")
    other = call(mine, x, torch.randn(2, 7, D), mask, what="DecoderLayer.forward(x, other_memory, memory_mask)")
    changed = (other - a).abs().amax(dim=-1) > 1e-3  # (B, T)
    expect(bool(changed.all()), "changing the memory (the encoder output) must change every decoder output: "
                                "does cross-attention take its keys and values from memory?")
    padded = memory.clone()
    padded[1, 4:] = torch.randn(3, D) * 5
    b = call(mine, x, padded, mask, what="DecoderLayer.forward(x, memory, memory_mask)")
    expect_close(b, a, "outputs after changing only padded memory positions (pass memory_mask to cross-attention)",
                 atol=ATOL)
    res = call(mine, x, memory, mask, return_cross_weights=True,
               what="DecoderLayer.forward(..., return_cross_weights=True)")
    expect(isinstance(res, tuple) and len(res) == 2, "with return_cross_weights=True, return (output, weights)")
    expect_shape(res[1], (2, H, 5, 7), "cross-attention weights (B, n_heads, T, S)")
    expect(bool((res[1][1, :, :, 4:] == 0).all()), "padded source positions must get zero cross-attention weight")
    expect_close(res[1].sum(-1), torch.ones(2, H, 5), "each row of cross-attention weights must sum to 1", atol=1e-5)
    # Weights spread evenly over the real positions meet every rule above: they must be attention's own.
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)  # torch: True = masked out
    with torch.no_grad():
        h = ref.norm1(x + ref.self_attn(x, x, x, attn_mask=causal, need_weights=False)[0])
        _, want_w = ref.multihead_attn(h, memory, memory, key_padding_mask=~mask.squeeze(1), need_weights=True,
                                       average_attn_weights=False)
    expect_close(res[1], want_w, "cross-attention weights vs nn.TransformerDecoderLayer's (same weights)", atol=ATOL)
    expect_close_naming(a, ref(x, memory, tgt_mask=causal, memory_key_padding_mask=~mask.squeeze(1)),
                        "DecoderLayer vs nn.TransformerDecoderLayer", _decoder_mistakes(ref, x, memory, mask),
                        atol=ATOL)


@torch.no_grad()
def _stepwise_greedy(model, src_row, max_len):
    """Independent reference: one example, no padding, the whole prefix re-decoded at every step."""
    cfg = model.config
    src = src_row[src_row != cfg.pad_id].unsqueeze(0)
    memory = model.encode(src)
    out = [cfg.bos_id]
    while len(out) - 1 < max_len and out[-1] != cfg.eos_id:
        logits = model.decode(torch.tensor([out]), memory, model.padding_mask(src))
        out.append(int(logits[0, -1].argmax()))
    return out[1:]


class _EndsEarly:
    """The trained model, except that each row must write <eos> once it has written 1 + (its source length mod 7)
    characters: rows of one batch finish at different steps."""

    def __init__(self, model):
        self.model, self.config = model, model.config

    def encode(self, src):
        return self.model.encode(src)

    def padding_mask(self, src):
        return self.model.padding_mask(src)

    def decode(self, tgt, memory, memory_mask):
        logits = self.model.decode(tgt, memory, memory_mask).clone()
        stop_at = 1 + memory_mask.sum(dim=(1, 2)) % 7  # (B,)
        force = torch.arange(tgt.shape[1]).unsqueeze(0) >= stop_at.unsqueeze(1)  # position t has t characters
        eos = self.config.eos_id
        logits[..., eos] = torch.where(force, torch.full_like(logits[..., eos], 1e4), logits[..., eos])
        return logits


def _expect_greedy_equals_stepwise(greedy_decode, model, src, max_len, what):
    got = call(greedy_decode, model, src, max_len, what=f"greedy_decode(model, src, max_len={max_len})")
    expect(isinstance(got, torch.Tensor) and got.dim() == 2 and got.shape[0] == src.shape[0],
           f"{what}: expected a (B, T) tensor of token ids, got {getattr(got, 'shape', type(got).__name__)}")
    want = [_stepwise_greedy(model, row, max_len) for row in src]
    longest = max(len(w) for w in want)
    expect(got.shape[1] == longest, f"{what}: expected {longest} generated tokens (stop when every row has "
                                    f"<eos>, never more than max_len={max_len}), got {got.shape[1]}")
    pad = model.config.pad_id
    for i, w in enumerate(want):
        row = [int(t) for t in got[i]]
        expect(row == w + [pad] * (longest - len(w)),
               f"{what}: row {i} is {row}, expected {w} then <pad> (the argmax at each step, <bos> not included)")


def check_greedy_decode_batched(greedy_decode):
    """Batched greedy decoding equals decoding each example alone; rows end at <eos> then <pad>; max_len holds."""
    from part0_foundations.l02_encoder_decoder.model import Seq2Seq, Seq2SeqConfig, load_model

    model = load_model()
    src, _ = data.batch_tensors(FIXED_EXAMPLES[:8])  # different lengths: padding inside the batch
    _expect_greedy_equals_stepwise(greedy_decode, model, src, data.TARGET_LEN, "trained model")
    _expect_greedy_equals_stepwise(greedy_decode, model, src, 4, "trained model, max_len=4")
    _expect_greedy_equals_stepwise(greedy_decode, _EndsEarly(model), src, data.TARGET_LEN,
                                   "a model whose rows write <eos> at different steps")
    # An untrained model rarely says <eos>: decoding must stop at max_len.
    torch.manual_seed(0)
    tiny = Seq2Seq(Seq2SeqConfig(vocab_size=len(data.VOCAB), d_model=16, n_heads=2, d_ff=32)).eval()
    _expect_greedy_equals_stepwise(greedy_decode, tiny, src[:3], 6, "untrained model, max_len=6")


def check_greedy_decode_translates(greedy_decode):
    """With the reference checkpoint, greedy decoding turns one date in every form into its true ISO date."""
    from part0_foundations.l02_encoder_decoder.model import load_model

    model = load_model()
    src, _ = data.batch_tensors(FIXED_EXAMPLES)
    out = call(greedy_decode, model, src, data.TARGET_LEN, what="greedy_decode(model, src, max_len=11)")
    for (text, iso), row in zip(FIXED_EXAMPLES, out):
        got = data.decode_ids(row)
        expect(got == iso, f"greedy_decode translated {text!r} as {got!r}, expected {iso!r}")


def check_checkpoint_in_your_layers(Seq2Seq):
    """The reference checkpoint loaded into Seq2Seq built from your EncoderLayer and DecoderLayer translates one
    date in every form into its true ISO date (decoded with the reference greedy_decode)."""
    from part0_foundations.l02_encoder_decoder.model import greedy_decode, load_model

    model = call(load_model, model_cls=Seq2Seq, what="load_model(model_cls=Seq2Seq)")
    src, _ = data.batch_tensors(FIXED_EXAMPLES)
    out = call(greedy_decode, model, src, data.TARGET_LEN, what="greedy decoding with your layers")
    for (text, iso), row in zip(FIXED_EXAMPLES, out):
        got = data.decode_ids(row)
        expect(got == iso, f"with your layers, {text!r} translated as {got!r}, expected {iso!r}")


# Every check runs its model on one thread (see grading.one_torch_thread).
for _name in [n for n in dir() if n.startswith("check_")]:
    globals()[_name] = one_torch_thread(globals()[_name])

# The greedy checks decode with the reference model: its layers are the check's, not copied by the learner.
_REFERENCE_MODEL = ("EncoderLayer", "DecoderLayer", "Seq2Seq")
LESSON = Lesson(
    package="part0_foundations.l02_encoder_decoder",
    reference=("part0_foundations.l02_encoder_decoder.model",),
    # The layers are the exercise: torch's own Transformer layers and attention are off limits.
    forbids=(method.TRANSFORMER, method.MHA, method.SDPA),
    checks=(
        Check("encoder_layer_matches_torch", "EncoderLayer", check_encoder_layer_matches_torch, 2),
        Check("encoder_layer_ignores_padding", "EncoderLayer", check_encoder_layer_ignores_padding, 1, hidden=True),
        Check("decoder_layer_matches_torch", "DecoderLayer", check_decoder_layer_matches_torch, 2),
        Check("decoder_layer_causal", "DecoderLayer", check_decoder_layer_causal, 1),
        Check("decoder_layer_reads_source", "DecoderLayer", check_decoder_layer_reads_source, 2),
        Check("greedy_decode_batched", "greedy_decode", check_greedy_decode_batched, 2, allows=_REFERENCE_MODEL),
        Check("greedy_decode_translates", "greedy_decode", check_greedy_decode_translates, 1, hidden=True,
              allows=_REFERENCE_MODEL),
        Check("checkpoint_in_your_layers", "Seq2Seq", check_checkpoint_in_your_layers, 3, allows=("greedy_decode",)),
    ),
)
"""The lesson contract: the notebook's test cells, tests/autograder and the checks' own tests all read it."""
ALL = LESSON.table()
