"""Notebooks are generated from the package source: the one place each solution is written.

Each lesson has a ``notebook.py`` with ``ASSIGNMENT`` (nbgrader assignment name, e.g. ``"01_attention"``),
``NOTEBOOK`` (file name) and ``CELLS``, a list built with the helpers below:

- ``md(text)``: a markdown cell;
- ``code(src)``: a plain code cell (set-up, demos);
- ``given(path, names)``: a plain code cell with package definitions the learner is given;
- ``solution(path, names, grade_id)``: an nbgrader answer cell holding the exact source of the top-level
  definitions ``names`` of the package file ``path`` (with its ``### BEGIN/END SOLUTION`` regions);
- ``tests(grade_id, points, src, hidden=None)``: a locked, graded test cell; ``hidden`` goes inside
  ``### BEGIN/END HIDDEN TESTS``;
- ``graded(lesson, *check_ids)``: one locked test cell per check of the lesson contract (``course.grading.contract.Lesson``),
  its grade id the check id and its points the check's, so the notebook, nbgrader and the pytest grader share one
  list of checks. A hidden check's cell shows only the rule it tests.

``build_source_notebook`` turns a spec into the nbgrader *source* notebook under ``solutions/``;
``generate_release`` runs real ``nbgrader generate_assignment`` to make ``exercises/``.

Every spec also makes a Korean release from the same cells: ``solutions/ko/`` and ``exercises/ko/`` (an nbgrader
course of its own, so an assignment's points are not counted twice). Its markdown cells and the hidden checks'
rules come from ``course/locale/ko/notebooks.toml`` and ``grading.toml`` (keyed by the English text, so a changed
English cell fails the build until it is translated); the code cells are the same, identifiers in English. The
notebook's ``metadata.course.lang`` tells the grader which language to answer in.
"""
from __future__ import annotations

import ast
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from course.shared.i18n import DEFAULT, translator

REPO = Path(__file__).resolve().parents[2]
HIDDEN = "Hidden check, run when graded: {rule}"


@dataclass
class Cell:
    kind: str  # "markdown" | "code" | "solution" | "tests"
    source: str
    grade_id: str | None = None
    points: int = 0
    meta: dict = field(default_factory=dict)


def md(text: str) -> Cell:
    return Cell("markdown", text.strip("\n"))


def code(src: str) -> Cell:
    return Cell("code", src.strip("\n"))


def extract_definitions(path: str | Path, names: list[str]) -> str:
    """The exact source text of the named top-level functions/classes of a file, in the order given."""
    path = REPO / path
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text)
    found = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            name = node.name if hasattr(node, "name") else node.targets[0].id
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            found[name] = "\n".join(lines[start - 1 : node.end_lineno])
    missing = [n for n in names if n not in found]
    if missing:
        raise KeyError(f"{path}: no top-level definition named {missing}")
    return "\n\n\n".join(found[n] for n in names)


def given(path: str, names: list[str]) -> Cell:
    """A plain code cell with package definitions the learner is given (not graded)."""
    return code(extract_definitions(path, names))


def solution(path: str, names: list[str], grade_id: str) -> Cell:
    src = extract_definitions(path, names)
    if "### BEGIN SOLUTION" not in src:
        raise ValueError(f"{path}:{names}: an answer cell needs a ### BEGIN SOLUTION region")
    return Cell("solution", src, grade_id=grade_id)


def tests(grade_id: str, points: int, src: str, hidden: str | None = None) -> Cell:
    body = src.strip("\n")
    if hidden:
        body += "\n### BEGIN HIDDEN TESTS\n" + hidden.strip("\n") + "\n### END HIDDEN TESTS"
    return Cell("tests", body, grade_id=grade_id, points=points)


def graded(lesson, *check_ids: str) -> list[Cell]:
    """The test cells of the named checks of ``lesson`` (a ``course.grading.contract.Lesson``), one cell per check. The
    notebook imports the lesson's ``checks`` module in its set-up cell."""
    cells = []
    for cid in check_ids:
        c = lesson.get(cid)
        cells.append(Cell("tests", _check_cell(c, HIDDEN.format(rule=c.rule)), grade_id=c.id, points=c.points,
                          meta={"check": c}))
    return cells


def _check_cell(c, about: str) -> str:
    """A check's test cell: the call, and for a hidden check the rule it tests as a comment (``about``)."""
    run = f"checks.{c.fn.__name__}({c.name})"
    if not c.hidden:
        return run
    return ("\n".join("# " + line for line in textwrap.wrap(about, 110))
            + f"\n### BEGIN HIDDEN TESTS\n{run}\n### END HIDDEN TESTS")


