"""Tables, charts and findings for site/part1/engine_checks.md, from the saved runs in results/part1/
(e1.json, e1_structures.json, e2.json, host_accelerator.json). Nothing is measured here: the site builds in seconds.
"""
from __future__ import annotations

from pathlib import Path

from course.machine import records
from course.shared import i18n, tables
from part1_capacity.experiments.engine.common import load_result
from course.shared.units import MIB

NAME = "engine"
EN = i18n.translator("en")


def _missing(out, names, what):
    i18n_write = i18n.write_text
    for n in names:
        i18n_write(out, n, lambda tr: tr("*No saved {what} run: `capacity {what} --save` writes one.*", what=what) + "\n")


def _run_info(r, tr=EN) -> str:
    rec = records.read_record(r)        # e1.json was saved with "date" before the record's "date_utc"
    h = rec["host"]
    note = f" — {r['note']}" if r.get("note") else ""   # the run's own note, as saved
    load = rec["load_average_at_start"]
    load = tr(", load average {load} at the start", load=f"{load:.1f}") if load is not None else ""
    return tr("Run on {date}, host `{node}`: {cpu}, {cpus} CPUs, {gib} GiB, llama-cpp-python {version}{load}{note}. "
              "Command: `{command}`", date=rec["date_utc"], node=h["node"], cpu=h["cpu"], cpus=h["cpus"],
              gib=f"{h['memory_bytes'] / 2 ** 30:.0f}", version=r["llama_cpp_python"], load=load, note=note,
              command=rec["command"]) + "\n"


# --- E1 for every structure -----------------------------------------------------------------------------------------
COMPONENTS = {"K": "K (full layers)", "V": "V (full layers)", "K_swa": "K (window cache)",
              "V_swa": "V (window cache)", "R": "R (conv state)", "S": "S (SSM / delta-net state)"}


def e1_anchor(row) -> str:
    """The HTML id of a tiny model's row in the structures table (the calculator page links to it)."""
    return f"e1-{row['selector']}-{row['architecture']}".replace("_", "-").replace(".", "-")


def _fmt(n) -> str:
    from part1_capacity.calculator.base.fmt import fmt_bytes

    return fmt_bytes(n)


def e1_structures_table(r, context=4096, n_seq=4, tr=EN) -> str:
    """One row per buffer of each tiny model at ``context`` tokens over ``n_seq`` sequences: the law, what
    llama.cpp's log reports and what its rules predict; the last column counts the matching cases."""
    rows = tables.head(tr("| structure | model (GGUF) | buffer | law, {context} tokens × {n_seq} seq | llama.cpp's log "
               "(±0.005 MiB) | llama.cpp rule | cases matching |", context=f"{context:,}", n_seq=n_seq), "lllrrr")
    for row in r["structures"]:
        cases = [(c["context"], c["n_seq"]) for c in row["cases"]]
        i = cases.index((context, n_seq)) if (context, n_seq) in cases else len(cases) - 1
        ok = sum(c["match"] for c in row["details"])
        first = True
        for comp in row["predicted"]:
            name = (f'<a id="{e1_anchor(row)}"></a>`{row["architecture"]}`' if first
                    else "")
            label = tr(COMPONENTS[comp]) if comp in COMPONENTS else comp
            rows.append(tables.row(row['structure'] if first else '', name, label, _fmt(row['law'][comp][i]),
                                   _fmt(row['reported'][comp][i]),
                                   _fmt(row['predicted'][comp][i]),
                                   f'{ok}/{len(cases)}' if first else ''))
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
def e1_tables(r, tr=EN) -> tuple[str, str]:
    rows = tables.head(tr("| KV type | context (cells) | llama.cpp's log line | reported bytes | calculator × cells |"), "lrlrr")
    for t in r["by_kv_type"]:
        for cells, rep, line in zip(t["cells"], t["reported_bytes"], t["log_lines"]):
            size = line.split("size =")[1].split("(")[0].strip()
            rows.append(tables.row(t['kv_type'], f"{cells:,}", f"`size = {size}`", f"{rep:,}",
                                   f"{t['formula_bytes_per_token'] * cells:,.0f}"))
    summary = tables.head(tr("| KV type | fitted slope (bytes/token) | calculator (bytes/token) | intercept (bytes) | "
                  "equal to the byte |"), "lrrr")
    for t in r["by_kv_type"]:
        summary.append(tables.row(t['kv_type'], f"{t['slope_bytes_per_token']:,.2f}",
                                  f"{t['formula_bytes_per_token']:,.0f}",
                                  f"{t['intercept_bytes']:,.0f}",
                                  tr('yes') if t['match'] else tr('**no**')))
    return "\n".join(rows) + "\n", "\n".join(summary) + "\n"


def e1_model(r, tr=EN) -> str:
    m = r["model"]
    return tr("Model: {params} parameters, {layers} layers, {heads} query heads, **{kv_heads} KV heads** of head_dim "
              "**{head_dim}** ({path}).", params=f"{m['n_params']:,}", layers=m["n_layers"], heads=m["n_heads"],
              kv_heads=m["n_kv_heads"], head_dim=m["head_dim"], path=m["path"]) + "\n"


# --- E2 ------------------------------------------------------------------------------------------------------------
def _med(lv, m):
    return lv.get(f"{m}_median_tps", lv[f"{m}_tps"])


def _err(lv, m):
    e = (lv.get("prediction_error") or {}).get(m)
    return f"{100 * e:+.0f}%" if e is not None else "–"


def _num(v, fmt):
    return format(v, fmt) if v is not None else "–"


def e2_table(r, tr=EN) -> str:
    """The main run, one row per level: measured (median ± standard deviation), the speed model's prediction and
    its error, the plain roofline's prediction, and the fractions of the two roofs reached."""
    rows = tables.head(tr("| type | file | bits/weight | pp512 measured | speed model | error | roofline | of matmul peak | "
               "tg128 measured | speed model | error | roofline | of bandwidth roof |"), "lrrrrrrrrrrrr")
    for lv in r["levels"]:
        rows.append(
            tables.row(lv['type'], f"{lv['file_bytes'] / 1e6:,.0f} MB", f"{lv['bits_per_weight']:.2f}",
                       f"{_med(lv, 'pp512'):,.1f} ± {lv['pp512_stddev']:,.1f}",
                       _num(lv['predicted_pp512_tps'], ',.1f'), _err(lv, 'pp512'),
                       _num(lv.get('roofline_pp512_tps'), ',.1f'),
                       f"{100 * lv['matmul_peak_fraction']:.0f}%",
                       f"{_med(lv, 'tg128'):,.2f} ± {lv['tg128_stddev']:,.2f}",
                       _num(lv['predicted_tg128_tps'], ',.2f'), _err(lv, 'tg128'),
                       _num(lv.get('roofline_tg128_tps'), ',.2f'),
                       f"{100 * lv['bandwidth_fraction']:.0f}%"))
    return "\n".join(rows) + "\n"


