"""The engine checks (E1, E2, this host's profile) on tiny models written by the project: real llama.cpp, seconds.

Expected values come from first principles — the model's shape and the block layouts of the GGUF types — never
from the code's own output. No timing is asserted: the agreement llama-bench ↔ Python API (E2 asks for it) is\nmeasured by part1_capacity/experiments/bench_agreement.py.
"""
import json
import math
import subprocess
import sys

import pytest

from part1_capacity.calculator.sizing import roofline
from part1_capacity.experiments.engine import bench, kv_allocation, llama
from part1_capacity.experiments.engine.gguf_model import TINY, LlamaShape, read_shape, shape_for_params, write_llama_gguf

MIB = 2 ** 20


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_llama_gguf(tmp_path_factory.mktemp("gguf") / "tiny-f32.gguf", TINY)


def capacity(*args):
    return subprocess.run([sys.executable, "-m", "part1_capacity.cli", *args], capture_output=True, text=True)


# --- the GGUF writer ----------------------------------------------------------------------------------------------
def test_written_gguf_loads_in_llama_cpp_with_the_shape_written(tiny):
    shape = read_shape(tiny)
    assert (shape.architecture, shape.n_layers, shape.n_heads, shape.n_kv_heads) == ("llama", 2, 4, 2)
    assert shape.head_dim_k == shape.head_dim_v == 256 // 4
    # Parameter count by hand: embeddings and output (2 × vocab × d), final norm, and per layer two norms,
    # Q and O (d × d), K and V (d × n_kv × head_dim), gate/up/down (3 × d × d_ff).
    d, kv, ff, v, layers = 256, 2 * 64, 768, 512, 2
    by_hand = 2 * v * d + d + layers * (2 * d + 2 * d * d + 2 * d * kv + 3 * d * ff)
    with llama.Model(tiny) as m:
        assert m.n_params == by_hand == shape.n_params
        assert m.size_bytes == 4 * by_hand  # all F32


def test_shape_for_params_reaches_the_requested_size():
    for n in (10_000_000, 500_000_000):
        s = shape_for_params(n)
        assert s.n_params() >= n
        fewer = LlamaShape(s.n_layers - 1, s.d_model, s.n_heads, s.n_kv_heads, s.d_ff)
        assert fewer.n_params() < n  # the fewest layers that reach it
        assert s.d_ff % 256 == 0 and s.d_model % s.n_heads == 0 and s.n_heads % s.n_kv_heads == 0


# --- E1 ------------------------------------------------------------------------------------------------------------
def test_kv_line_parser_reads_the_engines_format():
    line = ("llama_kv_cache: size =   16.00 MiB (  2048 cells,   8 layers,  1/1 seqs), "
            "K (f16):    8.00 MiB, V (f16):    8.00 MiB")
    (kv,) = llama.parse_kv_lines(["noise", line])
    assert (kv.cells, kv.layers, kv.k_type, kv.size_bytes) == (2048, 8, "f16", 16 * MIB)


def test_e1_slope_equals_the_formula_to_the_byte(tiny):
    r = kv_allocation.run(tiny)
    # 2 (K and V) × 2 layers × 2 KV heads × 64 × 2 bytes (f16) = 1024 bytes per token;
    # q8_0 stores 32 values in 34 bytes: 1024 × 34/32 / 2 = 544.
    by = {row["kv_type"]: row for row in r["by_kv_type"]}
    assert by["f16"]["formula_bytes_per_token"] == 1024
    assert by["q8_0"]["formula_bytes_per_token"] == 544
    assert by["f16"]["reported_bytes"] == [1024 * n for n in (2048, 8192, 16384)]
    for row in by.values():
        assert round(row["slope_bytes_per_token"]) == row["formula_bytes_per_token"]
        assert row["match"] is True
    assert r["match"] is True and r["contexts"] == [2048, 8192, 16384]


def test_e1_reports_a_mismatch_for_a_wrong_shape(tiny):
    """The check can fail: a profile claiming 4 KV heads instead of 2 does not match what the engine allocates."""
    from part1_capacity.calculator.model.profiles import profile_from_dict

    wrong = profile_from_dict({"id": "wrong", "n_layers": 2, "n_heads": 4, "n_kv_heads": 4, "head_dim": 64,
                               "hidden_size": 256, "params_total": 1e6, "max_context": 32768})
    with llama.Model(tiny) as m:
        row = kv_allocation.check_kv_type(m, wrong, "f16", contexts=(2048, 4096))
    assert row["match"] is False and row["formula_bytes_per_token"] == 2048