def localized_cells(spec, lang: str = DEFAULT) -> list[Cell]:
    """The spec's cells in ``lang``: markdown from the notebooks catalogue, a hidden check's rule from the grading
    catalogue; code unchanged."""
    if lang == DEFAULT:
        return list(spec.CELLS)
    md_tr, rule_tr = translator(lang, "notebooks"), translator(lang, "grading")
    out = []
    for c in spec.CELLS:
        if c.kind == "markdown":
            c = Cell("markdown", md_tr(c.source), c.grade_id, c.points, dict(c.meta))
        elif c.kind == "tests" and "check" in c.meta and c.meta["check"].hidden:
            check = c.meta["check"]
            c = Cell("tests", _check_cell(check, rule_tr(HIDDEN, rule=rule_tr(check.rule))), c.grade_id, c.points,
                     dict(c.meta))
        out.append(c)
    return out


def load_spec(module: str):
    """Import a lesson's notebook spec module (e.g. ``part0_foundations.l01_attention.notebook``)."""
    return importlib.import_module(module)


def all_specs():
    """Every lesson spec in the package, sorted by assignment name."""
    mods = []
    for p in sorted((REPO / "part0_foundations").glob("*/notebook.py")):
        mods.append(load_spec(f"part0_foundations.{p.parent.name}.notebook"))
    for p in sorted((REPO / "part1_capacity" / "exercises").glob("*/notebook.py")):
        mods.append(load_spec(f"part1_capacity.exercises.{p.parent.name}.notebook"))
    return sorted(mods, key=lambda m: m.ASSIGNMENT)


def build_source_notebook(spec, lang: str = DEFAULT):
    """The nbgrader source notebook (an ``nbformat`` node) for a spec, in ``lang``. Deterministic: ids come from
    positions."""
    # nbformat (its JSON schemas): only when a notebook is written (every notebook.py imports this module)
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    if lang != DEFAULT:
        nb.metadata["course"] = {"lang": lang}
    seen = set()
    for i, c in enumerate(localized_cells(spec, lang)):
        if c.kind == "markdown":
            cell = nbformat.v4.new_markdown_cell(c.source)
        else:
            cell = nbformat.v4.new_code_cell(c.source)
        cell.id = f"c{i:02d}-{c.grade_id or c.kind}"
        if c.kind in ("solution", "tests"):
            if c.grade_id in seen:
                raise ValueError(f"{spec.ASSIGNMENT}: duplicate grade_id {c.grade_id!r}")
            seen.add(c.grade_id)
            cell.metadata["nbgrader"] = {
                "schema_version": 3,
                "grade_id": c.grade_id,
                "solution": c.kind == "solution",
                "grade": c.kind == "tests",
                "locked": c.kind == "tests",
                "task": False,
            }
            if c.kind == "tests":
                cell.metadata["nbgrader"]["points"] = c.points
        nb.cells.append(cell)
    return nb


def course_dirs(lang: str = DEFAULT) -> tuple[Path, Path]:
    """(solutions, exercises) of the nbgrader course in ``lang``: ``solutions/``, ``exercises/`` for English,
    ``solutions/<lang>/``, ``exercises/<lang>/`` for a translation."""
    if lang == DEFAULT:
        return REPO / "solutions", REPO / "exercises"
    return REPO / "solutions" / lang, REPO / "exercises" / lang


def write_source_notebook(spec, solutions_dir: Path | None = None, lang: str = DEFAULT) -> Path:
    # nbformat (its JSON schemas): loaded only when a notebook is read or written
    import nbformat

    out = Path(solutions_dir or course_dirs(lang)[0]) / spec.ASSIGNMENT / spec.NOTEBOOK
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(build_source_notebook(spec, lang), str(out))
    return out


# In each line ``nbgrader zip_collect`` logs about a file it leaves out, between who and why: the collector
# (``nbgrader_ext.LmsCollector``) writes it and ``classroom.zip_collect`` reads it back, so it lives below both.
SKIPPED = ": not collected: "


def nbgrader_cmd() -> list[str]:
    """Run nbgrader with the interpreter of this environment (works inside and outside a venv)."""
    return [sys.executable, "-m", "nbgrader"]


def generate_release(assignment: str, solutions_dir: Path, out_dir: Path) -> Path:
    """Run real ``nbgrader generate_assignment`` in a throw-away course root; copy the release to ``out_dir``."""
    with tempfile.TemporaryDirectory() as root:
        root = Path(root)
        shutil.copytree(Path(solutions_dir) / assignment, root / "solutions" / assignment)
        shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
        env = dict(os.environ, COURSE_ROOT=str(root), NBGRADER_EXCHANGE=str(root / "exchange"),
                   PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
        # nbgrader runs `alembic` from PATH: use this environment's, even when the venv is not activated.
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        subprocess.run(
            nbgrader_cmd() + ["generate_assignment", assignment, "--force"],
            cwd=root, env=env, check=True, capture_output=True, text=True,
        )
        dst = Path(out_dir) / assignment
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(root / "exercises" / assignment, dst)
    return dst
