"""A class on nbgrader (course/classroom/nbgrader_class.py, course/classroom/nbgrader_ext.py, the integrity check of course/grading/autograde.py):
bad input gets one line and touches no one else's grade; a void grade is loud and does not blame the student;
nbgrader's working files are not part of what a grade depends on. The whole workflow, six students graded two at
a time, is tests/course/classroom/test_instructors_guide.py."""
import json
import threading
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course.classroom import nbgrader_class as classroom
from course.grading import autograde
from course.grading.notebook_spec import REPO

LESSON_MODULE = "part0_foundations.l01_attention.checks"


def _cli(root: Path, *args):
    env = dict(os.environ, COURSE_ROOT=str(root), PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "course.classroom", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=900)


def test_fingerprint_covers_grading_inputs_not_nbgrader_files(tmp_path):
    for rel in ("course/grading/autograde.py", "part0_foundations/l01_attention/checks.py", "tests/autograder/t.py",
                "nbgrader_config.py", "submitted/alice/01_attention/attention.ipynb",
                "autograded/alice/01_attention/attention.ipynb", "feedback/alice/01_attention/attention.html",
                "gradebook.db", "course/__pycache__/autograde.cpython-311.pyc"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    fp = autograde.tree_fingerprint(tmp_path)
    assert set(fp) == {"course/grading/autograde.py", "part0_foundations/l01_attention/checks.py", "tests/autograder/t.py",
                       "nbgrader_config.py"}
    (tmp_path / "gradebook.db").write_text("another grading wrote here")
    (tmp_path / "autograded/alice/01_attention/attention.ipynb").unlink()
    assert autograde.tree_fingerprint(tmp_path) == fp
    (tmp_path / "part0_foundations/l01_attention/checks.py").write_text("changed")
    assert autograde._changed(fp, autograde.tree_fingerprint(tmp_path)) == ["part0_foundations/l01_attention/checks.py"]


def test_a_void_grade_is_loud_and_blames_no_one(monkeypatch, capsys):
    """The grader's files change during a grading (simulated: the two hashes differ)."""
    hashes = iter([{"part0_foundations/l01_attention/checks.py": "a"}, {"part0_foundations/l01_attention/checks.py": "b"}])
    monkeypatch.setattr(autograde, "tree_fingerprint", lambda *a, **k: next(hashes))
    report = autograde.grade(LESSON_MODULE, REPO / "solutions" / "01_attention" / "attention.ipynb")
    assert report.void and "part0_foundations/l01_attention/checks.py" in report.void
    assert report.earned == 0 and all(r.message == f"not graded: {report.void}" for r in report.results)
    assert "your" not in report.void.lower() and "says nothing about the work" in report.void
    assert "void: the course's grading files changed" in capsys.readouterr().err

    # nbgrader's step refuses to record it: nbgrader then records nothing and exits 1 for that student.
    from nbformat import read

    nb = read(str(REPO / "solutions" / "01_attention" / "attention.ipynb"), as_version=4)
    monkeypatch.setattr(autograde, "grade", lambda *a, **k: report)
    step = autograde.nbgrader_preprocessor()()
    with pytest.raises(autograde.GradeVoid, match="the course's grading files changed while this notebook"):
        step.preprocess(nb, {"nbgrader": {"assignment": "01_attention", "student": "alice"}})


def test_unknown_assignment_and_empty_submitted(tmp_path):
    shutil.copy(REPO / "nbgrader_config.py", tmp_path)
    out = _cli(tmp_path, "autograde", "01_atention")
    assert out.returncode == 2 and out.stderr.startswith("error: assignment: unknown id '01_atention'; one of: ")
    assert "01_attention" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    out = _cli(tmp_path, "autograde", "01_attention")
    assert out.returncode == 2 and out.stderr.strip() == (
        "error: submitted/: no submission of 01_attention (expected submitted/<student>/01_attention/attention.ipynb)")
    out = _cli(tmp_path, "autograde", "01_attention", "--jobs", "0")
    assert out.returncode == 2 and out.stderr.strip() == "error: --jobs: 0; allowed: a whole number of at least 1"


def _put(root: Path, student: str, name: str, content):
    d = root / "submitted" / student / "01_attention"
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(content if isinstance(content, str) else json.dumps(content))


def test_bad_submissions_one_line_each_and_the_others_graded(tmp_path):
    shutil.copytree(REPO / "solutions", tmp_path / "solutions")
    shutil.copy(REPO / "nbgrader_config.py", tmp_path)
    classroom.register(tmp_path, ["01_attention"])
    blank = json.loads((REPO / "exercises" / "01_attention" / "attention.ipynb").read_text())
    _put(tmp_path, "zoë ana", "attention.ipynb", blank)                    # a fine name: graded
    _put(tmp_path, "mallory", "attention.ipynb", "this is not a notebook")
    _put(tmp_path, "nina", "attention.ipynb", {"cells": "no"})
    _put(tmp_path, "oscar", "kv_cache.ipynb", blank)                       # another lesson's notebook
    _put(tmp_path, "pat", "notes.txt", "nothing")
    _put(tmp_path, " quinn", "attention.ipynb", blank)                     # nbgrader would strip the space
    solved = json.loads((REPO / "solutions" / "01_attention" / "attention.ipynb").read_text())
    solved["cells"].append({"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                            "source": "# half an emoji: \ud800"})
    _put(tmp_path, "rita", "attention.ipynb", solved)                      # fine: full marks

    subs = {s.student: s.problem for s in classroom.submissions(tmp_path, "01_attention")}
    assert subs["zoë ana"] == ""
    assert subs["mallory"].startswith("attention.ipynb: the notebook is not valid JSON")
    assert subs["nina"] == "attention.ipynb: the notebook has no list of cells (is it an .ipynb file?)"
    assert subs["oscar"] == "holds kv_cache.ipynb, lesson 03_kv_cache's notebook, not attention.ipynb"
    assert subs["pat"] == "no attention.ipynb in it (found: no notebook)"
    assert subs[" quinn"].startswith("the student folder's name ' quinn' starts or ends with a space")

    out = _cli(tmp_path, "autograde", "01_attention", "--jobs", "2")
    assert out.returncode == 1, out.stderr
    from part0_foundations.l01_attention.checks import LESSON

    assert f"zoë ana: 0/{sum(c.points for c in LESSON.checks)}" in out.stdout
    errs = out.stderr.splitlines()
    for student in ("mallory", "nina", "oscar", "pat", " quinn"):
        assert sum(ln.startswith(f"{student}: not graded: ") for ln in errs) == 1, errs
    assert f"rita: {sum(c.points for c in LESSON.checks)}/{sum(c.points for c in LESSON.checks)}" in out.stdout
    assert classroom.scores(tmp_path, "01_attention") == {"zoë ana": (0.0, 10.0), "rita": (10.0, 10.0)}
    assert not any("has changed" in ln for ln in errs)  # the blank release's hidden-check cells are as released


def test_each_student_is_an_nbgrader_process_forked_from_a_warm_one(tmp_path, monkeypatch):
    """`classroom.autograde` runs each student's `nbgrader autograde` in its own process, a fork of this one after it
    loaded nbgrader and the lesson's checks (torch with them): that process's exit code and log are that student's.
    nbgrader's entry point is replaced by one that says where it ran and fails for one student as a broken grader
    does; the subprocess route never calls it, so this fails there."""
    # pytest's own process is single-threaded (xdist workers too): were it not, the forked route would go untested
    # (classroom.autograde starts fresh interpreters where threads run), so that is a failure, not a skip
    assert classroom._can_fork(), f"threads in the test process: {[t.name for t in threading.enumerate()]}"
    import nbgrader.apps.nbgraderapp as app

    blank = json.loads((REPO / "exercises" / "01_attention" / "attention.ipynb").read_text())
    for student in ("ann", "bob", "cy"):
        _put(tmp_path, student, "attention.ipynb", blank)
    _put(tmp_path, "dee", "attention.ipynb", "not a notebook")  # refused before any process starts

    def fake_nbgrader():
        student = sys.argv[sys.argv.index("--student") + 1]
        where = {"pid": os.getpid(), "parent": os.getppid(), "torch": "torch" in sys.modules, "cwd": os.getcwd(),
                 "argv": sys.argv, "root": os.environ.get("COURSE_ROOT")}
        (tmp_path / f"{student}.json").write_text(json.dumps(where))
        print(f"[AutogradeApp | WARNING] {student}: a test cell was changed", file=sys.stderr)
        if student == "bob":
            print("[AutogradeApp | ERROR] grader error for bob, not graded (nothing about the notebook): the sandbox "
                  "could not start", file=sys.stderr)
            sys.exit(1)

    monkeypatch.setattr(app, "main", fake_nbgrader)
    monkeypatch.setattr(classroom, "scores", lambda root, a: {"ann": (10.0, 10.0), "cy": (3.0, 10.0)})
    outcomes = {o.student: o for o in classroom.autograde(tmp_path, "01_attention", jobs=2)}
    assert [o for o in outcomes] == ["ann", "bob", "cy", "dee"]  # the order of submitted/, whatever ended first
    assert (outcomes["ann"].graded, outcomes["ann"].line) == (True, "ann: 10/10")
    assert (outcomes["cy"].graded, outcomes["cy"].line) == (True, "cy: 3/10")
    assert not outcomes["bob"].graded
    assert outcomes["bob"].line == ("bob: not graded (nbgrader exited 1): the grader failed, not the notebook: the "
                                    "sandbox could not start")
    assert outcomes["ann"].warnings == ["ann: ann: a test cell was changed"]
    assert outcomes["dee"].line.startswith("dee: not graded: attention.ipynb: the notebook is not valid JSON")
    assert not (tmp_path / "dee.json").exists()
    ran = {s: json.loads((tmp_path / f"{s}.json").read_text()) for s in ("ann", "bob", "cy")}
    assert len({r["pid"] for r in ran.values()}) == 3  # one process per student
    for student, r in ran.items():
        assert r["parent"] == os.getpid() and r["torch"], r  # a fork of this process, torch loaded
        assert Path(r["cwd"]) == tmp_path and r["root"] == str(tmp_path)
        assert r["argv"] == ["nbgrader", "autograde", "01_attention", "--student", student, "--force"]


def test_feedback_math_renders_offline_in_chromium(tmp_path):
    """The feedback exporter's page typesets the notebook's math with every request off the machine refused; the
    same page as nbconvert makes it (MathJax from a CDN) shows raw TeX."""
    from nbconvert.exporters import HTMLExporter
    from playwright.sync_api import sync_playwright

    from course.classroom.nbgrader_ext import offline_mathjax

    nb = REPO / "exercises" / "01_attention" / "attention.ipynb"
    cdn_html, _ = HTMLExporter(template_name="classic").from_filename(str(nb))
    cdn = "cdnjs.cloudflare.com/ajax/libs/mathjax"
    assert cdn in cdn_html  # (nbconvert's page also loads other scripts from the CDN; nbgrader's feedback does not)
    pages = {"cdn": cdn_html, "offline": offline_mathjax(cdn_html)}
    assert cdn not in pages["offline"]
    exe = shutil.which("chromium") or "/usr/bin/chromium"
    typeset = {}
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox", "--disable-gpu"])
        for name, html in pages.items():
            path = tmp_path / f"{name}.html"
            path.write_text(html, encoding="utf-8")
            page = b.new_page()
            outside = []
            page.route("**/*", lambda r: (outside.append(r.request.url), r.abort()) if not r.request.url.startswith(
                ("file:", "data:")) else r.continue_())
            page.goto(path.as_uri(), wait_until="load")
            if name == "offline":
                page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                                       timeout=30000)
                page.evaluate("() => MathJax.startup.promise")
                assert not [u for u in outside if "mathjax" in u.lower()]
                assert page.locator("mjx-merror").count() == 0
            typeset[name] = page.locator("mjx-container").count()
            page.close()
        b.close()
    assert typeset["cdn"] == 0 and typeset["offline"] >= 3, typeset


def _moodle_zip(path: Path, files: dict):
    """A zip as Moodle's "Download all submissions" makes it: one folder per student, named
    ``<Full Name>_<participant number>_assignsubmission_file_`` (mod/assign/locallib.php, download_submissions)."""
    import zipfile

    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        for name, content in files.items():
            z.writestr(name, content)


def test_zip_collect_from_an_lms_zip_one_line_per_file_left_out(tmp_path, monkeypatch, capsys):
    """`course.classroom zip-collect` runs real `nbgrader zip_collect` on an LMS's zip: each file it leaves out is one
    line; what it collects lands in submitted/<full name>/ byte for byte, names with spaces and non-ASCII letters (in
    either Unicode form) included; nobody else's submission or grade is touched. What grading then says of a
    collected notebook of another lesson or a file that is not JSON is classroom.submissions (graded for real by the
    test above)."""
    import hashlib
    import unicodedata

    shutil.copytree(REPO / "solutions", tmp_path / "solutions")
    shutil.copytree(REPO / "exercises", tmp_path / "exercises")
    shutil.copy(REPO / "nbgrader_config.py", tmp_path)
    classroom.register(tmp_path, ["01_attention"])
    solved = (REPO / "solutions" / "01_attention" / "attention.ipynb").read_text()
    blank = (REPO / "exercises" / "01_attention" / "attention.ipynb").read_text()
    # Someone collected and graded earlier (by hand, from e-mail): zip-collect leaves them alone.
    _put(tmp_path, "Earlier Student", "attention.ipynb", solved)
    before = {p: p.read_bytes() for p in (tmp_path / "submitted" / "Earlier Student").rglob("*") if p.is_file()}
    gradebook = hashlib.sha256((tmp_path / "gradebook.db").read_bytes()).hexdigest()

    # Refused before nbgrader starts (so in this process: the command's main with this course root).
    monkeypatch.setenv("COURSE_ROOT", str(tmp_path))
    assert classroom.main(["zip-collect", "01_atention"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: assignment: unknown id '01_atention'; one of: ") and len(err.splitlines()) == 1
    assert classroom.main(["zip-collect", "01_attention"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: downloaded/01_attention/archive/: no file in it; allowed: the LMS's download of every submission "
        "(a .zip, or its folders)")

    archive = tmp_path / "downloaded" / "01_attention" / "archive"
    _moodle_zip(archive / "only-notes.zip", {"Mal Lory_1003_assignsubmission_file_/notes.txt": "my notes"})
    out = _cli(tmp_path, "zip-collect", "01_attention")
    assert out.returncode == 2 and out.stderr.strip() == (
        "error: downloaded/01_attention/archive/: no submission of 01_attention in it (Mal Lory: not collected: "
        "notes.txt is not a notebook (allowed: .ipynb))"), out.stderr
    (archive / "only-notes.zip").unlink()

    zoe_nfd = unicodedata.normalize("NFD", "Zoë Kim")  # as a Mac writes the name
    files = {
        "Ana Alves_1001_assignsubmission_file_/attention.ipynb": solved,
        f"{zoe_nfd}_1002_assignsubmission_file_/attention.ipynb": blank,
        "Jo Park_1006_assignsubmission_file_/attention.ipynb": blank,
        "Jo Park_1006_assignsubmission_file_/notes.txt": "scratch",       # beside a notebook: left out
        "Mal Lory_1003_assignsubmission_file_/notes.txt": "my notes",      # no notebook at all
        "Oscar Ode_1004_assignsubmission_file_/kv_cache.ipynb": blank,     # another lesson's notebook
        "Nina Null_1005_assignsubmission_file_/attention.ipynb": "not a notebook",
        "index.html": "<html></html>",                                      # outside the layout
        "Ana Alves_1009_assignsubmission_file_/attention.ipynb": blank,    # a second Ana Alves
    }
    _moodle_zip(archive / "Lesson 01-Attention-77.zip", files)
    out = _cli(tmp_path, "zip-collect", "01_attention")
    assert out.returncode == 1, out.stderr
    collected = ["Ana Alves", "Jo Park", "Nina Null", "Oscar Ode", "Zoë Kim"]
    assert out.stdout.splitlines() == [f"{s}: collected into submitted/{s}/01_attention/" for s in collected]
    assert sorted(out.stderr.splitlines()) == sorted([
        "Ana Alves: not collected: a second participant of this name (number 1009; number 1001 is collected): "
        "grade it by hand",
        "Jo Park: not collected: notes.txt is not a notebook (allowed: .ipynb)",
        "Mal Lory: not collected: notes.txt is not a notebook (allowed: .ipynb)",
        "downloaded/01_attention/extracted/Lesson 01-Attention-77/index.html: not collected: not in the LMS's "
        "layout (<Full Name>_<number>_assignsubmission_file_/<notebook>)",
    ]), out.stderr

    sub = tmp_path / "submitted"
    assert sorted(p.name for p in sub.iterdir()) == sorted(["Earlier Student", *collected])
    assert (sub / "Ana Alves" / "01_attention" / "attention.ipynb").read_text() == solved
    assert (sub / "Zoë Kim" / "01_attention" / "attention.ipynb").read_text() == blank  # one id, composed form
    assert sorted(p.name for p in (sub / "Jo Park" / "01_attention").iterdir()) == ["attention.ipynb"]
    assert {p: p.read_bytes() for p in (sub / "Earlier Student").rglob("*") if p.is_file()} == before
    assert hashlib.sha256((tmp_path / "gradebook.db").read_bytes()).hexdigest() == gradebook

    problems = {s.student: s.problem for s in classroom.submissions(tmp_path, "01_attention")}
    assert problems == {
        "Earlier Student": "", "Ana Alves": "", "Zoë Kim": "", "Jo Park": "",
        "Oscar Ode": "holds kv_cache.ipynb, lesson 03_kv_cache's notebook, not attention.ipynb",
        "Nina Null": "attention.ipynb: the notebook is not valid JSON: Expecting value: line 1 column 1 (char 0)",
    }



def test_a_grader_error_records_nothing_and_blames_no_one(monkeypatch, capsys):
    """The grader fails (simulated: grade raises GraderError, as when its sandbox cannot start): nbgrader's step logs
    one line naming the cause and the student, and raises, so nbgrader records no grade and exits non-zero."""
    from nbformat import read

    def broken(*a, **k):
        raise autograde.GraderError("the learner's sandbox could not start (bubblewrap exited with code 1)")

    nb = read(str(REPO / "solutions" / "01_attention" / "attention.ipynb"), as_version=4)
    monkeypatch.setattr(autograde, "grade", broken)
    step = autograde.nbgrader_preprocessor()()
    lines = []
    monkeypatch.setattr(step.log, "error", lambda fmt, *args: lines.append(fmt % args))
    with pytest.raises(autograde.GradeVoid, match="sandbox could not start"):
        step.preprocess(nb, {"nbgrader": {"assignment": "01_attention", "student": "alice"}})
    assert lines == ["grader error for alice, not graded (nothing about the notebook): the learner's sandbox could "
                     "not start (bubblewrap exited with code 1)"]


FORGED = "\x1b[1A\x1b[2K\r  total 10/10\x9b2K\u202e"  # cursor up, erase the line, draw a score; a C1 CSI; a bidi override


def test_learner_text_reaches_nbgrader_feedback_escaped(monkeypatch):
    """A check's message carrying terminal control sequences is written into the feedback cell as visible escapes."""
    from nbformat import read

    report = autograde.Report(lesson="l01", origin="x", results=[
        autograde.CheckResult(c.id, c.name, c.points, False, f"raised ValueError: {FORGED}")
        for c in autograde.load_lesson(LESSON_MODULE).checks])
    report.notebook_errors = [f"code cell 3 raised RuntimeError: {FORGED}"]
    nb = read(str(REPO / "solutions" / "01_attention" / "attention.ipynb"), as_version=4)
    monkeypatch.setattr(autograde, "grade", lambda *a, **k: report)
    step = autograde.nbgrader_preprocessor()()
    logged = []
    monkeypatch.setattr(step.log, "info", lambda fmt, *args: logged.append(fmt % args))
    nb, _ = step.preprocess(nb, {"nbgrader": {"assignment": "01_attention", "student": "alice"}})
    outputs = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert outputs, "no failed check was written"
    for text in [o["evalue"] for o in outputs] + [t for o in outputs for t in o["traceback"]] + logged:
        assert not any(ch in text for ch in "\x1b\r\x9b\u202e"), text
        assert "\\x1b[1A\\x1b[2K\\x0d  total 10/10\\x9b2K\\u202e" in text, text


def test_checks_csv_and_class_lines_are_text(tmp_path, monkeypatch):
    """A student id with control characters (an LMS's zip can carry any name) reaches checks.csv escaped."""
    import types

    class FakeGradebook:
        def __init__(self, *a):
            grade = types.SimpleNamespace(name="sdpa_matches_torch", cell_type="code", score=2.0, max_score=2.0)
            nb = types.SimpleNamespace(name="attention", grades=[grade])
            self.sub = types.SimpleNamespace(student_id=f"mallory{FORGED}", notebooks=[nb])
            self.assignments = [types.SimpleNamespace(name="01_attention")]

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def assignment_submissions(self, name):
            return [self.sub]

    import nbgrader.api

    monkeypatch.setattr(nbgrader.api, "Gradebook", FakeGradebook)
    classroom.export_checks(tmp_path, tmp_path / "checks.csv")
    text = (tmp_path / "checks.csv").read_bytes().decode("utf-8")
    assert not any(ch in text for ch in "\x1b\x9b\u202e") and "\r\n" in text  # the CSV's own line ends stay
    assert "mallory\\x1b[1A\\x1b[2K\\x0d  total 10/10\\x9b2K\\u202e,01_attention,attention,sdpa_matches_torch" in text
