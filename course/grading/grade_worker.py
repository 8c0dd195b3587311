"""The grader's process for one notebook: ``python -m course.grading.grade_worker`` (started by ``course.grading.autograde``, never
by hand). Learner code never runs here.

It starts the learner's process (``course.grading.learner``) in a sandbox (bubblewrap: its own user, PID, network and IPC
namespaces, a read-only view of what a notebook may read, a private scratch folder; Landlock and resource limits
inside), then runs each of the lesson's checks *here*, handing them stand-ins for the notebook's definitions
(``course.grading.proxy``): every call crosses as plain data and the answers are judged here. Checks that look at the
learner's code read the notebook's text here. Results go to the parent as JSON lines on a pipe the learner's process
never has. A check that does not answer in time, or a learner process that dies, costs that check only: the next check
gets a fresh fork of the notebook's state, never a second run of the notebook.
"""
from __future__ import annotations

import ast
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback

from course.shared.text import printable, text_only
from course.grading import contract, grading_group, proxy, sandbox, wire

LEARNER = "__learner__"
CELL_PREFIX = "<notebook cell "
STARTUP_S = 120.0  # the learner's process imports torch and the lesson's modules before the notebook's first cell


class NotebookError(Exception):
    """The file is not a notebook this grader can read; the message says why."""


def read_cells(path: str, max_bytes: int = 50 << 20) -> list[tuple[int, str]]:
    """(index, source) of the code cells to run: every code cell except the graded test cells."""
    try:
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as exc:
        raise NotebookError(f"cannot read the notebook: {exc}") from None
    if len(raw) > max_bytes:
        raise NotebookError(f"the notebook is larger than {max_bytes >> 20} MB")
    try:
        nb = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise NotebookError(f"the notebook is not valid JSON: {exc}") from None
    except (RecursionError, MemoryError):
        raise NotebookError("the notebook is not a notebook: its JSON is nested too deep to read") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise NotebookError("the notebook has no list of cells (is it an .ipynb file?)")
    out = []
    for i, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict):
            raise NotebookError(f"cell {i} is not a JSON object")
        if cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata")
        nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
        nbg = nbg if isinstance(nbg, dict) else {}
        if nbg.get("grade") and not nbg.get("solution"):
            continue  # a graded test cell: the checks run here instead, from the lesson contract
        src = cell.get("source", "")
        if isinstance(src, list) and all(isinstance(s, str) for s in src):
            src = "".join(src)
        if not isinstance(src, str):
            raise NotebookError(f"cell {i}: its source is neither text nor a list of lines")
        # IPython magics and shell escapes are not Python.
        src = "\n".join(line for line in src.splitlines() if not line.lstrip().startswith(("%", "!")))
        out.append((i, text_only(src)))  # a lone surrogate (half an emoji) is read as U+FFFD
    return out


def reference_imports(sources: list[tuple[int, str]], lesson) -> dict[str, str]:
    """Graded names a cell imports from the lesson's package: name → "cell N: from M import X"."""
    found = {}
    graded = set(lesson.names())
    top = lesson.package.split(".")[0]
    for i, src in sources:
        if top not in src:
            continue  # an import of the package names it (a name built at run time is caught by is_reference)
        try:
            tree = ast.parse(src)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # a cell Python cannot parse imports nothing (it fails in the notebook, where it is reported)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(lesson.package):
                for a in node.names:
                    if a.name in graded or a.name == "*":
                        for n in (graded if a.name == "*" else [a.name]):
                            found.setdefault(n, f"cell {i}: from {node.module} import {a.name}")
    return found


