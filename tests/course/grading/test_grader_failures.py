"""The grader's own failures are the grader's (course/grading/grade_worker.py, course/grading/sandbox.py, course/grading/autograde.py): a
sandbox that cannot start, a scan that would crash, a file that is not a notebook. Each ends in one line naming the
cause and no score, or, where the notebook itself is fine, in its right grade; never in a message that blames the
learner's code.

Full marks for lesson 01 are 10 points: the sum of the contract's check points (LESSON), asserted below from the
contract, never read from a run.
"""
import json
import os
import shutil
import site
import stat
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from course.grading.autograde import Limits, grade
from course.grading.grade_worker import NotebookError, read_cells, reference_imports
from course.grading.notebook_spec import REPO

LESSON = "part0_foundations.l01_attention.checks"
SOLUTION = REPO / "solutions/01_attention/attention.ipynb"


def _full_marks() -> int:
    from part0_foundations.l01_attention.checks import LESSON as contract

    return sum(c.points for c in contract.checks)


def _with_cell(path: Path, source: str) -> Path:
    """The solution notebook with one more code cell (after the others)."""
    nb = json.loads(SOLUTION.read_text())
    nb["cells"].append({"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                        "source": source})
    path.write_text(json.dumps(nb))  # json.dumps writes a lone surrogate as the escape \ud800, as Jupyter would
    return path


def _venv_under_tmp(root: Path) -> Path:
    """A virtual environment under /tmp extending this one (a path file naming this one's site-packages): its
    interpreter and its prefix lie under /tmp, as in a clone made there."""
    venv = root / "venv"
    subprocess.run([os.path.join(sys.base_prefix, "bin", "python3"), "-m", "venv", "--without-pip", str(venv)],
                   check=True, capture_output=True)
    inner = next(venv.glob("lib/python3*/site-packages"))
    (inner / "outer.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return venv / "bin" / "python"


def _pytest_route(notebook: Path, python: str = sys.executable, env: dict | None = None):
    return subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(REPO / "tests/autograder/test_attention.py"), "--notebook", str(notebook)],
                          cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


FAKE_BWRAP = """#!/bin/sh
# bubblewrap that passes the grader's probe (bwrap ... -- /bin/true) and then fails to set up the sandbox, as it
# does in containers that allow user namespaces but not a new /proc.
for a in "$@"; do [ "$a" = /bin/true ] && exec {real} "$@"; done
echo "bwrap: Can't mount proc on /newroot/proc: Operation not permitted" >&2
exit 1
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The slow gradings of this module, started together (two at a time)."""
    tmp = tmp_path_factory.mktemp("failures")
    under_tmp = Path(tempfile.mkdtemp(prefix="grader-env-", dir="/tmp"))
    python = _venv_under_tmp(under_tmp)
    surrogate = _with_cell(tmp / "surrogate.ipynb", "# a truncated emoji: \ud800\nx = 1  # \udfff\n")
    deep = tmp / "deep.ipynb"
    deep.write_text('{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}")
    fake = tmp / "bin"
    fake.mkdir()
    real = shutil.which("bwrap")
    (fake / "bwrap").write_text(FAKE_BWRAP.format(real=real or "/bin/false"))
    (fake / "bwrap").chmod(stat.S_IRWXU)
    pool = ThreadPoolExecutor(max_workers=2)
    futures = {
        "under_tmp": pool.submit(_pytest_route, SOLUTION, str(python)),
        "surrogate": pool.submit(grade, LESSON, surrogate, Limits(check_s=60)),
        "deep": pool.submit(_pytest_route, deep),
        "bwrap_fails": pool.submit(_pytest_route, SOLUTION, sys.executable,
                                   {"PATH": f"{fake}{os.pathsep}{os.environ.get('PATH', '')}"}),
    }
    yield futures, real
    pool.shutdown(wait=True)
    shutil.rmtree(under_tmp, ignore_errors=True)


def test_an_environment_under_tmp_grades_full_marks(runs):
    """The Python environment under /tmp (the sandbox's own /tmp is mounted before it, not over it): the solution
    gets full marks on the pytest route."""
    proc = runs[0]["under_tmp"].result()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert f"total                     {_full_marks()}/{_full_marks()}" in out, out[-3000:]


def test_a_lone_surrogate_in_a_comment_keeps_the_right_grade(runs):
    """A comment holding half of a UTF-16 pair (a truncated emoji): the grader's scan of the cells and the
    learner's process both read it as text, and the solution keeps full marks."""
    report = runs[0]["surrogate"].result()
    assert report.earned == report.points == _full_marks(), report.table()
    assert report.notebook_errors == []


def test_json_nested_too_deep_is_one_line_without_a_score(runs):
    proc = runs[0]["deep"].result()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert "Traceback" not in out and "RecursionError" not in out and "total" not in out, out[-3000:]
    assert "not graded:" in out and "nested too deep" in out, out[-3000:]


def test_a_sandbox_that_cannot_start_is_a_grader_error(runs):
    """bubblewrap fails to set up the sandbox: one line saying the grader failed, with bubblewrap's own reason; no
    score, exit 3; nothing says the notebook exited."""
    if runs[1] is None:
        pytest.skip("bubblewrap is not installed: the grader runs without it (tested in test_grader_hostile.py)")
    proc = runs[0]["bwrap_fails"].result()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out[-3000:]
    lines = [ln for ln in out.splitlines() if "grader error" in ln]
    assert len(lines) == 1, out[-3000:]
    assert "sandbox could not start" in lines[0] and "Can't mount proc" in lines[0], lines[0]
    assert "your notebook" not in out and "total" not in out and "Traceback" not in out, out[-3000:]


@pytest.mark.parametrize("raw, says", [
    (b'{"cells": [], "x": "\xff\xfe"}', "not valid JSON"),                       # bytes that are not UTF-8
    (b'{"metadata": {}, "nbformat": 4}', "no list of cells"),                     # no cells at all
    (b'{"cells": [{"cell_type": "code", "source": ["a", 1]}]}', "neither text nor a list"),
    (b'[' * 50_000 + b']' * 50_000, "nested too deep"),
    (b'', "not valid JSON"),
])
def test_files_that_are_not_notebooks_name_the_cause(tmp_path, raw, says):
    (tmp_path / "nb.ipynb").write_bytes(raw)
    with pytest.raises(NotebookError, match=says):
        read_cells(str(tmp_path / "nb.ipynb"))


def test_the_reference_scan_never_crashes():
    """Sources Python cannot parse (a parser's recursion limit, a null byte, a lone surrogate) import nothing; an
    import of the reference next to them is still found."""
    from part0_foundations.l01_attention.checks import LESSON as contract

    sources = [(0, "import part0_foundations\nx = " + "-" * 200_000 + "1\n"),
               (1, "import part0_foundations\n\x00"),
               (2, "import part0_foundations  # \ud800"),
               (3, "x = (" * 5000 + ")" * 5000 + "  # part0_foundations"),
               (4, "from part0_foundations.l01_attention.attention import scaled_dot_product_attention\n")]
    found = reference_imports(sources, contract)
    assert found == {"scaled_dot_product_attention": "cell 4: from part0_foundations.l01_attention.attention "
                                                     "import scaled_dot_product_attention"}


def test_the_learner_reads_a_lone_surrogate_as_text(tmp_path):
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "source": "x = 1  # \ud800"}]}
    (tmp_path / "nb.ipynb").write_text(json.dumps(nb))
    (i, src), = read_cells(str(tmp_path / "nb.ipynb"))
    compile(src, "cell", "exec")  # would raise UnicodeEncodeError with the surrogate in it
    assert src == "x = 1  # \ufffd"
