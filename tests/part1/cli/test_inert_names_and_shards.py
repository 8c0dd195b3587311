"""Hostile input, the fourth round: what the calculator prints never runs as a command, names read from files and
servers reach the terminal escaped, nonsense in a config is refused by name instead of read as a number, and the
paths it writes are checked like those it reads. The hostile Hub server of this round is tests/hostile_hub.py
(its tests: test_hub_hostile.py); the property-based fuzz over the same classes: test_fuzz_round4.py."""
import json
import os
import subprocess

import pytest

from part1_capacity.cli import main
from tests.part1.cli.test_refusals import ACC, LLAMA, no_hang, refused  # noqa: F401  (the hang guard is a fixture)

CONFIG = {**LLAMA, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}
# names that run something when a shell reads them raw: each tries to create the canary file
HOSTILE_NAMES = [
    "a\ntouch canary\n",
    "x'; touch canary; '",
    '"; touch canary; "',
    "$(touch canary)",
    "`touch canary`",
    "a;touch canary;#",
    "b\r\x1b]0;title\x07\x1b[2J&& touch canary",
    "c\\\n touch canary",
    "$'\\x41'; touch canary",
]
STUB = """#!/bin/sh
# the engine, stubbed: records its argv, NUL-separated, one record per run
printf '%s\\0' "$(basename "$0")" "$@" >> "$ARGV_LOG"
printf '\\n' >> "$ARGV_LOG"
"""


def run_in_bash(tmp_path, script: str) -> list[list[str]]:
    """``script`` piped into bash with stub engines first on PATH, in an empty folder; the argv of each run."""
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    for engine in ("vllm", "llama-server"):
        stub = bin_dir / engine
        stub.write_text(STUB)
        stub.chmod(0o755)
    log = tmp_path / "argv.log"
    log.write_bytes(b"")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "ARGV_LOG": str(log), "HOME": str(work)}
    done = subprocess.run(["bash"], input=script.encode("utf-8", "surrogateescape"), cwd=work, env=env,
                          capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert not any(work.iterdir()), list(work.iterdir())     # nothing ran that made a file: no canary
    runs = log.read_bytes().split(b"\0\n")[:-1]
    return [[w.decode("utf-8", "surrogateescape") for w in r.split(b"\0")] for r in runs]


def emitted(capsys, argv) -> str:
    assert main(argv) == 0
    out = capsys.readouterr().out
    # no raw control character reaches the terminal: only the line ends
    assert all(c.isprintable() or c == "\n" for c in out), repr(out)
    return out


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_config_named_like_a_command_emits_an_inert_llama_cpp_line(tmp_path, capsys, name):
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(CONFIG))
    out = emitted(capsys, ["plan", "--model", str(p), "--accelerator", "h100", "--context", "64",
                           "--emit", "llama.cpp"])
    runs = run_in_bash(tmp_path, out)
    # the file to make is named after the model (the config's name without .json, lower case as every profile id)
    # and the dtype, bf16 here
    assert len(runs) == 1 and runs[0][:3] == ["llama-server", "-m", f"{name.lower()}-bf16.gguf"], runs


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_gguf_named_like_a_command_is_served_by_its_exact_path(tmp_path, capsys, name):
    from tests.calculator.readers.test_checkpoints import write_gguf
    p = tmp_path / f"{name}.gguf"
    write_gguf(p)
    out = emitted(capsys, ["plan", "--model", str(p), "--accelerator", "h100", "--context", "64",
                           "--emit", "llama.cpp"])
    runs = run_in_bash(tmp_path, out)
    assert len(runs) == 1 and runs[0][:3] == ["llama-server", "-m", str(p)], runs
    assert os.path.samefile(runs[0][2], p)


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_an_accelerator_named_like_a_command_leaves_vllm_comments_inert(tmp_path, capsys, name):
    # an accelerator without FP8 tensor cores serving fp8 weights: its name is printed in a comment
    acc = tmp_path / "acc.json"
    acc.write_text(json.dumps({**ACC, "name": name}))
    out = emitted(capsys, ["plan", "--model", "llama-3.1-8b", "--accelerator", str(acc), "--context", "64",
                           "--weights-dtype", "fp8", "--emit", "vllm"])
    assert "has no FP8 tensor cores" in out
    runs = run_in_bash(tmp_path, out)
    assert len(runs) == 1 and runs[0][:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"], runs
    assert runs[0][runs[0].index("--quantization") + 1] == "fp8"


# --- nonsense in a config is refused by name, never read as a number -------------------------------------------
@pytest.mark.parametrize("field, value, fragment", [
    # torch has float64, but no checkpoint's weights are sized in it here: refused, not sized as bf16
    ("torch_dtype", "float64", "field 'torch_dtype': 'float64' is a dtype the calculator does not size weights in; "
                               "allowed: bfloat16, float16, half, float32, float"),
    ("torch_dtype", "int4", "field 'torch_dtype': 'int4' is not a dtype name; allowed: bfloat16"),
    ("torch_dtype", [], "field 'torch_dtype': must be a dtype name, got []"),
    ("torch_dtype", 0, "field 'torch_dtype': must be a dtype name, got 0"),
    ("dtype", "bf16", "field 'dtype': 'bf16' is not a dtype name"),
    ("tie_word_embeddings", "false", "field 'tie_word_embeddings': must be true or false, got 'false'"),
    ("tie_word_embeddings", 0, "field 'tie_word_embeddings': must be true or false, got 0"),
    ("attention_bias", "no", "field 'attention_bias': must be true or false, got 'no'"),
])
def test_a_config_field_the_calculator_cannot_read_is_refused_by_name(tmp_path, capsys, field, value, fragment):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**CONFIG, field: value}))
    refused(capsys, ["plan", "--model", str(p), "--accelerator", "h100", "--context", "8"], fragment)


