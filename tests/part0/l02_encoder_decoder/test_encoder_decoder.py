"""Lesson 02 reference behaviour beyond the autograder checks: the model, the shipped checkpoint and its recorded
results, translate() and its CLI, training and checkpoint round trips, and that the checks catch real mistakes."""
import json
import math
import subprocess
import sys

import pytest
import torch

from part0_foundations.l02_encoder_decoder import checks, data, evaluate, model as M, train
from part0_foundations.l02_encoder_decoder.translate import translate, translate_many
from course.grading.contract import CheckFailed

REPO = M.CHECKPOINT.parents[2]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def shipped():
    return M.load_model()


@pytest.fixture(scope="module")
def results():
    return json.loads(train.RESULTS.read_text())


def _tiny(seed=0):
    torch.manual_seed(seed)
    return M.Seq2Seq(M.Seq2SeqConfig(vocab_size=len(data.VOCAB), d_model=16, n_heads=2, d_ff=32)).eval()


def test_positions_follow_the_paper():
    pe = M.sinusoidal_positions(50, 8)
    for pos in (0, 1, 7, 49):
        for i in range(4):
            angle = pos / 10000 ** (2 * i / 8)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_model_is_causal_and_padding_blind():
    m = _tiny()
    src = data.source_tensor(["3 March 2021", "03/03/21"])
    tgt = torch.tensor([[data.BOS_ID] + data.encode_text("2021-03-03")] * 2)
    with torch.no_grad():
        a = m(src, tgt)
        changed = tgt.clone()
        changed[:, 6:] = data.STOI["7"]
        b = m(src, changed)
        torch.testing.assert_close(b[:, :6], a[:, :6], atol=1e-6, rtol=0)
        # The short text alone (no padding) gives the same logits as inside the padded batch.
        alone = m(data.source_tensor(["03/03/21"]), tgt[1:])
        torch.testing.assert_close(alone[0], a[1], atol=1e-5, rtol=0)


def test_checkpoint_is_small_and_loads_without_pickled_code():
    assert M.CHECKPOINT.stat().st_size < 8e6
    ckpt = torch.load(M.CHECKPOINT, map_location="cpu", weights_only=True)
    assert ckpt["format"] == M.CHECKPOINT_FORMAT and ckpt["vocab"] == data.VOCAB


