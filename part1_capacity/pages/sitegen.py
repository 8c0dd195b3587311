"""Figures and tables for site/part1/calculator.md, produced by the calculator itself from the bundled data.

Nothing here is typed in: every number is a calculator output or a bundled figure (with its source). The prose of
the page states conclusions ("the bottleneck differs by customer"); ``CUSTOMERS_EXPECT`` and ``STRUCTURES_EXPECT``
make the build fail if the calculator stops supporting them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from part1_capacity.calculator.fmt import fmt_bytes, fmt_count, fmt_time
from part1_capacity.calculator.compare import DEFAULT_ACCELERATOR, DEFAULT_BATCH, DEFAULT_CONTEXT, DEFAULT_MODELS
from part1_capacity.calculator.dtypes import get_dtype
from part1_capacity.experiments.engine.sitegen import e1_confirmations
from part1_capacity.calculator import deploy, weights
from part1_capacity.calculator.hardware import bundled_accelerators, eight_bit_cell
from part1_capacity.calculator.plan import IMPLICATIONS, Workload, make_plan
from part1_capacity.calculator.loader import load_model
from part1_capacity.calculator.profiles import bundled_models
from part1_capacity.calculator.sweep import heatmaps, pow2_grid, sweep
from part1_capacity.calculator.tiers import tier_table
from course.units import GIB

NAME = "calc"
REPO = Path(__file__).resolve().parents[2]

# One model, three customers (calculator inputs: a scenario, not a claim of fact).
SAME_MODEL = "llama-3.1-70b"
CUSTOMERS = (
    ("chat service", "many short conversations", dict(accelerator="h100", context=8192, batch=256,
                                                       weights_dtype="fp8", kv_dtype="fp8")),
    ("document analyst", "a few very long documents", dict(accelerator="h200", context=131072, batch=4,
                                                             weights_dtype="bf16", kv_dtype="bf16")),
    ("laptop user", "one conversation on a workstation laptop", dict(accelerator="m4-max", context=8192, batch=1,
                                                                    weights_dtype="q4_k_m", kv_dtype="fp16")),
)
CUSTOMERS_EXPECT = ("kv_cache", "kv_cache", "weights")
STRUCTURES_EXPECT = {"gqa": "kv_cache", "mla": "weights", "ssm_hybrid": "weights"}
HEATMAPS = (("llama-3.1-70b", "h100", "bf16"), ("deepseek-v3", "h200", "fp8"))


def _cell(x) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def engine_check(structure: str, confirmed: dict) -> str:
    """Whether llama.cpp confirmed this structure's allocation in E1 (links to the row), or "computed only"."""
    rows = confirmed.get(structure)
    if not rows:
        return "computed only"
    links = ", ".join(f"[`{arch}`](engine_checks.md#{anchor})" for arch, anchor in rows)
    return f"llama.cpp allocation checked (E1: {links})"


def structures_table(plans, confirmed: dict | None = None) -> str:
    """The four structures side by side. The columns the page's text explains come first (the accelerators, those
    the cache adds, the bottleneck), the sizes after; the engine check is a short link (the paragraph below the
    table says what it means), so the table fits its column."""
    confirmed = e1_confirmations() if confirmed is None else confirmed
    out = ["| structure | model | accelerators | for the weights | added by KV | bottleneck | KV / weights | KV total | "
           "weights size | KV per token | KV per sequence | weights | engine check |",
           "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---|"]
    for d in plans:
        rows = confirmed.get(d["structure"])
        check = ", ".join(f"[E1 `{arch}`](engine_checks.md#{anchor})" for arch, anchor in rows) if rows else "—"
        out.append(f"| {d['structure']} | `{d['model']}` | {fmt_count(d['accelerators_needed'])} | "
                   f"{fmt_count(d['accelerators_without_kv'])} | {fmt_count(d['accelerators_added_by_kv'])} | "
                   f"**{d['bottleneck']}** | {d['kv_to_weights_ratio']:.2f} | {fmt_bytes(d['kv_bytes_total'])} | "
                   f"{fmt_bytes(d['weights_bytes'])} | {fmt_bytes(d['kv_bytes_per_token'])} | "
                   f"{fmt_bytes(d['kv_bytes_per_sequence'])} | {d['workload']['weights_dtype']} | {check} |")
    return "\n".join(out) + "\n"


