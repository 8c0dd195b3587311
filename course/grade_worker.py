"""The processes that run a learner's notebook and the checks on it: ``python -m course.grade_worker`` (started by
``course.autograde``, never by hand).

Before any learner code runs, a zygote imports torch, the grader, the lesson's checks and reference modules (fresh:
a new interpreter) and everything the notebook and the checks import, and seals their namespaces
(``course.sandbox.Seal``). Each run of the notebook is a child forked from it (no second torch import after a child
was killed), which confines itself first: memory and file-size limits, no writes outside its scratch folder, no TCP,
no signals to other processes. After the notebook and after every call into learner code, whatever the learner patched is put back.
Results go to the parent as JSON lines on a pipe, tagged with a per-run token; the learner's output goes to
stdout, which the parent caps.
"""
from __future__ import annotations

import ast
import functools
import importlib
import json
import os
import signal
import sys
import threading
import traceback
import types

LEARNER = "__learner__"
CELL_PREFIX = "<notebook cell "
# Top-level packages whose modules are sealed before learner code runs.
SEALED_ROOTS = ("builtins", "torch", "numpy", "transformers", "faiss", "safetensors", "course", "part0_foundations",
                "math", "functools", "copy", "dataclasses", "warnings", "importlib", "json", "re", "os", "sys",
                "datetime", "tempfile")


# Threads that libraries start on their own (tqdm's progress-bar monitor, via transformers): not the learner's.
LIBRARY_THREADS = {"tqdm_monitor"}


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
        out.append((i, src))
    return out


def imported_modules(sources: list[str]) -> set[str]:
    """Modules named by import statements anywhere in these sources (also inside functions)."""
    names = set()
    for src in sources:
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
                names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def preload(modules: set[str]) -> None:
    """Import, before the seal, the modules the notebook and the checks will import (when importable)."""
    for name in sorted(modules):
        if name.split(".")[0] not in SEALED_ROOTS:
            continue
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - `from x import function` names no module; a missing one is the learner's
            pass


def reference_imports(sources: list[tuple[int, str]], lesson) -> dict[str, str]:
    """Graded names a cell imports from the lesson's package: name → "cell N: from M import X"."""
    found = {}
    graded = set(lesson.names())
    for i, src in sources:
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(lesson.package):
                for a in node.names:
                    if a.name in graded or a.name == "*":
                        for n in (graded if a.name == "*" else [a.name]):
                            found.setdefault(n, f"cell {i}: from {node.module} import {a.name}")
    return found


def is_reference(obj, lesson) -> str | None:
    """Why ``obj`` is (or inherits) a definition from the lesson's package, or None."""
    seen = set()
    while isinstance(obj, functools.partial) and id(obj) not in seen:
        seen.add(id(obj))
        obj = obj.func
    mod = getattr(obj, "__module__", None)
    if isinstance(mod, str) and mod.startswith(lesson.package):
        return f"it is {mod}.{getattr(obj, '__qualname__', '?')}"
    if isinstance(obj, type):
        for base in obj.__mro__[1:]:
            bm = getattr(base, "__module__", "")
            if isinstance(bm, str) and bm.startswith(lesson.package):
                return f"it inherits {bm}.{base.__qualname__}"
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


class ReferenceTracer:
    """Notes a call into a forbidden reference definition made while learner code is on the stack."""

    def __init__(self, forbidden: dict):
        self.forbidden, self.hits = forbidden, []

    def __call__(self, frame, event, arg):
        if event == "call" and frame.f_code in self.forbidden:
            f = frame.f_back
            while f is not None:
                if f.f_code.co_filename.startswith(CELL_PREFIX):
                    self.hits.append(self.forbidden[frame.f_code])
                    break
                f = f.f_back
        return None


class Guard:
    """After each call into learner code (course.grading.call): put back what it patched."""

    def __init__(self, seal):
        self.seal = seal

    def after_learner_call(self):
        self.seal.restore()


def _send(out, token, **msg):
    # A leading newline ends any half line a killed predecessor left in the pipe.
    out.write("\n" + json.dumps(dict(msg, token=token)) + "\n")
    out.flush()


