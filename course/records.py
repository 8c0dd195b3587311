"""One record of a run, saved beside every measurement: when, where, how loaded the machine was, and the command.

Timings taken on a shared machine are contended; the load average at the start says by how much. New experiment
results use ``run_record()``; keys: ``date_utc`` ("YYYY-MM-DD HH:MM UTC"), ``host`` (node, cpu, cpus, memory_bytes,
system, python), ``load_average_at_start`` (1-minute), ``command``.
"""
from __future__ import annotations

import datetime as _dt
import os
import platform
import shlex
import sys

from course.host import cpu_name


def utc_now() -> str:
    """The time now as the records write it: ``YYYY-MM-DD HH:MM UTC``."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def load_average() -> float | None:
    """The 1-minute load average, or None where the system has none."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def host_description() -> dict:
    """The host in a few fields: node name, CPU, CPU count, memory (bytes), system and Python versions."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = None
    return {"node": platform.node(), "cpu": cpu_name(), "cpus": os.cpu_count(), "memory_bytes": memory,
            "system": f"{platform.system()} {platform.release()}", "python": platform.python_version()}


def run_record(argv=None, program: str = "capacity", **extra) -> dict:
    """Date, host, load and the command line of a run (``argv`` defaults to this process's arguments)."""
    argv = sys.argv[1:] if argv is None else argv
    return {"date_utc": utc_now(), "host": host_description(), "load_average_at_start": load_average(),
            "command": shlex.join([program, *argv]), **extra}
