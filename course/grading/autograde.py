"""Grade a learner's notebook against a lesson contract without running learner code in this process.

``grade(lesson_module, notebook)`` starts ``course.grading.grade_worker``, the grader's process, which starts the learner's
process in a sandbox (bubblewrap; Landlock and resource limits inside), runs the checks itself on stand-ins for the
notebook's definitions and sends each result here as a JSON line (see course/grading/grade_worker.py). The learner's process
never holds the results, the checks or this process's pipes. A check that does not answer in time, or a learner
process that dies, fails that check with a message; the notebook never runs twice, so one submission costs at most
the notebook's limit plus each check's limit (and start-up). The learner's printed output is kept up to
``Limits.output_bytes``. The working tree is fingerprinted before and after: if the learner's process
changed it, every check fails.

Used by the pytest grader (tests/autograder, ``--notebook``) and by nbgrader (``IsolatedExecute`` in
nbgrader_config.py), so both give the same points.
"""
from __future__ import annotations

import gc
import hashlib
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from course.shared.i18n import failure_message, notebook_lang
from course.shared.text import printable
from course.grading import grade_worker
from course.grading.contract import CheckFailed
from course.grading.grade_worker import NotebookError, STARTUP_S, read_cells, view_spec
from course.grading.notebook_spec import all_specs

REPO = Path(__file__).resolve().parents[2]
# Caches inside the hashed folders.
_SKIP_DIRS = {".git", ".venv", "build", "_build", "nbgrader_root", "__pycache__", ".pytest_cache", "node_modules"}
# What a grade depends on, hashed before and after each grading: the grader, the checks, the references, the
# package, the source notebooks and the nbgrader set-up. nbgrader's own working files (submitted/, autograded/,
# feedback/, gradebook.db) are not among them: other gradings running at the same time write there.
GRADING_INPUTS = ("course", "part0_foundations", "part1_capacity", "tests/autograder", "solutions",
                  "nbgrader_config.py", "pyproject.toml")


@dataclass(frozen=True)
class Limits:
    """Wall-clock seconds and bytes allowed to learner code."""

    notebook_s: float = 900.0      # every code cell of the notebook, together
    cell_s: float = 300.0          # one code cell (inside the worker)
    check_s: float = 120.0         # one check
    memory_bytes: int = 8 << 30    # address space of each learner process
    file_bytes: int = 256 << 20    # largest file it may write (in its scratch folder)
    output_bytes: int = 64 << 10   # printed output kept for the report
    sandbox: str = "auto"          # "auto": bubblewrap where it runs; "off": Landlock and limits only
    # The whole grading together (course.grading.grading_group): every learner process and thread, their memory (tmpfs pages
    # included), their scratch folder, and their CPU time (the notebook's limit plus every check's, in CPU seconds).
    group_memory_bytes: int = 4 << 30
    processes: int = 256
    disk_bytes: int = 1 << 30
    cgroup: str = "auto"           # "auto": a cgroup where one can be made; "off": per-process limits and the watchdog


@dataclass
class CheckResult:
    id: str
    name: str
    points: int
    passed: bool
    message: str = ""

    @property
    def earned(self) -> int:
        return self.points if self.passed else 0


@dataclass
class Report:
    lesson: str
    origin: str
    void: str = ""  # why the grade does not count (the grader's files changed), or ""
    results: list[CheckResult] = field(default_factory=list)
    notebook_errors: list[str] = field(default_factory=list)
    output: str = ""
    output_dropped: int = 0
    landlock: int = 0
    sandbox: str = ""  # "bubblewrap", or "fallback: why"
    limits: str = ""   # what bounds the whole grading: "cgroup v1 (memory, processes)", or "no cgroup (why): ..."
    breaches: list[str] = field(default_factory=list)  # limits of the whole grading reached: memory, processes...
    peaks: dict = field(default_factory=dict)  # the most the learner's processes used at once, and who measured it
    unreadable: str = ""  # why the file is not a notebook the grader can read (every check then fails with it)

    def get(self, check_id: str) -> CheckResult:
        return next(r for r in self.results if r.id == check_id)

    @property
    def earned(self) -> int:
        return sum(r.earned for r in self.results)

    @property
    def points(self) -> int:
        return sum(r.points for r in self.results)

    def table(self) -> str:
        """Points per check and the total, one line each."""
        width = max([len(r.id) for r in self.results] + [5])
        lines = [f"{self.lesson}: {self.origin}"]
        lines += [f"  {r.id:<{width}}  {r.earned}/{r.points}" for r in self.results]
        lines.append(f"  {'total':<{width}}  {self.earned}/{self.points}")
        return "\n".join(lines)


