"""How the speed model is validated against the ladders: the goal arithmetic, the kernels a run is predicted from,
and how repeated kernel rounds combine — on worked examples (no timing is asserted)."""
import copy

import pytest

from part1_capacity.experiments.engine import kernels
from part1_capacity.experiments.engine import quant_ladder as ql
from part1_capacity.experiments.engine.common import load_result
from part1_capacity.calculator.base.errors import InputError


def _level(kind, pp, pp_pred, tg, tg_pred):
    return {"type": kind, "pp512_tps": pp, "pp512_median_tps": pp, "tg128_tps": tg, "tg128_median_tps": tg,
            "predicted_pp512_tps": pp_pred, "predicted_tg128_tps": tg_pred,
            "prediction_error": {"pp512": pp_pred / pp - 1, "tg128": tg_pred / tg - 1},
            "prediction_basis": "speed model, test kernels (2 threads)",
            "pp512_samples": [pp * 0.9, pp, pp * 1.1], "tg128_samples": [tg, tg]}


def test_goals_are_15_percent_for_decode_and_25_for_prefill_either_way():
    levels = [_level("F32", 100, 124, 10, 11.4),     # +24 % prefill, +14 % decode: both met
              _level("F16", 100, 126, 10, 11.6),     # +26 %, +16 %: both missed
              _level("Q8_0", 100, 76, 10, 8.6),      # −24 %, −14 %: met
              _level("Q5_0", 100, 74, 10, 8.4),      # −26 %, −16 %: missed
              {**_level("Q4_K", 100, 100, 10, 10), "prediction_basis": "roofline"}]   # not the speed model: left out
    rows = ql.validation_rows({"run": {"model": {"n_params": 5e8}, "threads": 2, "levels": levels,
                                       "levels_by_threads": {"2": levels}}})
    assert [r["type"] for r in rows] == ["F32", "F16", "Q8_0", "Q5_0"]
    assert [(r["pp512_ok"], r["tg128_ok"]) for r in rows] == [(True, True), (False, False), (True, True),
                                                              (False, False)]
    assert rows[0]["pp512_spread"] == pytest.approx(0.2)   # (110 − 90) ÷ 100
    assert rows[0]["threads"] == 2 and rows[0]["params"] == 5e8


def test_study_ratios_come_from_the_f32_and_q4_k_m_rows():
    f32 = {"type": "F32", "file_bytes": 4000, "pp512_tps": 100, "tg128_tps": 10}
    q4 = {"type": "Q4_K_M", "file_bytes": 600, "pp512_tps": 160, "tg128_tps": 24.8}
    x = ql.study_ratios([f32, q4])
    assert x == pytest.approx({"size": 0.15, "prefill_gain": 0.6, "decode_gain": 1.48, "theory": 4000 / 600})
    assert ql.study_ratios([f32]) is None


def _run(kind, seconds, rnd, threads=1, type_="q8_0", k=1000, m=1000, n=1, copies=1):
    return {"kind": kind, "threads": threads, "type": type_, "k": k, "m": m, "n": n, "copies": copies,
            "repacked": False, "seconds": seconds, "round": rnd}


def test_repeated_rounds_combine_by_their_median():
    """Three rounds of the same streamed product, one of them slowed by the machine: the constant is the middle
    round's, not the mean (which the slow round would pull up by a third)."""
    runs = [_run("stream", [1.0e-3, 1.0e-3, 1.2e-3], 0), _run("stream", [3.0e-3] * 3, 1),
            _run("stream", [1.1e-3] * 3, 2)]
    c = kernels.constants_from_runs(runs)["1"]["types"]["q8_0"]
    assert c["decode_s_per_weight"] == pytest.approx(1.1e-3 / 1e6)


