"""``--accelerator local``: this machine, as its runtime tools report it.

In order: an NVIDIA GPU (``nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits``: MiB as the
driver reports them), an AMD GPU (``rocm-smi --showproductname --showmeminfo vram --json``: bytes), Apple silicon
(``sysctl``: the chip's name and the RAM; the GPU may use up to its working-set limit — ``iogpu.wired_limit_mb``
when the user raised it, else macOS's default of about 3/4 of the RAM that llama.cpp's Metal backend logs as
``recommendedMaxWorkingSetSize``), else the CPU: the RAM from ``/proc/meminfo`` and the memory bandwidth and
arithmetic rate measured here and now (a large array copy, a float32 matrix product).

A GPU's bandwidth and peak come from the bundled table when its name matches an entry (the driver says how much
memory; the datasheet says how fast); the host's RAM (``/proc/meminfo``) and measured bandwidth describe the host
a llama.cpp split offloads to. Each reading names its tool, so the text can say what it found. Units: bytes,
bytes/s, FLOP/s.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from course.shared.units import GIB, MIB
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.hardware.accelerators import Accelerator, bundled_accelerators

LOCAL = "local"
APPLE_DEFAULT_WORKING_SET = 0.75      # the share of RAM macOS lets the GPU wire by default (accelerators.json: the
#                                       logged recommendedMaxWorkingSetSize of 128 GB Apple machines)
TIMEOUT_S = 10


@dataclass
class Found:
    """What the machine reported: the tool, the device's name and memory, and the host's RAM (bytes)."""
    tool: str
    name: str
    memory_bytes: float
    count: int = 1
    host_memory_bytes: float = 0.0
    matched: str = ""            # the bundled entry whose speeds are used ("" for the CPU, measured)
    notes: list = field(default_factory=list)

    def describe(self) -> str:
        many = f"{self.count} × " if self.count > 1 else ""
        s = f"found {many}{self.name} with {self.memory_bytes / GIB:,.1f} GiB ({self.tool})"
        if self.matched:
            s += f"; bandwidth and peak from the table's {self.matched}"
        if self.host_memory_bytes:
            s += f"; host RAM {self.host_memory_bytes / GIB:,.1f} GiB (/proc/meminfo)"
        return s + "".join(f"; {n}" for n in self.notes)


# --- parsing what the tools print (tested with recorded outputs) ---------------------------------------------------
def parse_nvidia_smi(text: str) -> list[tuple[str, float]]:
    """``name, memory.total`` lines (MiB, no units) → [(name, bytes)]."""
    out = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2 or not parts[-1].replace(".", "", 1).isdigit():
            raise InputError(f"accelerator local: nvidia-smi printed an unexpected line: {line[:80]!r}")
        out.append((",".join(parts[:-1]), float(parts[-1]) * MIB))
    return out


def parse_rocm_smi(text: str) -> list[tuple[str, float]]:
    """``rocm-smi --showproductname --showmeminfo vram --json`` → [(name, bytes)] per card."""
    try:
        doc = json.loads(text)
    except ValueError:
        raise InputError("accelerator local: rocm-smi printed no JSON") from None
    out = []
    for card, d in sorted(doc.items()):
        if not card.lower().startswith("card") or not isinstance(d, dict):
            continue
        low = {k.lower(): v for k, v in d.items()}
        total = low.get("vram total memory (b)")
        name = low.get("card series") or low.get("card model") or card
        if total is None or not str(total).isdigit():
            raise InputError(f"accelerator local: rocm-smi gave no 'VRAM Total Memory (B)' for {card}")
        out.append((str(name), float(total)))
    return out


def parse_meminfo(text: str) -> float:
    """``MemTotal:  16323412 kB`` → bytes (the kernel's kB are KiB)."""
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.M)
    if not m:
        raise InputError("accelerator local: /proc/meminfo has no MemTotal line")
    return float(m.group(1)) * 1024


def apple_working_set(memsize: float, wired_limit_mb: float = 0.0) -> float:
    """The GPU's share of unified memory: ``iogpu.wired_limit_mb`` when set (> 0), else macOS's default."""
    return wired_limit_mb * MIB if wired_limit_mb > 0 else APPLE_DEFAULT_WORKING_SET * memsize


def match(name: str) -> Accelerator | None:
    """The bundled entry this device name names (its id's words in order, whole words), the longest such id."""
    text = " " + re.sub(r"[^a-z0-9]+", " ", name.lower()) + " "
    best = None
    for aid, acc in bundled_accelerators().items():
        words = " " + " ".join(re.split(r"[^a-z0-9]+", aid.lower())) + " "
        if words in text and (best is None or len(aid) > len(best.id)):
            best = acc
    return best