def test_capacity_e1_json_has_the_issue_keys(tiny):
    out = capacity("e1", "--gguf", str(tiny), "--json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    for key in ("contexts", "reported_bytes", "slope_bytes_per_token", "formula_bytes_per_token", "match"):
        assert key in r
    assert r["match"] is True and "date_utc" in r and "host" in r and r["command"].startswith("capacity e1")
    assert "e1 [" in out.stderr  # the progress bar goes to stderr, stdout stays JSON


# --- E2 ------------------------------------------------------------------------------------------------------------
def test_quantize_ladder_bits_per_weight_follow_the_block_layouts(tiny, tmp_path):
    # F16: 16 bits; Q8_0: 34 bytes per 32 weights = 8.5; Q5_0: 22 bytes per 32 = 5.5 (its output matrix may be
    # kept at a higher type); Q4_K_M mixes Q4_K (144 bytes per 256 = 4.5) with Q6_K (210 per 256 = 6.5625).
    bpw = {}
    for level in ("F16", "Q8_0", "Q5_0", "Q4_K_M"):
        dst = llama.quantize(tiny, tmp_path / f"{level}.gguf", level)
        with llama.Model(dst) as m:
            bpw[level] = 8 * m.size_bytes / m.n_params
    assert bpw["F16"] == pytest.approx(16, abs=0.05)
    assert bpw["Q8_0"] == pytest.approx(8.5, abs=0.05)
    assert 5.5 <= bpw["Q5_0"] < 5.5 + 0.15
    assert 4.5 < bpw["Q4_K_M"] < 6.5625
    assert bpw["F16"] > bpw["Q8_0"] > bpw["Q5_0"] > bpw["Q4_K_M"]


def test_prefill_and_decode_by_hand_are_separate_measurements(tiny):
    with llama.Model(tiny) as m:
        pp = llama.tokens_per_second(m, n_prompt=64, repeats=2)
        tg = llama.tokens_per_second(m, n_gen=8, repeats=2)
        with pytest.raises(ValueError):
            llama.tokens_per_second(m, n_prompt=64, n_gen=8)
    assert len(pp) == len(tg) == 2 and all(math.isfinite(x) and x > 0 for x in pp + tg)


def _no_nan(name):
    raise AssertionError(f"non-standard JSON constant {name} in the output")


def test_capacity_e2_json_keys_and_predictions_from_the_calculator(tiny):
    """Predicted decode on a memory-bound accelerator is bandwidth ÷ bytes read per token: the weights at the
    calculator's bits per weight (Q8_0: 8.5) plus the f16 cache at tg128's mean position (64 tokens × 1024 B)."""
    out = capacity("e2", "--gguf", str(tiny), "--method", "python", "--repeats", "2", "--accelerator", "h100",
                   "--json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout, parse_constant=_no_nan)   # strict JSON: no NaN or Infinity
    assert [lv["type"] for lv in r["levels"]] == ["F32", "F16", "Q8_0", "Q5_0", "Q4_K_M"]
    for lv in r["levels"]:
        for key in ("type", "file_bytes", "bits_per_weight", "pp512_tps", "tg128_tps", "predicted_pp512_tps",
                    "predicted_tg128_tps", "prediction_error"):
            assert key in lv
        assert set(lv["prediction_error"]) == {"pp512", "tg128"}
        assert lv["prediction_error"]["tg128"] == pytest.approx(lv["predicted_tg128_tps"] / lv["tg128_median_tps"] - 1)
        assert lv["pp512_tps"] > 0 and lv["tg128_tps"] > 0 and lv["pp512_stddev"] >= 0
    from part1_capacity.calculator.hardware.accelerators import load_accelerator

    bw = load_accelerator("h100").bandwidth
    q8 = r["levels"][2]
    assert q8["predicted_tg128_bound"] == "memory" and "assumption" in q8["prediction_basis"]
    assert q8["predicted_tg128_tps"] == pytest.approx(bw / (TINY.n_params() * 8.5 / 8 + 64 * 1024), rel=1e-6)


def test_host_profile_is_an_accelerator_the_calculator_loads(tmp_path):
    from part1_capacity.experiments.engine import quant_ladder
    from part1_capacity.calculator.hardware.accelerators import load_accelerator

    measured = {"threads": 2, "bandwidth_bytes_per_s": 12.5e9, "matmul_fp32_flops": 80e9,
                "matmul_int8_ops": 160e9, "method": "test figures"}
    prof = quant_ladder.host_accelerator(measured, {"cpu": "test cpu", "memory_bytes": 24e9})
    path = tmp_path / "host.json"
    path.write_text(json.dumps(prof))
    acc = load_accelerator(str(path))
    assert (acc.bandwidth, acc.flops_16, acc.flops_int8, acc.memory_bytes) == (12.5e9, 80e9, 160e9, 24e9)
    assert roofline.ridge_point(acc.peak_flops("fp16"), acc.bandwidth) == pytest.approx(80e9 / 12.5e9)


def test_host_measurement_runs_with_the_engines_limits():
    """The real measurement (a subprocess with MKL/oneDNN capped at AVX2): positive figures, one per run."""
    from part1_capacity.experiments.engine import host

    m = host.measure(threads=1, repeats=1)
    # isa_cap is torch's own report from inside the capped subprocess (torch.backends.cpu.get_cpu_capability):
    # AVX2 there even on a CPU with AVX-512, where this process reports the wider unit
    assert m["threads"] == 1 and m["isa_cap"] == "AVX2"
    assert len(m["bandwidth_all_bytes_per_s"]) == 3 and len(m["matmul_fp32_all_flops"]) == 1
    assert m["bandwidth_bytes_per_s"] == max(m["bandwidth_all_bytes_per_s"]) > 0
    assert m["matmul_fp32_flops"] > 0 and m["matmul_int8_ops"] > 0


def test_bad_input_is_one_line_and_exit_2(tiny, tmp_path):
    q = llama.quantize(tiny, tmp_path / "q.gguf", "Q8_0")
    for args, field in ((("e1", "--gguf", str(tmp_path / "missing.gguf")), "--gguf"),
                        (("e2", "--gguf", str(q), "--accelerator", "h100"), "--gguf"),
                        (("e2", "--params", "0"), "--params"),
                        (("e2", "--params", "lots"), "--params"),
                        (("e2", "--gguf", str(tiny), "--accelerator", "h1OO"), "accelerator")):
        out = capacity(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert field in out.stderr and "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr


# --- llama-bench ↔ Python API --------------------------------------------------------------------------------------
@pytest.mark.skipif(bench.find_llama_bench() is None, reason="llama-bench not built (make llama-bench)")
def test_python_method_runs_the_same_tests_as_llama_bench(tiny):
    """Both E2 methods run the same tests (pp, tg), the asked number of times, on the same file: llama-bench's own
    report of the model is the file the project wrote. Whether their speeds agree within 10 % is a timing: the
    benchmark script part1_capacity/experiments/bench_agreement.py measures it."""
    ref = bench.run_llama_bench(tiny, n_prompt=32, n_gen=8, repeats=2, threads=1)
    ours = bench.run_python(tiny, n_prompt=32, n_gen=8, repeats=2, threads=1)
    for r, method in ((ref, "llama-bench"), (ours, "python")):
        assert {k: (len(r[k]["samples"]), r[k]["method"]) for k in ("pp", "tg")} == \
            {"pp": (2, method), "tg": (2, method)}
        assert all(x > 0 for k in ("pp", "tg") for x in r[k]["samples"])
    assert ref["pp"]["model_n_params"] == ref["tg"]["model_n_params"] == TINY.n_params()
    assert "-p 32 -n 8 -t 1 -r 2" in ref["command"] and "pp 32, tg 8, repeats=2, threads=1" in ours["command"]


def test_the_agreement_benchmark_needs_one_agreeing_attempt_per_metric():
    from part1_capacity.experiments.bench_agreement import agree

    assert agree({"pp": [1.3, 1.08], "tg": [0.95]})          # |1.08 − 1| and |0.95 − 1| ≤ 0.10
    assert not agree({"pp": [1.3, 1.08], "tg": [0.85, 1.2]})  # tg never within ±10 %