@pytest.mark.parametrize("value, bytes_per_param", [("bfloat16", 2), ("torch.float16", 2), ("float32", 4),
                                                    ("float", 4), ("half", 2)])
def test_the_dtype_names_transformers_reads_size_the_weights(tmp_path, capsys, value, bytes_per_param):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**CONFIG, "torch_dtype": value}))
    assert main(["plan", "--model", str(p), "--accelerator", "h100", "--context", "8", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    # LLAMA by hand: embedding and untied head 2 × 256 × 64 = 32,768; per layer q 4,096 + k 2,048 + v 2,048 +
    # o 4,096 + MLP 3 × 64 × 128 = 24,576 + norms 128 = 36,992, × 2 layers = 73,984; final norm 64 → 106,816
    assert d["weights_bytes"] == 106_816 * bytes_per_param


def test_the_state_dtype_of_a_hybrid_is_read_from_the_same_table(tmp_path, capsys):
    from part1_capacity.calculator.model.configs import profile_from_config
    from part1_capacity.calculator.base.errors import InputError
    d = json.loads((__import__("pathlib").Path(__file__).parents[2] / "data" / "configs" / "qwen3.5-35b-a3b" /
                    "config.json").read_text())
    d["text_config"]["mamba_ssm_dtype"] = "float64"
    with pytest.raises(InputError, match="field 'mamba_ssm_dtype': 'float64' is a dtype the calculator does not"):
        profile_from_config(d, "config.json")


# --- a checkpoint folder is counted only whole, each file once ---------------------------------------------------
EMBED = {"model.embed_tokens.weight": ("BF16", (256, 64), 256 * 64 * 2)}          # 32,768 bytes
NORM = {"model.norm.weight": ("BF16", (64,), 128)}


def shard_folder(tmp_path, shards, index=False):
    from tests.calculator.readers.test_checkpoints import folder
    return folder(tmp_path, CONFIG, shards, index=index)


def test_one_shard_of_four_without_an_index_is_refused(tmp_path, capsys):
    d = shard_folder(tmp_path, {"model-00001-of-00004.safetensors": EMBED})
    refused(capsys, ["plan", "--model", str(d), "--accelerator", "h100", "--context", "8"],
            "the folder holds 1 of the 4 shards of model (no model-00002-of-00004.safetensors): a checkpoint is "
            "counted only whole")


def test_shards_out_of_different_totals_are_refused(tmp_path, capsys):
    d = shard_folder(tmp_path, {"model-00001-of-00002.safetensors": EMBED, "model-00002-of-00003.safetensors": NORM})
    refused(capsys, ["plan", "--model", str(d), "--accelerator", "h100", "--context", "8"],
            "shards of model out of different totals (2, 3)")


def test_a_whole_set_of_shards_is_counted_once_each(tmp_path, capsys):
    d = shard_folder(tmp_path, {"model-00001-of-00002.safetensors": EMBED, "model-00002-of-00002.safetensors": NORM})
    assert main(["plan", "--model", str(d), "--accelerator", "h100", "--context", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["weights_bytes"] == 32_768 + 128


def test_a_symlink_to_a_shard_is_not_counted_twice(tmp_path, capsys):
    d = shard_folder(tmp_path, {"a.safetensors": EMBED})
    (d / "b.safetensors").symlink_to(d / "a.safetensors")
    refused(capsys, ["plan", "--model", str(d), "--accelerator", "h100", "--context", "8"],
            "b.safetensors is the same file as a.safetensors: every shard is counted once")
    os.link(d / "a.safetensors", d / "c.safetensors")          # a hard link: the same file under another name too
    (d / "b.safetensors").unlink()
    refused(capsys, ["plan", "--model", str(d), "--accelerator", "h100", "--context", "8"],
            "c.safetensors is the same file as a.safetensors")


def test_the_same_tensor_in_two_files_is_not_counted_twice(tmp_path, capsys):
    # a consolidated file beside its shards: the embedding twice
    d = shard_folder(tmp_path, {"consolidated.safetensors": {**EMBED, **NORM}, "model.safetensors": EMBED})
    refused(capsys, ["plan", "--model", str(d), "--accelerator", "h100", "--context", "8"],
            "tensor 'model.embed_tokens.weight' is in both consolidated.safetensors and model.safetensors: the "
            "weights would be counted twice")


def test_an_index_whose_shards_do_not_hold_its_tensors_is_refused(tmp_path, capsys):
    d = shard_folder(tmp_path, {"model-00001-of-00002.safetensors": EMBED, "model-00002-of-00002.safetensors": NORM},
                     index=True)
    wm = {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
          "model.norm.weight": "model-00002-of-00002.safetensors",
          "lm_head.weight": "model-00002-of-00002.safetensors"}        # a tensor no shard holds
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wm}))
    refused(capsys, ["plan", "--model", str(d), "--accelerator", "h100", "--context", "8"],
            "the index maps tensor 'lm_head.weight' to model-00002-of-00002.safetensors, which does not hold it")
    # an index naming one shard of two: the set is not whole
    (d / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}}))
    refused(capsys, ["plan", "--model", str(d), "--accelerator", "h100", "--context", "8"],
            "model.safetensors.index.json names 1 of the 2 shards of model")


