"""Every rule of the lesson-02 checks, with the learner's message it gives, word for word.

tests/part0/l02_encoder_decoder/test_encoder_decoder.py shows each check rejecting a plausible mistake; here the reference passes every check,
each rule is broken alone by a variant of the reference and its message pinned (whole where the check's words carry
no model output; by its exact form where they list decoded tokens), each ``call()`` label is pinned by an
implementation raising there (``"<label> raised RuntimeError: boom"``), and each tolerance by an error 5 × the one
allowed. Plain functions without arguments, so that ``tools/mutation.py --verify`` can run them."""
import re

import torch

from part0_foundations.l02_encoder_decoder import checks, data
from part0_foundations.l02_encoder_decoder import model as M
from tests.support.rules import BOOM, message


def test_the_reference_passes_every_check():
    for c in checks.LESSON.checks:
        c.fn(getattr(M, c.name))


# --- EncoderLayer ------------------------------------------------------------------------------------------------------
def encoder(forward=None, init_fails=False):
    """The reference EncoderLayer with ``forward(self, x, mask, reference_forward)`` instead of its own."""
    class Enc(M.EncoderLayer):
        def __init__(self, *a, **kw):
            if init_fails:
                raise RuntimeError("boom")
            super().__init__(*a, **kw)

        def forward(self, x, mask=None):
            if forward is None:
                return super().forward(x, mask)
            return forward(self, x, mask, super().forward)
    return Enc


def _raise():
    raise RuntimeError("boom")


def test_encoder_labels():
    assert message(checks.check_encoder_layer_matches_torch, encoder(init_fails=True)) == (
        f"EncoderLayer(d_model=16, n_heads=4, d_ff=32) {BOOM}")
    assert message(checks.check_encoder_layer_matches_torch, encoder(lambda s, x, m, f: _raise())) == (
        f"EncoderLayer.forward(x, mask) {BOOM}")
    assert message(checks.check_encoder_layer_ignores_padding, encoder(lambda s, x, m, f: _raise())) == (
        f"EncoderLayer.forward(x, mask) {BOOM}")
    assert message(checks.check_encoder_layer_ignores_padding,
                   encoder(lambda s, x, m, f: _raise() if m is None else f(x, m))) == (
        f"EncoderLayer.forward(x) without a mask {BOOM}")
    calls = []
    second = encoder(lambda s, x, m, f: (calls.append(1), _raise() if len(calls) == 2 else f(x, m))[1])
    assert message(checks.check_encoder_layer_ignores_padding, second) == f"EncoderLayer.forward(x, mask) {BOOM}"


def test_encoder_messages():
    c = checks.check_encoder_layer_matches_torch
    assert message(c, encoder(lambda s, x, m, f: f(x, m)[:, :-1])) == (
        "EncoderLayer output: expected shape (2, 7, 16), got (2, 6, 16)")

    def pre_norm(self, x, mask, f):
        x = x + self.self_attn(self.norm1(x), mask=mask)
        return x + self.ff(self.norm2(x))
    assert message(c, encoder(pre_norm)) == ("EncoderLayer vs nn.TransformerEncoderLayer (x = norm(x + sublayer(x))): "
                                             + checks.CAUSES["pre_norm"])     # the mistake recognised, named
    # 5e-5 off: 5 × the allowed 1e-5
    assert message(c, encoder(lambda s, x, m, f: f(x, m) + 5e-5)).startswith(
        "EncoderLayer vs nn.TransformerEncoderLayer (x = norm(x + sublayer(x))): differs")

    p = checks.check_encoder_layer_ignores_padding
    assert message(p, encoder(lambda s, x, m, f: f(x, None))).startswith(
        "real positions after changing only padded ones (pass mask to self-attention): differs from the reference")
    # the real positions move by 5e-5 when only the padding changes (its values are 5 × larger): 5 × the allowed
    nudge = lambda s, x, m, f: f(x, m) + 5e-5 * (x[1, 4:].abs().mean() > 2)
    assert message(p, encoder(nudge)).startswith("real positions after changing only padded ones")

    def no_attention(self, x, mask, f):       # each position on its own: padding never matters
        x = self.norm1(x)
        return self.norm2(x + self.ff(x))
    assert message(p, encoder(no_attention)) == (
        "without a mask the padded positions should matter: does self-attention use x?")


