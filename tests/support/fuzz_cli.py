"""Property-based fuzz of ``capacity`` plan, compare, sweep, index and fit (Hypothesis): hostile files and flags, each
case exit 0 with strict JSON or exit 2 with one line — never a traceback, a hang or an unbounded allocation.

Run by ``tests/part1/cli/test_fuzz.py`` in a child process held to a memory and CPU limit (a case that allocates without
bound dies on the limit instead of taking the machine); each case also has an alarm. Deterministic (derandomized):
the same cases on every run, so a failure is reproducible with ``python tests/support/fuzz_cli.py``.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import struct
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from part1_capacity import cli  # noqa: E402

CASES = int(os.environ.get("FUZZ_CASES", "250"))
SCRATCH = Path(tempfile.mkdtemp(prefix="capacity-fuzz-"))
BUNDLED = ["llama-3.1-8b", "deepseek-v3", "gpt-oss-120b", "nemotron-3-nano-30b-a3b", "gemma-3-27b", "gpt2"]
ACCS = ["h100", "m4-max", "tpu-v5e", "l4"]
WEIRD_NUMBERS = st.one_of(st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True, allow_infinity=True),
                          st.sampled_from([0, 1, -1, 1e-300, 1e300, "12", "nan", None, True, [], {}, [4, 4]]))
CONFIG_KEYS = ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
               "intermediate_size", "vocab_size", "max_position_embeddings", "sliding_window", "num_local_experts",
               "num_experts_per_tok", "kv_lora_rank", "qk_rope_head_dim", "n_routed_experts", "tie_word_embeddings"]
MODEL_TYPES = ["llama", "qwen2", "mixtral", "deepseek_v3", "gemma2", "nemotron_h", "falcon", "gpt2", "bert",
               "no_such_family", "", 7]


def write(name: str, data: bytes) -> str:
    p = SCRATCH / name
    p.write_bytes(data)
    return str(p)


@st.composite
def models(draw):
    kind = draw(st.sampled_from(["bundled", "bundled", "config", "config", "config", "bytes", "gguf", "text", "name",
                                 "name"]))
    if kind == "bundled":
        return draw(st.sampled_from(BUNDLED))
    if kind == "config":
        cfg = {"model_type": draw(st.sampled_from(MODEL_TYPES))}
        cfg.update(draw(st.dictionaries(st.sampled_from(CONFIG_KEYS), WEIRD_NUMBERS, max_size=8)))
        if draw(st.booleans()):     # a plausible base, then perturbed
            cfg = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "intermediate_size": 128, "vocab_size": 256, **cfg}
        return write(f"c{draw(st.integers(0, 10 ** 9))}.json", json.dumps(cfg, allow_nan=True).encode())
    if kind == "bytes":
        return write(f"b{draw(st.integers(0, 10 ** 9))}.json", draw(st.binary(max_size=200)))
    if kind == "gguf":               # a GGUF header with random counts and a random tail
        head = b"GGUF" + struct.pack("<IQQ", draw(st.sampled_from([2, 3, 4])), draw(st.integers(0, 2 ** 64 - 1)),
                                     draw(st.integers(0, 2 ** 64 - 1)))
        return write(f"g{draw(st.integers(0, 10 ** 9))}.gguf", head + draw(st.binary(max_size=200)))
    if kind == "name":
        return draw(st.sampled_from(["a" * 300, "x/" * 3000, "a\0b", "../../etc/passwd", "/dev/zero", "/proc/self/mem",
                                     "org/name", "-h", str(SCRATCH), "llama-3.1-8b" * 30, "\x1b[2J"]))
    return draw(st.text(max_size=300))


@st.composite
def accelerators(draw):
    if draw(st.integers(0, 3)):
        return draw(st.sampled_from(ACCS))
    d = {"id": draw(st.text(max_size=20)) or "x", "name": draw(st.text(max_size=30))}
    for key in ("memory_gb", "engine_memory_gib", "bandwidth_gb_s", "bf16_tflops", "fp8_tflops", "max_tp",
                "node_size"):
        if draw(st.integers(0, 4)):
            d[key] = draw(WEIRD_NUMBERS)
    return write(f"a{draw(st.integers(0, 10 ** 9))}.json", json.dumps(d, allow_nan=True).encode())


def mostly(valid: list[str], hostile) -> st.SearchStrategy:
    """Valid values four times in five, so most cases reach the reader and the search, not only the flag parser."""
    # (Hypothesis draws small integers more often than large ones: the hostile branch is the large one)
    return st.integers(0, 4).flatmap(lambda i: hostile if i == 4 else st.sampled_from(valid))


FLAG_VALUES = {
    "--context": mostly(["1024", "8192", "32K", "128K", "4096"],
                        st.one_of(st.integers(-5, 2 ** 40).map(str),
                                  st.sampled_from(["1M", "8k", "1e9", "nan", "", "0x10", "9" * 400]))),
    "--batch": mostly(["1", "4", "64", "1000"], st.one_of(st.integers(-5, 2 ** 40).map(str),
                                                          st.sampled_from(["1e6", "inf", "x"]))),
    "--weights-dtype": st.sampled_from(["bf16", "fp8", "int4", "q4_k_m", "mxfp4", "fp4", "", "BF16"]),
    "--kv-dtype": st.sampled_from(["bf16", "fp8", "q8_0", "int4", "fp32"]),
    "--state-dtype": st.sampled_from(["fp32", "bf16", "fp8", "nope"]),
    "--tensor-parallel": mostly(["1", "2", "4", "8"], st.integers(-2, 1 << 20).map(str)),
    "--pipeline-parallel": mostly(["1", "2", "3"], st.integers(-2, 1 << 20).map(str)),
    "--nodes": mostly(["1", "2", "16", "1000000000"], st.integers(-2, 10 ** 12).map(str)),
    "--usable-fraction": mostly(["0.9", "0.5", "1"], st.sampled_from(["0", "1.5", "nan", "-1", "1e-300"])),
    "--overhead-gib": mostly(["2", "0", "10"], st.sampled_from(["-1", "inf", "1e12"])),
    "--engine": st.sampled_from(["law", "vllm", "llama.cpp", "sglang"]),
    "--vllm-version": mostly(["0.19", "0.10.2", "0.6.5"], st.sampled_from(["0.5", "x", "", "v0.26.0", "9" * 60,
                                                                          "0.19.0rc1", "1e3", "0.-1"])),
}


# the llama.cpp split, LoRA and the draft model (plan and fit)
OWN_MACHINE_VALUES = {
    "--gpu-layers": mostly(["0", "1", "40", "999"], st.sampled_from(["-1", "1e9", "x", "9" * 40])),
    "--cpu-moe": mostly(["0", "4", "36"], st.sampled_from(["-1", "100000", "nan"])),
    "--host-memory": mostly(["64", "16"], st.sampled_from(["0", "-1", "nan", "inf", "1e300"])),
    "--host-bandwidth": mostly(["89.6", "50"], st.sampled_from(["0", "-5", "inf"])),
    "--lora-rank": mostly(["8", "16", "64"], st.sampled_from(["0", "600", "1e9", "x"])),
    "--max-loras": mostly(["1", "4"], st.sampled_from(["0", "-1", "1e6"])),
    "--draft-model": mostly(["qwen2.5-0.5b", "llama-3.1-8b"], st.sampled_from(["nope", "", "/dev/zero", "a" * 300])),
    "--num-speculative-tokens": mostly(["1", "4"], st.sampled_from(["0", "65", "x"])),
}


INDEX_VALUES = {
    "--vectors": mostly(["1000", "1000000", "1e6"], st.sampled_from(["0", "-1", "1e30", "nan", "x", "9" * 50])),
    "--dim": mostly(["384", "768"], st.sampled_from(["0", "-3", "1e9", "inf"])),
    "--nlist": mostly(["100", "1000"], st.sampled_from(["0", "1e12", "-1"])),
    "--hnsw-m": mostly(["16", "32"], st.sampled_from(["0", "1e9"])),
    "--host-memory-gb": mostly(["16", "0.5"], st.sampled_from(["0", "-1", "nan", "1e300"])),
    "--hot-cache-gb": mostly(["1", "0"], st.sampled_from(["-1", "inf", "1e300"])),
}


@st.composite
def plan_argv(draw):
    argv = ["plan", "--model", draw(models()), "--accelerator", draw(accelerators()),
            "--context", draw(FLAG_VALUES["--context"])]
    values = {**FLAG_VALUES, **OWN_MACHINE_VALUES}
    for flag in draw(st.lists(st.sampled_from([f for f in values if f != "--context"]), max_size=4, unique=True)):
        argv += [flag, draw(values[flag])]
    return argv + ["--json"]


@st.composite
def fit_argv(draw):
    search = draw(st.sampled_from(["--context", "--batch"]))
    argv = ["fit", "--model", draw(models()), "--accelerator", draw(accelerators()), search,
            draw(FLAG_VALUES[search])]
    values = {k: v for k, v in {**FLAG_VALUES, **OWN_MACHINE_VALUES}.items()
              if k in ("--weights-dtype", "--kv-dtype", "--engine", "--usable-fraction", "--lora-rank",
                       "--draft-model")}
    for flag in draw(st.lists(st.sampled_from(list(values)), max_size=3, unique=True)):
        argv += [flag, draw(values[flag])]
    if draw(st.booleans()):
        argv += ["--accelerators", draw(mostly(["1", "2", "8"], st.sampled_from(["0", "-1", "1e9"])))]
    return argv + ["--json"]


@st.composite
def compare_argv(draw):
    names = draw(st.lists(st.one_of(st.sampled_from(BUNDLED), models()), min_size=1, max_size=3))
    argv = ["compare", "--models", ",".join(names), "--accelerator", draw(accelerators()),
            "--context", draw(FLAG_VALUES["--context"]), "--batch", draw(FLAG_VALUES["--batch"])]
    return argv + (["--engines"] if draw(st.booleans()) else []) + ["--json"]


@st.composite
def sweep_argv(draw):
    grid = lambda vals: st.lists(st.sampled_from(vals), min_size=1, max_size=4).map(",".join)
    return ["sweep", "--model", draw(models()), "--accelerator", draw(accelerators()),
            "--contexts", draw(grid(["1024", "4096", "8K", "0", "-1", "1e9", "x"])),
            "--batches", draw(grid(["1", "8", "64", "0", "1e12", "nan"])), "--json"]


@st.composite
def index_argv(draw):
    argv = ["index", "--type", draw(st.sampled_from(["flat", "ivf", "hnsw", "hnsw", "lsh"])),
            "--vectors", draw(INDEX_VALUES["--vectors"]), "--dim", draw(INDEX_VALUES["--dim"])]
    for flag in draw(st.lists(st.sampled_from(list(INDEX_VALUES)[2:]), max_size=4, unique=True)):
        argv += [flag, draw(INDEX_VALUES[flag])]
    return argv + ["--json"]


def argvs():
    """Every subcommand that reads files and numbers: plan most often (it has the most readers)."""
    return st.one_of(plan_argv(), plan_argv(), compare_argv(), sweep_argv(), index_argv(), fit_argv())


def strict(text: str):
    def refuse(name):
        raise ValueError(f"non-finite {name} in the JSON output")
    return json.loads(text, parse_constant=refuse)


class Hung(Exception):
    pass


def run_one(argv):
    out, err = io.StringIO(), io.StringIO()
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(Hung(f"more than 60 s: {argv}")))
    signal.alarm(60)   # a hang, not a slow machine: the first config case imports transformers
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(argv)
            except SystemExit as exc:
                code = exc.code
    finally:
        signal.alarm(0)
    return code, out.getvalue(), err.getvalue()


@settings(max_examples=CASES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(argvs())
def test_every_case_is_an_answer_or_one_line(argv):
    code, out, err = run_one(argv)
    assert code in (0, 2), (argv, code, err[-400:])
    if code == 0:
        strict(out)
        assert err == "", (argv, err[-400:])
    else:
        assert err.count("\n") == 1 and err.startswith("capacity: error: "), (argv, err[-600:])
        assert len(err) < 2000, (argv, len(err))


if __name__ == "__main__":
    test_every_case_is_an_answer_or_one_line()
    print(f"fuzz: {CASES} cases, every one an answer or one line")
