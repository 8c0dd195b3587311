"""JupyterHub for a class on one machine (``make classroom``): 127.0.0.1 only, a few local users, nbgrader's exchange.

Users: ``instructor`` (admin; their server opens the course root, where the formgrader and `nbgrader` run) and
the students in ``CLASSROOM_STUDENTS`` (comma-separated; default student1,student2), all with the password in
``CLASSROOM_PASSWORD`` (required: nothing listens without one). Every user's server is a process of the account
that runs the hub (JupyterHub's SimpleLocalProcessSpawner), each with its own home under ``CLASSROOM_DIR``
(default build/classroom); the proxy is configurable-http-proxy from the npm registry (build/chp, `make classroom`).
The same hub settings on Kubernetes are classroom/z2jh-values.yaml (Zero to JupyterHub).
"""
import os
import sys
from pathlib import Path

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

c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = os.environ["CLASSROOM_PASSWORD"]
c.Authenticator.allowed_users = {INSTRUCTOR, *STUDENTS}
c.Authenticator.admin_users = {INSTRUCTOR}

c.JupyterHub.spawner_class = "simple"  # each user's server: a local process of this account, in its own home
c.SimpleLocalProcessSpawner.home_dir_template = str(STATE / "home" / "{username}")
c.Spawner.cmd = [sys.executable, "-m", "jupyterhub.singleuser"]
c.Spawner.default_url = "/lab"
if os.geteuid() == 0:  # a container or CI machine where everything runs as root: Jupyter refuses without this
    c.Spawner.args = ["--allow-root"]
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120

STUDENT_CONFIG = f"""c = get_config()
c.CourseDirectory.course_id = {COURSE_ID!r}
c.Exchange.root = {str(EXCHANGE)!r}
"""


def pre_spawn(spawner):
    """The instructor works in the course root; a student in their home, with nbgrader pointed at the exchange."""
    EXCHANGE.mkdir(parents=True, exist_ok=True)
    EXCHANGE.chmod(0o777)
    env = {"NBGRADER_EXCHANGE": str(EXCHANGE), "PATH": str(Path(sys.executable).parent) + os.pathsep +
           os.environ.get("PATH", "")}
    if spawner.user.name == INSTRUCTOR:
        spawner.home_dir = str(COURSE)
        env.update(COURSE_ROOT=str(COURSE), PYTHONPATH=str(COURSE))
    else:
        home = Path(spawner.home_dir)
        home.mkdir(parents=True, exist_ok=True)
        (home / "nbgrader_config.py").write_text(STUDENT_CONFIG)
    spawner.environment.update(env)


c.Spawner.pre_spawn_hook = pre_spawn