def test_checkpoint_round_trip_and_refusals(tmp_path):
    m = _tiny()
    M.save_checkpoint(m, data.VOCAB, tmp_path / "c.pt")
    back = M.load_model(tmp_path / "c.pt")
    src = data.source_tensor(["3 March 2021"])
    assert torch.equal(M.greedy_decode(m, src, 11), M.greedy_decode(back, src, 11))
    with pytest.raises(FileNotFoundError, match="checkpoint"):
        M.load_model(tmp_path / "missing.pt")
    torch.save({"weights": torch.zeros(1)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="checkpoint"):
        M.load_model(tmp_path / "other.pt")
    M.save_checkpoint(m, data.VOCAB[:-1] + ["?"], tmp_path / "vocab.pt")
    with pytest.raises(ValueError, match="vocabulary"):
        M.load_model(tmp_path / "vocab.pt")


def test_shipped_checkpoint_meets_the_targets_and_matches_results_json(shipped, results):
    ev = evaluate.evaluate(shipped, per_form=False)
    rec = results["evaluation"]
    assert ev["n_test"] == 2000
    assert ev["test_exact_match"] >= 0.99
    # Without the encoder output no input information reaches the decoder: at most a handful of lucky dates.
    assert ev["ablation_exact_match"] <= 0.005
    assert ev["ablation_char_accuracy"] < ev["test_char_accuracy"] - 0.3
    # The site shows results.json: it must describe this very checkpoint (one test date of slack for
    # thread-count-dependent rounding in an argmax tie).
    for key in ("test_exact_match", "ablation_exact_match", "test_char_accuracy", "ablation_char_accuracy",
                "chance_exact_match", "chance_char_accuracy"):
        assert abs(ev[key] - rec[key]) <= 1 / 2000 + 1e-12, key
    assert results["n_parameters"] == sum(p.numel() for p in shipped.parameters())
    assert results["model"] == M.load_checkpoint_state()[0]


def test_constant_baselines_from_first_principles():
    # Every test date occurs once: the best fixed string is right once.
    targets = [e[1] for e in data.fixed_examples("test")]
    base = evaluate.constant_baselines(targets)
    assert base["chance_exact_match"] == 1 / 2000
    assert base["majority_string"][4] == "-" and base["majority_string"][7] == "-"


@pytest.mark.parametrize("text, iso", [
    ("3 March 2021", "2021-03-03"), ("March 3, 2021", "2021-03-03"), ("03/03/21", "2021-03-03"),
    ("Wed, 3 Mar 2021", "2021-03-03"), ("2021년 3월 3일", "2021-03-03"), ("the 3rd of March '21", "2021-03-03"),
    ("  3   MARCH 2021 ", "2021-03-03"), ("1 January 1950", "1950-01-01"), ("12/31/49", "2049-12-31"),
    ("29 February 2000", "2000-02-29"), ("04.03.2021", "2021-03-04"), ("03/04/21", "2021-03-04"),
])
def test_translate(text, iso):
    assert translate(text) == iso


@pytest.mark.parametrize("text, says", [
    ("hello world", "not recognised"), ("3 March 2150", "year 2150 is outside"), ("1 January 1949", "outside"),
    ("29 February 2021", "not recognised"), ("31 April 2021", "not recognised"), ("13/03/21", "not recognised"),
    ("Mon, 3 Mar 2021", "not recognised"), ("3 March 2021!", "'!'"), ("", "empty"), ("3 " * 40, "characters"),
    (20210303, "expected a string"),
])
def test_translate_refuses_instead_of_guessing(text, says):
    with pytest.raises(ValueError, match="text") as err:
        translate(text)
    assert says in str(err.value)


def test_misreads_are_refused_not_returned(results):
    # Whatever the model gets wrong (recorded by the evaluation), translate must refuse rather than return it.
    wrong = results["evaluation"]["errors"] + results["evaluation"]["per_form_errors"]
    for e in wrong[:5]:
        with pytest.raises(ValueError, match="misread"):   # a supported form of a real date: the model misread it
            translate(e["text"])


def test_a_wrong_answer_never_passes_the_round_trip(monkeypatch):
    # Whatever date the decoder writes, it is returned only if the input is a form of that date.
    from part0_foundations.l02_encoder_decoder import translate as T

    def decoder_says(iso):
        return lambda model, src, max_len: torch.tensor([[data.BOS_ID] + data.encode_text(iso) + [data.EOS_ID]])[:, 1:]

    monkeypatch.setattr(T, "greedy_decode", decoder_says("2021-03-04"))
    with pytest.raises(ValueError, match="misread"):       # the form is supported: the message says misread
        T.translate("3 March 2021")
    with pytest.raises(ValueError, match="not recognised"):  # not a form of any date: not a misread
        T.translate("Mon, 3 Mar 2021")
    monkeypatch.setattr(T, "greedy_decode", decoder_says("2021-03-03"))
    assert T.translate("3 March 2021") == "2021-03-03"


@pytest.mark.parametrize("text, iso", [("31 Oct 2011", "2011-10-31"), ("the 2nd of July 1969", "1969-07-02"),
                                       ("2nd of July 1969", "1969-07-02"), ("04-03-2021", "2021-03-04")])
def test_translate_forms_people_write(text, iso):
    assert translate(text) == iso


def test_heldout_forms_were_never_trained_on(results):
    h = results["heldout_forms"]
    assert tuple(h["forms"]) == data.HELDOUT_FORMS == tuple(h["training"]["exclude_forms"])
    assert set(h["per_form_exact_match"]) == set(data.HELDOUT_FORMS)
    assert results["training"]["exclude_forms"] == []          # the shipped model saw every form


def test_translate_many_batches():
    assert translate_many(["3 March 2021", "le 1er août 1969"]) == ["2021-03-03", "1969-08-01"]
    assert translate_many([]) == []


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "part0_foundations.l02_encoder_decoder.translate", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=120)


