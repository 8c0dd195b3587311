"""JupyterHub for a class on one machine (``make classroom``): 127.0.0.1 only, a few local users, nbgrader's exchange.

Users: ``instructor`` (admin; their server opens the course root, where the formgrader and `nbgrader` run) and
the students in ``CLASSROOM_STUDENTS`` (comma-separated; default student1,student2), all with the password in
``CLASSROOM_PASSWORD`` (required: nothing listens without one). nbgrader files a submission under the name of the
system account that submits it, so when the hub runs as root each student's server runs as a system account of the
student's name (JupyterHub's LocalAuthenticator creates a missing one with ``useradd``, its home under
``CLASSROOM_DIR``/home, default build/classroom) and the instructor's server as the hub's account, which owns the
course root. Run as another account, every server is a process of that account (JupyterHub's
SimpleLocalProcessSpawner) and every submission is filed under its name: a trial for one student only. The proxy is
configurable-http-proxy from the npm registry (build/chp, `make classroom`). The same hub settings on Kubernetes are
classroom/z2jh/values.yaml (Zero to JupyterHub).
"""
import os
import pwd
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from jupyterhub.auth import DummyAuthenticator, LocalAuthenticator
from jupyterhub.spawner import LocalProcessSpawner, SimpleLocalProcessSpawner
from traitlets import default

c = get_config()  # noqa: F821  (provided by JupyterHub)

REPO = Path(__file__).resolve().parent.parent
STATE = Path(os.environ.get("CLASSROOM_DIR", REPO / "build" / "classroom")).resolve()
PORT = int(os.environ.get("CLASSROOM_PORT", "8000"))
INSTRUCTOR = "instructor"
STUDENTS = [s.strip() for s in os.environ.get("CLASSROOM_STUDENTS", "student1,student2").split(",") if s.strip()]
COURSE = STATE / "course"           # the instructor's course root (a clone of this repository)
EXCHANGE = STATE / "exchange"       # nbgrader's exchange: release, inbound submissions, feedback
COURSE_ID = "inference-memory"      # as in nbgrader_config.py
if not os.environ.get("CLASSROOM_PASSWORD"):
    sys.exit("CLASSROOM_PASSWORD: not set; allowed: any non-empty password for the class's local users")

c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = PORT
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = PORT + 1
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{PORT + 2}"
c.ConfigurableHTTPProxy.command = [str(REPO / "build" / "chp" / "node_modules" / ".bin" / "configurable-http-proxy")]
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")

AS_ROOT = os.geteuid() == 0
HOMES = STATE / "home"
# The interpreter of the users' servers: this one, or one with the same packages that the students' accounts can run
# (a virtual environment whose Python lives in a private home, e.g. pyenv's, cannot be run by other accounts).
PYTHON = os.environ.get("CLASSROOM_PYTHON", sys.executable)


def _closed_folder(path: str) -> str:
    """The first folder on the way to ``path`` (as written and as resolved) that other accounts cannot enter, or ""."""
    for p in (Path(path).absolute(), Path(os.path.realpath(path))):
        for d in reversed(p.parents):
            if not d.stat().st_mode & stat.S_IXOTH:
                return str(d)
    return ""


def _cannot_serve(python: str) -> str:
    """Why another account cannot start a server with ``python`` ('' when it can): the interpreter may be reachable
    while its packages are not (a virtual environment in a private home adds them from there)."""
    probe = subprocess.run(["runuser", "-u", "nobody", "--", python, "-c", "import jupyterhub.singleuser"],
                           capture_output=True, text=True)
    return "" if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["exit %d" % probe.returncode])[-1]


if AS_ROOT and STUDENTS and (closed := _closed_folder(PYTHON)):
    sys.exit(f"CLASSROOM_PYTHON: the students' accounts cannot run {PYTHON} ({closed} is closed to other accounts); "
             "allowed: an interpreter with this environment's packages outside private folders")
