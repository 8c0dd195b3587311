"""E2 — the quantization ladder: one F32 model → F32, F16, Q8_0, Q5_0, Q4_K_M (llama.cpp's quantize API), prefill
(pp512) and decode (tg128) measured separately for each, at one or more thread counts, next to two predictions:

- ``predicted_pp512_tps`` / ``predicted_tg128_tps``: the per-weight-type speed model (``part1_capacity/calculator/plan/speed.py``)
  with this host's kernel constants (``results/part1/e2_kernels.json``, measured by ``engine/kernels.py`` on llama.cpp's
  own matmul kernels — never fitted to this ladder), applied to the weight types each file actually holds (read
  from the GGUF: Q4_K_M is Q4_K plus Q6_K); ``prediction_error`` = predicted ÷ measured − 1 for each;
- ``roofline_pp512_tps`` / ``roofline_tg128_tps``: the plain roofline (``plan.make_plan`` on this host's measured
  bandwidth and GEMM peak), one prefill speed for every type.

With ``calibrate`` the speed model's constants are timed in this session (kernel rounds before and after the
ladder), and each level's decode is predicted from its own weight types streamed by matmul-bench **right beside
it** (``beside_kernels``: just before and just after the level's llama-bench run, at its thread count): on this
virtual machine the bandwidth two threads get moves between minutes by more than the goal, and a constant timed
minutes away from the level it predicts carries that wander into the prediction.

pp512 = 512 / prefill time of a 512-token prompt; tg128 = 1 / decode-step time at 64 cached tokens (the mean
position of tg128's 128 steps). Per level the run also reports the fraction of the bandwidth roof decode reaches
(tokens/s × bytes of weights ÷ bandwidth) and the fraction of the host's fp32 GEMM peak prefill reaches.
"""
from __future__ import annotations

import os
from dataclasses import asdict
import statistics

from course.machine import records
from part1_capacity.calculator.hardware.accelerators import Kernels, kernels_from_dict
from part1_capacity.calculator.plan import speed
# bench and llama load llama_cpp: imported where the ladder runs, so reading a saved ladder (the site build,
# `make run`) needs no llama.cpp.
from part1_capacity.experiments.engine import host, kernels
from part1_capacity.experiments.engine.host import host_accelerator
from part1_capacity.experiments.engine.common import CALCULATOR_DTYPE, calculator_profile
from part1_capacity.experiments.engine.gguf_model import read_shape, shape_for_params, weight_types, write_llama_gguf
from part1_capacity.calculator.base.errors import InputError

LEVELS = ("F32", "F16", "Q8_0", "Q5_0", "Q4_K_M")
N_PROMPT, N_GEN = 512, 128
SOURCE_FILE_TYPES = {0: "F32", 1: "F16"}   # general.file_type of a source we quantize from