def _threads(n, tr=EN) -> str:
    return tr("{n} thread", n=n) if n == 1 else tr("{n} threads", n=n)


def e2_validation(ladders: dict, tr=EN) -> str:
    """Every saved ladder at every thread count: predicted ÷ measured, with the goals (tg128 15 %, pp512 25 %)."""
    from part1_capacity.experiments.engine import quant_ladder as ql

    rows = ql.validation_rows(ladders)
    if not rows:
        return tr("*No saved ladder with kernel constants yet.*") + "\n"
    def span(x, m, fmt):
        r = (x.get("rounds") or {}).get(m)
        return f"{min(r):{fmt}}–{max(r):{fmt}}" if r else "–"

    def sides(x):
        b = x.get("beside") or {}
        return f"{b['before']:,.1f} / {b['after']:,.1f}" if {"before", "after"} <= b.keys() else "–"

    def small_pages(x):
        b = x.get("beside") or {}
        return f"{b['4K']:,.1f}" if "4K" in b else "–"

    out = tables.head(tr("| model | threads | type | pp512 measured | spread | predicted | one round's prediction | error | "
                         "tg128 measured | spread | predicted | one round's prediction | from the stream before / after | "
                         "from 4 KB pages | error | load | CPU share |"), "lrl" + "r" * 14)
    for x in rows:
        out.append(tables.row(
            f"{x['params'] / 1e9:.2f} B", x['threads'], x['type'], f"{x['pp512']:,.1f}",
            f"{100 * x['pp512_spread']:.0f}%", f"{x['pp512_predicted']:,.1f}", span(x, 'pp512', ',.0f'),
            f"{'' if x['pp512_ok'] else '**'}{100 * x['pp512_error']:+.0f}%{'' if x['pp512_ok'] else '**'}",
            f"{x['tg128']:,.2f}", f"{100 * x['tg128_spread']:.0f}%", f"{x['tg128_predicted']:,.2f}",
            span(x, 'tg128', ',.1f'), sides(x), small_pages(x),
            f"{'' if x['tg128_ok'] else '**'}{100 * x['tg128_error']:+.0f}%{'' if x['tg128_ok'] else '**'}",
            f"{x['load_average'] or 0:.1f}",
            f"{_num(x.get('cpu_share') and 100 * x['cpu_share'], '.0f')}{'%' if x.get('cpu_share') else ''}"))
    n = len(rows)
    seen = sorted({(x["params"], x["threads"]) for x in rows})
    out.append("")
    out.append(tr("Saved ladders: {ladders}. Predicted from: {bases}.",
                  ladders=", ".join(tr("{size} B at {threads}", size=f"{p / 1e9:.2f}", threads=_threads(t, tr))
                                    for p, t in seen),
                  bases="; ".join(sorted({f"{x['params'] / 1e9:.2f} B — {tr(x['basis'].split(' (')[0])}"
                                          for x in rows}))))
    again = {}
    for x in rows:   # the same size, threads and type measured in more than one run
        again.setdefault((x["params"], x["threads"], x["type"]), []).append(x)
    rep = [(k, max(v, key=lambda y: y[m])[m] / min(v, key=lambda y: y[m])[m], m)
           for k, v in again.items() if len(v) > 1 for m in ("pp512", "tg128")]
    if rep:
        (p, t, ty), ratio, m = max(rep, key=lambda z: z[1])
        out.append("")
        out.append(tr("Repeatability: the same file measured in two runs differs by up to **{ratio}×** ({type} {metric}, "
                      "{size} B, {threads}) — the machine, not the model.", ratio=f"{ratio:.2f}", type=ty, metric=m,
                      size=f"{p / 1e9:.2f}", threads=_threads(t, tr)))
    tg_ok, pp_ok = sum(x["tg128_ok"] for x in rows), sum(x["pp512_ok"] for x in rows)
    wt = max(rows, key=lambda x: abs(x["tg128_error"]))
    wp = max(rows, key=lambda x: abs(x["pp512_error"]))
    out.append("")
    out.append(tr(
        "**{tg_ok} of {n}** decode predictions are within {tg_goal} of llama-bench (worst: {wt_type}, {wt_size} B, "
        "{wt_threads}, {wt_err}%); **{pp_ok} of {n}** prefill predictions within {pp_goal} (worst: {wp_type}, "
        "{wp_size} B, {wp_threads}, {wp_err}%). Misses in bold. \"spread\" is (largest − smallest) ÷ median of the "
        "level's timed runs; \"one round's prediction\" the range the constants of each single kernel round predict "
        "(the prediction itself takes each constant's median over the rounds); \"load\" the machine's 1-minute load "
        "average when the level was measured (above the number of CPUs, other work shared them).",
        tg_ok=tg_ok, n=n, tg_goal=f"{ql.TG_GOAL:.0%}", wt_type=wt["type"], wt_size=f"{wt['params'] / 1e9:.2f}",
        wt_threads=_threads(wt["threads"], tr), wt_err=f"{100 * wt['tg128_error']:+.0f}", pp_ok=pp_ok,
        pp_goal=f"{ql.PP_GOAL:.0%}", wp_type=wp["type"], wp_size=f"{wp['params'] / 1e9:.2f}",
        wp_threads=_threads(wp["threads"], tr), wp_err=f"{100 * wp['pp512_error']:+.0f}"))
    if any(x.get("beside") for x in rows):
        out.append("")
        out.append(tr("Where a level's decode is predicted from the streams beside it, \"predicted\" takes each type's "
                      "streamed cost as the median of the two runs, one just before and one just after the level's "
                      "llama-bench run (prefill and the other constants still come from the rounds), each type streamed in the "
                      "pages the engine reads it from (2 MB pages for the types it multiplies in place in its "
                      "mapping of the file, 4 KB for those it repacks); \"from the stream before / after\" is what "
                      "each of the two alone predicts, \"from 4 KB pages\" what the same streams in 4 KB pages "
                      "predict. \"CPU share\" is the CPU time "
                      "llama-bench got over its wall time × threads: below 100%, its threads waited for CPUs other "
                      "work held."))
    inside = [x for x in rows if x.get("rounds")]
    if inside:
        n_in = sum(min(x["rounds"]["tg128"]) * (1 - ql.TG_GOAL) <= x["tg128"] <= max(x["rounds"]["tg128"])
                   * (1 + ql.TG_GOAL) for x in inside)
        out.append("")
        out.append(tr("Measured decode within {goal} of some single round's prediction: **{n_in} of {n}**.",
                      goal=f"{ql.TG_GOAL:.0%}", n_in=n_in, n=len(inside)))
    return "\n".join(out) + "\n"


