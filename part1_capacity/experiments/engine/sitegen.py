"""Tables, charts and findings for site/part1/engine_checks.md, from the saved runs in part1_capacity/results/
(e1.json, e1_structures.json, e2.json, host_accelerator.json). Nothing is measured here: the site builds in seconds.
"""
from __future__ import annotations

from pathlib import Path

from course import records
from part1_capacity.experiments.engine.common import load_result
from course.units import MIB

NAME = "engine"


def _missing(out, names, what):
    for n in names:
        (out / n).write_text(f"*No saved {what} run: `capacity {what} --save` writes one.*\n")


def _run_info(r) -> str:
    rec = records.read_record(r)        # e1.json was saved with "date" before the record's "date_utc"
    h = rec["host"]
    note = f" — {r['note']}" if r.get("note") else ""
    load = rec["load_average_at_start"]
    load = f", load average {load:.1f} at the start" if load is not None else ""
    return (f"Run on {rec['date_utc']}, host `{h['node']}`: {h['cpu']}, {h['cpus']} CPUs, "
            f"{h['memory_bytes'] / 2 ** 30:.0f} GiB, llama-cpp-python {r['llama_cpp_python']}{load}{note}. "
            f"Command: `{rec['command']}`\n")


# --- E1 for every structure -----------------------------------------------------------------------------------------
COMPONENTS = {"K": "K (full layers)", "V": "V (full layers)", "K_swa": "K (window cache)",
              "V_swa": "V (window cache)", "R": "R (conv state)", "S": "S (SSM / delta-net state)"}


def e1_anchor(row) -> str:
    """The HTML id of a tiny model's row in the structures table (the calculator page links to it)."""
    return f"e1-{row['selector']}-{row['architecture']}".replace("_", "-").replace(".", "-")


def _fmt(n) -> str:
    from part1_capacity.calculator.fmt import fmt_bytes

    return fmt_bytes(n)


def e1_structures_table(r, context=4096, n_seq=4) -> str:
    """One row per buffer of each tiny model at ``context`` tokens over ``n_seq`` sequences: the law, what
    llama.cpp's log reports and what its rules predict; the last column counts the matching cases."""
    rows = [f"| structure | model (GGUF) | buffer | law, {context:,} tokens × {n_seq} seq | llama.cpp's log "
            "(±0.005 MiB) | llama.cpp rule | cases matching |", "|---|---|---|---:|---:|---:|---|"]
    for row in r["structures"]:
        cases = [(c["context"], c["n_seq"]) for c in row["cases"]]
        i = cases.index((context, n_seq)) if (context, n_seq) in cases else len(cases) - 1
        ok = sum(c["match"] for c in row["details"])
        first = True
        for comp in row["predicted"]:
            name = (f'<a id="{e1_anchor(row)}"></a>`{row["architecture"]}`' if first
                    else "")
            rows.append(f"| {row['structure'] if first else ''} | {name} | {COMPONENTS.get(comp, comp)} | "
                        f"{_fmt(row['law'][comp][i])} | {_fmt(row['reported'][comp][i])} | "
                        f"{_fmt(row['predicted'][comp][i])} | {f'{ok}/{len(cases)}' if first else ''} |")
            first = False
    return "\n".join(rows) + "\n"


def e1_confirmations(r=None) -> dict:
    """structure id → [(GGUF architecture, row anchor)] of the tiny models whose every buffer matched llama.cpp in
    the saved structures run."""
    r = r if r is not None else load_result("e1_structures")
    out = {}
    for row in (r or {}).get("structures", []):
        if row["match"]:
            out.setdefault(row["structure"], []).append((row["architecture"], e1_anchor(row)))
    return out


# --- E1 ------------------------------------------------------------------------------------------------------------
def e1_tables(r) -> tuple[str, str]:
    rows = ["| KV type | context (cells) | llama.cpp's log line | reported bytes | calculator × cells |",
            "|---|---:|---|---:|---:|"]
    for t in r["by_kv_type"]:
        for cells, rep, line in zip(t["cells"], t["reported_bytes"], t["log_lines"]):
            size = line.split("size =")[1].split("(")[0].strip()
            rows.append(f"| {t['kv_type']} | {cells:,} | `size = {size}` | {rep:,} | "
                        f"{t['formula_bytes_per_token'] * cells:,.0f} |")
    summary = ["| KV type | fitted slope (bytes/token) | calculator (bytes/token) | intercept (bytes) | "
               "equal to the byte |", "|---|---:|---:|---:|---|"]
    for t in r["by_kv_type"]:
        summary.append(f"| {t['kv_type']} | {t['slope_bytes_per_token']:,.2f} | "
                       f"{t['formula_bytes_per_token']:,.0f} | {t['intercept_bytes']:,.0f} | "
                       f"{'yes' if t['match'] else '**no**'} |")
    return "\n".join(rows) + "\n", "\n".join(summary) + "\n"