if AS_ROOT and STUDENTS and (why := _cannot_serve(PYTHON)):
    sys.exit(f"CLASSROOM_PYTHON: the students' accounts cannot import jupyterhub.singleuser with {PYTHON} ({why}); "
             "allowed: an interpreter with this environment's packages outside private folders")
HOMES.mkdir(parents=True, exist_ok=True)
HOMES.chmod(0o755)  # students' accounts reach their homes (and the exchange beside them)


class ClassAuthenticator(LocalAuthenticator, DummyAuthenticator):
    """The class's one password (DummyAuthenticator); as root, a system account for each student (LocalAuthenticator,
    made with ``useradd`` when missing). The instructor needs none: their server runs as the hub's account."""

    def system_user_exists(self, user):
        return user.name == INSTRUCTOR or super().system_user_exists(user)


class ClassSpawner(SimpleLocalProcessSpawner):
    """As root, a student's server runs as the student's system account (LocalProcessSpawner: setuid, the account's
    home); the instructor's, and everyone's when the hub is not root, as the hub's account in its own folder."""

    def _own_account(self):
        return AS_ROOT and self.user.name != INSTRUCTOR

    @default("home_dir")
    def _default_home_dir(self):
        return pwd.getpwnam(self.user.name).pw_dir if self._own_account() else super()._default_home_dir()

    def make_preexec_fn(self, name):
        return LocalProcessSpawner.make_preexec_fn(self, name) if self._own_account() else super().make_preexec_fn(name)

    def user_env(self, env):
        return LocalProcessSpawner.user_env(self, env) if self._own_account() else super().user_env(env)


c.JupyterHub.authenticator_class = ClassAuthenticator
c.DummyAuthenticator.password = os.environ["CLASSROOM_PASSWORD"]
c.Authenticator.allowed_users = {INSTRUCTOR, *STUDENTS}
c.Authenticator.admin_users = {INSTRUCTOR}
c.LocalAuthenticator.create_system_users = AS_ROOT
# The student's name is appended; the home sits with the class's other state.
c.LocalAuthenticator.add_user_cmd = ["useradd", "--create-home", "--home-dir", str(HOMES / "USERNAME"),
                                     "--shell", "/bin/bash"]

c.JupyterHub.spawner_class = ClassSpawner
c.SimpleLocalProcessSpawner.home_dir_template = str(HOMES / "{username}")
c.Spawner.default_url = "/lab"
if AS_ROOT:  # the instructor's server runs as root here: Jupyter refuses without this
    c.Spawner.args = ["--allow-root"]
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120

STUDENT_CONFIG = f"""c = get_config()
c.CourseDirectory.course_id = {COURSE_ID!r}
c.Exchange.root = {str(EXCHANGE)!r}
"""


def pre_spawn(spawner):
    """The instructor works in the course root with this interpreter; a student in their home, with nbgrader pointed
    at the exchange."""
    EXCHANGE.mkdir(parents=True, exist_ok=True)
    EXCHANGE.chmod(0o777)
    python = sys.executable if spawner.user.name == INSTRUCTOR else PYTHON
    spawner.cmd = [python, "-m", "jupyterhub.singleuser"]
    env = {"NBGRADER_EXCHANGE": str(EXCHANGE), "PATH": str(Path(python).parent) + os.pathsep +
           os.environ.get("PATH", "")}
    if spawner.user.name == INSTRUCTOR:
        spawner.home_dir = str(COURSE)
        env.update(COURSE_ROOT=str(COURSE), PYTHONPATH=str(COURSE))
    else:
        home = Path(spawner.home_dir)
        home.mkdir(parents=True, exist_ok=True)
        (home / "nbgrader_config.py").write_text(STUDENT_CONFIG)
        if spawner._own_account():
            shutil.chown(home / "nbgrader_config.py", user=spawner.user.name)
    spawner.environment.update(env)


c.Spawner.pre_spawn_hook = pre_spawn
