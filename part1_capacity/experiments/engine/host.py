"""This machine as an accelerator: memory bandwidth and matrix-multiply throughput, measured with the engine's
thread count and the engine's instruction set, saved as a profile the calculator loads.

Why the engine's instruction set: the project builds llama.cpp portable (AVX2, FMA, F16C; see the Makefile), so
wider units the CPU may have (AVX-512, VNNI, BF16) are invisible to it. The measurement runs in a subprocess with
MKL and oneDNN capped at AVX2, the same ceiling the engine has.

- bandwidth: the best of several reads of a 512 MiB buffer (many times the last-level cache), split over the
  engine's threads: a bitwise-OR reduction, one integer OR per 8 bytes, so memory and not arithmetic limits it
  (a float sum carries a dependency chain and can read slower than memory delivers).
- 16-bit matmul: an fp32 GEMM. A CPU without 16-bit matrix units multiplies 16-bit weights at its fp32 FMA rate
  (llama.cpp widens F16 to F32 with F16C before the FMAs), so that is the ceiling for 16-bit weights.
- 8-bit matmul: an int8 × int8 → int32 GEMM (``torch._int_mm``).

Run alone: ``python -m part1_capacity.experiments.engine.host --threads 2`` prints the raw measurement as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

from course.machine.host import usable_cpus

ENGINE_ISA_ENV = {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
BANDWIDTH_BUFFER_BYTES = 512 << 20
GEMM_N = 2048


def engine_threads() -> int:
    """The engine's thread count: the CPUs this process may run on (llama.cpp's default is the physical cores;
    on the course's 2-core machines the two agree)."""
    return usable_cpus()




def _best_seconds(fn, repeats):
    fn()  # warm-up: page faults, thread pool start, kernel selection
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), times


def _threaded_read(nbytes: int, threads: int):
    """A function that reads ``nbytes`` once with ``threads`` threads (numpy releases the GIL in reductions)."""
    import threading

    import numpy as np

    parts = np.array_split(np.ones(nbytes // 8, dtype=np.int64), threads)

    def read():
        workers = [threading.Thread(target=np.bitwise_or.reduce, args=(p,)) for p in parts]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    return read


def _measure(threads: int, repeats: int) -> dict:
    """Runs inside the subprocess (the ISA caps must be set before torch loads MKL/oneDNN)."""
    import torch

    torch.set_num_threads(threads)
    t_bw, bw_times = _best_seconds(_threaded_read(BANDWIDTH_BUFFER_BYTES, threads), repeats + 2)
    n = GEMM_N
    a, b = torch.randn(n, n), torch.randn(n, n)
    t_f32, f32_times = _best_seconds(lambda: torch.mm(a, b), repeats)
    ai = torch.randint(-127, 127, (n, n), dtype=torch.int8)
    bi = torch.randint(-127, 127, (n, n), dtype=torch.int8)
    t_i8, i8_times = _best_seconds(lambda: torch._int_mm(ai, bi), repeats)
    flops = 2 * n ** 3
    return {
        "threads": threads,
        # what the cap did, as torch reports it (the vector unit ATen dispatches to), not the cap we asked for
        "isa_cap": torch.backends.cpu.get_cpu_capability(),
        "bandwidth_bytes_per_s": BANDWIDTH_BUFFER_BYTES / t_bw,
        "bandwidth_all_bytes_per_s": [BANDWIDTH_BUFFER_BYTES / t for t in bw_times],
        "matmul_fp32_flops": flops / t_f32,
        "matmul_fp32_all_flops": [flops / t for t in f32_times],
        "matmul_int8_ops": flops / t_i8,
        "matmul_int8_all_ops": [flops / t for t in i8_times],
        "method": (f"best of {repeats + 2} reads (OR-reduction) of a {BANDWIDTH_BUFFER_BYTES >> 20} MiB buffer; best of "
                   f"{repeats} {n}x{n}x{n} GEMMs (fp32 torch.mm, int8 torch._int_mm); torch {torch.__version__}, "
                   f"{threads} threads, MKL/oneDNN capped at AVX2"),
    }


def measure(threads: int | None = None, repeats: int = 5) -> dict:
    """Measure this host in a subprocess with the engine's instruction-set cap; returns the raw figures."""
    threads = threads or engine_threads()
    env = {**os.environ, **ENGINE_ISA_ENV, "OMP_NUM_THREADS": str(threads)}
    out = subprocess.run([sys.executable, "-m", "part1_capacity.experiments.engine.host", "--threads", str(threads),
                          "--repeats", str(repeats)], env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"host measurement failed: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=engine_threads())
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    print(json.dumps(_measure(args.threads, args.repeats)))


def host_accelerator(measured: dict, desc: dict, kernel_constants: dict | None = None) -> dict:
    """This host as an entry of the calculator's accelerator table (``accelerators.accelerator_from_dict`` format).
    The 16-bit peak is the fp32 GEMM rate: a CPU without 16-bit matrix units runs 16-bit weights at it.
    ``kernel_constants``: the measured kernel costs at this thread count (``engine/kernels.py``), which make
    ``capacity plan`` take this host's phase times from the per-type speed model."""
    entry = {
        "id": "this-host", "name": f"this host ({desc['cpu']}, {measured['threads']} threads)", "kind": "host",
        "memory_gb": desc["memory_bytes"] / 1e9,
        "bandwidth_gb_s": measured["bandwidth_bytes_per_s"] / 1e9,
        "bf16_tflops": measured["matmul_fp32_flops"] / 1e12,
        "int8_tflops": measured["matmul_int8_ops"] / 1e12,
        "interconnect_gb_s": 0, "interconnect": "none", "max_tp": 1, "status": "measured",
        "source": "measured on this machine by part1_capacity.experiments.engine.host: " + measured["method"]
                  + "; bf16_tflops holds the fp32 GEMM rate (no 16-bit matrix units in the engine's AVX2 build)",
        "measured": measured,
    }
    if kernel_constants:
        entry["kernels"] = {"threads": measured["threads"], "op_overhead_s": kernel_constants["op_overhead_s"],
                            "types": kernel_constants["types"],
                            "source": "llama.cpp's matmul kernels timed by matmul-bench (engine/kernels.py, "
                                      "results/part1/e2_kernels.json)"}
    return entry


if __name__ == "__main__":
    main()
