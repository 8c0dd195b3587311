"""Prefill (pp) and decode (tg) throughput of a GGUF: llama-bench when it is there, else the same method through
the Python API (``llama.tokens_per_second``). The two are never combined into one number: prefill is bound by
arithmetic, decode by reading the weights, and one blended figure hides which bound a change moves.

llama-bench is looked for in ``$LLAMA_BENCH``, on ``PATH``, then where ``make llama-bench`` builds it
(``build/llama.cpp/bin/llama-bench``, gitignored).
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from part1_capacity.experiments.engine import llama
from part1_capacity.experiments.engine.common import REPO
from part1_capacity.calculator.base.errors import InputError

BUILT = REPO / "build" / "llama.cpp" / "bin" / "llama-bench"
METHODS = ("auto", "llama-bench", "python")


def find_llama_bench() -> str | None:
    """Path of a llama-bench binary, or None."""
    for cand in (os.environ.get("LLAMA_BENCH"), shutil.which("llama-bench"), str(BUILT)):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    return None


def _summary(samples, method) -> dict:
    return {"tps": statistics.fmean(samples), "stddev": statistics.stdev(samples) if len(samples) > 1 else 0.0,
            "samples": list(samples), "method": method}


def run_llama_bench(path, n_prompt=512, n_gen=128, repeats=3, threads=2, binary=None) -> dict:
    """``llama-bench -m PATH -p n_prompt -n n_gen -t threads -r repeats -o json``: {"pp": ..., "tg": ...}."""
    binary = binary or find_llama_bench()
    if not binary:
        raise InputError("method: llama-bench not found (set LLAMA_BENCH, put it on PATH or run `make llama-bench`)")
    cmd = [binary, "-m", str(path), "-p", str(n_prompt), "-n", str(n_gen), "-t", str(threads), "-r", str(repeats),
           "-o", "json"]
    # CPU time the run got against the wall time it took: below 1 the engine's threads waited for CPUs that
    # other work held (a shared machine), which slows prefill and decode alike
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise RuntimeError(f"llama-bench failed ({out.returncode}): {out.stderr.strip()[-400:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    res = {"cpu_share": cpu / (wall * threads) if wall > 0 else None}
    for rec in json.loads(out.stdout):
        key = "pp" if rec["n_gen"] == 0 else "tg"
        samples = rec.get("samples_ts") or [rec["avg_ts"]]
        res[key] = {**_summary(samples, "llama-bench"), "tps": rec["avg_ts"], "stddev": rec["stddev_ts"],
                    "model_size": rec.get("model_size"), "model_n_params": rec.get("model_n_params")}
    res["command"] = " ".join(["llama-bench"] + cmd[1:])
    return res


def run_python(path, n_prompt=512, n_gen=128, repeats=3, threads=2) -> dict:
    """The same tests through the Python API (warm-up, then ``repeats`` runs each; mean and spread)."""
    with llama.Model(path) as model:
        res = {}
        if n_prompt:
            res["pp"] = _summary(llama.tokens_per_second(model, n_prompt=n_prompt, repeats=repeats, threads=threads),
                                 "python")
        if n_gen:
            res["tg"] = _summary(llama.tokens_per_second(model, n_gen=n_gen, repeats=repeats, threads=threads),
                                 "python")
    res["command"] = (f"part1_capacity.experiments.engine.llama.tokens_per_second(pp {n_prompt}, tg {n_gen}, "
                      f"repeats={repeats}, threads={threads})")
    return res


def measure(path, method="auto", n_prompt=512, n_gen=128, repeats=3, threads=2) -> dict:
    """pp and tg of one GGUF by ``method`` ("auto": llama-bench if found, else python)."""
    if method not in METHODS:
        raise InputError(f"method: '{method}' is not one of {', '.join(METHODS)}")
    if method == "auto":
        method = "llama-bench" if find_llama_bench() else "python"
    if method == "llama-bench":
        return run_llama_bench(path, n_prompt, n_gen, repeats, threads)
    return run_python(path, n_prompt, n_gen, repeats, threads)