def load_lesson(lesson_module: str):
    return importlib.import_module(lesson_module).LESSON


def tree_fingerprint(root: Path = REPO, inputs: tuple[str, ...] = GRADING_INPUTS) -> dict[str, str]:
    """path → content hash of every file grading depends on (``inputs`` under ``root``; caches left out)."""
    out = {}
    for top in inputs:
        top_path = os.path.join(root, top)
        walk = os.walk(top_path) if os.path.isdir(top_path) else [(root, [], [top] if os.path.exists(top_path) else [])]
        for dirpath, dirnames, filenames in walk:
            dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS and not d.endswith(".egg-info")]
            for name in filenames:
                p = os.path.join(dirpath, name)
                try:
                    h = hashlib.blake2b(digest_size=16)
                    with open(p, "rb") as f:
                        for block in iter(lambda: f.read(1 << 20), b""):
                            h.update(block)
                    out[os.path.relpath(p, root)] = h.hexdigest()
                except OSError as exc:
                    out[os.path.relpath(p, root)] = f"unreadable: {exc.errno}"
    return out


def _changed(before: dict, after: dict) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


class _Output(threading.Thread):
    """Drains the learner's stdout/stderr, keeping the first ``keep`` bytes and counting the rest."""

    def __init__(self, fd: int, keep: int):
        super().__init__(daemon=True)  # one reader per worker
        self.fd, self.keep, self.kept, self.dropped = fd, keep, bytearray(), 0

    def run(self):
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            room = self.keep - len(self.kept)
            self.kept += chunk[:max(room, 0)]
            self.dropped += max(len(chunk) - max(room, 0), 0)
        os.close(self.fd)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


class _Lines:
    """JSON lines from the grader's process (never the learner's), each at most ``cap`` bytes, split in linear time."""

    def __init__(self, fd: int, cap: int = 1 << 20):
        self.fd, self.cap, self.buf, self.scanned = fd, cap, bytearray(), 0

    def read(self, deadline: float):
        """The next message, None at the deadline, or {"kind": "eof"}."""
        while True:
            nl = self.buf.find(b"\n", self.scanned)
            if nl >= 0:
                line = bytes(self.buf[:nl])
                del self.buf[:nl + 1]
                self.scanned = 0
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if isinstance(msg, dict):
                    return msg
                continue
            self.scanned = len(self.buf)
            if len(self.buf) > self.cap:
                return {"kind": "eof"}
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return {"kind": "eof"}
            self.buf += chunk


