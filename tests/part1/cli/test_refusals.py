"""Hostile input, each case of the fuzz that found tracebacks, hangs and invalid output: one line, exit status 2.

Everything runs in-process (argparse errors and InputError both end in exit 2 through ``main``). A guard alarm turns a
hang into a failure instead of a stuck suite; no timing is asserted. The cases for model folders (no config.json,
a safetensors header that is not JSON, an unknown tensor dtype) are in test_checkpoints.py."""
import json
import os
import signal

import pytest

from part1_capacity.cli import main

LLAMA = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256}
ACC = {"id": "mine", "memory_gb": 80, "bandwidth_gb_s": 3350, "bf16_tflops": 989}


@pytest.fixture(autouse=True)
def no_hang():
    """A case that hangs fails after 60 s instead of blocking the suite (a guard, not a timing assertion)."""
    def fail(*_):
        raise TimeoutError("hung: the work is not bounded")
    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def refused(capsys, argv, fragment):
    try:
        code = main(argv)
    except SystemExit as exc:          # argparse's own errors exit from inside main()
        code = exc.code
    out = capsys.readouterr()
    assert code == 2, (code, out.err[-300:])
    assert out.err.count("\n") == 1 and out.err.startswith("capacity: error: "), out.err[:500]
    assert fragment in out.err, out.err
    assert "Traceback" not in out.err and "NaN" not in out.out and "Infinity" not in out.out


def plan(model, *extra, acc="h100"):
    return ["plan", "--model", str(model), "--accelerator", str(acc), "--context", "1024", *extra]


def write(tmp_path, text, name="config.json"):
    p = tmp_path / name
    p.write_text(text if isinstance(text, str) else json.dumps(text))
    return p


# --- config.json ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, fragment", [
    ('{"model_type": "llama", "num_hidden_layers": NaN}', "NaN is not a number JSON allows"),
    # Infinity is what transformers writes for an unbounded default (time_step_limit): read, and refused by name in
    # a field the calculator reads
    ('{"model_type": "llama", "num_hidden_layers": Infinity}', "field 'num_hidden_layers': must be a finite number"),
    ('{"model_type": "llama", "hidden_size": -Infinity}', "field 'hidden_size': must be a finite number"),
    ('{"model_type": "llama", "hidden_size": 1e999}', "too large for a number"),
    ('{"model_type": "llama", "vocab_size": ' + "9" * 5000 + "}", "5000 digits"),
    ('{"model_type": "llama", "x": ' + "[" * 200_000 + "]" * 200_000 + "}", "nested too deeply"),
])
def test_config_numbers_json_does_not_allow(tmp_path, capsys, text, fragment):
    refused(capsys, plan(write(tmp_path, text)), fragment)


@pytest.mark.parametrize("mt, field, value, fragment", [
    ("llama", "num_hidden_layers", 10 ** 12, "field 'num_hidden_layers': must be a positive integer <= 512"),
    ("llama", "hidden_size", 2.5, "field 'hidden_size': must be an integer"),
    ("llama", "num_attention_heads", True, "field 'num_attention_heads': must be an integer"),
    ("llama", "layer_types", 5, "field 'layer_types' must be a list"),
    ("llama", "quantization_config", "fp8", "field 'quantization_config' must be a JSON object"),
    ("llama", "quantization_config", {"quant_method": "hqq"}, "quant_method 'hqq' is not supported"),
    ("nemotron_h", "hybrid_override_pattern", 123, "field 'hybrid_override_pattern' must be a string"),
    ("gemma3_text", "sliding_window_pattern", 0, "field 'sliding_window_pattern': must be a positive integer"),
    ("jamba", "attn_layer_period", 0, "field 'attn_layer_period': must be a positive integer"),
    ("jamba", "expert_layer_period", 0, "field 'expert_layer_period': must be a positive integer"),
    ("qwen3_next", "full_attention_interval", 0, "field 'full_attention_interval': must be a positive integer"),
    ("gemma2", "sliding_window", 0, "field 'sliding_window': must be a positive integer"),
    ("llama", "text_config", [1], "field 'text_config' must be a JSON object"),
])
def test_config_fields_out_of_range_or_of_the_wrong_type(tmp_path, capsys, mt, field, value, fragment):
    refused(capsys, plan(write(tmp_path, {**LLAMA, "model_type": mt, field: value})), fragment)


def test_a_model_type_whose_cache_is_not_modelled_names_the_structure(tmp_path, capsys):
    refused(capsys, plan(write(tmp_path, {**LLAMA, "model_type": "t5"})),
            "an encoder-decoder's cross-attention caches the encoder output per sequence ('is_encoder_decoder'): "
            "not modelled")