def engines_table() -> str:
    """The comparison's workload as the law, llama.cpp and vLLM allocate it (``capacity compare --engines``), with
    the rules that moved each engine's figure."""
    from part1_capacity.calculator.compare import compare_engines

    rows = compare_engines(DEFAULT_MODELS, DEFAULT_ACCELERATOR, Workload(context=DEFAULT_CONTEXT, batch=DEFAULT_BATCH))
    out = ["| structure | model | tensor-parallel ranks | law | llama.cpp | vLLM |", "|---|---|---:|---:|---:|---:|"]
    notes = []
    for d in rows:
        law, cpp, vl = d["engines"]
        out.append(f"| {d['structure']} | `{d['model']}` | {law['tensor_parallel']} | "
                   f"{fmt_bytes(law['kv_bytes_total'])} | {fmt_bytes(cpp['kv_bytes_total'])} | "
                   f"{fmt_bytes(vl['kv_bytes_total'])} |")
        for e in (cpp, vl):
            notes += [f"- `{d['model']}`, {e['engine']}: {n}" for n in e["notes"]]
    return "\n".join(out) + "\n\n" + "\n".join(notes) + "\n"


def worked_examples(confirmed: dict | None = None) -> str:
    """Each of the four laws with the model's own numbers plugged in (bf16, 2 bytes; recurrent state at the dtype
    servers keep it in), at the comparison's context, and whether an engine confirmed the structure."""
    confirmed = e1_confirmations() if confirmed is None else confirmed
    T = DEFAULT_CONTEXT
    lines = []
    for mid in DEFAULT_MODELS:
        m = load_model(mid)
        sb = get_dtype(m.ssm.state_dtype or "bf16").bytes if m.ssm else 2
        per_tok, total = m.kv_bytes_per_token(2), m.cache_bytes(T, 2, sb)
        if m.is_mla:
            law = (rf"\({m.n_full_layers} \times ({m.kv_lora_rank} + {m.qk_rope_head_dim}) \times 2\) "
                   f"= {per_tok:,.0f} B per token")
        else:
            law = (rf"\(2 \times {m.n_full_layers} \times {m.n_kv_heads} \times {m.head_dim} \times 2\) "
                   f"= {fmt_bytes(per_tok)} per token")
        extra = ""
        if m.n_window_layers:
            fixed = m.cache_bytes(T, 2) - T * per_tok
            extra = (f"; the {m.n_window_layers} window layers add a fixed "
                     rf"\({m.n_window_layers} \times {m.window} \times 2 \times {m.n_kv_heads} \times "
                     rf"{m.head_dim} \times 2\) = {fmt_bytes(fixed)}")
        if m.ssm:
            extra = (f"; the {m.ssm.n_layers} {m.ssm.kind} layers add a constant "
                     rf"\({m.ssm.n_layers} \times {m.ssm.state_elements:,} \times {sb:g}\) "
                     f"= {fmt_bytes(m.state_bytes(sb))} per sequence"
                     + (f" (state in {m.ssm.state_dtype}, as vLLM keeps it)" if m.ssm.state_dtype else ""))
        lines.append(f"- **{m.structure}**, {m.name}: {law}{extra}. At {T:,} tokens one sequence holds "
                     f"**{fmt_bytes(total)}**. Engine check: {engine_check(m.structure, confirmed)}.")
    return "\n".join(lines) + "\n"


