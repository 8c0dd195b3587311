"""One grading's processes, memory and CPU time bounded together: a control group for the learner's sandbox.

``GradingGroup.create(memory_bytes, processes)`` makes a child group of this process's own cgroup (cgroup v1: one
group in each of the ``memory``, ``pids`` and ``cpuacct`` hierarchies; v2: one group with the ``memory`` and
``pids`` controllers its parent enables), with ``memory.max`` (v1 ``memory.limit_in_bytes``) and ``pids.max``. The
learner's process joins it before it starts (``join``, called in the child before exec), so every process and thread
it starts, every byte they touch and every page they write to a tmpfs is counted in it. ``breached()`` names the
limits the kernel enforced since the group was made (an OOM kill, a refused fork); ``cpu_s()`` is the group's CPU
time so far (the grader kills the group past its budget); ``kill()`` and ``remove()`` end it.

Where no group can be made (no controller, no permission: a container without a writable cgroup tree),
``create`` raises ``CgroupError`` with the reason and the grader falls back to per-process limits (``course.grading.learner``:
RLIMIT_AS, RLIMIT_CPU, RLIMIT_NPROC) and its own watchdog, and says so.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from course.machine.memcg import CgroupError


def _mounts(mounts_path: str) -> tuple[dict[str, str], str | None]:
    """cgroup v1 controller → mount point, and the cgroup2 mount point (or None)."""
    v1, v2 = {}, None
    with open(mounts_path) as f:
        for line in f:
            _, mount, fstype, opts, *_ = line.split()
            if fstype == "cgroup2":
                v2 = v2 or mount
            elif fstype == "cgroup":
                for c in ("memory", "pids", "cpuacct"):
                    if c in opts.split(","):
                        v1.setdefault(c, mount)
    return v1, v2


def own_dirs(mounts_path: str = "/proc/mounts", cgroup_path: str = "/proc/self/cgroup") -> tuple[str, dict[str, Path]]:
    """(version, controller → this process's group directory) for memory, pids and (v1) cpuacct."""
    v1, v2 = _mounts(mounts_path)
    with open(cgroup_path) as f:
        entries = [line.rstrip("\n").split(":", 2) for line in f]
    dirs = {}
    for _, controllers, path in entries:
        for c in controllers.split(","):
            if c in v1 and c in ("memory", "pids", "cpuacct"):
                dirs[c] = Path(v1[c], *[p for p in path.split("/") if p])
    if "memory" in dirs:
        return "v1", dirs
    for _, controllers, path in entries:
        if controllers == "" and v2:
            d = Path(v2, *[p for p in path.split("/") if p])
            try:
                enabled = (d / "cgroup.subtree_control").read_text().split()
            except OSError:
                enabled = []
            if "memory" in enabled:
                # cpu.stat (usage_usec) is in every v2 group, with or without the cpu controller
                return "v2", {"memory": d, "cpuacct": d, **({"pids": d} if "pids" in enabled else {})}
    raise CgroupError("no memory cgroup controller available to this process (cgroup v1 'memory' not mounted, "
                      "v2 without 'memory' in cgroup.subtree_control)")


def _read_int(path: Path, default: int = 0) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def _read_keys(path: Path) -> dict[str, int]:
    out = {}
    try:
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            if v.strip().lstrip("-").isdigit():
                out[k] = int(v)
    except OSError:
        pass
    return out


@dataclass
class GradingGroup:
    version: str
    dirs: dict[str, Path]            # controller → this grading's group directory (v2: the same one for each)
    memory_bytes: int
    processes: int
    _start: dict = field(default_factory=dict)

    @classmethod
    def create(cls, memory_bytes: int, processes: int, name: str | None = None) -> "GradingGroup":
        version, parents = own_dirs()
        name = name or f"grading-{os.getpid()}"
        made: dict[str, Path] = {}
        try:
            for c, parent in parents.items():
                d = parent / name
                if d not in made.values():
                    d.mkdir()
                made[c] = d
            if version == "v1":
                (made["memory"] / "memory.limit_in_bytes").write_text(str(int(memory_bytes)))
                try:  # no swap either: the limit is memory, not memory plus swap
                    (made["memory"] / "memory.memsw.limit_in_bytes").write_text(str(int(memory_bytes)))
                except OSError:
                    pass
                if "pids" in made:
                    (made["pids"] / "pids.max").write_text(str(int(processes)))
            else:
                (made["memory"] / "memory.max").write_text(str(int(memory_bytes)))
                try:
                    (made["memory"] / "memory.swap.max").write_text("0")
                except OSError:
                    pass
                if "pids" in made:
                    (made["pids"] / "pids.max").write_text(str(int(processes)))
        except OSError as exc:
            group = cls(version, made, memory_bytes, processes)
            group.remove(wait_s=1.0)
            raise CgroupError(f"cannot set up a cgroup for the grading under {next(iter(parents.values()))}: "
                              f"{exc.strerror or exc}") from None
        group = cls(version, made, memory_bytes, processes)
        group._start = group._counters()
        return group

    @property
    def mechanisms(self) -> str:
        what = ["memory"] + (["processes"] if "pids" in self.dirs else ["processes counted by the watchdog"])
        return f"cgroup {self.version} ({', '.join(what)})"

    def join(self, pid: int = 0) -> None:
        """Put ``pid`` (0: the calling process) into every hierarchy of the group (before it starts anything)."""
        for d in dict.fromkeys(self.dirs.values()):
            (d / "cgroup.procs").write_text(str(pid or os.getpid()))

    def _counters(self) -> dict[str, int]:
        mem, pids = self.dirs.get("memory"), self.dirs.get("pids")
        if self.version == "v1":
            oom = _read_keys(mem / "memory.oom_control").get("oom_kill", 0)
            return {"oom": oom, "memfail": _read_int(mem / "memory.failcnt"),
                    "pidsmax": _read_keys(pids / "pids.events").get("max", 0) if pids else 0}
        events = _read_keys(mem / "memory.events")
        return {"oom": events.get("oom_kill", 0), "memfail": events.get("max", 0),
                "pidsmax": _read_keys(pids / "pids.events").get("max", 0) if pids else 0}

    def breached(self) -> list[str]:
        """The limits the kernel enforced since the group was made: "memory" (a process was killed, or allocations
        were refused, at the memory limit), "processes" (a fork or a thread was refused at the process limit)."""
        now, was = self._counters(), self._start
        out = []
        if now["oom"] > was.get("oom", 0) or (self.version == "v1" and now["oom"] == 0
                                              and now["memfail"] > was.get("memfail", 0) and self.oom_suspected()):
            out.append("memory")
        if now["pidsmax"] > was.get("pidsmax", 0):
            out.append("processes")
        return out

    def oom_suspected(self) -> bool:
        """v1 kernels without the oom_kill counter: the usage reached the limit."""
        mem = self.dirs["memory"]
        return _read_int(mem / "memory.max_usage_in_bytes") >= _read_int(mem / "memory.limit_in_bytes") - (1 << 20)

    def peaks(self) -> dict[str, int]:
        """The group's highest memory use (and, on v2 kernels that count it, its most tasks at once) so far."""
        mem, pids = self.dirs["memory"], self.dirs.get("pids")
        out = {"memory_bytes": _read_int(mem / ("memory.max_usage_in_bytes" if self.version == "v1" else
                                                "memory.peak"), -1)}
        if pids is not None and self.version == "v2":
            out["tasks"] = _read_int(pids / "pids.peak", -1)
        return {k: v for k, v in out.items() if v >= 0}

    def cpu_s(self) -> float:
        """CPU seconds used by every process of the group so far."""
        if self.version == "v1":
            d = self.dirs.get("cpuacct")
            return _read_int(d / "cpuacct.usage") / 1e9 if d else 0.0
        return _read_keys(self.dirs["memory"] / "cpu.stat").get("usage_usec", 0) / 1e6

    def tasks(self) -> int:
        """Processes and threads in the group now (v1: its ``tasks`` file, v2: ``cgroup.threads``)."""
        try:
            return len((self.dirs["memory"] / ("tasks" if self.version == "v1" else "cgroup.threads"))
                       .read_text().split())
        except OSError:
            return 0

    def pids(self) -> list[int]:
        out = set()
        for d in dict.fromkeys(self.dirs.values()):
            try:
                out |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return sorted(out)

    def kill(self) -> None:
        """SIGKILL every process in the group (v2: cgroup.kill where the kernel has it)."""
        if self.version == "v2":
            try:
                (self.dirs["memory"] / "cgroup.kill").write_text("1")
                return
            except OSError:
                pass
        for _ in range(20):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)

    def remove(self, wait_s: float = 10.0) -> None:
        """Kill what is left and remove the group's directories (retried while the kernel lets go of them)."""
        self.kill()
        deadline = time.monotonic() + wait_s
        for d in dict.fromkeys(self.dirs.values()):
            while d.exists():
                try:
                    d.rmdir()
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    self.kill()
                    time.sleep(0.05)


