"""JupyterHub for a class (classroom/jupyterhub_config.py, `make classroom`): a smoke test through the real services.

The hub starts on 127.0.0.1 with the project's pinned JupyterHub and configurable-http-proxy from the npm registry
(build/chp); a student with the wrong password is refused, with the right one logged in, and their server starts
in their own home — as root, as the student's own system account, which the hub made — with nbgrader pointed at the
class's exchange. The whole round (release, fetch, submit, collect, grade, feedback) is tests/course/classroom/test_class_round.py,
run apart. Student names are fresh each run and their accounts are removed afterwards.
"""
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import requests

from tests.support.class_hub import CONFIG, PASSWORD, User, class_names, free_port_block, running_hub, student_python


@pytest.fixture
def class_dir():
    d = Path(tempfile.mkdtemp(prefix="class-hub-"))
    d.chmod(0o755)  # the students' accounts reach their homes in it
    (d / "class").mkdir(mode=0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_hub_smoke(class_dir):
    import jupyterhub

    student, other = class_names("sam", "kim")
    python = student_python(class_dir) if os.geteuid() == 0 else sys.executable
    with running_hub(class_dir / "class", [student, other], python) as hub:
        url, state = hub.url, hub.state
        assert requests.get(f"{url}/hub/api", timeout=10).json()["version"] == jupyterhub.__version__
        assert User(hub, student).login("wrong").status_code == 403
        assert User(hub, "mallory").login().status_code == 403  # not on the class list
        u = User(hub, student)
        ok = u.login()
        assert ok.status_code == 302, ok.text[:500]
        u.get_token()
        u.start_server()
        # The server's unauthenticated version endpoint, through the proxy.
        assert "version" in requests.get(u.server("api"), timeout=10).json()
        home = state / "home" / student
        cfg = (home / "nbgrader_config.py").read_text()
        assert f"c.Exchange.root = {str(state / 'exchange')!r}" in cfg
        assert "c.CourseDirectory.course_id = 'inference-memory'" in cfg
        if os.geteuid() == 0:
            # The server runs as the student's account: the files it wrote are the account's.
            account = pwd.getpwnam(student)
            assert account.pw_dir == str(home)
            runtime = list((home / ".local" / "share" / "jupyter" / "runtime").glob("jpserver-*.json"))
            assert runtime and all(p.stat().st_uid == account.pw_uid != 0 for p in runtime)
    assert not hub.leftovers
    for name in (student, other):
        with pytest.raises(KeyError):
            pwd.getpwnam(name)  # the accounts the hub made are gone


def _hub_refusal(tmp_path, python) -> str:
    """The one CLASSROOM_PYTHON line a hub started as root with ``python`` for its students stops with."""
    env = dict(os.environ, CLASSROOM_DIR=str(tmp_path / "class"), CLASSROOM_PORT=str(free_port_block()),
               CLASSROOM_PASSWORD=PASSWORD, CLASSROOM_STUDENTS="nobody-here", CLASSROOM_PYTHON=str(python))
    proc = subprocess.run([sys.executable, "-m", "jupyterhub", "-f", str(CONFIG)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    said = [ln for ln in out.splitlines() if ln.startswith("CLASSROOM_PYTHON")]
    assert len(said) == 1 and "Traceback" not in out, out[-3000:]
    return said[0]


def test_hub_refuses_an_interpreter_students_cannot_run(tmp_path):
    """As root, a students' interpreter inside a folder closed to other accounts stops the hub with one line."""
    if os.geteuid() != 0:
        pytest.skip("only as root does the hub run students' servers as their own accounts")
    closed = tmp_path / "private"
    closed.mkdir(mode=0o700)
    (closed / "python").symlink_to(sys.executable)
    said = _hub_refusal(tmp_path, closed / "python")
    assert said.startswith(f"CLASSROOM_PYTHON: the students' accounts cannot run {closed / 'python'} (")
    assert said.endswith("is closed to other accounts); allowed: an interpreter with this environment's packages "
                         "outside private folders")


def test_hub_refuses_an_interpreter_without_the_servers_packages(tmp_path):
    """As root, a students' interpreter they can run but that lacks jupyterhub (its packages in a private folder, or
    none) stops the hub with one line, not with an error at each student's first spawn."""
    if os.geteuid() != 0:
        pytest.skip("only as root does the hub run students' servers as their own accounts")
    bare = shutil.which("python3", path="/usr/bin")
    if bare is None or subprocess.run([bare, "-c", "import jupyterhub"], capture_output=True).returncode == 0:
        pytest.skip("no system Python without jupyterhub on this machine")
    said = _hub_refusal(tmp_path, bare)
    assert said.startswith(f"CLASSROOM_PYTHON: the students' accounts cannot import jupyterhub.singleuser with "
                           f"{bare} (") and "No module named 'jupyterhub'" in said, said
