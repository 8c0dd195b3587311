"""Figures and tables for site/part1/calculator.md, produced by the calculator itself from the bundled data.

Nothing here is typed in: every number is a calculator output or a bundled figure (with its source). The prose of
the page states conclusions ("the bottleneck differs by customer"); ``CUSTOMERS_EXPECT`` and ``STRUCTURES_EXPECT``
make the build fail if the calculator stops supporting them.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from course.shared import tables
from course.shared import i18n

from part1_capacity.calculator.base.fmt import fmt_bytes, fmt_count, fmt_time
from part1_capacity.calculator.uses.compare import DEFAULT_ACCELERATOR, DEFAULT_BATCH, DEFAULT_CONTEXT, DEFAULT_MODELS
from part1_capacity.calculator.base.dtypes import get_dtype
from part1_capacity.experiments.engine.sitegen import e1_confirmations
from part1_capacity.calculator.plan import resolve
from part1_capacity.calculator.model import weights
from part1_capacity.calculator.hardware.accelerators import (MEMORY_UNITS, bundled_accelerators, eight_bit_cell,
                                                            marketed_gb, runtime_cell)
from part1_capacity.calculator.plan.plan import IMPLICATIONS, Workload, implication_key, make_plan
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.model.profiles import bundled_models
from part1_capacity.calculator.uses.sweep import heatmaps, pow2_grid, sweep
from part1_capacity.calculator.hardware.tiers import tier_table
from part1_capacity.pages import own_machine
from course.shared.units import GIB

NAME = "calc"
REPO = Path(__file__).resolve().parents[2]

EN = i18n.translator("en")
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
# The original study's figure for the hybrid at 128K, as published (0.75 GB, for nemotron-3-nano-30b-a3b): set
# beside the course's with the reason they differ.
STUDY_128K = {"model": "nemotron-3-nano-30b-a3b", "context": 131072, "figure": "0.75 GB"}
# The page's first answer (the README's engineer line): one model, one accelerator, one workload.
FIRST = dict(model="llama-3.1-70b", accelerator="h100", context=32768, batch=16)
FIRST_ARGS = ["plan", "--model", FIRST["model"], "--accelerator", FIRST["accelerator"], "--context", "32K",
              "--batch", str(FIRST["batch"])]


def _cell(x) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def engine_check(structure: str, confirmed: dict, tr=EN) -> str:
    """Whether llama.cpp confirmed this structure's allocation in E1 (links to the row), or "computed only"."""
    rows = confirmed.get(structure)
    if not rows:
        return tr("computed only")
    links = ", ".join(f"[`{arch}`](engine_checks.md#{anchor})" for arch, anchor in rows)
    return tr("llama.cpp allocation checked (E1: {links})", links=links)


def structures_table(plans, confirmed: dict | None = None, tr=EN) -> str:
    """The four structures side by side. The columns the page's text explains come first (the accelerators, those
    the cache adds, the bottleneck), the sizes after; the engine check is a short link (the paragraph below the
    table says what it means), so the table fits its column."""
    confirmed = e1_confirmations() if confirmed is None else confirmed
    out = tables.head(tr("| structure | model | accelerators | for the weights | added by KV | bottleneck | KV / weights | "
              "KV total | weights size | KV per token | KV per sequence | weights | engine check |"), "llrrrlrrrrr")
    for d in plans:
        rows = confirmed.get(d["structure"])
        check = ", ".join(f"[E1 `{arch}`](engine_checks.md#{anchor})" for arch, anchor in rows) if rows else "—"
        out.append(tables.row(d['structure'], f"`{d['model']}`", fmt_count(d['accelerators_needed']),
                              fmt_count(d['accelerators_without_kv']),
                              fmt_count(d['accelerators_added_by_kv']), f"**{d['bottleneck']}**",
                              f"{d['kv_to_weights_ratio']:.2f}", fmt_bytes(d['kv_bytes_total']),
                              fmt_bytes(d['weights_bytes']), fmt_bytes(d['kv_bytes_per_token']),
                              fmt_bytes(d['kv_bytes_per_sequence']),
                              d['workload']['weights_dtype'], check))
    return "\n".join(out) + "\n"