def roofline_predict(profile, accelerator, level: str) -> dict:
    """The plain roofline's pp512 and tg128 for weights stored as ``level`` (the calculator before the speed
    model: one prefill speed for every type)."""
    from dataclasses import replace

    from part1_capacity.calculator.plan.plan import Workload, make_plan

    acc = replace(accelerator, kernels=None)
    dt = CALCULATOR_DTYPE[level.lower()]
    pre = make_plan(profile, acc, Workload(context=N_PROMPT, prompt=N_PROMPT, weights_dtype=dt,
                                           kv_dtype="fp16")).prefill
    dec = make_plan(profile, acc, Workload(context=N_GEN // 2, weights_dtype=dt, kv_dtype="fp16")).decode
    return {"roofline_pp512_tps": N_PROMPT / pre.time_s, "roofline_tg128_tps": 1 / dec.time_s,
            "predicted_pp512_bound": pre.bound, "predicted_tg128_bound": dec.bound, "calculator_dtype": dt}


def speed_predict(types: dict, profile, k: Kernels) -> dict:
    """The speed model's pp512 and tg128 for a file holding ``types`` (``gguf_model.weight_types``) on a host
    with kernel constants ``k``: the same functions ``capacity plan`` uses, with the file's exact weight types."""
    from part1_capacity.calculator.sizing import roofline

    mix, out = types["matmul"], types["output"]
    attn_pre = float(roofline.prefill_attention_flops(profile, N_PROMPT))
    ctx = N_GEN // 2
    attn_dec = float(roofline.decode_attention_flops(profile, ctx, 1))
    cache = float(profile.cache_bytes(ctx, 2.0, 2.0))
    both = {t: mix.get(t, 0) + out.get(t, 0) for t in {**mix, **out}}
    pre = speed.host_prefill(mix, N_PROMPT, profile.n_layers, attn_pre, k, output_weights=out)
    dec = speed.host_decode(both, profile.n_layers, attn_dec, cache, k)
    return {"predicted_pp512_tps": N_PROMPT / pre.total, "predicted_tg128_tps": 1 / dec.total,
            "predicted_parts_s": {"pp512": {"matmuls": pre.matmuls, "attention": pre.attention,
                                            "overhead": pre.overhead},
                                  "tg128": {"matmuls": dec.matmuls, "attention": dec.attention,
                                            "overhead": dec.overhead}}}


def measure_level(path, level, profile, accelerator, method, repeats, threads, k: Kernels | None) -> dict:
    from part1_capacity.experiments.engine import bench, llama

    with llama.Model(path) as m:
        size, n_params = m.size_bytes, m.n_params
    r = bench.measure(path, method, N_PROMPT, N_GEN, repeats, threads)
    pp, tg = r["pp"], r["tg"]
    types = weight_types(path)
    row = {
        "type": level, "threads": threads, "file_bytes": os.path.getsize(path), "model_bytes": size,
        "n_params": n_params, "bits_per_weight": 8 * size / n_params, "weight_types": types,
        "pp512_tps": pp["tps"], "pp512_stddev": pp["stddev"], "pp512_samples": pp["samples"],
        "pp512_median_tps": statistics.median(pp["samples"]),
        "tg128_tps": tg["tps"], "tg128_stddev": tg["stddev"], "tg128_samples": tg["samples"],
        "tg128_median_tps": statistics.median(tg["samples"]),
        "method": pp["method"], "bench_command": r["command"], "load_average": records.load_average(),
        "cpu_share": r.get("cpu_share"),
    }
    row.update(roofline_predict(profile, accelerator, level))
    if k is not None:       # this host with measured kernels: the per-type model on the file's own types
        row.update(speed_predict(types, profile, k))
        row["prediction_basis"] = f"speed model, measured kernels ({threads} thread{'s' if threads > 1 else ''})"
    else:                   # a datasheet accelerator: the calculator's roofline with the data's per-type assumption
        row.update({"predicted_pp512_tps": row["roofline_pp512_tps"],
                    "predicted_tg128_tps": row["roofline_tg128_tps"],
                    "prediction_basis": speed.basis(accelerator, row["calculator_dtype"])})
    row["prediction_error"] = {m: row[f"predicted_{m}_tps"] / row[f"{m}_median_tps"] - 1
                               for m in ("pp512", "tg128")}
    # How much of each roof the engine reaches: decode reads every weight once per token.
    row["bandwidth_fraction"] = row["tg128_tps"] * size / accelerator.bandwidth
    row["matmul_peak_fraction"] = row["pp512_tps"] * 2 * n_params / accelerator.peak_flops(row["calculator_dtype"])
    return row


def kernels_for(threads: int) -> Kernels | None:
    """The saved kernel constants at ``threads`` threads (``results/part1/e2_kernels.json``), or None."""
    c = kernels.load_constants() or {}
    th = c.get(str(threads))
    if not th:
        return None
    return kernels_from_dict({"threads": threads, **th, "source": "results/part1/e2_kernels.json"})


SESSION_ROUNDS = (3, 2)   # kernel rounds measured before and after the ladder with ``calibrate``
BESIDE_REPS = 15          # timed runs of each streamed product beside a level (as in a kernel round)
BESIDE = "decode streamed beside each level"   # how a prediction from ``beside_kernels`` names its basis


def decode_types(weight_types: dict) -> list[str]:
    """The ggml types one decode step streams (matmul and output weights: ``kernels.decode_bytes_per_token``),
    in file order."""
    return list(dict.fromkeys(t for part in ("matmul", "output") for t in weight_types[part]))


def measure_beside(types, threads: int, when: str) -> list[dict]:
    """matmul-bench's streamed product of each of ``types`` at ``threads`` threads, tagged ``when`` ("before" /
    "after" the level it sits beside) with the 1-minute load average at the time: in 4 KB pages, and also in the
    2 MB pages the engine reads a type from where that differs (``kernels.engine_pages``), the two alternated
    (4 KB first before the level, last after it) so the machine's drift touches both alike."""
    out = []
    for t in types:
        pages = ["4K"] + (["2M"] if kernels.engine_pages(kernels.repacks(t)) == "2M" else [])
        for size in pages if when == "before" else pages[::-1]:
            out.append({**kernels.stream_run(t, threads, BESIDE_REPS, size), "when": when,
                        "load_average": records.load_average()})
    return out


def _beside_runs(row: dict, when, pages: str) -> list[dict]:
    """The streamed runs beside ``row`` taken ``when`` and in ``pages`` ("engine": each type in the pages the engine
    reads it from; a run saved before page sizes were recorded counts as 4 KB and, for "engine", is used as it is)."""
    runs = [r for r in (row.get("beside_kernels") or {}).get("runs", []) if r["when"] in when]
    if pages == "engine" and not any("pages" in r for r in runs):
        return runs
    return [r for r in runs
            if kernels.run_pages(r) == (kernels.engine_pages(r["repacked"]) if pages == "engine" else pages)]


def beside_constants(base: dict, row: dict, when=("before", "after"), pages: str = "engine") -> dict:
    """One thread count's constants ``base`` with each streamed type's decode cost replaced by what was measured
    beside ``row`` (``when``: before it, after it, or both; ``pages``: "engine", "4K" or "2M"): the median over
    those runs, each less ``base``'s node overhead. ``base`` unchanged when the row carries no such runs."""
    runs = _beside_runs(row, when, pages)
    types = {t: dict(v) for t, v in base.get("types", {}).items()}
    for t in {r["type"] for r in runs} & types.keys():
        types[t]["decode_s_per_weight"] = statistics.median(
            kernels.per_weight_cost(r, base.get("op_overhead_s", 0.0)) for r in runs if r["type"] == t)
    return {**base, "types": types}


def run(workdir, gguf=None, params=500_000_000, levels=LEVELS, method="auto", repeats=3, threads=None,
        accelerator=None, progress=None, calibrate=False) -> dict:
    """The ladder in ``workdir`` (a scratch folder the caller deletes). ``gguf``: an F32/F16 source to quantize
    (default: write an F32 llama model of at least ``params`` parameters). ``accelerator``: a calculator
    accelerator (name, JSON path) instead of measuring this host. ``threads``: a count or a sequence of counts;
    ``levels`` holds the first, ``levels_by_threads`` every count (each file is measured at all of them while
    it exists). ``calibrate``: also time the kernel constants in this session, in rounds before and after the
    ladder (``SESSION_ROUNDS``), and predict from those — this machine's memory bandwidth drifts over tens of
    minutes by more than the goal, and constants measured around the ladder share its drift; they are still
    measured on matmul-bench, never on the ladder."""
    from part1_capacity.experiments.engine import llama
    from part1_capacity.calculator.hardware.accelerators import accelerator_from_dict, load_accelerator

    all_threads = tuple(threads) if isinstance(threads, (tuple, list)) else (threads or host.engine_threads(),)
    threads = all_threads[0]
    bar = progress or _NoBar()
    acc = load_accelerator(accelerator) if accelerator is not None else None  # bad names fail before any work
    if calibrate and accelerator is not None:
        raise InputError("--calibrate times this host's kernels; it cannot go with --accelerator")
    if calibrate and not kernels.find_binary():
        raise InputError("--calibrate needs matmul-bench: run `make matmul-bench` (or set MATMUL_BENCH)")
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
    accs, profile_dict = {}, None
    if acc is None:
        bar.update(0.5, "measuring this host")
        for th in all_threads:
            k = kernels.load_constants() or {}
            entry = host_accelerator(host.measure(th), records.host_description(), k.get(str(th)))
            accs[th] = accelerator_from_dict(entry, "this host")
            profile_dict = profile_dict or entry
        acc = accs[threads]
    else:
        accs = {th: acc for th in all_threads}
    bar.update(1.0, "host measured" if accelerator is None else f"predicting for {acc.id}")
    session = []
    if calibrate:
        session += kernels.measure(all_threads, rounds=SESSION_ROUNDS[0],
                                   progress=lambda s: bar.update(1.0, f"kernels before the ladder, {s}"))
    profile = calculator_profile(shape)
    by_threads = {str(th): [] for th in all_threads}
    source_type = SOURCE_FILE_TYPES[shape.file_type]
    for i, level in enumerate(levels):
        dst = source if level == source_type else workdir / f"model-{level}.gguf"
        bar.update(1 + 3 * i, f"quantizing {level}")
        if dst != source:
            llama.quantize(source, dst, level, threads)
        streamed = decode_types(weight_types(dst))
        for th in all_threads:
            bar.update(1 + 3 * i + 1, f"measuring {level} (pp{N_PROMPT}, tg{N_GEN}, {th} threads)")
            before = measure_beside(streamed, th, "before") if calibrate else []
            row = measure_level(dst, level, profile, accs[th], method, repeats, th,
                                kernels_for(th) if accelerator is None else None)
            if calibrate:
                row["beside_kernels"] = {"reps": BESIDE_REPS,
                                         "runs": kernels.compact(before + measure_beside(streamed, th, "after"))}
            by_threads[str(th)].append(row)
        if dst != source:
            dst.unlink()
        bar.update(1 + 3 * (i + 1), f"{level} done")
    if calibrate:
        after = kernels.measure(all_threads, rounds=SESSION_ROUNDS[1],
                                progress=lambda s: bar.update(total_steps(levels), f"kernels after the ladder, {s}"))
        session += [{**r, "round": r["round"] + SESSION_ROUNDS[0]} for r in after]
    rows = by_threads[str(threads)]
    result = {
        "levels": rows,
        "levels_by_threads": by_threads,
        "host_profile": profile_dict,   # the measured host as a calculator accelerator entry (None: not measured)
        "accelerator": acc.to_dict(),   # what the predictions used (bytes/s, FLOP/s)
        "model": {"name": shape.name, "n_params": shape.n_params, "n_layers": shape.n_layers,
                  "hidden_size": shape.hidden_size, "n_heads": shape.n_heads, "n_kv_heads": shape.n_kv_heads,
                  "gguf_shape": asdict(shape),
                  "source": str(gguf) if gguf else "generated F32 llama model (random weights, deleted after)"},
        "threads": threads, "all_threads": list(all_threads), "repeats": repeats, "n_prompt": N_PROMPT, "n_gen": N_GEN,
        "method": rows[0]["method"] if rows else method,
        "niceness": os.nice(0),   # this process's scheduling priority (0: the default, as other users' work)
    }
    if calibrate:
        result["session_kernels"] = {"rounds_before": SESSION_ROUNDS[0], "rounds_after": SESSION_ROUNDS[1],
                                     "runs": kernels.compact(session),
                                     "constants": kernels.constants_from_runs(session)}
        result = repredict(result)
    return result


def repredict(result: dict, constants: dict | None = None, source: str = "the given kernel constants",
              beside=("before", "after"), pages: str = "engine") -> dict:
    """The speed model's predictions for a saved run, from ``constants`` if given, else the kernels measured around
    the run itself (``session_kernels``, with ``calibrate``), else the saved kernel constants
    (``results/part1/e2_kernels.json``, so a later kernel measurement updates every such ladder alike): what the
    benchmark script and the site show. Without ``constants``, a level whose streamed decode was measured beside it
    (``beside_kernels``) takes its decode costs from those runs (``beside``: the runs before it, after it, or both;
    ``pages``: in the pages the engine reads each type from, or all in 4 KB or 2 MB pages).
    Rows measured on a named accelerator (no host profile) are left as they are."""
    from part1_capacity.experiments.engine.gguf_model import GGUFShape

    if not result.get("host_profile") or "gguf_shape" not in result["model"]:
        return result          # measured for a named accelerator, or saved before the speed model
    session = (result.get("session_kernels") or {}).get("constants")
    where = source if constants else "kernels measured around this run" if session else "results/part1/e2_kernels.json"
    use_beside = not constants
    constants = constants or session or kernels.load_constants() or {}
    profile = calculator_profile(GGUFShape(**result["model"]["gguf_shape"]))
    out = {**result, "levels_by_threads": {}}
    for th, rows in (result.get("levels_by_threads") or {str(result["threads"]): result["levels"]}).items():
        c = constants.get(str(th))
        new = []
        for r in rows:
            r = dict(r)
            near = use_beside and c and bool(_beside_runs(r, beside, pages))
            basis = f"{where}, {BESIDE}" if near else where
            k = kernels_from_dict({"threads": int(th), **(beside_constants(c, r, beside, pages) if near else c),
                                         "source": basis}) if c else None
            if k is not None and r.get("weight_types"):
                r.update(speed_predict(r["weight_types"], profile, k))
                r["prediction_basis"] = f"speed model, {basis} ({th} thread{'s' if th != '1' else ''})"
                r["prediction_error"] = {m: r[f"predicted_{m}_tps"] / r[f"{m}_median_tps"] - 1
                                         for m in ("pp512", "tg128")}
            new.append(r)
        out["levels_by_threads"][th] = new
    out["levels"] = out["levels_by_threads"][str(result["threads"])]
    return out


TG_GOAL, PP_GOAL = 0.15, 0.25     # the speed model's accuracy goals: |predicted ÷ measured − 1|
STUDY = {"size": 0.15, "prefill_gain": 0.60, "decode_gain": 1.48, "theory": 6.5,
         "source": "the original study's F32 → Q4_K_M ladder: file 0.15× the size, prefill +60 %, decode +148 % "
                   "(2.48×) where the size ratio promised 6.5×"}


def saved_ladders(constants: dict | None = None, source: str = "the given kernel constants") -> dict[str, dict]:
    """Every saved ladder run (``results/part1/e2.json`` and ``results/part1/e2_*.json`` except the kernel constants), with
    the speed model's predictions recomputed (``repredict``: from ``constants`` if given, else each run's own
    kernel rounds, else the saved kernel constants)."""
    from part1_capacity.experiments.engine.common import RESULTS, load_result

    out = {}
    for path in sorted(RESULTS.glob("e2*.json")):
        name = path.stem
        if name == kernels.RESULT:
            continue
        r = load_result(name)
        if r and r.get("levels"):
            out[name] = repredict(r, constants, source)
    return out


def _spread(samples) -> float:
    """(largest − smallest) ÷ median of one test's timed runs: how far the machine let one measurement wander."""
    return (max(samples) - min(samples)) / statistics.median(samples) if len(samples) > 1 else 0.0


def round_predictions(result: dict) -> dict:
    """For a run with its own kernel rounds: the predictions each single round's constants give,
    {(threads, type): {"pp512": [tok/s per round], "tg128": [...]}} — how far the machine's own wander between
    rounds moves the prediction. Empty without ``session_kernels``."""
    runs = (result.get("session_kernels") or {}).get("runs") or []
    out: dict = {}
    for i in sorted({r["round"] for r in runs}):
        one = repredict(result, kernels.constants_from_runs([r for r in runs if r["round"] == i]), "one round")
        for th, levels in one["levels_by_threads"].items():
            for lv in levels:
                if lv.get("predicted_tg128_tps") is not None:
                    d = out.setdefault((int(th), lv["type"]), {"pp512": [], "tg128": []})
                    d["pp512"].append(lv["predicted_pp512_tps"])
                    d["tg128"].append(lv["predicted_tg128_tps"])
    return out


def beside_predictions(result: dict) -> dict:
    """For a run with streamed decode measured beside each level: the tg128 each side alone predicts, and (where
    the run timed both page sizes) what the streams in 4 KB pages alone predict,
    {(threads, type): {"before": tok/s, "after": tok/s, "4K": tok/s}} — how far the machine moved while the level
    ran, and how far the page size moves the prediction. Empty without ``beside_kernels``."""
    out: dict = {}
    sides = [((w,), "engine", w) for w in ("before", "after")]
    if any(kernels.run_pages(x) != "4K" for rows in (result.get("levels_by_threads") or {}).values() for r in rows
           for x in (r.get("beside_kernels") or {}).get("runs", [])):
        sides.append((("before", "after"), "4K", "4K"))
    for when, pages, key in sides:
        for th, levels in repredict(result, beside=when, pages=pages)["levels_by_threads"].items():
            for lv in levels:
                if BESIDE in lv.get("prediction_basis", ""):
                    out.setdefault((int(th), lv["type"]), {})[key] = lv["predicted_tg128_tps"]
    return out


def beside_rates(row: dict, pages: str = "engine") -> dict:
    """GB/s of each type streamed beside a level in ``pages`` (as ``beside_constants``),
    {type: {"before": GB/s, "after": GB/s}} (medians of its runs)."""
    out: dict = {}
    for r in _beside_runs(row, ("before", "after"), pages):
        out.setdefault(r["type"], {})[r["when"]] = kernels.stream_rate(r) / 1e9
    return out


def validation_rows(ladders: dict[str, dict]) -> list[dict]:
    """One row per (run, threads, level) with a speed-model prediction: measured medians, predictions, errors,
    and whether each is within the goal (tg128 15 %, pp512 25 %)."""
    rows = []
    for name, r in ladders.items():
        per_round = round_predictions(r)
        per_side = beside_predictions(r)
        for th, levels in (r.get("levels_by_threads") or {str(r["threads"]): r["levels"]}).items():
            for lv in levels:
                if not lv.get("prediction_error") or "speed model" not in lv.get("prediction_basis", ""):
                    continue
                e = lv["prediction_error"]
                rows.append({"run": name, "params": r["model"]["n_params"], "threads": int(th), "type": lv["type"],
                             "pp512": lv.get("pp512_median_tps", lv["pp512_tps"]),
                             "pp512_predicted": lv["predicted_pp512_tps"], "pp512_error": e["pp512"],
                             "tg128": lv.get("tg128_median_tps", lv["tg128_tps"]),
                             "tg128_predicted": lv["predicted_tg128_tps"], "tg128_error": e["tg128"],
                             "pp512_ok": abs(e["pp512"]) <= PP_GOAL, "tg128_ok": abs(e["tg128"]) <= TG_GOAL,
                             "pp512_spread": _spread(lv["pp512_samples"]), "tg128_spread": _spread(lv["tg128_samples"]),
                             "load_average": lv.get("load_average"), "cpu_share": lv.get("cpu_share"),
                             "basis": lv["prediction_basis"].removeprefix("speed model, "),
                             "rounds": per_round.get((int(th), lv["type"])),
                             "beside": per_side.get((int(th), lv["type"])), "beside_gbs": beside_rates(lv)})
    return rows


def study_ratios(levels: list[dict]) -> dict | None:
    """The original study's four figures computed from one ladder's F32 and Q4_K_M rows (medians)."""
    lv = {x["type"]: x for x in levels}
    if not {"F32", "Q4_K_M"} <= lv.keys():
        return None
    f32, q4 = lv["F32"], lv["Q4_K_M"]

    def med(x, m):
        return x.get(f"{m}_median_tps", x[f"{m}_tps"])

    return {"size": q4["file_bytes"] / f32["file_bytes"],
            "prefill_gain": med(q4, "pp512") / med(f32, "pp512") - 1,
            "decode_gain": med(q4, "tg128") / med(f32, "tg128") - 1,
            "theory": f32["file_bytes"] / q4["file_bytes"]}


def total_steps(levels=LEVELS) -> int:
    return 1 + 3 * len(levels)


class _NoBar:
    def update(self, *a, **k):
        pass

