"""The calculator's other commands and outputs: sweep (checked against a brute-force search written here), compare,
list, --emit vllm, accelerator profiles from a file, overflow tiers and the roofline."""
import json
import math

import numpy as np
import pytest

from tests.support.in_process import run
from part1_capacity.calculator.hardware.accelerators import load_accelerator
from course.shared.units import GIB
from part1_capacity.calculator.plan.plan import Workload, make_plan
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.uses.sweep import sweep

T128K = 131_072


def brute_force(model, acc, T, B, usable_fraction=0.9, overhead=2 * GIB, weight_bytes=2, kv_bytes=2):
    """Every allowed deployment, counted: tensor t a power of two ≤ max_tp dividing the heads; pipeline stages
    only with the largest such t; replicas as needed; for MoE, expert parallelism over t·d ≤ 256 ranks (d a power
    of two), each rank holding the dense weights / t, the experts / (t·d) and its ⌈B/d⌉ sequences."""
    usable = (acc.engine_memory_bytes or acc.memory_bytes) * usable_fraction - overhead   # the runtime's total
    W = model.params_total * weight_bytes
    experts = W * (1 - model.params_active / model.params_total)
    ts = [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= acc.max_tp and model.n_heads % t == 0
          and (model.n_kv_heads % t == 0 or t % model.n_kv_heads == 0)]
    best = math.inf
    for t in ts:
        kv_share = 1.0 if model.is_mla else max(model.n_kv_heads / t, 1) / model.n_kv_heads
        state_share = max(model.ssm.n_heads / t, 1) / model.ssm.n_heads if model.ssm else 0
        seq = model.attention_cache_bytes(T, kv_bytes) * kv_share + model.state_bytes(kv_bytes) * state_share
        for pp in range(1, (model.n_layers if t == max(ts) else 1) + 1):
            free = usable - W / (t * pp)
            per_replica = math.floor(free / (seq / pp)) if free > 0 else 0
            if per_replica >= 1:
                best = min(best, t * pp * math.ceil(B / per_replica))
        d = 1
        while model.is_moe and "vllm" in acc.engines and t * d <= 256:
            if (W - experts) / t + experts / (t * d) + math.ceil(B / d) * seq <= usable:
                best = min(best, t * d)
                break
            d *= 2
    return best


@pytest.mark.parametrize("model, acc", [("llama-3.1-70b", "h100"), ("deepseek-v3", "h200"), ("gpt-oss-120b", "l4"),
                                        ("qwen2.5-7b", "tpu-v5e"), ("granite-4.0-h-small", "mi300x")])
def test_sweep_matches_a_brute_force_search(model, acc):
    m, a = load_model(model), load_accelerator(acc)
    rng = np.random.default_rng(7)
    contexts = np.unique(rng.integers(1, m.max_context + 1, 6))
    batches = np.unique(rng.integers(1, 300, 6))
    s = sweep(m, a, contexts, batches, weights_dtype="bf16")
    for i, T in enumerate(contexts):
        for j, B in enumerate(batches):
            assert s.needed[i, j] == brute_force(m, a, int(T), int(B)), (T, B)
            plan = make_plan(m, a, Workload(context=int(T), batch=int(B), weights_dtype="bf16"))
            assert (plan.accelerators_needed or math.inf) == s.needed[i, j]
            assert (plan.accelerators_without_kv or math.inf) == s.without_kv[i, j]


def test_sweep_cli_writes_heatmaps_and_json(capsys, tmp_path):
    png = tmp_path / "h.png"
    code, out, _ = run(capsys, "sweep", "--model", "llama-3.1-8b", "--accelerator", "l4", "--contexts", "1K,8K,128K",
                       "--batches", "1,16", "--heatmap", str(png), "--json")
    assert code == 0 and png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    d = json.loads(out)
    assert d["contexts"] == [1024, 8192, 131072] and d["batches"] == [1, 16]
    added = np.array(d["accelerators_added_by_kv"], dtype=float)
    assert (np.diff(added, axis=0) >= 0).all() and (np.diff(added, axis=1) >= 0).all()