def _stream_rates(runs: list[dict], threads: int, type_: str) -> list[float]:
    """GB/s of each streamed-decode run of one type at one thread count, in the order measured (one per round)."""
    import statistics

    from part1_capacity.experiments.engine.kernels import BYTES_PER_WEIGHT

    return [r["k"] * r["m"] * BYTES_PER_WEIGHT[type_] * r["copies"] / statistics.median(r["seconds"]) / 1e9
            for r in runs if r["kind"] == "stream" and r["threads"] == threads and r["type"] == type_]


def _pct(x: float) -> str:
    """A signed whole percentage, with no "-0" for a small negative."""
    text = f"{100 * x:+.0f}"
    return "+0" if text == "-0" else text


def e2_drift(kern: dict | None, ladders: dict, tr=EN) -> str:
    """How far this machine's streaming rate moves between kernel measurements: the same matmul-bench product
    (F32 and F16 weights streamed from memory) in each round of each saved measurement, and just before and after
    the ladders' F32 and F16 levels, in GB/s."""
    from part1_capacity.experiments.engine import kernels, quant_ladder as ql

    sets = []
    if kern:
        sets.append((tr("kernel constants file ({date})", date=kern.get("date_utc", "")[:16].replace("T", " ")),
                     kern["runs"]))
    for name, r in ladders.items():
        sk = r.get("session_kernels")
        if sk:
            sets.append((tr("around the {size} B ladder ({date}; {before} rounds before, {after} after)",
                            size=f"{r['model']['n_params'] / 1e9:.2f}",
                            date=r.get("date_utc", "")[:16].replace("T", " "), before=sk["rounds_before"],
                            after=sk["rounds_after"]), sk["runs"]))
    if not sets:
        return ""
    out = tables.head(tr("| measurement | threads | F32 streamed, each round (GB/s) | F16 streamed, each round (GB/s) |"), "lr")
    for label, runs in sets:
        if any(kernels.run_pages(x) == "2M" for x in runs if x.get("kind") == "stream"):
            label += tr(" (streamed in 2 MB pages, as the engine reads F32 and F16)")
        for th in sorted({r["threads"] for r in runs}):
            f32, f16 = (", ".join(f"{g:.0f}" for g in _stream_rates(runs, th, t)) for t in ("f32", "f16"))
            out.append(tables.row(label, th, f32, f16))
    labels = {"4K": "beside the {size} B ladder's level of that type (before, after)",
              "2M": "beside the {size} B ladder's level of that type, in 2 MB pages (before, after)"}
    for name, r in ladders.items():     # the same products streamed just before and after the F32 and F16 levels
        for th, levels in sorted((r.get("levels_by_threads") or {}).items(), reverse=True):
            by = {lv["type"]: lv for lv in levels}
            for pages, label in labels.items():
                cells = []
                for level, t in (("F32", "f32"), ("F16", "f16")):
                    side = ql.beside_rates(by.get(level) or {}, pages).get(t, {})
                    cells.append(", ".join(f"{side[w]:.0f}" for w in ("before", "after") if w in side))
                if any(cells):
                    out.append(tables.row(tr(label, size=f"{r['model']['n_params'] / 1e9:.2f}"), th, *cells))
    return "\n".join(out) + "\n"


def e2_misses(ladders: dict, tr=EN) -> str:
    """Where the speed model misses its goals on the saved ladders, with the numbers that say why."""
    from part1_capacity.experiments.engine import kernels, quant_ladder as ql
    from part1_capacity.experiments.engine.kernels import decode_bytes_per_token

    rows = ql.validation_rows(ladders)
    if not rows:
        return ""
    miss = [x for x in rows if not (x["tg128_ok"] and x["pp512_ok"])]
    out = [tr("**Where it misses, and why.**") + " "
           + (tr("Every level is within its goals on these runs.") if not miss else
              tr("The misses: {misses}.", misses="; ".join(
                  tr("{type} {phase}, {size} B at {threads} ({err}%)", type=x["type"],
                     phase=tr("decode") if not x["tg128_ok"] else tr("prefill"), size=f"{x['params'] / 1e9:.2f}",
                     threads=_threads(x["threads"], tr),
                     err=f"{100 * (x['tg128_error'] if not x['tg128_ok'] else x['pp512_error']):+.0f}")
                  for x in miss)))]
    # decode of F32 weights only streams them: its rate in the ladder against the same rate in the kernel rounds
    facts = []
    for name, r in ladders.items():
        runs = (r.get("session_kernels") or {}).get("runs")
        for th, levels in (r.get("levels_by_threads") or {}).items():
            lv = next((x for x in levels if x["type"] == "F32" and x.get("weight_types")), None)
            rates = _stream_rates(runs, int(th), "f32") if runs else []
            side = ql.beside_rates(lv).get("f32", {}) if lv else {}
            huge = lv and "2M" in {kernels.run_pages(x) for x in (lv.get("beside_kernels") or {}).get("runs", [])}
            if lv and rates and int(th) > 1 and {"before", "after"} <= side.keys():
                per_token = decode_bytes_per_token(lv["weight_types"])
                facts.append(tr("the {size} B ladder's F32 decode at {th} threads read its weights at {rate} GB/s; "
                                "matmul-bench streamed F32 weights in 2 MB pages, as the engine reads them, at "
                                "{before} GB/s just before that level and {after} GB/s just after it (in the kernel "
                                "rounds around the ladder{pages}: {lo}–{hi} GB/s)" if huge else
                                "the {size} B ladder's F32 decode at {th} threads read its weights at {rate} GB/s; "
                                "matmul-bench streamed F32 weights at {before} GB/s just before that level and "
                                "{after} GB/s just after it (in the kernel rounds around the ladder: {lo}–{hi} GB/s)",
                                size=f"{r['model']['n_params'] / 1e9:.2f}", th=th,
                                rate=f"{lv['tg128_median_tps'] * per_token / 1e9:.0f}",
                                before=f"{side['before']:.0f}", after=f"{side['after']:.0f}",
                                pages="" if "2M" in {kernels.run_pages(x) for x in runs} else tr(", in 4 KB pages"),
                                lo=f"{min(rates):.0f}", hi=f"{max(rates):.0f}"))
            elif lv and rates and int(th) > 1:
                per_token = decode_bytes_per_token(lv["weight_types"])
                facts.append(tr("the {size} B ladder's F32 decode at {th} threads read its weights at {rate} GB/s, "
                                "while the same two threads streamed F32 weights at {lo}–{hi} GB/s in the kernel "
                                "rounds around it", size=f"{r['model']['n_params'] / 1e9:.2f}", th=th,
                                rate=f"{lv['tg128_median_tps'] * per_token / 1e9:.0f}", lo=f"{min(rates):.0f}",
                                hi=f"{max(rates):.0f}"))
    if facts:
        out.append(tr("In numbers: {facts}.", facts="; ".join(facts)))
    by = {}
    for x in rows:
        by.setdefault((x["threads"], x["type"] in ("F32", "F16")), []).append(x["tg128_error"])
    parts = [tr("{kind} at {threads}: {lo}% to {hi}%", kind=tr("F32 and F16") if fl else tr("the quantized types"),
                threads=_threads(th, tr), lo=_pct(min(e)), hi=_pct(max(e)))
             for (th, fl), e in sorted(by.items())]
    out.append(tr("Decode errors by kind: {parts}.", parts="; ".join(parts)))
    small = [(x, x["beside"]["4K"] / x["tg128"] - 1) for x in rows if "4K" in (x.get("beside") or {})]
    if small:   # the same streams timed in 4 KB pages: what the prediction would be without the engine's pages
        fl = [e for x, e in small if x["type"] in ("F32", "F16")] or [0.0]
        out.append(tr("Had every stream been timed in 4 KB pages, as matmul-bench's weights sit by default, the same "
                      "runs would predict F32 and F16 decode {lo}% to {hi}% off, and {ok} of {n} decode predictions "
                      "would be within {goal} (the column \"from 4 KB pages\").",
                      lo=_pct(min(fl)), hi=_pct(max(fl)),
                      ok=sum(abs(e) <= ql.TG_GOAL for _, e in small), n=len(small), goal=f"{ql.TG_GOAL:.0%}"))
    return "\n\n".join(out) + "\n"