def roofline_table(plans) -> str:
    out = ["| model | phase | FLOP/byte | ridge (FLOP/byte) | bound | estimated time |", "|---|---|---|---|---|---|"]
    for d in plans:
        for ph in ("prefill", "decode"):
            p = d[ph]
            extra = (f"{fmt_time(p['time_s'])} per step, {p['tokens_per_s']:,.0f} tokens/s" if ph == "decode"
                     else f"{fmt_time(p['time_s'])} for one prompt")
            out.append(f"| `{d['model']}` | {ph} | {p['arithmetic_intensity']:,.1f} | {p['ridge_point']:,.0f} | "
                       f"{p['bound']} | {extra} |")
    return "\n".join(out) + "\n"


# The tensor vs pipeline diagram: two structures, eight ranks each way, one workload.
SPLIT_MODELS, SPLIT_RANKS, SPLIT_CONTEXT, SPLIT_BATCH = ("llama-3.1-70b", "deepseek-v3"), 8, 32_768, 16


def stage_layers(n_layers: int, stages: int) -> list[int]:
    """Layers per pipeline stage, as even as possible (the first stages take the remainder)."""
    return [n_layers // stages + (i < n_layers % stages) for i in range(stages)]


def parallel_split_figure(out: Path, plt) -> str:
    """What each of SPLIT_RANKS accelerators holds when one replica is split by tensor or by pipeline parallelism.

    Per rank: weights ``W/t`` (tensor) or the stage's share of the layers (pipeline), and the cache of
    SPLIT_BATCH sequences of SPLIT_CONTEXT tokens — ``deploy.cache_per_rank`` for a tensor rank (whole K/V heads,
    the MLA latent whole on every rank), the stage's layers' share for a pipeline stage. Returns the caption.
    """
    n, GiB = SPLIT_RANKS, GIB
    fig, axes = plt.subplots(len(SPLIT_MODELS), 2, figsize=(11, 3.3 * len(SPLIT_MODELS)), sharey="row",
                             layout="constrained")
    notes = []
    for row, mid in zip(axes, SPLIT_MODELS):
        m = load_model(mid)
        wl = Workload(context=SPLIT_CONTEXT, batch=SPLIT_BATCH, weights_dtype=m.native_dtype, state_dtype="bf16")
        W = weights.weights_bytes(m)
        whole_cache = deploy.cache_per_rank(m, wl, SPLIT_CONTEXT, 1) * SPLIT_BATCH
        tp_cache = deploy.cache_per_rank(m, wl, SPLIT_CONTEXT, n) * SPLIT_BATCH
        layers = stage_layers(m.n_layers, n)
        if m.is_mla:
            held = "the whole MLA latent on every rank (no heads)"
        else:
            held = f"{max(m.n_kv_heads // n, 1)} of {m.n_kv_heads} K/V heads per rank"
        splits = (("tensor", [W / n] * n, [tp_cache] * n,
                   f"tensor parallelism ×{n}: every rank has all {m.n_layers} layers,\n1/{n} of each weight matrix; "
                   f"cache: {held}"),
                  ("pipeline", [W * k / m.n_layers for k in layers], [whole_cache * k / m.n_layers for k in layers],
                   f"pipeline parallelism ×{n}: each rank has "
                   f"{min(layers) if min(layers) == max(layers) else f'{min(layers)}–{max(layers)}'} whole layers\n"
                   f"and only those layers' cache"))
        for ax, (kind, w, c, title) in zip(row, splits):
            x = np.arange(n)
            ax.bar(x, np.array(w) / GiB, 0.6, color="#4c72b0", label="weights")
            ax.bar(x, np.array(c) / GiB, 0.6, bottom=np.array(w) / GiB, color="#dd8452", label="KV cache")
            for i in range(n):
                ax.text(i, (w[i] + c[i]) / GiB, f"{(w[i] + c[i]) / GiB:,.0f}", ha="center", va="bottom", fontsize=8)
            ax.set_xticks(x, [f"rank {i}" for i in x], fontsize=8)
            ax.set_title(f"{m.name} — {title}", fontsize=9)
            ax.grid(axis="y", alpha=0.3)
            ax.margins(y=0.15)
        row[0].set_ylabel("GiB per accelerator")
        notes.append(f"{m.name}: cache per rank {fmt_bytes(tp_cache)} split by tensor, at most "
                     f"{fmt_bytes(whole_cache * max(layers) / m.n_layers)} split by pipeline")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=9)
    fig.suptitle(f"One replica on {n} accelerators, {SPLIT_BATCH} sequences × {SPLIT_CONTEXT:,} tokens, "
                 f"native weights, bf16 cache", fontsize=10)
    fig.savefig(out / "parallel_split.png", dpi=100)
    plt.close(fig)
    return ("Per accelerator, for " + SPLIT_BATCH.__str__() + f" sequences of {SPLIT_CONTEXT:,} tokens on {n} "
            f"ranks: " + "; ".join(notes) + ".\n")