def test_compare_default_is_the_four_structures_at_128k(capsys):
    code, out, _ = run(capsys, "compare", "--json")
    assert code == 0
    plans = json.loads(out)
    assert [p["structure"] for p in plans] == ["gqa", "mla", "sliding_window", "ssm_hybrid"]
    assert all(p["workload"]["context"] == T128K for p in plans)
    assert len({p["accelerator"] for p in plans}) == 1
    for p in plans:
        assert p["bottleneck"] == ("kv_cache" if p["kv_bytes_total"] > p["weights_bytes"] else "weights")
    # the study's extremes: 160 KiB/token for the GQA model, 6 KiB/token for the SSM hybrid
    assert plans[0]["kv_bytes_per_token"] == 160 * 1024 and plans[3]["kv_bytes_per_token"] == 6 * 1024
    code, out, _ = run(capsys, "compare")
    assert code == 0 and "bottleneck" in out and "ssm_hybrid" in out


def test_list_commands(capsys):
    code, out, _ = run(capsys, "list", "models", "--json")
    models = json.loads(out)
    assert code == 0 and len(models) >= 15 and all(m["source"] for m in models)
    code, out, _ = run(capsys, "list", "accelerators", "--json")
    accs = json.loads(out)
    assert len(accs) >= 12 and {"laptop", "phone", "edge", "datacenter"} <= {a["kind"] for a in accs}
    code, out, _ = run(capsys, "list", "tiers", "--sources")
    assert code == 0 and all(t in out for t in ("hbm", "peer-hbm", "host-dram", "cxl", "nvme"))
    assert run(capsys, "list", "gpus")[0] == 2


def _vllm_flags(text):
    words = text.replace("\\\n", " ").split()
    return {words[i]: words[i + 1] for i, w in enumerate(words) if w.startswith("--") and i + 1 < len(words)}


def test_emit_vllm_matches_the_plan(capsys):
    argv = ["plan", "--model", "llama-3.1-70b", "--accelerator", "h100", "--context", "32768", "--batch", "48",
            "--kv-dtype", "fp8", "--usable-fraction", "0.85"]
    _, out, _ = run(capsys, *argv, "--json")
    plan = json.loads(out)
    code, out, _ = run(capsys, *argv, "--emit", "vllm")
    assert code == 0 and out.startswith("vllm serve meta-llama/Llama-3.1-70B-Instruct")
    f = _vllm_flags(out)
    par = plan["parallelism"]
    n = (int(f["--tensor-parallel-size"]) * int(f.get("--pipeline-parallel-size", 1))
         * int(f.get("--data-parallel-size", 1)))
    assert n == plan["accelerators_needed"] == par["tensor"] * par["pipeline"] * par["data"]
    assert f["--max-model-len"] == "32768" and f["--kv-cache-dtype"] == "fp8"
    assert f["--gpu-memory-utilization"] == "0.85"
    assert int(f["--max-num-seqs"]) * int(f.get("--data-parallel-size", 1)) >= 48
    code, _, err = run(capsys, "plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "1024",
                       "--kv-dtype", "int8", "--emit", "vllm")
    assert code == 2 and "kv_dtype" in err and "fp8" in err


def test_accelerator_from_a_json_file(tmp_path, capsys):
    host = {"id": "this-host", "name": "course machine (measured)", "kind": "host", "memory_gb": 24,
            "bandwidth_gb_s": 25, "bf16_tflops": 0.2, "max_tp": 1, "status": "measured", "source": "E1/E2 runs"}
    p = tmp_path / "host.json"
    p.write_text(json.dumps(host))
    acc = load_accelerator(str(p))
    assert acc.memory_bytes == 24e9 and acc.bandwidth == 25e9 and acc.peak_flops("bf16") / acc.bandwidth == pytest.approx(8.0)
    assert load_accelerator(str(p)).to_json_entry()["memory_gb"] == 24
    code, out, _ = run(capsys, "plan", "--model", "qwen2.5-0.5b", "--accelerator", str(p), "--context", "4096",
                       "--json")
    assert code == 0 and json.loads(out)["accelerator"] == "this-host"
    host.pop("bandwidth_gb_s")
    p.write_text(json.dumps(host))
    code, _, err = run(capsys, "plan", "--model", "qwen2.5-0.5b", "--accelerator", str(p), "--context", "4096")
    assert code == 2 and "missing field 'bandwidth_gb_s'" in err


