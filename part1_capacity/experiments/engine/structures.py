"""E1 for every cache structure: what llama.cpp allocates for GQA, MQA, MLA, sliding-window and recurrent hybrids.

For each tiny model (``tiny_models``: llama GQA and MQA, deepseek2, gemma2, gemma3, gpt-oss, nemotron_h, jamba,
qwen3next) open contexts of several sizes for 1 and several sequences, read every buffer llama.cpp logs — K and V
of the full layers, K and V of the sliding-window cache, the recurrent R (convolution) and S (SSM / delta-net)
states — and compare each with the calculator's prediction for the same shape: the profile read from the GGUF's
metadata (``gguf_profile``), the lesson-03 laws, and llama.cpp's allocation rules (``engines.llama_cpp``).
The law alone (no engine rule) is recorded beside them: that is the gap the rules explain.

The log prints MiB with two decimals, so a component matches when it is within 0.005 MiB of the prediction and
its cell count (printed exactly) equals the predicted one.

A row of ``capacity e1 --structure … --json``: ``architecture``, ``contexts``, ``n_seq``, ``cases`` (every
(context, n_seq[, swa_full]) opened, in order), ``reported`` / ``predicted`` / ``law`` (component → bytes, one per
case in ``cases`` order; components K, V, K_swa, V_swa, R, S as the model has them), ``match`` and ``details``
(per case: cells logged and predicted, the log lines).
"""
from __future__ import annotations

import re

from part1_capacity.experiments.engine import buffers, llama
from part1_capacity.experiments.engine.gguf_profile import calculator_profile
from part1_capacity.calculator.engines import llama_cpp as rules

CONTEXTS = (1000, 4096, 16384)     # 1000: not a multiple of 256, so the padding shows
N_SEQ = (1, 4)
PRINT_HALF_STEP_BYTES = 0.005 * llama.MIB
KV_BYTES = {"f16": 2}

# `llama_memory_recurrent: size = 1.05 MiB (1 cells, 4 layers, 1 seqs 0 rs_seq), R (f32): 0.05 MiB, S (f32): ...`
RS_LINE = re.compile(r"llama_memory_recurrent: size =\s*[\d.]+ MiB \(\s*(?P<cells>\d+) cells.*?\),"
                     r"\s*R \((?P<r_type>\w+)\):\s*(?P<r>[\d.]+) MiB,\s*S \((?P<s_type>\w+)\):\s*(?P<s>[\d.]+) MiB")


def parse_buffers(lines) -> tuple[dict, dict]:
    """(component → bytes, component → cells) from one context's creation log. The sliding-window cache is the
    KV line that follows llama.cpp's "creating     SWA KV cache" line."""
    sizes, cells = {}, {}
    swa = False
    for line in lines:
        if "creating     SWA KV cache" in line:
            swa = True
        elif "creating non-SWA KV cache" in line:
            swa = False
        kv = llama.parse_kv_lines([line])
        if kv:
            k, v = ("K_swa", "V_swa") if swa else ("K", "V")
            sizes[k], sizes[v] = round(kv[0].k_mib * llama.MIB), round(kv[0].v_mib * llama.MIB)
            cells[k] = cells[v] = kv[0].cells
        m = RS_LINE.search(line)
        if m:
            sizes["R"], sizes["S"] = round(float(m["r"]) * llama.MIB), round(float(m["s"]) * llama.MIB)
            cells["R"] = cells["S"] = int(m["cells"])
    return sizes, cells


def predicted_cells(profile, n_ctx, n_seq, swa_full=False) -> dict:
    """Cells per stream llama.cpp logs for each component (engines.llama_cpp rules)."""
    ctx = rules.context(n_ctx, n_seq)
    out = {"K": ctx.n_ctx_seq, "V": ctx.n_ctx_seq}
    if profile.n_window_layers:
        out["K_swa"] = out["V_swa"] = rules.swa_cells(ctx, profile.window, swa_full)
    if profile.ssm is not None:
        out["R"] = out["S"] = rules.recurrent_cells(n_seq)
    return out


def open_context(model: llama.Model, n_ctx, n_seq, threads=2, swa_full=False) -> list[str]:
    """Create (and free) a context, return its creation log. ``swa_full`` off is what llama.cpp's own tools do;
    ``llama_context_default_params()`` (and so llama-cpp-python) turns it on."""
    import llama_cpp

    p = llama.context_params(n_ctx, threads)
    p.n_seq_max = n_seq
    p.swa_full = swa_full
    with llama.captured_log() as log:
        ctx = llama_cpp.llama_init_from_model(model.ptr, p)
    if not ctx:
        raise RuntimeError(f"llama.cpp could not create a context of {n_ctx} tokens, {n_seq} sequences: "
                           + " | ".join(log[-5:]))
    llama_cpp.llama_free(ctx)
    return log