# --- text from a file or a server reaches the terminal escaped ---------------------------------------------------
EVIL_TYPE = "llama\x1b]0;pwned\x07\x1b[2J\u202e\ud800"      # title, clear screen, bidi override, lone surrogate


@pytest.mark.parametrize("command", [["plan", "--context", "64"], ["sweep", "--contexts", "64,128"],
                                     ["plan", "--context", "64", "--emit", "llama.cpp"],
                                     ["sweep", "--contexts", "64", "--heatmap", "map.png"]])
def test_model_type_with_escape_codes_and_lone_surrogate_is_escaped(tmp_path, capsys, monkeypatch,
                                                                                command):
    monkeypatch.chdir(tmp_path)         # (the heatmap's title holds the name too: FreeType has no lone surrogate)
    p = tmp_path / "config.json"
    # json.dumps writes the surrogate as \ud800: a file any JSON writer may produce; the architecture is llama's
    p.write_text(json.dumps({**CONFIG, "model_type": EVIL_TYPE, "architectures": ["LlamaForCausalLM"]}))
    assert main([command[0], "--model", str(p), "--accelerator", "h100", *command[1:]]) == 0
    out = capsys.readouterr().out
    assert all(c.isprintable() or c == "\n" for c in out), repr(out[:300])
    if command[0] != "plan" or "--emit" not in command:
        assert "llama\\x1b]0;pwned\\x07\\x1b[2J\\u202e\\ud800" in out


def test_an_error_quoting_a_name_is_one_escaped_line(tmp_path, capsys):
    missing = str(tmp_path / "two\nlines\x1b[2J.json")
    refused(capsys, ["plan", "--model", missing, "--accelerator", "h100", "--context", "8"],
            "two\\nlines\\x1b[2J.json")


# --- the paths the CLI writes are checked like those it reads ----------------------------------------------------
SWEEP = ["sweep", "--model", "llama-3.1-8b", "--accelerator", "h100", "--contexts", "1024", "--batches", "1,2"]


@pytest.fixture
def no_sweep(monkeypatch):
    from part1_capacity.calculator.uses import sweep
    monkeypatch.setattr(sweep, "sweep", lambda *a, **k: pytest.fail("the sweep ran before the output was checked"))


@pytest.mark.parametrize("name, fragment", [
    ("", "heatmap: an empty name is not a file name"),
    ("x" * 252 + ".png", "is longer than a path may be (at most 255 bytes a name, 4095 a path)"),
    ("d/" * 2100 + "x.png", "is longer than a path may be"),
])
def test_a_heatmap_name_the_system_cannot_take_is_refused(tmp_path, capsys, monkeypatch, no_sweep, name, fragment):
    monkeypatch.chdir(tmp_path)
    refused(capsys, SWEEP + ["--heatmap", name], fragment)


