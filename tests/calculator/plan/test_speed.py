"""The per-weight-type speed model's arithmetic on hand-worked examples (no timing is asserted anywhere here)."""
import json

import pytest

from part1_capacity.calculator.plan import speed
from part1_capacity.experiments.engine import kernels
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.hardware.accelerators import kernels_from_dict, load_accelerator
from part1_capacity.calculator.plan.plan import Workload, make_plan
from part1_capacity.calculator.model.profiles import profile_from_dict

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
    return kernels_from_dict({"threads": 2, "op_overhead_s": 1e-6, "types": types, "source": "test", **over})


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
        kernels_from_dict({"threads": 1, "op_overhead_s": 0, "types": {"f16": {
            "decode_s_per_weight": -1.0, "prefill_s_per_weight_token": 1e-11}}})
    with pytest.raises(InputError, match="prefill_s_per_weight_token"):
        kernels_from_dict({"threads": 1, "op_overhead_s": 0, "types": {"f16": {
            "decode_s_per_weight": 1e-10, "prefill_s_per_weight_token": float("nan")}}})
    with pytest.raises(InputError):
        kernels_from_dict({"types": {}})


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
    assert "times from: datasheet roofline for q4_k_m" in text and "\n  assumption: " in text
    # one fact a line: the basis, then its assumption, each line without nested brackets
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("times from: "))
    assert "(assumption" not in lines[at] and lines[at + 1].startswith("  assumption: ")


# --- every branch of the cost model, worked by hand with the kernels above --------------------------------------
from types import SimpleNamespace as _NS

from part1_capacity.calculator.sizing.roofline import Pass


def test_a_decode_step_of_several_sequences_pays_the_extra_tokens_arithmetic():
    k = _kernels()
    # 1e8 q8_0 weights: read once (1e8 × 100 ps = 10 ms) + 2 more tokens at the product rate (1e8 × 2 × 40 ps = 8 ms);
    # attention 2e6 FLOP = 1e6 products at 50 ps + 2e6 B of f16 cache = 1e6 weights at 200 ps; 10 layers × 19 × 1 µs
    est = speed.host_decode({"q8_0": 1e8}, 10, 2e6, 2e6, k, batch=3)
    assert (est.matmuls, est.attention, est.overhead) == pytest.approx((0.018, 0.05e-3 + 0.2e-3, 190e-6))
    assert est.total == pytest.approx(0.018 + 0.25e-3 + 190e-6)
    assert speed.host_decode({"q8_0": 1e8}, 10, 2e6, 2e6, k).matmuls == pytest.approx(0.01)      # batch 1 by default
    # a prompt's attention reads no cache: only its FLOPs count; no output projection unless given
    est = speed.host_prefill({"q8_0": 1e8}, 512, 10, 2e6, k)
    assert (est.matmuls, est.attention) == pytest.approx((1e8 * 512 * 40e-12, 0.05e-3))


def test_where_the_times_come_from_in_words():
    one = _kernels(threads=1, source="this host, 1 thread")
    assert speed.basis(_NS(kernels=one), "q4_k_m") == \
        "measured kernels of this host (1 thread; q4_K + q6_K weights): this host, 1 thread"
    assert speed.basis(_NS(kernels=_kernels()), "q8_0") == "measured kernels of this host (2 threads; q8_0 weights): test"
    int4 = speed.speed_data()["datasheet"]["types"]["int4"]["source"]
    # a type the host has no kernel for, or an accelerator with none: the datasheet's assumption (efficiencies 1.0)
    for acc in (_NS(kernels=_kernels()), load_accelerator("h100")):
        assert speed.basis(acc, "int4") == f"datasheet roofline for int4: 1 × bandwidth, 1 × peak (assumption: {int4})"
    assert speed.datasheet_assumption("bf16")["source"].startswith("the roofline itself")


