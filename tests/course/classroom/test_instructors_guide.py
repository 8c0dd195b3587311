"""The instructors' guide works as written: its workflow block, taken from site/instructors.md, runs in a fresh clone.

The commands are read from the page (so page and test cannot drift) and run verbatim with bash, with one stand-in:
`make setup` builds the environment, which this test already runs in, so the clone gets a link to it instead
(and ``PYTHONPATH`` names the clone, so the clone's grader is the one nbgrader loads, as after its own set-up).
A class of six is in ``~/inbox`` (a temporary home): four finished notebooks (two students with a space and a
non-ASCII letter in their names), one with only the attention written, one blank. `--jobs 2` grades two at a time, so
gradings overlap: with the old integrity check (which hashed `submitted/`, `autograded/` and the gradebook) they
voided each other. Expected points are the contract's, summed by hand from ``LESSON``, not read from a run.

The class of six is a long run (`make test-long`); `make test` runs the same block, verbatim, from a fresh clone,
with a class of one (the student with only the attention written: a partial grade, passed and failed checks).
"""
import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from course.grading.notebook_spec import REPO

GUIDE = REPO / "site" / "instructors.md"
LESSON_MODULE = "part0_foundations.l01_attention.checks"


def guide_block() -> str:
    """The first bash block of the section "The workflow, exactly"."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("## The workflow, exactly", 1)[1].split("\n## ", 1)[0]
    m = re.search(r"```bash\n(.*?)```", section, re.S)
    assert m, "site/instructors.md: no bash block under 'The workflow, exactly'"
    return m.group(1)


def test_guide_block_is_what_the_test_runs():
    block = guide_block()
    # The stand-in below replaces exactly one line; everything else runs as written.
    assert len([ln for ln in block.splitlines() if ln.startswith("make setup")]) == 1
    for needed in ("python -m course.classroom register", "python -m course.student_build",
                   "course.classroom autograde 01_attention", "nbgrader generate_feedback 01_attention",
                   "nbgrader export --assignment 01_attention", "export-checks"):
        assert needed in block, f"the guide's workflow lost {needed!r}"


CLASS = ("alice", "bob", "ana maria", "zoë", "carol", "dan")
SMOKE_CLASS = ("carol",)


def _notebooks(home: Path, students):
    from part0_foundations.l01_attention.checks import LESSON

    solved = json.loads((REPO / "solutions" / "01_attention" / "attention.ipynb").read_text())
    blank = json.loads((REPO / "exercises" / "01_attention" / "attention.ipynb").read_text())
    blank_cells = {c["metadata"]["nbgrader"]["grade_id"]: c for c in blank["cells"]
                   if c["metadata"].get("nbgrader", {}).get("solution")}
    half = dict(solved, cells=[blank_cells["mha_impl"] if c["metadata"].get("nbgrader", {}).get("grade_id") ==
                               "mha_impl" else c for c in solved["cells"]])
    full = sum(c.points for c in LESSON.checks)
    attention_only = sum(c.points for c in LESSON.checks if c.name == "scaled_dot_product_attention")
    class_ = {"alice": (solved, full), "bob": (solved, full), "ana maria": (solved, full), "zoë": (solved, full),
              "carol": (half, attention_only), "dan": (blank, 0)}
    class_ = {s: class_[s] for s in students}
    for student, (nb, _) in class_.items():
        (home / "inbox" / student).mkdir(parents=True)
        (home / "inbox" / student / "attention.ipynb").write_text(json.dumps(nb))
    return {s: pts for s, (_, pts) in class_.items()}, full


@pytest.mark.parametrize("students", [
    pytest.param(SMOKE_CLASS, id="one"),
    pytest.param(CLASS, id="six", marks=pytest.mark.long(
        smoke="tests/course/classroom/test_instructors_guide.py::test_guide_workflow_from_a_fresh_clone[one]")),
])
def test_guide_workflow_from_a_fresh_clone(tmp_path, students):
    clone, home = tmp_path / "course", tmp_path / "home"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    expected, full = _notebooks(home, students)
    assert 0 < expected["carol"] < full  # a partial grade, not all or nothing
    venv = Path(sys.prefix)
    script = "\n".join(f"ln -s {venv} .venv" if ln.startswith("make setup") else ln
                       for ln in guide_block().splitlines())
    env = dict(os.environ, HOME=str(home), PYTHONPATH=str(clone))
    env.pop("COURSE_ROOT", None)
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{clone / 'gradebook.db'}") as gb:
        got = {s.student_id: s.score for s in gb.assignment_submissions("01_attention")}
        registered = sorted(a.name for a in gb.assignments)
    assert got == expected
    from course.classroom.nbgrader_class import notebooks

    assert registered == sorted(notebooks())  # every lesson, not only the one graded

    for student, points in expected.items():
        assert f"{student}: {points:g}/{full:g}" in proc.stdout
        html = (clone / "feedback" / student / "01_attention" / "attention.html").read_text(encoding="utf-8")
        assert "cdnjs" not in html and "window.MathJax" in html  # MathJax inside the page, nothing fetched
        assert "BEGIN HIDDEN TESTS" not in html and "checks.check_sdpa_causal_decode" not in html
        assert "Hidden check, run when graded: With causal=True and fewer queries than keys" in html
    with open(clone / "grades.csv", newline="") as f:
        exported = list(csv.DictReader(f))
    # only the lesson given: no row of a 0 for the six lessons registered but not given
    assert {r["assignment"] for r in exported} == {"01_attention"}, {r["assignment"] for r in exported}
    assert {r["student_id"]: float(r["score"]) for r in exported} == expected
    # the release: the students' folder, with its own README and light requirements
    released = tmp_path / "for-students"
    assert (released / "README.md").is_file() and (released / "exercises" / "01_attention" / "attention.ipynb").is_file()
    assert "torch==" in (released / "requirements.txt").read_text()
    # the grade files stay out of git
    ignored = subprocess.run(["git", "check-ignore", "grades.csv", "checks.csv"], cwd=clone, capture_output=True,
                             text=True)
    assert ignored.stdout.split() == ["grades.csv", "checks.csv"], ignored
    # nothing but what an instructor needs to read: no configuration warning from nbgrader or nbconvert
    assert "WARNING" not in proc.stderr, [ln for ln in proc.stderr.splitlines() if "WARNING" in ln]
    with open(clone / "checks.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    from part0_foundations.l01_attention.checks import LESSON

    for student, points in expected.items():
        mine = {r["check"]: float(r["points"]) for r in rows if r["student"] == student}
        assert set(mine) == set(LESSON.ids()) and sum(mine.values()) == points
    carol = {r["check"]: float(r["points"]) for r in rows if r["student"] == "carol"}
    assert carol == {c.id: (c.points if c.name == "scaled_dot_product_attention" else 0) for c in LESSON.checks}
    assert "has changed" not in (proc.stdout + proc.stderr)

    # Set-up again (after `make notebooks`, or by mistake): the grades stay.
    again = subprocess.run(["bash", "-c", ". .venv/bin/activate && python -m course.classroom register 01_attention"], cwd=clone,
                           env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    with Gradebook(f"sqlite:///{clone / 'gradebook.db'}") as gb:
        assert {s.student_id: s.score for s in gb.assignment_submissions("01_attention")} == expected


def test_both_guides_show_the_round_screenshots_small_enough():
    """The two screenshots the class round took (tests/course/classroom/test_class_round.py --screenshots) are in the site, shown
    by the English and the Korean guide, and small: PNG files under 150 KB each."""
    shots = ["assets/classroom/assignment-list.png", "assets/classroom/formgrader.png"]
    en, ko = GUIDE.read_text(encoding="utf-8"), GUIDE.with_name("instructors.ko.md").read_text(encoding="utf-8")
    assert [s for s in shots if f"]({s})" in en] == shots
    # The Korean edition is built under ko/, and the screenshots are the English edition's files.
    assert [s for s in shots if f'src="../{s}"' in ko] == shots
    for s in shots:
        data = (REPO / "site" / s).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and 10_000 < len(data) < 150_000, (s, len(data))