def test_cli(capsys):
    from part0_foundations.l02_encoder_decoder.translate import main

    ok = _cli("3 March 2021", "the 3rd of March '21")  # the real `python -m` entry point
    assert ok.returncode == 0 and ok.stdout == "2021-03-03\n2021-03-03\n", ok.stderr
    assert main(["not a date"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: text:") and len(err.strip().splitlines()) == 1


def test_training_loop_learns(tmp_path):
    cfg = train.TrainConfig(steps=60, batch_size=32, lr=3e-3, warmup=10, log_every=10, eval_every=60, n_val=20)
    mcfg = M.Seq2SeqConfig(vocab_size=len(data.VOCAB), d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1,
                           n_decoder_layers=1)
    m, hist = train.train(mcfg, cfg, log=lambda s: None)
    first, last = hist["loss_curve"][0]["loss"], hist["loss_curve"][-1]["loss"]
    assert last < 0.7 * first
    assert [r["step"] for r in hist["val_curve"]] == [60]


def test_learning_rate_schedule():
    cfg = train.TrainConfig(steps=1000, lr=1e-3, warmup=100)
    assert train.lr_at(0, cfg) == pytest.approx(1e-5)
    assert train.lr_at(99, cfg) == pytest.approx(1e-3)
    assert train.lr_at(550, cfg) == pytest.approx(0.5e-3)
    assert train.lr_at(999, cfg) < 1e-7


# The checks must fail on real mistakes, not only pass on the reference.
class _PreNormEncoder(M.EncoderLayer):
    def forward(self, x, mask=None):
        x = x + self.self_attn(self.norm1(x), mask=mask)
        return x + self.ff(self.norm2(x))


class _NoMaskEncoder(M.EncoderLayer):
    def forward(self, x, mask=None):
        return super().forward(x, None)


class _NonCausalDecoder(M.DecoderLayer):
    def forward(self, x, memory, memory_mask=None, return_cross_weights=False):
        x = self.norm1(x + self.self_attn(x))
        a, w = self.cross_attn(x, memory, mask=memory_mask, return_weights=True)
        x = self.norm3(x + self.ff(self.norm2(x + a)))
        return (x, w) if return_cross_weights else x


class _SelfInsteadOfCross(M.DecoderLayer):
    def forward(self, x, memory, memory_mask=None, return_cross_weights=False):
        x = self.norm1(x + self.self_attn(x, causal=True))
        a, w = self.cross_attn(x, return_weights=True, causal=True)
        x = self.norm3(x + self.ff(self.norm2(x + a)))
        return (x, w) if return_cross_weights else x


def _greedy_without_stop(model, src, max_len):
    memory, mask = model.encode(src), model.padding_mask(src)
    out = torch.full((src.shape[0], 1), model.config.bos_id)
    for _ in range(max_len):
        out = torch.cat([out, model.decode(out, memory, mask)[:, -1:].argmax(-1)], dim=1)
    return out[:, 1:]


@pytest.mark.parametrize("check, impl, says", [
    (checks.check_encoder_layer_matches_torch, _PreNormEncoder, "x = norm(x + sublayer(x))"),
    (checks.check_encoder_layer_ignores_padding, _NoMaskEncoder, "pass mask to self-attention"),
    (checks.check_decoder_layer_causal, _NonCausalDecoder, "self-attention must be causal"),
    (checks.check_decoder_layer_matches_torch, _NonCausalDecoder, "DecoderLayer vs nn.TransformerDecoderLayer"),
    (checks.check_decoder_layer_reads_source, _SelfInsteadOfCross, "changing the memory (the encoder output)"),
    (checks.check_greedy_decode_batched, _greedy_without_stop, "stop when every row has <eos>"),
])
def test_checks_catch_mistakes(check, impl, says):
    with pytest.raises(CheckFailed) as err:
        check(impl)
    assert says in str(err.value), str(err.value)
