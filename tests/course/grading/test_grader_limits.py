"""One grading is bounded as a whole (course/grading/grading_group.py, course/grading/grade_worker.py): a fork bomb, a disk filler
and a memory hog each stop at the grading's limit, the limit is named in the learner's feedback, and nothing is left
on the host. Small limits, so each runs in seconds.

Whichever mechanism this machine gives the grader is tested: a cgroup (v1 or v2: the kernel refuses the fork or the
page at the limit, and its own counters give the peak), or, where no cgroup can be made, the per-process limits and
the grader's watchdog (it kills the sandbox past the limit). ``report.limits`` says which ran, and each test prints
it. Each attack is a cell added to the solution notebook: what the notebook itself prints (how many forks or bytes
the kernel allowed) is compared with the limit.
"""
import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from course.grading.autograde import Limits, grade
from course.grading.notebook_spec import REPO

LESSON = "part0_foundations.l01_attention.checks"
SOLUTION = REPO / "solutions/01_attention/attention.ipynb"
MARKER = "grader-limits-leftover-5c1e"
PROCESSES = 48
DISK = 64 << 20
MEMORY = 768 << 20

FORK_BOMB = f'''
import os, sys, time
kids, refused = [], None
for _ in range(4 * {PROCESSES}):
    try:
        pid = os.fork()
    except OSError as exc:
        refused = exc
        break
    if pid == 0:
        sys.argv[1:] = ["{MARKER}"]
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
print("FORKED", len(kids), "REFUSED", type(refused).__name__)
for pid in kids:
    os.waitpid(pid, 0)
'''

DISK_FILLER = '''
import os
written, block = 0, b"x" * (8 << 20)
try:
    for i in range(10_000):
        with open(f"fill-{i}.bin", "wb") as f:
            f.write(block)
        written += len(block)
except OSError as exc:
    print("REFUSED", exc.errno)
print("WRITTEN", written)
try:
    open("/tmp/outside.bin", "wb").write(block)
    print("WROTE /tmp")
except OSError:
    pass
'''

MEMORY_HOG = '''
import os, time
kids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        hog = bytearray(400 << 20)
        hog[::4096] = b"x" * len(hog[::4096])  # every page touched
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
print("EXITS", [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in kids])
'''