def engines_table(tr=EN) -> str:
    """The comparison's workload as the law, llama.cpp and vLLM allocate it (``capacity compare --engines``), with
    the rules that moved each engine's figure."""
    from part1_capacity.calculator.uses.compare import compare_engines

    rows = compare_engines(DEFAULT_MODELS, DEFAULT_ACCELERATOR, Workload(context=DEFAULT_CONTEXT, batch=DEFAULT_BATCH))
    out = tables.head(tr("| structure | model | tensor-parallel ranks | law | llama.cpp | vLLM |"), "llrrrr")
    notes = []
    for d in rows:
        law, cpp, vl = d["engines"]
        out.append(tables.row(d['structure'], f"`{d['model']}`", law['tensor_parallel'],
                              fmt_bytes(law['kv_bytes_total']), fmt_bytes(cpp['kv_bytes_total']),
                              fmt_bytes(vl['kv_bytes_total'])))
        for e in (cpp, vl):
            notes += [f"`{d['model']}`, {e['engine']}: {n}" for n in e["notes"]]
    if tr.lang == i18n.DEFAULT:
        return "\n".join(out) + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    # The engine rules' notes are program output (what `capacity compare --engines` prints): quoted as printed.
    return ("\n".join(out) + "\n\n" + tr("What the engine rules noted (as `capacity compare --engines` prints it):")
            + "\n\n```text\n" + "\n".join(notes) + "\n```\n")


def worked_examples(confirmed: dict | None = None, tr=EN) -> str:
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
            law = tr("{formula} = {bytes} B per token", formula=rf"\({m.n_full_layers} \times ({m.kv_lora_rank} + "
                     rf"{m.qk_rope_head_dim}) \times 2\)", bytes=f"{per_tok:,.0f}")
        else:
            law = tr("{formula} = {bytes} per token", formula=rf"\(2 \times {m.n_full_layers} \times {m.n_kv_heads} "
                     rf"\times {m.head_dim} \times 2\)", bytes=fmt_bytes(per_tok))
        extra = ""
        if m.n_window_layers:
            fixed = m.cache_bytes(T, 2) - T * per_tok
            extra = tr("; the {n} window layers add a fixed {formula} = {bytes}", n=m.n_window_layers,
                       formula=rf"\({m.n_window_layers} \times {m.window} \times 2 \times {m.n_kv_heads} \times "
                       rf"{m.head_dim} \times 2\)", bytes=fmt_bytes(fixed))
        if m.ssm:
            extra = (tr("; the {n} {kind} layers add a constant {formula} = {bytes} per sequence", n=m.ssm.n_layers,
                        kind=m.ssm.kind, formula=rf"\({m.ssm.n_layers} \times {m.ssm.state_elements:,} \times {sb:g}\)",
                        bytes=fmt_bytes(m.state_bytes(sb)))
                     + (tr(" (state in {dtype}, as vLLM keeps it)", dtype=m.ssm.state_dtype) if m.ssm.state_dtype else ""))
        study = ""
        if m.id == STUDY_128K["model"] and T == STUDY_128K["context"]:
            study = " " + tr("The original study gave {figure} for it at this length: its attention cache alone, "
                             "{attn} here ({gib} GiB); the course adds the recurrent state, {state}, which a server "
                             "keeps beside it (a difference of scope, not of law).", figure=STUDY_128K["figure"],
                             attn=fmt_bytes(m.attention_cache_bytes(T, 2)),
                             gib=f"{m.attention_cache_bytes(T, 2) / GIB:.2f}", state=fmt_bytes(m.state_bytes(sb)))
        lines.append(f"- **{m.structure}**, {m.name}: {law}{extra}. "
                     + tr("At {T} tokens one sequence holds **{total}**. Engine check: {check}.", T=f"{T:,}",
                          total=fmt_bytes(total), check=engine_check(m.structure, confirmed, tr)) + study)
    return "\n".join(lines) + "\n"


