"""The class's JupyterHub (classroom/jupyterhub_config.py) on 127.0.0.1 for the tests, and what a user does there.

``running_hub`` starts the real hub with configurable-http-proxy from build/chp in a class folder, and on the way out
stops it, checks that no process of the students' accounts is left and removes the system accounts the hub made
for them (as root the hub makes one per student, see the config). Student names are fresh for every run
(``class_names``), so no account of the machine is touched. ``User`` logs in through the hub's login form, gets an
API token from the hub's REST API and starts and reaches its server through the proxy.
"""
from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import requests

from course.grading.notebook_spec import REPO

CHP = REPO / "build" / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"
CONFIG = REPO / "classroom" / "jupyterhub_config.py"
PASSWORD = "pw-for-the-test"


def free_port_block(n=3) -> int:
    """A port p with p … p+n-1 free on 127.0.0.1 (the hub, its internal API and the proxy's API)."""
    def free(port):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return True
            except OSError:
                return False

    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + n < 65535 and all(free(port + i) for i in range(n)):
            return port
    raise RuntimeError("no three free ports in a row on 127.0.0.1")


def class_names(*first: str) -> list[str]:
    """Student names no account on this machine has (``first`` plus a fresh suffix): the hub makes their accounts."""
    suffix = secrets.token_hex(3)
    names = [f"{f}-{suffix}" for f in first]
    for n in names:
        try:
            pwd.getpwnam(n)
        except KeyError:
            continue
        raise RuntimeError(f"an account named {n} already exists")
    return names


def _runs_for_students(python) -> bool:
    probe = subprocess.run(["runuser", "-u", "nobody", "--", str(python), "-c", "import jupyterhub.singleuser"],
                           capture_output=True, text=True)
    return probe.returncode == 0


def _link_tree(src: Path, dst: Path) -> None:
    """``dst`` as a copy of ``src`` whose files are hard links (seconds for a whole environment, no space): other
    accounts reach them through ``dst``'s open folders. Raises RuntimeError when the two are on different disks."""
    if dst.parent.stat().st_dev != src.stat().st_dev:
        raise RuntimeError(f"other accounts cannot reach {src}, and {dst.parent} is on another file system")
    if dst.exists():
        shutil.rmtree(dst)
    subprocess.run(["cp", "-al", str(src), str(dst)], check=True, capture_output=True)


def student_python(folder: Path) -> str:
    """An interpreter the students' accounts can run, with this environment's packages: this one when another
    account can run it; else (its Python lives in a private folder, as pyenv's under /root here) the system's Python
    of the same version in a small virtual environment that adds this environment's site-packages and Jupyter
    folders. When those are in a private folder too (a clone in root's home), the environment holds them as hard
    links instead. Raises RuntimeError when there is none."""
    if _runs_for_students(sys.executable):
        return sys.executable
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    base = shutil.which(f"python{version}", path="/usr/local/bin:/usr/bin")
    if base is None:
        raise RuntimeError(f"other accounts cannot run {sys.executable} and there is no system python{version}")
    env = folder / "student-python"
    subprocess.run([base, "-m", "venv", "--without-pip", str(env)], check=True, capture_output=True)
    ours = Path(os.path.realpath(sysconfig.get_paths()["purelib"]))
    pure = env / "lib" / f"python{version}" / "site-packages"
    (pure / "course-environment.pth").write_text(f"import site; site.addsitedir({str(ours)!r})\n")
    jupyter = {sub: Path(os.path.realpath(sys.prefix)) / sub / "jupyter" for sub in ("etc", "share")}
    for sub, src in jupyter.items():  # jupyter's server extensions and JupyterLab's extensions
        (env / sub).mkdir(exist_ok=True)
        (env / sub / "jupyter").symlink_to(src)
    python = env / "bin" / "python"
    if not _runs_for_students(python):
        (pure / "course-environment.pth").unlink()
        _link_tree(ours, pure)
        for sub, src in jupyter.items():
            (env / sub / "jupyter").unlink()
            _link_tree(src, env / sub / "jupyter")
        if not _runs_for_students(python):
            raise RuntimeError(f"other accounts cannot import jupyterhub.singleuser with {python}")
    return str(python)


def _account_pids(uids: set[int]) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if d.stat().st_uid in uids:
                    out.append(int(d.name))
            except FileNotFoundError:
                pass
    return out


@dataclass
class Hub:
    url: str
    state: Path
    students: list[str]
    proc: subprocess.Popen
    log: Path
    leftovers: list[int] = field(default_factory=list)  # pids of the students' accounts found after the hub stopped

    def log_tail(self, n=4000) -> str:
        return self.log.read_text(errors="replace")[-n:]