class _Forked:
    """The grader's process as a fork of this one (what ``_kill`` needs of a Popen)."""

    def __init__(self, pid: int):
        self.pid = pid

    def wait(self):
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def _start_worker(job: dict, w: int, out_w: int, workdir: str, env: dict):
    """The grader's process for this notebook. Warm: a fork of this process, which has the interpreter, torch and
    the lesson's checks loaded already (the pytest route and nbgrader grade from one thread); else, when other
    threads run here (a fork would copy their locks in any state), a fresh interpreter (``python -m
    course.grading.grade_worker``). Either runs ``course.grading.grade_worker.run(job)``: the same code, the same sandbox."""
    if threading.active_count() > 1 or not hasattr(os, "fork"):
        proc = subprocess.Popen([sys.executable, "-m", "course.grading.grade_worker"], stdin=subprocess.PIPE,
                                stdout=out_w, stderr=out_w, pass_fds=(w,), cwd=workdir, env=env, start_new_session=True)
        proc.stdin.write((json.dumps(job) + "\n").encode())
        proc.stdin.close()
        return proc

    gc.freeze()  # objects of this process stay as they are in the child (none is collected there, no fd closed twice)
    pid = os.fork()
    if pid:
        gc.unfreeze()
        return _Forked(pid)
    try:  # the child: nothing of this process's but the interpreter, its modules and the two pipes
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        keep = sorted({0, 1, 2, w})
        for lo, hi in zip(keep, keep[1:] + [os.sysconf("SC_OPEN_MAX")]):
            os.closerange(lo + 1, hi)
        os.chdir(workdir)
        os.environ.clear()
        os.environ.update(env)
        tempfile.tempdir = None  # found again from TMPDIR (the worker's folder, where its Landlock lets it write)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(1)  # a fork has none of its parent's OpenMP threads

        grade_worker.run(job)
    except BaseException:  # noqa: BLE001 - the parent reads the missing answers as the grader's failure
        pass
    finally:
        os._exit(0)


def _run(lesson_module, notebook: Path, limits: Limits, workdir: str, report: Report, n_checks: int) -> dict:
    """Start the grader's process (course.grading.grade_worker) and collect its answers. The whole run is bounded: start-up,
    the notebook's limit and each check's limit (with a little slack each), never more."""
    r, w = os.pipe()
    out_r, out_w = os.pipe()
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path, PYTHONDONTWRITEBYTECODE="1", HOME=workdir, TMPDIR=workdir,
               MPLCONFIGDIR=workdir, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")

    job = dict(lesson=lesson_module, notebook=str(notebook), result_fd=w, workdir=workdir, repo=str(REPO),
               view=view_spec(lesson_module), n_checks=n_checks,
               cell_s=limits.cell_s, check_s=limits.check_s, notebook_s=limits.notebook_s,
               memory_bytes=limits.memory_bytes, file_bytes=limits.file_bytes, sandbox=limits.sandbox,
               group_memory_bytes=limits.group_memory_bytes, processes=limits.processes, disk_bytes=limits.disk_bytes,
               cgroup=limits.cgroup)
    proc = _start_worker(job, w, out_w, workdir, env)
    os.close(w)
    os.close(out_w)
    output = _Output(out_r, limits.output_bytes)
    output.start()

    deadline = time.monotonic() + 2 * STARTUP_S + limits.notebook_s + n_checks * (limits.check_s + 15)
    answered, lines, failed = {}, _Lines(r), None
    try:
        while True:
            msg = lines.read(deadline)
            if msg is None or msg.get("kind") in ("eof", "done"):
                if msg is None or (msg.get("kind") == "eof" and len(answered) < n_checks and failed is None):
                    failed = ("the grader's process did not answer in time" if msg is None else
                              "the grader's process stopped before every check was answered")
                break
            kind = msg.get("kind")
            if kind == "grader_error":
                failed = str(msg.get("message", ""))
            elif kind == "sandbox":
                report.sandbox = "bubblewrap" if not msg.get("problem") else f"fallback: {msg['problem']}"
                report.limits = str(msg.get("limits", ""))
            elif kind == "ready":
                report.notebook_errors = [str(e) for e in msg.get("errors", [])]
                report.landlock = int(msg.get("landlock") or 0)
            elif kind == "usage":
                report.breaches = [str(b) for b in msg.get("breaches", [])][:8]
                report.peaks = msg.get("peaks") if isinstance(msg.get("peaks"), dict) else {}
                if msg.get("unsaid"):
                    report.notebook_errors.append(f"while it was graded, {msg['unsaid']}")
            elif kind == "check":
                answered[msg["id"]] = (bool(msg.get("passed")), str(msg.get("message", "")))
    finally:
        _kill(proc)
        os.close(r)
        output.join(timeout=10)
    report.output = output.kept.decode("utf-8", "replace")
    report.output_dropped = output.dropped
    if failed is not None:
        raise GraderError(printable(failed))
    return answered


