"""The hog: a separate process that takes anonymous memory in steps, touching every page once, and holds it.

Between steps it sleeps in a blocking read of its stdin: it takes no CPU time while the searcher reads (each cycle
records the hog's CPU time during the reads, ``hog_cpu_seconds``, to show it). The pages are written once, in C
(a strided numpy store, one byte per page), so even a 12 GB step costs the machine a fraction of a second.

Run by ``HogProcess`` (below) as ``python -m part1_capacity.experiments.page_cache.hog --floor-bytes F --cap-bytes C``; it reads one
command per line on stdin and answers one JSON line on stdout:

    grow N   take N more bytes (in chunks); answer {"hog_bytes", "stopped", "mem_available_bytes"}
    quit     exit (so does end-of-input)

Safety, checked by the hog itself before every chunk, whatever the controller believes:
- never past ``cap`` bytes in total, and never leaving MemAvailable below ``floor`` bytes (``stopped`` says which);
- ``oom_score_adj = 1000``: should the machine still run out, the kernel kills the hog, not a neighbour;
- ``PR_SET_PDEATHSIG``: the hog is killed when its parent dies, however it dies.
With no swap, anonymous memory cannot be written out: every byte the hog holds is taken from the page cache.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from course.machine import memstat

PAGE = memstat.PAGE_SIZE
CHUNK = 64 << 20  # bytes checked against the floor at a time
_PR_SET_PDEATHSIG = 1


class Hog:
    """Anonymous memory held in ``mmap`` chunks, every page written once (a resident, private, dirty page)."""

    def __init__(self, floor_bytes: int, cap_bytes: int, chunk_bytes: int = CHUNK):
        self.floor, self.cap, self.chunk = floor_bytes, cap_bytes, chunk_bytes
        self.chunks: list[mmap.mmap] = []
        self.bytes = 0

    def grow(self, n_bytes: int) -> dict:
        """Take up to ``n_bytes`` more; stops before a chunk that would cross the cap or the MemAvailable floor."""
        target = self.bytes + n_bytes
        stopped = None
        while self.bytes < target:
            size = -(-min(self.chunk, target - self.bytes) // PAGE) * PAGE
            if self.bytes + size > self.cap:
                stopped = "cap"
                break
            if memstat.meminfo().available - size < self.floor:
                stopped = "floor"
                break
            m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            # Touch every page: the kernel only backs pages that are written. One byte per page, in C.
            np.frombuffer(m, dtype=np.uint8)[::PAGE] = 1
            self.chunks.append(m)
            self.bytes += size
        return {"hog_bytes": self.bytes, "stopped": stopped, "mem_available_bytes": memstat.meminfo().available}

    def release(self) -> None:
        for m in self.chunks:
            m.close()
        self.chunks.clear()
        self.bytes = 0


def _protect_neighbours() -> None:
    try:
        Path("/proc/self/oom_score_adj").write_text("1000")
    except OSError:
        pass
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="e3-hog", allow_abbrev=False)
    p.add_argument("--floor-bytes", type=int, required=True)
    p.add_argument("--cap-bytes", type=int, required=True)
    p.add_argument("--chunk-bytes", type=int, default=CHUNK)
    a = p.parse_args(argv)
    _protect_neighbours()
    if os.getppid() == 1:  # parent already gone before the death signal was armed
        return 1
    hog = Hog(a.floor_bytes, a.cap_bytes, a.chunk_bytes)
    try:
        for line in sys.stdin:
            cmd, *arg = line.split()
            if cmd == "grow":
                reply = hog.grow(int(arg[0]))
            elif cmd == "quit":
                break
            else:
                reply = {"error": f"unknown command {cmd!r}"}
            print(json.dumps(reply), flush=True)
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: leave quietly, memory goes with us
        return 130
    finally:
        hog.release()
    return 0


class HogEnded(RuntimeError):
    """The hog process is gone (e.g. killed from outside); the run stops with what it measured so far."""


class HogProcess:
    """Controller side: starts the hog process and talks to it. ``close()`` always ends it (quit, then kill)."""

    def __init__(self, floor_bytes: int, cap_bytes: int, chunk_bytes: int = CHUNK):
        repo = str(Path(__file__).resolve().parents[3])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "part1_capacity.experiments.page_cache.hog", "--floor-bytes", str(floor_bytes),
             "--cap-bytes", str(cap_bytes), "--chunk-bytes", str(chunk_bytes)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.pid = self.proc.pid
        self.bytes = 0

    def grow(self, n_bytes: int) -> dict:
        try:
            self.proc.stdin.write(f"grow {int(n_bytes)}\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise HogEnded(f"hog process {self.pid} ended unexpectedly (exit status {self.proc.wait()})") from None
        line = self.proc.stdout.readline()
        if not line:
            raise HogEnded(f"hog process {self.pid} ended unexpectedly (exit status {self.proc.wait()})")
        reply = json.loads(line)
        self.bytes = reply["hog_bytes"]
        return reply

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) the hog process has used so far, seconds; None once it is gone."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (proc(5))

    def rss(self) -> memstat.RssSplit | None:
        try:
            return memstat.rss_split(self.pid)
        except OSError:
            return None

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except (BrokenPipeError, OSError):
                pass


if __name__ == "__main__":
    sys.exit(main())