@contextmanager
def running_hub(state: Path, students: list[str], python: str = sys.executable, timeout=120):
    """The class's hub in ``state`` (a folder other accounts can reach), the students' servers on ``python``,
    until the block ends."""
    assert CHP.exists(), f"{CHP} is missing: `make classroom-deps` installs configurable-http-proxy from npm"
    port = free_port_block()
    existed = set()
    for n in students:
        try:
            pwd.getpwnam(n)
            existed.add(n)
        except KeyError:
            pass
    env = dict(os.environ, CLASSROOM_DIR=str(state), CLASSROOM_PORT=str(port), CLASSROOM_PASSWORD=PASSWORD,
               CLASSROOM_STUDENTS=",".join(students), CLASSROOM_PYTHON=python)
    log = state.parent / "hub.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(CONFIG)], cwd=state, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    hub = Hub(f"http://127.0.0.1:{port}", state, students, proc, log)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{hub.url}/hub/api", timeout=5).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert proc.poll() is None, hub.log_tail()
            time.sleep(0.5)
        else:
            raise AssertionError(f"the hub did not answer within {timeout} s: {hub.log_tail()}")
        yield hub
    finally:
        # SIGTERM: the hub stops every user's server and the proxy (cleanup_servers, cleanup_proxy), then exits.
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        made = [n for n in students if n not in existed]
        uids = set()
        for n in made:
            try:
                uids.add(pwd.getpwnam(n).pw_uid)
            except KeyError:
                pass
        if uids:
            deadline = time.monotonic() + 20
            while (pids := _account_pids(uids)) and time.monotonic() < deadline:
                time.sleep(0.5)
            hub.leftovers = pids
            for pid in pids:  # a server the hub failed to stop (the test then fails on hub.leftovers)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for n in made:
            if n in {p.pw_name for p in pwd.getpwall()}:
                subprocess.run(["userdel", n], capture_output=True, check=False)


@dataclass
class User:
    """One of the class's users, as their browser and the JupyterLab extensions talk to the hub."""

    hub: Hub
    name: str
    token: str = ""

    def login(self, password=PASSWORD) -> requests.Response:
        """The hub's login form, as a browser posts it (with its _xsrf field)."""
        self.session = requests.Session()
        page = self.session.get(f"{self.hub.url}/hub/login", timeout=30)
        xsrf = re.search(r'name="_xsrf"\s+value="([^"]+)"', page.text)
        data = {"username": self.name, "password": password}
        if xsrf:
            data["_xsrf"] = xsrf.group(1)
        return self.session.post(f"{self.hub.url}/hub/login", data=data, timeout=60, allow_redirects=False)

    def get_token(self):
        """An API token of this user, asked of the hub's REST API with the login cookie (and its XSRF token)."""
        xsrf = self.session.cookies.get("_xsrf", path="/hub/")
        r = self.session.post(f"{self.hub.url}/hub/api/users/{self.name}/tokens", json={"note": "class round"},
                              headers={"X-XSRFToken": xsrf or "", "Referer": f"{self.hub.url}/hub/"}, timeout=30)
        assert r.status_code in (200, 201), (r.status_code, r.text[:500])
        self.token = r.json()["token"]
        return self.token

    @property
    def headers(self):
        return {"Authorization": f"token {self.token}"}

    def start_server(self, timeout=180):
        """POST /hub/api/users/<name>/server, then wait until the proxy routes to the server."""
        r = requests.post(f"{self.hub.url}/hub/api/users/{self.name}/server", headers=self.headers, timeout=60)
        assert r.status_code in (201, 202, 400), (r.status_code, r.text[:500], self.hub.log_tail())  # 400: running
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = requests.get(f"{self.hub.url}/hub/api/users/{self.name}", headers=self.headers, timeout=30).json()
            if got.get("servers", {}).get("", {}).get("ready"):
                break
            time.sleep(1)
        else:
            raise AssertionError(f"{self.name}'s server did not start: {self.hub.log_tail()}")
        while time.monotonic() < deadline:
            r = self.get("api/status")
            if r.status_code == 200:
                return
            time.sleep(1)
        raise AssertionError(f"{self.name}'s server is not routed: {r.status_code} {self.hub.log_tail()}")

    def server(self, path: str) -> str:
        return f"{self.hub.url}/user/{self.name}/{path}"

    def get(self, path, **kw):
        return requests.get(self.server(path), headers=self.headers, timeout=kw.pop("timeout", 120), **kw)

    def post(self, path, **kw):
        return requests.post(self.server(path), headers=self.headers, timeout=kw.pop("timeout", 300), **kw)

    def put(self, path, **kw):
        return requests.put(self.server(path), headers=self.headers, timeout=kw.pop("timeout", 120), **kw)
