"""Grade a learner's notebook against a lesson contract without running learner code in this process.

``grade(lesson_module, notebook)`` starts ``course.grade_worker`` in a fresh process, which imports and seals the
grader, then forks a child (its own session, memory and file-size limits, writes confined to a scratch folder) that
runs the notebook and the checks and sends each result back as data. This process enforces the wall-clock limits:
the notebook's cells together, and each check. A check that does not answer in time, or a child that dies
(``os._exit``, a crash, the memory limit), fails that check with a message; a new child then runs the notebook again
for the checks left. The learner's printed output is
kept up to ``Limits.output_bytes``. The working tree is fingerprinted before and after: if the learner's process
changed it, every check fails.

Used by the pytest grader (tests/autograder, ``--notebook``) and by nbgrader (``IsolatedExecute`` in
nbgrader_config.py), so both give the same points.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import secrets
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from course.i18n import failure_message, notebook_lang

REPO = Path(__file__).resolve().parent.parent
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
    memory_bytes: int = 8 << 30    # address space of the learner's process
    file_bytes: int = 256 << 20    # largest file it may write (in its scratch folder)
    output_bytes: int = 64 << 10   # printed output kept for the report


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


def _exit_words(code: int | None) -> str:
    if code is None:
        return "was stopped"
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        return f"was killed by {name} (the memory limit, or a crash)" if name in ("SIGKILL", "SIGSEGV", "SIGABRT") \
            else f"was killed by {name}"
    return f"exited with code {code} (os._exit or sys.exit in your code?)"


class _Worker:
    """The zygote (course.grade_worker) and the children it forks, seen from this side: requests go to its stdin,
    results come back as token-tagged JSON lines on a pipe, the learner's output on another."""

    def __init__(self, lesson_module, notebook, limits: Limits, workdir: str, report: Report):
        self.limits, self.report = limits, report
        self.r, w = os.pipe()
        out_r, out_w = os.pipe()
        self.token = secrets.token_hex(16)
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        env = dict(os.environ, PYTHONPATH=path, PYTHONDONTWRITEBYTECODE="1", HOME=workdir, TMPDIR=workdir,
                   MPLCONFIGDIR=workdir, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([sys.executable, "-m", "course.grade_worker"], stdin=subprocess.PIPE,
                                     stdout=out_w, stderr=out_w, pass_fds=(w,), cwd=workdir, env=env,
                                     start_new_session=True)
        os.close(w)
        os.close(out_w)
        self.output = _Output(out_r, limits.output_bytes)
        self.output.start()
        job = dict(lesson=lesson_module, notebook=str(notebook), result_fd=w, token=self.token, workdir=workdir,
                   cell_s=limits.cell_s, check_s=limits.check_s, memory_bytes=limits.memory_bytes,
                   file_bytes=limits.file_bytes)
        self._write(job)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.r, selectors.EVENT_READ)
        self.buf = b""
        self.child = None
        self.deadline = 0.0

    def _write(self, obj):
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def messages(self):
        """Yield messages until ``self.deadline`` (then None, and go on) or until the zygote is gone (then one EOF
        dict). The deadline moves as the run goes from the notebook to each check."""
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if isinstance(msg, dict) and msg.get("token") == self.token:
                    yield msg  # anything else is learner code writing to the pipe
            left = self.deadline - time.monotonic()
            if left <= 0 or not self.sel.select(timeout=left):
                yield None
                continue
            chunk = os.read(self.r, 1 << 16)
            if not chunk:
                yield {"kind": "eof"}
                return
            self.buf += chunk

    def kill_child(self):
        if self.child:
            try:
                os.killpg(self.child, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def run(self, ids: list[str]) -> dict[str, tuple[bool, str]]:
        """One child: the notebook, then the checks ``ids`` in order, until one does not answer in time or the
        child dies. Returns the results it got (a timed-out or killed check included)."""
        limits, results = self.limits, {}
        self._write({"ids": ids})
        phase, current = "notebook", None
        self.deadline = time.monotonic() + limits.notebook_s + 120  # the zygote's imports come first, the first time
        code, killed = None, False
        for msg in self.messages():
            if msg is None:
                if killed:  # the zygote did not report its child gone: give up on it
                    break
                killed = True
                self.kill_child()
                if phase == "notebook":
                    msg_text = f"the notebook's cells did not finish within {limits.notebook_s:g} s"
                    results.update({i: (False, msg_text) for i in ids})
                else:
                    results[current] = (False, f"the check did not finish within {limits.check_s:g} s (an endless "
                                               "loop, or a loop that catches every exception?)")
                self.deadline = time.monotonic() + 30  # wait for the zygote to report the child gone
                continue
            kind = msg.get("kind")
            if kind == "eof":
                break
            if kind == "forked":
                self.child = int(msg["pid"])
                self.deadline = time.monotonic() + limits.notebook_s + 5
            elif kind == "confined":
                self.report.landlock = int(msg.get("landlock", 0))
            elif kind == "ready":
                self.report.notebook_errors = [str(e) for e in msg.get("errors", [])]
                phase = "checks"
            elif kind == "start":
                current = msg.get("id")
                self.deadline = time.monotonic() + limits.check_s + 2
            elif kind == "check":
                results[msg["id"]] = (bool(msg.get("passed")), str(msg.get("message", "")))
                current = None
            elif kind == "exited":
                code = int(msg.get("code", 0))
                break
        why = f"your notebook's process {_exit_words(code)}"
        if phase == "notebook":
            for i in ids:
                results.setdefault(i, (False, f"{why} before its cells finished"))
        elif current is not None and current not in results:
            results[current] = (False, f"{why} during this check")
        self.child = None
        return results

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        _kill(self.proc)
        self.sel.close()
        os.close(self.r)
        self.output.join(timeout=10)


def grade(lesson_module: str, notebook: str | Path, limits: Limits = Limits()) -> Report:
    """Grade ``notebook`` against the contract ``LESSON`` of the module ``lesson_module`` (a lesson's checks)."""
    from course.grade_worker import NotebookError, read_cells

    lesson = load_lesson(lesson_module)
    report = Report(lesson=lesson.package, origin=str(notebook))
    try:
        read_cells(str(notebook))  # only reads JSON: a malformed file fails here, without starting anything
    except NotebookError as exc:
        report.notebook_errors = [str(exc)]
        lang = notebook_lang(notebook)
        report.results = [CheckResult(c.id, c.name, c.points, False,
                                      failure_message(lang, c.rule, f"the notebook could not be graded: {exc}"))
                          for c in lesson.checks]
        return report
    before = tree_fingerprint()
    answered: dict[str, tuple[bool, str]] = {}
    pending = lesson.ids()
    with tempfile.TemporaryDirectory(prefix="grade-") as workdir:
        worker = _Worker(lesson_module, Path(notebook).resolve(), limits, workdir, report)
        try:
            while pending:
                answered.update(worker.run(pending))
                left = [i for i in pending if i not in answered]
                if len(left) == len(pending):  # no progress: the zygote is gone
                    answered.update({i: (False, "the grader's process stopped before this check") for i in left})
                    break
                pending = left
        finally:
            worker.close()
    changed = _changed(before, tree_fingerprint())
    lang = notebook_lang(notebook)  # a Korean release gets its failures in Korean (course/locale/ko/grading.toml)
    if changed:
        report.void = void_message(changed)
        print(f"course.autograde: grade of {notebook} void: {report.void}", file=sys.stderr)
    for c in lesson.checks:
        passed, message = answered.get(c.id, (False, "not run"))
        if changed:
            passed, message = False, f"not graded: {report.void}"
        elif not passed:
            message = failure_message(lang, c.rule, message)
        report.results.append(CheckResult(c.id, c.name, c.points, passed, message))
    report.output = worker.output.kept.decode("utf-8", "replace")
    report.output_dropped = worker.output.dropped
    return report


def void_message(changed: list[str]) -> str:
    """Why a grade is void, in words that do not blame the learner: the grader's files changed during grading."""
    return (f"the course's grading files changed while this notebook was graded ({', '.join(changed[:5])}); "
            "this says nothing about the work in it: it must be graded again")


class GradeVoid(RuntimeError):
    """A grading that must not count (nbgrader then records no grade for that submission and exits non-zero)."""


def grade_reference(lesson_module: str) -> Report:
    """The reference solution through every check, in this process (it is the course's own code)."""
    from course.grading import CheckFailed

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
    from course.notebook_spec import all_specs

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
    from nbformat.v4 import new_output
    from nbgrader.preprocessors import Execute
    from traitlets import Float, Integer

    class IsolatedExecute(Execute):
        """Grade a notebook of a lesson with a contract through ``course.autograde.grade``: the learner's code runs
        in a separate, limited process, never in a kernel beside the tests. Each test cell gets its check's result:
        nothing (full points) or an error with the check's message (no points). Notebooks of assignments without a
        contract are executed as nbgrader always does."""

        check_timeout = Float(Limits.check_s, help="seconds allowed to one check").tag(config=True)
        notebook_timeout = Float(Limits.notebook_s, help="seconds allowed to the notebook's cells").tag(config=True)
        memory_limit = Integer(Limits.memory_bytes, help="bytes of address space for learner code").tag(config=True)

        def preprocess(self, nb, resources):
            lesson_module = _lesson_for(resources.get("nbgrader", {}).get("assignment", ""))
            if lesson_module is None:
                return super().preprocess(nb, resources)
            import nbformat

            limits = Limits(check_s=self.check_timeout, notebook_s=self.notebook_timeout,
                            memory_bytes=self.memory_limit)
            with tempfile.TemporaryDirectory(prefix="nbgrader-") as tmp:
                path = Path(tmp) / "submission.ipynb"
                nbformat.write(nb, str(path))
                report = grade(lesson_module, path, limits)
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
                    cell.outputs = [new_output("error", ename="CheckFailed", evalue=r.message,
                                               traceback=[f"CheckFailed: {r.message}"])]
            summary = report.table()
            if report.notebook_errors:
                summary += "\nerrors while running the notebook: " + " | ".join(report.notebook_errors)
            self.log.info("%s", summary)
            return nb, resources

    return IsolatedExecute
