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
