"""Shared pytest set-up. ``--notebook PATH`` makes tests/autograder/ grade a learner's notebook."""
import os
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


def pytest_collection_modifyitems(config, items):
    """The whole class round through JupyterHub (marker hub_round) runs only when asked for by name:
    ``pytest -m hub_round`` (``make classroom-round``); the default run skips it and says how to run it."""
    if "hub_round" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="the class round through JupyterHub runs apart: make classroom-round "
                                   "(pytest -m hub_round tests/test_classroom_round.py)")
    for item in items:
        if "hub_round" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def learner(request):
    """An autograder module without a lesson contract: the learner's notebook run in this process (--notebook),
    else its REFERENCE module."""
    from tests.adapters import Learner

    return Learner.from_option(request.config.getoption("--notebook"), request.module.REFERENCE)


@pytest.fixture(scope="module")
def graded(request):
    """The lesson's checks run on the learner's notebook (--notebook) or on the reference: a report."""
    from tests.adapters import grade_for

    return grade_for(request.config, request.module.LESSON)


def pytest_terminal_summary(terminalreporter):
    """The score: points per check and the total, as nbgrader records them."""
    from tests.adapters import REPORTS

    for report in REPORTS:
        terminalreporter.write_sep("-", "score")
        for line in report.table().splitlines():
            terminalreporter.write_line(line)
        if report.notebook_errors:
            terminalreporter.write_line("errors while running the notebook: " + " | ".join(report.notebook_errors)[:2000])
        if report.sandbox == "bubblewrap":
            terminalreporter.write_line("learner code ran in the bubblewrap sandbox")
        elif report.sandbox:
            terminalreporter.write_line(f"learner code ran without the bubblewrap sandbox ({report.sandbox})")
        if report.landlock:
            terminalreporter.write_line(f"learner code ran confined (Landlock ABI {report.landlock})")
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

    from course import memstat

    if memstat.filesystem_type(tmp_path) not in ("tmpfs", "ramfs"):
        yield tmp_path
        return
    here = os.path.dirname(os.path.abspath(__file__))
    if memstat.filesystem_type(here) in ("tmpfs", "ramfs"):
        pytest.skip("no disk-backed directory to test page-cache eviction on")
    with tempfile.TemporaryDirectory(dir=here) as d:
        yield Path(d)