def test_the_torch_comparison_reads_the_padded_row_too():
    # Row 0 of the check's batch is all real tokens, row 1 has 3 padded positions: a layer that ignores the mask
    # equals torch's on row 0 (nothing to mask there) and differs only on row 1's 4 real positions, where it also
    # attends to the padding. A check reading only the unpadded row would pass it.
    c = checks.check_encoder_layer_matches_torch
    assert message(c, encoder(lambda s, x, m, f: f(x, None))).startswith(
        "EncoderLayer vs nn.TransformerEncoderLayer (x = norm(x + sublayer(x))): differs from the reference by up to")


# --- DecoderLayer ------------------------------------------------------------------------------------------------------
def decoder(forward=None, init_fails=False):
    """The reference DecoderLayer with ``forward(self, x, memory, mask, weights, reference_forward)``."""
    class Dec(M.DecoderLayer):
        def __init__(self, *a, **kw):
            if init_fails:
                raise RuntimeError("boom")
            super().__init__(*a, **kw)

        def forward(self, x, memory, memory_mask=None, return_cross_weights=False):
            if forward is None:
                return super().forward(x, memory, memory_mask, return_cross_weights)
            return forward(self, x, memory, memory_mask, return_cross_weights, super().forward)
    return Dec


def test_decoder_labels():
    assert message(checks.check_decoder_layer_matches_torch, decoder(init_fails=True)) == (
        f"DecoderLayer(d_model=16, n_heads=4, d_ff=32) {BOOM}")
    for check in (checks.check_decoder_layer_matches_torch, checks.check_decoder_layer_causal,
                  checks.check_decoder_layer_reads_source):
        assert message(check, decoder(lambda s, x, mem, m, w, f: _raise())) == (
            f"DecoderLayer.forward(x, memory, memory_mask) {BOOM}")

    def nth(n, when=lambda *a: True):
        calls = []

        def fwd(s, x, mem, m, w, f):
            calls.append(1)
            return _raise() if len(calls) == n and when(w) else f(x, mem, m, w)
        return decoder(fwd)
    assert message(checks.check_decoder_layer_causal, nth(2)) == f"DecoderLayer.forward(x, memory, memory_mask) {BOOM}"
    r = checks.check_decoder_layer_reads_source
    assert message(r, nth(2)) == f"DecoderLayer.forward(x, other_memory, memory_mask) {BOOM}"
    assert message(r, nth(3)) == f"DecoderLayer.forward(x, memory, memory_mask) {BOOM}"
    assert message(r, decoder(lambda s, x, mem, m, w, f: _raise() if w else f(x, mem, m, w))) == (
        f"DecoderLayer.forward(..., return_cross_weights=True) {BOOM}")