def e2_stream(r: dict | None, tr=EN) -> str:
    """The saved side-by-side run of ``python -m part1_capacity.experiments.bench_stream``: llama-bench's F32 decode and
    matmul-bench's streamed F32 product as memory bandwidth, round after round, and one long run in windows."""
    if not r:
        return tr("*No saved run: `python -m part1_capacity.experiments.bench_stream --save`.*") + "\n"
    out = tables.head(tr("| round | llama-bench F32 decode (GB/s) | matmul-bench F32 stream (GB/s) | ratio |"), "rrrr")
    ratios = []
    for i, x in enumerate(r["rounds"], 1):
        ratios.append(x["llama_bench_gbs"] / x["matmul_bench_gbs"])
        out.append(tables.row(i, f"{x['llama_bench_gbs']:.1f}", f"{x['matmul_bench_gbs']:.1f}", f"{ratios[-1]:.2f}"))
    lb = [x["llama_bench_gbs"] for x in r["rounds"]]
    mb = [x["matmul_bench_gbs"] for x in r["rounds"]]
    out.append("")
    out.append(tr("{threads} threads, {date} UTC. Across the rounds llama-bench ranges {lb_lo}–{lb_hi} GB/s and "
                  "matmul-bench {mb_lo}–{mb_hi}; the ratio of neighbours {r_lo}–{r_hi} (median {r_med}). One long "
                  "matmul-bench run, in windows of {window} s: {long} GB/s.", threads=r["threads"],
                  date=r.get("date_utc", "")[:16].replace("T", " "), lb_lo=f"{min(lb):.0f}", lb_hi=f"{max(lb):.0f}",
                  mb_lo=f"{min(mb):.0f}", mb_hi=f"{max(mb):.0f}", r_lo=f"{min(ratios):.2f}",
                  r_hi=f"{max(ratios):.2f}", r_med=f"{__import__('statistics').median(ratios):.2f}",
                  window=f"{r['long_run_window_s']:.2f}", long=", ".join(f"{g:.0f}" for g in r["long_run_gbs"])))
    return "\n".join(out) + "\n"


def e2_reads(ladders: dict, tr=EN) -> str:
    """What one decode step of each saved ladder's F32 file reads, from the tensors the file holds
    (``weight_types``): the matmul weights, the output projection (its own tensor or not) and one embedding row."""
    out = []
    for name, r in ladders.items():
        lv = next((x for x in r.get("levels", []) if x["type"] == "F32" and x.get("weight_types")), None)
        if not lv:
            continue
        w = {part: sum(v.values()) for part, v in lv["weight_types"].items()}
        total = sum(w.values())
        if not w["output"]:     # a tied output reads the whole embedding table per token: the sentence would be wrong
            raise RuntimeError(f"{name}: the F32 file has no output.weight (tied embeddings); update e2_reads")
        out.append(tr("- {size} B: {matmul} matmul weights and {output} of the output projection ({out_pct}% of the "
                      "file's weights, a tensor of its own: `output.weight`, not tied to the embedding table), all read "
                      "once per token and all counted by the speed model; of the {lookup}-weight embedding table "
                      "({lookup_pct}%) one row of {width} is read, left out.",
                      size=f"{r['model']['n_params'] / 1e9:.2f}", matmul=f"{w['matmul']:,}", output=f"{w['output']:,}",
                      out_pct=f"{100 * w['output'] / total:.2f}", lookup=f"{w['lookup']:,}",
                      lookup_pct=f"{100 * w['lookup'] / total:.2f}", width=f"{r['model']['hidden_size']:,}"))
    return "\n".join(out) + "\n" if out else ""


def e2_pages(r: dict | None, tr=EN) -> str:
    """The saved run of ``python -m part1_capacity.experiments.bench_pages``: how much of an F32 model llama-bench
    maps in 2 MB pages, and matmul-bench's streamed products in 4 KB and in 2 MB pages, alternated."""
    if not r:
        return tr("*No saved run: `python -m part1_capacity.experiments.bench_pages --save`.*") + "\n"
    import statistics

    from part1_capacity.experiments.bench_pages import ratios

    out = tables.head(tr("| threads | type | 4 KB pages, each round (GB/s) | 2 MB pages, each round (GB/s) | "
                         "2 MB ÷ 4 KB, median (range) |"), "rlllr")
    for (th, t), v in ratios(r).items():
        rate = {pg: ", ".join(f"{x['gbs']:.1f}" for x in r["runs"] if (x["threads"], x["type"], x["pages"]) == (th, t, pg))
                for pg in ("4K", "2M")}
        out.append(tables.row(th, t.upper(), rate["4K"], rate["2M"],
                              f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})"))
    m = r["llama_bench_mapping_mb"]
    huge = {pg: [x["anon_huge_mb"] for x in r["runs"] if x["pages"] == pg] for pg in ("4K", "2M")}
    out.append("")
    out.append(tr("While it decoded, llama-bench's mapping of the F32 model held {pmd} of its {rss} MB ({pct}%) in 2 MB "
                  "pages. Huge pages of each matmul-bench run, weights of {weights} MB: {lo2}–{hi2} MB in the 2 MB "
                  "runs, {lo4}–{hi4} MB in the 4 KB runs. Measured {date} UTC, load average {l0} at the start and "
                  "{l1} at the end.",
                  pmd=f"{m['pmd_mapped']:,.0f}", rss=f"{m['rss']:,.0f}", pct=f"{100 * m['pmd_mapped'] / m['rss']:.0f}",
                  weights=f"{max(x['weight_mb'] for x in r['runs']):,.0f}", lo2=f"{min(huge['2M']):,.0f}",
                  hi2=f"{max(huge['2M']):,.0f}", lo4=f"{min(huge['4K']):,.0f}", hi4=f"{max(huge['4K']):,.0f}",
                  date=r.get("date_utc", "")[:16],
                  l0=f"{r.get('load_average_at_start') or 0:.1f}", l1=f"{r.get('load_average_at_end') or 0:.1f}"))
    return "\n".join(out) + "\n"