def e1_model(r) -> str:
    m = r["model"]
    return (f"Model: {m['n_params']:,} parameters, {m['n_layers']} layers, {m['n_heads']} query heads, "
            f"**{m['n_kv_heads']} KV heads** of head_dim **{m['head_dim']}** ({m['path']}).\n")


# --- E2 ------------------------------------------------------------------------------------------------------------
def _med(lv, m):
    return lv.get(f"{m}_median_tps", lv[f"{m}_tps"])


def _err(lv, m):
    e = (lv.get("prediction_error") or {}).get(m)
    return f"{100 * e:+.0f}%" if e is not None else "–"


def _num(v, fmt):
    return format(v, fmt) if v is not None else "–"


def e2_table(r) -> str:
    """The main run, one row per level: measured (median ± standard deviation), the speed model's prediction and
    its error, the plain roofline's prediction, and the fractions of the two roofs reached."""
    rows = ["| type | file | bits/weight | pp512 measured | speed model | error | roofline | of matmul peak | "
            "tg128 measured | speed model | error | roofline | of bandwidth roof |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for lv in r["levels"]:
        rows.append(
            f"| {lv['type']} | {lv['file_bytes'] / 1e6:,.0f} MB | {lv['bits_per_weight']:.2f} | "
            f"{_med(lv, 'pp512'):,.1f} ± {lv['pp512_stddev']:,.1f} | {_num(lv['predicted_pp512_tps'], ',.1f')} | "
            f"{_err(lv, 'pp512')} | {_num(lv.get('roofline_pp512_tps'), ',.1f')} | "
            f"{100 * lv['matmul_peak_fraction']:.0f}% | {_med(lv, 'tg128'):,.2f} ± {lv['tg128_stddev']:,.2f} | "
            f"{_num(lv['predicted_tg128_tps'], ',.2f')} | {_err(lv, 'tg128')} | "
            f"{_num(lv.get('roofline_tg128_tps'), ',.2f')} | {100 * lv['bandwidth_fraction']:.0f}% |")
    return "\n".join(rows) + "\n"


def e2_validation(ladders: dict) -> str:
    """Every saved ladder at every thread count: predicted ÷ measured, with the goals (tg128 15 %, pp512 25 %)."""
    from part1_capacity.experiments.engine import quant_ladder as ql

    rows = ql.validation_rows(ladders)
    if not rows:
        return "*No saved ladder with kernel constants yet.*\n"
    def span(x, m, fmt):
        r = (x.get("rounds") or {}).get(m)
        return f"{min(r):{fmt}}–{max(r):{fmt}}" if r else "–"

    out = ["| model | threads | type | pp512 measured | spread | predicted | one round's prediction | error | "
           "tg128 measured | spread | predicted | one round's prediction | error | load |",
           "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for x in rows:
        out.append(f"| {x['params'] / 1e9:.2f} B | {x['threads']} | {x['type']} | {x['pp512']:,.1f} | "
                   f"{100 * x['pp512_spread']:.0f}% | {x['pp512_predicted']:,.1f} | {span(x, 'pp512', ',.0f')} | "
                   f"{'' if x['pp512_ok'] else '**'}{100 * x['pp512_error']:+.0f}%{'' if x['pp512_ok'] else '**'} | "
                   f"{x['tg128']:,.2f} | {100 * x['tg128_spread']:.0f}% | {x['tg128_predicted']:,.2f} | "
                   f"{span(x, 'tg128', ',.1f')} | "
                   f"{'' if x['tg128_ok'] else '**'}{100 * x['tg128_error']:+.0f}%{'' if x['tg128_ok'] else '**'} | "
                   f"{x['load_average'] or 0:.1f} |")
    n = len(rows)
    seen = sorted({(x["params"], x["threads"]) for x in rows})
    out.append("")
    out.append("Saved ladders: " + ", ".join(f"{p / 1e9:.2f} B at {t} thread{'s' if t > 1 else ''}" for p, t in seen)
               + ". Predicted from: " + "; ".join(sorted({f"{x['params'] / 1e9:.2f} B — {x['basis'].split(' (')[0]}" for x in rows}))
               + ".")
    again = {}
    for x in rows:   # the same size, threads and type measured in more than one run
        again.setdefault((x["params"], x["threads"], x["type"]), []).append(x)
    rep = [(k, max(v, key=lambda y: y[m])[m] / min(v, key=lambda y: y[m])[m], m)
           for k, v in again.items() if len(v) > 1 for m in ("pp512", "tg128")]
    if rep:
        (p, t, ty), ratio, m = max(rep, key=lambda z: z[1])
        out.append("")
        out.append(f"Repeatability: the same file measured in two runs differs by up to **{ratio:.2f}×** "
                   f"({ty} {m}, {p / 1e9:.2f} B, {t} thread{'s' if t > 1 else ''}) — the machine, not the model.")
    tg_ok, pp_ok = sum(x["tg128_ok"] for x in rows), sum(x["pp512_ok"] for x in rows)
    wt = max(rows, key=lambda x: abs(x["tg128_error"]))
    wp = max(rows, key=lambda x: abs(x["pp512_error"]))
    out.append("")
    out.append(f"**{tg_ok} of {n}** decode predictions are within {ql.TG_GOAL:.0%} of llama-bench (worst: "
               f"{wt['type']}, {wt['params'] / 1e9:.2f} B, {wt['threads']} thread{'s' if wt['threads'] > 1 else ''}, "
               f"{100 * wt['tg128_error']:+.0f}%); **{pp_ok} of {n}** prefill predictions within {ql.PP_GOAL:.0%} "
               f"(worst: {wp['type']}, {wp['params'] / 1e9:.2f} B, {wp['threads']} "
               f"thread{'s' if wp['threads'] > 1 else ''}, {100 * wp['pp512_error']:+.0f}%). Misses in bold. "
               f"\"spread\" is (largest − smallest) ÷ median of the level's timed runs; \"one round's prediction\" "
               f"the range the constants of each single kernel round predict (the prediction itself takes each "
               f"constant's median over the rounds); \"load\" the machine's 1-minute load average when the level was "
               f"measured (above the number of CPUs, other work shared them).")
    inside = [x for x in rows if x.get("rounds")]
    if inside:
        n_in = sum(min(x["rounds"]["tg128"]) * (1 - ql.TG_GOAL) <= x["tg128"] <= max(x["rounds"]["tg128"])
                   * (1 + ql.TG_GOAL) for x in inside)
        out.append("")
        out.append(f"Measured decode within {ql.TG_GOAL:.0%} of some single round's prediction: **{n_in} of "
                   f"{len(inside)}**.")
    return "\n".join(out) + "\n"


def _stream_rates(runs: list[dict], threads: int, type_: str) -> list[float]:
    """GB/s of each streamed-decode run of one type at one thread count, in the order measured (one per round)."""
    import statistics

    from part1_capacity.experiments.engine.kernels import BYTES_PER_WEIGHT

    return [r["k"] * r["m"] * BYTES_PER_WEIGHT[type_] * r["copies"] / statistics.median(r["seconds"]) / 1e9
            for r in runs if r["kind"] == "stream" and r["threads"] == threads and r["type"] == type_]


def e2_drift(kern: dict | None, ladders: dict) -> str:
    """How far this machine's streaming rate moves between kernel measurements: the same matmul-bench product
    (F32 and F16 weights streamed from memory) in each round of each saved measurement, in GB/s."""
    sets = []
    if kern:
        sets.append((f"kernel constants file ({kern.get('date_utc', '')[:16].replace('T', ' ')})", kern["runs"]))
    for name, r in ladders.items():
        sk = r.get("session_kernels")
        if sk:
            sets.append((f"around the {r['model']['n_params'] / 1e9:.2f} B ladder "
                         f"({r.get('date_utc', '')[:16].replace('T', ' ')}; {sk['rounds_before']} rounds before, "
                         f"{sk['rounds_after']} after)", sk["runs"]))
    if not sets:
        return ""
    out = ["| measurement | threads | F32 streamed, each round (GB/s) | F16 streamed, each round (GB/s) |",
           "|---|---:|---|---|"]
    for label, runs in sets:
        for th in sorted({r["threads"] for r in runs}):
            f32, f16 = (", ".join(f"{g:.0f}" for g in _stream_rates(runs, th, t)) for t in ("f32", "f16"))
            out.append(f"| {label} | {th} | {f32} | {f16} |")
    return "\n".join(out) + "\n"


def e2_misses(ladders: dict) -> str:
    """Where the speed model misses its goals on the saved ladders, with the numbers that say why."""
    from part1_capacity.experiments.engine import quant_ladder as ql
    from part1_capacity.experiments.engine.kernels import decode_bytes_per_token

    rows = ql.validation_rows(ladders)
    if not rows:
        return ""
    miss = [x for x in rows if not (x["tg128_ok"] and x["pp512_ok"])]
    out = ["**Where it misses, and why.** "
           + ("Every level is within its goals on these runs." if not miss else
              "The misses: " + "; ".join(f"{x['type']} {'decode' if not x['tg128_ok'] else 'prefill'}, "
                                         f"{x['params'] / 1e9:.2f} B at {x['threads']} thread"
                                         f"{'s' if x['threads'] > 1 else ''} "
                                         f"({100 * (x['tg128_error'] if not x['tg128_ok'] else x['pp512_error']):+.0f}%)"
                                         for x in miss) + ".")]
    # decode of F32 weights only streams them: its rate in the ladder against the same rate in the kernel rounds
    facts = []
    for name, r in ladders.items():
        runs = (r.get("session_kernels") or {}).get("runs")
        for th, levels in (r.get("levels_by_threads") or {}).items():
            lv = next((x for x in levels if x["type"] == "F32" and x.get("weight_types")), None)
            rates = _stream_rates(runs, int(th), "f32") if runs else []
            if lv and rates and int(th) > 1:
                per_token = decode_bytes_per_token(lv["weight_types"])
                facts.append(f"the {r['model']['n_params'] / 1e9:.2f} B ladder's F32 decode at {th} threads read its "
                             f"weights at {lv['tg128_median_tps'] * per_token / 1e9:.0f} GB/s, while the same two "
                             f"threads streamed F32 weights at {min(rates):.0f}–{max(rates):.0f} GB/s in the kernel "
                             f"rounds around it")
    if facts:
        out.append("In numbers: " + "; ".join(facts) + ".")
    by = {}
    for x in rows:
        by.setdefault((x["threads"], x["type"] in ("F32", "F16")), []).append(x["tg128_error"])
    parts = [f"{'F32 and F16' if fl else 'the quantized types'} at {th} thread{'s' if th > 1 else ''}: "
             f"{100 * min(e):+.0f}% to {100 * max(e):+.0f}%" for (th, fl), e in sorted(by.items())]
    out.append("Decode errors by kind: " + "; ".join(parts) + ".")
    return "\n\n".join(out) + "\n"


def e2_stream(r: dict | None) -> str:
    """The saved side-by-side run of ``python -m part1_capacity.experiments.bench_stream``: llama-bench's F32 decode and
    matmul-bench's streamed F32 product as memory bandwidth, round after round, and one long run in windows."""
    if not r:
        return "*No saved run: `python -m part1_capacity.experiments.bench_stream --save`.*\n"
    out = ["| round | llama-bench F32 decode (GB/s) | matmul-bench F32 stream (GB/s) | ratio |", "|---:|---:|---:|---:|"]
    ratios = []
    for i, x in enumerate(r["rounds"], 1):
        ratios.append(x["llama_bench_gbs"] / x["matmul_bench_gbs"])
        out.append(f"| {i} | {x['llama_bench_gbs']:.1f} | {x['matmul_bench_gbs']:.1f} | {ratios[-1]:.2f} |")
    lb = [x["llama_bench_gbs"] for x in r["rounds"]]
    mb = [x["matmul_bench_gbs"] for x in r["rounds"]]
    out.append("")
    out.append(f"{r['threads']} threads, {r.get('date_utc', '')[:16].replace('T', ' ')} UTC. Across the rounds "
               f"llama-bench ranges {min(lb):.0f}–{max(lb):.0f} GB/s and matmul-bench {min(mb):.0f}–{max(mb):.0f}; "
               f"the ratio of neighbours {min(ratios):.2f}–{max(ratios):.2f} (median "
               f"{__import__('statistics').median(ratios):.2f}). One long matmul-bench run, in windows of "
               f"{r['long_run_window_s']:.2f} s: {', '.join(f'{g:.0f}' for g in r['long_run_gbs'])} GB/s.")
    return "\n".join(out) + "\n"


def e2_kernels_table(k: dict) -> str:
    """The kernel constants per type and thread count, with the per-core decomposition of the streaming cost:
    bytes ÷ (one core's streaming rate, from F32) + the kernel's arithmetic (cached)."""
    c = k["constants"]
    out = ["| threads | type | bytes/weight | repacked | decode, streamed (ps/weight) | arithmetic, cached (ps/weight) "
           "| bytes ÷ core rate + arithmetic (ps/weight) | prefill (ps/weight·token) |",
           "|---:|---|---:|---|---:|---:|---:|---:|"]
    one = c.get("1", {}).get("types", {}).get("f32")
    # one core's streaming rate, from F32 at one thread: its streamed time per weight less its arithmetic
    core_rate = one["bytes_per_weight"] / (one["decode_s_per_weight"] - one["compute_s_per_weight"]) if one else None
    for th, v in sorted(c.items()):
        n = int(th)
        for t, x in v["types"].items():
            model = x["bytes_per_weight"] / (n * core_rate) + x["compute_s_per_weight"] if core_rate else None
            out.append(f"| {th} | {t} | {x['bytes_per_weight']:.4g} | {'yes' if x['repacked'] else 'no'} | "
                       f"{1e12 * x['decode_s_per_weight']:,.0f} | {1e12 * x['compute_s_per_weight']:,.0f} | "
                       f"{_num(model and 1e12 * model, ',.0f')} | {1e12 * x['prefill_s_per_weight_token']:,.1f} |")
        out.append(f"| {th} | *graph node* | | | | | | overhead {1e6 * v['op_overhead_s']:.2f} µs per node |")
    if core_rate:
        out.append(f"\nOne core streams {core_rate / 1e9:.1f} GB/s (F32 at one thread, less its arithmetic).")
    h = k.get("host", {})
    out.append("")
    out.append(f"Measured {k.get('date_utc', '')} on {h.get('cpu', 'this host')} (load average "
               f"{k.get('load_average_at_start') or 0:.1f} at the start, {k.get('load_average_at_end') or 0:.1f} at "
               f"the end), medians of repeated runs; every column is per weight of the whole product, all threads working.")
    return "\n".join(out) + "\n"


# What the portable build's integer dot product costs, read from the kernels (ggml/src/ggml-cpu/arch/x86/quants.c,
# mul_sum_i8_pairs_float → mul_sum_us8_pairs_float): 32 int8 × int8 products summed to 8 int32 lanes take
# vpsignb ×2 + vpmaddubsw + vpmaddwd on AVX2; with AVX-VNNI (or AVX512-VNNI + VL) vpsignb ×2 + vpdpbusd; with
# AVX-VNNI-INT8 one vpdpbssd. The F32 path: 32 multiply-adds are 4 vfmadd231ps (ggml_vec_dot_f32, sgemm.cpp).
DOT_INSTRUCTIONS = {"AVX2 (this build)": 4, "AVX-VNNI / AVX512-VNNI": 3, "AVX-VNNI-INT8": 1}
FMA_INSTRUCTIONS_F32 = 4


def e2_differences(ladders: dict, kern: dict | None) -> str:
    """Why this host's ratios differ from the original study's, in this host's own numbers."""
    from course.host import cpu_flags
    from part1_capacity.experiments.engine import quant_ladder as ql

    out = []
    flags = cpu_flags()
    has = [f for f in ("avx_vnni", "avx512_vnni", "avx512f", "avx_vnni_int8") if f in flags]
    dots = ", ".join(f"{k}: {v}" for k, v in DOT_INSTRUCTIONS.items())
    out.append(f"- **Instruction set and integer dot-product units.** This CPU reports "
               f"{', '.join(has) if has else 'no VNNI or AVX-512 flags'}; the project's portable llama.cpp build "
               f"uses AVX2, FMA and F16C only. One 32-value int8 dot product (Q8_0, Q5_0, the Q8_K side of "
               f"Q4_K/Q6_K) costs, in instructions — {dots}; the F32 path does the same 32 multiply-adds in "
               f"{FMA_INSTRUCTIONS_F32} FMAs. Without VNNI the integer path has no instruction-count advantage over "
               f"F32 here, and prefill is compute-bound.")
    gains = {}
    for name, r in ladders.items():
        for th, levels in (r.get("levels_by_threads") or {}).items():
            x = ql.study_ratios(levels)
            if x:
                gains[(r["model"]["n_params"], int(th))] = x
    c1 = (kern or {}).get("constants", {}).get("1", {}).get("types", {})
    if "f32" in c1 and "q4_K" in c1:
        f, q = c1["f32"], c1["q4_K"]
        r = f["prefill_s_per_weight_token"] / q["prefill_s_per_weight_token"]
        seen = "; ".join(f"{p / 1e9:.2f} B at {t} thread{'s' if t > 1 else ''}: {100 * x['prefill_gain']:+.0f}%"
                         for (p, t), x in sorted(gains.items()))
        out.append(f"- **Prefill** (compute-bound), per weight and token at one thread: F32 "
                   f"{1e12 * f['prefill_s_per_weight_token']:.0f} ps, Q4_K {1e12 * q['prefill_s_per_weight_token']:.0f}"
                   f" ps — Q4_K's repacked integer GEMM is {r:.2f}× as fast as the F32 GEMM even without VNNI, "
                   f"because each unpacked block serves several activation rows. Ladder prefill gain F32 → Q4_K_M: "
                   f"{seen or 'no saved ladder'}; the study's: {100 * ql.STUDY['prefill_gain']:+.0f}%.")
        # decode per weight and core: bytes ÷ bandwidth + arithmetic; the gain F32 → Q4_K lies between the
        # arithmetic-bound limit (memory free: c_F32 / c_Q4K) and the bandwidth-bound limit (bytes ratio)
        lo = f["compute_s_per_weight"] / q["compute_s_per_weight"]
        hi = f["bytes_per_weight"] / q["bytes_per_weight"]
        here = f["decode_s_per_weight"] / q["decode_s_per_weight"]
        out.append(f"- **Decode**, per weight at one thread: F32 streams at {1e12 * f['decode_s_per_weight']:.0f} ps, "
                   f"of which {1e12 * f['compute_s_per_weight']:.0f} ps is arithmetic; Q4_K at "
                   f"{1e12 * q['decode_s_per_weight']:.0f} ps, of which {1e12 * q['compute_s_per_weight']:.0f} ps. "
                   f"The gain F32 → Q4_K therefore lies between {lo:.1f}× (memory free: arithmetic alone) and "
                   f"{hi:.1f}× (arithmetic free: bytes alone); this host's kernels give {here:.1f}× at one thread. "
                   f"The study's {1 + ql.STUDY['decode_gain']:.2f}× sits near the arithmetic end: a host where memory "
                   f"is fast relative to what each thread can unpack and multiply (more bandwidth per thread than "
                   f"here, or a kernel with more work per 4-bit weight).")
    if gains:
        txt = ", ".join(f"{p / 1e9:.2f} B at {t} thread{'s' if t > 1 else ''}: {1 + x['decode_gain']:.2f}×"
                        for (p, t), x in sorted(gains.items()))
        out.append(f"- **Threads.** The decode gain F32 → Q4_K_M on this host — {txt} — against the study's "
                   f"{1 + ql.STUDY['decode_gain']:.2f}× and the {ql.STUDY['theory']}× of the bytes. One core here streams "
                   f"memory slowly, so F32 decode is slow and the gain large; threads add both bandwidth and "
                   f"arithmetic, and where they add more bandwidth than the quantized kernels can use the gain "
                   f"falls toward the arithmetic end. The study's host is described only by its ratios, so which of "
                   f"these it was is read from them, not known.")
    return "\n".join(out) + "\n"


def e2_study(ladders: dict) -> str:
    """The original study's F32 → Q4_K_M figures next to each saved ladder's."""
    from part1_capacity.experiments.engine import quant_ladder as ql

    s = ql.STUDY
    out = ["| ladder | Q4_K_M file ÷ F32 file | prefill gain | decode gain | size ratio (the decode gain bytes "
           "alone would give) |", "|---|---:|---:|---:|---:|",
           f"| original study | {s['size']:.2f}× | {100 * s['prefill_gain']:+.0f}% | {100 * s['decode_gain']:+.0f}% "
           f"({1 + s['decode_gain']:.2f}×) | {s['theory']:.1f}× |"]
    for name, r in ladders.items():
        for th, levels in (r.get("levels_by_threads") or {str(r["threads"]): r["levels"]}).items():
            x = ql.study_ratios(levels)
            if x:
                out.append(f"| {r['model']['n_params'] / 1e9:.2f} B, {th} thread{'s' if th != '1' else ''} | "
                           f"{x['size']:.2f}× | {100 * x['prefill_gain']:+.0f}% | {100 * x['decode_gain']:+.0f}% "
                           f"({1 + x['decode_gain']:.2f}×) | {x['theory']:.1f}× |")
    return "\n".join(out) + "\n"


def host_table(r) -> str:
    a = r["accelerator"]
    meas = (r.get("host_profile") or {}).get("measured", {})
    rows = ["| quantity | this host | used by the calculator as |", "|---|---:|---|",
            f"| memory read bandwidth | {a['bandwidth'] / 1e9:.1f} GB/s | bandwidth |",
            f"| fp32 matmul (GEMM) | {a['flops_16'] / 1e9:.0f} GFLOP/s | 16-bit peak (`bf16_tflops`) |",
            f"| int8 matmul (GEMM) | {a['flops_int8'] / 1e9:.0f} GOP/s | 8-bit peak (`int8_tflops`) |",
            f"| ridge point, 16-bit | {a['flops_16'] / a['bandwidth']:.1f} FLOP/byte | prefill/decode bound |"]
    if meas:
        rows.append(f"| threads, instruction set | {meas['threads']}, capped at {meas['isa_cap']} | as the engine |")
    text = "\n".join(rows) + "\n"
    if meas:
        text += f"\nMethod: {meas['method']}.\n"
    return text


def e2_model(r) -> str:
    m = r["model"]
    first = r["levels"][0]
    return (f"Model: {m['n_params']:,} parameters ({m['n_layers']} layers, hidden size {m['hidden_size']}), "
            f"{m['source']}; measured with **{r['method']}**, {r['threads']} threads, one warm-up and "
            f"{r['repeats']} runs per test (mean ± standard deviation). Bench command for one level: "
            f"`{_short_paths(first['bench_command'])}`.\n")


def _short_paths(command: str) -> str:
    """The command with each model path cut to its file name (the scratch folder is gone after the run)."""
    return " ".join(Path(w).name if "/" in w else w for w in command.split())


def _vs(a, b, key):
    """'1.23× as fast' style ratio of two levels on one metric."""
    return f"{a[key] / b[key]:.2f}×"


def e2_findings(r) -> str:
    """Sentences computed from the saved run: what the ladder shows, in its own numbers."""
    lv = {x["type"]: x for x in r["levels"]}
    by_size = sorted(r["levels"], key=lambda x: -x["file_bytes"])
    pp = [x["pp512_tps"] for x in by_size]
    monotonic = all(a <= b for a, b in zip(pp, pp[1:]))
    order = " > ".join(f"{x['type']} {x['pp512_tps']:,.0f}"
                       for x in sorted(r["levels"], key=lambda x: -x["pp512_tps"]))
    out = [f"- **Prefill is {'' if monotonic else 'not '}monotonic in file size.** pp512 in tokens/s, fastest "
           f"first: {order}. The plain roofline predicts one prefill speed for every level: "
           f"{r['levels'][0].get('roofline_pp512_tps', r['levels'][0]['predicted_pp512_tps']):,.0f} tokens/s."]
    acc = r.get("accelerator") or {}
    if {"F16", "Q8_0"} <= lv.keys():
        f16, q8 = lv["F16"], lv["Q8_0"]
        line = (f"- Q8_0 (integer dot products) against F16 (fp32 FMAs): prefill {_vs(q8, f16, 'pp512_tps')} as "
                f"fast with {f16['file_bytes'] / q8['file_bytes']:.2f}× fewer bytes. F16 reaches "
                f"{100 * f16['matmul_peak_fraction']:.0f}% of the host's fp32 GEMM throughput")
        if acc.get("flops_int8"):
            frac = q8["pp512_tps"] * 2 * q8["n_params"] / acc["flops_int8"]
            line += f"; Q8_0 reaches {100 * frac:.0f}% of its int8 GEMM throughput"
        out.append(line + ".")
    if {"Q5_0", "Q8_0"} <= lv.keys():
        q5, q8 = lv["Q5_0"], lv["Q8_0"]
        out.append(f"- Q5_0 against Q8_0 (the same dot-product path plus re-assembling the fifth bits): prefill "
                   f"{_vs(q5, q8, 'pp512_tps')} as fast, decode {_vs(q5, q8, 'tg128_tps')}, with "
                   f"{q8['file_bytes'] / q5['file_bytes']:.2f}× fewer bytes.")
    if {"Q4_K_M", "Q5_0"} <= lv.keys():
        q4, q5 = lv["Q4_K_M"], lv["Q5_0"]
        out.append(f"- Q4_K_M (repacked integer GEMM) against Q5_0, files of similar size: prefill "
                   f"{_vs(q4, q5, 'pp512_tps')} as fast.")
    if {"F16", "Q4_K_M"} <= lv.keys():
        f16, q4 = lv["F16"], lv["Q4_K_M"]
        out.append(f"- **Decode improves less than the size ratio.** Q4_K_M's file is "
                   f"{f16['file_bytes'] / q4['file_bytes']:.2f}× smaller than F16's; its tg128 is "
                   f"{_vs(q4, f16, 'tg128_tps')} as fast.")
    fr = ", ".join(f"{x['type']} {100 * x['bandwidth_fraction']:.0f}%" for x in by_size)
    out.append(f"- Fraction of the bandwidth roof decode reaches, largest file first: {fr}.")
    key = "roofline" if "roofline_tg128_tps" in r["levels"][0] else "predicted"
    dec = [x["tg128_tps"] / x[f"{key}_tg128_tps"] for x in r["levels"]]
    pre = [x["pp512_tps"] / x[f"{key}_pp512_tps"] for x in r["levels"]]
    out.append(f"- Measured ÷ the plain roofline: prefill {100 * min(pre):.0f}–{100 * max(pre):.0f}%, decode "
               f"{100 * min(dec):.0f}–{100 * max(dec):.0f}%.")
    return "\n".join(out) + "\n"


def e2_chart(r, metric, path, title, ylabel):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    levels = r["levels"]
    x = np.arange(len(levels))
    meas = [lv[f"{metric}_tps"] for lv in levels]
    err = [lv[f"{metric}_stddev"] for lv in levels]
    pred = [lv[f"predicted_{metric}_tps"] or 0.0 for lv in levels]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.bar(x - 0.2, meas, 0.4, yerr=err, capsize=3, label="measured (llama.cpp)", color="#3b6ea8")
    ax.bar(x + 0.2, pred, 0.4, label="predicted (speed model, this host's kernels)", color="#f2a541", hatch="//",
           edgecolor="#9a5b00")
    for xi, m, e, p in zip(x, meas, err, pred):  # measured ÷ predicted, above the error bar
        ax.annotate(f"{100 * m / p:.0f}%" if p else "", (xi - 0.2, m + e), ha="center", va="bottom", fontsize=8,
                    xytext=(0, 3), textcoords="offset points")
    ax.set_xticks(x, [f"{lv['type']}\n{lv['file_bytes'] / 1e6:,.0f} MB" for lv in levels])
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    ax.set_ylim(0, max(max(m + e for m, e in zip(meas, err)), max(pred)) * 1.12)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def build(out):
    from part1_capacity.experiments.engine import quant_ladder as ql
    from part1_capacity.experiments.engine.kernels import RESULT as KERNELS

    e1r = load_result("e1")
    ladders = ql.saved_ladders()
    e2r = ladders.get("e2")
    kern = load_result(KERNELS)
    build_vllm_startup(out)
    (out / "e2_validation.md").write_text(e2_validation(ladders))
    (out / "e2_study.md").write_text(e2_study(ladders))
    (out / "e2_misses.md").write_text(e2_misses(ladders))
    (out / "e2_stream.md").write_text(e2_stream(load_result("e2_stream")))
    (out / "e2_drift.md").write_text(e2_drift(kern, ladders) or "*No saved kernel rounds.*\n")
    (out / "e2_differences.md").write_text(e2_differences(ladders, kern))
    (out / "e2_kernels.md").write_text(e2_kernels_table(kern) if kern else
                                       "*No saved kernel constants: `python -m part1_capacity.experiments.engine.kernels "
                                       "--save` measures them.*\n")
    if e1r:
        per_ctx, summary = e1_tables(e1r)
        (out / "e1_table.md").write_text(per_ctx)
        (out / "e1_summary.md").write_text(summary)
        (out / "e1_model.md").write_text(e1_model(e1r))
        (out / "e1_run.md").write_text(_run_info(e1r))
    else:
        _missing(out, ("e1_table.md", "e1_summary.md", "e1_model.md", "e1_run.md"), "e1")
    sr = load_result("e1_structures")
    if sr:
        (out / "e1_structures.md").write_text(e1_structures_table(sr))
        (out / "e1_structures_run.md").write_text(_run_info(sr))
    else:
        _missing(out, ("e1_structures.md", "e1_structures_run.md"), "e1 --structure all")
    if e2r:
        (out / "e2_table.md").write_text(e2_table(e2r))
        (out / "e2_model.md").write_text(e2_model(e2r))
        (out / "e2_findings.md").write_text(e2_findings(e2r))
        (out / "e2_run.md").write_text(_run_info(e2r))
        (out / "host_table.md").write_text(host_table(e2r))
        e2_chart(e2r, "pp512", out / "e2_prefill.png", "Prefill (pp512): one 512-token batch", "tokens/s")
        e2_chart(e2r, "tg128", out / "e2_decode.png", "Decode (tg128): 128 single-token steps", "tokens/s")
    else:
        _missing(out, ("e2_table.md", "e2_model.md", "e2_findings.md", "e2_run.md", "host_table.md"), "e2")
        for name in ("e2_prefill.png", "e2_decode.png"):
            _placeholder(out / name)


def build_vllm_startup(out):
    """vLLM's start-up lines predicted beside published logs (``vllm_startup.py``), and llama.cpp's other buffers:
    published logs and E1's saved run on this machine (``buffers.py``)."""
    from part1_capacity.experiments.engine import buffers, vllm_startup

    (out / "vllm_startup.md").write_text(vllm_startup.table())
    (out / "vllm_startup_terms.md").write_text(vllm_startup.terms())
    (out / "llama_cpp_buffers_published.md").write_text(buffers.published_table())
    (out / "e1_buffers.md").write_text(buffers.e1_table(load_result("e1_structures")))


def _placeholder(path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 1))
    ax.axis("off")
    ax.text(0.5, 0.5, "no saved run: capacity e2 --save", ha="center", va="center")
    fig.savefig(path, dpi=80)
    plt.close(fig)
