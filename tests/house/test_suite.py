"""The suite's own rules (tests/conftest.py): `make test` skips a long end-to-end test only when a smoke test that
always runs stands in for it and a saved run of it is kept (tests/long_run.json); CI runs both commands."""
import json
import re
import shlex
import subprocess
import sys

import pytest

from tests.conftest import LONG_RUN, REPO, long_table


@pytest.fixture(scope="module")
def table(request):
    """Every test of the suite and the smoke test each long one names: this run's collection when it is the whole
    suite (`make test`), else a collection of the whole suite (`pytest --collect-only --long-table`)."""
    opt = request.config.option
    files = {p.relative_to(REPO).as_posix() for p in (REPO / "tests").rglob("test_*.py")}
    collected = {i.nodeid.split("::", 1)[0] for i in request.session.items}
    if files <= collected and not (opt.keyword or opt.markexpr or opt.deselect):
        return long_table(request.session.items)
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "--long-table", str(REPO / "tests")], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("LONG-TABLE ")), None)
    assert done.returncode == 0 and line, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(line.split(" ", 1)[1])


def test_every_long_test_names_a_smoke_test_that_runs_by_default(table):
    assert table["long"], "no long test collected: the marker or the collection changed"
    for test, smoke in table["long"].items():
        assert smoke, f"{test}: @pytest.mark.long needs smoke='tests/x.py::test_y'"
        assert smoke in table["tests"], f"{test}: its smoke test {smoke} is not in the suite"
        assert smoke not in table["long"], f"{test}: its smoke test {smoke} is itself long"


def test_every_long_test_has_a_passing_saved_run(table):
    """`make test-long` (pytest --long) saves each long test's outcome, seconds, date and commit."""
    assert LONG_RUN.exists(), "tests/long_run.json is missing: run `make test-long`"
    saved = json.loads(LONG_RUN.read_text(encoding="utf-8"))["tests"]
    for test in table["long"]:
        assert test in saved, f"{test} has no saved run in tests/long_run.json: run `make test-long`"
        assert saved[test]["outcome"] == "passed", f"{test}: its saved run {saved[test]['outcome']}"
        assert saved[test]["seconds"] >= 0 and saved[test]["date_utc"] and saved[test]["commit"]


@pytest.mark.parametrize("steps, says", [
    ([], "no step given; a step is 'root: CMD' or 'learner: CMD'"),
    (["root: make run", "make test"], "step 'make test': allowed forms are 'root: CMD' and 'learner: CMD'"),
    (["admin: make test"], "step 'admin: make test': allowed forms are 'root: CMD' and 'learner: CMD'"),
])
def test_fresh_machine_steps_are_checked_before_anything_is_made(steps, says, tmp_path):
    done = subprocess.run([str(REPO / "tools" / "fresh_machine.sh"), *steps], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "FRESH_ROOT": str(tmp_path / "tree")}, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (2, f"fresh-machine: {says}\n", "")
    assert not (tmp_path / "tree").exists()


def test_ci_runs_the_default_suite_and_the_long_tests():
    """.ci/run runs the README's two commands on a fresh machine (tools/fresh_machine.sh): `make run` without root,
    then as root `make run`, `make test` and `make test-long`; the first skips the long tests, the second runs only
    them."""
    ci = (REPO / ".ci" / "run").read_text()
    calls = [shlex.split(line, comments=True) for line in ci.replace("\\\n", " ").splitlines()]
    fresh = [c[1:] for c in calls if c and c[0] == "tools/fresh_machine.sh"]
    assert len(fresh) == 1, calls
    steps = [s.replace(" ", "") for s in fresh[0]]
    assert steps == ["learner:makerun", "root:makerun", "root:maketest", "root:maketest-long"], fresh
    assert not [c for c in calls if c and c[0] == "make"], "CI runs make only inside the fresh machine"
    assert (REPO / "tools" / "fresh_machine.sh").stat().st_mode & 0o111
    make = (REPO / "Makefile").read_text()
    recipe = {t: re.search(rf"^{t}:.*\n\t(.*)$", make, re.M).group(1) for t in ("test", "test-long")}
    assert "pytest" in recipe["test"] and "--long" not in recipe["test"], recipe
    assert re.search(r"--long\b", recipe["test-long"]) and "-m long" in recipe["test-long"], recipe
