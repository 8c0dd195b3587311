"""E1's other buffers: what llama.cpp reports beside the cache when it loads a model and opens a context — the
model buffer of each backend, the output (logits) buffer and the compute buffer — read from its log and set beside
the rules in ``calculator/engines/llama_cpp.py`` (each names the llama.cpp file it comes from).

Model and output buffers are predicted exactly (the log prints MiB with two decimals: ±0.005 MiB); the compute
buffer is an estimate of the largest set of tensors a micro-batch's graph keeps alive, checked within
``COMPUTE_TOLERANCE``. Units: bytes.
"""
from __future__ import annotations

import re

from course.shared import tables
from course.shared.units import MIB
from part1_capacity.calculator.engines import llama_cpp as rules

PRINT_HALF_STEP_BYTES = 0.005 * MIB
COMPUTE_TOLERANCE = 0.10

# `load_tensors:   CPU_Mapped model buffer size =    63.84 MiB`
MODEL_LINE = re.compile(r"(?P<buf>\S+) model buffer size =\s*(?P<mib>[\d.]+) MiB")
# `llama_context:        CPU  output buffer size =     0.49 MiB`
OUTPUT_LINE = re.compile(r"(?P<buf>\S+)\s+output buffer size =\s*(?P<mib>[\d.]+) MiB")
# `llama_context:        CPU compute buffer size =   280.01 MiB`
COMPUTE_LINE = re.compile(r"(?P<buf>\S+) compute buffer size =\s*(?P<mib>[\d.]+) MiB")


def parse(lines) -> dict:
    """{"model": {backend: bytes}, "output": bytes, "compute": {backend: bytes}} from load and context logs."""
    out = {"model": {}, "output": None, "compute": {}}
    for line in lines:
        if m := MODEL_LINE.search(line):
            out["model"][m["buf"]] = round(float(m["mib"]) * MIB)
        elif m := OUTPUT_LINE.search(line):
            out["output"] = round(float(m["mib"]) * MIB)
        elif m := COMPUTE_LINE.search(line):
            out["compute"][m["buf"]] = round(float(m["mib"]) * MIB)
    return out


FA_OFF = re.compile(r"flash_attn\s*=\s*(disabled|0)\b|flash.attention.*(disabled|not supported)", re.I)


def flash_attention_on(lines) -> bool:
    """Whether the context runs flash attention: llama.cpp's default "auto" resolves it per device at context
    creation (llama-context.cpp ``resolve_fused_ops``) and logs "disabled"/"not supported" when it turns it off."""
    return not any(FA_OFF.search(line) for line in lines)


