"""A grader an instructor can trust: hostile notebooks, on the pytest route and with real `nbgrader autograde`.

One hostile lesson-01 notebook holds every attack, each aimed at a different check so that one run shows them all
(the notebook's own code finds which check is calling it):
- top level: turns every check and `expect` into a no-op, replaces torch's attention (the checks' reference) by the
  learner's wrong formula, appends a no-op to the grader's checks.py, deletes a file outside its folder, writes into
  the grader's working directory, prints 300 MB, then raises KeyboardInterrupt;
- `scaled_dot_product_attention` leaves out 1/√d, and under some checks: loops catching BaseException, loops in C,
  returns an object whose `.shape` loops forever, raises KeyboardInterrupt;
- `MultiHeadAttention` is the course's reference, imported.
Expected: 2 of 10 points (the two checks the wrong attention really passes), every other check failed with a message,
the files untouched, a bounded report, bounded time; the same points per check from pytest and from nbgrader. The
full and blank notebooks of every lesson score every point and none, per check, on both routes
(tests/test_notebooks.py).
"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from course.autograde import grade
from course.notebook_spec import REPO, nbgrader_cmd

LESSON = "part0_foundations.l01_attention.checks"
CHECK_S = 3  # the per-check limit in these tests: loops are stopped in seconds

HOSTILE_TOP = r'''
import os, sys, torch, torch.nn.functional as F
import course.grading as grading
from part0_foundations.l01_attention import checks as _c

def _wrong(q, k, v, attn_mask=None, is_causal=False, **kw):
    s = q @ k.transpose(-2, -1)
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf"))
    return torch.softmax(s, -1) @ v
F.scaled_dot_product_attention = _wrong
torch.nn.functional.scaled_dot_product_attention = _wrong
for _n in dir(_c):
    if _n.startswith("check_"):
        setattr(_c, _n, lambda *a, **k: None)
grading.expect = grading.expect_close = grading.expect_shape = lambda *a, **k: None
for _path, _act in ((_c.__file__, "a"), (os.path.join(REPO_DIR, "pwned.txt"), "w")):
    try:
        open(_path, _act).write("\ndef check_sdpa_matches_torch(f):\n    pass\n")
    except OSError as e:
        print("write refused:", e)
try:
    os.remove(VICTIM)
except OSError as e:
    print("delete refused:", e)
for _ in range(300):
    sys.stdout.write("x" * 1_000_000)
raise KeyboardInterrupt
'''

HOSTILE_SDPA = r'''
def _calling_check():
    import sys
    f = sys._getframe(2)
    while f is not None and not f.f_code.co_name.startswith("check_"):
        f = f.f_back
    return f.f_code.co_name if f is not None else ""


def scaled_dot_product_attention(q, k, v, mask=None, causal=False, return_weights=False):
    import collections, itertools, time
    who = _calling_check()
    if who == "check_sdpa_errors":                 # a loop that swallows the grader's timeout
        while True:
            try:
                time.sleep(0.05)
            except BaseException:
                pass
    if who == "check_sdpa_stable":                 # a loop in C: no Python signal handler ever runs
        collections.deque(itertools.count(), maxlen=0)
    if who == "check_sdpa_masked_weights_zero":    # a loop inside a .shape property, outside the guarded call
        class Endless:
            @property
            def shape(self):
                while True:
                    try:
                        time.sleep(0.05)
                    except BaseException:
                        pass
        return Endless(), Endless()
    lq, lk = _check_attention_inputs(q, k, v, mask)
    scores = q @ k.transpose(-2, -1)               # no 1/sqrt(d): wrong
    allowed = mask
    if causal:
        c = causal_mask(lq, lk)
        allowed = c if allowed is None else allowed & c
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    m = scores.amax(-1, keepdim=True)
    e = torch.exp(scores - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
    d = e.sum(-1, keepdim=True)
    w = e / torch.where(d > 0, d, torch.ones_like(d))
    return (w @ v, w) if return_weights else w @ v
'''

# The reference MultiHeadAttention's code, run under two checks as os._exit(0) and KeyboardInterrupt.
HOSTILE_MHA_EXTRA = r'''

_forward = MultiHeadAttention.forward


def _hostile_forward(self, *args, **kwargs):
    import os
    who = _calling_check()
    if who == "check_mha_matches_torch":
        os._exit(0)
    if who == "check_mha_errors":
        raise KeyboardInterrupt
    return _forward(self, *args, **kwargs)


MultiHeadAttention.forward = _hostile_forward
'''

REFERENCE_IMPORTS = {
    "sdpa_impl": "from part0_foundations.l01_attention.attention import scaled_dot_product_attention\n",
    "mha_impl": "from part0_foundations.l01_attention import attention\n\n\n"
                "class MultiHeadAttention(attention.MultiHeadAttention):\n    pass\n",
}

# What each check must say. The wrong attention (no 1/√d, everything else right) really passes the GQA and MQA
# checks (they compare the learner's attention with itself, and shapes): 2 of 10 points.
EXPECTED = {
    "sdpa_matches_torch": "differs from the reference",
    "sdpa_errors": "did not finish within 3 s",
    "sdpa_stable": "did not finish within 3 s",
    "sdpa_masked_weights_zero": "did not finish within 3 s",
    "mha_matches_torch": "exited with code 0",
    "mha_errors": "KeyboardInterrupt",
}
EXPECTED_POINTS = {"sdpa_matches_torch": 0, "sdpa_errors": 0, "sdpa_stable": 0, "sdpa_masked_weights_zero": 0,
                   "mha_matches_torch": 0, "mha_errors": 0, "gqa_equals_repeated_mha": 1,
                   "mqa_and_cross_attention": 1}


def _cell_with(nb, grade_id):
    return next(c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)


def _notebook(path, answers: dict, top: str | None = None):
    """The released lesson-01 notebook with these answer cells, and ``top`` as a cell after the set-up."""
    nb = json.loads((REPO / "exercises/01_attention/attention.ipynb").read_text())
    for grade_id, src in answers.items():
        _cell_with(nb, grade_id)["source"] = src
    if top:
        setup = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code")
        nb["cells"].insert(setup + 1, {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                                       "source": top})
    path.write_text(json.dumps(nb))
    return path


def hostile_notebook(path, victim):
    sol = json.loads((REPO / "solutions/01_attention/attention.ipynb").read_text())
    mha = "".join(_cell_with(sol, "mha_impl")["source"]) + HOSTILE_MHA_EXTRA
    top = HOSTILE_TOP.replace("REPO_DIR", repr(str(REPO))).replace("VICTIM", repr(str(victim)))
    return _notebook(path, {"sdpa_impl": HOSTILE_SDPA, "mha_impl": mha}, top)


@pytest.fixture(scope="module")
def attack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    victim = tmp / "someone_elses_file.txt"
    victim.write_text("keep me")
    checks_py = REPO / "part0_foundations/l01_attention/checks.py"
    return hostile_notebook(tmp / "attention.ipynb", victim), victim, checks_py, checks_py.read_text(), tmp


@pytest.fixture(scope="module", autouse=True)
def pytest_route(attack):
    """The pytest-route grading of the hostile notebook, started in the background as soon as the notebook exists:
    it runs beside the tests before it (the nbgrader route among them), keeping a second CPU busy. Its checks are in
    the last test of this module."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1)
    yield pool.submit(
        subprocess.run,
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(REPO / "tests/autograder/test_attention.py"),
         "--notebook", str(attack[0]), f"--check-timeout={CHECK_S}"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    pool.shutdown(wait=True)


def _assert_untouched(victim, checks_py, before):
    assert victim.read_text() == "keep me", "the notebook deleted a file outside its folder"
    assert checks_py.read_text() == before, "the notebook changed the grader's checks.py"
    assert not (REPO / "pwned.txt").exists(), "the notebook wrote into the grader's working directory"


def test_reference_imports_and_exits_fail_every_check(tmp_path):
    """The reference imported or inherited: refused by name. os._exit(0) at the top of an empty exercise: every
    check fails, none passes by exit code. A malformed notebook: one message, no traceback."""
    report = grade(LESSON, _notebook(tmp_path / "ref.ipynb", REFERENCE_IMPORTS))
    assert report.earned == 0
    for r in report.results:
        assert "the course's reference implementation" in r.message and "write your own" in r.message, r
    report = grade(LESSON, _notebook(tmp_path / "exit.ipynb", {}, top="import os\nos._exit(0)"))
    assert report.earned == 0 and all("exited with code 0" in r.message for r in report.results), report.results
    for bad, says in (({"cells": "not a list"}, "no list of cells"), ({"cells": [42]}, "cell 0 is not a JSON object"),
                      ({"cells": [{"cell_type": "code", "source": 7}]}, "neither text nor a list")):
        (tmp_path / "bad.ipynb").write_text(json.dumps(bad))
        report = grade(LESSON, tmp_path / "bad.ipynb")
        assert report.earned == 0 and all(says in r.message for r in report.results), (says, report.results[0])


def test_nbgrader_autograde_gives_the_same_points(attack, tmp_path):
    """Real `nbgrader autograde` in a throw-away course gives the hostile notebook exactly the pytest route's points
    per check (one test cell per check), and nothing on disk changed. (The full and blank notebooks of every lesson
    score every point and none, per cell, in tests/test_notebooks.py.)"""
    notebook, victim, checks_py, before, _ = attack
    root = tmp_path / "course"
    shutil.copytree(REPO / "solutions" / "01_attention", root / "solutions" / "01_attention")
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    env = dict(os.environ, COURSE_ROOT=str(root), NBGRADER_EXCHANGE=str(root / "exchange"),
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    nbg = nbgrader_cmd()
    subprocess.run(nbg + ["generate_assignment", "01_attention", "--force"], cwd=root, env=env, check=True,
                   capture_output=True)
    (root / "submitted" / "hostile" / "01_attention").mkdir(parents=True)
    shutil.copy(notebook, root / "submitted" / "hostile" / "01_attention" / "attention.ipynb")
    proc = subprocess.run(nbg + ["autograde", "01_attention", "--force", f"--IsolatedExecute.check_timeout={CHECK_S}"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _assert_untouched(victim, checks_py, before)

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        nb = gb.find_submission_notebook("attention", "01_attention", "hostile")
        assert {g.name: g.score for g in nb.grades if g.name in EXPECTED_POINTS} == EXPECTED_POINTS
        assert gb.find_submission("01_attention", "hostile").score == 2


def test_pytest_route_survives_every_attack(attack, pytest_route):
    notebook, victim, checks_py, before, _ = attack
    proc = pytest_route.result()
    out = proc.stdout + proc.stderr
    _assert_untouched(victim, checks_py, before)
    assert proc.returncode == 1, out[-3000:]
    assert len(out) < 100_000, f"the report carries {len(out):,} characters of the notebook's printout"
    assert "INTERNALERROR" not in out and "no tests ran" not in out, out[-3000:]
    for check_id, says in EXPECTED.items():
        line = next((ln for ln in out.splitlines() if ln.lstrip().startswith(f"[{check_id}]")), "")
        assert says in line, f"{check_id}: {line or out[-3000:]}"
    for check_id, points in EXPECTED_POINTS.items():
        assert re.search(rf"^  {check_id}\s+{points}/", out, flags=re.M), (check_id, out[-1500:])
    assert re.search(r"total\s+2/10", out), out[-1500:]
    assert "code cell 2 raised KeyboardInterrupt" in out, out[-1500:]  # the notebook's error, reported
    assert re.search(r"printed [\d,]+ bytes more than the [\d,]+ kept", out), out[-1500:]
    if sys.platform.startswith("linux"):
        assert "learner code ran confined (Landlock ABI" in out, "Landlock is not in force on this Linux"