def test_a_run_with_kernels_measured_around_it_is_predicted_from_them():
    """A saved ladder carrying its own kernel rounds: its predictions use them, not the separately saved file,
    and say so. With every decode cost doubled, the predicted matmul time of each decode step doubles."""
    r = load_result("e2")
    c = kernels.load_constants()
    assert r is not None and c is not None, "the project ships results/e2.json and results/e2_kernels.json"
    r = _without_beside({k: v for k, v in r.items() if k != "session_kernels"})
    slow = copy.deepcopy(c)
    for th in slow.values():
        for t in th["types"].values():
            t["decode_s_per_weight"] *= 2
    base, own = ql.repredict(r, c), ql.repredict({**r, "session_kernels": {"constants": slow}})
    for a, b in zip(base["levels"], own["levels"]):
        assert b["predicted_parts_s"]["tg128"]["matmuls"] == pytest.approx(2 * a["predicted_parts_s"]["tg128"]["matmuls"])
        assert b["predicted_parts_s"]["pp512"] == pytest.approx(a["predicted_parts_s"]["pp512"], rel=0.02)
        assert "measured around this run" in b["prediction_basis"]
    assert "e2_kernels.json" in ql.repredict(r)["levels"][0]["prediction_basis"]


def _without_beside(r):
    """A saved run with the streams measured beside its levels taken out (as runs saved before them)."""
    strip = lambda levels: [{k: v for k, v in lv.items() if k != "beside_kernels"} for lv in levels]
    return {**r, "levels": strip(r["levels"]),
            "levels_by_threads": {th: strip(v) for th, v in r["levels_by_threads"].items()}}


def _beside(type_, seconds, when, k=1000, m=1000, copies=10, threads=2):
    return {"kind": "stream", "type": type_, "k": k, "m": m, "n": 1, "copies": copies, "threads": threads,
            "repacked": False, "seconds": seconds, "when": when, "load_average": 1.0}


def test_decode_cost_is_median_of_neighbour_streams_less_one_overhead():
    base = {"op_overhead_s": 1e-6, "types": {"f32": {"decode_s_per_weight": 9e-11, "prefill_s_per_weight_token": 5e-12},
                                            "q8_0": {"decode_s_per_weight": 4e-11}}}
    row = {"beside_kernels": {"runs": [_beside("f32", [1.1e-3, 1.1e-3, 5e-3], "before"),    # median 1.1 ms
                                       _beside("f32", [2.1e-3], "after")]}}
    # per copy (of 10): 1.1e-4 s and 2.1e-4 s, less 1e-6 of overhead, over 10⁶ weights: 1.09e-10 and 2.09e-10
    both = ql.beside_constants(base, row)
    assert both["types"]["f32"]["decode_s_per_weight"] == pytest.approx((1.09e-10 + 2.09e-10) / 2)
    assert ql.beside_constants(base, row, ("before",))["types"]["f32"]["decode_s_per_weight"] == pytest.approx(1.09e-10)
    assert ql.beside_constants(base, row, ("after",))["types"]["f32"]["decode_s_per_weight"] == pytest.approx(2.09e-10)
    # everything else is the base's; the base itself is not changed
    assert both["types"]["q8_0"] == base["types"]["q8_0"] and both["op_overhead_s"] == 1e-6
    assert both["types"]["f32"]["prefill_s_per_weight_token"] == 5e-12
    assert base["types"]["f32"]["decode_s_per_weight"] == 9e-11
    assert ql.beside_constants(base, {}) == base
    # 10 copies of 10⁶ F32 weights (40 MB) in 1.1 ms and in 2.1 ms: 36.4 and 19.0 GB/s
    rates = ql.beside_rates(row)["f32"]
    assert rates["before"] == pytest.approx(40e6 / 1.1e-3 / 1e9) and rates["after"] == pytest.approx(40e6 / 2.1e-3 / 1e9)


