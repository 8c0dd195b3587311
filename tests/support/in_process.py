"""The calculator's CLI run in the test process (no interpreter start-up per call), shared by the CLI tests."""
from __future__ import annotations

import contextlib
import io
import subprocess

from part1_capacity import cli


def capacity(*args) -> subprocess.CompletedProcess:
    """``capacity ARGS`` in-process: returncode, stdout, stderr as a finished subprocess has them."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(args))
        except SystemExit as exc:       # argparse errors
            code = exc.code
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def run(capsys, *argv):
    """``capacity ARGV`` under pytest's ``capsys``: (exit code, stdout, stderr)."""
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err