def first_output() -> str:
    """What `capacity plan` prints for FIRST, run as a learner runs it (the CLI in a process of its own)."""
    done = subprocess.run([sys.executable, "-m", "part1_capacity.cli", *FIRST_ARGS], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "COLUMNS": "120"})
    if done.returncode:
        raise RuntimeError(f"capacity {' '.join(FIRST_ARGS)} failed: {done.stderr.strip()}")
    return done.stdout.rstrip("\n")


def first_answer(output: str, tr=EN) -> str:
    """The page's worked example: the command, its output as printed, and the output read top to bottom with the
    plan's own numbers."""
    d = make_plan(FIRST["model"], FIRST["accelerator"],
                  Workload(context=FIRST["context"], batch=FIRST["batch"])).to_dict()
    par = d["parallelism"]
    return ("```console\n$ .venv/bin/capacity " + " ".join(FIRST_ARGS) + "\n" + output + "\n```\n\n" + tr(
        "Read it top to bottom. The weights take **{weights}**. Each token of each sequence adds **{per_token}** of "
        "KV cache, so one sequence of {context} tokens holds **{per_seq}** and the {batch} sequences **{total}**: "
        "{ratio}× the weights. The weights alone fit on **{without}** accelerators; the cache adds **{added}**, for "
        "**{needed}** in all (tensor {tensor} × pipeline {pipeline} × data {data}). The bottleneck is therefore "
        "`{bottleneck}`, and the last lines say what that implies and where the cache that does not fit could go.",
        weights=fmt_bytes(d["weights_bytes"]), per_token=fmt_bytes(d["kv_bytes_per_token"]),
        context=f"{FIRST['context']:,}", per_seq=fmt_bytes(d["kv_bytes_per_sequence"]), batch=FIRST["batch"],
        total=fmt_bytes(d["kv_bytes_total"]), ratio=f"{d['kv_to_weights_ratio']:.2f}",
        without=fmt_count(d["accelerators_without_kv"]), added=fmt_count(d["accelerators_added_by_kv"]),
        needed=fmt_count(d["accelerators_needed"]), tensor=par["tensor"], pipeline=par["pipeline"],
        data=par["data"], bottleneck=d["bottleneck"]) + "\n")


def roofline_table(plans, tr=EN) -> str:
    out = tables.head(tr("| model | phase | FLOP/byte | ridge (FLOP/byte) | bound | estimated time |"))
    for d in plans:
        for ph in ("prefill", "decode"):
            p = d[ph]
            extra = (tr("{time} per step, {rate} tokens/s", time=fmt_time(p["time_s"]), rate=f"{p['tokens_per_s']:,.0f}")
                     if ph == "decode" else tr("{time} for one prompt", time=fmt_time(p["time_s"])))
            out.append(tables.row(f"`{d['model']}`", tr(ph), f"{p['arithmetic_intensity']:,.1f}",
                                  f"{p['ridge_point']:,.0f}", tr(p['bound']), extra))
    return "\n".join(out) + "\n"


# The tensor vs pipeline diagram: two structures, eight ranks each way, one workload.
SPLIT_MODELS, SPLIT_RANKS, SPLIT_CONTEXT, SPLIT_BATCH = ("llama-3.1-70b", "deepseek-v3"), 8, 32_768, 16


