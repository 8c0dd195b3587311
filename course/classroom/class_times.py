"""How long grading a class takes, per student and lesson: measured, never guessed, by

    .venv/bin/python -m course.class_times [--students 4] [--jobs 2]

which makes a throw-away course root (the committed solutions/ and nbgrader_config.py), registers every assignment,
submits the solution notebook for ``--students`` students of every lesson and times
``python -m course.classroom autograde <lesson> --jobs J`` (real nbgrader, one student per process). Seconds are
wall-clock on a shared machine: the record gives its load. Saved in ``results/course/class_times.json``; the
instructors' page shows them (``class_times_table``).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from course.shared import tables
from course.grading.notebook_spec import REPO, all_specs
from course.machine.records import run_record
from course.shared.saved_runs import RESULTS
from course.classroom import nbgrader_class

TIMES = RESULTS / "class_times.json"


def measure(students: int, jobs: int) -> dict:
    out = {"record": run_record(["-m", "course.class_times", "--students", str(students), "--jobs", str(jobs)],
                                program="python"), "students": students, "jobs": jobs, "lessons": {}}
    with tempfile.TemporaryDirectory(prefix="class-times-") as tmp:
        root = Path(tmp)
        shutil.copytree(REPO / "solutions", root / "solutions")
        shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
        nbgrader_class.register(root)
        env = dict(os.environ, COURSE_ROOT=str(root))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        for spec in all_specs():
            for i in range(students):
                dst = root / "submitted" / f"student{i + 1:02d}" / spec.ASSIGNMENT
                dst.mkdir(parents=True, exist_ok=True)
                shutil.copy(root / "solutions" / spec.ASSIGNMENT / spec.NOTEBOOK, dst / spec.NOTEBOOK)
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "course.classroom", "autograde", spec.ASSIGNMENT,
                                   "--jobs", str(jobs)], cwd=root, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            if done.returncode != 0:
                raise SystemExit(f"{spec.ASSIGNMENT}: grading failed\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
            out["lessons"][spec.ASSIGNMENT] = {"wall_s": round(wall, 1), "per_student_s": round(wall / students, 1)}
            print(f"{spec.ASSIGNMENT}: {students} students in {wall:.1f} s ({wall / students:.1f} s each)", flush=True)
    return out


def saved() -> dict:
    return json.loads(TIMES.read_text()) if TIMES.exists() else {}


def class_times_table(times: dict | None = None, tr=None) -> str:
    """Markdown: seconds per student per lesson, and a class of 30, from the saved measurement (``tr``: the page's
    language, course.shared.i18n)."""
    tr = tr or (lambda message, **values: message.format(**values) if values else message)
    times = saved() if times is None else times
    if not times:
        return tr("(not measured yet: `.venv/bin/python -m course.class_times` measures it)") + "\n"
    rows = tables.head(tr("| lesson | per student | a class of 30 |"))
    for lesson, t in times["lessons"].items():
        rows.append(tables.row(lesson, f"{t['per_student_s']:.0f} s", f"{30 * t['per_student_s'] / 60:.1f} min"))
    rec = times["record"]
    rows += ["", tr("Measured by `{command}` on {date}: {students} finished notebooks per lesson graded by "
                    "`python -m course.classroom autograde <lesson> --jobs {jobs}` (real nbgrader), wall-clock time "
                    "divided by the number of students, on {cpus} cores ({cpu}) at a load average of {load} — a "
                    "shared machine, so an idle one is faster.", command=rec["command"], date=rec["date_utc"],
                    students=times["students"], jobs=times["jobs"], cpus=rec["host"]["cpus"], cpu=rec["host"]["cpu"],
                    load=f"{rec['load_average_at_start']:.1f}")]
    return "\n".join(rows) + "\n" + bench_line(tr=tr)


BENCH = RESULTS / "grading_bench.json"


def bench_line(bench: dict | None = None, tr=None) -> str:
    """Markdown: the class-sized run of ``course.grading_bench`` (one lesson, a class, real nbgrader), when saved."""
    tr = tr or (lambda message, **values: message.format(**values) if values else message)
    if bench is None:
        bench = json.loads(BENCH.read_text()) if BENCH.exists() else {}
    if not bench:
        return ""
    rec = bench["record"]
    return "\n" + tr("A class of {students} for lesson {lesson}, graded by `python -m course.classroom autograde "
                     "{lesson} --jobs {jobs}` (real nbgrader, every notebook full marks): {minutes} min in all, "
                     "{per} s per notebook; {cpu} CPU seconds per notebook, every process of it counted (nbgrader, "
                     "the grader, the sandbox), which other work on the machine inflates far less. Measured "
                     "by `{command}` on {date}, on {cpus} cores at a load average of {load}.",
                     cpu=f"{bench['cpu_per_notebook_s']:.1f}", students=bench["students"], lesson=bench["lesson"],
                     jobs=bench["jobs"],
                     minutes=f"{bench['wall_s'] / 60:.1f}", per=f"{bench['per_notebook_s']:.1f}", command=rec["command"],
                     date=rec["date_utc"], cpus=rec["host"]["cpus"],
                     load=f"{rec['load_average_at_start']:.1f}") + "\n"


def main() -> None:
    """``python -m course.class_times``: grade a class of every lesson and save the times."""
    ap = argparse.ArgumentParser(prog="python -m course.class_times", description=__doc__.split("\n\n")[0])
    ap.add_argument("--students", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    result = measure(a.students, a.jobs)
    TIMES.parent.mkdir(exist_ok=True)
    TIMES.write_text(json.dumps(result, indent=1) + "\n")
    print(f"saved {TIMES.relative_to(REPO)}")


if __name__ == "__main__":
    main()