def test_a_heatmap_on_a_fifo_is_refused_not_waited_on(tmp_path, capsys, no_sweep):
    fifo = tmp_path / "map.png"
    os.mkfifo(fifo)
    refused(capsys, SWEEP + ["--heatmap", str(fifo)], "is a FIFO; expected a regular file or a new name")


def test_a_heatmap_on_a_symlink_is_refused_unless_asked(tmp_path, capsys):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    link = tmp_path / "map.png"
    link.symlink_to(target)
    refused(capsys, SWEEP + ["--heatmap", str(link)], "is a symbolic link, not followed")
    assert target.read_text() == "keep me"
    assert main(SWEEP + ["--heatmap", str(link), "--follow-symlinks"]) == 0      # asked: the target is written
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and link.is_symlink()


def test_a_heatmap_is_written_as_a_png(tmp_path, capsys):
    out = tmp_path / "map.png"
    out.write_text("old")
    assert main(SWEEP + ["--heatmap", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"                         # the PNG signature
    assert f"heatmaps written to {out}" in capsys.readouterr().out


@pytest.mark.parametrize("make, fragment", [
    (lambda p: None, "out: an empty name is not a file name"),
    (lambda p: p.symlink_to(p.parent / "elsewhere.json"), "is a symbolic link, not followed"),
    (lambda p: os.mkfifo(p), "is a FIFO"),
])
def test_an_e3_output_is_checked_like_a_heatmap(tmp_path, capsys, monkeypatch, make, fragment):
    import part1_capacity.experiments.page_cache.experiment as experiment
    monkeypatch.setattr(experiment, "run", lambda *a, **k: pytest.fail("E3 ran before its output was checked"))
    p = tmp_path / "e3.json"
    make(p)
    refused(capsys, ["e3", "--out", "" if "empty" in fragment else str(p)], fragment)


def test_an_argument_the_parser_does_not_know_is_one_escaped_line(capsys):
    refused(capsys, ["plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "8", "x\ny\x1b[2J"],
            "unrecognized arguments: x\\ny\\x1b[2J")


def test_a_model_name_with_tex_in_it_is_a_heatmap_title_not_a_formula(tmp_path, capsys):
    # matplotlib reads "$...$" in a text as mathtext: "\undefined" in it raised from deep in the drawing
    p = tmp_path / "a$\\undefined{$.json"
    p.write_text(json.dumps(CONFIG))
    out = tmp_path / "map.png"
    assert main(["sweep", "--model", str(p), "--accelerator", "h100", "--contexts", "64", "--batches", "1",
                 "--heatmap", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("quant, fragment", [
    ({"quant_method": "awq", "bits": 4, "group_size": 0}, "quantization_config.group_size: 0 is no group"),
    ({"quant_method": "awq", "bits": 4, "zero_point": "false"},
     "quantization_config.zero_point: must be true or false, got 'false'"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {
        "num_bits": 4, "type": "int", "strategy": "group", "group_size": 0}}}},
     "config_groups.weights.group_size: must be a positive integer"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {
        "num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": "no"}}}},
     "config_groups.weights.symmetric: must be true or false, got 'no'"),
])
def test_a_quantization_field_the_calculator_cannot_read_is_refused(tmp_path, capsys, quant, fragment):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**CONFIG, "quantization_config": quant}))
    refused(capsys, ["plan", "--model", str(p), "--accelerator", "h100", "--context", "8"], fragment)


def test_a_progress_bar_keeps_its_own_controls_and_escapes_its_text():
    import io

    from part1_capacity.cli import _Escaped
    from part1_capacity.commands.page_cache import ProgressBar
    from part1_capacity.experiments.engine.progress import Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True
    for make, controls in ((lambda s: ProgressBar(stream=s), "\r\x1b[K"), (lambda s: Progress(1, stream=s), "\r")):
        raw = Tty()
        bar = make(_Escaped(raw))
        bar(0.5, "evil\x1b]0;t\x07") if isinstance(bar, ProgressBar) else bar.update(0.5, "evil\x1b]0;t\x07")
        out = raw.getvalue()
        # the bar's redraw reaches the terminal; the label's escape codes do not
        assert out.startswith(controls) and "evil\\x1b]0;t\\x07" in out and "\x07" not in out, repr(out)
