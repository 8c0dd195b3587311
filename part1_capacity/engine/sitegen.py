"""Tables, charts and findings for site/part1/engine_checks.md, from the saved runs in part1_capacity/results/
(e1.json, e2.json, host_accelerator.json). Nothing is measured here: the site builds in seconds.
"""
from __future__ import annotations

from part1_capacity.engine.common import load_result

NAME = "engine"
MIB = 2 ** 20


def _missing(out, names, what):
    for n in names:
        (out / n).write_text(f"*No saved {what} run: `capacity {what} --save` writes one.*\n")


def _run_info(r) -> str:
    h = r["host"]
    note = f" — {r['note']}" if r.get("note") else ""
    return (f"Run on {r['date']}, host `{h['node']}`: {h['cpu']}, {h['cpus']} CPUs, "
            f"{h['memory_bytes'] / 2 ** 30:.0f} GiB, llama-cpp-python {r['llama_cpp_python']}{note}. "
            f"Command: `{r['command']}`\n")


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
def e2_table(r) -> str:
    rows = ["| type | file | bits/weight | pp512 measured | pp512 predicted | of matmul peak | "
            "tg128 measured | tg128 predicted | of bandwidth roof |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for lv in r["levels"]:
        rows.append(
            f"| {lv['type']} | {lv['file_bytes'] / 1e6:,.0f} MB | {lv['bits_per_weight']:.2f} | "
            f"{lv['pp512_tps']:,.1f} ± {lv['pp512_stddev']:,.1f} | {lv['predicted_pp512_tps']:,.1f} | "
            f"{100 * lv['matmul_peak_fraction']:.0f}% | {lv['tg128_tps']:,.2f} ± {lv['tg128_stddev']:,.2f} | "
            f"{lv['predicted_tg128_tps']:,.2f} | {100 * lv['bandwidth_fraction']:.0f}% |")
    return "\n".join(rows) + "\n"


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
            f"`{first['bench_command']}`.\n")


def e2_findings(r) -> str:
    """Sentences computed from the saved run: what the ladder shows, in its own numbers."""
    lv = {x["type"]: x for x in r["levels"]}
    by_size = sorted(r["levels"], key=lambda x: -x["file_bytes"])
    pp = [x["pp512_tps"] for x in by_size]
    monotonic = all(a <= b for a, b in zip(pp, pp[1:]))
    fastest_pp = max(r["levels"], key=lambda x: x["pp512_tps"])
    out = []
    order = " > ".join(f"{x['type']} {x['pp512_tps']:,.0f}" for x in sorted(r["levels"],
                                                                           key=lambda x: -x["pp512_tps"]))
    out.append(f"- **Prefill is {'' if monotonic else 'not '}monotonic in file size.** pp512 in tokens/s, "
               f"fastest first: {order}. The fastest is {fastest_pp['type']}; the calculator predicts the same "
               f"prefill for every level (all counted at the 16-bit peak): "
               f"{lv['F16']['predicted_pp512_tps']:,.0f} tokens/s.")
    if "F16" in lv and "Q4_K_M" in lv:
        f16, q4 = lv["F16"], lv["Q4_K_M"]
        size_ratio = f16["file_bytes"] / q4["file_bytes"]
        speed = q4["tg128_tps"] / f16["tg128_tps"]
        out.append(f"- **Decode improves less than the size ratio.** Q4_K_M's file is {size_ratio:.2f}× smaller "
                   f"than F16's; its tg128 is {speed:.2f}× faster. The bandwidth roof reached falls from "
                   f"{100 * f16['bandwidth_fraction']:.0f}% (F16) to {100 * q4['bandwidth_fraction']:.0f}% "
                   f"(Q4_K_M).")
    if "Q8_0" in lv and "F16" in lv:
        q8, f16 = lv["Q8_0"], lv["F16"]
        out.append(f"- Q8_0 against F16: {f16['file_bytes'] / q8['file_bytes']:.2f}× smaller, decode "
                   f"{q8['tg128_tps'] / f16['tg128_tps']:.2f}× and prefill {q8['pp512_tps'] / f16['pp512_tps']:.2f}× "
                   f"as fast.")
    if "Q5_0" in lv and "Q8_0" in lv:
        q5, q8 = lv["Q5_0"], lv["Q8_0"]
        out.append(f"- Q5_0 against Q8_0: {q8['file_bytes'] / q5['file_bytes']:.2f}× smaller, decode "
                   f"{q5['tg128_tps'] / q8['tg128_tps']:.2f}× and prefill {q5['pp512_tps'] / q8['pp512_tps']:.2f}× "
                   f"as fast.")
    dec_err = [x["tg128_tps"] / x["predicted_tg128_tps"] for x in r["levels"]]
    out.append(f"- Measured decode is {100 * min(dec_err):.0f}–{100 * max(dec_err):.0f}% of the calculator's "
               f"prediction; measured prefill is "
               f"{100 * min(x['pp512_tps'] / x['predicted_pp512_tps'] for x in r['levels']):.0f}–"
               f"{100 * max(x['pp512_tps'] / x['predicted_pp512_tps'] for x in r['levels']):.0f}%.")
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
    pred = [lv[f"predicted_{metric}_tps"] for lv in levels]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.bar(x - 0.2, meas, 0.4, yerr=err, capsize=3, label="measured (llama.cpp)", color="#3b6ea8")
    ax.bar(x + 0.2, pred, 0.4, label="predicted (calculator, this host)", color="#f2a541", hatch="//",
           edgecolor="#9a5b00")
    for xi, m, p in zip(x, meas, pred):
        ax.annotate(f"{100 * m / p:.0f}%", (xi - 0.2, m), ha="center", va="bottom", fontsize=8,
                    xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(x, [f"{lv['type']}\n{lv['file_bytes'] / 1e6:,.0f} MB" for lv in levels])
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_ylim(0, max(max(meas), max(pred)) * 1.18)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def build(out):
    e1r, e2r = load_result("e1"), load_result("e2")
    if e1r:
        per_ctx, summary = e1_tables(e1r)
        (out / "e1_table.md").write_text(per_ctx)
        (out / "e1_summary.md").write_text(summary)
        (out / "e1_model.md").write_text(e1_model(e1r))
        (out / "e1_run.md").write_text(_run_info(e1r))
    else:
        _missing(out, ("e1_table.md", "e1_summary.md", "e1_model.md", "e1_run.md"), "e1")
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


def _placeholder(path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 1))
    ax.axis("off")
    ax.text(0.5, 0.5, "no saved run: capacity e2 --save", ha="center", va="center")
    fig.savefig(path, dpi=80)
    plt.close(fig)
