"""E2 — the quantization ladder: one F32 model → F16, Q8_0, Q5_0, Q4_K_M (llama.cpp's quantize API), prefill
(pp512) and decode (tg128) measured separately for each, next to what the calculator's roofline predicts on this
host's measured profile.

Predictions are the calculator's own (``plan.make_plan`` with the model profile read from the GGUF and this host
as the accelerator): pp512 = 512 / prefill time of a 512-token prompt; tg128 = 1 / decode-step time at 64 cached
tokens (the mean position of tg128's 128 steps). Per level the run also reports the fraction of the bandwidth
roofline decode reaches (tokens/s × bytes of weights read per token ÷ bandwidth) and the fraction of the host's
matmul peak prefill reaches.
"""
from __future__ import annotations

import os

from course import records
from part1_capacity.engine import bench, host, llama
from part1_capacity.engine.common import CALCULATOR_DTYPE, calculator_profile
from part1_capacity.engine.gguf_model import read_shape, shape_for_params, write_llama_gguf
from part1_capacity.errors import InputError

LEVELS = ("F16", "Q8_0", "Q5_0", "Q4_K_M")
N_PROMPT, N_GEN = 512, 128
SOURCE_FILE_TYPES = {0: "F32", 1: "F16"}   # general.file_type of a source we quantize from


def host_accelerator(measured: dict, desc: dict) -> dict:
    """This host as an entry of the calculator's accelerator table (``hardware.accelerator_from_dict`` format).
    The 16-bit peak is the fp32 GEMM rate: a CPU without 16-bit matrix units runs 16-bit weights at it."""
    return {
        "id": "this-host", "name": f"this host ({desc['cpu']}, {measured['threads']} threads)", "kind": "host",
        "memory_gb": desc["memory_bytes"] / 1e9,
        "bandwidth_gb_s": measured["bandwidth_bytes_per_s"] / 1e9,
        "bf16_tflops": measured["matmul_fp32_flops"] / 1e12,
        "int8_tflops": measured["matmul_int8_ops"] / 1e12,
        "interconnect_gb_s": 0, "interconnect": "none", "max_tp": 1, "status": "measured",
        "source": "measured on this machine by part1_capacity.engine.host: " + measured["method"]
                  + "; bf16_tflops holds the fp32 GEMM rate (no 16-bit matrix units in the engine's AVX2 build)",
        "measured": measured,
    }


def predict(profile, accelerator, level: str) -> dict:
    """The calculator's pp512 and tg128 for weights stored as ``level`` on ``accelerator``."""
    from part1_capacity.plan import Workload, make_plan

    dt = CALCULATOR_DTYPE[level.lower()]
    pre = make_plan(profile, accelerator, Workload(context=N_PROMPT, prompt=N_PROMPT, weights_dtype=dt,
                                                   kv_dtype="fp16")).prefill
    dec = make_plan(profile, accelerator, Workload(context=N_GEN // 2, weights_dtype=dt, kv_dtype="fp16")).decode
    return {"predicted_pp512_tps": N_PROMPT / pre.time_s, "predicted_tg128_tps": 1 / dec.time_s,
            "predicted_pp512_bound": pre.bound, "predicted_tg128_bound": dec.bound,
            "calculator_dtype": dt}


def measure_level(path, level, profile, accelerator, method, repeats, threads) -> dict:
    with llama.Model(path) as m:
        size, n_params = m.size_bytes, m.n_params
    r = bench.measure(path, method, N_PROMPT, N_GEN, repeats, threads)
    pp, tg = r["pp"], r["tg"]
    row = {
        "type": level, "file_bytes": os.path.getsize(path), "model_bytes": size, "n_params": n_params,
        "bits_per_weight": 8 * size / n_params,
        "pp512_tps": pp["tps"], "pp512_stddev": pp["stddev"], "pp512_samples": pp["samples"],
        "tg128_tps": tg["tps"], "tg128_stddev": tg["stddev"], "tg128_samples": tg["samples"],
        "method": pp["method"], "bench_command": r["command"],
    }
    row.update(predict(profile, accelerator, level))
    # How much of each roof the engine reaches: decode reads every weight once per token.
    row["bandwidth_fraction"] = row["tg128_tps"] * size / accelerator.bandwidth
    row["matmul_peak_fraction"] = row["pp512_tps"] * 2 * n_params / accelerator.peak_flops(row["calculator_dtype"])
    return row


def run(workdir, gguf=None, params=500_000_000, levels=LEVELS, method="auto", repeats=3, threads=None,
        accelerator=None, progress=None) -> dict:
    """The ladder in ``workdir`` (a scratch folder the caller deletes). ``gguf``: an F32/F16 source to quantize
    (default: write an F32 llama model of at least ``params`` parameters). ``accelerator``: a calculator
    accelerator (name, JSON path) instead of measuring this host."""
    from part1_capacity.hardware import accelerator_from_dict, load_accelerator

    threads = threads or host.engine_threads()
    bar = progress or _NoBar()
    acc = load_accelerator(accelerator) if accelerator is not None else None  # bad names fail before any work
    if gguf:
        shape = read_shape(gguf)
        if shape.file_type not in SOURCE_FILE_TYPES:
            raise InputError(f"--gguf: the source must be F32 or F16 (general.file_type 0 or 1), "
                             f"got file_type {shape.file_type}")
        source = gguf
    else:
        lshape = shape_for_params(params)
        source = write_llama_gguf(workdir / "model-f32.gguf", lshape,
                                  progress=lambda d, t: bar.update(0.5 * d / t, "writing the F32 model"))
        shape = read_shape(source)
    if acc is None:
        bar.update(0.5, "measuring this host")
        profile_dict = host_accelerator(host.measure(threads), records.host_description())
        acc = accelerator_from_dict(profile_dict, "this host")
    else:
        profile_dict = None
    bar.update(1.0, "host measured" if accelerator is None else f"predicting for {acc.id}")
    profile = calculator_profile(shape)
    rows = []
    for i, level in enumerate(levels):
        dst = workdir / f"model-{level}.gguf"
        bar.update(1 + 3 * i, f"quantizing {level}")
        llama.quantize(source, dst, level, threads)
        bar.update(1 + 3 * i + 1, f"measuring {level} (pp{N_PROMPT}, tg{N_GEN})")
        rows.append(measure_level(dst, level, profile, acc, method, repeats, threads))
        dst.unlink()
        bar.update(1 + 3 * (i + 1), f"{level} done")
    return {
        "levels": rows,
        "host_profile": profile_dict,   # the measured host as a calculator accelerator entry (None: not measured)
        "accelerator": acc.to_dict(),   # what the predictions used (bytes/s, FLOP/s)
        "model": {"name": shape.name, "n_params": shape.n_params, "n_layers": shape.n_layers,
                  "hidden_size": shape.hidden_size, "n_heads": shape.n_heads, "n_kv_heads": shape.n_kv_heads,
                  "source": str(gguf) if gguf else "generated F32 llama model (random weights, deleted after)"},
        "threads": threads, "repeats": repeats, "n_prompt": N_PROMPT, "n_gen": N_GEN,
        "method": rows[0]["method"] if rows else method,
    }


def total_steps(levels=LEVELS) -> int:
    return 1 + 3 * len(levels)


class _NoBar:
    def update(self, *a, **k):
        pass

