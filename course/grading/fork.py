"""A child forked from a warm process (one that imported torch, nbgrader, a lesson's checks) made to behave like a
fresh one: the grader's process for each notebook (``autograde``) and each student's ``nbgrader autograde`` of a
class (``course.classroom.nbgrader_class``) are such children."""
import os
import signal
import sys
import tempfile


def settle(cwd: str, env: dict) -> None:
    """In the child, after its descriptors are set (0, 1, 2 and the ones it keeps): its own working folder and
    environment, temporary files found again from its TMPDIR, standard streams on its own descriptors, Ctrl-C's default
    handler, and torch on one thread — a fork has none of its parent's OpenMP threads, so a parallel region would wait
    for them forever."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
