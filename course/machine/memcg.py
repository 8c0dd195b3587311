"""Run a command as a smaller host: inside a fresh memory cgroup with a limit, then remove the group.

    python -m course.memcg --limit-gb 7.8 -- capacity e3 --index-gb 2.5 --out results/part1/x.json

Linux cgroup v1 (the memory controller mounted at /sys/fs/cgroup/memory) or v2 with the memory controller enabled
for children; needs root (or a delegated group). The group is made under this process's own memory cgroup, so any
limit already above it still holds; the page cache the command reads is charged to the group, so the kernel
reclaims inside the limit as it would on a machine of that size (``course.machine.memstat.meminfo`` then reports the
group's figures). The group is removed when the command ends, however it ends (its processes are gone by then;
``rmdir`` is retried for a few seconds while the kernel lets go of them).

Sizes: ``--limit-gb`` in GB = 10^9 bytes. Exit status: the command's, or 2 with one line for bad input.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from course.machine.memstat import memory_mounts


class CgroupError(RuntimeError):
    """The group could not be made or used (no controller, no permission)."""


def own_group_dir(mounts_path: str = "/proc/mounts", cgroup_path: str = "/proc/self/cgroup") -> tuple[str, Path]:
    """(version, directory) of this process's memory cgroup: v1 when its memory controller is mounted, else v2."""
    mounts = memory_mounts(mounts_path)
    with open(cgroup_path) as f:
        entries = [line.rstrip("\n").split(":", 2) for line in f]
    for _, controllers, path in entries:
        if "memory" in controllers.split(",") and "v1" in mounts:
            return "v1", Path(mounts["v1"], *[p for p in path.split("/") if p])
    for _, controllers, path in entries:
        if controllers == "" and "v2" in mounts:
            d = Path(mounts["v2"], *[p for p in path.split("/") if p])
            if "memory" in (d / "cgroup.subtree_control").read_text().split():
                return "v2", d
    raise CgroupError("no memory cgroup controller available to this process (cgroup v1 'memory' not mounted, "
                      "v2 without 'memory' in cgroup.subtree_control)")


def make_group(limit_bytes: int, name: str | None = None) -> tuple[str, Path]:
    """Create a child group with ``limit_bytes``; returns (version, directory)."""
    version, parent = own_group_dir()
    d = parent / (name or f"memcg-{os.getpid()}")
    try:
        d.mkdir()
        (d / ("memory.limit_in_bytes" if version == "v1" else "memory.max")).write_text(str(int(limit_bytes)))
        if version == "v1":
            (d / "memory.swappiness").write_text("0")  # no swap either way; say so for the group too
    except PermissionError as exc:
        remove_group(d)
        raise CgroupError(f"cannot create a memory cgroup in {parent}: {exc.strerror} (run as root)") from None
    except OSError as exc:
        remove_group(d)
        raise CgroupError(f"cannot set up the memory cgroup {d}: {exc.strerror}") from None
    return version, d


def remove_group(d: Path, wait_seconds: float = 10.0) -> None:
    """rmdir the group once its processes are gone (the kernel may take a moment after they exit)."""
    deadline = time.monotonic() + wait_seconds
    while d.exists():
        try:
            d.rmdir()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def run(limit_bytes: int, argv: list[str]) -> int:
    """Run ``argv`` inside a new group of ``limit_bytes``; returns its exit status. The group is always removed."""
    version, d = make_group(limit_bytes)
    procs = d / "cgroup.procs"
    try:
        # the child joins the group before exec, so every byte it and its children touch is charged to it
        child = subprocess.Popen(argv, preexec_fn=lambda: procs.write_text(str(os.getpid())))
        try:
            return child.wait()
        except KeyboardInterrupt:
            child.terminate()
            return child.wait()
    finally:
        remove_group(d)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m course.memcg", description=__doc__.split("\n\n")[0],
                                allow_abbrev=False)
    p.add_argument("--limit-gb", type=float, required=True, help="memory limit of the group, GB (10^9 bytes)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    a = p.parse_args(argv)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        print("command: give the command to run after --", file=sys.stderr)
        return 2
    if not (0.05 <= a.limit_gb <= 1e6):
        print(f"limit-gb: must be in 0.05..1000000 GB, got {a.limit_gb}", file=sys.stderr)
        return 2
    try:
        return run(int(a.limit_gb * 1e9), cmd)
    except CgroupError as exc:
        print(f"memcg: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