def roofline_summary(plans) -> str:
    """The roofline table in two sentences, with its own numbers: which bound each phase hits, and how far."""
    pre = [d["prefill"] for d in plans]
    dec = sorted(plans, key=lambda d: d["decode"]["arithmetic_intensity"])
    lo, hi = dec[0], dec[-1]
    if any(p["bound"] != "compute" for p in pre) or any(d["decode"]["bound"] != "memory" for d in plans):
        raise AssertionError("calculator page: the roofline prose (prefill compute-bound, decode memory-bound for "
                             "every structure) no longer holds")
    return (f"Prefill of a long prompt is compute-bound for every structure: "
            f"{min(p['arithmetic_intensity'] for p in pre):,.0f} to {max(p['arithmetic_intensity'] for p in pre):,.0f} "
            f"FLOP per byte moved, far above the ridge. Decode stays memory-bound even with {DEFAULT_BATCH} sequences, "
            f"because each step reads all the weights and every sequence's cache: from "
            f"{lo['decode']['arithmetic_intensity']:,.1f} FLOP/byte (`{lo['model']}`) to "
            f"{hi['decode']['arithmetic_intensity']:,.1f} (`{hi['model']}`), against ridge points of "
            f"{min(d['decode']['ridge_point'] for d in plans):,.0f}–{max(d['decode']['ridge_point'] for d in plans):,.0f}."
            + (" The MLA model does the most arithmetic per byte: every query head attends over the one shared "
               "latent, which is read once — like MQA." if hi["structure"] == "mla" else "") + "\n")


def calculator_checks(plans, out: Path) -> None:
    """Answers of the page's self-check questions, from the same plans the page shows."""
    by = {d["structure"]: d for d in plans}
    g, m = by["gqa"], by["mla"]
    (out / "check_added.md").write_text(
        f"`{g['model']}`: {fmt_count(g['accelerators_without_kv'])} for the weights alone, "
        f"{fmt_count(g['accelerators_needed'])} with the cache — **{fmt_count(g['accelerators_added_by_kv'])} added by "
        f"the KV cache**, whose {fmt_bytes(g['kv_bytes_total'])} are {g['kv_to_weights_ratio']:.1f}× the weights. "
        f"Halving the context halves the cache, not the weights: the count added by KV is what shrinks.\n")
    (out / "check_mla.md").write_text(
        f"Its cache is {fmt_bytes(m['kv_bytes_total'])} against {fmt_bytes(m['weights_bytes'])} of weights "
        f"(ratio {m['kv_to_weights_ratio']:.2f}): the latent of {fmt_bytes(m['kv_bytes_per_token'])} per token is "
        f"small, the {load_model(m['model']).params_total / 1e9:,.0f}B-parameter weights are not. Weights are the larger term, so the bottleneck is "
        f"**{m['bottleneck']}** — even though the cache still adds {fmt_count(m['accelerators_added_by_kv'])} "
        f"accelerators.\n")