def e2_kernels_table(k: dict, tr=EN) -> str:
    """The kernel constants per type and thread count, with the per-core decomposition of the streaming cost:
    bytes ÷ (one core's streaming rate, from F32) + the kernel's arithmetic (cached)."""
    c = k["constants"]
    out = tables.head(tr("| threads | type | bytes/weight | repacked | decode, streamed (ps/weight) | arithmetic, cached (ps/weight) "
              "| bytes ÷ core rate + arithmetic (ps/weight) | prefill (ps/weight·token) |"), "rlrlrrrr")
    one = c.get("1", {}).get("types", {}).get("f32")
    # one core's streaming rate, from F32 at one thread: its streamed time per weight less its arithmetic
    core_rate = one["bytes_per_weight"] / (one["decode_s_per_weight"] - one["compute_s_per_weight"]) if one else None
    for th, v in sorted(c.items()):
        n = int(th)
        for t, x in v["types"].items():
            model = x["bytes_per_weight"] / (n * core_rate) + x["compute_s_per_weight"] if core_rate else None
            out.append(tables.row(th, t, f"{x['bytes_per_weight']:.4g}", tr('yes') if x['repacked'] else tr('no'),
                                  f"{1e12 * x['decode_s_per_weight']:,.0f}",
                                  f"{1e12 * x['compute_s_per_weight']:,.0f}",
                                  _num(model and 1e12 * model, ',.0f'),
                                  f"{1e12 * x['prefill_s_per_weight_token']:,.1f}"))
        out.append(f"| {th} | *{tr('graph node')}* | | | | | | "
                   + tr("overhead {us} µs per node", us=f"{1e6 * v['op_overhead_s']:.2f}") + " |")
    if core_rate:
        out.append("\n" + tr("One core streams {rate} GB/s (F32 at one thread, less its arithmetic).",
                             rate=f"{core_rate / 1e9:.1f}"))
    h = k.get("host", {})
    out.append("")
    out.append(tr("Measured {date} on {cpu} (load average {load0} at the start, {load1} at the end), medians of "
                  "repeated runs; every column is per weight of the whole product, all threads working.",
                  date=k.get("date_utc", ""), cpu=h.get("cpu", tr("this host")),
                  load0=f"{k.get('load_average_at_start') or 0:.1f}", load1=f"{k.get('load_average_at_end') or 0:.1f}"))
    return "\n".join(out) + "\n"


# What the portable build's integer dot product costs, read from the kernels (ggml/src/ggml-cpu/arch/x86/quants.c,
# mul_sum_i8_pairs_float → mul_sum_us8_pairs_float): 32 int8 × int8 products summed to 8 int32 lanes take
# vpsignb ×2 + vpmaddubsw + vpmaddwd on AVX2; with AVX-VNNI (or AVX512-VNNI + VL) vpsignb ×2 + vpdpbusd; with
# AVX-VNNI-INT8 one vpdpbssd. The F32 path: 32 multiply-adds are 4 vfmadd231ps (ggml_vec_dot_f32, sgemm.cpp).
DOT_INSTRUCTIONS = {"AVX2 (this build)": 4, "AVX-VNNI / AVX512-VNNI": 3, "AVX-VNNI-INT8": 1}
FMA_INSTRUCTIONS_F32 = 4


def e2_differences(ladders: dict, kern: dict | None, tr=EN) -> str:
    """Why this host's ratios differ from the original study's, in this host's own numbers."""
    from course.machine.host import cpu_flags
    from part1_capacity.experiments.engine import quant_ladder as ql

    out = []
    flags = cpu_flags()
    has = [f for f in ("avx_vnni", "avx512_vnni", "avx512f", "avx_vnni_int8") if f in flags]
    dots = ", ".join(f"{k}: {v}" for k, v in DOT_INSTRUCTIONS.items())
    out.append(tr(
        "- **Instruction set and integer dot-product units.** This CPU reports {flags}; the project's portable "
        "llama.cpp build uses AVX2, FMA and F16C only. One 32-value int8 dot product (Q8_0, Q5_0, the Q8_K side of "
        "Q4_K/Q6_K) costs, in instructions — {dots}; the F32 path does the same 32 multiply-adds in {fma} FMAs. "
        "Without VNNI the integer path has no instruction-count advantage over F32 here, and prefill is "
        "compute-bound.", flags=", ".join(has) if has else tr("no VNNI or AVX-512 flags"), dots=dots,
        fma=FMA_INSTRUCTIONS_F32))
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
        seen = "; ".join(tr("{size} B at {threads}: {gain}%", size=f"{p / 1e9:.2f}", threads=_threads(t, tr),
                            gain=f"{100 * x['prefill_gain']:+.0f}") for (p, t), x in sorted(gains.items()))
        out.append(tr(
            "- **Prefill** (compute-bound), per weight and token at one thread: F32 {f32} ps, Q4_K {q4k} ps — Q4_K's "
            "repacked integer GEMM is {ratio}× as fast as the F32 GEMM even without VNNI, because each unpacked block "
            "serves several activation rows. Ladder prefill gain F32 → Q4_K_M: {seen}; the study's: {study}%.",
            f32=f"{1e12 * f['prefill_s_per_weight_token']:.0f}", q4k=f"{1e12 * q['prefill_s_per_weight_token']:.0f}",
            ratio=f"{r:.2f}", seen=seen or tr("no saved ladder"), study=f"{100 * ql.STUDY['prefill_gain']:+.0f}"))
        # decode per weight and core: bytes ÷ bandwidth + arithmetic; the gain F32 → Q4_K lies between the
        # arithmetic-bound limit (memory free: c_F32 / c_Q4K) and the bandwidth-bound limit (bytes ratio)
        lo = f["compute_s_per_weight"] / q["compute_s_per_weight"]
        hi = f["bytes_per_weight"] / q["bytes_per_weight"]
        here = f["decode_s_per_weight"] / q["decode_s_per_weight"]
        out.append(tr(
            "- **Decode**, per weight at one thread: F32 streams at {f32} ps, of which {f32_c} ps is arithmetic; Q4_K "
            "at {q4k} ps, of which {q4k_c} ps. The gain F32 → Q4_K therefore lies between {lo}× (memory free: "
            "arithmetic alone) and {hi}× (arithmetic free: bytes alone); this host's kernels give {here}× at one "
            "thread. The study's {study}× sits near the arithmetic end: a host where memory is fast relative to what "
            "each thread can unpack and multiply (more bandwidth per thread than here, or a kernel with more work per "
            "4-bit weight).", f32=f"{1e12 * f['decode_s_per_weight']:.0f}",
            f32_c=f"{1e12 * f['compute_s_per_weight']:.0f}", q4k=f"{1e12 * q['decode_s_per_weight']:.0f}",
            q4k_c=f"{1e12 * q['compute_s_per_weight']:.0f}", lo=f"{lo:.1f}", hi=f"{hi:.1f}", here=f"{here:.1f}",
            study=f"{1 + ql.STUDY['decode_gain']:.2f}"))
    if gains:
        txt = ", ".join(tr("{size} B at {threads}: {gain}×", size=f"{p / 1e9:.2f}", threads=_threads(t, tr),
                           gain=f"{1 + x['decode_gain']:.2f}") for (p, t), x in sorted(gains.items()))
        out.append(tr(
            "- **Threads.** The decode gain F32 → Q4_K_M on this host — {txt} — against the study's {study}× and the "
            "{theory}× of the bytes. One core here streams memory slowly, so F32 decode is slow and the gain large; "
            "threads add both bandwidth and arithmetic, and where they add more bandwidth than the quantized kernels "
            "can use the gain falls toward the arithmetic end. The study's host is described only by its ratios, so "
            "which of these it was is read from them, not known.", txt=txt,
            study=f"{1 + ql.STUDY['decode_gain']:.2f}", theory=ql.STUDY["theory"]))
    return "\n".join(out) + "\n"


