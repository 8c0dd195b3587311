"""The property-based fuzz of ``capacity`` (tests/support/fuzz_cli.py) in a child process held to 3 GiB of address space
and five CPU minutes: a case that allocates without bound or loops dies on the limit and fails this test instead
of taking the machine. The property itself — exit 0 with strict JSON, or exit 2 with one line — is checked case by
case inside the child, by Hypothesis."""
import os
import resource
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def limits():
    resource.setrlimit(resource.RLIMIT_AS, (3 * 2 ** 30, 3 * 2 ** 30))
    resource.setrlimit(resource.RLIMIT_CPU, (300, 300))


def test_the_fuzz_finds_no_traceback_hang_or_unbounded_allocation():
    run = subprocess.run([sys.executable, str(REPO / "tests" / "support" / "fuzz_cli.py")], capture_output=True, text=True,
                         timeout=300, preexec_fn=limits, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO), "FUZZ_CASES": "300", "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    assert "fuzz: 300 cases, every one an answer or one line" in run.stdout