def grade(lesson_module: str, notebook: str | Path, limits: Limits = Limits()) -> Report:
    """Grade ``notebook`` against the contract ``LESSON`` of the module ``lesson_module`` (a lesson's checks)."""
    lesson = load_lesson(lesson_module)
    report = Report(lesson=lesson.package, origin=str(notebook))
    try:
        read_cells(str(notebook))  # only reads JSON: a malformed file fails here, without starting anything
    except NotebookError as exc:
        report.unreadable = printable(exc)
        report.notebook_errors = [report.unreadable]
        lang = notebook_lang(notebook)
        report.results = [CheckResult(c.id, c.name, c.points, False,
                                      failure_message(lang, c.rule, f"the notebook could not be graded: "
                                                                    f"{report.unreadable}"))
                          for c in lesson.checks]
        return report
    before = tree_fingerprint()
    with tempfile.TemporaryDirectory(prefix="grade-") as workdir:
        answered = _run(lesson_module, Path(notebook).resolve(), limits, workdir, report, len(lesson.checks))
    changed = _changed(before, tree_fingerprint())
    lang = notebook_lang(notebook)  # a Korean release gets its failures in Korean (course/locale/ko/grading.toml)
    if changed:
        report.void = void_message(changed)
        print(f"course.grading.autograde: grade of {notebook} void: {report.void}", file=sys.stderr)
    for c in lesson.checks:
        passed, message = answered.get(c.id, (False, "the grader stopped before this check (the time allowed to "
                                                     "the whole notebook ran out)"))
        if changed:
            passed, message = False, f"not graded: {report.void}"
        elif not passed:
            # Learner text (exception messages) is escaped before the lesson's own words wrap it (course.shared.text).
            message = failure_message(lang, c.rule, printable(message))
        report.results.append(CheckResult(c.id, c.name, c.points, passed, message))
    report.notebook_errors = [printable(e) for e in report.notebook_errors]
    if report.sandbox.startswith("fallback") and report.sandbox not in _SAID:
        _SAID.add(report.sandbox)
        print(f"course.grading.autograde: learner code ran without the bubblewrap sandbox ({report.sandbox[10:]}); "
              "see the instructors' guide for what that leaves open", file=sys.stderr)
    if report.limits.startswith("no cgroup") and report.limits not in _SAID:
        _SAID.add(report.limits)
        print(f"course.grading.autograde: the grading's limits hold without a cgroup: {report.limits}; see the instructors' "
              "guide for what that leaves open", file=sys.stderr)
    return report


def void_message(changed: list[str]) -> str:
    """Why a grade is void, in words that do not blame the learner: the grader's files changed during grading."""
    return (f"the course's grading files changed while this notebook was graded ({', '.join(changed[:5])}); "
            "this says nothing about the work in it: it must be graded again")


class GradeVoid(RuntimeError):
    """A grading that must not count (nbgrader then records no grade for that submission and exits non-zero)."""


class GraderError(GradeVoid):
    """The grader could not grade the notebook (its sandbox did not start, its own code failed): one line naming the
    cause, which is never the notebook's; no grade is recorded."""


_SAID: set = set()  # the fallback is said once per process


def grade_reference(lesson_module: str) -> Report:
    """The reference solution through every check, in this process (it is the course's own code)."""
    lesson = load_lesson(lesson_module)
    report = Report(lesson=lesson.package, origin=" and ".join(lesson.reference))
    for c in lesson.checks:
        try:
            c.fn(lesson.reference_definition(c.name))
            report.results.append(CheckResult(c.id, c.name, c.points, True))
        except CheckFailed as exc:
            report.results.append(CheckResult(c.id, c.name, c.points, False, str(exc)))
    return report


