"""Lesson 04 reference behaviour beyond the autograder: the shipped model, the byte counts, the library route,
the comparison script (also with --model-dir) and its saved results."""
import json
import math

import pytest
import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.pytorch_utils import Conv1D

from part0_foundations.l04_gpt2_int8 import compare, data
from part0_foundations.l04_gpt2_int8.int8 import (
    conv1d_to_linear, is_tied, library_weight, linear_names, quantize_by_hand, quantize_per_channel,
    quantize_per_tensor, quantize_with_torch, state_bytes, weight_error, dequantize,
)

# torch.save writes a small pickle record per tensor (name, dtype, shape, offsets): allow this much per tensor.
PER_TENSOR_OVERHEAD = 1024


@pytest.fixture(scope="module")
def shipped():
    torch.set_num_threads(1)
    model, tok = data.load_model()
    return model, tok


@pytest.fixture(scope="module")
def fp32(shipped):
    import copy

    return conv1d_to_linear(copy.deepcopy(shipped[0])).eval()


def test_shipped_folder_is_small_gpt2_with_notice():
    files = [f for f in data.SHIPPED_MODEL_DIR.iterdir() if f.is_file()]
    assert sum(f.stat().st_size for f in files) <= 20 * 1024 * 1024
    cfg = json.loads((data.SHIPPED_MODEL_DIR / "config.json").read_text())
    assert cfg["model_type"] == "gpt2" and cfg["tie_word_embeddings"] is True
    notice = (data.SHIPPED_MODEL_DIR / "NOTICE.md").read_text()
    assert "PSF License" in notice and "Python Software Foundation" in notice
    assert len(data.heldout_text()) > 10_000


def test_shipped_model_is_real_gpt2_with_conv1d_and_tie(shipped):
    model, _ = shipped
    assert type(model) is GPT2LMHeadModel
    n_conv = sum(isinstance(m, Conv1D) for m in model.modules())
    assert n_conv == 4 * model.config.n_layer
    assert is_tied(model)


def test_tokenizer_is_byte_level_and_lossless(shipped):
    _, tok = shipped
    text = "déjà vu — naïve 🙂 if x:\n\treturn {'ß': 1}  # ok"
    ids = tok(text)["input_ids"]
    assert tok.decode(ids) == text  # byte-level BPE: any UTF-8 text round-trips, no unknown token
    assert tok.unk_token_id not in ids or tok.unk_token == tok.eos_token


def test_conversion_exact_on_shipped_model(shipped, fp32):
    windows = data.token_windows(shipped[1], data.heldout_text(), 64, 256)
    torch.testing.assert_close(data.logits(fp32, windows), data.logits(shipped[0], windows), atol=1e-5, rtol=0)
    assert not any(isinstance(m, Conv1D) for m in fp32.modules())
    assert is_tied(fp32) and len(linear_names(fp32)) == 4 * fp32.config.n_layer


def test_quantize_dynamic_passes_conv1d_by(shipped, fp32):
    from torch.ao.nn.quantized.dynamic import Linear as DQ

    count = lambda m: sum(isinstance(x, DQ) for x in m.modules())  # noqa: E731
    assert count(quantize_with_torch(shipped[0], "per_tensor")[0]) == 0
    assert count(quantize_with_torch(shipped[0], "per_tensor", include_lm_head=True)[0]) == 1
    q, warning = quantize_with_torch(fp32, "per_channel")
    assert count(q) == 4 * fp32.config.n_layer and is_tied(q) and type(q.lm_head) is nn.Linear
    assert warning is None or "torchao" in warning


def test_state_bytes_follow_bytes_per_element(fp32):
    """FP32: 4 bytes per unique parameter. INT8: 1 byte per Linear weight plus 4 per scale. Tolerance: the pickle
    record of each tensor."""
    params = list(fp32.state_dict().values())
    n_tensors = len(params)
    n_params = sum(p.numel() for p in fp32.parameters())  # the tied weight once
    fp32_bytes = state_bytes(fp32)
    assert 0 <= fp32_bytes - 4 * n_params <= n_tensors * PER_TENSOR_OVERHEAD
    modules = dict(fp32.named_modules())
    lin = [modules[n] for n in linear_names(fp32)]
    w_elems = sum(m.weight.numel() for m in lin)
    for scheme, n_scales in (("per_tensor", len(lin)), ("per_channel", sum(m.out_features for m in lin))):
        predicted = fp32_bytes - 3 * w_elems + 4 * n_scales
        got = state_bytes(quantize_by_hand(fp32, scheme))
        assert abs(got - predicted) <= n_tensors * PER_TENSOR_OVERHEAD, (scheme, got, predicted)
    # Quantizing lm_head too adds an INT8 copy of the V×d matrix (wte stays FP32): bytes go UP by V·d (+ scales).
    v, d = fp32.transformer.wte.weight.shape
    base = state_bytes(quantize_by_hand(fp32, "per_channel"))
    with_head = quantize_by_hand(fp32, "per_channel", include_lm_head=True)
    assert not is_tied(with_head)
    extra = state_bytes(with_head) - base
    assert abs(extra - (v * d + 4 * v)) <= 4 * PER_TENSOR_OVERHEAD, extra
    lib_extra = state_bytes(quantize_with_torch(fp32, "per_tensor", True)[0]) - state_bytes(quantize_with_torch(fp32, "per_tensor")[0])
    assert abs(lib_extra - v * d) <= 4 * PER_TENSOR_OVERHEAD, lib_extra


