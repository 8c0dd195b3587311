"""The student build (course/classroom/student_build.py): no answer in it, the notebooks' visible test cells run in it, and a
notebook finished there grades full marks on the instructor's side."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from course.grading.notebook_spec import REPO
from course.classroom.student_build import PACKAGES, build, hidden_check_functions, stub_functions, stub_solutions

LESSON_MODULE = "part0_foundations.l01_attention.checks"


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    out = tmp_path_factory.mktemp("student") / "build"
    build(out)
    return out


def _regions(text: str) -> list[list[str]]:
    regions, cur = [], None
    for line in text.splitlines():
        s = line.strip()
        if s == "### BEGIN SOLUTION":
            cur = []
        elif s == "### END SOLUTION":
            regions.append(cur)
            cur = None
        elif cur is not None:
            cur.append(s)
    return regions


def _outside_regions(text: str) -> str:
    keep, inside = [], False
    for line in text.splitlines():
        s = line.strip()
        if s in ("### BEGIN SOLUTION", "### END SOLUTION"):
            inside = s == "### BEGIN SOLUTION"
        elif not inside:
            keep.append(line)
    return "\n".join(keep)


def _answer_lines() -> dict[str, list[str]]:
    """file → the lines that exist only inside its solution regions (a line such as ``if cache is not None:`` that
    also appears in code students are given is not an answer)."""
    sources = {p: p.read_text(encoding="utf-8") for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")}
    given = "\n".join(_outside_regions(t) for t in sources.values())
    given += "\n".join(p.read_text() for p in (REPO / "exercises").rglob("*.ipynb"))
    out = {}
    for p, text in sources.items():
        lines = [ln for r in _regions(text) for ln in r if len(ln) >= 12 and not ln.startswith("#") and ln not in given]
        if lines:  # the grader's own modules name the markers but hold no region
            out[str(p.relative_to(REPO))] = lines
    return out


def test_hidden_checks_have_no_code_in_the_build(student):
    import ast

    hidden = hidden_check_functions()
    assert sum(len(v) for v in hidden.values()) >= 5
    for path, names in hidden.items():
        tree = ast.parse((student / path.relative_to(REPO)).read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in names:
                kinds = [type(n).__name__ for n in node.body]
                assert kinds in (["Expr", "Raise"], ["Raise"]), (path.name, node.name, kinds)


def _finished_release(student: Path, tmp: Path) -> Path:
    """The build's release notebook of lesson 01 with its answer cells written (taken from the solution)."""
    solved = json.loads((REPO / "solutions" / "01_attention" / "attention.ipynb").read_text())
    answers = {c["metadata"]["nbgrader"]["grade_id"]: c["source"] for c in solved["cells"]
               if c["metadata"].get("nbgrader", {}).get("solution")}
    nb = json.loads((student / "exercises" / "01_attention" / "attention.ipynb").read_text())
    filled = 0
    for c in nb["cells"]:
        gid = c["metadata"].get("nbgrader", {}).get("grade_id")
        if c["metadata"].get("nbgrader", {}).get("solution"):
            assert "NotImplementedError" in "".join(c["source"])  # the release's cell was blank
            c["source"] = answers[gid]
            filled += 1
    assert filled == 2
    # A hidden check called in the build says when it runs instead of running.
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source":
                        "try:\n    checks.check_sdpa_causal_decode(scaled_dot_product_attention)\n"
                        "except NotImplementedError as e:\n    print('hidden:', e)\n"})
    out = student / "exercises" / "01_attention" / "finished.ipynb"
    out.write_text(json.dumps(nb))
    return out