def test_decode_cost_comes_from_the_pages_each_type_is_read_from():
    """F32 (multiplied in place in the file's mapping: 2 MB pages) and a repacked Q4_K (a malloc'd buffer: 4 KB
    pages), each streamed in 4 KB pages and F32 also in 2 MB pages: the engine's pages pick F32's 2 MB runs and
    Q4_K's 4 KB runs; "4K" picks the 4 KB runs of both; a run saved without a page size counts as 4 KB."""
    assert kernels.engine_pages(False) == "2M" and kernels.engine_pages(True) == "4K"
    assert kernels.run_pages({"seconds": [1.0]}) == "4K"
    base = {"op_overhead_s": 0.0, "types": {"f32": {"decode_s_per_weight": 9e-11}, "q4_K": {"decode_s_per_weight": 9e-11}}}
    q4 = lambda sec, when: {**_beside("q4_K", [sec], when), "repacked": True}
    row = {"beside_kernels": {"runs": [
        _beside("f32", [2e-3], "before"), {**_beside("f32", [1e-3], "before"), "pages": "2M"},
        {**_beside("f32", [1.2e-3], "after"), "pages": "2M"}, _beside("f32", [2.2e-3], "after"),
        q4(3e-3, "before"), q4(5e-3, "after")]}}
    # per weight: seconds ÷ 10 copies ÷ 10⁶ weights
    engine = ql.beside_constants(base, row)["types"]
    assert engine["f32"]["decode_s_per_weight"] == pytest.approx((1e-10 + 1.2e-10) / 2)
    assert engine["q4_K"]["decode_s_per_weight"] == pytest.approx((3e-10 + 5e-10) / 2)
    small = ql.beside_constants(base, row, pages="4K")["types"]
    assert small["f32"]["decode_s_per_weight"] == pytest.approx((2e-10 + 2.2e-10) / 2)
    assert small["q4_K"] == engine["q4_K"]
    huge = ql.beside_constants(base, row, pages="2M")["types"]
    assert huge["f32"] == engine["f32"] and huge["q4_K"] == base["types"]["q4_K"]   # no Q4_K run in 2 MB pages
    # 40 MB of F32 in 1.0 and 1.2 ms (2 MB pages), in 2.0 and 2.2 ms (4 KB pages)
    assert ql.beside_rates(row)["f32"] == pytest.approx({"before": 40.0, "after": 40e6 / 1.2e-3 / 1e9})
    assert ql.beside_rates(row, "4K")["f32"] == pytest.approx({"before": 20.0, "after": 40e6 / 2.2e-3 / 1e9})
    # runs saved before page sizes were recorded: all of them, as before
    legacy = {"beside_kernels": {"runs": [_beside("f32", [2e-3], "before"), _beside("f32", [2.2e-3], "after")]}}
    assert ql.beside_constants(base, legacy)["types"]["f32"] == small["f32"]
    with pytest.raises(InputError, match="pages must be one of 4K, 2M, got '1G'"):
        kernels.run_bench("f32", 8, 8, 1, 1, 1, 1, binary="/bin/true", pages="1G")


def test_only_a_level_with_neighbour_streams_is_predicted_from_them():
    """The saved run, its F32 level (2 threads) given streams beside it that cost twice the session's constant per
    weight: that level's predicted decode matmuls double, every other level's stay, and its basis says why. With
    constants given explicitly (the benchmark's --constants-file, one round's prediction) the streams are not used."""
    r = _without_beside(load_result("e2"))
    c = r["session_kernels"]["constants"]["2"]
    o, d = c["op_overhead_s"], c["types"]["f32"]["decode_s_per_weight"]
    per_copy = 2 * d * 1000 * 1000 + o                    # twice the cost per weight, plus one node's overhead
    runs = [_beside("f32", [per_copy * 10], w) for w in ("before", "after")]
    levels = [dict(lv, beside_kernels={"runs": runs}) if lv["type"] == "F32" else lv for lv in r["levels_by_threads"]["2"]]
    marked = {**r, "levels_by_threads": {**r["levels_by_threads"], "2": levels}}
    base, own = ql.repredict(r), ql.repredict(marked)
    for a, b in zip(base["levels_by_threads"]["2"], own["levels_by_threads"]["2"]):
        ratio = b["predicted_parts_s"]["tg128"]["matmuls"] / a["predicted_parts_s"]["tg128"]["matmuls"]
        assert ratio == pytest.approx(2.0 if a["type"] == "F32" else 1.0), a["type"]
        assert (ql.BESIDE in b["prediction_basis"]) == (a["type"] == "F32")
    assert ql.beside_predictions(marked)[(2, "F32")]["before"] == pytest.approx(
        own["levels_by_threads"]["2"][0]["predicted_tg128_tps"])
    explicit = ql.repredict(marked, r["session_kernels"]["constants"], "one round")
    assert explicit["levels_by_threads"]["2"][0]["predicted_tg128_tps"] == pytest.approx(
        base["levels_by_threads"]["2"][0]["predicted_tg128_tps"])