def growth_figure(out: Path, plt) -> None:
    T = np.unique(np.logspace(np.log10(256), np.log10(DEFAULT_CONTEXT), 200).astype(np.int64))
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for mid in DEFAULT_MODELS:
        m = load_model(mid)
        ax.plot(T, m.cache_bytes(T, 2) / 2 ** 30, label=f"{m.name} ({m.structure})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tokens in one sequence")
    ax.set_ylabel("cache of one sequence, GiB (bf16)")
    ax.set_title("The four structures: how one sequence's cache grows")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "growth.png", dpi=100)
    plt.close(fig)


def customers_table() -> tuple[str, list[dict]]:
    out = ["| customer | accelerator | sequences × tokens | weights / KV precision | weights | KV total | "
           "KV / weights | accelerators (weights + added by KV) | bottleneck |",
           "|---|---|---|---|---|---|---|---|---|"]
    plans, notes = [], []
    for who, what, kw in CUSTOMERS:
        kw = dict(kw)
        acc = kw.pop("accelerator")
        d = make_plan(SAME_MODEL, acc, Workload(**kw)).to_dict()
        plans.append(d)
        out.append(f"| {who} ({what}) | `{acc}` | {kw['batch']:,} × {kw['context']:,} | {kw['weights_dtype']} / "
                   f"{kw['kv_dtype']} | {fmt_bytes(d['weights_bytes'])} | {fmt_bytes(d['kv_bytes_total'])} | "
                   f"{d['kv_to_weights_ratio']:.2f} | {fmt_count(d['accelerators_needed'])} "
                   f"({fmt_count(d['accelerators_without_kv'])} + {fmt_count(d['accelerators_added_by_kv'])}) | "
                   f"**{d['bottleneck']}** |")
        notes.append(f"- **{who}** — {_cell(IMPLICATIONS[d['bottleneck']])}.")
    got = tuple(d["bottleneck"] for d in plans)
    if got != CUSTOMERS_EXPECT:
        raise AssertionError(f"calculator page: the three customers' bottlenecks are now {got}, the page says "
                             f"{CUSTOMERS_EXPECT}: update the prose")
    structure = load_model(SAME_MODEL).structure
    check = (f"\n\nThe cache figures are {structure} ({SAME_MODEL}); engine check: "
             f"{engine_check(structure, e1_confirmations())}.")
    return ("\n".join(out) + check + "\n\nWhat the calculator prints with each verdict:\n\n" + "\n".join(notes)
            + "\n", plans)


def overflow_table(plan: dict) -> str:
    out = ["| tier | capacity per accelerator | bandwidth | holds the overflow | decode tokens/s | slower than HBM |",
           "|---|---|---|---|---|---|"]
    for t in plan["overflow_tiers"]:
        out.append(f"| {t['name']} | {fmt_bytes(t['capacity_bytes_per_accelerator'])} | "
                   f"{t['bandwidth'] / 1e9:,.0f} GB/s | {'yes' if t['fits'] else 'no'} | "
                   f"{t['decode_tokens_per_s']:,.1f} | {t['slowdown_vs_hbm']:,.1f}× |")
    return "\n".join(out) + "\n"


def families_table() -> str:
    """The config.json families the calculator reads (configs.FAMILIES), each with the published file its tests
    read, and the GGUF architectures (checkpoints.GGUF_ARCHITECTURES)."""
    from part1_capacity.calculator.checkpoints import GGUF_ARCHITECTURES
    from part1_capacity.calculator.configs import FAMILIES

    rows = ["| `model_type` | what decides its cache | published config.json the tests read |", "|---|---|---|"]
    rows += [f"| `{mt}` | {_cell(what)} | `{_cell(repo)}` |" for mt, (what, repo) in FAMILIES.items()]
    return ("\n".join(rows) + "\n\nGGUF architectures: " + ", ".join(f"`{a}`" for a in GGUF_ARCHITECTURES)
            + ".\n")


