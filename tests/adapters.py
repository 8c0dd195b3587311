"""The one small adapter between the tests and learner code (CS336 style).

Graders and learners share the same tests: ``Learner.get(name)`` returns the learner's definition, taken
from their notebook (``--notebook PATH``), or the reference from the package when no notebook is given.
"""
from __future__ import annotations

import importlib
import json
import sys
import types
from pathlib import Path

import pytest

from course.grading import CheckFailed, time_limit

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


def run_check(learner: Learner, checks_table: dict, check_id: str):
    """Run one check from a lesson's ``checks.ALL`` table; a failure shows only the learner message."""
    name, check = checks_table[check_id]
    impl = learner.get(name)
    try:
        check(impl)
    except CheckFailed as exc:
        pytest.fail(f"[{check_id}] {exc}", pytrace=False)
