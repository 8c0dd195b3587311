"""The learner's side of grading: ``python -m course.grading.learner RPC_IN RPC_OUT CTL_IN CTL_OUT``, started by
``course.grading.grade_worker`` inside the sandbox (never by hand).

It limits itself (memory, file size, CPU time, writes only in its scratch folder, Landlock where the kernel has it),
runs the notebook's code cells once, then, on the grader's word, forks a server that answers the grader's requests
about the notebook's definitions (``course.grading.proxy``). A server that hangs or dies is replaced by a fresh fork of the
notebook's state: the notebook never runs twice. Nothing of the grader is here: no checks, no results, no tokens.
"""
from __future__ import annotations

import importlib
import os
import resource
import select
import signal
import sys
import traceback
import types

from course.grading import method, proxy, sandbox, wire
from course.grading.contract import CheckFailed, TimedOut, time_limit
from course.grading.grade_worker import NotebookError, read_cells


def _send(fd, **msg):
    try:
        wire.write_frame(fd, proxy.Channel(-1, fd, trusted=False)._frame(msg, {}))
    except OSError:
        os._exit(0)  # the grader is gone: so is everything here


def _describe(exc: BaseException) -> str:
    try:
        return traceback.format_exception_only(type(exc), exc)[-1].strip()[:500]
    except BaseException:  # noqa: BLE001
        return type(exc).__name__


def limit(job: dict) -> int:
    """Memory, file size, CPU seconds (inherited by every process started here) and Landlock; the Landlock ABI."""
    resource.setrlimit(resource.RLIMIT_AS, (job["memory_bytes"], job["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (job["file_bytes"], job["file_bytes"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    cpu = int(job["cpu_s"]) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    if job.get("nproc"):  # where no cgroup counts the processes (the kernel ignores it for root)
        resource.setrlimit(resource.RLIMIT_NPROC, (job["nproc"], job["nproc"]))
    return sandbox.confine_writes([job["scratch"], "/dev/null"])


def preload(modules: list[str]) -> str | None:
    """Import the libraries every notebook of the lesson uses before any learner code runs: a sandbox that does not
    show the Python environment fails here, as the grader's failure, not in the notebook's first cell. The error, or
    None."""
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - whatever stops an import here is the sandbox's
            return f"cannot import {name} inside the sandbox: {_describe(exc)}"
    return None


def run_cells(cells, cell_s: float) -> tuple[dict, list[str]]:
    module = types.ModuleType("__learner__")
    sys.modules["__learner__"] = module
    ns = module.__dict__
    errors = []
    for i, src in cells:
        try:
            code = compile(src, f"<notebook cell {i}>", "exec")
            with time_limit(cell_s, f"code cell {i}"):
                exec(code, ns)  # noqa: S102
        except CheckFailed as exc:
            errors.append(str(exc))
        except TimedOut:  # the alarm came as the cell ended, past the limit's own handler
            errors.append(f"code cell {i} did not finish within {cell_s:g} s (an infinite loop?)")
        except BaseException as exc:  # noqa: BLE001 - a learner's cell may raise anything, even SystemExit
            errors.append(f"code cell {i} raised {_describe(exc)}")
    return ns, errors


def serve(ns: dict, rpc_in: int, rpc_out: int) -> None:
    torch = sys.modules.get("torch")
    if torch is not None:
        # A fork has none of its parent's OpenMP threads: a parallel region would wait for them forever.
        torch.set_num_threads(1)
    proxy.Channel(rpc_in, rpc_out, trusted=False, namespace=ns, on_call=proxy.learner_call).serve_forever()


def main() -> None:
    rpc_in, rpc_out, ctl_in, ctl_out = (int(a) for a in sys.argv[1:5])
    tree, blob = wire.read_frame(ctl_in)
    job = tree  # the grader's job: plain JSON
    landlock = limit(job)
    problem = preload(job.get("preload", []))
    # The handshake: the sandbox started, the interpreter and the libraries are there; learner code runs after this.
    _send(ctl_out, kind="started", problem=problem)
    if problem:
        os._exit(0)

    try:
        cells, unreadable = read_cells(job["notebook"]), []
    except NotebookError as exc:
        cells, unreadable = [], [str(exc)]
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    # Before any learner code: the entry points an exercise may not delegate to become tripwires (course.grading.method).
    method.install()
    # ... and what this lesson forbids is taken away for good: nothing in the notebook needs it (the checks that compare
    # with torch run in the grader), and a tripwire in reach of the learner's code could be dodged.
    method.lock(job.get("forbids", []))
    ns, errors = run_cells(cells, job["cell_s"])
    errors = unreadable + errors
    # The notebook's leftovers (alarms, handlers) are not the server's.
    signal.setitimer(signal.ITIMER_REAL, 0)
    for s in (signal.SIGALRM, signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        try:
            signal.signal(s, signal.SIG_DFL)
        except (ValueError, OSError):
            pass
    _send(ctl_out, kind="ready", errors=errors[:20], landlock=landlock)
    child = None
    while True:
        fds = [ctl_in] + ([child[1]] if child else [])
        ready = select.select(fds, [], [])[0]
        if child and child[1] in ready:
            _, status = os.waitpid(child[0], 0)
            os.close(child[1])
            _send(ctl_out, kind="exited", code=os.waitstatus_to_exitcode(status))
            child = None
            continue
        try:
            tree, _ = wire.read_frame(ctl_in)
        except (wire.WireClosed, wire.WireError):
            os._exit(0)  # the grader is done (or gone): so is everything here
        op = tree.get("op") if isinstance(tree, dict) else None
        if op == "fork" and child is None:
            pid = os.fork()
            if pid == 0:
                try:
                    os.setsid()
                    os.close(ctl_in)
                    os.close(ctl_out)
                    serve(ns, rpc_in, rpc_out)
                finally:
                    os._exit(0)
            child = (pid, os.pidfd_open(pid))
            _send(ctl_out, kind="forked")
        elif op == "kill" and child is not None:
            try:
                os.killpg(child[0], signal.SIGKILL)
            except OSError:
                pass
        elif op == "end":
            os._exit(0)


if __name__ == "__main__":
    main()