# --- measuring the CPU ----------------------------------------------------------------------------------------------
def measure_cpu(nbytes: int = 256 * 2 ** 20, repeats: int = 3) -> tuple[float, float]:
    """(bytes/s, FLOP/s) of this CPU now: the best of ``repeats`` copies of an ``nbytes`` array (read + write), and
    the best float32 product of two 1,024² matrices. A few tenths of a second."""
    import numpy as np

    a = np.ones(nbytes // 8)
    b = np.empty_like(a)
    copy = min(_timed(lambda: np.copyto(b, a)) for _ in range(repeats))
    x = np.ones((1024, 1024), dtype=np.float32)
    mm = min(_timed(lambda: x @ x) for _ in range(repeats))
    return 2 * a.nbytes / copy, 2 * 1024 ** 3 / mm


def _timed(f) -> float:
    t = time.perf_counter()
    f()
    return max(time.perf_counter() - t, 1e-9)


def _run(cmd: list[str]) -> str | None:
    """A tool's output, or None when it is absent or fails."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout if p.returncode == 0 and p.stdout.strip() else None


@dataclass
class Machine:
    accelerator: Accelerator
    found: Found
    host_memory_bytes: float        # RAM beside a discrete GPU (0: unified, or the CPU itself)
    host_bandwidth: float           # measured (0: not measured)


def detect(run=None, meminfo: str | None = None, measure=None) -> Machine:
    """This machine (see the module docstring). ``run``, ``meminfo`` and ``measure`` are the tools (replaced in
    tests with recorded outputs); None: the real ones."""
    run, measure = run or _run, measure or measure_cpu
    if meminfo is None:
        p = Path("/proc/meminfo")
        meminfo = p.read_text() if p.exists() else ""
    ram = parse_meminfo(meminfo) if meminfo else 0.0
    gpus, tool = [], ""
    out = run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"])
    if out:
        gpus, tool = parse_nvidia_smi(out), "nvidia-smi"
    else:
        out = run(["rocm-smi", "--showproductname", "--showmeminfo", "vram", "--json"])
        if out:
            gpus, tool = parse_rocm_smi(out), "rocm-smi"
    if gpus:
        name, mem = gpus[0]
        base = match(name)
        if base is None:
            raise InputError(f"accelerator local: found {name} ({mem / GIB:,.1f} GiB, {tool}) but the calculator "
                             f"has no bandwidth or compute figures for it; pass --accelerator with the closest "
                             f"bundled id (capacity list accelerators) or a JSON file")
        found = Found(tool, name, mem, len(gpus), ram, base.id)
        acc = replace(base, id=LOCAL, name=f"{name} (this machine)", memory_bytes=mem, engine_memory_bytes=mem,
                      engine_memory_source=f"{tool} on this machine", status="measured")
        bw = measure()[0] if ram else 0.0
        return Machine(acc, found, ram, bw)
    brand = run(["sysctl", "-n", "machdep.cpu.brand_string"]) or ""
    if brand.strip().lower().startswith("apple"):
        memsize = float((run(["sysctl", "-n", "hw.memsize"]) or "0").strip() or 0)
        wired = float((run(["sysctl", "-n", "iogpu.wired_limit_mb"]) or "0").strip() or 0)
        base = match(brand)
        if base is None or not memsize:
            raise InputError(f"accelerator local: found {brand.strip()} but no table entry for its GPU; pass "
                             f"--accelerator with the closest bundled id")
        gpu = apple_working_set(memsize, wired)
        found = Found("sysctl", brand.strip(), memsize, 1, 0.0, base.id,
                      [f"the GPU may use {gpu / GIB:,.1f} GiB of it (" + ("iogpu.wired_limit_mb" if wired > 0 else
                                                                           "macOS's default working-set limit") + ")"])
        acc = replace(base, id=LOCAL, name=f"{brand.strip()} (this machine)", memory_bytes=memsize,
                      engine_memory_bytes=gpu, engine_memory_source="sysctl on this machine", status="measured")
        return Machine(acc, found, 0.0, 0.0)
    if not ram:
        raise InputError("accelerator local: no GPU tool answered and there is no /proc/meminfo to read the RAM "
                         "from; pass --accelerator with a bundled id or a JSON file")
    bw, flops = measure()
    cpu = _cpu_name()
    found = Found("/proc/meminfo", f"the CPU ({cpu})", ram, 1, 0.0, "",
                  [f"measured here: {bw / 1e9:,.1f} GB/s copying memory, {flops / 1e9:,.1f} GFLOP/s float32"])
    acc = Accelerator(id=LOCAL, name=f"this machine's CPU ({cpu})", kind="host", memory_bytes=ram, bandwidth=bw,
                      flops_16=flops, engines=("llama.cpp",), status="measured",
                      source="this machine: /proc/meminfo and a copy / matrix-product measurement",
                      engine_memory_bytes=ram, engine_memory_source="/proc/meminfo", unified_memory=True)
    return Machine(acc, found, 0.0, bw)


def _cpu_name() -> str:
    p = Path("/proc/cpuinfo")
    m = re.search(r"^model name\s*:\s*(.+)$", p.read_text(), re.M) if p.exists() else None
    return m.group(1).strip() if m else "unknown model"
