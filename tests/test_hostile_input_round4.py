"""Hostile input, the fourth round: what the calculator prints never runs as a command, names read from files and
servers reach the terminal escaped, nonsense in a config is refused by name instead of read as a number, and the
paths it writes are checked like those it reads. The hostile Hub server of this round is tests/hostile_hub.py
(its tests: test_hub_hostile.py); the property-based fuzz over the same classes: test_fuzz_round4.py."""
import json
import os
import subprocess

import pytest

from part1_capacity.cli import main
from tests.test_hostile_input import ACC, LLAMA, no_hang, refused  # noqa: F401  (the hang guard is a fixture)

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
def test_a_config_named_like_a_command_emits_a_llama_cpp_line_that_runs_nothing_else(tmp_path, capsys, name):
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
    from tests.test_checkpoints import write_gguf
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