def test_a_level_streams_each_type_its_decode_reads():
    # Q4_K_M: Q4_K and Q6_K matmuls, a Q6_K output; the F32 lookup table is read a row at a time, not streamed
    w = {"matmul": {"q4_K": 900, "q6_K": 100}, "output": {"q6_K": 64}, "lookup": {"f32": 512}}
    assert ql.decode_types(w) == ["q4_K", "q6_K"]


def test_benchmark_script_prints_every_saved_level_with_the_goals(capsys):
    from part1_capacity.experiments import bench_speed

    rows = ql.validation_rows(ql.saved_ladders())
    assert rows, "the project ships saved ladders (results/e2*.json) with kernel constants"
    assert bench_speed.main([]) == 0
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith(tuple(r["run"] + " " for r in rows))]
    assert len(table) == len(rows)
    assert f"tg128 within 15%: {sum(r['tg128_ok'] for r in rows)}/{len(rows)}" in out
    assert bench_speed.main(["--constants-file"]) == 0
    assert "e2: predicted from results/part1/e2_kernels.json" in capsys.readouterr().out


def test_decode_streams_matmul_and_output_weights_but_not_the_lookup():
    # 1000 Q8_0 weights (34 bytes per 32) + 64 Q6_K output weights (210 per 256); the 512-row lookup is not read
    w = {"matmul": {"q8_0": 1000}, "output": {"q6_K": 64}, "lookup": {"f32": 512}}
    assert kernels.decode_bytes_per_token(w) == pytest.approx(1000 * 34 / 32 + 64 * 210 / 256)


def test_new_kernel_constants_reach_the_host_profile_of_the_same_cpu_only(tmp_path, monkeypatch):
    """``kernels --save`` gives the saved host profile the new constants at the profile's thread count, keeping its
    measured bandwidth; a profile measured on another CPU, or constants of other thread counts, leave it alone."""
    import json

    from course.machine import records
    from part1_capacity.experiments.engine import common

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    desc = {"node": "n", "cpu": "Test CPU", "cpus": 2, "memory_bytes": 8e9, "system": "Linux", "python": "3.11"}
    monkeypatch.setattr(records, "host_description", lambda: desc)
    measured = {"threads": 2, "bandwidth_bytes_per_s": 20e9, "matmul_fp32_flops": 2e11, "matmul_int8_ops": 4e11,
                "method": "test"}
    new = {"2": {"op_overhead_s": 3e-6, "types": {"f32": {"decode_s_per_weight": 1e-10}}}}
    assert kernels.refresh_host_profile(new) is None                      # no profile saved yet
    for cpu, expect_changed in (("Other CPU", False), ("Test CPU", True)):
        old = {"name": f"this host ({cpu}, 2 threads)", "measured": measured, "bandwidth_gb_s": 20.0,
               "kernels": {"threads": 2, "op_overhead_s": 9e-6, "types": {}}}
        (tmp_path / "host_accelerator.json").write_text(json.dumps(old))
        assert (kernels.refresh_host_profile(new) is not None) == expect_changed
        assert kernels.refresh_host_profile({"1": new["2"]}) is None       # nothing at the profile's count
        saved = json.loads((tmp_path / "host_accelerator.json").read_text())
        if expect_changed:
            assert saved["kernels"]["op_overhead_s"] == 3e-6 and saved["kernels"]["types"] == new["2"]["types"]
            assert saved["bandwidth_gb_s"] == 20.0 and saved["measured"] == measured
        else:
            assert saved == old