def test_decoder_messages():
    c = checks.check_decoder_layer_matches_torch
    assert message(c, decoder(lambda s, x, mem, m, w, f: f(x, mem, m, w)[:, :-1])) == (
        "DecoderLayer output: expected shape (2, 5, 16), got (2, 4, 16)")

    def not_causal(self, x, memory, mask, w, f):
        x = self.norm1(x + self.self_attn(x))
        a, cw = self.cross_attn(x, memory, mask=mask, return_weights=True)
        x = self.norm3(x + self.ff(self.norm2(x + a)))
        return (x, cw) if w else x
    assert message(c, decoder(not_causal)).startswith("DecoderLayer vs nn.TransformerDecoderLayer: differs from the "
                                                      "reference by up to")
    assert message(c, decoder(lambda s, x, mem, m, w, f: f(x, mem, m, w) + 5e-5)).startswith(    # 5 × the allowed
        "DecoderLayer vs nn.TransformerDecoderLayer: differs")

    k = checks.check_decoder_layer_causal
    assert message(k, decoder(not_causal)).startswith(
        "outputs before the changed position 4 (self-attention must be causal): differs from the reference")
    # a position's output moves by 5e-5 when a later one changes: 5 × the allowed 1e-5
    leak = lambda s, x, mem, m, w, f: f(x, mem, m, w) + 5e-5 * (x[:, 4:].abs().mean() > 1.5)
    assert message(k, decoder(leak)).startswith("outputs before the changed position 4")

    def shifted(self, x, memory, mask, w, f):  # each position reads only the ones before it, not itself
        return f(torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], dim=1), memory, mask, w)
    assert message(k, decoder(shifted)) == "the output at the changed position 4 did not change"

    r = checks.check_decoder_layer_reads_source

    def self_instead_of_cross(self, x, memory, mask, w, f):
        x = self.norm1(x + self.self_attn(x, causal=True))
        a, cw = self.cross_attn(x, return_weights=True, causal=True)
        x = self.norm3(x + self.ff(self.norm2(x + a)))
        return (x, cw) if w else x
    assert message(r, decoder(self_instead_of_cross)) == (
        "changing the memory (the encoder output) must change every decoder output: does cross-attention take its "
        "keys and values from memory?")
    assert message(r, decoder(lambda s, x, mem, m, w, f: f(x, mem, None, w))).startswith(
        "outputs after changing only padded memory positions (pass memory_mask to cross-attention): differs")
    pad_leak = lambda s, x, mem, m, w, f: (lambda o: o if w else o + 5e-5 * (mem[1, 4:].abs().mean() > 2))(
        f(x, mem, m, w))
    assert message(r, decoder(pad_leak)).startswith("outputs after changing only padded memory positions")
    assert message(r, decoder(lambda s, x, mem, m, w, f: f(x, mem, m, False))) == (
        "with return_cross_weights=True, return (output, weights)")
    tw = lambda change: decoder(lambda s, x, mem, m, w, f: (lambda o: (o[0], change(o[1], s, x, mem)) if w else o)(
        f(x, mem, m, w)))
    assert message(r, tw(lambda cw, s, x, mem: cw.transpose(-1, -2))) == (
        "cross-attention weights (B, n_heads, T, S): expected shape (2, 4, 5, 7), got (2, 4, 7, 5)")
    # the weights reported without the mask (the output with it)
    unmasked = lambda cw, s, x, mem: s.cross_attn(x, mem, return_weights=True)[1]
    assert message(r, tw(unmasked)) == "padded source positions must get zero cross-attention weight"
    assert message(r, tw(lambda cw, s, x, mem: cw * 0.5)).startswith(
        "each row of cross-attention weights must sum to 1: differs from the reference")
    assert message(r, tw(lambda cw, s, x, mem: cw * (1 + 5e-5))).startswith(     # 5 × the allowed 1e-5
        "each row of cross-attention weights must sum to 1: differs")


# --- greedy_decode -----------------------------------------------------------------------------------------------------
def _no_stop(model, src, max_len):
    """Decodes max_len steps whatever the rows write."""
    memory, mask = model.encode(src), model.padding_mask(src)
    out = torch.full((src.shape[0], 1), model.config.bos_id)
    for _ in range(max_len):
        out = torch.cat([out, model.decode(out, memory, mask)[:, -1:].argmax(-1)], dim=1)
    return out[:, 1:]


def _no_pad(model, src, max_len):
    """Stops when every row has <eos>, but finished rows keep their argmax instead of <pad>."""
    memory, mask = model.encode(src), model.padding_mask(src)
    out = torch.full((src.shape[0], 1), model.config.bos_id)
    done = torch.zeros(src.shape[0], dtype=torch.bool)
    for _ in range(max_len):
        nxt = model.decode(out, memory, mask)[:, -1].argmax(-1)
        out = torch.cat([out, nxt[:, None]], dim=1)
        done |= nxt == model.config.eos_id
        if bool(done.all()):
            break
    return out[:, 1:]


def test_greedy_labels():
    def boom(model, src, max_len):
        raise RuntimeError("boom")
    b = checks.check_greedy_decode_batched
    assert message(b, boom) == f"greedy_decode(model, src, max_len=11) {BOOM}"
    assert message(b, lambda m, s, n: boom(m, s, n) if n == 4 else M.greedy_decode(m, s, n)) == (
        f"greedy_decode(model, src, max_len=4) {BOOM}")
    assert message(b, lambda m, s, n: boom(m, s, n) if n == 6 else M.greedy_decode(m, s, n)) == (
        f"greedy_decode(model, src, max_len=6) {BOOM}")
    assert message(checks.check_greedy_decode_translates, boom) == f"greedy_decode(model, src, max_len=11) {BOOM}"