def _describe(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


def main() -> None:
    """The zygote: import and seal everything once, then fork one child per request (a line of JSON on stdin naming
    the checks to run); report each child's pid and exit status. It never runs learner code itself."""
    job = json.loads(sys.stdin.readline())
    out = os.fdopen(job["result_fd"], "w", buffering=1)
    send = functools.partial(_send, out, job["token"])

    from course import grading, sandbox

    lesson = importlib.import_module(job["lesson"]).LESSON
    refs = {n: lesson.reference_definition(n) for n in lesson.names()}
    try:
        cells = read_cells(job["notebook"])
        notebook_error = None
    except NotebookError as exc:
        cells, notebook_error = [], str(exc)
    checks_src = open(importlib.import_module(job["lesson"]).__file__, encoding="utf-8").read()
    preload(imported_modules([checks_src] + [src for _, src in cells]))
    guard = Guard(None)
    grading.install_guard(guard)
    guard.seal = sandbox.Seal.take(SEALED_ROOTS)  # the installed guard is part of what is sealed
    send(kind="zygote")
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()  # its own process group: the parent kills it and anything it started, at once
                run_child(job, request["ids"], lesson, refs, cells, notebook_error, guard, send)
            finally:
                os._exit(0)  # no learner atexit handlers, finalizers or threads run after the results
        send(kind="forked", pid=pid)
        _, status = os.waitpid(pid, 0)
        send(kind="exited", pid=pid, code=os.waitstatus_to_exitcode(status))
    os._exit(0)


def run_child(job, ids, lesson, refs, cells, notebook_error, guard, send) -> None:
    """In the forked child: confine, run the notebook's cells, then each check in ``ids``."""
    from course import grading, sandbox

    seal = guard.seal
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the zygote's requests are not for learner code to read
    os.close(devnull)
    sandbox.limit_resources(job["memory_bytes"], job["file_bytes"])
    check_fns = {c.id: c for c in lesson.checks}  # held here: patching the checks module changes nothing
    restore_signals = {s: signal.getsignal(s) for s in (signal.SIGALRM, signal.SIGINT, signal.SIGTERM)}
    os.chdir(job["workdir"])
    landlock = sandbox.confine_writes([job["workdir"], "/dev/null"])
    send(kind="confined", landlock=landlock, pid=os.getpid())

    module = types.ModuleType(LEARNER)
    sys.modules[LEARNER] = module
    ns = module.__dict__
    errors = [notebook_error] if notebook_error else []
    for i, src in cells:
        try:
            code = compile(src, f"{CELL_PREFIX}{i}>", "exec")
            with grading.time_limit(job["cell_s"], f"code cell {i}"):
                exec(code, ns)  # noqa: S102
        except grading.CheckFailed as exc:
            errors.append(str(exc))
        except BaseException as exc:  # noqa: BLE001 - a learner's cell may raise anything, even SystemExit
            errors.append(f"code cell {i} raised {_describe(exc)}")
    seal.restore()
    sys.settrace(None)
    for s, h in restore_signals.items():
        signal.signal(s, h)
    threads = [t.name for t in threading.enumerate()
               if t is not threading.main_thread() and t.name not in LIBRARY_THREADS]
    send(kind="ready", errors=errors[:20], threads=threads)

    imported = reference_imports(cells, lesson)
    for cid in ids:
        c = check_fns[cid]
        send(kind="start", id=cid)
        passed, message = False, ""
        if threads:
            message = (f"your notebook left threads running ({', '.join(threads[:3])}): the checks cannot run "
                       "beside code that keeps going")
        elif notebook_error:
            message = f"the notebook could not be graded: {notebook_error}"
        elif c.name not in ns:
            hint = ("; errors while running the notebook: " + " | ".join(errors[:5])) if errors else ""
            message = f"`{c.name}` is not defined in your notebook{hint}"
        elif (why := is_reference(ns[c.name], lesson)) or c.name in imported:
            message = (f"`{c.name}` is the course's reference implementation ({why or imported[c.name]}), not "
                       f"yours: write your own")
        else:
            forbidden = {code: n for n, obj in refs.items() if n not in c.allows for code in code_objects(obj)}
            tracer = ReferenceTracer(forbidden)
            try:
                sys.settrace(tracer)
                with grading.time_limit(job["check_s"], f"the check {cid}"):
                    c.fn(ns[c.name])
                passed = True
            except grading.CheckFailed as exc:
                message = str(exc)
            except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt, SystemExit... from learner code
                message = f"the check stopped: {_describe(exc)}"
            finally:
                still_ours = sys.gettrace() is tracer
                sys.settrace(None)
                seal.restore()
                for s, h in restore_signals.items():
                    signal.signal(s, h)
            if tracer.hits:
                passed = False
                message = (f"`{c.name}` calls the course's reference implementation ({tracer.hits[0]} from "
                           f"{lesson.package}), not yours: write your own")
            elif passed and not still_ours:
                passed, message = False, "your code switched off the grader's tracing (sys.settrace)"
        send(kind="check", id=cid, passed=passed, message=message[:4000])
    send(kind="done")


if __name__ == "__main__":
    main()
