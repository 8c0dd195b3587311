"""The per-weight-type speed model's arithmetic on hand-worked examples (no timing is asserted anywhere here)."""
import json

import pytest

from part1_capacity.calculator import speed
from part1_capacity.experiments.engine import kernels
from part1_capacity.calculator.errors import InputError
from part1_capacity.calculator.hardware import load_accelerator
from part1_capacity.calculator.plan import Workload, make_plan
from part1_capacity.calculator.profiles import profile_from_dict

PS = 1e-12


def _kernels(**over):
    types = {"f16": {"decode_s_per_weight": 200 * PS, "compute_s_per_weight": 30 * PS,
                     "prefill_s_per_weight_token": 50 * PS},
             "q8_0": {"decode_s_per_weight": 100 * PS, "compute_s_per_weight": 25 * PS,
                      "prefill_s_per_weight_token": 40 * PS},
             "q4_K": {"decode_s_per_weight": 50 * PS, "compute_s_per_weight": 20 * PS,
                      "prefill_s_per_weight_token": 40 * PS},
             "q6_K": {"decode_s_per_weight": 60 * PS, "compute_s_per_weight": 25 * PS,
                      "prefill_s_per_weight_token": 45 * PS}}
    return speed.kernels_from_dict({"threads": 2, "op_overhead_s": 1e-6, "types": types, "source": "test", **over})


def test_decode_and_prefill_matmuls_sum_weights_times_their_type_cost():
    k = _kernels()
    mix = {"q4_K": 1e9, "q6_K": 2e8}
    # 1e9 × 50 ps + 2e8 × 60 ps = 0.050 + 0.012 s
    assert speed.decode_matmul_seconds(mix, k) == pytest.approx(0.062)
    # 512 tokens: 1e9 × 512 × 40 ps + 2e8 × 512 × 45 ps = 20.48 + 4.608 s
    assert speed.prefill_matmul_seconds(mix, 512, k) == pytest.approx(25.088)


def test_overhead_is_nodes_per_layer_times_layers_times_node_cost():
    assert speed.nodes_per_layer() == 19
    assert speed.overhead_seconds(20, _kernels()) == pytest.approx(20 * 19 * 1e-6)


def test_attention_runs_at_the_f16_rates():
    # 2e9 FLOP = 1e9 weight-token products at 50 ps; 2e6 bytes of f16 cache = 1e6 "weights" at 200 ps
    assert speed.attention_seconds(2e9, 2e6, _kernels()) == pytest.approx(0.05 + 2e-4)


def test_prefill_applies_the_output_projection_once():
    k = _kernels()
    est = speed.host_prefill({"q8_0": 1e8}, 512, 10, 0.0, k, output_weights={"q8_0": 1e7})
    # 1e8 × 512 × 40 ps = 2.048 s; output 1e7 × 100 ps (one token) = 1 ms; overhead 10 × 19 × 1 µs
    assert est.matmuls == pytest.approx(2.048 + 1e-3)
    assert est.total == pytest.approx(2.049 + 190e-6)


def test_q4_k_m_mix_reproduces_its_average_bits():
    mix = speed.gguf_mix("q4_k_m")
    assert sum(mix.values()) == pytest.approx(1.0)
    # Q4_K 144 bytes per 256 (4.5 bits), Q6_K 210 per 256 (6.5625): the mix averages dtypes.py's 4.9 bits
    assert 4.5 * mix["q4_K"] + 6.5625 * mix["q6_K"] == pytest.approx(4.9, abs=1e-3)
    with pytest.raises(InputError, match="weights_dtype"):
        speed.gguf_mix("mxfp4")


def test_kernel_constants_are_validated():
    with pytest.raises(InputError, match="decode_s_per_weight"):
        speed.kernels_from_dict({"threads": 1, "op_overhead_s": 0, "types": {"f16": {
            "decode_s_per_weight": -1.0, "prefill_s_per_weight_token": 1e-11}}})
    with pytest.raises(InputError, match="prefill_s_per_weight_token"):
        speed.kernels_from_dict({"threads": 1, "op_overhead_s": 0, "types": {"f16": {
            "decode_s_per_weight": 1e-10, "prefill_s_per_weight_token": float("nan")}}})
    with pytest.raises(InputError):
        speed.kernels_from_dict({"types": {}})