def test_greedy_messages():
    b = checks.check_greedy_decode_batched
    assert message(b, lambda m, s, n: M.greedy_decode(m, s, n).tolist()) == (
        "trained model: expected a (B, T) tensor of token ids, got list")
    assert message(b, lambda m, s, n: M.greedy_decode(m, s, n)[:-1]) == (
        "trained model: expected a (B, T) tensor of token ids, got torch.Size([7, 11])")
    # max_len 4 with the trained model: 4 tokens, none of them <eos>
    assert message(b, lambda m, s, n: M.greedy_decode(m, s, n) if n != 4 else M.greedy_decode(m, s, 5)) == (
        "trained model, max_len=4: expected 4 generated tokens (stop when every row has <eos>, never more than "
        "max_len=4), got 5")
    assert re.fullmatch(r"a model whose rows write <eos> at different steps: expected \d+ generated tokens \(stop when "
                        r"every row has <eos>, never more than max_len=11\), got 11", message(b, _no_stop))
    assert re.fullmatch(r"a model whose rows write <eos> at different steps: row \d is \[[\d, ]+\], expected "
                        r"\[[\d, ]+\] then <pad> \(the argmax at each step, <bos> not included\)", message(b, _no_pad))

    def untrained_only(model, src, max_len):   # wrong only on the untrained model (max_len 6): one step short
        return M.greedy_decode(model, src, max_len - (max_len == 6))
    assert message(b, untrained_only) == ("untrained model, max_len=6: expected 6 generated tokens (stop when every "
                                          "row has <eos>, never more than max_len=6), got 5")

    t = checks.check_greedy_decode_translates
    text, iso = checks.FIXED_EXAMPLES[0]

    def first_row_off(model, src, max_len):     # the first date's year starts with 2 instead of 1 (or 1 for 2)
        out = M.greedy_decode(model, src, max_len).clone()
        out[0, 0] = data.encode_text("2" if iso[0] == "1" else "1")[0]
        return out
    wrong = ("2" if iso[0] == "1" else "1") + iso[1:]
    assert message(t, first_row_off) == f"greedy_decode translated {text!r} as {wrong!r}, expected {iso!r}"


# --- Seq2Seq with the learner's layers ---------------------------------------------------------------------------------
def test_checkpoint_messages():
    c = checks.check_checkpoint_in_your_layers

    class FailsToBuild(M.Seq2Seq):
        def __init__(self, config):
            raise RuntimeError("boom")
    assert message(c, FailsToBuild) == f"load_model(model_cls=Seq2Seq) {BOOM}"

    class FailsToDecode(M.Seq2Seq):
        def encode(self, src):
            raise RuntimeError("boom")
    assert message(c, FailsToDecode) == f"greedy decoding with your layers {BOOM}"
    text, iso = checks.FIXED_EXAMPLES[0]

    class NoCrossAttention(M.Seq2Seq):        # the decoder never reads the source: every date becomes one answer
        def decode(self, tgt, memory, memory_mask, return_cross_weights=False):
            return super().decode(tgt, torch.zeros_like(memory), memory_mask, return_cross_weights)
    msg = message(c, NoCrossAttention)
    assert re.fullmatch(rf"with your layers, {re.escape(repr(text))} translated as '[^']*', expected {re.escape(repr(iso))}",
                        msg), msg



# --- the inputs' choices, each held by the mistake it catches ----------------------------------------------------------
def _ln(x):
    return torch.nn.functional.layer_norm(x, x.shape[-1:])


def test_each_norm_keeps_its_own_weight_and_bias():
    # LayerNorm without its learned weight and bias (F.layer_norm) in one place: the check's norms are random, so it
    # is caught in every place
    def enc(which):
        def forward(self, x, mask, f):
            n1 = _ln if which == 1 else self.norm1
            n2 = _ln if which == 2 else self.norm2
            x = n1(x + self.self_attn(x, mask=mask))
            return n2(x + self.ff(x))
        return encoder(forward)
    for which in (1, 2):
        assert message(checks.check_encoder_layer_matches_torch, enc(which)).startswith(
            "EncoderLayer vs nn.TransformerEncoderLayer (x = norm(x + sublayer(x))): differs")

    def dec(which):
        def forward(self, x, memory, mask, w, f):
            n = [_ln if which == i else getattr(self, f"norm{i}") for i in (1, 2, 3)]
            x = n[0](x + self.self_attn(x, causal=True))
            a, cw = self.cross_attn(x, memory, mask=mask, return_weights=True)
            x = n[1](x + a)
            x = n[2](x + self.ff(x))
            return (x, cw) if w else x
        return decoder(forward)
    for which in (1, 2, 3):
        assert message(checks.check_decoder_layer_matches_torch, dec(which)).startswith(
            "DecoderLayer vs nn.TransformerDecoderLayer: differs")