def e2_study(ladders: dict, tr=EN) -> str:
    """The original study's F32 → Q4_K_M figures next to each saved ladder's."""
    from part1_capacity.experiments.engine import quant_ladder as ql

    s = ql.STUDY
    out = [*tables.head(tr("| ladder | Q4_K_M file ÷ F32 file | prefill gain | decode gain | size ratio (the decode "
                           "gain bytes alone would give) |"), "lrrrr"),
           tables.row(tr("original study"), f"{s['size']:.2f}×", f"{100 * s['prefill_gain']:+.0f}%",
                      f"{100 * s['decode_gain']:+.0f}% ({1 + s['decode_gain']:.2f}×)", f"{s['theory']:.1f}×")]
    for name, r in ladders.items():
        for th, levels in (r.get("levels_by_threads") or {str(r["threads"]): r["levels"]}).items():
            x = ql.study_ratios(levels)
            if x:
                out.append(tables.row(f"{r['model']['n_params'] / 1e9:.2f} B, {_threads(int(th), tr)}",
                                      f"{x['size']:.2f}×",
                                      f"{100 * x['prefill_gain']:+.0f}%",
                                      f"{100 * x['decode_gain']:+.0f}% ({1 + x['decode_gain']:.2f}×)",
                                      f"{x['theory']:.1f}×"))
    return "\n".join(out) + "\n"


def host_table(r, tr=EN) -> str:
    a = r["accelerator"]
    meas = (r.get("host_profile") or {}).get("measured", {})
    rows = [*tables.head(tr("| quantity | this host | used by the calculator as |"), "lr"),
            tr("| memory read bandwidth | {v} GB/s | bandwidth |", v=f"{a['bandwidth'] / 1e9:.1f}"),
            tr("| fp32 matmul (GEMM) | {v} GFLOP/s | 16-bit peak (`bf16_tflops`) |", v=f"{a['flops_16'] / 1e9:.0f}"),
            tr("| int8 matmul (GEMM) | {v} GOP/s | 8-bit peak (`int8_tflops`) |", v=f"{a['flops_int8'] / 1e9:.0f}"),
            tr("| ridge point, 16-bit | {v} FLOP/byte | prefill/decode bound |", v=f"{a['flops_16'] / a['bandwidth']:.1f}")]
    if meas:
        rows.append(tr("| threads, instruction set | {threads}, capped at {isa} | as the engine |",
                       threads=meas["threads"], isa=meas["isa_cap"]))
    text = "\n".join(rows) + "\n"
    if meas:
        text += "\n" + tr("Method: {method}.", method=tr(meas["method"])) + "\n"
    return text


def e2_model(r, tr=EN) -> str:
    m = r["model"]
    first = r["levels"][0]
    return tr("Model: {params} parameters ({layers} layers, hidden size {hidden}), {source}; measured with "
              "**{method}**, {threads} threads, one warm-up and {repeats} runs per test (mean ± standard deviation). "
              "Bench command for one level: `{command}`.", params=f"{m['n_params']:,}", layers=m["n_layers"],
              hidden=m["hidden_size"], source=tr(m["source"]), method=r["method"], threads=r["threads"],
              repeats=r["repeats"], command=_short_paths(first["bench_command"])) + "\n"


def _short_paths(command: str) -> str:
    """The command with each model path cut to its file name (the scratch folder is gone after the run)."""
    return " ".join(Path(w).name if "/" in w else w for w in command.split())


def _vs(a, b, key):
    """'1.23× as fast' style ratio of two levels on one metric."""
    return f"{a[key] / b[key]:.2f}×"


