"""The grading pipeline, end to end, for every lesson that has a notebook spec.

- solutions/ is exactly what the package source generates (one source of truth: no drift);
- exercises/ is exactly what real `nbgrader generate_assignment` makes from solutions/;
- real `nbgrader autograde`: the solution scores full marks, the released notebook scores 0 without crashing
  (scores read from the gradebook, not from `nbgrader validate`, whose exit code is always 0);
- the pytest autograder grades a notebook: every check passes on the solution and fails on the release.

The two gradings per lesson (nbgrader's and pytest's) are long runs (``@long``): `make test` runs them for one lesson,
``SMOKE`` (the same tests, the same seams), and `make test-long` for every lesson. The release is checked for every
lesson in every run (one `nbgrader generate_assignment` for all of them).
"""
import importlib
import json
import re
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course.grading.notebook_spec import REPO, all_specs, build_source_notebook, generate_release, nbgrader_cmd

SPECS = all_specs()
IDS = [s.ASSIGNMENT for s in SPECS]
# The lesson graded end to end by `make test`: the quickest to grade (every lesson is graded by `make test-long`).
SMOKE = "p1_01_kv_from_config"


def _long_but_smoke(test):
    """The specs, each lesson's test marked long but SMOKE's, which stands in for them."""
    return [pytest.param(s, id=s.ASSIGNMENT, marks=() if s.ASSIGNMENT == SMOKE else
                         pytest.mark.long(smoke=f"tests/course/classroom/test_notebooks.py::{test}[{SMOKE}]")) for s in SPECS]


def _cells(path):
    nb = nbformat.read(str(path), as_version=4)
    return [(c.cell_type, c.source, c.metadata.get("nbgrader")) for c in nb.cells]


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_solutions_match_package_source(spec):
    committed = REPO / "solutions" / spec.ASSIGNMENT / spec.NOTEBOOK
    assert committed.exists(), f"{committed} is missing: run `make notebooks`"
    fresh = build_source_notebook(spec)
    got = [(c.cell_type, c.source, c.metadata.get("nbgrader")) for c in fresh.cells]
    assert _cells(committed) == got, f"{committed} drifted from the package source: run `make notebooks`"


