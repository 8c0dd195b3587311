"""`--accelerator local` (calculator/hardware/local_machine.py): the runtime tools' outputs parsed from recorded text — no
GPU needed — and the detection order (NVIDIA, AMD, Apple, the CPU) driven by fake tools."""
import json

import pytest

from course.shared.units import GIB, MIB
from part1_capacity.calculator.hardware import local_machine as local
from part1_capacity.calculator.base.errors import InputError
from tests.support.in_process import capacity

# `nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits` on two RTX 4090s (MiB, as the driver
# reports them: 24,564 MiB, not the marketed 24 GB)
NVIDIA = "NVIDIA GeForce RTX 4090, 24564\nNVIDIA GeForce RTX 4090, 24564\n"
# `rocm-smi --showproductname --showmeminfo vram --json` on an MI300X (bytes, as strings)
ROCM = json.dumps({"card0": {"Card Series": "AMD Instinct MI300X", "Card Model": "0x74a1",
                             "VRAM Total Memory (B)": "205822885888", "VRAM Total Used Memory (B)": "285097984"}})
MEMINFO = "MemTotal:       65758532 kB\nMemFree:        1234 kB\nMemAvailable:   60000000 kB\n"


def fake_tools(outputs: dict):
    """A `run` that answers each tool from ``outputs`` (by the command's first word) and None otherwise."""
    return lambda cmd: outputs.get(cmd[0] if cmd[0] != "sysctl" else " ".join(cmd[:3]))


def never_measure():
    return (50e9, 1e12)


def test_parse_nvidia_smi():
    assert local.parse_nvidia_smi(NVIDIA) == [("NVIDIA GeForce RTX 4090", 24564 * MIB)] * 2
    with pytest.raises(InputError, match="nvidia-smi"):
        local.parse_nvidia_smi("No devices were found")


def test_parse_rocm_smi():
    assert local.parse_rocm_smi(ROCM) == [("AMD Instinct MI300X", 205822885888.0)]
    with pytest.raises(InputError, match="rocm-smi"):
        local.parse_rocm_smi("not json")


def test_parse_meminfo_in_kib():
    assert local.parse_meminfo(MEMINFO) == 65758532 * 1024
    with pytest.raises(InputError, match="MemTotal"):
        local.parse_meminfo("MemFree: 1 kB")


def test_apple_working_set():
    assert local.apple_working_set(64 * GIB) == 48 * GIB                 # the 3/4 default
    assert local.apple_working_set(64 * GIB, 57344) == 56 * GIB          # iogpu.wired_limit_mb raised by the user


def test_names_match_the_bundled_entries():
    assert local.match("NVIDIA GeForce RTX 4090").id == "rtx-4090"
    assert local.match("NVIDIA L4").id == "l4" and local.match("NVIDIA L40S").id == "l40s"   # whole words
    assert local.match("NVIDIA RTX PRO 6000 Blackwell Workstation Edition").id == "rtx-pro-6000"
    assert local.match("Apple M2 Max").id == "m2-max"
    assert local.match("Matrox G200") is None


def test_nvidia_first_with_the_driver_memory_and_the_host():
    m = local.detect(fake_tools({"nvidia-smi": NVIDIA, "rocm-smi": ROCM}), MEMINFO, never_measure)
    assert m.found.tool == "nvidia-smi" and m.found.count == 2
    assert m.accelerator.memory_bytes == 24564 * MIB and m.accelerator.engine_memory_bytes == 24564 * MIB
    assert m.accelerator.bandwidth == local.match("NVIDIA GeForce RTX 4090").bandwidth    # the datasheet's speed
    assert m.host_memory_bytes == 65758532 * 1024 and m.host_bandwidth == 50e9
    assert "2 × NVIDIA GeForce RTX 4090" in m.found.describe() and "nvidia-smi" in m.found.describe()


def test_amd_when_no_nvidia():
    m = local.detect(fake_tools({"rocm-smi": ROCM}), MEMINFO, never_measure)
    assert m.found.tool == "rocm-smi" and m.accelerator.memory_bytes == 205822885888.0
    assert m.found.matched == "mi300x"


def test_apple_silicon_working_set():
    tools = {"sysctl -n machdep.cpu.brand_string": "Apple M2 Max\n", "sysctl -n hw.memsize": str(96 * GIB),
             "sysctl -n iogpu.wired_limit_mb": "0"}
    m = local.detect(fake_tools(tools), "", never_measure)
    assert m.accelerator.memory_bytes == 96 * GIB and m.accelerator.engine_memory_bytes == 72 * GIB
    assert "working-set" in m.found.describe()


def test_cpu_when_no_gpu_tool():
    m = local.detect(fake_tools({}), MEMINFO, never_measure)
    assert m.accelerator.kind == "host" and m.accelerator.memory_bytes == 65758532 * 1024
    assert m.accelerator.bandwidth == 50e9 and m.accelerator.flops_16 == 1e12
    assert "/proc/meminfo" in m.found.describe() and "measured here" in m.found.describe()


def test_unknown_card_is_refused_naming_what_was_found():
    with pytest.raises(InputError, match="Matrox G200.*closest bundled id"):
        local.detect(fake_tools({"nvidia-smi": "Matrox G200, 16\n"}), MEMINFO, never_measure)


def test_measure_cpu_gives_positive_rates():
    bw, flops = local.measure_cpu(nbytes=8 * 2 ** 20, repeats=1)
    assert bw > 0 and flops > 0


def test_cli_local_on_this_machine(monkeypatch):
    # this machine, whatever it is, with the tools and the measurement replaced: the text says what it found
    monkeypatch.setattr(local, "_run", lambda cmd: None)
    monkeypatch.setattr(local, "measure_cpu", never_measure)
    r = capacity("fit", "--model", "qwen2.5-0.5b", "--accelerator", "local", "--context", "4096")
    assert r.returncode == 0 and r.stdout.startswith("this machine: found the CPU")
    r = capacity("plan", "--model", "qwen2.5-0.5b", "--accelerator", "local", "--context", "4096", "--json")
    d = json.loads(r.stdout)
    assert r.returncode == 0 and d["local"]["tool"] == "/proc/meminfo" and d["accelerator"] == "local"