def e2_findings(r, tr=EN) -> str:
    """Sentences computed from the saved run: what the ladder shows, in its own numbers."""
    lv = {x["type"]: x for x in r["levels"]}
    by_size = sorted(r["levels"], key=lambda x: -x["file_bytes"])
    pp = [x["pp512_tps"] for x in by_size]
    monotonic = all(a <= b for a, b in zip(pp, pp[1:]))
    order = " > ".join(f"{x['type']} {x['pp512_tps']:,.0f}"
                       for x in sorted(r["levels"], key=lambda x: -x["pp512_tps"]))
    roof = f"{r['levels'][0].get('roofline_pp512_tps', r['levels'][0]['predicted_pp512_tps']):,.0f}"
    out = [tr("- **Prefill is monotonic in file size.** pp512 in tokens/s, fastest first: {order}. The plain roofline "
              "predicts one prefill speed for every level: {roof} tokens/s.", order=order, roof=roof) if monotonic else
           tr("- **Prefill is not monotonic in file size.** pp512 in tokens/s, fastest first: {order}. The plain "
              "roofline predicts one prefill speed for every level: {roof} tokens/s.", order=order, roof=roof)]
    acc = r.get("accelerator") or {}
    if {"F16", "Q8_0"} <= lv.keys():
        f16, q8 = lv["F16"], lv["Q8_0"]
        line = tr("- Q8_0 (integer dot products) against F16 (fp32 FMAs): prefill {ratio} as fast with {bytes}× fewer "
                  "bytes. F16 reaches {f16}% of the host's fp32 GEMM throughput", ratio=_vs(q8, f16, "pp512_tps"),
                  bytes=f"{f16['file_bytes'] / q8['file_bytes']:.2f}", f16=f"{100 * f16['matmul_peak_fraction']:.0f}")
        if acc.get("flops_int8"):
            frac = q8["pp512_tps"] * 2 * q8["n_params"] / acc["flops_int8"]
            line += tr("; Q8_0 reaches {q8}% of its int8 GEMM throughput", q8=f"{100 * frac:.0f}")
        out.append(line + ".")
    if {"Q5_0", "Q8_0"} <= lv.keys():
        q5, q8 = lv["Q5_0"], lv["Q8_0"]
        out.append(tr("- Q5_0 against Q8_0 (the same dot-product path plus re-assembling the fifth bits): prefill "
                      "{pp} as fast, decode {tg}, with {bytes}× fewer bytes.", pp=_vs(q5, q8, "pp512_tps"),
                      tg=_vs(q5, q8, "tg128_tps"), bytes=f"{q8['file_bytes'] / q5['file_bytes']:.2f}"))
    if {"Q4_K_M", "Q5_0"} <= lv.keys():
        q4, q5 = lv["Q4_K_M"], lv["Q5_0"]
        out.append(tr("- Q4_K_M (repacked integer GEMM) against Q5_0, files of similar size: prefill {pp} as fast.",
                      pp=_vs(q4, q5, "pp512_tps")))
    if {"F16", "Q4_K_M"} <= lv.keys():
        f16, q4 = lv["F16"], lv["Q4_K_M"]
        out.append(tr("- **Decode improves less than the size ratio.** Q4_K_M's file is {bytes}× smaller than F16's; "
                      "its tg128 is {tg} as fast.", bytes=f"{f16['file_bytes'] / q4['file_bytes']:.2f}",
                      tg=_vs(q4, f16, "tg128_tps")))
    fr = ", ".join(f"{x['type']} {100 * x['bandwidth_fraction']:.0f}%" for x in by_size)
    out.append(tr("- Fraction of the bandwidth roof decode reaches, largest file first: {fr}.", fr=fr))
    key = "roofline" if "roofline_tg128_tps" in r["levels"][0] else "predicted"
    dec = [x["tg128_tps"] / x[f"{key}_tg128_tps"] for x in r["levels"]]
    pre = [x["pp512_tps"] / x[f"{key}_pp512_tps"] for x in r["levels"]]
    out.append(tr("- Measured ÷ the plain roofline: prefill {pre_lo}–{pre_hi}%, decode {dec_lo}–{dec_hi}%.",
                  pre_lo=f"{100 * min(pre):.0f}", pre_hi=f"{100 * max(pre):.0f}", dec_lo=f"{100 * min(dec):.0f}",
                  dec_hi=f"{100 * max(dec):.0f}"))
    return "\n".join(out) + "\n"


def e2_chart(r, metric, path, title, ylabel, tr=EN):
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
    ax.bar(x - 0.2, meas, 0.4, yerr=err, capsize=3, label=tr("measured (llama.cpp)"), color="#3b6ea8")
    ax.bar(x + 0.2, pred, 0.4, label=tr("predicted (speed model, this host's kernels)"), color="#f2a541", hatch="//",
           edgecolor="#9a5b00")
    for xi, m, e, p in zip(x, meas, err, pred):  # measured ÷ predicted, above the error bar
        ax.annotate(f"{100 * m / p:.0f}%" if p else "", (xi - 0.2, m + e), ha="center", va="bottom", fontsize=8,
                    xytext=(0, 3), textcoords="offset points")
    ax.set_xticks(x, [f"{lv['type']}\n{lv['file_bytes'] / 1e6:,.0f} MB" for lv in levels])
    ax.set_ylabel(tr(ylabel))
    ax.set_title(tr(title))
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    ax.set_ylim(0, max(max(m + e for m, e in zip(meas, err)), max(pred)) * 1.12)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def build(out):
    i18n.use_figure_fonts()  # the Korean figures' labels need the CJK font
    from part1_capacity.experiments.engine import quant_ladder as ql
    from part1_capacity.experiments.engine.kernels import RESULT as KERNELS

    e1r = load_result("e1")
    ladders = ql.saved_ladders()
    e2r = ladders.get("e2")
    kern = load_result(KERNELS)
    build_vllm_startup(out)
    w = i18n.write_text
    w(out, "e2_validation.md", lambda tr: e2_validation(ladders, tr))
    w(out, "e2_study.md", lambda tr: e2_study(ladders, tr))
    w(out, "e2_study_claims.md", lambda tr: study_claims(ladders, kern, load_result("e2_build"), tr))
    w(out, "e2_misses.md", lambda tr: e2_misses(ladders, tr))
    stream = load_result("e2_stream")
    w(out, "e2_stream.md", lambda tr: e2_stream(stream, tr))
    pages = load_result("e2_pages")
    w(out, "e2_reads.md", lambda tr: e2_reads(ladders, tr))
    w(out, "e2_pages.md", lambda tr: e2_pages(pages, tr))
    w(out, "e2_drift.md", lambda tr: e2_drift(kern, ladders, tr) or tr("*No saved kernel rounds.*") + "\n")
    w(out, "e2_differences.md", lambda tr: e2_differences(ladders, kern, tr))
    w(out, "e2_kernels.md", lambda tr: e2_kernels_table(kern, tr) if kern else tr(
        "*No saved kernel constants: `python -m part1_capacity.experiments.engine.kernels --save` measures them.*")
        + "\n")
    if e1r:
        w(out, "e1_table.md", lambda tr: e1_tables(e1r, tr)[0])
        w(out, "e1_summary.md", lambda tr: e1_tables(e1r, tr)[1])
        w(out, "e1_model.md", lambda tr: e1_model(e1r, tr))
        w(out, "e1_study.md", lambda tr: e1_study(e1r, tr))
        w(out, "e1_run.md", lambda tr: _run_info(e1r, tr))
    else:
        _missing(out, ("e1_table.md", "e1_summary.md", "e1_model.md", "e1_study.md", "e1_run.md"), "e1")
    sr = load_result("e1_structures")
    if sr:
        w(out, "e1_structures.md", lambda tr: e1_structures_table(sr, tr=tr))
        w(out, "e1_structures_run.md", lambda tr: _run_info(sr, tr))
    else:
        _missing(out, ("e1_structures.md", "e1_structures_run.md"), "e1 --structure all")
    if e2r:
        w(out, "e2_table.md", lambda tr: e2_table(e2r, tr))
        w(out, "e2_model.md", lambda tr: e2_model(e2r, tr))
        w(out, "e2_findings.md", lambda tr: e2_findings(e2r, tr))
        w(out, "e2_run.md", lambda tr: _run_info(e2r, tr))
        w(out, "host_table.md", lambda tr: host_table(e2r, tr))
        for lang, tr in i18n.each_language():
            e2_chart(e2r, "pp512", out / i18n.localized("e2_prefill.png", lang),
                     "Prefill (pp512): one 512-token batch", "tokens/s", tr)
            e2_chart(e2r, "tg128", out / i18n.localized("e2_decode.png", lang),
                     "Decode (tg128): 128 single-token steps", "tokens/s", tr)
    else:
        _missing(out, ("e2_table.md", "e2_model.md", "e2_findings.md", "e2_run.md", "host_table.md"), "e2")
        for lang, tr in i18n.each_language():
            for name in ("e2_prefill.png", "e2_decode.png"):
                _placeholder(out / i18n.localized(name, lang), tr)