def test_overflow_beyond_the_weights_only_deployment():
    plan = make_plan("llama-3.1-70b", "h200", context=T128K, batch=64)
    d = plan.to_dict()
    # by hand: 141.1 GB of bf16 weights need 2 H200s (139.80 GiB as the runtime reports it × 0.9 − 2 GiB = 132.95 GB
    # usable each); each of the 2 ranks then holds half of 64 × 40 GiB of cache against what the weights leave free.
    usable = 139.80 * GIB * 0.9 - 2 * GIB
    assert d["accelerators_without_kv"] == 2
    free = usable - 70.55e9 * 2 / 2
    need = 64 * 40 * GIB / 2
    assert d["overflow_bytes"] == pytest.approx(2 * (need - free))
    tiers = {t["tier"]: t for t in d["overflow_tiers"]}
    assert list(tiers) == ["peer-hbm", "host-dram", "cxl", "nvme"]
    assert [t["fits"] for t in tiers.values()] == [t["capacity_bytes_per_accelerator"] >= need - free
                                                    for t in tiers.values()]
    slow = [t["slowdown_vs_hbm"] for t in tiers.values()]
    assert slow == sorted(slow) and slow[0] > 1          # slower tier, slower decode
    # no overflow when the cache fits beside the weights
    assert make_plan("llama-3.1-8b", "h200", context=4096, batch=1).to_dict()["overflow_tiers"] == []


def test_roofline_bounds_from_first_principles():
    # decode of a dense bf16 model, batch 1: ~2 FLOP per 2-byte weight (plus attention over 2K cached tokens, a few
    # percent more FLOPs than bytes of cache), far below any accelerator's ridge → memory
    d = make_plan("llama-3.1-8b", "h100", context=2048, batch=1).to_dict()
    assert d["decode"]["arithmetic_intensity"] == pytest.approx(1.0, abs=0.1) and d["decode"]["bound"] == "memory"
    assert d["decode"]["ridge_point"] == pytest.approx(989e12 / 3.35e12)
    # prefill of 2048 tokens: ~2·T FLOP per weight byte pair ≈ 2048 FLOP/byte, above the ridge → compute
    assert d["prefill"]["arithmetic_intensity"] > 1000 and d["prefill"]["bound"] == "compute"
    # batching decode raises intensity about linearly while the cache is small
    d64 = make_plan("llama-3.1-8b", "h100", context=256, batch=64).to_dict()
    assert 40 < d64["decode"]["arithmetic_intensity"] < 64
    # fp8 weights use the fp8 peak: the ridge doubles
    assert make_plan("llama-3.1-8b", "h100", context=256, weights_dtype="fp8").to_dict()["decode"]["ridge_point"] \
        == pytest.approx(1979e12 / 3.35e12)


def test_gguf_weights_use_their_real_bits_per_weight():
    q8 = make_plan("llama-3.1-8b", "m4-max", context=4096, weights_dtype="q8_0")
    q5 = make_plan("llama-3.1-8b", "m4-max", context=4096, weights_dtype="q5_0")
    assert q8.weights_bytes == pytest.approx(8.03e9 * 34 / 32)
    assert q5.weights_bytes == pytest.approx(8.03e9 * 22 / 32)


def test_human_plan_output_is_a_table(capsys):
    code, out, _ = run(capsys, "plan", "--model", "deepseek-v3", "--accelerator", "h200", "--context", "128K",
                       "--batch", "64", "--weights-dtype", "fp8")
    assert code == 0
    assert "bottleneck: weights" in out and "KV / weights" in out and "decode" in out and "prefill" in out


