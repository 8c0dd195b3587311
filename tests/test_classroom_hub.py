"""JupyterHub for a class (classroom/jupyterhub_config.py, `make classroom`): a smoke test through the real services.

The hub starts on 127.0.0.1 with the project's pinned JupyterHub and configurable-http-proxy from the npm registry
(build/chp); a student with the wrong password is refused, with the right one logged in, and their server starts
in their own home with nbgrader pointed at the class's exchange.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from course.notebook_spec import REPO

CHP = REPO / "build" / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"


def _free_port_block(n=3):
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + n < 65535 and all(_free(port + i) for i in range(n)):
            return port
    raise RuntimeError("no three free ports in a row on 127.0.0.1")


def _free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@pytest.fixture
def hub(tmp_path):
    assert CHP.exists(), f"{CHP} is missing: `make classroom-deps` installs configurable-http-proxy from npm"
    port = _free_port_block()
    env = dict(os.environ, CLASSROOM_DIR=str(tmp_path / "class"), CLASSROOM_PORT=str(port),
               CLASSROOM_PASSWORD="pw-for-the-test", CLASSROOM_STUDENTS="student1,student2")
    (tmp_path / "class").mkdir()
    log = open(tmp_path / "hub.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(REPO / "classroom" / "jupyterhub_config.py")],
                            cwd=tmp_path / "class", env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{url}/hub/api", timeout=5).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert proc.poll() is None, (tmp_path / "hub.log").read_text()[-3000:]
            time.sleep(1)
        yield url, tmp_path / "class", proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def _login(url, user, password):
    s = requests.Session()
    page = s.get(f"{url}/hub/login", timeout=10)
    xsrf = re.search(r'name="_xsrf"\s+value="([^"]+)"', page.text) or re.search(r"_xsrf=([^&\"']+)", page.text)
    data = {"username": user, "password": password}
    if xsrf:
        data["_xsrf"] = xsrf.group(1)
    r = s.post(f"{url}/hub/login", data=data, timeout=30, allow_redirects=False)
    return s, r


def test_hub_smoke(hub):
    import jupyterhub

    url, state, proc = hub
    assert requests.get(f"{url}/hub/api", timeout=10).json()["version"] == jupyterhub.__version__
    _, refused = _login(url, "student1", "wrong")
    assert refused.status_code == 403
    _, stranger = _login(url, "mallory", "pw-for-the-test")
    assert stranger.status_code == 403  # not on the class list
    s, ok = _login(url, "student1", "pw-for-the-test")
    assert ok.status_code == 302, ok.text[:500]
    s.get(f"{url}/hub/spawn", timeout=180)
    deadline = time.monotonic() + 180
    status = None
    while time.monotonic() < deadline:
        # The server's unauthenticated version endpoint, through the proxy: 200 once the proxy routes to it.
        status = s.get(f"{url}/user/student1/api", timeout=10, allow_redirects=False)
        if status.status_code == 200 and "version" in status.json():
            break
        time.sleep(2)
    assert status is not None and status.status_code == 200, (state.parent / "hub.log").read_text()[-3000:]
    cfg = (state / "home" / "student1" / "nbgrader_config.py").read_text()
    assert f"c.Exchange.root = {str(state / 'exchange')!r}" in cfg
    assert "c.CourseDirectory.course_id = 'inference-memory'" in cfg