def test_what_counts_as_a_change():
    # position t's output moving by 1e-5 when x[t] changes is "did not change" (allclose at 1e-3) ...
    def reads_itself(weight):
        def fwd(self, x, memory, mask, w, f):
            shifted = torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], dim=1)
            out = f(shifted, memory, mask, w)
            return out if w else out + weight * x
        return decoder(fwd)
    assert message(checks.check_decoder_layer_causal, reads_itself(1e-5)) == (
        "the output at the changed position 4 did not change")
    # ... and moving by about 0.03 (1 % of the input) is a change: past that rule, the layer meets torch's and is not it
    assert message(checks.check_decoder_layer_causal, reads_itself(0.01)).startswith(
        "DecoderLayer vs nn.TransformerDecoderLayer: differs")

    # the same for padding read without a mask: 1e-5 of the mean over positions is "should matter", 1 % is enough
    def mixes(weight):
        def fwd(self, x, mask, f):
            x1 = self.norm1(x)
            out = self.norm2(x1 + self.ff(x1))
            return out if mask is not None else out + weight * x.mean(dim=1, keepdim=True)
        return encoder(fwd)
    assert message(checks.check_encoder_layer_ignores_padding, mixes(1e-5)) == (
        "without a mask the padded positions should matter: does self-attention use x?")
    assert message(checks.check_encoder_layer_ignores_padding, mixes(0.01)).startswith(
        "EncoderLayer vs nn.TransformerEncoderLayer (x = norm(x + sublayer(x))): differs")


def test_padded_outputs_are_free():
    # the encoder's outputs at padded positions are compared with nothing: zeroing them is right
    zeroed = encoder(lambda s, x, m, f: f(x, m) * m.squeeze(1)[..., None] if m is not None else f(x, m))
    checks.check_encoder_layer_matches_torch(zeroed)


def test_the_memory_is_read_everywhere_and_with_its_mask():
    r = checks.check_decoder_layer_reads_source
    says = ("changing the memory (the encoder output) must change every decoder output: does cross-attention take its "
            "keys and values from memory?")

    def memory_only_unmasked(self, x, memory, mask, w, f):      # with a mask, attends over x instead
        return f(x, memory if mask is None else x[:, :1].expand(-1, memory.shape[1], -1).contiguous(), mask, w)
    assert message(r, decoder(memory_only_unmasked)) == says

    def first_position_only(self, x, memory, mask, w, f):       # positions after the first never see the memory
        out = f(x, memory, mask, w)
        still = f(x, torch.zeros_like(memory), mask, w)
        if w:
            return torch.cat([out[0][:, :1], still[0][:, 1:]], dim=1), out[1]
        return torch.cat([out[:, :1], still[:, 1:]], dim=1)
    assert message(r, decoder(first_position_only)) == says

    def leaks_at_4(self, x, memory, mask, w, f):                 # 1e-7 of weight on padded source position 4
        out = f(x, memory, mask, w)
        if not w:
            return out
        cw = out[1].clone()
        cw[1, :, :, 4] = 1e-7
        return out[0], cw
    assert message(r, decoder(leaks_at_4)) == "padded source positions must get zero cross-attention weight"


def test_rows_end_at_different_steps():
    def stops_at_first_eos(model, src, max_len):   # stops when any row has written <eos>
        memory, mask = model.encode(src), model.padding_mask(src)
        out = torch.full((src.shape[0], 1), model.config.bos_id)
        done = torch.zeros(src.shape[0], dtype=torch.bool)
        for _ in range(max_len):
            nxt = model.decode(out, memory, mask)[:, -1].argmax(-1).masked_fill(done, model.config.pad_id)
            out = torch.cat([out, nxt[:, None]], dim=1)
            done |= nxt == model.config.eos_id
            if bool(done.any()):
                break
        return out[:, 1:]
    assert re.fullmatch(r"a model whose rows write <eos> at different steps: expected \d+ generated tokens \(stop when "
                        r"every row has <eos>, never more than max_len=11\), got \d+",
                        message(checks.check_greedy_decode_batched, stops_at_first_eos))
