"""The E3 page generator on a synthetic saved run whose knees are known by construction."""
import copy
import json
from pathlib import Path

from part1_capacity.experiments.page_cache import sitegen
from part1_capacity.experiments.page_cache.experiment import Config, baselines, knees

GB = 10**9
SAVED = Path(sitegen.RESULTS)


def _synthetic_run():
    """Index evicted from 3 GB taken on: p99 jumps at 3.0 GB (cycle 6), p50 at 3.5 GB (cycle 8)."""
    template = json.loads(next(SAVED.glob("e3_*.json")).read_text())  # any saved run: host facts, config shape
    run = copy.deepcopy(template)
    host = run["host_mem_bytes"]
    # A 19 GB index: larger than any saved run, so the page (which leads with the largest index) shows this one.
    run["index_bytes"] = 19 * GB
    cfg = Config(baseline_cycles=3, knee_factor=10, knee_confirm=2)
    cycles = []
    for i, taken in enumerate([0, 0, 0] + [x * GB // 4 for x in range(8, 16)]):
        evicted = max(0.0, (taken - 2.75 * GB) / GB)  # fraction of the index gone
        phase = "baseline" if i < 3 else "hog_baseline" if i < 6 else "step"
        cycles.append(dict(run["cycles"][0], phase=phase, hog_bytes=taken, mem_available_bytes=host - taken - 2 * GB,
                           cached_bytes=int(run["index_bytes"] * (1 - min(evicted, 1))) + GB,
                           hog_cpu_seconds=0.0, searcher_involuntary_switches=3,
                           p50_us=1.0 if evicted <= 0.5 else 900.0, p99_us=1.0 if evicted == 0 else 3000.0,
                           p999_us=2.0 if evicted == 0 else 5000.0, mean_us=1.0 + 3000 * evicted,
                           major_faults=int(20000 * min(evicted, 1)),
                           index_resident_bytes=int(run["index_bytes"] * (1 - min(evicted, 1)))))
    run.update(cycles=cycles, stop_reason="p50_knee_confirmed", started_at="2026-12-02T10:00:00+00:00")
    run["config"]["baseline_cycles"] = 3
    run["knee_p99"], run["knee_p50"] = knees(cycles, cfg, host)
    run["baselines"] = baselines(cycles, cfg)
    run["index_vectors"], run["index_dim"] = 19 * GB // (4 * 384), 384
    return run


def test_knees_of_synthetic_run_are_where_they_were_built():
    run = _synthetic_run()
    assert run["knee_p99"]["hog_bytes"] == 3 * GB and run["knee_p99"]["confirmed"]
    assert run["knee_p50"]["hog_bytes"] == 3.5 * GB
    assert run["knee_p99"]["mem_available_fraction"] == (run["host_mem_bytes"] - 5 * GB) / run["host_mem_bytes"]


def test_page_shows_runs_with_a_knee_and_the_study(tmp_path, monkeypatch):
    results = tmp_path / "results"
    results.mkdir()
    for p in SAVED.glob("e3_*.json"):
        (results / p.name).write_text(p.read_text())
    run = _synthetic_run()
    (results / "e3_index19gb.json").write_text(json.dumps(run))
    interrupted = dict(run, stop_reason="interrupted")
    (results / "e3_index8gb.json").write_text(json.dumps(interrupted))
    monkeypatch.setattr(sitegen, "RESULTS", results)
    out = tmp_path / "out"
    out.mkdir()
    sitegen.build(out)

    assert (out / "e3_index19gb.png").stat().st_size > 10_000
    assert not (out / "e3_index8gb.png").exists()  # interrupted runs are never shown
    runs_md = (out / "runs.md").read_text()
    assert "e3_index19gb.png" in runs_md and "Validation run" not in runs_md
    knees_md = (out / "knees.md").read_text()
    assert "| 19.00 GB | 3.00 GB |" in knees_md and "3.50 GB (+0.50 GB)" in knees_md  # p50 knee 0.5 GB later
    assert "original study, 5 GB index" in knees_md and "e3_index8gb" not in runs_md
    monitoring = (out / "monitoring.md").read_text()
    assert "×3,000" in monitoring  # p99: 1 µs → 3000 µs
    # The law's row for the 19 GB run: MemAvailable at its knee = host − 3 GB taken − 2 GB, minus the 19 GB index.
    law = (out / "law.md").read_text()
    hot = (run["host_mem_bytes"] - 5 * GB - 19 * GB) / GB
    assert f"| 19.00 GB | {(run['host_mem_bytes'] - 5 * GB) / GB:.2f} GB | {hot:+.2f} GB |" in law
    assert "+1.67 GB" in law  # the study's 5 GB index: 6.67 GB available at the knee
    study = (out / "study.md").read_text()
    assert "15.7 GB desktop" in study and "42%" in study and "(1.33 ×)" in study
    assert "set_recommended_min_free_kbytes" in (out / "kernel.md").read_text()
    assert '"headroom_bytes"' in (out / "calculator.md").read_text()
    # The median: its knee 0.5 GB after p99's, with 75 % of the index evicted (built: 0.75 GB of 1 GB per GB taken)
    p50 = (out / "p50.md").read_text()
    assert "| 19.00 GB | 3.00 GB | 3.50 GB (+0.50 GB) | 75 % |" in p50
    assert "| original study, 5 GB index | 5 GB | 8.25 GB | 9.00 GB (+0.75 GB) |" in p50
    facts = sitegen.p50_facts(run)
    assert facts["evicted"] == 0.75 and facts["p50_ratio"] == 900.0 and facts["p50_ratio_before"] == 1.0


def test_runs_in_a_memory_cgroup_are_hosts_of_their_own():
    run = _synthetic_run()
    run["host"] = dict(run["host"], cgroup_memory_limit_bytes=run["host_mem_bytes"])
    assert sitegen.in_cgroup(run) and "cgroup on" in sitegen.host_name(run)
    run["host"]["cgroup_memory_limit_bytes"] = None
    assert not sitegen.in_cgroup(run) and "cgroup" not in sitegen.host_name(run)


def test_page_builds_without_any_saved_run(tmp_path, monkeypatch):
    monkeypatch.setattr(sitegen, "RESULTS", tmp_path)
    sitegen.build(tmp_path)
    assert "No saved run" in (tmp_path / "runs.md").read_text()


def test_monitoring_table_compares_with_knee_baseline_not_cold_start():
    """The first idle cycles ran before the index was read into memory (slow here by construction: ×10); the
    monitoring table measures each signal against the baseline the knee uses — re-taken with the hog in place and
    the index cached, 1.0 µs here — so it agrees with the knee and median tables. By hand at the p99 knee (3 GB
    taken, a quarter of the index evicted): mean 1 + 3000 × 0.25 = 751 µs → ×751.0; p99 3000 µs → ×3,000."""
    run = _synthetic_run()
    for c in run["cycles"][:3]:
        c.update(p50_us=10.0, p99_us=10.0, p999_us=20.0, mean_us=10.0)
    study = json.loads(sitegen.STUDY.read_text())
    text = sitegen.monitoring_md([run], study)
    rows = {ln.split("|")[1].strip(): ln.split("|")[3].strip() for ln in text.splitlines() if ln.startswith("| ")}
    assert rows["mean page read"] == "×751.0", rows
    assert rows["p99 page read"] == "×3,000", rows
    k = run["knee_p99"]
    assert f"×{k['ratio']:,.0f}" == rows["p99 page read"]        # the knees table's own ratio, same baseline
