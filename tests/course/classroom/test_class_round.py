"""A whole class round through the real services: the class's JupyterHub (classroom/jupyterhub_config.py) with
configurable-http-proxy and nbgrader's exchange on 127.0.0.1, as root (each student's server runs as the student's
own system account, which nbgrader files the submission under).

The instructor releases lesson 01 with the formgrader (its REST API in the instructor's server, what its buttons
call); two students each fetch it with nbgrader's Assignments extension (the REST API of their own server, what the
Assignments list calls), save their notebook through Jupyter's contents API (what JupyterLab's save does) — one
with the lesson's answers, one as released — and submit; the instructor collects with the formgrader, grades with
``course.classroom autograde``, generates and releases feedback with the formgrader; each student fetches feedback
and reads the file in their own server; ``nbgrader export`` and ``export-checks`` write the CSVs. Headless Chromium
then logs in as a student (the Assignments list in JupyterLab) and as the instructor (the formgrader's submissions
page) and takes a screenshot of each, checking the page's text at that moment.

Expected points are the lesson contract's, summed from ``LESSON`` (full marks and 0), not read from a run.
Runs apart from the default suite (about two minutes): ``make classroom-round``, i.e.
``pytest -m hub_round tests/course/classroom/test_class_round.py`` (``--screenshots DIR`` keeps the two screenshots).
"""
import csv
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from course.grading.notebook_spec import REPO
from tests.support.class_hub import PASSWORD, User, class_names, running_hub, student_python

pytestmark = [pytest.mark.hub_round, pytest.mark.long(smoke="tests/course/classroom/test_hub.py::test_hub_smoke")]

ASSIGNMENT, NOTEBOOK, COURSE_ID = "01_attention", "attention.ipynb", "inference-memory"


