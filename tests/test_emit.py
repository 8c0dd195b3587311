"""Emitted engine commands: every flag is one the engine's own argument parser defines, with a value it accepts,
and the command serves the plan (parallelism, context, sequences, cache type, the repository)."""
import json
import re
import shutil
from pathlib import Path

import pytest

from tests.in_process import run

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "tests" / "data" / "configs"

# vLLM's flags as its parser defines them (vllm/engine/arg_utils.py, EngineArgs.add_cli_args; vLLM is not
# installed here, so the documented list stands in for the parser), with the values each accepts
# (--kv-cache-dtype: a subset of vllm/config/cache.py CacheDType; --dtype: vllm/config/model.py ModelDType).
VLLM_FLAGS = {
    "--tensor-parallel-size": int, "--pipeline-parallel-size": int, "--data-parallel-size": int,
    "--enable-expert-parallel": None, "--max-model-len": int, "--max-num-seqs": int,
    "--kv-cache-dtype": ("auto", "fp8", "fp8_e4m3", "fp8_e5m2"), "--gpu-memory-utilization": float,
    "--dtype": ("auto", "half", "float16", "bfloat16", "float", "float32"), "--quantization": ("fp8",),
    "--trust-remote-code": None,
}
# llama-server's flags (common/arg.cpp of the pinned llama.cpp) when its source is not on this machine.
LLAMA_DOCUMENTED = {"-m", "-c", "-np", "-ctk", "-ctv", "-fa", "-ngl"}
LLAMA_KV_TYPES = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"}


def parse(text, head=1):
    """The command line (comment lines apart) → (its first ``head`` words, {flag: value or None})."""
    words = " ".join(x for x in text.replace("\\\n", " ").splitlines() if not x.startswith("#")).split()
    flags, i = {}, head
    while i < len(words):
        flag = words[i]
        assert flag.startswith("-"), (flag, words)
        value = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("-") else None
        assert flag not in flags, f"{flag} given twice"
        flags[flag] = value
        i += 2 if value is not None else 1
    return words[:head], flags


def check_vllm(text):
    head, flags = parse(text, head=3)
    assert head[:2] == ["vllm", "serve"] and "/" in head[2]
    for flag, value in flags.items():
        assert flag in VLLM_FLAGS, f"vLLM has no {flag}"
        kind = VLLM_FLAGS[flag]
        if kind is None:
            assert value is None
        elif isinstance(kind, tuple):
            assert value in kind, (flag, value)
        else:
            kind(value)
    return flags


def llama_server_flags():
    """Flag names from llama.cpp's own argument table (common/arg.cpp), or the documented list without it."""
    src = sorted((REPO / "build" / "llama.cpp-src").glob("*/vendor/llama.cpp/common/arg.cpp"))
    if not src:
        return LLAMA_DOCUMENTED
    text = src[-1].read_text(errors="replace")
    names = set()
    for group in re.findall(r"common_arg\(\s*\{([^}]*)\}", text):
        names |= set(re.findall(r'"(-[^"]+)"', group))
    return names


def vllm_serve(capsys, *argv):
    code, out, err = run(capsys, "plan", *argv, "--emit", "vllm")
    assert code == 0, err
    return out


def test_emit_vllm_tensor_parallel_in_one_node(capsys):
    out = vllm_serve(capsys, "--model", "llama-3.1-70b", "--accelerator", "h100", "--context", "32K", "--batch", "16")
    f = check_vllm(out)
    assert out.startswith("vllm serve meta-llama/Llama-3.1-70B-Instruct")
    assert f["--tensor-parallel-size"] == "8" and "--pipeline-parallel-size" not in f
    assert f["--max-model-len"] == "32768" and f["--max-num-seqs"] == "16"


def test_emit_vllm_expert_parallel_for_deepseek(capsys):
    out = vllm_serve(capsys, "--model", "deepseek-v3", "--accelerator", "h200", "--context", "128K", "--batch", "32")
    f = check_vllm(out)
    assert "--enable-expert-parallel" in f
    assert int(f["--tensor-parallel-size"]) * int(f.get("--data-parallel-size", 1)) == 16
    assert "--data-parallel-size-local" in out          # the multi-node note says how to start the other node


def test_emit_vllm_kimi_trusts_remote_code(capsys):
    out = vllm_serve(capsys, "--model", "kimi-k2", "--accelerator", "h200", "--context", "32K", "--batch", "8")
    assert "--trust-remote-code" in check_vllm(out)


