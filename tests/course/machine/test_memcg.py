"""course.memcg: a command run as a smaller host inside a memory cgroup (the real kernel when this machine allows)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from course.machine import memcg

REPO = Path(__file__).resolve().parents[3]


def test_own_group_dir_v1_and_v2(tmp_path):
    (tmp_path / "mounts").write_text(f"cgroup {tmp_path}/m cgroup rw,memory 0 0\ncgroup2 {tmp_path}/u cgroup2 rw 0 0\n")
    (tmp_path / "cgroup").write_text("4:memory:/s/t\n0::/x\n")
    assert memcg.own_group_dir(str(tmp_path / "mounts"), str(tmp_path / "cgroup")) == ("v1", tmp_path / "m/s/t")
    # v2 only counts when the memory controller is enabled for the group's children
    (tmp_path / "mounts").write_text(f"cgroup2 {tmp_path}/u cgroup2 rw 0 0\n")
    (tmp_path / "cgroup").write_text("0::/x\n")
    (tmp_path / "u/x").mkdir(parents=True)
    (tmp_path / "u/x/cgroup.subtree_control").write_text("cpu io\n")
    with pytest.raises(memcg.CgroupError, match="no memory cgroup controller"):
        memcg.own_group_dir(str(tmp_path / "mounts"), str(tmp_path / "cgroup"))
    (tmp_path / "u/x/cgroup.subtree_control").write_text("cpu memory io\n")
    assert memcg.own_group_dir(str(tmp_path / "mounts"), str(tmp_path / "cgroup")) == ("v2", tmp_path / "u/x")


@pytest.mark.parametrize("argv, message", [
    (["--limit-gb", "1"], "command: give the command to run after --"),
    (["--limit-gb", "0.001", "--", "true"], "limit-gb: must be in 0.05..1000000 GB, got 0.001"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message):
    out = subprocess.run([sys.executable, "-m", "course.memcg", *argv], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 2
    assert out.stderr.strip() == message


def _can_make_groups() -> bool:
    try:
        version, d = memcg.own_group_dir()
    except (memcg.CgroupError, OSError):
        return False
    return os.access(d, os.W_OK)


@pytest.mark.skipif(not _can_make_groups(), reason="needs a writable memory cgroup (root on a cgroup v1 host)")
def test_the_command_sees_the_limit_and_the_group_is_removed():
    code = "from course.machine import memstat; m = memstat.meminfo(); print(m.total, m.scope)"
    proc = subprocess.Popen([sys.executable, "-m", "course.memcg", "--limit-gb", "0.5", "--", sys.executable, "-c",
                             code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    total, scope = stdout.split()
    assert (int(total), scope) == (500_000_000 // 4096 * 4096, "cgroup")  # the kernel keeps whole pages
    version, d = memcg.own_group_dir()
    assert not (d / f"memcg-{proc.pid}").exists()