def test_what_kind_of_time_a_plan_gives(monkeypatch):
    h100, host = load_accelerator("h100"), _NS(kernels=_kernels())
    assert speed.time_kind(host, "q8_0") == "measured-kernel estimate"
    assert speed.time_kind(host, "int4") == speed.time_kind(h100, "bf16") == "roofline lower bound"
    # an efficiency below 1.0 on either side: no longer the bound no engine beats
    data = json.loads(speed.DATA.read_text())
    for key in ("decode_bandwidth_efficiency", "prefill_peak_efficiency"):
        data["datasheet"]["types"]["bf16"] = {"decode_bandwidth_efficiency": 1.0, "prefill_peak_efficiency": 1.0,
                                              key: 0.999, "source": "test"}
        monkeypatch.setattr(speed, "speed_data", lambda: data)
        assert speed.time_kind(h100, "bf16") == "roofline with assumed efficiencies"
        eff = data["datasheet"]["types"]["bf16"]
        assert speed.rates(h100, "bf16") == (989e12 * eff["prefill_peak_efficiency"],
                                              3.35e12 * eff["decode_bandwidth_efficiency"])
        assert speed.basis(h100, "bf16") == (
            f"datasheet roofline for bf16: {data['datasheet']['types']['bf16']['decode_bandwidth_efficiency']:g} × "
            f"bandwidth, {data['datasheet']['types']['bf16']['prefill_peak_efficiency']:g} × peak (assumption: test)")


def test_measured_seconds_of_a_pass():
    k = _kernels()
    host, model = _NS(kernels=k), _NS(params_active=1e8, n_layers=10)
    prefill = Pass("prefill", tokens=100, seqs=1, flops=0.0, attention_flops=2e6, weight_bytes=0.0, cache_bytes=0.0,
                   cache_bytes_per_rank=0.0)
    # 1e8 weights × 100 tokens × 40 ps = 0.4 s; attention 1e6 products × 50 ps; 10 × 19 × 1 µs
    assert speed.measured_seconds(model, host, "q8_0", prefill) == pytest.approx(0.4 + 50e-6 + 190e-6)
    decode = Pass("decode", tokens=2, seqs=2, flops=0.0, attention_flops=2e6, weight_bytes=0.0, cache_bytes=2e6,
                  cache_bytes_per_rank=0.0)
    # 2 sequences: 1e8 × 100 ps + 1e8 × 1 × 40 ps; attention 50 µs + 1e6 × 200 ps
    assert speed.measured_seconds(model, host, "q8_0", decode) == pytest.approx(0.014 + 250e-6 + 190e-6)
    # q4_k_m is 0.806 Q4_K (40 ps) and 0.194 Q6_K (45 ps) in the product
    assert speed.measured_seconds(model, host, "q4_k_m", prefill) == pytest.approx(
        1e8 * 100 * (0.806 * 40 + 0.194 * 45) * PS + 50e-6 + 190e-6)
    # nothing measured: no kernels, or not this type
    assert speed.measured_seconds(model, load_accelerator("h100"), "q8_0", prefill) is None
    assert speed.measured_seconds(model, host, "int4", prefill) is None


def test_a_weight_type_without_a_cpu_kernel_names_the_ones_measured():
    with pytest.raises(InputError) as e:
        speed.gguf_mix("mxfp4")
    assert str(e.value) == ("weights_dtype: 'mxfp4' has no measured CPU kernel; a measured host supports fp32, bf16, "
                            "fp16, q8_0, q5_0, q4_k_m")
    mix = speed.gguf_mix("q4_k_m")
    mix["q4_K"] = 0.0                                    # the caller's copy: the table stays as read
    assert speed.gguf_mix("q4_k_m") == {"q4_K": 0.806, "q6_K": 0.194}
    assert speed.gguf_mix("bf16") == {"f16": 1.0} and speed.gguf_mix("fp32") == {"f32": 1.0}


def test_an_unknown_weight_type_is_named_as_weights_dtype():
    h100 = load_accelerator("h100")
    for call in (speed.gguf_mix, speed.datasheet_assumption, lambda t: speed.basis(h100, t),
                 lambda t: speed.time_kind(h100, t)):
        with pytest.raises(InputError) as e:
            call("fp5")
        assert str(e.value).startswith("weights_dtype: unknown dtype 'fp5'"), str(e.value)


def test_an_accelerator_without_a_kernels_field_is_timed_from_its_datasheet():
    bare = _NS(bandwidth=1e12, peak_flops=lambda dtype: 1e15)     # what a duck-typed accelerator may carry
    model = _NS(params_active=1e8, n_layers=10)
    ps = Pass("decode", tokens=1, seqs=1, flops=0.0, attention_flops=0.0, weight_bytes=0.0, cache_bytes=0.0,
              cache_bytes_per_rank=0.0)
    assert speed.measured_seconds(model, bare, "q8_0", ps) is None
    assert speed.time_kind(bare, "q8_0") == "roofline lower bound"
    assert speed.basis(bare, "q8_0").startswith("datasheet roofline for q8_0: 1 × bandwidth, 1 × peak")