def test_a_laptops_tiers_are_its_own_and_hf_ids_are_not_downloaded(capsys, monkeypatch, tmp_path):
    # a laptop's overflow goes to its SSD, never to a server's host DRAM, CXL or a peer's HBM
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))   # an empty Hub cache
    d = make_plan("llama-3.1-70b", "m4-max", context=T128K, batch=4, weights_dtype="q4_k_m").to_dict()
    assert d["overflow_bytes"] > 0 and [t["tier"] for t in d["overflow_tiers"]] == ["nvme-gen4"]
    nvme = d["overflow_tiers"][0]
    assert nvme["bandwidth"] == 7.45e9 and nvme["slowdown_vs_hbm"] > 1
    # a Hub id is read over HTTP (config and headers only); offline and not in the Hub cache, it is one line
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = run(capsys, "plan", "--model", "meta-llama/Llama-3.1-8B", "--accelerator", "h100", "--context", "8")
    assert code == 2 and "HF_HUB_OFFLINE is set and meta-llama/Llama-3.1-8B is not in the Hub cache" in err


def test_every_accelerator_kind_has_its_own_memory_and_somewhere_to_overflow():
    from part1_capacity.calculator.hardware.accelerators import bundled_accelerators
    from part1_capacity.calculator.hardware.tiers import KINDS, tier_table, tiers_for

    rows = tier_table()
    assert {k for t in rows for k in t["kinds"]} == set(KINDS)
    for a in bundled_accelerators().values():
        ts = tiers_for(a)
        own = [t for t in ts if t.own_memory]
        assert len(own) == 1 and own[0].capacity_bytes == (a.engine_memory_bytes or a.memory_bytes), a.id
        assert own[0].bandwidth == a.bandwidth, a.id
        assert [t for t in ts if not t.own_memory], a.id
    assert all(t["source"].strip() for t in rows)


def _tiers_file(tmp_path, rows):
    p = tmp_path / "tiers.json"
    p.write_text(json.dumps({"tiers": rows}))
    return str(p)


GOOD_TIER = {"id": "pool", "name": "pooled DRAM", "kinds": ["datacenter"], "capacity_gb": 512,
             "bandwidth_gb_s": 100, "latency_ns": 900, "status": "assumption", "source": "my rack"}


def test_plan_takes_a_tier_table_from_a_file(capsys, tmp_path):
    argv = ["plan", "--model", "deepseek-v3", "--accelerator", "h200", "--context", "128K", "--batch", "64",
            "--json"]
    code, out, _ = run(capsys, *argv, "--tiers", _tiers_file(tmp_path, [GOOD_TIER]))
    tiers = json.loads(out)["overflow_tiers"]
    assert code == 0 and [t["tier"] for t in tiers] == ["pool"]
    assert tiers[0]["bandwidth"] == 100e9 and tiers[0]["capacity_bytes_per_accelerator"] == 512e9
    # the bundled table, written out by `list tiers --json`, reads back as the same plan
    code, listed, _ = run(capsys, "list", "tiers", "--json")
    same = tmp_path / "same.json"
    same.write_text(listed)
    _, a, _ = run(capsys, *argv)
    _, b, _ = run(capsys, *argv, "--tiers", str(same))
    assert json.loads(a)["overflow_tiers"] == json.loads(b)["overflow_tiers"]


@pytest.mark.parametrize("change, message", [
    ({"kinds": ["mainframe"]}, "field 'kinds' must be a non-empty list of datacenter, host, workstation, desktop, "
                               "laptop, phone, edge, got ['mainframe']"),
    ({"bandwidth_gb_s": "fast"}, "field 'bandwidth_gb_s' must be a number or one of accelerator, peer_link, "
                                 "got 'fast'"),
    ({"capacity_gb": -1}, "field 'capacity_gb'"),
    ({"latency_ns": float("nan")}, "NaN"),
    ({"status": "rumour"}, "field 'status' must be one of vendor, derived, measured, assumption, unverified"),
    ({"source": " "}, "field 'source' must say where the figures come from"),
    ({"own_memory": "yes"}, "field 'own_memory' must be true or false"),
])
def test_a_bad_tier_file_is_one_line_and_exit_2(capsys, tmp_path, change, message):
    p = tmp_path / "tiers.json"
    p.write_text(json.dumps({"tiers": [{**GOOD_TIER, **change}]}, allow_nan=True))
    code, out, err = run(capsys, "plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "4096",
                         "--tiers", str(p))
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1
    assert "tiers" in err and "tiers.json" in err           # the file is named


