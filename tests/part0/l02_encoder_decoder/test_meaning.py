"""Lesson 02's grades mean the learner built the layers: torch's Transformer layers or attention earn nothing (the
message names the call), and degenerate layers, decoders and models earn 0 points in total."""
import pytest
import torch
from torch import nn

from course.grading.contract import CheckFailed
from part0_foundations.l02_encoder_decoder import checks
from part0_foundations.l02_encoder_decoder import model as M
from tests.support.rules import DEGENERATE_KINDS, lesson_points

LESSON = checks.LESSON
KINDS = DEGENERATE_KINDS


def points(impls: dict) -> tuple[int, dict]:
    return lesson_points(LESSON, impls)


def _fill(kind, x, g):
    if kind == "zeros":
        return torch.zeros_like(x)
    if kind == "ones":
        return torch.ones_like(x)
    if kind == "constant":
        return torch.full_like(x, 0.37)
    if kind == "random":
        return torch.randn(x.shape, generator=g)
    if kind == "noise":
        return x + 0.1 * torch.randn(x.shape, generator=g)
    if kind == "identity":
        return nn.functional.layer_norm(x, x.shape[-1:])
    return x.clone()  # echo


def _mean(seq, mask):
    """Each sequence's mean over its real positions (uniform weights), broadcast over ``like`` positions."""
    w = torch.ones(seq.shape[:2]) if mask is None else mask.squeeze(1).float()
    return (seq * w[..., None]).sum(1, keepdim=True) / w.sum(1, keepdim=True)[..., None]


def degenerate(kind):
    g = torch.Generator().manual_seed(3)

    class Enc(M.EncoderLayer):
        def forward(self, x, mask=None):
            if kind == "uniform":
                return self.norm1(x + _mean(x, mask))
            return _fill(kind, x, g)

    class Dec(M.DecoderLayer):
        def forward(self, x, memory, memory_mask=None, return_cross_weights=False):
            if kind == "uniform":
                past = x.cumsum(1) / torch.arange(1, x.shape[1] + 1)[:, None]   # uniform over the past: causal
                out = self.norm1(x + _mean(memory, memory_mask) + 0.5 * past)
            else:
                out = _fill(kind, x, g)
            real = torch.ones(memory.shape[0], 1, memory.shape[1]) if memory_mask is None else memory_mask.float()
            w = (real / real.sum(-1, keepdim=True))[:, None].expand(-1, self.cross_attn.n_heads, x.shape[1], -1)
            return (out, w) if return_cross_weights else out

    def greedy(model, src, max_len):
        shape = (src.shape[0], max_len)
        if kind == "echo":
            return src[:, :max_len].clone()
        fill = {"zeros": 0, "ones": 1, "constant": 5, "identity": model.config.eos_id}.get(kind)
        if fill is not None:
            return torch.full(shape, fill)
        return torch.randint(0, model.config.vocab_size, shape, generator=g)

    class Model(M.Seq2Seq):
        def decode(self, tgt, memory, memory_mask, return_cross_weights=False):
            logits = super().decode(tgt, memory, memory_mask)
            if kind in ("echo", "identity"):   # each position says its own input token again
                return 10.0 * nn.functional.one_hot(tgt, logits.shape[-1]).float()
            return _fill("random" if kind in ("uniform", "noise") else kind, logits, g)

    return {"EncoderLayer": Enc, "DecoderLayer": Dec, "greedy_decode": greedy, "Seq2Seq": Model}


@pytest.mark.parametrize("kind", KINDS)
def test_degenerate_answers_earn_nothing(kind, one_torch_thread):
    earned, messages = points(degenerate(kind))
    assert earned == 0, (earned, sorted(set(LESSON.ids()) - set(messages)))