def data_tables() -> tuple[str, str, str]:
    models = ["| id | structure | layers (attention / window / recurrent) | params total / active | native | "
              "KV per token (bf16) | max context | source |", "|---|---|---|---|---|---|---|---|"]
    for m in bundled_models().values():
        layers = f"{m.n_full_layers} / {m.n_window_layers} / {m.ssm.n_layers if m.ssm else 0}"
        params = f"{m.params_total / 1e9:,.4g}B" + (f" / {m.params_active / 1e9:,.3g}B" if m.is_moe else "")
        models.append(f"| `{m.id}` | {m.structure} | {layers} | {params} | {m.native_dtype} | "
                      f"{fmt_bytes(m.kv_bytes_per_token(2))} | {m.max_context:,} | {_cell(m.source)} |")
    accs = ["| id | memory | bandwidth | 16-bit TFLOP/s | fp8 / int8 | interconnect | per node / scale-up domain | "
            "status | source |", "|---|---|---|---|---|---|---|---|---|"]
    for a in bundled_accelerators().values():
        accs.append(f"| `{a.id}` | {a.memory_bytes / 1e9:,.0f} GB | {a.bandwidth / 1e9:,.0f} GB/s | "
                    f"{a.flops_16 / 1e12:,.1f} | {eight_bit_cell(a)} | "
                    f"{_cell(a.interconnect_name) or '—'} | {a.node_size} / {a.max_tp} | {a.status} | {_cell(a.source)} |")
    tiers = ["| tier | capacity per accelerator | bandwidth (one way) | latency from the accelerator | as published | "
             "source |", "|---|---|---|---|---|---|"]
    for t in tier_table():
        cap = t["capacity_gb"] if isinstance(t["capacity_gb"], str) else f"{t['capacity_gb']:,} GB"
        bw = t["bandwidth_gb_s"] if isinstance(t["bandwidth_gb_s"], str) else f"{t['bandwidth_gb_s']:,} GB/s"
        published = ("same" if t["measured_from"] == "accelerator" else
                     f"{t['published_latency_ns']:,} ns from the {t['measured_from']}; {_cell(t['conversion'])}")
        tiers.append(f"| {t['name']} | {cap} | {bw} | {t['latency_ns']:,} ns | {published} | {_cell(t['source'])} |")
    return "\n".join(models) + "\n", "\n".join(accs) + "\n", "\n".join(tiers) + "\n"


def real_models_figure(out: Path, plt) -> None:
    """The lesson-03 laws applied to the comparison's four real models at 128K (shown on lesson 03's page)."""
    GiB = GIB
    rows = ["| structure | model | layers that grow | KV bytes per token (bf16, growing) | constant state | "
            f"cache of one sequence at {DEFAULT_CONTEXT:,} tokens |", "|---|---|---|---|---|---|"]
    sources = []
    T = np.linspace(1, DEFAULT_CONTEXT, 400)
    fig, ax = plt.subplots(figsize=(8, 4))
    for mid in DEFAULT_MODELS:
        p = load_model(mid)
        structure = p.structure
        per_tok = p.kv_bytes_per_token(2)
        state = p.state_bytes(2)
        at = p.cache_bytes(DEFAULT_CONTEXT, 2)
        if p.n_window_layers:
            grows = f"{p.n_full_layers} full + {p.n_window_layers} window (W = {p.window:,})"
        elif p.ssm is not None:
            grows = f"{p.n_full_layers} attention of {p.n_layers} ({p.ssm.n_layers} {p.ssm.kind})"
        else:
            grows = f"{p.n_full_layers}"
        rows.append(f"| {structure} | {p.name} | {grows} | {per_tok / 1024:,.1f} KiB | "
                    f"{f'{state / 2**20:,.1f} MiB' if state else '–'} | **{at / GiB:,.2f} GiB** |")
        sources.append(f"{p.name}: {p.source}")
        ax.plot(T / 1024, p.cache_bytes(T, 2) / GiB, label=f"{structure}: {p.name}")
    rows.append("")
    rows.append("Profiles from `part1_capacity/calculator/data/models.json`; sources: " + "; ".join(sources) + ".")
    (out / "real_models_128k.md").write_text("\n".join(rows) + "\n")
    ax.set_xlabel("tokens in context (K = 1024)")
    ax.set_ylabel("cache of one sequence (GiB, bf16)")
    ax.set_title("Cache-size laws applied to four real models")
    ax.legend()
    fig.savefig(out / "real_models.png", dpi=110, bbox_inches="tight")
    plt.close(fig)