def test_constants_from_runs_take_the_node_overhead_off():
    runs = [{"kind": "overhead", "threads": 1, "type": "f32", "k": 64, "m": 8, "n": 1, "copies": 64,
             "repacked": False, "seconds": [64e-6, 64e-6, 70e-6]},
            {"kind": "stream", "threads": 1, "type": "q8_0", "k": 1000, "m": 1000, "n": 1, "copies": 2,
             "repacked": False, "seconds": [2.2e-3, 2.0e-3, 2.4e-3]},
            {"kind": "prefill", "threads": 1, "type": "q8_0", "k": 1000, "m": 1000, "n": 500, "copies": 2,
             "repacked": False, "seconds": [0.040002, 0.040002, 0.050002]}]
    c = kernels.constants_from_runs(runs)["1"]
    assert c["op_overhead_s"] == pytest.approx(1e-6)                 # median 64 µs over 64 nodes
    q8 = c["types"]["q8_0"]
    assert q8["decode_s_per_weight"] == pytest.approx((1.1e-3 - 1e-6) / 1e6)   # median 2.2 ms over 2 copies
    assert q8["prefill_s_per_weight_token"] == pytest.approx((0.020001 - 1e-6) / 1e6 / 500)
    assert q8["bytes_per_weight"] == 34 / 32


def test_datasheet_accelerators_use_the_stated_assumption():
    h100 = load_accelerator("h100")
    assert speed.rates(h100, "int4") == (989e12, 3.35e12)            # efficiency 1.0 × the datasheet
    assert speed.rates(h100, "fp8") == (1979e12, 3.35e12)            # fp8 peak for W8A8
    how = speed.basis(h100, "q4_k_m")
    assert "assumption" in how and "MARLIN" in how
    d = make_plan("llama-3.1-8b", "h100", context=4096, weights_dtype="q4_k_m").to_dict()
    assert "assumption" in d["decode"]["basis"] and "assumption" in d["prefill"]["basis"]


def test_plan_on_a_host_with_kernels_takes_its_times_from_them(tmp_path):
    entry = {"id": "test-host", "kind": "host", "memory_gb": 24, "bandwidth_gb_s": 20, "bf16_tflops": 0.1,
             "kernels": {"threads": 2, "op_overhead_s": 1e-6, "source": "test",
                         "types": {t: v for t, v in _kernels().types.items()}}}
    path = tmp_path / "host.json"
    path.write_text(json.dumps(entry))
    acc = load_accelerator(str(path))
    assert acc.kernels.threads == 2 and acc.to_json_entry()["kernels"]["types"]["q8_0"]["decode_s_per_weight"] \
        == pytest.approx(100 * PS)
    model = profile_from_dict({"id": "m", "n_layers": 10, "n_heads": 8, "n_kv_heads": 8, "head_dim": 64,
                               "hidden_size": 512, "params_total": 1e9, "max_context": 4096})
    p = make_plan(model, acc, Workload(context=100, weights_dtype="q8_0", kv_dtype="fp16"))
    # decode: 1e9 × 100 ps = 0.1 s; attention 4·8·64·100·10 = 2,048,000 FLOP at 50 ps per 2 FLOP = 51.2 µs and
    # the f16 cache 2·10·8·64·2 B × 100 = 2,048,000 B at 200 ps per 2 B = 204.8 µs; overhead 10 × 19 × 1 µs
    assert p.decode.time_s == pytest.approx(0.1 + 51.2e-6 + 204.8e-6 + 190e-6)
    assert p.decode.basis.startswith("measured kernels")
    # prefill of 100 tokens: 1e9 × 100 × 40 ps = 4 s; attention 4·8·64·(100·101/2)·10 FLOP at 25 ps per FLOP
    assert p.prefill.time_s == pytest.approx(4.0 + 4 * 8 * 64 * 5050 * 10 * 25 * PS + 190e-6)


def test_plan_output_says_where_its_times_come_from():
    from part1_capacity.commands.plan import render

    text = render(make_plan("llama-3.1-8b", "h100", context=4096, weights_dtype="q4_k_m"))
    assert "times from: datasheet roofline for q4_k_m" in text and "(assumption: " in text
