"""Two plain `nbgrader autograde` runs at once (nbgrader_config.py, course/classroom/nbgrader_ext.py): from the course root, after
`make notebooks` (which releases in a throw-away course, so the course has no gradebook.db yet), two terminals run

    nbgrader autograde 01_attention --CourseDirectory.student_id='s[123]'
    nbgrader autograde 01_attention --CourseDirectory.student_id='s[456]'

Both must exit 0 and every submission must have its grade in the gradebook. Before the pre-convert hook, both
stopped at once with "No assignment with ID '01_attention' exists in the database" (exit 1, no grade); two processes
creating a new gradebook.db at once fail with "table ... already exists", so the hook registers the assignment once,
under a lock, and the other run waits and finds it.

The commands run verbatim through bash in a copy of the course root (solutions/, exercises/, nbgrader_config.py;
the grader is this tree's, through PYTHONPATH). The class of six (four solutions, one with the multi-head attention
left as released, one blank release) is a long run; `make test` runs the same two commands on a class of two (one
solution for the first pattern, one blank for the second). Expected points are the lesson contract's, summed from
``LESSON``, never read from a run.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course.grading.notebook_spec import REPO

COMMANDS = ("nbgrader autograde 01_attention --CourseDirectory.student_id='s[123]'",
            "nbgrader autograde 01_attention --CourseDirectory.student_id='s[456]'")


def _class(students):
    """student → (notebook, expected points), and the assignment's full marks."""
    from part0_foundations.l01_attention.checks import LESSON

    solved = json.loads((REPO / "solutions" / "01_attention" / "attention.ipynb").read_text())
    blank = json.loads((REPO / "exercises" / "01_attention" / "attention.ipynb").read_text())
    released = {c["metadata"]["nbgrader"]["grade_id"]: c for c in blank["cells"]
                if c["metadata"].get("nbgrader", {}).get("solution")}
    # One function broken: MultiHeadAttention as released (it raises), scaled_dot_product_attention solved.
    wrong = dict(solved, cells=[released["mha_impl"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "mha_impl"
                                else c for c in solved["cells"]])
    full = sum(c.points for c in LESSON.checks)
    partial = sum(c.points for c in LESSON.checks if c.name == "scaled_dot_product_attention")
    assert 0 < partial < full
    everyone = {"s1": (solved, full), "s2": (solved, full), "s3": (wrong, partial),
                "s4": (solved, full), "s5": (solved, full), "s6": (blank, 0)}
    return {s: everyone[s] for s in students}, full


def _course(root: Path, class_):
    """A course root as after `make notebooks`: solutions/, exercises/, nbgrader_config.py, no gradebook.db."""
    shutil.copytree(REPO / "solutions", root / "solutions")
    shutil.copytree(REPO / "exercises", root / "exercises")
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    for student, (nb, _) in class_.items():
        folder = root / "submitted" / student / "01_attention"
        folder.mkdir(parents=True)
        (folder / "attention.ipynb").write_text(json.dumps(nb))


@pytest.mark.parametrize("students", [
    pytest.param(("s1", "s6"), id="two"),
    pytest.param(("s1", "s2", "s3", "s4", "s5", "s6"), id="six", marks=pytest.mark.long(
        smoke="tests/course/classroom/test_autograde_concurrent.py::test_two_plain_autogrades_at_once[two]")),
])
def test_two_plain_autogrades_at_once(tmp_path, students):
    root = tmp_path / "course"
    class_, full = _class(students)
    _course(root, class_)
    assert not (root / "gradebook.db").exists()
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_ROOT", "NBGRADER_EXCHANGE")}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")  # the venv, activated
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    runs = [subprocess.Popen(["bash", "-c", cmd], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True) for cmd in COMMANDS]
    logs = [p.communicate(timeout=900)[0] for p in runs]
    for cmd, p, log in zip(COMMANDS, runs, logs):
        assert p.returncode == 0, f"{cmd} exited {p.returncode}:\n{log[-4000:]}"
        assert "Traceback" not in log and "| ERROR]" not in log, log[-4000:]
    # Registered once: one run did it, the other waited for the lock and found the assignment.
    assert sum("registering it from" in log for log in logs) == 1, [log[:2000] for log in logs]

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "inference-memory") as gb:
        assert gb.find_assignment("01_attention").max_score == full
        got = {s.student_id: (s.score, s.max_score) for s in gb.assignment_submissions("01_attention")}
    assert got == {s: (pts, full) for s, (_, pts) in class_.items()}


def test_a_gradebook_write_waits_for_another_process():
    """Every SQLite connection of an nbgrader process (nbgrader_config.py calls sqlite_busy_timeout) waits up to
    GRADEBOOK_BUSY_S for another process's write, not pysqlite's default 5 s."""
    from sqlalchemy import create_engine, event, text
    from sqlalchemy.engine import Engine

    from course.classroom import nbgrader_ext

    def busy_ms():
        engine = create_engine("sqlite://")
        with engine.connect() as conn:
            ms = conn.execute(text("PRAGMA busy_timeout")).scalar()
        engine.dispose()
        return ms

    had = event.contains(Engine, "connect", nbgrader_ext._busy_timeout)
    try:
        if had:
            event.remove(Engine, "connect", nbgrader_ext._busy_timeout)
        assert busy_ms() == 5000  # pysqlite's default (sqlite3.connect's timeout=5.0)
        nbgrader_ext.sqlite_busy_timeout()
        nbgrader_ext.sqlite_busy_timeout()  # idempotent: one listener
        assert busy_ms() == nbgrader_ext.GRADEBOOK_BUSY_S * 1000 > 5000
    finally:
        if not had and event.contains(Engine, "connect", nbgrader_ext._busy_timeout):
            event.remove(Engine, "connect", nbgrader_ext._busy_timeout)


def test_no_source_to_register_from_is_one_line(tmp_path):
    """A gradebook without the assignment and no solutions/ to register it from: one line naming the step and the
    command that makes the source, exit 1, no traceback."""
    shutil.copy(REPO / "nbgrader_config.py", tmp_path)
    folder = tmp_path / "submitted" / "s1" / "01_attention"
    folder.mkdir(parents=True)
    shutil.copy(REPO / "exercises" / "01_attention" / "attention.ipynb", folder)
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_ROOT", "NBGRADER_EXCHANGE")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "01_attention"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    errors = [ln for ln in log.splitlines() if "| ERROR]" in ln]
    assert proc.returncode == 1 and "Traceback" not in log, log
    assert errors == [f"[AutogradeApp | ERROR] nbgrader autograde 01_attention: registering 01_attention in the "
                      f"gradebook: the gradebook has no assignment 01_attention and there is no source folder "
                      f"{tmp_path / 'solutions' / '01_attention'} to register it from; run `make notebooks` (it "
                      f"writes solutions/) first"], log
