"""course.grading_bench (a benchmark script, never timed here): bad input is one line; the saved run reads on the
instructors' page in both languages with the same numbers."""
import os
import subprocess
import sys

import pytest

from course.classroom.class_times import bench_line
from course.shared.i18n import translator
from course.grading.notebook_spec import REPO


@pytest.mark.parametrize("argv, says", [
    (["--students", "0"], "students: 0; allowed: a whole number of at least 1"),
    (["--jobs", "-1"], "jobs: -1; allowed: a whole number of at least 1"),
    (["--lesson", "01_atention"], "lesson: unknown id '01_atention'; one of: 01_attention, "),
])
def test_bad_input_is_one_line(argv, says):
    out = subprocess.run([sys.executable, "-m", "course.grading_bench", *argv], capture_output=True, text=True,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert out.returncode == 2 and out.stderr.startswith(says) and len(out.stderr.strip().splitlines()) == 1


def test_the_saved_run_reads_the_same_in_both_languages():
    run = {"record": {"command": "python -m course.grading_bench --students 30 --jobs 2", "date_utc": "2026-12-07",
                      "host": {"cpus": 2}, "load_average_at_start": 1.25},
           "lesson": "01_attention", "students": 30, "jobs": 2, "wall_s": 150.3, "per_notebook_s": 5.01,
           "cpu_s": 183.0, "cpu_per_notebook_s": 6.1}
    en, ko = bench_line(run), bench_line(run, tr=translator("ko", "site"))
    # 150.3 s is 2.505 min, shown with one decimal: 2.5; 5.01 s per notebook: 5.0; the load 1.25: 1.2 (round half even)
    for text in (en, ko):
        assert "2.5" in text and "5.0" in text and "1.2" in text and "6.1" in text and "--jobs 2" in text, text
    assert "min in all" in en and "모두 2.5분" in ko
    assert bench_line({}) == ""


def test_the_saved_run_gives_the_idle_machine_and_the_run_before():
    before = {"record": {"date_utc": "2026-12-08 00:22 UTC", "load_average_at_start": 10.5},
              "wall_s": 780.0, "per_notebook_s": 26.0, "cpu_per_notebook_s": 10.2}
    run = {"record": {"command": "python -m course.grading_bench --students 30 --jobs 2", "date_utc": "2026-12-08",
                      "host": {"cpus": 2}, "load_average_at_start": 6.5},
           "lesson": "01_attention", "students": 30, "jobs": 2, "wall_s": 194.0, "per_notebook_s": 6.47,
           "cpu_s": 120.0, "cpu_per_notebook_s": 4.0, "before": before}
    en, ko = bench_line(run), bench_line(run, tr=translator("ko", "site"))
    # Idle: 30 notebooks x 4.0 CPU-s over 2 cores = 60 s = 1.0 min. Before: 780 s = 13.0 min, 26.0 s, 10.2 CPU-s.
    assert "a class of 30 in about 1.0 min" in en and "30명 반이 약 1.0분" in ko
    for text in (en, ko):
        assert "13.0" in text and "26.0" in text and "10.2" in text and "2026-12-08 00:22 UTC" in text, text
    assert "the same class took 13.0 min" in en
    without = bench_line({k: v for k, v in run.items() if k != "before"})
    assert "1.0 min" in without and "13.0" not in without and "Before" not in without