def test_torch_transformer_layers_earn_nothing(one_torch_thread):
    class Enc(M.EncoderLayer):
        def forward(self, x, mask=None):
            layer = nn.TransformerEncoderLayer(x.shape[-1], self.self_attn.n_heads, self.ff.linear1.out_features,
                                               dropout=0.0, batch_first=True)
            return layer(x, src_key_padding_mask=None if mask is None else ~mask.squeeze(1))

    class Dec(M.DecoderLayer):
        def forward(self, x, memory, memory_mask=None, return_cross_weights=False):
            attn = nn.MultiheadAttention(x.shape[-1], self.self_attn.n_heads, batch_first=True)
            out = attn(x, memory, memory)[0]
            return (out, attn(x, memory, memory, average_attn_weights=False)[1]) if return_cross_weights else out

    impls = dict(degenerate("zeros"), EncoderLayer=Enc, DecoderLayer=Dec)
    earned, messages = points(impls)
    assert earned == 0
    for check_id in ("encoder_layer_matches_torch", "encoder_layer_ignores_padding", "decoder_layer_matches_torch",
                     "decoder_layer_causal", "decoder_layer_reads_source"):
        assert messages[check_id].startswith("calls torch's nn.MultiheadAttention"), messages[check_id]


def test_the_reference_keeps_every_point(one_torch_thread):
    earned, messages = points({n: getattr(M, n) for n in LESSON.names()})
    assert earned == LESSON.points, messages


# --- hints name the real cause ------------------------------------------------------------------------------------------
def mistaken(mistake):
    """The reference layers written with one common mistake."""
    class Enc(M.EncoderLayer):
        def forward(self, x, mask=None):
            if mistake == "pre_norm":
                x = x + self.self_attn(self.norm1(x), mask=mask)
                return x + self.ff(self.norm2(x))
            if mistake == "no_residual":
                x = self.norm1(self.self_attn(x, mask=mask))
                return self.norm2(self.ff(x))
            return super().forward(x, mask)

    class Dec(M.DecoderLayer):
        def forward(self, x, memory, memory_mask=None, return_cross_weights=False):
            if mistake == "pre_norm":
                x = x + self.self_attn(self.norm1(x), causal=True)
                att, w = self.cross_attn(self.norm2(x), memory, mask=memory_mask, return_weights=True)
                x = x + att
                x = x + self.ff(self.norm3(x))
                return (x, w) if return_cross_weights else x
            if mistake == "no_residual":
                x = self.norm1(self.self_attn(x, causal=True))
                att, w = self.cross_attn(x, memory, mask=memory_mask, return_weights=True)
                x = self.norm3(self.ff(self.norm2(att)))
                return (x, w) if return_cross_weights else x
            if mistake == "not_causal":
                x = self.norm1(x + self.self_attn(x))
                att, w = self.cross_attn(x, memory, mask=memory_mask, return_weights=True)
                x = self.norm3(self.norm2(x + att) + self.ff(self.norm2(x + att)))
                return (x, w) if return_cross_weights else x
            if mistake == "memory_mask_ignored":
                return super().forward(x, memory, None, return_cross_weights)
            return super().forward(x, memory, memory_mask, return_cross_weights)

    return {"EncoderLayer": Enc, "DecoderLayer": Dec}


LAYER_MISTAKES = {"pre_norm": ("EncoderLayer", "DecoderLayer"), "no_residual": ("EncoderLayer", "DecoderLayer"),
                  "not_causal": ("DecoderLayer",), "memory_mask_ignored": ("DecoderLayer",)}


@pytest.mark.parametrize("mistake", sorted(LAYER_MISTAKES))
def test_a_layer_mistake_is_named_and_nothing_else(mistake, one_torch_thread):
    impls = mistaken(mistake)
    failed = {}
    for c in LESSON.checks:
        if c.name not in LAYER_MISTAKES[mistake]:
            continue
        try:
            c.fn(impls[c.name])
        except CheckFailed as exc:
            failed[c.id] = str(exc)
    for name in LAYER_MISTAKES[mistake]:       # the comparison with torch's layer recognises it and says it
        check_id = "encoder_layer_matches_torch" if name == "EncoderLayer" else "decoder_layer_matches_torch"
        assert checks.CAUSES[mistake] in failed.get(check_id, ""), (check_id, failed.get(check_id))
    for check_id, message in failed.items():   # and no check names a mistake not made
        others = [c for c in checks.CAUSES if c != mistake and checks.CAUSES[c] in message]
        assert not others, (check_id, message, others)