def build_vllm_startup(out):
    """vLLM's start-up lines predicted beside published logs (``vllm_startup.py``), and llama.cpp's other buffers:
    published logs and E1's saved run on this machine (``buffers.py``)."""
    from part1_capacity.experiments.engine import buffers, vllm_startup

    e1 = load_result("e1_structures")
    i18n.write_text(out, "vllm_startup.md", lambda tr: vllm_startup.table(tr=tr))
    i18n.write_text(out, "vllm_startup_terms.md", lambda tr: vllm_startup.terms(tr))
    i18n.write_text(out, "llama_cpp_buffers_published.md", lambda tr: buffers.published_table(tr=tr))
    i18n.write_text(out, "e1_buffers.md", lambda tr: buffers.e1_table(e1, tr))


def _placeholder(path, tr=EN):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 1))
    ax.axis("off")
    ax.text(0.5, 0.5, tr("no saved run: capacity e2 --save"), ha="center", va="center")
    fig.savefig(path, dpi=80)
    plt.close(fig)




# --- the original study's figures beside this course's ---------------------------------------------------------------
# The study's E1 reported an engine slope of 48.0 KiB per token for a GQA model it does not name; its figure fits
# gpt-oss-20b with all 24 layers caching the full context (24 × 8 K/V heads × 64 × 2 × 2 B): an inference, said so.
STUDY_E1 = {"slope_kib": 48.0, "model": "gpt-oss-20b"}
RUNGS = ("F16", "Q8_0", "Q5_0", "Q4_K_M")


def e1_study(r, tr=EN) -> str:
    """E1's slope against the study's 48.0 KiB: the same law, a different model — which part of it differs."""
    from part1_capacity.calculator.readers.loader import load_model

    m = r["model"]
    here = r["slope_bytes_per_token"] / 1024
    g = load_model(STUDY_E1["model"])
    width_here = m["n_kv_heads"] * m["head_dim"]
    width_study = g.n_kv_heads * g.head_dim
    full = 2 * g.n_layers * width_study * 2 / 1024            # every layer at full length, bf16
    return tr("The original study's E1 reported {study} KiB per token; this model's engine slope is {here} KiB. Both "
              "are 2 × layers × K/V heads × head_dim × 2 bytes. The study does not name its model; its figure fits {model} "
              "with all {layers} of its layers caching the full context ({kv} K/V heads × {hd} = {width} values per "
              "layer: {full} KiB), so {model} is this course's inference, not the study's word; here "
              "{kv_here} × {hd_here} = {width_here} values per layer over {layers_here} layers. The width per layer "
              "is {same}; the difference is the layer count. ({model} keeps half its layers to a 128-token window: "
              "counted that way it grows {growing} KiB per token, as the calculator has it.)",
              study=f"{STUDY_E1['slope_kib']:.1f}", here=f"{here:.1f}", model=STUDY_E1["model"], layers=g.n_layers,
              kv=g.n_kv_heads, hd=g.head_dim, width=width_study, full=f"{full:.1f}", kv_here=m["n_kv_heads"],
              hd_here=m["head_dim"], width_here=width_here, layers_here=m["n_layers"],
              same=tr("the same") if width_here == width_study else tr("not the same"),
              growing=f"{g.kv_bytes_per_token(2) / 1024:.1f}") + "\n"


def study_claims(ladders: dict, kern: dict | None, build: dict | None, tr=EN) -> str:
    """The study's ladder claims tested on the saved ladders: decode gains more than prefill at every rung; F16
    prefill slower than F32; and which instruction sets the build really uses (its own report)."""
    wins = total = 0
    f16 = []
    for r in ladders.values():
        for th, levels in (r.get("levels_by_threads") or {}).items():
            by = {lv["type"]: lv for lv in levels}
            if "F32" not in by:
                continue
            f = by["F32"]
            for t in RUNGS:
                if t in by:
                    total += 1
                    wins += by[t]["tg128_tps"] / f["tg128_tps"] > by[t]["pp512_tps"] / f["pp512_tps"]
            if "F16" in by:
                f16.append(by["F16"]["pp512_tps"] / f["pp512_tps"])
    out = []
    if total:
        out.append(tr("- **\"Decode gains more than prefill at every rung\"** (the study): against F32, in {wins} of "
                      "{total} comparisons here (rungs {rungs}; every saved ladder, every thread count).",
                      wins=wins, total=total, rungs=", ".join(RUNGS)))
    if f16:
        slower = sum(x < 1 for x in f16)
        verdict = (tr("reproduced") if slower == len(f16) else tr("not reproduced") if not slower else
                   tr("holds in {n} of {m} ladders and thread counts", n=slower, m=len(f16)))
        line = tr("- **\"F16 is slower than F32 in prefill\"** (the study): {verdict} — here F16 prefill is "
                  "{lo}–{hi}× F32's.", verdict=verdict, lo=f"{min(f16):.2f}", hi=f"{max(f16):.2f}")
        c = (kern or {}).get("constants", {})
        kk = [(th, v["types"]) for th, v in sorted(c.items()) if "f16" in v["types"] and "f32" in v["types"]]
        if kk:
            line += " " + tr("The kernels alone agree, per weight and token on the 512-token product: {ratios}.",
                             ratios="; ".join(tr("{threads}: F16 {ratio}× F32's rate", threads=_threads(int(th), tr),
                                                 ratio=f"{t['f32']['prefill_s_per_weight_token'] / t['f16']['prefill_s_per_weight_token']:.2f}")
                                              for th, t in kk))
        line += " " + tr("Why it can go either way: this build converts F16 weights to F32 in hardware (F16C) and "
                         "multiplies them in the same FMA GEMM as F32 weights, so each F16 weight costs one conversion "
                         "more and half the bytes fewer. F16 is slower where the conversion costs more than the bytes "
                         "it saves, faster where the bytes cost more — the kernels' ratio above is this host's answer.")
        out.append(line)
    if build:
        b, cpu = build["build"], build["cpu"]
        off = [k for k in ("avx512", "avx512_vnni", "avx_vnni") if cpu.get(k) and not b.get(k)]
        out.append(tr("- **The instruction-set explanation, tested.** The build's own report "
                      "(`ggml_cpu_has_*` of the `libggml-cpu` llama-bench links; `results/part1/e2_build.json`): {on} on, "
                      "{off} off — while this CPU has {cpu}. So every integer dot product of the ladder ran the AVX2 "
                      "sequence, never VNNI: the prefill ladder above is the AVX2 build's, as the explanation says, "
                      "and a native build on this CPU would take the VNNI path.",
                      on=", ".join(k.upper() for k, v in b.items() if v),
                      off=", ".join(k.upper() for k, v in b.items() if not v) or "—",
                      cpu=", ".join(k.upper() for k in off) or tr("no more than the build uses")))
    return "\n".join(out) + "\n" if out else ""