def gguf_shapes(path) -> tuple[rules.GraphShape, list[int]]:
    """The graph widths and the tensor byte sizes (in file order) of a GGUF, read from its header."""
    from gguf import GGUFReader

    r = GGUFReader(str(path))

    def field(key, default=0):
        f = r.fields.get(key)
        if f is None:
            return default
        vals = [f.parts[i][0] for i in f.data] if f.data else []
        vals = [int(v) if not isinstance(v, (bytes, bytearray)) else v for v in vals]
        return vals if len(vals) > 1 else (vals[0] if vals else default)

    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()

    def widest(key):
        v = field(f"{arch}.{key}")
        return max(v) if isinstance(v, list) else int(v or 0)

    n_embd = widest("embedding_length")
    n_head = widest("attention.head_count")
    head_dim = widest("attention.key_length") or (n_embd // n_head if n_head else 0)
    n_ff = max(widest("feed_forward_length"),
               widest("expert_feed_forward_length") * max(1, widest("expert_used_count")))
    tokens = r.fields.get("tokenizer.ggml.tokens")
    n_vocab = len(tokens.data) if tokens is not None else widest("vocab_size")
    tensors = sorted(r.tensors, key=lambda t: t.data_offset)
    out_width = {t.name: int(t.shape[1]) if len(t.shape) > 1 else int(t.shape[0]) for t in r.tensors}

    def first(suffix):
        return next((w for name, w in sorted(out_width.items()) if name.endswith(suffix)), 0)

    # a recurrent layer's input projection: Mamba's ssm_in, or the delta-net's qkv, gate and beta/alpha
    in_proj = first(".ssm_in.weight") or (first(".attn_qkv.weight") + first(".attn_gate.weight")
                                          + first(".ssm_ba.weight"))
    conv = first(".ssm_conv1d.weight")
    recurrent = rules.recurrent_width(in_proj, conv, widest("ssm.inner_size"), first(".ssm_x.weight"),
                                      widest("ssm.state_size"), widest("ssm.group_count"),
                                      widest("ssm.time_step_rank"), bool(first(".attn_qkv.weight"))) if conv else 0
    shape = rules.GraphShape(n_vocab=n_vocab, n_embd=n_embd, n_head=n_head, q_width=n_head * head_dim, n_ff=n_ff,
                             post_norms=any(n.endswith(".post_ffw_norm.weight") for n in out_width),
                             recurrent_width=recurrent)
    return shape, [int(t.n_bytes) for t in tensors]


def predict(shape: rules.GraphShape, tensor_nbytes, ctx: rules.Context, n_kv_swa: int, flash_attn: bool) -> dict:
    """Model (one CPU backend, mmap), output and compute buffers for a context (``rules.context``)."""
    comp = rules.compute_buffer_bytes(shape, ctx.n_ctx_seq, n_kv_swa, ctx.n_ubatch, flash_attn=flash_attn)
    return {"model": float(rules.model_buffer_bytes(tensor_nbytes)),
            "output": float(rules.output_buffer_bytes(shape.n_vocab, ctx.n_seq)),
            "compute": comp["total"], "compute_stages": comp}


def compare(reported: dict, predicted: dict) -> dict:
    """Reported beside predicted, buffer by buffer, each with whether it is within its bound."""
    model = sum(reported["model"].values()) if reported["model"] else None
    compute = sum(reported["compute"].values()) if reported["compute"] else None
    rows = {"model": (model, predicted["model"], PRINT_HALF_STEP_BYTES + 1),
            "output": (reported["output"], predicted["output"], PRINT_HALF_STEP_BYTES + 1),
            "compute": (compute, predicted["compute"], None)}
    out = {}
    for name, (rep, pred, exact) in rows.items():
        if rep is None:
            ok = False
        elif exact is not None:
            ok = abs(rep - pred) <= exact
        else:
            ok = abs(pred / rep - 1) <= COMPUTE_TOLERANCE if rep else pred == 0
        out[name] = {"reported": rep, "predicted": pred, "within": bool(ok),
                     "error": (pred / rep - 1) if rep else None}
    return out


# --- published logs ---------------------------------------------------------------------------------------------------
def published_points() -> list[dict]:
    import json
    from pathlib import Path

    return json.loads((Path(__file__).resolve().parent / "data" / "llama_cpp_buffer_logs.json").read_text())["points"]


def predict_published(p: dict) -> dict:
    """Output and compute buffers for a published context (its model's shapes, its context flags)."""
    shape, c = rules.GraphShape(**p["shape"]), p["context"]
    ctx = rules.context(c["n_ctx"], c["n_seq"], n_ubatch=c["n_ubatch"])
    modes = [c["flash_attn"]] if c["flash_attn"] is not None else [True, False]
    compute = max(rules.compute_buffer_bytes(shape, ctx.n_ctx_seq, 0, ctx.n_ubatch, flash_attn=fa)["total"]
                  for fa in modes)
    return {"output": float(rules.output_buffer_bytes(shape.n_vocab, ctx.n_seq)), "compute": compute}


def _english(message: str, **values) -> str:
    return message.format(**values) if values else message


def published_table(points: list[dict] | None = None, tr=_english) -> str:
    """Published llama.cpp logs beside the rules (``tr``: the table's words in the site's other language)."""
    rows = tables.head(tr("| model | backend | context (n_ctx, n_ubatch, flash attention) | buffer | logged | predicted | error | "
               "source |"), "llllrrr")
    for p in points or published_points():
        pred, c = predict_published(p), p["context"]
        fa = tr({True: "on", False: "off", None: "not logged"}[c["flash_attn"]])
        for name in ("output", "compute"):
            key = f"{name}_mib"
            if key not in p["logged"]:
                continue
            logged, predicted = p["logged"][key], pred[name] / MIB
            err = (tr("as printed") if round(predicted, 2) == logged else f"{predicted / logged - 1:+.2%}")
            rows.append(tables.row(p['model'], p['backend'], f"{c['n_ctx']:,}, {c['n_ubatch']}, {fa}", tr(name),
                                   f"{logged:,.2f} MiB", f"{predicted:,.2f} MiB", err,
                                   p['source']))
    return "\n".join(rows) + "\n"


def e1_table(result: dict | None, tr=_english) -> str:
    """E1's model, output and compute buffers for every tiny model (a saved ``capacity e1 --structure all`` run):
    reported by llama.cpp on this machine beside the rules' prediction, the largest compute error per model."""
    bounds = tr("Model and output buffers are predicted exactly (to the log's two decimals); the compute buffer within "
                "{tolerance}; tensors padded to {alignment} bytes in the file.", tolerance=f"{COMPUTE_TOLERANCE:.0%}",
                alignment=rules.GGUF_ALIGNMENT) + "\n\n"
    if not result or not any("buffers" in c for r in result.get("structures", []) for c in r["details"]):
        return bounds + tr("*No saved run with these buffers: `capacity e1 --structure all --save` records them "
                           "(llama.cpp built by `make test`).*") + "\n"
    rows = tables.head(tr("| model (GGUF) | model buffer: log / rule | output buffer: log / rule | compute buffer: log / rule "
               "(largest error over the cases) | cases within the bounds |"), "lrrr")
    for r in result["structures"]:
        cases = [c for c in r["details"] if "buffers" in c]
        last = cases[-1]["buffers"]
        worst = max(cases, key=lambda c: abs(c["buffers"]["compute"]["error"] or 0))["buffers"]["compute"]
        fmt = lambda v: "—" if v is None else f"{v / MIB:,.2f} MiB"
        ok = sum(c["buffers_match"] for c in cases)
        rows.append(tables.row(f"`{r['architecture']}`",
                               f"{fmt(last['model']['reported'])} / {fmt(last['model']['predicted'])}",
                               f"{fmt(last['output']['reported'])} / {fmt(last['output']['predicted'])}",
                               f"{fmt(worst['reported'])} / {fmt(worst['predicted'])} ({worst['error'] or 0:+.1%})",
                               f"{ok}/{len(cases)}"))
    return bounds + "\n".join(rows) + "\n"