def stage_layers(n_layers: int, stages: int) -> list[int]:
    """Layers per pipeline stage, as even as possible (the first stages take the remainder)."""
    return [n_layers // stages + (i < n_layers % stages) for i in range(stages)]


def parallel_split_figure(path: Path, plt, tr=EN) -> str:
    """What each of SPLIT_RANKS accelerators holds when one replica is split by tensor or by pipeline parallelism.

    Per rank: weights ``W/t`` (tensor) or the stage's share of the layers (pipeline), and the cache of
    SPLIT_BATCH sequences of SPLIT_CONTEXT tokens — ``resolve.cache_per_rank`` for a tensor rank (whole K/V heads,
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
        whole_cache = resolve.cache_per_rank(m, wl, SPLIT_CONTEXT, 1) * SPLIT_BATCH
        tp_cache = resolve.cache_per_rank(m, wl, SPLIT_CONTEXT, n) * SPLIT_BATCH
        layers = stage_layers(m.n_layers, n)
        if m.is_mla:
            held = tr("the whole MLA latent on every rank (no heads)")
        else:
            held = tr("{k} of {n} K/V heads per rank", k=max(m.n_kv_heads // n, 1), n=m.n_kv_heads)
        splits = (("tensor", [W / n] * n, [tp_cache] * n,
                   tr("tensor parallelism ×{n}: every rank has all {layers} layers,\n1/{n} of each weight matrix; "
                      "cache: {held}", n=n, layers=m.n_layers, held=held)),
                  ("pipeline", [W * k / m.n_layers for k in layers], [whole_cache * k / m.n_layers for k in layers],
                   tr("pipeline parallelism ×{n}: each rank has {layers} whole layers\nand only those layers' cache", n=n,
                      layers=min(layers) if min(layers) == max(layers) else f"{min(layers)}–{max(layers)}")))
        for ax, (kind, w, c, title) in zip(row, splits):
            x = np.arange(n)
            ax.bar(x, np.array(w) / GiB, 0.6, color="#4c72b0", label=tr("weights"))
            ax.bar(x, np.array(c) / GiB, 0.6, bottom=np.array(w) / GiB, color="#dd8452", label=tr("KV cache"))
            for i in range(n):
                ax.text(i, (w[i] + c[i]) / GiB, f"{(w[i] + c[i]) / GiB:,.0f}", ha="center", va="bottom", fontsize=8)
            ax.set_xticks(x, [tr("rank {i}", i=i) for i in x], fontsize=8)
            ax.set_title(f"{m.name} — {title}", fontsize=9)
            ax.grid(axis="y", alpha=0.3)
            ax.margins(y=0.15)
        row[0].set_ylabel(tr("GiB per accelerator"))
        notes.append(tr("{name}: cache per rank {tp} split by tensor, at most {pp} split by pipeline", name=m.name,
                        tp=fmt_bytes(tp_cache), pp=fmt_bytes(whole_cache * max(layers) / m.n_layers)))
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=9)
    fig.suptitle(tr("One replica on {n} accelerators, {batch} sequences × {context} tokens, native weights, bf16 cache",
                    n=n, batch=SPLIT_BATCH, context=f"{SPLIT_CONTEXT:,}"), fontsize=10)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return tr("Per accelerator, for {batch} sequences of {context} tokens on {n} ranks: {notes}.", batch=SPLIT_BATCH,
              context=f"{SPLIT_CONTEXT:,}", n=n, notes="; ".join(notes)) + "\n"


def roofline_summary(plans, tr=EN) -> str:
    """The roofline table in two sentences, with its own numbers: which bound each phase hits, and how far."""
    pre = [d["prefill"] for d in plans]
    dec = sorted(plans, key=lambda d: d["decode"]["arithmetic_intensity"])
    lo, hi = dec[0], dec[-1]
    if any(p["bound"] != "compute" for p in pre) or any(d["decode"]["bound"] != "memory" for d in plans):
        raise AssertionError("calculator page: the roofline prose (prefill compute-bound, decode memory-bound for "
                             "every structure) no longer holds")
    return (tr("Prefill of a long prompt is compute-bound for every structure: {pre_lo} to {pre_hi} FLOP per byte "
               "moved, far above the ridge. Decode stays memory-bound even with {batch} sequences, because each step "
               "reads all the weights and every sequence's cache: from {lo} FLOP/byte (`{lo_model}`) to {hi} "
               "(`{hi_model}`), against ridge points of {ridge_lo}–{ridge_hi}.",
               pre_lo=f"{min(p['arithmetic_intensity'] for p in pre):,.0f}",
               pre_hi=f"{max(p['arithmetic_intensity'] for p in pre):,.0f}", batch=DEFAULT_BATCH,
               lo=f"{lo['decode']['arithmetic_intensity']:,.1f}", lo_model=lo["model"],
               hi=f"{hi['decode']['arithmetic_intensity']:,.1f}", hi_model=hi["model"],
               ridge_lo=f"{min(d['decode']['ridge_point'] for d in plans):,.0f}",
               ridge_hi=f"{max(d['decode']['ridge_point'] for d in plans):,.0f}")
            + (tr(" The MLA model does the most arithmetic per byte: every query head attends over the one shared "
                  "latent, which is read once — like MQA.") if hi["structure"] == "mla" else "") + "\n")


def calculator_checks(plans, out: Path) -> None:
    """Answers of the page's self-check questions, from the same plans the page shows."""
    by = {d["structure"]: d for d in plans}
    g, m = by["gqa"], by["mla"]
    i18n.write_text(out, "check_added.md", lambda tr: tr(
        "`{model}`: {without} for the weights alone, {needed} with the cache — **{added} added by the KV cache**, "
        "whose {kv} are {ratio}× the weights. Halving the context halves the cache, not the weights: the count added "
        "by KV is what shrinks.", model=g["model"], without=fmt_count(g["accelerators_without_kv"]),
        needed=fmt_count(g["accelerators_needed"]), added=fmt_count(g["accelerators_added_by_kv"]),
        kv=fmt_bytes(g["kv_bytes_total"]), ratio=f"{g['kv_to_weights_ratio']:.1f}") + "\n")
    i18n.write_text(out, "check_mla.md", lambda tr: tr(
        "Its cache is {kv} against {weights} of weights (ratio {ratio}): the latent of {per_token} per token is small, "
        "the {params}B-parameter weights are not. Weights are the larger term, so the bottleneck is **{bottleneck}** — "
        "even though the cache still adds {added} accelerators. Both statements hold: the {without} accelerators the "
        "weights need stay whatever is done to the cache, while the {added} the cache adds hold only cache, and an fp8 "
        "cache, fewer or shorter sequences, or a slower tier for the cache would remove them.",
        without=fmt_count(m["accelerators_without_kv"]), kv=fmt_bytes(m["kv_bytes_total"]),
        weights=fmt_bytes(m["weights_bytes"]), ratio=f"{m['kv_to_weights_ratio']:.2f}",
        per_token=fmt_bytes(m["kv_bytes_per_token"]), params=f"{load_model(m['model']).params_total / 1e9:,.0f}",
        bottleneck=m["bottleneck"], added=fmt_count(m["accelerators_added_by_kv"])) + "\n")


def growth_figure(path: Path, plt, tr=EN) -> None:
    T = np.unique(np.logspace(np.log10(256), np.log10(DEFAULT_CONTEXT), 200).astype(np.int64))
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for mid in DEFAULT_MODELS:
        m = load_model(mid)
        ax.plot(T, m.cache_bytes(T, 2) / 2 ** 30, label=f"{m.name} ({m.structure})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(tr("tokens in one sequence"))
    ax.set_ylabel(tr("cache of one sequence, GiB (bf16)"))
    ax.set_title(tr("The four structures: how one sequence's cache grows"))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def customers_table(tr=EN) -> tuple[str, list[dict]]:
    out = tables.head(tr("| customer | accelerator | sequences × tokens | weights / KV precision | weights | KV total | "
              "KV / weights | accelerators (weights + added by KV) | bottleneck |"))
    plans, notes = [], []
    for who, what, kw in CUSTOMERS:
        kw = dict(kw)
        acc = kw.pop("accelerator")
        d = make_plan(SAME_MODEL, acc, Workload(**kw)).to_dict()
        plans.append(d)
        out.append(tables.row(f"{tr(who)} ({tr(what)})", f"`{acc}`", f"{kw['batch']:,} × {kw['context']:,}",
                              f"{kw['weights_dtype']} / {kw['kv_dtype']}",
                              fmt_bytes(d['weights_bytes']), fmt_bytes(d['kv_bytes_total']),
                              f"{d['kv_to_weights_ratio']:.2f}",
                              f"{fmt_count(d['accelerators_needed'])} ({fmt_count(d['accelerators_without_kv'])} + {fmt_count(d['accelerators_added_by_kv'])})",
                              f"**{d['bottleneck']}**"))
        key = implication_key(d["bottleneck"], d["accelerators_added_by_kv"])
        notes.append(f"- **{tr(who)}** — {_cell(tr(IMPLICATIONS[key]))}.")
    got = tuple(d["bottleneck"] for d in plans)
    if got != CUSTOMERS_EXPECT:
        raise AssertionError(f"calculator page: the three customers' bottlenecks are now {got}, the page says "
                             f"{CUSTOMERS_EXPECT}: update the prose")
    structure = load_model(SAME_MODEL).structure
    check = "\n\n" + tr("The cache figures are {structure} ({model}); engine check: {check}.", structure=structure,
                         model=SAME_MODEL, check=engine_check(structure, e1_confirmations(), tr))
    return ("\n".join(out) + check + "\n\n" + tr("What the calculator prints with each verdict:") + "\n\n"
            + "\n".join(notes) + "\n", plans)


def overflow_table(plan: dict, tr=EN) -> str:
    out = tables.head(tr("| tier | capacity per accelerator | bandwidth | holds the overflow | decode tokens/s | slower than HBM |"))
    for t in plan["overflow_tiers"]:
        out.append(tables.row(t['name'], fmt_bytes(t['capacity_bytes_per_accelerator']),
                              f"{t['bandwidth'] / 1e9:,.0f} GB/s",
                              tr('yes') if t['fits'] else tr('no'),
                              f"{t['decode_tokens_per_s']:,.1f}", f"{t['slowdown_vs_hbm']:,.1f}×"))
    return "\n".join(out) + "\n"


def counted_types(tr=EN) -> str:
    """The model types the page counts from their config's fields alone (configs.light_types: the counted ones and
    those checked at their class's default size), for the live page."""
    from part1_capacity.calculator.model.configs import light_types

    return tr("The page counts these {n} model types from their fields: {types}.", n=len(light_types()),
              types=", ".join(f"`{t}`" for t in light_types())) + "\n"


def families_table(tr=EN) -> str:
    """The config.json families the calculator reads (configs.FAMILIES), each with the published file its tests
    read, and the GGUF architectures (checkpoints.GGUF_ARCHITECTURES)."""
    from part1_capacity.calculator.readers.checkpoints import GGUF_ARCHITECTURES
    from part1_capacity.calculator.model.configs import FAMILIES

    rows = tables.head(tr("| `model_type` | what decides its cache | published config.json the tests read |"))
    rows += [tables.row(f"`{mt}`", _cell(tr(what)), f"`{_cell(repo)}`") for mt, (what, repo) in FAMILIES.items()]
    return ("\n".join(rows) + "\n\n" + tr("GGUF architectures: {archs}.", archs=", ".join(f"`{a}`" for a in GGUF_ARCHITECTURES))
            + "\n")


def data_tables(tr=EN) -> tuple[str, str, str]:
    models = tables.head(tr("| id | structure | layers (attention / window / recurrent) | params total / active | native | "
                 "KV per token (bf16) | max context | source |"))
    for m in bundled_models().values():
        layers = f"{m.n_full_layers} / {m.n_window_layers} / {m.ssm.n_layers if m.ssm else 0}"
        params = f"{m.params_total / 1e9:,.4g}B" + (f" / {m.params_active / 1e9:,.3g}B" if m.is_moe else "")
        models.append(tables.row(f"`{m.id}`", m.structure, layers, params, m.native_dtype,
                                 fmt_bytes(m.kv_bytes_per_token(2)), f"{m.max_context:,}",
                                 _cell(m.source)))
    accs = tables.head(tr("| id | marketed GB | runtime GiB | bandwidth | 16-bit TFLOP/s | fp8 / int8 | interconnect | "
               "per node / scale-up domain | status | source |"))
    for a in bundled_accelerators().values():
        accs.append(tables.row(f"`{a.id}`", f"{marketed_gb(a):,.4g}", runtime_cell(a), f"{a.bandwidth / 1e9:,.0f} GB/s",
                               f"{a.flops_16 / 1e12:,.1f}", eight_bit_cell(a),
                               _cell(a.interconnect_name) or '—', f"{a.node_size} / {a.max_tp}",
                               tr(a.status), _cell(a.source) + "; " + tr("runtime total: {src}",
                                                                          src=_cell(a.engine_memory_source))))
    accs += ["", tr(MEMORY_UNITS)]
    tiers = tables.head(tr("| tier | for | capacity per accelerator | bandwidth (one way) | latency from the accelerator | "
                "as published | source |"))
    for t in tier_table():
        cap = t["capacity_gb"] if isinstance(t["capacity_gb"], str) else f"{t['capacity_gb']:,} GB"
        bw = t["bandwidth_gb_s"] if isinstance(t["bandwidth_gb_s"], str) else f"{t['bandwidth_gb_s']:,} GB/s"
        published = (tr("same") if t["measured_from"] == "accelerator" else
                     tr("{ns} ns from the {where}; {conversion}", ns=f"{t['published_latency_ns']:,}",
                        where=tr(t["measured_from"]), conversion=_cell(tr(t["conversion"]))))
        tiers.append(tables.row(t['name'], ', '.join(t['kinds']), cap, bw, f"{t['latency_ns']:,} ns", published, _cell(t['source'])))
    return "\n".join(models) + "\n", "\n".join(accs) + "\n", "\n".join(tiers) + "\n"


def real_models_figure(out: Path, plt, tr=EN, lang: str = i18n.DEFAULT) -> None:
    """The lesson-03 laws applied to the comparison's four real models at 128K (shown on lesson 03's page)."""
    GiB = GIB
    rows = tables.head(tr("| structure | model | layers that grow | KV bytes per token (bf16, growing) | constant state | "
               "cache of one sequence at {context} tokens |", context=f"{DEFAULT_CONTEXT:,}"))
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
            grows = tr("{full} full + {window} window (W = {w})", full=p.n_full_layers, window=p.n_window_layers,
                       w=f"{p.window:,}")
        elif p.ssm is not None:
            grows = tr("{full} attention of {n} ({ssm} {kind})", full=p.n_full_layers, n=p.n_layers,
                       ssm=p.ssm.n_layers, kind=p.ssm.kind)
        else:
            grows = f"{p.n_full_layers}"
        rows.append(tables.row(structure, p.name, grows, f"{per_tok / 1024:,.1f} KiB",
                               f'{state / 2**20:,.1f} MiB' if state else '–',
                               f"**{at / GiB:,.2f} GiB**"))
        sources.append(f"{p.name}: {p.source}")
        ax.plot(T / 1024, p.cache_bytes(T, 2) / GiB, label=f"{structure}: {p.name}")
    rows.append("")
    rows.append(tr("Profiles from `part1_capacity/calculator/data/models.json`; sources: {sources}.",
                   sources="; ".join(sources)))
    (out / i18n.localized("real_models_128k.md", lang)).write_text("\n".join(rows) + "\n")
    ax.set_xlabel(tr("tokens in context (K = 1024)"))
    ax.set_ylabel(tr("cache of one sequence (GiB, bf16)"))
    ax.set_title(tr("Cache-size laws applied to four real models"))
    ax.legend()
    fig.savefig(out / i18n.localized("real_models.png", lang), dpi=110, bbox_inches="tight")
    plt.close(fig)


def build(out):
    i18n.use_figure_fonts()  # the Korean figures' labels need the CJK font
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
    confirmed = e1_confirmations()
    i18n.write_text(out, "structures.md", lambda tr: tr(
        "On `{accelerator}`, {batch} sequences × {context} tokens, KV cache in bf16, weights at each model's native "
        "precision (`capacity compare`):", accelerator=DEFAULT_ACCELERATOR, batch=DEFAULT_BATCH,
        context=f"{DEFAULT_CONTEXT:,}") + "\n\n" + structures_table(plans, confirmed, tr))
    i18n.write_text(out, "roofline.md", lambda tr: roofline_table(plans, tr))
    i18n.write_text(out, "roofline_summary.md", lambda tr: roofline_summary(plans, tr))
    calculator_checks(plans, out)
    i18n.write_text(out, "worked.md", lambda tr: worked_examples(confirmed, tr))
    printed = first_output()
    i18n.write_text(out, "first_answer.md", lambda tr: first_answer(printed, tr))
    i18n.write_text(out, "engines.md", engines_table)
    for lang, tr in i18n.each_language():
        growth_figure(out / i18n.localized("growth.png", lang), plt, tr)
        (out / i18n.localized("parallel_split.md", lang)).write_text(
            parallel_split_figure(out / i18n.localized("parallel_split.png", lang), plt, tr))
        real_models_figure(out, plt, tr, lang)
    added = []
    for mid, acc, wdt in HEATMAPS:
        m = load_model(mid)
        s = sweep(m, acc, pow2_grid(1024, m.max_context), pow2_grid(1, 256), weights_dtype=wdt)
        for lang, tr in i18n.each_language():
            heatmaps(s, out / i18n.localized(f"heatmap_{mid}.png", lang), tr=tr)
        added.append((np.nanmax(np.where(np.isfinite(s.added_by_kv), s.added_by_kv, np.nan)),
                      np.nanmin(np.where(np.isfinite(s.without_kv), s.without_kv, np.nan))))
    i18n.write_text(out, "heatmaps_check.md", lambda tr: tr("Engine check of each map's cache structure:") + "\n\n"
                    + "\n".join(f"- `{mid}` ({load_model(mid).structure}): "
                                + engine_check(load_model(mid).structure, confirmed, tr) for mid, _, _ in HEATMAPS) + "\n")
    if not (added[1][0] < added[0][0] and added[1][1] > added[0][1]):
        raise AssertionError(f"calculator page: the heatmap prose (MLA: more accelerators for the weights, fewer "
                             f"added by the cache than the GQA model) no longer holds: {added}")
    _, cust = customers_table()
    i18n.write_text(out, "customers.md", lambda tr: customers_table(tr)[0])
    overflow_plan = cust[1]
    i18n.write_text(out, "overflow.md", lambda tr: tr(
        "The document analyst's plan: {overflow} of cache do not fit beside the weights on the {n} accelerators the "
        "weights need.", overflow=fmt_bytes(overflow_plan["overflow_bytes"]),
        n=fmt_count(overflow_plan["accelerators_without_kv"])) + "\n\n" + overflow_table(overflow_plan, tr))
    i18n.write_text(out, "models.md", lambda tr: data_tables(tr)[0])
    i18n.write_text(out, "families.md", families_table)
    i18n.write_text(out, "counted_types.md", counted_types)
    i18n.write_text(out, "accelerators.md", lambda tr: data_tables(tr)[1])
    i18n.write_text(out, "tiers.md", lambda tr: data_tables(tr)[2])
    own_machine.build(out)         # "on your own machine": fit and the llama.cpp split
