"""Which instruction sets the llama.cpp build really uses, read from the build itself — not assumed.

ggml's CPU backend answers ``ggml_cpu_has_<feature>()`` with what it was compiled for (``ggml-cpu.c``: each returns
1 when the compiler defined the feature's macro, e.g. ``__AVX512VNNI__``), so loading the same ``libggml-cpu`` that
llama-bench and matmul-bench link and asking it tells which dot-product kernels the ladder ran: with AVX512-VNNI or
AVX-VNNI off, the integer dot products take the AVX2 sequence whatever the CPU offers. Beside it, the CPU's own
flags (``/proc/cpuinfo``). ``python -m part1_capacity.experiments.engine.build_features --save`` writes
``results/part1/e2_build.json``; the engine-checks page reads it.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import sys

from part1_capacity.experiments.engine.common import REPO, save_result

LIB = REPO / "build" / "llama.cpp" / "bin" / "libggml-cpu.so"
# ggml's names (ggml-cpu.h) → the /proc/cpuinfo flag of the same instructions
FEATURES = {"avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c", "avx512": "avx512f",
            "avx512_vnni": "avx512_vnni", "avx512_bf16": "avx512_bf16", "avx_vnni": "avx_vnni"}


def build_features(lib_path=LIB) -> dict[str, int]:
    """{feature: 0/1} as the build reports it (``ggml_cpu_has_*``); a function the build lacks is left out."""
    lib = ctypes.CDLL(str(lib_path))
    out = {}
    for name in FEATURES:
        f = getattr(lib, f"ggml_cpu_has_{name}", None)
        if f is not None:
            f.restype = ctypes.c_int
            out[name] = int(f())
    return out


def main(argv=None) -> int:
    from course.machine.host import cpu_flags
    from course.machine.records import run_record

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save", action="store_true", help="write results/part1/e2_build.json")
    args = ap.parse_args(argv)
    if not LIB.is_file():
        print(f"no llama.cpp build at {LIB}: run `make llama`", file=sys.stderr)
        return 1
    flags = cpu_flags()
    result = {**run_record(program="python -m part1_capacity.experiments.engine.build_features"),
              "library": "build/llama.cpp/bin/libggml-cpu.so", "build": build_features(),
              "cpu": {name: int(flag in flags) for name, flag in FEATURES.items()}}
    print(json.dumps(result, indent=1))
    if args.save:
        print("saved", save_result("e2_build", result), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
