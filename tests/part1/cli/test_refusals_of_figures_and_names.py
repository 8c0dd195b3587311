"""Hostile input, the third round: figures no device has, names that are not names, outputs that cannot be
written, counts that are not counts — each refused with one line naming the field and what is allowed, before any
work starts. The GGUF headers of this round are in test_gguf_header.py, the bounded deployment search in
test_deploy_bounds.py."""
import json

import pytest

from tests.part1.cli.test_refusals import ACC, no_hang, refused  # noqa: F401  (the hang guard is a fixture)

PLAN = ["plan", "--model", "llama-3.1-8b", "--context", "8"]


@pytest.mark.parametrize("field, value, fragment", [
    ("memory_gb", 1e-300, "field 'memory_gb' 1e-300 is below any real device; allowed: 0.01 to 100000"),
    ("bandwidth_gb_s", 1e-300, "field 'bandwidth_gb_s' 1e-300 is below any real device; allowed: 0.1 to 100000"),
    ("bf16_tflops", 1e-300, "field 'bf16_tflops' 1e-300 is below any real device; allowed: 0.001 to 100000"),
    ("bf16_tflops", 1e9, "field 'bf16_tflops'"),
    ("fp8_tflops", 1e-12, "allowed: 0.001 to 100000 (or 0: none)"),
    ("max_tp", 10 ** 9, "field 'max_tp' must be an integer from 1 to 65536"),
])
def test_accelerator_figures_outside_any_device(tmp_path, capsys, field, value, fragment):
    p = tmp_path / "acc.json"
    p.write_text(json.dumps({**ACC, field: value}))
    refused(capsys, PLAN + ["--accelerator", str(p)], fragment)


def test_names_from_files_print_their_control_characters_escaped(tmp_path, capsys):
    from part1_capacity.cli import main
    p = tmp_path / "acc.json"
    p.write_text(json.dumps({**ACC, "name": "evil\x1b[2J\x1b[31mRED\nsecond line"}))
    assert main(PLAN + ["--accelerator", str(p)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "\x1b" not in head and "evil\\x1b[2J\\x1b[31mRED\\nsecond line" in head


@pytest.mark.parametrize("model, fragment", [
    ("a" * 100_000, "(100002 chars) is not a model id or a path (at most 4096 characters, 255 per file name)"),
    ("x/" + "b" * 300 + "/config.json", "is not a model id or a path"),
    ("llama-3.1-8bx", "unknown 'llama-3.1-8bx' (did you mean 'llama-3.1-8b'?)"),
])
def test_a_model_name_that_is_no_name(capsys, model, fragment):
    refused(capsys, ["plan", "--model", model, "--accelerator", "h100", "--context", "8"], fragment)


def test_a_heatmap_into_a_missing_folder_is_refused_before_the_sweep(tmp_path, capsys, monkeypatch):
    from part1_capacity.calculator.uses import sweep
    monkeypatch.setattr(sweep, "sweep", lambda *a, **k: pytest.fail("the sweep ran before the output was checked"))
    refused(capsys, ["sweep", "--model", "llama-3.1-8b", "--accelerator", "h100", "--heatmap",
                     str(tmp_path / "missing" / "x.png")], "heatmap: folder")


def test_an_output_that_takes_no_bytes_is_refused_before_e3_runs(capsys, monkeypatch):
    import part1_capacity.experiments.page_cache.experiment as experiment
    monkeypatch.setattr(experiment, "run", lambda *a, **k: pytest.fail("E3 ran before its output was checked"))
    refused(capsys, ["e3", "--out", "/dev/full"], "out: '/dev/full' takes no writes")


@pytest.mark.parametrize("params", ["inf", "1e400", "nan", "-5", "1e3", "1e12", "0.05M"])
def test_e2_params_outside_what_can_be_written(capsys, params):
    refused(capsys, ["e2", "--params", params], "--params: expected a")


def test_an_emitted_command_never_runs_what_a_name_carries(capsys):
    refused(capsys, PLAN + ["--accelerator", "h100", "--emit", "vllm", "--hf-repo", "x; rm -rf ~ #$(id)"],
            "hf_repo: 'x; rm -rf ~ #$(id)' is not a Hugging Face repository id")


def test_a_gguf_with_shell_characters_is_served_by_its_quoted_path(tmp_path, capsys):
    import shlex

    from part1_capacity.cli import main
    from tests.calculator.readers.test_checkpoints import write_gguf
    p = tmp_path / "a;touch PWNED;#.gguf"
    write_gguf(p)
    assert main(["plan", "--model", str(p), "--accelerator", "h100", "--context", "64", "--emit", "llama.cpp"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    # the shell reads back exactly the path given, as one word
    assert shlex.split(first.rstrip("\\").strip())[:3] == ["llama-server", "-m", str(p)]


def test_emit_with_json_prints_the_plan_and_the_command(capsys):
    from part1_capacity.cli import main
    assert main(PLAN + ["--accelerator", "h100", "--emit", "vllm", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["emit"]["engine"] == "vllm" and got["emit"]["command"].startswith("vllm serve meta-llama/")
    assert got["model"] == "llama-3.1-8b" and "kv_bytes_total" in got


def test_a_checkpoint_whose_tensors_hold_no_bytes_is_refused(tmp_path, capsys):
    # every tensor of shape (0, 64): the checkpoint holds 0 bytes, and every ratio to the weights would divide by 0
    from tests.calculator.readers.test_checkpoints import folder
    from tests.part1.cli.test_refusals import LLAMA
    d = folder(tmp_path, {**LLAMA, "torch_dtype": "bfloat16"},
               {"model.safetensors": {"model.embed_tokens.weight": ("BF16", (0, 64), 0)}})
    refused(capsys, ["plan", "--model", str(d), "--accelerator", "h100", "--context", "8", "--json"],
            "field 'params_total' must be a positive number, got 0.0")


@pytest.mark.parametrize("weight_map, fragment", [
    ({"a": ["model.safetensors"], "b": "model.safetensors"}, "'weight_map' values must be shard file names, got ["),
    ({"a": 5}, "'weight_map' values must be shard file names, got 5"),
    ({"a": "x" * 5000}, "is not a file name (one name in the folder, at most 255 bytes)"),
])
def test_a_shard_index_that_names_no_file(tmp_path, capsys, weight_map, fragment):
    from tests.calculator.readers.test_checkpoints import folder
    from tests.part1.cli.test_refusals import LLAMA
    d = folder(tmp_path, {**LLAMA, "torch_dtype": "bfloat16"},
               {"model.safetensors": {"model.embed_tokens.weight": ("BF16", (4, 64), 512)}})
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    refused(capsys, ["plan", "--model", str(d), "--accelerator", "h100", "--context", "8"], fragment)


@pytest.mark.parametrize("bits", [0, 3, "4", None, 16])
def test_a_quantization_width_the_checkpoint_cannot_store(tmp_path, capsys, bits):
    from tests.part1.cli.test_refusals import LLAMA
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**LLAMA, "quantization_config": {"quant_method": "gptq", "bits": bits}}))
    refused(capsys, ["plan", "--model", str(p), "--accelerator", "h100", "--context", "8"],
            f"quantization_config.bits {bits!r} is not a width gptq stores here; allowed: 4, 8")