def build(out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    plans = [make_plan(m, DEFAULT_ACCELERATOR, Workload(context=DEFAULT_CONTEXT, batch=DEFAULT_BATCH)).to_dict()
             for m in DEFAULT_MODELS]
    for d in plans:
        want = STRUCTURES_EXPECT.get(d["structure"])
        if want and d["bottleneck"] != want:
            raise AssertionError(f"calculator page: {d['model']} is now {d['bottleneck']}-bound, the page says {want}")
        if d["structure"] == "mla" and not d["accelerators_added_by_kv"]:
            raise AssertionError("calculator page: the prose says the MLA model's cache still adds accelerators")
    (out / "structures.md").write_text(
        f"On `{DEFAULT_ACCELERATOR}`, {DEFAULT_BATCH} sequences × {DEFAULT_CONTEXT:,} tokens, KV cache in bf16, "
        f"weights at each model's native precision (`capacity compare`):\n\n" + structures_table(plans))
    (out / "roofline.md").write_text(roofline_table(plans))
    (out / "roofline_summary.md").write_text(roofline_summary(plans))
    calculator_checks(plans, out)
    (out / "worked.md").write_text(worked_examples())
    (out / "engines.md").write_text(engines_table())
    growth_figure(out, plt)
    (out / "parallel_split.md").write_text(parallel_split_figure(out, plt))
    real_models_figure(out, plt)
    added = []
    checks = []
    for mid, acc, wdt in HEATMAPS:
        m = load_model(mid)
        s = sweep(m, acc, pow2_grid(1024, m.max_context), pow2_grid(1, 256), weights_dtype=wdt)
        heatmaps(s, out / f"heatmap_{mid}.png")
        checks.append(f"- `{mid}` ({m.structure}): {engine_check(m.structure, e1_confirmations())}")
        added.append((np.nanmax(np.where(np.isfinite(s.added_by_kv), s.added_by_kv, np.nan)),
                      np.nanmin(np.where(np.isfinite(s.without_kv), s.without_kv, np.nan))))
    (out / "heatmaps_check.md").write_text("Engine check of each map's cache structure:\n\n" + "\n".join(checks)
                                           + "\n")
    if not (added[1][0] < added[0][0] and added[1][1] > added[0][1]):
        raise AssertionError(f"calculator page: the heatmap prose (MLA: more accelerators for the weights, fewer "
                             f"added by the cache than the GQA model) no longer holds: {added}")
    table, cust = customers_table()
    (out / "customers.md").write_text(table)
    overflow_plan = cust[1]
    (out / "overflow.md").write_text(
        f"The document analyst's plan: {fmt_bytes(overflow_plan['overflow_bytes'])} of cache do not fit beside the "
        f"weights on the {fmt_count(overflow_plan['accelerators_without_kv'])} accelerators the weights need.\n\n"
        + overflow_table(overflow_plan))
    models, accs, tiers = data_tables()
    (out / "models.md").write_text(models)
    (out / "families.md").write_text(families_table())
    (out / "accelerators.md").write_text(accs)
    (out / "tiers.md").write_text(tiers)