def check(gguf_path, selector, contexts=CONTEXTS, n_seqs=N_SEQ, threads=2, progress=None) -> dict:
    """One structure row: every (context, n_seq) case, reported vs predicted, component by component."""
    profile = calculator_profile(gguf_path)
    arch = profile.extra["_architecture"]
    runs = [(n_ctx, n_seq, False) for n_seq in n_seqs for n_ctx in contexts]
    if profile.n_window_layers:     # --swa-full: every window layer at the whole context, one sequence
        runs += [(n_ctx, 1, True) for n_ctx in contexts]
    cases = []
    shape, tensor_nbytes = buffers.gguf_shapes(gguf_path)
    with llama.Model(gguf_path) as model:
        for n_ctx, n_seq, swa_full in runs:
            log = open_context(model, n_ctx, n_seq, threads, swa_full)
            ctx = rules.context(n_ctx, n_seq)
            swa = rules.swa_cells(ctx, profile.window, swa_full) if profile.n_window_layers else 0
            fa = buffers.flash_attention_on(log)
            bufs = buffers.compare(buffers.parse(model.load_log + log),
                                   buffers.predict(shape, tensor_nbytes, ctx, swa, fa))
            sizes, cells = parse_buffers(log)
            pred = rules.components(profile, n_ctx, n_seq, KV_BYTES["f16"], swa_full=swa_full)
            law = rules.law_components(profile, n_ctx, n_seq, KV_BYTES["f16"], KV_BYTES["f16"])
            pcells = predicted_cells(profile, n_ctx, n_seq, swa_full)
            ok = (set(sizes) == set(pred) and cells == pcells
                  and all(abs(sizes[k] - pred[k]) <= PRINT_HALF_STEP_BYTES + 1 for k in pred))
            cases.append({"context": n_ctx, "n_seq": n_seq, "swa_full": swa_full, "reported": sizes,
                          "predicted": pred, "law": law, "reported_cells": cells, "predicted_cells": pcells,
                          "match": bool(ok), "buffers": bufs, "flash_attn": fa,
                          "buffers_match": all(b["within"] for b in bufs.values()),
                          "log_lines": [ln.strip() for ln in log if "size =" in ln and "MiB (" in ln]})
            if progress:
                progress.step(f"{arch}: {n_ctx} tokens, {n_seq} seq{', swa_full' if swa_full else ''}")
    comps = list(cases[0]["predicted"])

    def by_component(key):
        return {c: [case[key].get(c) for case in cases] for c in comps}

    return {"selector": selector, "structure": profile.structure, "architecture": arch, "contexts": list(contexts),
            "n_seq": list(n_seqs),
            "cases": [{"context": c["context"], "n_seq": c["n_seq"], "swa_full": c["swa_full"]} for c in cases],
            "reported": by_component("reported"), "predicted": by_component("predicted"), "law": by_component("law"),
            "match": all(c["match"] for c in cases), "details": cases,
            "buffers_match": all(c["buffers_match"] for c in cases),
            "profile": {"n_layers": profile.n_layers, "n_full_layers": profile.n_full_layers,
                        "n_window_layers": profile.n_window_layers, "window": profile.window,
                        "n_kv_heads": profile.n_kv_heads, "head_dim": profile.head_dim,
                        "kv_lora_rank": profile.kv_lora_rank, "qk_rope_head_dim": profile.qk_rope_head_dim,
                        "ssm": None if profile.ssm is None else {"kind": profile.ssm.kind,
                                                                 "n_layers": profile.ssm.n_layers}},
            "notes": rules.notes(profile, contexts[0], n_seqs[-1]),
            "print_precision_bytes": PRINT_HALF_STEP_BYTES}


def run(selector="all", contexts=CONTEXTS, n_seqs=N_SEQ, threads=2, progress=None, workdir=None) -> dict:
    """E1 on the tiny model(s) of ``selector`` (one of ``tiny_models.SELECTORS`` or "all"), written to
    ``workdir`` (a scratch folder, deleted after, when not given)."""
    from part1_capacity.experiments.engine import tiny_models
    from part1_capacity.experiments.engine.common import scratch_dir

    specs = tiny_models.specs_for(selector)
    rows = []
    with scratch_dir("e1-structures-") as tmp:
        folder = workdir or tmp
        for spec in specs:
            path = tiny_models.write(spec, folder / f"{spec.architecture}-{spec.selector}.gguf")
            rows.append(check(path, spec.selector, contexts, n_seqs, threads, progress))
    return {"selector": selector, "structures": rows, "match": all(r["match"] for r in rows),
            "buffers_match": all(r["buffers_match"] for r in rows),
            "compute_tolerance": buffers.COMPUTE_TOLERANCE,
            "rules": "part1_capacity/calculator/engines/llama_cpp.py", "kv_type": "f16",
            "print_precision_bytes": PRINT_HALF_STEP_BYTES}