def test_visible_checks_run_in_the_build_and_the_notebook_grades_full_marks(student, tmp_path):
    finished = _finished_release(student, tmp_path)
    # The notebook runs in a kernel that sees only the student build (the way a student runs it).
    env = dict(os.environ, PYTHONPATH=str(student))
    run = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                          "--output", str(tmp_path / "ran.ipynb"), str(finished)],
                         cwd=student, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    ran = json.loads((tmp_path / "ran.ipynb").read_text())
    errors = [o for c in ran["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    said = "".join("".join(o.get("text", "")) for o in ran["cells"][-1]["outputs"])
    assert said == "hidden: a hidden check: it runs when the instructor grades your notebook\n"
    # Visible test cells really ran the checks (the reference is not needed for them in this lesson).
    from part0_foundations.l01_attention.checks import LESSON

    visible = [c for c in LESSON.checks if not c.hidden]
    assert visible and all(any(f"checks.{c.fn.__name__}(" in "".join(x["source"]) and x.get("execution_count")
                                for x in ran["cells"]) for c in visible)

    from course.grading.autograde import grade

    report = grade(LESSON_MODULE, finished)
    assert report.earned == report.points == sum(c.points for c in LESSON.checks), report.table()


def test_stubs():
    src = "def f(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n"
    assert stub_solutions(src, "n") == "def f(x):\n    raise NotImplementedError('n')\n"
    with pytest.raises(ValueError, match="has no ### END SOLUTION"):
        stub_solutions("def f():\n    ### BEGIN SOLUTION\n    return 1\n")
    checks = 'def check_a(f):\n    """The rule."""\n    assert f(1) == 2\n\n\ndef check_b(f):\n    return f\n'
    assert stub_functions(checks, {"check_a"}, "h") == (
        'def check_a(f):\n    """The rule."""\n    raise NotImplementedError(\'h\')\n\n\ndef check_b(f):\n    return f\n')


def test_cli_refuses_a_folder_in_use(tmp_path):
    (tmp_path / "x").write_text("mine")
    out = subprocess.run([sys.executable, "-m", "course.student_build", str(tmp_path)], cwd=REPO,
                         env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.strip() == f"error: out: {tmp_path}: not empty; give a new folder"
    assert (tmp_path / "x").read_text() == "mine"


def test_a_later_lesson_keeps_earlier_answers_only(tmp_path):
    """Releasing lesson 02: lesson 01's answers are in (lesson 02's model is built on them), lesson 02's are not."""
    out = tmp_path / "b"
    build(out, "02_encoder_decoder")
    rel01 = "part0_foundations/l01_attention/attention.py"
    assert (out / rel01).read_text() == (REPO / rel01).read_text()
    answers = _answer_lines()
    later = [f for f in answers if not f.startswith("part0_foundations/l01_")]
    assert len(later) >= 6
    for f in later:
        text = (out / f).read_text()
        assert not [ln for ln in answers[f] if ln in text], f
    with pytest.raises(ValueError, match="lesson: unknown id '9'; one of: 01_attention, "):
        build(tmp_path / "c", "9")


def test_the_build_has_a_readme_and_light_requirements_with_cpu_torch(student):
    """A student installs what the notebooks need, not the course's stack: the pins are the course's own (read here
    from requirements.txt by hand), torch is the CPU build from PyTorch's CPU index, and no hub, site, test or
    grading tool is in it."""
    from course.classroom.student_build import STUDENT_PACKAGES, student_requirements

    req = (student / "requirements.txt").read_text().splitlines()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in req
    course_pins = dict(ln.split("==") for ln in (REPO / "requirements.txt").read_text().splitlines()
                       if "==" in ln and not ln.startswith("#"))
    assert f"torch=={course_pins['torch']}+cpu" in req
    pins = dict(ln.split("==") for ln in req if "==" in ln and not ln.startswith("#"))
    assert set(pins) == set(STUDENT_PACKAGES)
    assert all(pins[p] == course_pins[p] for p in pins if p != "torch")
    for heavy in ("jupyterhub", "mkdocs", "mkdocs-material", "playwright", "pytest", "nbgrader", "hypothesis"):
        assert heavy not in pins, heavy
    # every third-party module a release notebook imports is installed by it (import name -> distribution)
    dist = {"torch": "torch", "numpy": "numpy", "transformers": "transformers", "math": None, "copy": None}
    for nb in (student / "exercises").rglob("*.ipynb"):
        for cell in json.loads(nb.read_text())["cells"]:
            for line in "".join(cell["source"]).splitlines() if cell["cell_type"] == "code" else ():
                words = line.split()
                if words[:1] in (["import"], ["from"]):
                    top = words[1].split(".")[0]
                    if top not in PACKAGES:
                        assert top in dist and (dist[top] is None or dist[top] in pins), (nb.name, line)
    with pytest.raises(ValueError, match="requirements.txt: no pin for faiss-cpu"):
        student_requirements("torch==2.13.0\n" + "\n".join(f"{p}==1" for p in STUDENT_PACKAGES
                                                           if p not in ("torch", "faiss-cpu")))
    readme = (student / "README.md").read_text()
    for line in (".venv/bin/pip install -r requirements.txt", ".venv/bin/pip install -e .",
                 ".venv/bin/jupyter lab exercises/01_attention/attention.ipynb", "--allow-root"):
        assert line in readme, line
    assert (student / "exercises" / "01_attention" / "attention.ipynb").is_file()   # the lesson the README opens