def test_library_weights_agree_with_hand_written(fp32):
    """torch.ao's observer maps max|w| to 127.5 instead of 127: a 0.4% different step, well under 0.5 dB."""
    for scheme, quant in (("per_tensor", quantize_per_tensor), ("per_channel", lambda w: quantize_per_channel(w, 0))):
        q, _ = quantize_with_torch(fp32, scheme)
        qm = dict(q.named_modules())
        for name in linear_names(fp32):
            w = dict(fp32.named_modules())[name].weight.detach()
            mine = weight_error(w, dequantize(*quant(w), axis=0))["sqnr_db"]
            lib = weight_error(w, library_weight(qm[name]))["sqnr_db"]
            assert abs(mine - lib) < 0.5, (scheme, name, mine, lib)


def test_per_channel_not_worse_on_every_shipped_layer(fp32):
    for name in linear_names(fp32, include_lm_head=True):
        w = dict(fp32.named_modules())[name].weight.detach()
        pt = weight_error(w, dequantize(*quantize_per_tensor(w)))
        pc = weight_error(w, dequantize(*quantize_per_channel(w, 0), axis=0))
        assert pc["sqnr_db"] >= pt["sqnr_db"] and pc["mean_abs"] <= pt["mean_abs"], name


def test_perplexity_matches_transformers_loss(shipped):
    model, tok = shipped
    windows = data.token_windows(tok, data.heldout_text(), 64, 128)
    with torch.no_grad():
        losses = [float(model(w[None], labels=w[None]).loss) for w in windows]
    assert math.isclose(data.perplexity(model, windows), math.exp(sum(losses) / len(losses)), rel_tol=1e-5)