@pytest.mark.parametrize("what", ["directory", "fifo", "/dev/zero", "latin-1"])
def test_a_config_that_is_not_a_small_utf8_file(tmp_path, capsys, what):
    p = {"directory": tmp_path, "/dev/zero": "/dev/zero"}.get(what)
    if what == "fifo":
        p = tmp_path / "config.json"
        os.mkfifo(p)
    elif what == "latin-1":
        p = tmp_path / "config.json"
        p.write_bytes('{"model_type": "llama", "name": "café"}'.encode("latin-1"))
    fragment = {"directory": "has no config.json", "fifo": "is a FIFO", "/dev/zero": "is a device",
                "latin-1": "not UTF-8 text"}[what]
    refused(capsys, plan(p), fragment)


# --- flags ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag, value, fragment", [
    ("--batch", "1099511627776", "argument --batch: must be a positive integer <= 1,048,576"),
    ("--batch", "9" * 400, "argument --batch: 400 digits"),
    ("--context", "9" * 400, "argument --context: 400 digits"),
    ("--batch", "0", "argument --batch: must be a positive integer"),
    ("--overhead-gib", "1e300", "argument --overhead-gib: must be >= 0 and <= 1,000,000"),
    ("--overhead-gib", "nan", "argument --overhead-gib: must be a finite number"),
    ("--overhead-gib", "inf", "argument --overhead-gib: must be a finite number"),
    ("--usable-fraction", "nan", "argument --usable-fraction"),
])
def test_flags_out_of_range(capsys, flag, value, fragment):
    refused(capsys, plan("llama-3.1-8b", flag, value), fragment)


def test_a_huge_sweep_is_refused_before_any_work(capsys):
    contexts = ",".join(str(i) for i in range(1, 5001))
    batches = ",".join(str(i) for i in range(1, 201))
    refused(capsys, ["sweep", "--model", "llama-3.1-8b", "--accelerator", "h100", "--contexts", contexts,
                     "--batches", batches], "argument --contexts: at most 128 values, got 5000")


# --- accelerator files ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, fragment", [
    (json.dumps(ACC).replace("3350", "NaN"), "NaN is not a number JSON allows"),
    (json.dumps(ACC).replace("989", "Infinity"), "Infinity is not a number JSON allows"),
    (json.dumps(ACC).replace("80", "1e300"), "field 'memory_gb': must be > 0 and <= 100,000"),
    (json.dumps(ACC).replace("80", "-80"), "field 'memory_gb': must be > 0"),
])
def test_accelerator_files_with_non_finite_or_absurd_figures(tmp_path, capsys, text, fragment):
    refused(capsys, plan("llama-3.1-8b", "--json", acc=write(tmp_path, text, "acc.json")), fragment)


def test_accelerator_from_proc_self_mem(capsys):
    refused(capsys, plan("llama-3.1-8b", acc="/proc/self/mem"), "cannot read /proc/self/mem")


# --- claims --ledger -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("what, fragment", [("directory", "is a directory"), ("fifo", "is a FIFO"),
                                            ("/dev/zero", "is a device"), ("latin-1", "not UTF-8 text")])
def test_claims_ledger_that_is_not_a_small_utf8_file(tmp_path, capsys, what, fragment):
    p = {"directory": tmp_path, "/dev/zero": "/dev/zero"}.get(what)
    if what == "fifo":
        p = tmp_path / "ledger.toml"
        os.mkfifo(p)
    elif what == "latin-1":
        p = tmp_path / "ledger.toml"
        p.write_bytes('[[claim]]\nid = "café"\n'.encode("latin-1"))
    refused(capsys, ["claims", "--ledger", str(p)], fragment)


@pytest.mark.parametrize("value", ["0", "2,2", "x", "257"])
def test_e2_threads_refused_naming_the_flag_once(capsys, value):
    # argparse prefixes "argument --threads:"; the message must not name the flag a second time
    refused(capsys, ["e2", "--threads", value], "argument --threads: expected distinct counts")


@pytest.mark.parametrize("argv, fragment", [
    (["--type", "flat", "--nlist", "5"], "--nlist: only with --type ivf"),
    (["--type", "hnsw", "--nlist", "5"], "--nlist: only with --type ivf"),
    (["--type", "ivf", "--hnsw-m", "16"], "--hnsw-m: only with --type hnsw"),
])
def test_index_flag_of_another_index_type_is_refused(capsys, argv, fragment):
    refused(capsys, ["index", "--vectors", "1000", "--dim", "384", *argv], fragment)


def test_index_json_is_strict(capsys, monkeypatch):
    # a non-finite figure must become the one-line error, never `NaN` in the JSON
    from part1_capacity.calculator.sizing import index_memory
    real = index_memory.plan_index

    def with_nan(*a, **k):
        import dataclasses
        return dataclasses.replace(real(*a, **k), knee_ratio=float("nan"))
    monkeypatch.setattr(index_memory, "plan_index", with_nan)
    refused(capsys, ["index", "--vectors", "1000", "--dim", "384", "--type", "flat", "--json"], "knee_ratio")