def test_a_tier_file_needs_rows_with_distinct_ids(capsys, tmp_path):
    for rows, message in (([], "expected {\"tiers\": [...]} with at least one tier"),
                          ([GOOD_TIER, GOOD_TIER], "tier id 'pool' appears twice")):
        code, _, err = run(capsys, "plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "4096",
                           "--tiers", _tiers_file(tmp_path, rows))
        assert code == 2 and message in err


def _help(argv, capsys):
    from part1_capacity.cli import main

    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    return capsys.readouterr().out


def test_capacity_help_groups_the_commands_and_its_examples_run(capsys):
    """`capacity --help`: the calculator's commands, then the experiments, then the course's, each command once
    under its heading, and examples; every example without a placeholder path runs (exit 0)."""
    import shlex

    from part1_capacity.cli import main

    text = _help(["--help"], capsys)
    heads = [ln for ln in text.splitlines() if ln and not ln.startswith(" ") and ln.endswith(":")]
    assert heads[:3] == ["the calculator:", "experiments: the calculator checked on this machine:",
                         "the course: who buys inference, and the evidence:"], heads
    calc, exp, course = (text.split(h, 1)[1].split("\n\n", 1)[0] for h in heads[:3])
    assert calc.split()[0] == "plan" and "  compare " in calc and "  e1 (kv-allocation)" not in calc
    assert all(f"  {e} (" in exp for e in ("e1", "e2", "e3")) and "  plan " not in exp
    assert "  archetypes " in course and "  claims " in course
    examples = [ln.strip() for ln in text.split("examples:\n", 1)[1].splitlines() if ln.strip()]
    runnable = [shlex.split(e.split("  ")[0]) for e in examples if "path/to" not in e and "--help" not in e]
    assert len(runnable) >= 3
    for argv in runnable:
        assert argv[0] == "capacity" and main(argv[1:]) == 0, argv
        capsys.readouterr()


def test_plan_help_lists_the_common_flags_first_and_its_examples_run(capsys):
    import shlex

    from part1_capacity.cli import main

    text = _help(["plan", "--help"], capsys)
    flags = [ln.split()[0] for ln in text.splitlines() if ln.startswith("  --")]
    assert flags[:6] == ["--model", "--accelerator", "--context", "--batch", "--weights-dtype", "--kv-dtype"], flags
    assert flags.index("--kv-cache-memory") > flags.index("--json")        # vLLM internals after the output flags
    examples = [ln.strip() for ln in text.split("examples:\n", 1)[1].splitlines() if ln.strip()]
    assert examples and all(e.startswith("capacity plan --model") for e in examples)
    for e in examples:
        if "path/to" not in e:
            assert main(shlex.split(e)[1:]) == 0, e
            capsys.readouterr()


def test_a_tier_fits_when_one_accelerators_overflow_fits_in_its_share():
    """A tier's capacity is per accelerator, so it is compared with ONE rank's overflow, not the whole. Llama-3.1-70B
    on H200 at 128K × 64 (as above): 2 ranks, each with 139.80 GiB × 0.9 − 2 GiB − 70.55e9 = 62.40e9 bytes free and
    32 × 40 GiB = 1,374.39e9 bytes of cache, so 1,311.99e9 bytes over per rank and 2,623.98e9 in all. A pool of
    2,000 GB per accelerator holds one rank's overflow (fits) though not the whole (which would say it does not)."""
    from part1_capacity.calculator.hardware.tiers import tier_rows
    pool = {"id": "pool", "name": "a made-up pool", "kinds": ["datacenter"], "capacity_gb": 2000,
            "bandwidth_gb_s": 50, "latency_ns": 1000, "status": "assumption", "source": "made up for this test"}
    plan = make_plan("llama-3.1-70b", "h200", context=T128K, batch=64, tiers=tier_rows([pool], "test tiers"))
    per_rank = 32 * 40 * GIB - (139.80 * GIB * 0.9 - 2 * GIB - 70.55e9)
    assert plan.overflow["ranks"] == 2 and plan.overflow["bytes_per_rank"] == pytest.approx(per_rank)
    assert per_rank < 2000e9 < 2 * per_rank
    assert [(t["tier"], t["fits"]) for t in plan.overflow_tiers] == [("pool", True)]
