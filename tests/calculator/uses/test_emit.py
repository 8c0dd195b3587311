"""Emitted engine commands: every flag is one the engine's own argument parser defines, with a value it accepts,
and the command serves the plan (parallelism, context, sequences, cache type, the repository)."""
import json
import re
from pathlib import Path

import pytest

from tests.support.in_process import run

REPO = Path(__file__).resolve().parents[3]
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
    # multi-node data parallelism (docs/serving/data_parallel_deployment.md) and the start-up budget flags
    "--data-parallel-size-local": int, "--data-parallel-address": str, "--data-parallel-rpc-port": int,
    "--kv-cache-memory-bytes": int, "--max-num-batched-tokens": int, "--block-size": int,
}
# llama-server's flags (common/arg.cpp of the pinned llama.cpp) when its source is not on this machine.
LLAMA_DOCUMENTED = {"-m", "-c", "-np", "-ctk", "-ctv", "-fa", "-ngl", "--n-cpu-moe", "-nkvo", "--lora", "-md", "--draft-max"}
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
    # common_arg({names}, ...) — a boolean option has a second group, its negative names: common_arg({"-kvo", …},
    # {"-nkvo", "--no-kv-offload"}, …)
    for group, negatives in re.findall(r"common_arg\(\s*\{([^}]*)\}(?:\s*,\s*\{([^}]*)\})?", text):
        names |= set(re.findall(r'"(-[^"]+)"', group + negatives))
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

    from part1_capacity.calculator.uses import emit
    from part1_capacity.calculator.base.errors import InputError
    from part1_capacity.calculator.plan.plan import Workload, make_plan
    from part1_capacity.calculator.readers.loader import load_model

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


# No llama-server binary: `make test` builds llama-bench only (the server would add mtmd, cpp-httplib and the web UI
# to the one llama.cpp build), and `llama-server --help` prints the very table read here, common/arg.cpp of the
# vendored source that `make test` always links into build/llama.cpp-src.
@pytest.mark.skipif(not sorted((REPO / "build" / "llama.cpp-src").glob("*/vendor/llama.cpp/common/arg.cpp")),
                    reason="llama.cpp's source is not here (make llama links it)")
def test_llama_cpp_argument_table_has_the_documented_flags():
    table = llama_server_flags()
    assert len(table) > 100                  # read from arg.cpp (hundreds of flags), not the documented stand-in
    assert LLAMA_DOCUMENTED <= table, LLAMA_DOCUMENTED - table


def test_emit_vllm_multi_node_data_parallel_every_node_joins_the_head(capsys):
    # vLLM's docs (docs/serving/data_parallel_deployment.md): every node, the head included, names the head's
    # --data-parallel-address and the same --data-parallel-rpc-port; the others add --headless and their first rank
    out = vllm_serve(capsys, "--model", "deepseek-v3", "--accelerator", "h200", "--context", "128K", "--batch", "32")
    head = check_vllm(out)
    local = int(head["--data-parallel-size-local"])
    # double-quoted: one word whatever the operator's HEAD_IP holds, still expanded by the shell
    assert head["--data-parallel-address"] == '"$HEAD_IP"' and int(head["--data-parallel-rpc-port"]) > 0
    assert "set HEAD_IP to the head node's address" in out
    nodes = [line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("# node ")]
    assert nodes, out
    for k, cmd in enumerate(nodes, start=1):
        _, f = parse(cmd, head=3)
        assert "--headless" in f and f["--data-parallel-start-rank"] == str(k * local)
        assert f["--data-parallel-address"] == head["--data-parallel-address"]
        assert f["--data-parallel-rpc-port"] == head["--data-parallel-rpc-port"]
    assert int(head["--data-parallel-size"]) == local * (len(nodes) + 1)


def test_emit_vllm_names_the_release_it_needs(capsys):
    out = vllm_serve(capsys, "--model", "deepseek-v3", "--accelerator", "h200", "--context", "128K", "--batch", "32")
    assert "# needs vLLM >= 0.9.1 (--" in out and "not verified for --data-parallel-start-rank" in out
    out = vllm_serve(capsys, "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "8192")
    assert "# needs vLLM >= 0.5.3 (" in out


def test_emit_vllm_fp8_weights_on_an_a100_run_at_the_16_bit_rate(capsys):
    out = vllm_serve(capsys, "--model", "llama-3.1-8b", "--accelerator", "a100", "--context", "8192",
                     "--weights-dtype", "fp8")
    assert check_vllm(out)["--quantization"] == "fp8"
    assert "no FP8 tensor cores" in out and "16-bit rate" in out
    out = vllm_serve(capsys, "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "8192",
                     "--weights-dtype", "fp8")
    assert "16-bit rate" not in out


def test_emit_vllm_passes_the_start_up_flags_given(capsys):
    out = vllm_serve(capsys, "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "8192", "--engine",
                     "vllm", "--kv-cache-memory", "20GiB", "--max-num-batched-tokens", "4096", "--block-size", "32",
                     "--gpu-memory-utilization", "0.8")
    f = check_vllm(out)
    assert f["--kv-cache-memory-bytes"] == str(20 * 2 ** 30) and f["--max-num-batched-tokens"] == "4096"
    assert f["--block-size"] == "32" and f["--gpu-memory-utilization"] == "0.8"
    assert "needs vLLM >= 0.14.1 (--kv-cache-memory-bytes" in out


def test_emit_llama_cpp_caps_slots_at_llama_max_seq(capsys):
    # llama.cpp src/llama-cparams.h: LLAMA_MAX_SEQ 256; llama-context.cpp throws "n_seq_max must be <= 256"
    code, out, err = run(capsys, "plan", "--model", "llama-3.1-8b", "--accelerator", "m4-max", "--context", "1024",
                         "--batch", "600", "--weights-dtype", "q4_k_m", "--emit", "llama.cpp")
    assert code == 0, err
    _, f = parse(out)
    assert int(f["-np"]) <= 256 and int(f["-c"]) == 1024 * int(f["-np"])
    servers = int(out.split("so run ")[1].split(" such servers")[0])
    assert servers * int(f["-np"]) >= 600 and (servers - 1) * int(f["-np"]) < 600
    code, out, err = run(capsys, "plan", "--model", "llama-3.1-8b", "--accelerator", "m4-max", "--context", "1024",
                         "--batch", "256", "--weights-dtype", "q4_k_m", "--emit", "llama.cpp")
    assert parse(out)[1]["-np"] == "256" and "such servers of" not in out
