"""Property-based fuzz of the hostile-input classes of the fourth round (Hypothesis): config fields the calculator
reads (dtype names, booleans, numbers, a model_type with escape codes or a lone surrogate), checkpoint folders (shard
sets, symlinks, indexes), answers of a hostile Hub on 127.0.0.1 (tests/support/local_hub.py: trickling, huge, endless,
redirect loops, lying lengths, Range ignored, hostile revisions and file names), output paths (``sweep --heatmap``)
and ``--emit`` lines for hostile file names (piped into bash with stub engines).

Each case ends in one of: ``answer`` (exit 0, every printed character printable, strict JSON when asked, and the
oracle of its class holds: a dtype or boolean the calculator cannot read never gives a plan, an incomplete folder
never gives a plan, a heatmap is a PNG at the path asked and nowhere else, an emitted line runs only the engine with
the exact file name), ``refusal`` (exit 2 and one printable line ``capacity: error: …``), ``wrong`` (an answer its
oracle refuses, or a file written outside what was asked), ``traceback`` or ``hang`` (60 s).

- In the suite (tests/part1/cli/test_fuzz_hostile.py): a few dozen cases per class, every one ``answer`` or ``refusal``.
- Alone: ``python tests/support/fuzz_hostile.py [N]`` runs N cases (default 1,200) over every class and prints the figures.
Deterministic (derandomized): the same cases on every run.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from part1_capacity import cli  # noqa: E402

SCRATCH = Path(tempfile.mkdtemp(prefix="capacity-fuzz4-"))
WORK = SCRATCH / "work"          # the current folder of every case: nothing may appear here unless asked
WORK.mkdir()
BASE = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256, "max_position_embeddings": 4096}
READABLE_DTYPES = ("bfloat16", "float16", "half", "float32", "float")     # dtypes.CONFIG_DTYPES, with torch. too
DTYPE_SEEDS = ["float64", "int4", [], 0, "bfloat16", "float16", "half", "float", "torch.float32", "torch.bfloat16",
               "auto", "bf16", "float8_e4m3fn", "\x1b[2J", "\ud800", {}, 16, True, None]
BOOL_SEEDS = ["false", "true", 0, 1, None, True, False, [], "", 1.0]
BOOL_FIELDS = ["tie_word_embeddings", "attention_bias", "mlp_bias", "use_sliding_window", "multi_query"]
NUMBER_SEEDS = st.one_of(st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=False, allow_infinity=False),
                         st.sampled_from([0, 1, -1, 64, 4096, 2 ** 31, "64", None, [], [64, 64], True]))
NUMBER_FIELDS = ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                 "intermediate_size", "vocab_size", "max_position_embeddings", "sliding_window", "num_local_experts",
                 "num_experts_per_tok"]
EVIL_TEXT = ["llama\x1b]0;pwned\x07\x1b[2J", "llama\ud800", "llama\nsecond", "llama\u202e", "\x00", "llama" * 100]
HOSTILE_NAMES = ["a\ntouch canary\n", "x'; touch canary; '", "$(touch canary)", "`touch canary`", "a;touch canary;#",
                 "b\r\x1b]0;t\x07&& touch canary", "c\\\n touch canary", "ok", "é\u202e", "-rf", "a$\\undefined{$",
                 "t\tab"]
STUB = "#!/bin/sh\nprintf '%s\\0' \"$(basename \"$0\")\" \"$@\" >> \"$ARGV_LOG\"\nprintf '\\n' >> \"$ARGV_LOG\"\n"
HUB_BEHAVIOURS = ["", "", "", "", "", "", "", "", "trickle", "trickle-headers", "huge", "endless", "redirect-loop",
                  "lying-short", "lying-long", "no-range"]
HUB_TARGETS = ["api", "config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
               "model-00002-of-00002.safetensors"]
REVISIONS = [None, None, None, None, None, "main", "../../../../../x", "/etc", "a/../b", "main\nx", "v1\x1b[2J", "",
             "refs/pr/1", "a" * 300, "nope", "x\\y", " main"]
_n = [0]


def fresh(kind: str) -> Path:
    _n[0] += 1
    p = SCRATCH / f"{kind}{_n[0]}"
    p.mkdir()
    return p


# --- cases: (argv, oracle) -----------------------------------------------------------------------------------------
# an oracle takes (code, out) and says what is wrong with an answer, or None
@st.composite
def config_cases(draw):
    cfg = dict(BASE)
    refuse = False
    if draw(st.booleans()):
        key = draw(st.sampled_from(["torch_dtype", "dtype"]))
        v = draw(st.sampled_from(DTYPE_SEEDS))
        cfg[key] = v
        ok = v is None or (isinstance(v, str) and v.removeprefix("torch.") in READABLE_DTYPES)
        refuse |= not ok
    for key in draw(st.lists(st.sampled_from(BOOL_FIELDS), max_size=2, unique=True)):
        v = draw(st.sampled_from(BOOL_SEEDS))
        cfg[key] = v
        refuse |= v is not None and not isinstance(v, bool)
    for key in draw(st.lists(st.sampled_from(NUMBER_FIELDS), max_size=2, unique=True)):
        cfg[key] = draw(NUMBER_SEEDS)
    if draw(st.integers(0, 3)) == 0:
        cfg["model_type"] = draw(st.sampled_from(EVIL_TEXT))
        cfg["architectures"] = ["LlamaForCausalLM"]
    name = draw(st.sampled_from(HOSTILE_NAMES + ["config"]))
    p = fresh("c") / f"{name}.json"
    p.write_text(json.dumps(cfg))
    command = draw(st.sampled_from([["plan", "--context", "64", "--json"], ["plan", "--context", "64"],
                                    ["sweep", "--contexts", "64,128", "--batches", "1,2", "--heatmap",
                                     str(p.parent / "m.png")],
                                    ["plan", "--context", "64", "--emit", "llama.cpp"]]))
    argv = [command[0], "--model", str(p), "--accelerator", "h100", *command[1:]]
    emit = f"{name.lower()}-bf16.gguf" if "--emit" in command and name != "config" else None

    def oracle(code, out):
        if refuse:
            return "a dtype or boolean the calculator cannot read gave a plan"
        if emit is not None and "-bf16.gguf" in out:
            return check_emit(out, emit)
        return None
    return argv, oracle


@st.composite
def folder_cases(draw):
    from tests.calculator.readers.test_checkpoints import write_safetensors
    d = fresh("f")
    (d / "config.json").write_text(json.dumps({**BASE, "torch_dtype": "bfloat16"}))
    n = draw(st.integers(1, 4))
    present = draw(st.lists(st.integers(1, n), min_size=1, max_size=n, unique=True))
    for k in present:
        write_safetensors(d / f"model-{k:05d}-of-{n:05d}.safetensors",
                          {f"t{k}": ("BF16", (4, 64), 512)})
    whole = sorted(present) == list(range(1, n + 1))
    extra = draw(st.sampled_from(["", "", "symlink", "hardlink", "duplicate", "index-partial", "index-whole",
                                  "index-wrong"]))
    if extra == "symlink":
        (d / "z.safetensors").symlink_to(d / f"model-{present[0]:05d}-of-{n:05d}.safetensors")
    elif extra == "hardlink":
        os.link(d / f"model-{present[0]:05d}-of-{n:05d}.safetensors", d / "z.safetensors")
    elif extra == "duplicate":
        write_safetensors(d / "consolidated.safetensors", {f"t{present[0]}": ("BF16", (4, 64), 512)})
    elif extra.startswith("index"):
        wm = {f"t{k}": f"model-{k:05d}-of-{n:05d}.safetensors" for k in present}
        if extra == "index-partial" and len(wm) > 1:
            wm.pop(next(iter(wm)))
        if extra == "index-wrong":
            wm["lm_head.weight"] = next(iter(wm.values()))
        (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wm}))
    # an index that names a whole set (every shard, each tensor where it is) is whole; anything else is not
    good = whole and extra in ("", "index-whole") or (extra == "index-partial" and whole and n == 1)
    argv = ["plan", "--model", str(d), "--accelerator", "h100", "--context", "64", "--json"]

    def oracle(code, out):
        if not good:
            return "an incomplete or doubled checkpoint folder gave a plan"
        if json.loads(out)["weights_bytes"] != 512 * n:      # n shards of one 4 × 64 bf16 tensor each
            return "a whole folder gave the wrong bytes"
        return None
    return argv, oracle


@st.composite
def hub_cases(draw):
    from tests.support.local_hub import Repo
    from tests.calculator.readers.test_hub import BYTES, sharded_repo
    hostile = {t: b for t, b in zip(HUB_TARGETS, draw(st.lists(st.sampled_from(HUB_BEHAVIOURS), min_size=5,
                                                                max_size=5))) if b}
    repo = f"org/r{_n[0]}"
    _n[0] += 1
    kind = draw(st.sampled_from(["sharded", "sharded", "names", "config-bytes"]))
    if kind == "sharded":
        HUB.repos[repo] = sharded_repo(hostile=hostile)
    elif kind == "names":
        name = draw(st.sampled_from(["../x", "a/../../b", "x\ny", "/abs", "ok.txt", "é"]))
        HUB.repos[repo] = Repo(files={"config.json": json.dumps(BASE).encode(), name: b""})
    else:
        HUB.repos[repo] = Repo(files={"config.json": draw(st.binary(max_size=300))})
    rev = draw(st.sampled_from(REVISIONS))
    argv = ["plan", "--model", repo, "--accelerator", "h100", "--context", "64", "--json"]
    if rev is not None:
        argv += ["--revision", rev]

    def oracle(code, out):
        if rev not in (None, "main"):
            return f"revision {rev!r}, which the repository does not have, gave a plan"
        if kind == "sharded" and json.loads(out)["weights_bytes"] != BYTES:
            return "a sharded repository gave the wrong bytes"
        return None
    return argv, oracle


@st.composite
def path_cases(draw):
    d = fresh("p")
    kind = draw(st.sampled_from(["new", "existing", "symlink", "symlink-follow", "fifo", "dir", "empty", "long",
                                 "longpath", "missing-folder", "text", "devfull", "dangling"]))
    target = d / "target.png"
    path, follow = str(d / "map.png"), False
    if kind == "existing":
        Path(path).write_text("old")
    elif kind in ("symlink", "symlink-follow"):
        target.write_text("precious")
        os.symlink(target, path)
        follow = kind == "symlink-follow"
    elif kind == "dangling":
        os.symlink(d / "nowhere.png", path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        os.mkdir(path)
    elif kind == "empty":
        path = ""
    elif kind == "long":
        path = str(d / ("x" * draw(st.integers(252, 300)) + ".png"))
    elif kind == "longpath":
        path = str(d) + "/a" * 2100 + ".png"
    elif kind == "missing-folder":
        path = str(d / "no" / "map.png")
    elif kind == "text":
        path = str(d / (draw(st.text(alphabet=st.characters(blacklist_characters="/\0",
                                                             blacklist_categories=("Cs",)), max_size=40)) + ".png"))
    elif kind == "devfull":
        path = "/dev/full"
    argv = ["sweep", "--model", "llama-3.1-8b", "--accelerator", "h100", "--contexts", "1024", "--batches", "1,2",
            "--heatmap", path] + (["--follow-symlinks"] if follow else [])

    def oracle(code, out):
        if kind in ("symlink", "fifo", "dir", "empty", "long", "longpath", "missing-folder", "devfull", "dangling"):
            return f"a heatmap path of kind {kind} was written"
        written = target if kind == "symlink-follow" else Path(path)
        if written.is_symlink() and kind != "symlink-follow" or not written.is_file() \
                or written.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
            return "the heatmap is not a PNG at the path asked"
        return None
    return argv, oracle


# --- running a case --------------------------------------------------------------------------------------------------
def check_emit(out: str, expected: str) -> str | None:
    """``out`` piped into bash with stub engines first on PATH: only the stub runs, with ``-m expected``."""
    d = fresh("e")
    (d / "bin").mkdir()
    (d / "run").mkdir()
    stub = d / "bin" / "llama-server"
    stub.write_text(STUB)
    stub.chmod(0o755)
    log = d / "argv.log"
    log.write_bytes(b"")
    done = subprocess.run(["bash"], input=out.encode("utf-8", "surrogateescape"), cwd=d / "run", capture_output=True,
                          env={"PATH": f"{d / 'bin'}:/usr/bin:/bin", "ARGV_LOG": str(log), "HOME": str(d / "run")},
                          timeout=30)
    runs = [r.split(b"\0") for r in log.read_bytes().split(b"\0\n")[:-1]]
    if done.returncode != 0 or any((d / "run").iterdir()):
        return "the emitted line ran something else"
    if len(runs) != 1 or runs[0][1:3] != [b"-m", expected.encode("utf-8", "surrogateescape")]:
        return f"the emitted line gave the engine another argv: {runs}"
    return None


class Hung(Exception):
    pass


def run_case(argv, oracle, seconds: int = 60) -> tuple[str, str]:
    """(outcome, detail) of one invocation, in WORK, with an alarm."""
    before = set(os.listdir(WORK))
    out, err = io.StringIO(), io.StringIO()

    def hung(*_):
        raise Hung()
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    cwd = os.getcwd()
    try:
        os.chdir(WORK)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(argv)
            except SystemExit as exc:
                code = exc.code
    except Hung:
        return "hang", repr(argv)
    except BaseException:
        return "traceback", f"{argv!r}\n{traceback.format_exc()[-1500:]}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        os.chdir(cwd)
    out, err = out.getvalue(), err.getvalue()
    if set(os.listdir(WORK)) != before:
        return "wrong", f"a file appeared in the current folder: {argv!r}"
    if code == 2:
        if err.count("\n") == 1 and err.startswith("capacity: error: ") and err[:-1].isprintable() and len(err) < 2000:
            return "refusal", err
        return "traceback", f"{argv!r}: not one printable line: {err[-800:]!r}"
    if code != 0:
        return "traceback", f"{argv!r}: exit {code}: {err[-800:]!r}"
    if not all(c.isprintable() or c == "\n" for c in out + err):
        return "wrong", f"{argv!r}: a raw control character printed"
    if "--json" in argv:
        try:
            json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except ValueError as exc:
            return "wrong", f"{argv!r}: not strict JSON ({exc})"
    problem = oracle(code, out) if oracle else None
    return ("wrong", f"{argv!r}: {problem}") if problem else ("answer", "")


# --- the hostile Hub, shared by every case ---------------------------------------------------------------------------
HUB = None


def start_hub():
    """The local Hub, and the environment every Hub case reads (small deadlines: a trickle costs a second)."""
    global HUB
    from tests.support.local_hub import Hub
    if HUB is None:
        HUB = Hub().start()
    os.environ.update({"HF_ENDPOINT": HUB.url, "HF_HUB_CACHE": str(SCRATCH / "cache"), "HF_HUB_OFFLINE": "0",
                       "HF_HUB_ETAG_TIMEOUT": "2", "HF_HUB_DOWNLOAD_TIMEOUT": "2", "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
                       "CAPACITY_HUB_REQUEST_DEADLINE": "0.5", "CAPACITY_HUB_DEADLINE": "1.5"})
    os.environ.pop("HF_TOKEN", None)
    return HUB


CLASSES = {"config": config_cases, "folder": folder_cases, "hub": hub_cases, "path": path_cases}


def all_cases():
    return st.one_of(*(f() for f in CLASSES.values()))


if __name__ == "__main__":
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 1200
    start_hub()
    tally, by_class, failures = Counter(), Counter(), []
    for cls, strategy in CLASSES.items():             # the same share of cases for every class

        @settings(max_examples=total // len(CLASSES), deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(strategy())
        def fuzz(case):
            argv, oracle = case
            outcome, detail = run_case(argv, oracle)
            tally[outcome] += 1
            by_class[(cls, outcome)] += 1
            if outcome not in ("answer", "refusal"):
                failures.append(detail)

        fuzz()
    n = sum(tally.values())
    print(f"fuzz4: {n} invocations: {tally['refusal']} one-line refusals, {tally['answer']} right answers, "
          f"{tally['traceback']} tracebacks, {tally['hang']} hangs, {tally['wrong']} wrong")
    for (cls, outcome), k in sorted(by_class.items()):
        print(f"  {cls:7s} {outcome:9s} {k}")
    for f in failures[:20]:
        print("---", f)
    HUB.stop()
    sys.exit(1 if failures else 0)