@pytest.fixture(scope="module")
def course_root(tmp_path_factory):
    """A throw-away nbgrader course with every assignment released: one real `nbgrader generate_assignment` for all
    of them (the assignment id is nbgrader's glob)."""
    root = tmp_path_factory.mktemp("course")
    shutil.copytree(REPO / "solutions", root / "solutions")
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    # nbgrader_config.py imports the course's grader (course.grading.autograde): from this tree.
    env = dict(os.environ, COURSE_ROOT=str(root), NBGRADER_EXCHANGE=str(root / "exchange"),
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    done = subprocess.run(nbgrader_cmd() + ["generate_assignment", "*", "--force"], cwd=root, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return root, env


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_release_is_what_nbgrader_makes(spec, course_root):
    """exercises/ in the repo is exactly what real `nbgrader generate_assignment` makes from solutions/."""
    root, _ = course_root
    released = root / "exercises" / spec.ASSIGNMENT / spec.NOTEBOOK
    assert released.exists(), f"nbgrader generate_assignment made no {released.relative_to(root)}"
    assert _cells(released) == _cells(REPO / "exercises" / spec.ASSIGNMENT / spec.NOTEBOOK), (
        f"exercises/{spec.ASSIGNMENT} is not what nbgrader generate_assignment makes: run `make notebooks`")


@pytest.mark.parametrize("spec", _long_but_smoke("test_release_and_autograde_with_real_nbgrader"))
def test_release_and_autograde_with_real_nbgrader(spec, course_root):
    """The solution and the release (as nbgrader released it) submitted and graded by real `nbgrader autograde`:
    full marks and none, each check's points as the lesson's contract gives them."""
    root, env = course_root
    a = spec.ASSIGNMENT
    nbg = nbgrader_cmd()
    for student, src in (("ref_solution", root / "solutions" / a), ("blank_release", root / "exercises" / a)):
        dst = root / "submitted" / student / a
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, dst, dirs_exist_ok=True)
    proc = subprocess.run(nbg + ["autograde", a, "--force"], cwd=root, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        max_score = gb.find_assignment(a).max_score
        ok = gb.find_submission(a, "ref_solution").score
        blank = gb.find_submission(a, "blank_release").score
        nb_name = Path(spec.NOTEBOOK).stem
        per_cell = {s: {g.name: g.score for g in gb.find_submission_notebook(nb_name, a, s).grades}
                    for s in ("ref_solution", "blank_release")}
    lesson = getattr(importlib.import_module(spec.__name__.rsplit(".", 1)[0] + ".checks"), "LESSON", None)
    if lesson is not None:  # one test cell per check: nbgrader's points per cell are the checks' points
        assert {k: v for k, v in per_cell["ref_solution"].items() if k in lesson.ids()} == {
            c.id: c.points for c in lesson.checks}
        assert {k: v for k, v in per_cell["blank_release"].items() if k in lesson.ids()} == {
            c.id: 0 for c in lesson.checks}
    assert max_score > 0
    assert ok == max_score, f"the solution notebook scored {ok}/{max_score}"
    assert blank == 0, f"the released (blank) notebook scored {blank}/{max_score}"


def _pytest_grade(autograder, notebook):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(REPO / autograder), "--notebook", str(notebook)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    return proc.returncode, proc.stdout + proc.stderr


def _broken_release(spec, folder):
    """The released notebook with its first answer cell replaced by a syntax error."""
    nb = json.loads((REPO / "exercises" / spec.ASSIGNMENT / spec.NOTEBOOK).read_text())
    answer = next(c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution"))
    answer["source"] = "def broken(:\n"
    bad = folder / f"broken-{spec.ASSIGNMENT}.ipynb"
    bad.write_text(json.dumps(nb))
    return bad


@pytest.fixture(scope="module", autouse=True)
def pytest_gradings(request, tmp_path_factory):
    """The pytest-route gradings of the lessons whose test below runs (skipped long tests grade nothing), started at
    once in the background: each is a subprocess that grades one notebook, and running them beside the serial
    nbgrader tests keeps a second CPU busy. The tests below read their results; what they check does not depend on
    the order the gradings ran in."""
    from concurrent.futures import ThreadPoolExecutor

    runs = {item.callspec.params["spec"].ASSIGNMENT for item in request.session.items
            if item.module is request.module and item.originalname == "test_pytest_autograder_on_notebooks"
            and item.get_closest_marker("skip") is None}
    folder = tmp_path_factory.mktemp("broken")
    pool = ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) - 1))
    jobs = {}
    for spec in (s for s in SPECS if s.ASSIGNMENT in runs):
        for kind, nb in (("solution", REPO / "solutions" / spec.ASSIGNMENT / spec.NOTEBOOK),
                         ("release", REPO / "exercises" / spec.ASSIGNMENT / spec.NOTEBOOK),
                         ("broken", _broken_release(spec, folder))):
            jobs[spec.ASSIGNMENT, kind] = pool.submit(_pytest_grade, spec.AUTOGRADER, nb)
    yield jobs
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("spec", _long_but_smoke("test_pytest_autograder_on_notebooks"))
def test_pytest_autograder_on_notebooks(spec, pytest_gradings):
    code, out = pytest_gradings[spec.ASSIGNMENT, "solution"].result()
    assert code == 0 and " passed" in out and "failed" not in out, out[-3000:]

    code, out = pytest_gradings[spec.ASSIGNMENT, "release"].result()
    summary = out.strip().splitlines()[-1]
    assert code == 1 and re.search(r"\d+ failed", summary) and "passed" not in summary and "error" not in summary, out[-3000:]

    # A broken notebook (syntax error, a hang is covered by the time limit) fails checks, never crashes the grader.
    code, out = pytest_gradings[spec.ASSIGNMENT, "broken"].result()
    assert code == 1 and "SyntaxError" in out and "INTERNALERROR" not in out, out[-3000:]
