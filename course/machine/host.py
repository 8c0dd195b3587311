"""Facts about the machine a measurement ran on, read once: the CPU's name and flags from ``/proc/cpuinfo``.

Every run record (``course.machine.records``) and every experiment that needs the instruction set reads them from here.
"""
from __future__ import annotations

import os
import platform
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def cpuinfo() -> dict[str, str]:
    """The first processor's fields of ``/proc/cpuinfo`` (``model name``, ``flags``, ...); empty where absent."""
    fields: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return fields
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break          # the first processor's block is enough: they are alike on these machines
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    return cpuinfo().get("model name") or platform.processor() or platform.machine() or "unknown"


def cpu_flags() -> frozenset[str]:
    """Instruction-set flags (``avx2``, ``fma``, ``avx512_vnni``, ``avx_vnni`` ...) of the CPU."""
    return frozenset(cpuinfo().get("flags", "").split())


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity), else the machine's count."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
