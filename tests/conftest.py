"""Shared pytest set-up. ``--notebook PATH`` makes tests/autograder/ grade a learner's notebook.

Long runs (``@pytest.mark.long(smoke=...)``): an end-to-end run too long for `make test` (the suite is kept under
5 minutes on 2 cores) is skipped by default and run by `make test-long` (``pytest --long -m long``); CI runs both.
A long test is skipped only because two things stand in for it: the fast smoke test its marker names, which always
runs and goes through the same seam, and its saved run, ``tests/long_run.json`` (outcome, seconds, date and commit
of its last run, written by every ``--long`` run); tests/house/test_suite.py checks both for every long test.

With pytest-xdist (`make test` runs ``-n 2``) a module's tests stay on one worker, so module fixtures are built once;
files on disk that two modules share are written once per run, under a lock (``built_site``).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
# Tools that nbgrader and jupyter spawn (alembic, the kernel) must come from this environment even when
# the venv is not activated (CI runs `make test`).
os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
# No network here: make every Hugging Face library stay offline.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def pytest_addoption(parser):
    parser.addoption(
        "--notebook", action="store", default=None,
        help="grade this learner notebook (its definitions) instead of the reference solution",
    )
    parser.addoption("--check-timeout", action="store", default=120, help="seconds allowed to one check (--notebook)")
    parser.addoption("--notebook-timeout", action="store", default=900,
                     help="seconds allowed to the notebook's cells together (--notebook)")
    parser.addoption("--screenshots", action="store", default=None,
                     help="keep the class round's screenshots in this folder (-m hub_round)")
    parser.addoption("--long", action="store_true", default=False,
                     help="run the long end-to-end tests too (skipped by default); `make test-long` runs only them")
    parser.addoption("--long-table", action="store_true", default=False,
                     help="with --collect-only: print every collected test and the smoke test of each long one (JSON)")


LONG_RUN = REPO / "tests" / "long_run.json"   # the saved run of the long tests (see the module docstring)


def pytest_collection_finish(session):
    """``--long-table``: one JSON line, ``{"tests": [...], "long": {long test: its smoke test}}`` (test_suite.py)."""
    if session.config.getoption("--long-table"):
        print("LONG-TABLE " + json.dumps(long_table(session.items)))


def long_table(items) -> dict:
    """The collected tests' ids and, for each long one, the smoke test its marker names."""
    return {"tests": [i.nodeid for i in items],
            "long": {i.nodeid: i.get_closest_marker("long").kwargs.get("smoke") for i in items
                     if i.get_closest_marker("long")}}