def test_emit_vllm_quantized_checkpoint_is_served_as_shipped(capsys):
    # gpt-oss ships MXFP4 experts: vLLM reads quantization_config first, so a --dtype flag would not give bf16
    # weights. The command must not pretend it does, and must say so.
    out = vllm_serve(capsys, "--model", "gpt-oss-120b", "--accelerator", "h100", "--context", "32K",
                     "--weights-dtype", "bf16")
    f = check_vllm(out)
    assert "--dtype" not in f and "--quantization" not in f
    assert "quantization_config" in out and "mxfp4" in out
    # a bf16 checkpoint re-quantized on load: vLLM's online fp8
    out = vllm_serve(capsys, "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "8K",
                     "--weights-dtype", "fp8")
    assert check_vllm(out)["--quantization"] == "fp8"


def test_emit_vllm_refused_where_vllm_does_not_run(capsys):
    code, _, err = run(capsys, "plan", "--model", "llama-3.1-8b", "--accelerator", "m4-max", "--context", "8K",
                       "--emit", "vllm")
    assert code == 2 and err.count("\n") == 1 and "--emit llama.cpp" in err


def test_emit_vllm_repository_from_the_config(capsys, tmp_path):
    # a config.json saved from a repository names it in _name_or_path: that is what `vllm serve` loads
    d = json.loads((CONFIGS / "qwen2.5-0.5b" / "config.json").read_text())
    d["_name_or_path"] = "Qwen/Qwen2.5-0.5B-Instruct"
    p = tmp_path / "qwen" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps(d))
    out = vllm_serve(capsys, "--model", str(p), "--accelerator", "h100", "--context", "4096")
    assert out.startswith("vllm serve Qwen/Qwen2.5-0.5B-Instruct ")


def test_emit_vllm_without_a_repository_asks_for_one():
    from dataclasses import replace

    from part1_capacity.calculator import emit
    from part1_capacity.calculator.errors import InputError
    from part1_capacity.calculator.plan import Workload, make_plan
    from part1_capacity.calculator.loader import load_model

    anonymous = replace(load_model("qwen3-8b"), hf_repo="")
    plan = make_plan(anonymous, "h100", Workload(context=4096))
    with pytest.raises(InputError, match="--hf-repo"):
        emit.command(plan, "vllm")
    assert emit.command(plan, "vllm", "Qwen/Qwen3-8B").startswith("vllm serve Qwen/Qwen3-8B ")


def test_emit_llama_cpp_for_a_laptop(capsys):
    code, out, err = run(capsys, "plan", "--model", "llama-3.1-70b", "--accelerator", "m4-max", "--context", "32K",
                         "--batch", "2", "--weights-dtype", "q4_k_m", "--kv-dtype", "q8_0", "--emit", "llama.cpp")
    assert code == 0, err
    head, f = parse(out)
    assert head == ["llama-server"] and f["-m"].endswith(".gguf")
    known = llama_server_flags()
    assert set(f) | {"-m"} <= known, set(f) - known
    # two slots of 32K: llama-server gives each slot c / np tokens (src/llama-context.cpp, n_ctx_seq)
    assert int(f["-c"]) == 2 * 32768 and f["-np"] == "2"
    assert f["-ctk"] == f["-ctv"] == "q8_0" and f["-ctk"] in LLAMA_KV_TYPES
    assert f["-fa"] == "on"                  # a quantized V cache needs flash attention
    code, _, err = run(capsys, "plan", "--model", "llama-3.1-8b", "--accelerator", "jetson-agx-orin", "--context",
                       "8K", "--kv-dtype", "fp8", "--emit", "llama.cpp")
    assert code == 2 and "-ctk" in err


@pytest.mark.skipif(not shutil.which("llama-server") and not (REPO / "build" / "llama.cpp" / "bin" /
                                                             "llama-server").exists(),
                    reason="llama-server is not built here (the Makefile builds llama-bench); arg.cpp is checked")
def test_llama_server_help_lists_the_flags():
    import subprocess
    exe = shutil.which("llama-server") or str(REPO / "build" / "llama.cpp" / "bin" / "llama-server")
    help_text = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60).stdout
    for flag in LLAMA_DOCUMENTED:
        assert re.search(rf"(^|[\s,]){re.escape(flag)}([\s,]|$)", help_text, re.M), flag