def _answers() -> dict:
    """grade id → the answer cell's source in the lesson's solution notebook (the markers taken out)."""
    nb = json.loads((REPO / "solutions" / ASSIGNMENT / NOTEBOOK).read_text())
    out = {}
    for c in nb["cells"]:
        meta = c["metadata"].get("nbgrader", {})
        if meta.get("solution"):
            src = "".join(c["source"])
            out[meta["grade_id"]] = "\n".join(ln for ln in src.splitlines()
                                              if ln.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
    return out


def _run(cmd, cwd, **env):
    proc = subprocess.run(cmd, cwd=cwd, env=dict(os.environ, **env), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{cmd}: {proc.stdout[-2000:]} {proc.stderr[-3000:]}"
    return proc


@pytest.fixture
def class_dir():
    """A folder the students' accounts can reach (pytest's own tmp folder is root's only), removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("the round needs root: each student's server runs as the student's own system account")
    d = Path(tempfile.mkdtemp(prefix="class-round-"))
    d.chmod(0o755)
    (d / "class").mkdir(mode=0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _list(user: User) -> list[dict]:
    """The student's Assignments list, as the extension asks their server for it."""
    r = user.get("assignments", params={"course_id": COURSE_ID})
    assert r.status_code == 200, r.text[:500]
    body = r.json()
    assert body["success"], body
    return body["value"]


def _action(user: User, action: str) -> list[dict]:
    r = user.post(f"assignments/{action}", json={"assignment_id": ASSIGNMENT, "course_id": COURSE_ID})
    assert r.status_code == 200, r.text[:500]
    body = r.json()
    assert body["success"], body.get("value", body)
    return body["value"]


def _formgrader(instructor: User, step: str) -> dict:
    r = instructor.post(f"formgrader/api/assignment/{ASSIGNMENT}/{step}")
    assert r.status_code == 200, r.text[:500]
    body = r.json()
    assert body["success"], f"{step}: {body.get('error')} {body.get('log', '')[-2000:]}"
    return body


def test_a_class_round_through_the_hub(class_dir, request):
    from part0_foundations.l01_attention.checks import LESSON

    full = sum(c.points for c in LESSON.checks)  # the contract's points, by hand: 2+1+1+1 + 2+1+1+1 = 10
    assert full == 10
    state = class_dir / "class"
    course = state / "course"
    t0 = time.monotonic()
    subprocess.run(["git", "clone", "-q", str(REPO), str(course)], check=True)
    _run([sys.executable, "-m", "course.classroom", "register", ASSIGNMENT], course, COURSE_ROOT=str(course),
         PYTHONPATH=str(course))
    ana, ben = class_names("ana", "ben")   # ana answers, ben hands in the notebook as released
    try:
        python = student_python(class_dir)
    except RuntimeError as exc:
        pytest.skip(f"no interpreter the students' accounts can run: {exc}")
    timings = {"clone and register": time.monotonic() - t0}

    with running_hub(state, [ana, ben], python) as hub:
        timings["hub up"] = time.monotonic() - t0
        users = {n: User(hub, n) for n in ("instructor", ana, ben)}
        for u in users.values():
            assert u.login().status_code == 302, hub.log_tail()
            u.get_token()
            u.start_server()
        timings["three servers up"] = time.monotonic() - t0
        instructor, students = users["instructor"], [users[ana], users[ben]]

        # The students' servers run as their own accounts, with nbgrader pointed at the class's exchange.
        for s in students:
            home = Path(pwd.getpwnam(s.name).pw_dir)
            assert home == state / "home" / s.name and home.stat().st_uid == pwd.getpwnam(s.name).pw_uid

        # Release.
        assert [a["assignment_id"] for a in _list(users[ana])] == []
        _formgrader(instructor, "release")
        for s in students:
            listed = _list(s)
            assert [(a["assignment_id"], a["status"]) for a in listed] == [(ASSIGNMENT, "released")]

        # Fetch, fill, submit.
        answers = _answers()
        for s in students:
            listed = _action(s, "fetch")
            assert [(a["assignment_id"], a["status"]) for a in listed] == [(ASSIGNMENT, "fetched")]
            path = f"{ASSIGNMENT}/{NOTEBOOK}"
            r = s.get(f"api/contents/{path}", params={"content": 1})
            assert r.status_code == 200, r.text[:300]
            model = r.json()
            nb = model["content"]
            if s.name == ana:
                filled = 0
                for c in nb["cells"]:
                    gid = c["metadata"].get("nbgrader", {}).get("grade_id")
                    if gid in answers:
                        c["source"] = answers[gid]
                        filled += 1
                assert filled == len(answers) == 2
                r = s.put(f"api/contents/{path}", json={"type": "notebook", "format": "json", "content": nb})
                assert r.status_code == 200, r.text[:300]
            listed = _action(s, "submit")
            assert any(a["status"] == "submitted" for a in listed), listed
        timings["released, fetched, submitted"] = time.monotonic() - t0

        # Collect, grade, feedback (with the class list imported, as from a school's roster).
        _formgrader(instructor, "collect")
        (course / "roster.csv").write_text(f"id,first_name,last_name,email\n{ana},Ana,Alves,\n{ben},Ben,Berg,\n")
        _run([sys.executable, "-m", "nbgrader", "db", "student", "import", "roster.csv"], course,
             COURSE_ROOT=str(course), PYTHONPATH=str(course))
        for s in students:
            assert (course / "submitted" / s.name / ASSIGNMENT / NOTEBOOK).is_file()
        graded = _run([sys.executable, "-m", "course.classroom", "autograde", ASSIGNMENT, "--jobs", "2"], course,
                      COURSE_ROOT=str(course), PYTHONPATH=str(course))
        assert f"{ana}: {full:g}/{full:g}" in graded.stdout and f"{ben}: 0/{full:g}" in graded.stdout, graded.stdout
        timings["collected and graded"] = time.monotonic() - t0
        _formgrader(instructor, "generate_feedback")
        _formgrader(instructor, "release_feedback")

        # Each student fetches feedback and reads their own file in their own server.
        seen = {}
        for s in students:
            listed = _action(s, "fetch_feedback")
            subs = [sub for a in listed if a["status"] == "submitted" for sub in a["submissions"]]
            assert len(subs) == 1 and subs[0]["has_local_feedback"], subs
            fb = subs[0]["local_feedback_path"]
            r = s.get(f"api/contents/{fb}/{NOTEBOOK.replace('.ipynb', '.html')}", params={"content": 1,
                                                                                       "format": "text"})
            assert r.status_code == 200, r.text[:300]
            seen[s.name] = r.json()["content"]
            mine = (course / "feedback" / s.name / ASSIGNMENT / "attention.html").read_text(encoding="utf-8")
            assert seen[s.name] == mine
            account = pwd.getpwnam(s.name)  # fetched by the student's own account, into their own home
            local = Path(account.pw_dir) / fb / "attention.html"
            assert local.stat().st_uid == account.pw_uid
        assert seen[ana] != seen[ben]
        for name, points in ((ana, full), (ben, 0)):
            score = re.search(r"Score:\s*([0-9.]+)\s*/\s*([0-9.]+)", seen[name])
            assert score and (float(score[1]), float(score[2])) == (points, full), name
        timings["feedback fetched"] = time.monotonic() - t0

        shots = _screenshots(hub, ana, {ana: f"{full:g} / {full:g}", ben: f"0 / {full:g}"}, class_dir,
                             request.config.getoption("--screenshots"))
        timings["screenshots"] = time.monotonic() - t0

    assert not hub.leftovers, f"processes of the students' accounts left after the hub stopped: {hub.leftovers}"
    # Export: totals and each check's points.
    _run([sys.executable, "-m", "nbgrader", "export"], course, COURSE_ROOT=str(course), PYTHONPATH=str(course))
    with open(course / "grades.csv", newline="") as f:
        totals = {r["student_id"]: float(r["score"]) for r in csv.DictReader(f) if r["assignment"] == ASSIGNMENT}
    assert totals == {ana: full, ben: 0}
    _run([sys.executable, "-m", "course.classroom", "export-checks"], course, COURSE_ROOT=str(course),
         PYTHONPATH=str(course))
    with open(course / "checks.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["assignment"] == ASSIGNMENT]
    assert {r["check"]: float(r["points"]) for r in rows if r["student"] == ana} == {c.id: c.points
                                                                                     for c in LESSON.checks}
    assert {r["check"]: float(r["points"]) for r in rows if r["student"] == ben} == {c.id: 0 for c in LESSON.checks}
    timings["exported"] = time.monotonic() - t0
    print("\nround timings (s since start): " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))
    for name, path in shots.items():
        print(f"screenshot {name}: {path} ({path.stat().st_size:,} bytes)")


def _login_page(browser, hub, name):
    ctx = browser.new_context(viewport={"width": 1100, "height": 620})
    page = ctx.new_page()
    page.goto(f"{hub.url}/hub/login", wait_until="load")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url(f"**/user/{name}/**", timeout=120_000)
    return ctx, page


def _no_news(page):
    """JupyterLab asks once whether to fetch Jupyter's news (it would go off the machine): answer no."""
    no = page.locator(".jp-toast-button", has_text="No")
    try:
        no.first.click(timeout=5_000)
    except Exception:  # not asked this time
        pass
    page.wait_for_timeout(500)


def _screenshots(hub, student, scores: dict, folder: Path, keep: str | None) -> dict:
    """A student's Assignments list in JupyterLab and the instructor's formgrader, each checked by the page's text
    at the moment of the screenshot and saved as a non-empty PNG."""
    from tests.support.chromium import launch

    names, out = list(scores), {}
    with launch() as browser:
        ctx, page = _login_page(browser, hub, student)
        page.wait_for_selector("#jp-mainmenu-nbgrader, .lm-MenuBar-itemLabel:text('Nbgrader')", timeout=120_000)
        page.get_by_text("Nbgrader", exact=True).click()
        page.get_by_text("Assignment List", exact=True).click()
        page.wait_for_selector(f"text={ASSIGNMENT}", timeout=120_000)
        _no_news(page)
        text = page.inner_text("body")
        out["assignment_list"] = folder / "assignment-list.png"
        page.screenshot(path=str(out["assignment_list"]))
        assert ASSIGNMENT in text and "Submitted assignments" in text, text[:2000]
        ctx.close()

        ctx, page = _login_page(browser, hub, "instructor")
        page.goto(f"{hub.url}/user/instructor/formgrader/manage_submissions/{ASSIGNMENT}", wait_until="load")
        for n in names:
            page.wait_for_selector(f"text={n}", timeout=120_000)
        rows = {n: " ".join(page.locator("tr", has_text=n).inner_text().split()) for n in names}
        text = page.inner_text("body")
        out["formgrader"] = folder / "formgrader.png"
        page.screenshot(path=str(out["formgrader"]))
        assert ASSIGNMENT in text and all(n in text for n in names), text[:2000]
        for n, score in scores.items():
            assert f"graded {score}" in rows[n], rows[n]
        ctx.close()
    for path in out.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for name, path in out.items():
            shutil.copy(path, Path(keep) / path.name)
    return out