def _lesson_for(assignment: str):
    """The checks module of the lesson whose notebook spec has this nbgrader assignment name, or None."""
    for spec in all_specs():
        if spec.ASSIGNMENT == assignment:
            mod = spec.__name__.rsplit(".", 1)[0] + ".checks"
            try:
                return mod if hasattr(importlib.import_module(mod), "LESSON") else None
            except ImportError:
                return None
    return None


def nbgrader_preprocessor():
    """The nbgrader ``Execute`` replacement (built lazily: nbgrader is only needed when nbgrader runs)."""
    # nbformat, nbgrader and traitlets (seconds to import): only when nbgrader runs, never on the pytest route
    from nbformat.v4 import new_output
    from nbgrader.preprocessors import Execute
    from traitlets import Float, Integer

    class IsolatedExecute(Execute):
        """Grade a notebook of a lesson with a contract through ``course.grading.autograde.grade``: the learner's code runs
        in a separate, limited process, never in a kernel beside the tests. Each test cell gets its check's result:
        nothing (full points) or an error with the check's message (no points). Notebooks of assignments without a
        contract are executed as nbgrader always does."""

        check_timeout = Float(Limits.check_s, help="seconds allowed to one check").tag(config=True)
        notebook_timeout = Float(Limits.notebook_s, help="seconds allowed to the notebook's cells").tag(config=True)
        memory_limit = Integer(Limits.memory_bytes, help="bytes of address space for learner code").tag(config=True)
        group_memory_limit = Integer(Limits.group_memory_bytes,
                                     help="bytes of memory for all of a notebook's processes").tag(config=True)
        processes_limit = Integer(Limits.processes, help="processes and threads a notebook may run at once"
                                  ).tag(config=True)
        disk_limit = Integer(Limits.disk_bytes, help="bytes a notebook may write in its folder").tag(config=True)

        def preprocess(self, nb, resources):
            lesson_module = _lesson_for(resources.get("nbgrader", {}).get("assignment", ""))
            if lesson_module is None:
                return super().preprocess(nb, resources)
            # nbformat: imported by nbgrader already, named here only when a notebook is graded
            import nbformat

            limits = Limits(check_s=self.check_timeout, notebook_s=self.notebook_timeout,
                            memory_bytes=self.memory_limit, group_memory_bytes=self.group_memory_limit,
                            processes=self.processes_limit, disk_bytes=self.disk_limit)
            student = resources.get("nbgrader", {}).get("student", "?")
            with tempfile.TemporaryDirectory(prefix="nbgrader-") as tmp:
                path = Path(tmp) / "submission.ipynb"
                nbformat.write(nb, str(path))
                try:
                    report = grade(lesson_module, path, limits)
                except GraderError as exc:
                    self.log.error("grader error for %s, not graded (nothing about the notebook): %s", student, exc)
                    raise
            if report.void:
                self.log.error("grade void for %s: %s", resources.get("nbgrader", {}).get("student", "?"), report.void)
                raise GradeVoid(report.void)
            results = {r.id: r for r in report.results}
            for cell in nb.cells:
                meta = cell.get("metadata", {}).get("nbgrader", {})
                if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
                    continue
                r = results.get(meta.get("grade_id"))
                if r is None:
                    cell.outputs = [new_output("error", ename="CheckMissing", evalue="no such check in the lesson",
                                               traceback=["no such check in the lesson contract"])]
                elif r.passed:
                    cell.outputs = [new_output("stream", name="stdout", text=f"passed: {r.id} ({r.points} points)\n")]
                else:
                    message = printable(r.message, newlines=True)  # the feedback page shows text, never controls
                    cell.outputs = [new_output("error", ename="CheckFailed", evalue=message,
                                               traceback=[f"CheckFailed: {message}"])]
            summary = report.table()
            if report.notebook_errors:
                summary += "\nerrors while running the notebook: " + printable(" | ".join(report.notebook_errors))
            self.log.info("%s", summary)
            return nb, resources

    return IsolatedExecute