# The slowest modules (seconds measured alone on the shared 2-core machine), handed out first to pytest-xdist's
# workers so that no long module starts last while the other worker idles.
SLOW_FIRST = ("tests/site/test_site.py", "tests/course/classroom/test_instructors_guide.py", "tests/course/grading/test_hostile_notebooks.py",
              "tests/course/classroom/test_notebooks.py", "tests/site/test_i18n.py", "tests/course/classroom/test_classroom.py", "tests/house/test_main_job.py",
              "tests/course/classroom/test_student_build.py", "tests/house/test_suite.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist: whole modules to a worker (their module fixtures — gradings, a browser — are built once), in
    collection order (the workers put ``SLOW_FIRST`` first)."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False
    return LoadScopeScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """Long tests are skipped unless ``--long`` (the reason names the smoke test that stands in). On an xdist worker
    the slowest modules come first (every worker sorts the same collection the same way).
    The whole class round through JupyterHub (marker hub_round, a long run too) runs only when asked for:
    ``pytest -m hub_round`` (``make classroom-round``) or ``--long`` (`make test-long`, so CI runs it); the default
    run skips it and says how to run it."""
    if not config.getoption("--long"):
        for item in items:
            mark = item.get_closest_marker("long")
            if mark is not None:
                item.add_marker(pytest.mark.skip(
                    reason=f"long (make test-long runs it); {mark.kwargs.get('smoke', '?')} stands in"))
    if hasattr(config, "workerinput"):
        rank = {m: i for i, m in enumerate(SLOW_FIRST)}
        items.sort(key=lambda i: rank.get(i.nodeid.split("::", 1)[0], len(rank)))
    if "hub_round" in (config.option.markexpr or "") or config.getoption("--long"):
        return
    skip = pytest.mark.skip(reason="the class round through JupyterHub runs apart: make classroom-round "
                                   "(pytest -m hub_round tests/course/classroom/test_class_round.py)")
    for item in items:
        if "hub_round" in item.keywords:
            item.add_marker(skip)


_LONG_RESULTS: dict = {}
_STARTED: dict = {}


def pytest_sessionstart(session):
    from course.machine.records import load_average

    _STARTED["load_average"] = load_average()


def pytest_runtest_logreport(report):
    """Outcome and seconds of each long test that ran (on xdist's controller too: workers send it their reports)."""
    if "long" not in report.keywords:
        return
    entry = _LONG_RESULTS.setdefault(report.nodeid, {"outcome": "passed", "seconds": 0.0})
    entry["seconds"] = round(entry["seconds"] + report.duration, 1)
    if report.failed:
        entry["outcome"] = "failed"
    elif report.skipped and report.when == "setup":
        entry["outcome"] = "skipped"


def pytest_sessionfinish(session, exitstatus):
    """A ``--long`` run saves what it ran into LONG_RUN (merged: a partial run updates only its own tests)."""
    if hasattr(session.config, "workerinput") or not session.config.getoption("--long"):
        return
    ran = {k: v for k, v in _LONG_RESULTS.items() if v["outcome"] != "skipped"}
    if not ran:
        return
    from course.machine.records import run_record

    record = run_record(program="python -m pytest")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    record["load_average_at_start"] = _STARTED.get("load_average", record["load_average_at_start"])
    stamp = {"date_utc": record["date_utc"], "commit": commit.stdout.strip() or None,
             "load_average_at_start": record["load_average_at_start"]}
    saved = json.loads(LONG_RUN.read_text()) if LONG_RUN.exists() else {"tests": {}}
    saved["record"] = record
    saved["tests"].update({k: {**v, **stamp} for k, v in sorted(ran.items())})
    saved["tests"] = dict(sorted(saved["tests"].items()))
    LONG_RUN.write_text(json.dumps(saved, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def learner(request):
    """An autograder module without a lesson contract: the learner's notebook run in this process (--notebook),
    else its REFERENCE module."""
    from tests.support.adapters import Learner

    return Learner.from_option(request.config.getoption("--notebook"), request.module.REFERENCE)


@pytest.fixture(scope="module")
def graded(request):
    """The lesson's checks run on the learner's notebook (--notebook) or on the reference: a report."""
    from tests.support.adapters import grade_for

    return grade_for(request.config, request.module.LESSON)


def pytest_terminal_summary(terminalreporter):
    """The score: points per check and the total, as nbgrader records them."""
    from tests.support.adapters import REPORTS

    for report in REPORTS:
        terminalreporter.write_sep("-", "score")
        for line in report.table().splitlines():
            terminalreporter.write_line(line)
        if report.notebook_errors:
            from course.shared.text import printable

            terminalreporter.write_line("errors while running the notebook: "
                                        + printable(" | ".join(report.notebook_errors)[:2000]))
        if report.sandbox == "bubblewrap":
            terminalreporter.write_line("learner code ran in the bubblewrap sandbox")
        elif report.sandbox:
            terminalreporter.write_line(f"learner code ran without the bubblewrap sandbox ({report.sandbox})")
        if report.landlock:
            terminalreporter.write_line(f"learner code ran confined (Landlock ABI {report.landlock})")
        if report.limits:
            terminalreporter.write_line(f"the whole grading was bounded by: {report.limits}")
        if report.output_dropped:
            terminalreporter.write_line(f"(the notebook printed {report.output_dropped:,} bytes more than the "
                                        f"{len(report.output.encode()):,} kept)")


@pytest.fixture
def one_torch_thread():
    """Tiny models: one torch thread is faster; two OpenMP threads spin-wait for each other on a busy machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture()
def disk_dir(tmp_path):
    """A directory on a disk-backed filesystem, where a file's page cache can be dropped (not on tmpfs).

    Falls back to a temporary folder beside the tests when the system's temp dir is tmpfs; skips (and says so)
    only when neither is on a disk.
    """
    import tempfile

    from course.machine import memstat

    if memstat.filesystem_type(tmp_path) not in ("tmpfs", "ramfs"):
        yield tmp_path
        return
    here = os.path.dirname(os.path.abspath(__file__))
    if memstat.filesystem_type(here) in ("tmpfs", "ramfs"):
        pytest.skip("no disk-backed directory to test page-cache eviction on")
    with tempfile.TemporaryDirectory(dir=here) as d:
        yield Path(d)


@pytest.fixture(scope="session")
def built_site(request):
    """The course site, built by the real tool (`tools/build_site.py`: every generator into site/generated/, then
    `mkdocs build --strict` into _build/site/) once per test run, whichever module asks first: tests/site/test_site.py
    checks it, tests/site/test_i18n.py reads its site/generated/. Under a file lock, so that with pytest-xdist the other
    worker waits for that one build instead of reading files while they are written (or writing them again)."""
    import fcntl
    import uuid

    site, stamp = REPO / "_build" / "site", REPO / "_build" / ".site-built-by"
    run = getattr(request.config, "workerinput", {}).get("testrunuid") or _STARTED.setdefault("run", uuid.uuid4().hex)
    stamp.parent.mkdir(exist_ok=True)
    with open(REPO / "_build" / ".site.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (stamp.exists() and stamp.read_text() == run and (site / "index.html").exists()):
            stamp.unlink(missing_ok=True)
            done = subprocess.run([sys.executable, str(REPO / "tools" / "build_site.py")], cwd=REPO,
                                  capture_output=True, text=True)
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
            stamp.write_text(run)
    assert (site / "index.html").exists()
    return site
