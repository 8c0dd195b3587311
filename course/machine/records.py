"""One record of a run, saved beside every measurement: when, where, how loaded the machine was, and the command.

Timings taken on a shared machine are contended; the load average at the start says by how much. New experiment
results use ``run_record()``; keys: ``date_utc`` ("YYYY-MM-DD HH:MM UTC"), ``host`` (node, cpu, cpus, memory_bytes,
system, python), ``load_average_at_start`` (1-minute), ``command``; each producer adds only its own fields.
Results saved before the record was shared keep their old keys (nothing is re-measured to rename a key):
``read_record()`` reads either.
"""
from __future__ import annotations

import datetime as _dt
import os
import platform
import shlex
import sys

from course.machine.host import cpu_name


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
    """Date, host, load and the command line of a run (``argv`` defaults to this process's arguments; ``program``
    may be several words, ``python -m part1_capacity.experiments.engine.kernels``), plus the producer's own ``extra`` fields."""
    argv = sys.argv[1:] if argv is None else argv
    return {"date_utc": utc_now(), "host": host_description(), "load_average_at_start": load_average(),
            "command": shlex.join([*shlex.split(program), *map(str, argv)]), **extra}


def read_record(saved: dict) -> dict:
    """The run record of a saved result in today's keys, however it was saved: by ``run_record()`` (flat, or
    under ``"record"``) or earlier with each experiment's own keys — ``date`` / ``started_at`` for the date,
    ``host`` as a bare node name or with ``hostname``, ``cpu`` / ``cpu_count`` beside it, ``loadavg_1min`` /
    ``load_average_before_after`` / ``loadavg_at_start`` (a /proc/loadavg line) for the load. Returns
    ``date_utc``, ``host`` (``node``, ``cpu``, ``cpus`` at least; None where unknown),
    ``load_average_at_start``, ``load_average_at_end`` and ``command``."""
    r = saved["record"] if isinstance(saved.get("record"), dict) else saved
    host = dict(r["host"]) if isinstance(r.get("host"), dict) else {"node": r.get("host")}
    for key, old in (("node", "hostname"), ("cpu", None), ("cpus", "cpu_count")):
        if host.get(key) is None:
            host[key] = host.get(old) if old in host else r.get(old or key)
    before_after = r.get("load_average_before_after") or (None, None)
    started = r.get("started_at")
    date = r.get("date_utc") or r.get("date") or (
        _dt.datetime.fromisoformat(started).astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        if started else None)
    return {"date_utc": date, "host": host,
            "load_average_at_start": _first(r.get("load_average_at_start"), r.get("loadavg_1min"), before_after[0],
                                            _proc_loadavg(host.get("loadavg_at_start"))),
            "load_average_at_end": _first(r.get("load_average_at_end"), before_after[1],
                                          _proc_loadavg(host.get("loadavg_at_end"))),
            "command": r.get("command") or saved.get("command")}


def _first(*values):
    return next((v for v in values if v is not None), None)


def _proc_loadavg(line: str | None) -> float | None:
    """The 1-minute figure of a saved ``/proc/loadavg`` line (``"0.52 0.61 0.70 1/234 5678"``)."""
    return float(line.split()[0]) if line else None