def test_bad_scheme_and_bad_model_dir_name_the_field(fp32, tmp_path):
    with pytest.raises(ValueError, match="scheme"):
        quantize_by_hand(fp32, "per_row")
    with pytest.raises(ValueError, match="model_dir"):
        data.load_model(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ValueError, match="model_dir"):
        data.load_model(tmp_path)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    """A GPT-2 saved with save_pretrained, as --model-dir expects (random weights, a tokenizer trained here)."""
    from part0_foundations.l04_gpt2_int8.train import train_tokenizer

    d = tmp_path_factory.mktemp("gpt2_tiny")
    tok = train_tokenizer(data.heldout_text()[:20000], 300)
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(tok), n_positions=32, n_embd=32, n_layer=2, n_head=2,
                     bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    GPT2LMHeadModel(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    return d


def test_compare_with_model_dir(tiny_dir, tmp_path, capsys):
    out = tmp_path / "r.json"
    code = compare.main(["--model-dir", str(tiny_dir), "--out", str(out), "--max-eval-tokens", "256",
                         "--latency-runs", "1", "--threads", "1"])
    assert code == 0
    r = json.loads(out.read_text())
    assert [v["key"] for v in r["variants"]] == [k for k, *_ in compare.VARIANTS]
    assert r["model"]["n_layer"] == 2 and r["model"]["label"] == str(tiny_dir)
    assert r["conversion"]["logit_max_abs_diff"] <= 1e-5
    assert r["conversion"]["quantized_by_torch_before_conversion"] == 0
    assert r["conversion"]["quantized_by_torch_after_conversion"] == 8
    assert {v["key"]: v["tied"] for v in r["variants"]} == {k: not lm for k, _, _, lm in compare.VARIANTS}
    assert len(r["layers"]) == 9 and r["layers"][-1]["name"] == "lm_head"
    fp = next(v for v in r["variants"] if v["key"] == "fp32")
    assert fp["logit_max_abs_err"] == 0 and fp["top1_agreement"] == 1
    assert "| FP32 (Conv1D → Linear) |" in capsys.readouterr().out


def test_compare_bad_input_is_one_line_exit_2(tmp_path, tiny_dir, capsys):
    import shutil

    no_tok = tmp_path / "weights_only"
    no_tok.mkdir()
    for f in ("config.json", "model.safetensors"):
        shutil.copy(tiny_dir / f, no_tok / f)
    no_weights = tmp_path / "config_only"
    no_weights.mkdir()
    shutil.copy(tiny_dir / "config.json", no_weights / "config.json")
    for argv, field in ((["--model-dir", str(tmp_path / "nope")], "model_dir"),
                        (["--model-dir", str(no_tok)], "model_dir"),
                        (["--model-dir", str(no_weights)], "model_dir"),
                        (["--model-dir", str(tiny_dir), "--max-eval-tokens", "10"], "max_eval_tokens"),
                        (["--threads", "0"], "--threads")):
        capsys.readouterr()
        assert compare.main(argv) == 2, argv
        err = [line for line in capsys.readouterr().err.strip().splitlines() if line.startswith("error")]
        assert len(err) == 1 and field in err[0], (argv, err)


def test_saved_results_belong_to_the_shipped_model():
    r = json.loads(data.RESULTS_PATH.read_text())
    assert r["model"]["weights_sha256"] == data.sha256(data.SHIPPED_MODEL_DIR / "model.safetensors"), (
        "results/comparison.json is stale: rerun python -m part0_foundations.l04_gpt2_int8.compare")
    assert [v["key"] for v in r["variants"]] == [k for k, *_ in compare.VARIANTS]
    by = {v["key"]: v for v in r["variants"]}
    for key in ("torch_per_tensor", "torch_per_channel", "hand_per_channel"):
        assert by[key]["tied"] and not by[key + "_lm_head"]["tied"]
        assert by[key + "_lm_head"]["state_bytes"] > by[key]["state_bytes"]  # the untied INT8 copy costs bytes
        assert by[key]["state_bytes"] < by["fp32"]["state_bytes"]


def test_sitegen_builds_from_saved_results(tmp_path):
    from part0_foundations.l04_gpt2_int8 import sitegen

    sitegen.build(tmp_path)
    for f in ("variants.md", "layers.md", "anatomy.md", "conversion.md", "deprecation.md", "model.md", "scale_distribution.png"):
        assert (tmp_path / f).stat().st_size > 0, f
    # GPT-2 124M's published size is 124.44M parameters with the tied head counted once.
    total = (tmp_path / "anatomy.md").read_text().splitlines()[-1].split("**")[3]  # | **total** | | | **N** |
    assert abs(int(total.replace(",", "")) - 124.44e6) < 0.01e6


def test_train_script_writes_a_loadable_folder(tmp_path):
    """The reproduction script end to end, shrunk: tokenizer, a few steps, save_pretrained, model card, log."""
    from part0_foundations.l04_gpt2_int8 import train

    out = tmp_path / "m"
    code = train.main(["--out", str(out), "--vocab-size", "300", "--n-embd", "32", "--n-layer", "1", "--n-head", "2",
                       "--n-positions", "32", "--batch-size", "2", "--steps", "2"])
    assert code == 0
    model, tok = data.load_model(out)
    assert is_tied(model) and model.config.vocab_size == len(tok) <= 300
    log = json.loads((out / "train_log.json").read_text())
    assert log["steps"] == 2 and log["train_tokens"] > 10_000
    assert "PSF License" in (out / "NOTICE.md").read_text()


def test_dynamic_linear_rounds_activations_to_7_bits():
    """torch.ao's dynamic INT8 Linear calls ``linear_dynamic(..., reduce_range=True)`` on x86 back ends
    (torch/ao/nn/quantized/dynamic/modules/linear.py): activations get 128 levels (0..127), not 256 — the lesson
    page says 7 bits. An identity weight (exact in INT8) passes the rounded activations through unchanged."""
    from part0_foundations.l04_gpt2_int8.int8 import quantize_with_torch

    n = 1000
    lin = nn.Linear(n, n, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.eye(n))
    qmodel, _ = quantize_with_torch(nn.Sequential(lin), "per_tensor")
    x = torch.linspace(0, 1, n).unsqueeze(0)
    levels = torch.unique(qmodel(x).round(decimals=6)).numel()
    assert levels == 128, f"dynamic activation rounding has {levels} levels; the page says 7 bits (128)"
