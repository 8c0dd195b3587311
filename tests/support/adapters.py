"""The one small adapter between the tests and the grader.

``--notebook PATH``: the learner's notebook is graded by ``course.grading.autograde.grade`` (its code runs in a separate,
limited process; results come back as data). Without it the reference solution is graded, in this process. Each
check is one test; the points per check and the total are printed at the end of the run (``pytest_terminal_summary``
in conftest.py).

An autograder module without a lesson contract (``LESSON``) still gets the older ``learner`` fixture: its notebook's
cells run in this process (``Learner``); give it a contract to grade it isolated.
"""
from __future__ import annotations

import pytest

import importlib
import json
import sys
import types
from pathlib import Path

from course.grading.autograde import GraderError, Limits, Report, grade, grade_reference
from course.grading.contract import CheckFailed, time_limit
from course.shared.text import printable

REPORTS: list[Report] = []


GRADER_ERROR_EXIT = 3   # the grader failed (not the notebook): no score
UNREADABLE_EXIT = 2     # the file is not a notebook the grader can read: no score


def grade_for(config, lesson) -> Report:
    """The report; or, with no score printed, one line and a non-zero exit: the grader failed (``GraderError``), or
    the file is not a notebook it can read."""
    notebook = config.getoption("--notebook")
    if notebook is None:
        report = grade_reference(lesson.checks_module)
    else:
        limits = Limits(check_s=float(config.getoption("--check-timeout")),
                        notebook_s=float(config.getoption("--notebook-timeout")))
        try:
            report = grade(lesson.checks_module, notebook, limits)
        except GraderError as exc:
            pytest.exit(f"grader error, not graded (nothing about the notebook): {exc}", returncode=GRADER_ERROR_EXIT)
        if report.unreadable:
            pytest.exit(f"not graded: {notebook}: {report.unreadable}", returncode=UNREADABLE_EXIT)
    REPORTS.append(report)
    return report


CELL_TIME_LIMIT_S = 120


class Learner:
    def __init__(self, namespace: dict, origin: str, errors: list[str]):
        self.namespace, self.origin, self.errors = namespace, origin, errors

    @classmethod
    def from_option(cls, notebook: str | None, reference_module: str) -> "Learner":
        if notebook is None:
            mod = importlib.import_module(reference_module)
            return cls(vars(mod), reference_module, [])
        return cls.from_notebook(Path(notebook))

    @classmethod
    def from_notebook(cls, path: Path) -> "Learner":
        """Run the notebook's code cells, except its graded test cells, in a fresh namespace.

        A cell that raises, or runs longer than CELL_TIME_LIMIT_S, is recorded and skipped: the checks that
        need its definitions then fail with a message; the grader itself never crashes.
        """
        # A real module in sys.modules, so that definitions which look themselves up there (dataclasses,
        # pickling, typing) behave as they do in a notebook kernel.
        module = types.ModuleType("__learner__")
        sys.modules["__learner__"] = module
        ns: dict = module.__dict__
        errors: list[str] = []
        try:
            nb = json.loads(path.read_text())
            cells = nb["cells"]
        except (OSError, ValueError, KeyError) as exc:
            return cls(ns, str(path), [f"could not read the notebook {path}: {exc}"])
        for i, cell in enumerate(cells):
            if cell.get("cell_type") != "code":
                continue
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade") and not meta.get("solution"):
                continue  # an autograder test cell: the checks run here instead
            src = cell.get("source", "")
            src = "".join(src) if isinstance(src, list) else src
            # IPython magics and shell escapes are not Python.
            src = "\n".join(line for line in src.splitlines() if not line.lstrip().startswith(("%", "!")))
            try:
                with time_limit(CELL_TIME_LIMIT_S, f"code cell {i}"):
                    exec(compile(src, f"<{path.name} cell {i}>", "exec"), ns)  # noqa: S102
            except CheckFailed as exc:
                errors.append(str(exc))
            except BaseException as exc:  # noqa: BLE001 - a learner's cell may raise anything
                if isinstance(exc, KeyboardInterrupt):
                    raise
                errors.append(f"code cell {i} raised {type(exc).__name__}: {exc}")
        return cls(ns, str(path), errors)

    def get(self, name: str):
        if name not in self.namespace:
            hint = ("; errors while running the notebook: " + " | ".join(self.errors)) if self.errors else ""
            pytest.fail(f"`{name}` is not defined in {self.origin}{hint}", pytrace=False)
        return self.namespace[name]


def run_check(graded, *args):
    """One check's result, ``run_check(report, check_id)``; a failure shows only the learner message. The older form
    ``run_check(learner, checks_table, check_id)`` runs the check here, on a ``Learner``."""
    if isinstance(graded, Report):
        (check_id,) = args
        r = graded.get(check_id)
        if not r.passed:
            pytest.fail(f"[{check_id}] {printable(r.message, newlines=True)}", pytrace=False)
        return
    table, check_id = args
    name, check = table[check_id]
    impl = graded.get(name)
    try:
        check(impl)
    except CheckFailed as exc:
        pytest.fail(f"[{check_id}] {exc}", pytrace=False)