def is_reference(defn, lesson) -> str | None:
    """Why the learner's definition is (or inherits) one of the lesson's package, from what its process reports about
    it (a notebook can only hide its own copy this way, and the sandbox does not show the reference)."""
    meta = object.__getattribute__(defn, "_meta") if getattr(type(defn), "_wire_handle", False) else {}
    mod = meta.get("module")
    if isinstance(mod, str) and mod.startswith(lesson.package):
        return f"it is {mod}"
    for origin in meta.get("origins", [])[:16]:
        if isinstance(origin, str) and origin.startswith(lesson.package):
            return f"it inherits {origin}"
    return None


def code_objects(obj) -> list:
    """The code objects of a function, or of every function, property and method of a class."""
    if isinstance(obj, type):
        out = []
        for v in vars(obj).values():
            if isinstance(v, (staticmethod, classmethod)):
                v = v.__func__
            if isinstance(v, property):
                out += [f.__code__ for f in (v.fget, v.fset, v.fdel) if f is not None]
            elif hasattr(v, "__code__"):
                out.append(v.__code__)
        return out
    return [obj.__code__] if hasattr(obj, "__code__") else []


def _describe(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


def view_spec(lesson_module: str) -> dict:
    """What the sandbox's view of the course depends on: the lesson's checks module, reference modules and the helpers
    of its checks module given to notebooks (plain data: the grader's parent has the lesson imported already)."""
    lesson = importlib.import_module(lesson_module).LESSON
    return {"checks": lesson_module, "reference": list(lesson.reference), "given": list(lesson.given)}


def build_view(spec: dict, repo: str, view_dir: str) -> dict[str, str]:
    """Files the sandbox shows instead of the repository's: this lesson's reference modules with their solutions
    replaced by stubs, and every lesson's checks module reduced to its imports and the helpers given to notebooks."""
    os.makedirs(view_dir, exist_ok=True)
    out = {}

    def put(rel, text):
        dest = os.path.join(view_dir, rel.replace("/", "__"))
        with open(dest, "w", encoding="utf-8") as f:
            f.write(text)
        out[rel] = dest

    for mod in spec["reference"]:
        rel = mod.replace(".", "/") + ".py"
        with open(os.path.join(repo, rel), encoding="utf-8") as f:
            put(rel, sandbox.stub_module(f.read()))
    own = spec["checks"].replace(".", "/") + ".py"
    for top in sandbox.READABLE:
        for dirpath, dirnames, filenames in os.walk(os.path.join(repo, top)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            if "checks.py" in filenames:
                rel = os.path.relpath(os.path.join(dirpath, "checks.py"), repo)
                with open(os.path.join(repo, rel), encoding="utf-8") as f:
                    put(rel, sandbox.stub_checks(f.read(), tuple(spec["given"]) if rel == own else ()))
    return out


class GraderError(Exception):
    """The grader could not grade (its sandbox did not start, its own code failed): nothing about the notebook."""


class LearnerProcess:
    """The sandboxed learner's process seen from here: a control pipe (ready, forked, exited) and a request pipe."""

    def __init__(self, job: dict, repo: str, scratch: str, view_files: dict[str, str], group=None,
                 notebook: str | None = None):
        self.wire = wire
        rpc_to, rpc_in = os.pipe()      # requests to the learner / read by it
        rpc_out, rpc_from = os.pipe()   # answers from the learner / written by it
        ctl_to, ctl_in = os.pipe()
        ctl_out, ctl_from = os.pipe()
        theirs = [rpc_to, rpc_from, ctl_to, ctl_from]
        self.rpc_w, self.rpc_r, self.ctl_w, self.ctl_r = rpc_in, rpc_out, ctl_in, ctl_out
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": repo, "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONNOUSERSITE": "1", "PYTHONUNBUFFERED": "1", "HOME": scratch, "TMPDIR": scratch,
               "MPLCONFIGDIR": scratch, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "LANG": "C.UTF-8"}
        python = os.path.join(os.path.realpath(sys.prefix), "bin", os.path.basename(sys.executable))
        cmd = [python if os.path.exists(python) else sys.executable, "-m", "course.grading.learner", *map(str, theirs)]
        self.problem = None if job.get("sandbox", "auto") == "auto" else "bubblewrap was switched off"
        self.problem = self.problem or sandbox.bwrap_problem()
        # With bubblewrap the scratch folder is a tmpfs of the grading's disk size (the notebook shown in it,
        # read-only); without, the host folder (each file bounded by RLIMIT_FSIZE, the total by the watchdog).
        self.tmpfs_scratch = self.problem is None and bool(job.get("disk_bytes"))
        if self.problem is None:
            files = {os.path.join(scratch, "notebook.ipynb"): notebook} if self.tmpfs_scratch and notebook else {}
            cmd = sandbox.bwrap_argv(repo, view_files, scratch, theirs,
                                     disk_bytes=job.get("disk_bytes") if self.tmpfs_scratch else None,
                                     files=files) + ["--"] + cmd
        self.group = group
        # bubblewrap's own messages (it could not start) are kept until the learner's process says it started.
        err_r, err_w = os.pipe()
        self.startup_err = _StartupErr(err_r)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=err_w, pass_fds=theirs, cwd=scratch,
                                     env=env, start_new_session=True,
                                     preexec_fn=group.join if group is not None else None)
        os.close(err_w)
        self.startup_err.start()
        for fd in theirs:
            os.close(fd)
        self.forked = False

    def handshake(self, deadline_s: float) -> None:
        """Wait for the learner's process to say it started (the sandbox is up, the interpreter and its libraries
        are there); GraderError naming the cause otherwise. No learner code has run before this answer."""
        msg = self.ctl_read(time.monotonic() + deadline_s)
        if msg and msg.get("kind") == "started" and not msg.get("problem"):
            return
        if msg and msg.get("kind") == "started":
            raise GraderError(f"the learner's sandbox is incomplete: {str(msg['problem'])[:300]}")
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        said = self.startup_err.first_lines()
        what = "bubblewrap" if self.problem is None else "the learner's process"
        raise GraderError(f"the learner's sandbox could not start ({what} "
                          + (f"exited with code {code}" if code is not None else
                             f"did not answer within {deadline_s:g} s")
                          + (f": {said}" if said else "") + ")")

    def ctl(self, **msg):
        self.wire.write_frame(self.ctl_w, proxy.Channel(-1, self.ctl_w, trusted=True)._frame(msg, {}))

    def ctl_read(self, deadline: float) -> dict | None:
        """The next control message, or None (none before the deadline, the process gone, or not a message)."""
        try:
            msg, _ = self.wire.read_frame(self.ctl_r, deadline)
        except (self.wire.WireError, self.wire.WireTimeout, self.wire.WireClosed):
            return None
        return msg if isinstance(msg, dict) else None

    def fork(self):
        """A fresh server of the notebook's state; its channel, or None when the learner's process does not answer."""
        try:
            self.ctl(op="fork")
        except OSError:
            return None
        msg = self.ctl_read(time.monotonic() + 30)
        if not msg or msg.get("kind") != "forked":
            return None
        self.forked = True
        return proxy.Channel(self.rpc_r, self.rpc_w, trusted=True, watch=self.ctl_r)

    def end_fork(self, deadline_s: float = 10.0) -> int | None:
        """Kill the current server (if alive); its exit code as its parent saw it; its unread output dropped."""
        code = None
        try:
            self.ctl(op="kill")
        except OSError:
            pass
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            msg = self.ctl_read(end)
            if msg is None:
                break
            if msg.get("kind") == "exited":
                code = msg.get("code") if type(msg.get("code")) is int else None
                break
        self.forked = False
        os.set_blocking(self.rpc_r, False)
        try:
            while os.read(self.rpc_r, 1 << 20):
                pass
        except (BlockingIOError, OSError):
            pass
        os.set_blocking(self.rpc_r, True)
        return code

    def exit_code_of_dead_fork(self) -> int | None:
        msg = self.ctl_read(time.monotonic() + 5)
        self.forked = False
        return msg.get("code") if msg and msg.get("kind") == "exited" and type(msg.get("code")) is int else None

    def close(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        sandbox.kill_descendants()
        group, self.group = self.group, None
        if group is not None:
            group.remove()
        fds, self.rpc_w, self.rpc_r, self.ctl_w, self.ctl_r = (self.rpc_w, self.rpc_r, self.ctl_w, self.ctl_r), \
            -1, -1, -1, -1
        for fd in fds:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass


class _StartupErr(threading.Thread):
    """Copies the learner's stderr to this process's (the notebook's printed output), keeping the first lines:
    before the handshake they can only be the sandbox's own (bubblewrap's "execvp ...: No such file")."""

    def __init__(self, fd: int):
        super().__init__(daemon=True)
        self.fd, self.head = fd, bytearray()

    def run(self):
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            if len(self.head) < 2048:
                self.head += chunk[:2048 - len(self.head)]
            try:
                os.write(2, chunk)
            except OSError:
                pass
        os.close(self.fd)

    def first_lines(self) -> str:
        time.sleep(0.1)  # what the process wrote as it exited

        lines = [ln.strip() for ln in bytes(self.head).decode("utf-8", "replace").splitlines() if ln.strip()]
        return printable(" | ".join(lines[:3]))[:300]


def exit_words(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        return f"was killed by {name} (the memory limit, or a crash)" if name in ("SIGKILL", "SIGSEGV", "SIGABRT") \
            else f"was killed by {name}"
    return f"exited with code {code} (os._exit or sys.exit in your code?)"


PRELOAD = ("numpy", "torch")  # imported by the learner's process before the handshake (every lesson uses them)


def main() -> None:
    """Start the learner's process, wait for its notebook, run every check here; report each as a JSON line. A
    failure of the grader's own (its sandbox did not start, its code failed) is one ``grader_error`` line instead."""
    run(json.loads(sys.stdin.readline()))


def run(job: dict) -> None:
    """``main``'s work for one job (also called in a fork of the grader's parent: course.grading.autograde)."""
    out = os.fdopen(job["result_fd"], "w", buffering=1)

    def send(**msg):
        out.write(json.dumps(msg) + "\n")
        out.flush()

    try:
        _main(job, send)
    except GraderError as exc:
        send(kind="grader_error", message=str(exc))
    except BaseException as exc:  # noqa: BLE001 - the grader's own failure, never the learner's
        send(kind="grader_error", message=f"the grader failed: {_describe(exc)}")
    send(kind="done")


def _main(job: dict, send) -> None:
    sandbox.become_subreaper()
    repo = job["repo"]
    scratch = os.path.join(job["workdir"], "scratch")
    os.makedirs(scratch, exist_ok=True)
    shutil.copyfile(job["notebook"], os.path.join(scratch, "notebook.ipynb"))
    view = build_view(job["view"], repo, os.path.join(job["workdir"], "view"))
    budget = grading_group.Budget(memory_bytes=job["group_memory_bytes"], processes=job["processes"],
                                  cpu_s=job["notebook_s"] + job["check_s"] * job["n_checks"],
                                  disk_bytes=job["disk_bytes"])
    try:
        if job.get("cgroup", "auto") != "auto":
            raise grading_group.CgroupError("switched off")
        group = grading_group.GradingGroup.create(budget.memory_bytes, budget.processes)
        limits = group.mechanisms
    except (grading_group.CgroupError, OSError) as exc:
        group, limits = None, f"no cgroup ({exc}): per-process limits and the grader's watchdog"
    try:
        learner = LearnerProcess(job, repo, scratch, view, group, job["notebook"])  # it imports and runs the notebook
    except subprocess.SubprocessError as exc:  # the group was made, but no process may join it (a delegation rule)
        if group is None:
            raise
        group.remove()
        group, limits = None, (f"no cgroup (a process cannot join it: {exc}): per-process limits and the grader's "
                               "watchdog")
        learner = LearnerProcess(job, repo, scratch, view, None, job["notebook"])
    except BaseException:
        if group is not None:
            group.remove()  # no directory of the grading's is left behind
        raise
    nproc = None if group is not None and "pids" in group.dirs else budget.processes + _user_tasks()
    try:
        send(kind="sandbox", problem=learner.problem, limits=limits)
        lesson = importlib.import_module(job["lesson"]).LESSON
        try:
            learner.ctl(notebook=os.path.join(scratch, "notebook.ipynb"), scratch=scratch, cell_s=job["cell_s"],
                        memory_bytes=job["memory_bytes"], file_bytes=job["file_bytes"], cpu_s=budget.cpu_s,
                        nproc=nproc, preload=list(PRELOAD), forbids=[d.key for d in lesson.forbids])
        except OSError:
            pass  # the process is gone already: the handshake below says why
        # The checks' own imports (torch, transformers...) load here while the learner's process starts.
        for c in lesson.checks:
            importlib.import_module(c.fn.__module__)
        learner.handshake(STARTUP_S)
        watchdog = grading_group.Watchdog(budget, learner.proc.pid, group, scratch, learner.tmpfs_scratch,
                                          kill=lambda: _kill_sandbox(learner)).start()
        try:
            imported = reference_imports(read_cells(job["notebook"]), lesson)
            said = _grade(job, lesson, imported, scratch, learner, send, contract, proxy, watchdog)
            send(kind="usage", breaches=watchdog.breaches(), peaks=watchdog.peaks(), unsaid=said.new())
        finally:
            watchdog.stop(then=learner.close)
    finally:
        learner.close()


def _user_tasks() -> int:
    """Processes and threads of this user now (RLIMIT_NPROC counts them all, not only the sandbox's)."""
    uid, n = os.getuid(), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    n += len(os.listdir(f"/proc/{entry}/task"))
            except OSError:
                pass
    return n


def _kill_sandbox(learner) -> None:
    """Every process of the learner's sandbox, now (a limit of the whole grading was reached)."""
    if learner.group is not None:
        learner.group.kill()
    try:
        os.killpg(learner.proc.pid, signal.SIGKILL)
    except OSError:
        pass
    sandbox.kill_descendants()


class _Breaches:
    """The limits of the whole grading reached since the last look, in words for the learner's feedback."""

    def __init__(self, watchdog):
        self.watchdog, self.said, self.fresh = watchdog, set(), []

    def new(self) -> str:
        if self.watchdog is None:
            return ""
        try:
            self.watchdog.poll()  # now, not up to a period ago: the notebook may have just filled its folder
        except Exception:  # noqa: BLE001 - a process that vanished mid-read
            pass
        self.fresh = [b for b in self.watchdog.breaches() if b not in self.said]
        self.said |= set(self.fresh)
        return "; ".join(self.watchdog.describe(b) for b in self.fresh)

    def unsay(self):
        """The last ones found were not shown to the learner after all (a passed check's message is not shown)."""
        self.said -= set(self.fresh)


def _grade(job, lesson, imported, scratch, learner, send, grading, proxy, watchdog=None) -> "_Breaches":
    # This process runs the checks on the learner's answers and the reference code the learner's side may call:
    # it too may write only in its own folder and open no TCP connection (it may still kill its sandbox).
    landlock_here = sandbox.confine_writes([job["workdir"], "/dev/null"], scope_signals=False)
    breaches = _Breaches(watchdog)
    ready = learner.ctl_read(time.monotonic() + STARTUP_S + job["notebook_s"])
    if not ready or ready.get("kind") != "ready":
        try:
            code = learner.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            code = None
        why = (f"the notebook's cells did not finish within {job['notebook_s']:g} s" if code is None else
               f"your notebook's process {exit_words(code)} before its cells finished")
        said = breaches.new()
        why = f"{why} — {said}" if said else why
        for c in lesson.checks:
            send(kind="check", id=c.id, passed=False, message=why)
        return breaches
    errors = [str(e)[:1000] for e in ready.get("errors", [])[:20]] if isinstance(ready.get("errors"), list) else []
    said = breaches.new()
    if said:
        errors.append(f"while the notebook ran, {said}")
    send(kind="ready", errors=errors, landlock=ready.get("landlock") if type(ready.get("landlock")) is int else 0,
         landlock_grader=landlock_here)
    ch = None
    for c in lesson.checks:
        send(kind="start", id=c.id)
        if c.name in imported:
            send(kind="check", id=c.id, passed=False, message=(
                f"`{c.name}` is the course's reference implementation ({imported[c.name]}), not yours: write your own"))
            continue
        if ch is None:
            ch = learner.fork()
        if ch is None:
            said = breaches.new()
            send(kind="check", id=c.id, passed=False, message="your notebook's process stopped answering"
                                                              + (f" — {said}" if said else ""))
            continue
        passed, message = _run_check(c, ch, job, lesson, errors, grading, proxy)
        if ch.broken:
            code = learner.exit_code_of_dead_fork() if ch.broken == "closed" else learner.end_fork()
            if ch.broken == "closed":
                passed, message = False, f"your notebook's process {exit_words(code)} during this check"
            elif ch.broken.startswith("malformed"):
                passed, message = False, f"your notebook's process sent what the grader cannot read ({ch.broken})"
            elif not message or ch.broken == "timeout":
                passed, message = False, (f"the check did not finish within {job['check_s']:g} s (an endless loop, or "
                                          "a loop that catches every exception?)")
            ch = None
        said = breaches.new()
        if said and not passed:
            message = f"{message} — {said}"
        elif said:
            breaches.unsay()  # said at the end instead
        send(kind="check", id=c.id, passed=passed, message=message[:4000])
    return breaches


def _run_check(c, ch, job, lesson, errors, grading, proxy) -> tuple[bool, str]:
    ch.deadline = time.monotonic() + job["check_s"]
    # Reference code the learner's side may reach only through what the check hands over: the graded definitions
    # the check does not give it on purpose.
    ch.forbidden = {code: n for n in lesson.names() if n not in c.allows
                    for code in code_objects(lesson.reference_definition(n))}
    ch.hits = []
    passed, message = _run(c, ch, job, lesson, errors, grading, proxy)
    if ch.hits:
        return False, (f"`{c.name}` calls the course's reference implementation ({ch.hits[0]} from "
                       f"{lesson.package}), not yours: write your own")
    return passed, message


def _run(c, ch, job, lesson, errors, grading, proxy) -> tuple[bool, str]:
    try:
        try:
            defn = ch.request("lookup", None, c.name)
        except NameError:
            hint = ("; errors while running the notebook: " + " | ".join(errors[:5])) if errors else ""
            return False, f"`{c.name}` is not defined in your notebook{hint}"
        why = is_reference(defn, lesson)
        if why:
            return False, f"`{c.name}` is the course's reference implementation ({why}), not yours: write your own"
        with grading.time_limit(job["check_s"], f"the check {c.id}"):
            c.fn(defn)
        return True, ""
    except grading.CheckFailed as exc:
        return False, str(exc)
    except proxy.ChannelBroken:
        return False, ""
    except grading.TimedOut:
        # The alarm can fire just after the check's block ended, on entering the limit's __exit__, where no
        # handler of the limit can catch it: the check took its whole limit, so it is a time-out, never a crash
        # of this process (which would leave every later check without an answer).
        ch.broken = ch.broken or "timeout"
        return False, ""
    except Exception as exc:  # noqa: BLE001 - a check stopped by an odd answer: its message, never a crash
        return False, f"the check stopped: {_describe(exc)}"


if __name__ == "__main__":
    main()
