"""The E3 page generator on a synthetic saved run whose knees are known by construction."""
import copy
import json
from pathlib import Path

from part1_capacity.page_cache import sitegen
from part1_capacity.page_cache.experiment import Config, knees

GB = 10**9
SAVED = Path(sitegen.RESULTS)


def _synthetic_run():
    """Index evicted from 3 GB taken on: p99 jumps at 3.0 GB (cycle 6), p50 at 3.5 GB (cycle 8)."""
    template = json.loads(next(SAVED.glob("e3_*.json")).read_text())  # any saved run: host facts, config shape
    run = copy.deepcopy(template)
    host = run["host_mem_bytes"]
    # A 9 GB index: larger than any saved run, so the page (which leads with the largest index) shows this one.
    run["index_bytes"] = 9 * GB
    cfg = Config(baseline_cycles=3, knee_factor=10, knee_confirm=2)
    cycles = []
    for i, taken in enumerate([0, 0, 0] + [x * GB // 4 for x in range(8, 16)]):
        evicted = max(0.0, (taken - 2.75 * GB) / GB)  # fraction of the index gone
        cycles.append(dict(run["cycles"][0], hog_bytes=taken, mem_available_bytes=host - taken - 2 * GB,
                           p50_us=1.0 if evicted <= 0.5 else 900.0, p99_us=1.0 if evicted == 0 else 3000.0,
                           p999_us=2.0 if evicted == 0 else 5000.0, mean_us=1.0 + 3000 * evicted,
                           major_faults=int(20000 * min(evicted, 1)),
                           index_resident_bytes=int(run["index_bytes"] * (1 - min(evicted, 1)))))
    run.update(cycles=cycles, stop_reason="p50_knee_confirmed", started_at="2026-12-02T10:00:00+00:00")
    run["config"]["baseline_cycles"] = 3
    run["knee_p99"], run["knee_p50"] = knees(cycles, cfg, host)
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
    (results / "e3_index9gb.json").write_text(json.dumps(run))
    interrupted = dict(run, stop_reason="interrupted")
    (results / "e3_index8gb.json").write_text(json.dumps(interrupted))
    monkeypatch.setattr(sitegen, "RESULTS", results)
    out = tmp_path / "out"
    out.mkdir()
    sitegen.build(out)

    assert (out / "e3_index9gb.png").stat().st_size > 10_000
    assert not (out / "e3_index8gb.png").exists()  # interrupted runs are never shown
    runs_md = (out / "runs.md").read_text()
    assert "e3_index9gb.png" in runs_md and "Validation run" not in runs_md
    knees_md = (out / "knees.md").read_text()
    assert "| 3.00 GB (" in knees_md and "+0.50 GB after p99" in knees_md  # p50 knee 0.5 GB after the p99 knee
    assert "original study, 5 GB index" in knees_md and "e3_index8gb" not in runs_md
    monitoring = (out / "monitoring.md").read_text()
    assert "×3,000" in monitoring  # p99: 1 µs → 3000 µs


def test_page_builds_without_any_saved_run(tmp_path, monkeypatch):
    monkeypatch.setattr(sitegen, "RESULTS", tmp_path)
    sitegen.build(tmp_path)
    assert "No saved run" in (tmp_path / "runs.md").read_text()