def _with_cell(path, source):
    nb = json.loads(SOLUTION.read_text())
    nb["cells"].append({"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                        "source": source})
    path.write_text(json.dumps(nb))
    return path


def _leftovers():
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if MARKER.encode() in open(f"/proc/{pid}/cmdline", "rb").read():
                out.append(int(pid))
        except OSError:
            pass
    return out


# Each attack graded twice: with this machine's mechanism ("auto": a cgroup where one can be made) and with the
# cgroup switched off (the per-process limits and the grader's watchdog; the disk filler also without bubblewrap, so
# its folder is the host's and the watchdog measures it), so the fallback is tested on every machine.
MODES = {"auto": {}, "off": {"cgroup": "off"}}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("limits")
    small = dict(check_s=60, processes=PROCESSES, disk_bytes=DISK, group_memory_bytes=MEMORY)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {}
        for mode, extra in MODES.items():
            for name, cell in (("fork_bomb", FORK_BOMB), ("disk", DISK_FILLER), ("memory", MEMORY_HOG)):
                more = dict(extra, sandbox="off") if (mode, name) == ("off", "disk") else extra
                futures[name, mode] = pool.submit(grade, LESSON, _with_cell(tmp / f"{name}-{mode}.ipynb", cell),
                                                  Limits(**small, **more))
        yield {key: f.result() for key, f in futures.items()}


def _said(report, words):
    """Every place the learner reads about the grading: the notebook's errors and each check's message."""
    text = " | ".join(report.notebook_errors + [r.message for r in report.results])
    assert words in text, (report.limits, text[:3000], report.output[-1500:])


@pytest.mark.parametrize("mode", MODES)
def test_a_fork_bomb_stops_at_the_process_limit(graded, mode):
    report = graded["fork_bomb", mode]
    print(report.limits, report.peaks)
    assert "processes" in report.breaches, (report.limits, report.breaches, report.output[-1500:])
    _said(report, f"this grading's limit of {PROCESSES} processes and threads at once")
    forked = re.search(r"FORKED (\d+) REFUSED (\w+)", report.output)
    if report.limits.startswith("cgroup") and report.limits.endswith("(memory, processes)"):
        # the kernel refused the fork at the limit: fewer children than the limit (the sandbox's own processes and
        # threads count too), and the notebook went on to full marks
        assert forked and int(forked[1]) < PROCESSES and forked[2] == "BlockingIOError", report.output[-1500:]
        assert report.earned == report.points, report.table()
        if "tasks" in report.peaks:
            assert report.peaks["tasks"] <= PROCESSES
    time.sleep(0.5)
    assert _leftovers() == [], "a process of the fork bomb outlived grading"


@pytest.mark.parametrize("mode", MODES)
def test_a_disk_filler_stops_at_the_disk_limit(graded, mode):
    report = graded["disk", mode]
    print(report.limits, report.sandbox)
    assert "disk" in report.breaches, (report.limits, report.sandbox, report.output[-1500:])
    _said(report, f"filled this grading's disk space ({DISK >> 20} MiB in its folder)")
    assert "WROTE /tmp" not in report.output
    written = re.search(r"WRITTEN (\d+)", report.output)
    if report.sandbox == "bubblewrap":
        # its folder is a tmpfs of DISK bytes: the write past it is refused (ENOSPC, errno 28), the notebook goes on
        assert "REFUSED 28" in report.output and written and int(written[1]) <= DISK, report.output[-1500:]
        assert report.earned == report.points, report.table()


@pytest.mark.parametrize("mode", MODES)
def test_a_memory_hog_stops_at_the_memory_limit(graded, mode):
    report = graded["memory", mode]
    print(report.limits, report.peaks)
    assert "memory" in report.breaches, (report.limits, report.peaks, report.output[-1500:])
    _said(report, f"reached this grading's memory limit ({MEMORY >> 20} MiB)")
    if report.limits.startswith("cgroup"):
        # the kernel's own count of the group's highest use (processes and their tmpfs pages together)
        assert 0 < report.peaks["memory_bytes"] <= MEMORY, report.peaks
        exits = re.search(r"EXITS \[(.*)\]", report.output)
        assert exits and "-9" in exits[1], report.output[-1500:]  # a hog was killed (SIGKILL), not the host


def test_own_group_dirs_v1_and_v2(tmp_path):
    """Where the grading's group is made: v1, one directory per controller hierarchy; v2, this process's group when
    it enables memory for its children (pids only when enabled too; cpu.stat is in every v2 group)."""
    from course.grading.grading_group import CgroupError, own_dirs

    (tmp_path / "mounts").write_text(f"cgroup {tmp_path}/m cgroup rw,memory 0 0\ncgroup {tmp_path}/p cgroup rw,pids 0 0\n"
                                     f"cgroup {tmp_path}/c cgroup rw,cpu,cpuacct 0 0\n")
    (tmp_path / "cgroup").write_text("4:memory:/s/t\n8:pids:/\n2:cpu,cpuacct:/u\n")
    assert own_dirs(str(tmp_path / "mounts"), str(tmp_path / "cgroup")) == (
        "v1", {"memory": tmp_path / "m/s/t", "pids": tmp_path / "p", "cpuacct": tmp_path / "c/u"})
    (tmp_path / "mounts").write_text(f"cgroup2 {tmp_path}/u cgroup2 rw 0 0\n")
    (tmp_path / "cgroup").write_text("0::/x\n")
    (tmp_path / "u/x").mkdir(parents=True)
    (tmp_path / "u/x/cgroup.subtree_control").write_text("cpu io\n")
    with pytest.raises(CgroupError, match="no memory cgroup controller"):
        own_dirs(str(tmp_path / "mounts"), str(tmp_path / "cgroup"))
    (tmp_path / "u/x/cgroup.subtree_control").write_text("memory\n")
    assert own_dirs(str(tmp_path / "mounts"), str(tmp_path / "cgroup")) == (
        "v2", {"memory": tmp_path / "u/x", "cpuacct": tmp_path / "u/x"})
    (tmp_path / "u/x/cgroup.subtree_control").write_text("cpu memory pids\n")
    assert own_dirs(str(tmp_path / "mounts"), str(tmp_path / "cgroup"))[1]["pids"] == tmp_path / "u/x"