# --- the grader's watchdog: the CPU budget of the whole group, and every limit where no group could be made ---------
def _proc_tree(root_pid: int) -> list[int]:
    """``root_pid`` and every process descended from it (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    ppid = int(f.read().decode("ascii", "replace").rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _pss(pid: int) -> int:
    """Proportional set size in bytes: pages shared after a fork counted once across the processes sharing them."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _tree_usage(pids: list[int]) -> tuple[int, int, float]:
    """(tasks, memory bytes (PSS), CPU seconds with the reaped children's) of these processes."""
    tasks, mem, cpu = 0, 0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().decode("ascii", "replace").rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields counted from the state (the 3rd of stat): utime 14, stime 15, cutime 16, cstime 17, num_threads 20
        cpu += sum(int(fields[i - 3]) for i in (14, 15, 16, 17)) / tick
        tasks += int(fields[20 - 3])
        mem += _pss(pid)
    return tasks, mem, cpu


def _folder_bytes(folder: str) -> int:
    total = 0
    for dirpath, _, filenames in os.walk(folder):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


@dataclass
class Budget:
    """What one grading's learner processes may use together."""

    memory_bytes: int
    processes: int
    cpu_s: float
    disk_bytes: int


class Watchdog:
    """Polls the learner's sandbox every ``period_s`` (a thread of the grader's process): past the CPU budget of the
    group, or (without a group) past the process, memory or disk budget, it kills every process of the sandbox and
    records which limit. ``breaches()`` lists the limits reached so far, the kernel's (the group) and its own."""

    def __init__(self, budget: Budget, root_pid: int, group: GradingGroup | None, scratch: str,
                 tmpfs_scratch: bool, kill, period_s: float = 0.2):
        self.budget, self.root_pid, self.group, self.scratch = budget, root_pid, group, scratch
        self.tmpfs_scratch, self.kill, self.period_s = tmpfs_scratch, kill, period_s
        self.found: list[str] = []
        self.seen: dict[str, int] = {}  # without a group: the most this watchdog saw at once
        self.then = None
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self, then=None):
        """Stop polling; ``then()`` runs on the watchdog's thread, which the grader's Landlock does not confine
        (removing the group's directories is a write outside the grader's folder)."""
        self.then = then
        self.stopped.set()
        self.thread.join(timeout=30)

    def _record(self, what: str, kill: bool):
        if what not in self.found:
            self.found.append(what)
        if kill:
            self.kill()

    def _run(self):
        while not self.stopped.wait(self.period_s):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - a process that vanished mid-read; the next poll sees the rest
                pass
        if self.then is not None:
            self.then()

    def poll(self):
        b = self.budget
        if self.group is not None:
            if self.group.cpu_s() > b.cpu_s:
                self._record("cpu", kill=True)
            if "pids" not in self.group.dirs and self.group.tasks() > b.processes:  # no pids controller: counted here
                self._record("processes", kill=True)
        else:
            tasks, rss, cpu = _tree_usage(_proc_tree(self.root_pid))
            self.seen["tasks"] = max(self.seen.get("tasks", 0), tasks)
            self.seen["memory_bytes"] = max(self.seen.get("memory_bytes", 0), rss)
            if cpu > b.cpu_s:
                self._record("cpu", kill=True)
            if tasks > b.processes:
                self._record("processes", kill=True)
            if rss > b.memory_bytes:
                self._record("memory", kill=True)
        if self.tmpfs_scratch:
            if self._tmpfs_full():
                self._record("disk", kill=False)  # the tmpfs refused the write; nothing to kill
        elif _folder_bytes(self.scratch) > b.disk_bytes:
            self._record("disk", kill=True)

    def _tmpfs_full(self) -> bool:
        """The sandbox's scratch tmpfs, seen through a process inside it, has (almost) no room left."""
        try:
            with open(f"/proc/{self.root_pid}/task/{self.root_pid}/children") as f:
                inside = [int(p) for p in f.read().split()]
        except (OSError, ValueError):
            return False
        for pid in inside[:2]:  # bubblewrap's child: in the sandbox's mount namespace
            try:
                st = os.statvfs(f"/proc/{pid}/root{self.scratch}")
            except OSError:
                continue
            return st.f_bavail * st.f_frsize < (1 << 20)
        return False

    def peaks(self) -> dict:
        """The most used at once: measured by the kernel (the group), else as this watchdog saw it."""
        if self.group is not None:
            return {"by": self.group.mechanisms, **self.group.peaks()}
        return {"by": "the grader's watchdog", **self.seen}

    def breaches(self) -> list[str]:
        out = list(self.found)
        if self.group is not None:
            out += [b for b in self.group.breached() if b not in out]
        return out

    def describe(self, what: str) -> str:
        b = self.budget
        return {"memory": f"the notebook's processes together reached this grading's memory limit "
                          f"({b.memory_bytes / 2**20:.0f} MiB)",
                "processes": f"the notebook's processes reached this grading's limit of {b.processes} processes "
                             f"and threads at once",
                "cpu": f"the notebook's processes used up this grading's CPU time ({b.cpu_s:g} CPU seconds in "
                       f"all)",
                "disk": f"the notebook filled this grading's disk space ({b.disk_bytes / 2**20:.0f} MiB in its "
                        f"folder)"}[what]
