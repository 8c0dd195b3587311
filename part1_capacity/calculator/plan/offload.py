"""llama.cpp on one GPU and the host's RAM: which bytes sit where for ``-ngl N --n-cpu-moe M`` and how fast the
split decodes and prefills — ``capacity plan --engine llama.cpp --gpu-layers N --cpu-moe M``.

The placement rules are llama.cpp's (``engines/llama_cpp.py``: ``place_weights``, ``place_cache``); this
module sizes the model's tensors for them, adds the buffers a context allocates (compute, output) and times the
split:

- **decode** (one token per sequence): llama.cpp runs each layer where its weights are — small batches are not
  sent to the GPU (``ggml-cuda.cu`` ``ggml_backend_cuda_device_offload_op``: only ops of at least 32 rows) — so
  the GPU streams its weights and cache at its bandwidth, the CPU streams the host's at the host's, one after the
  other. The routed experts read are those the step's tokens pick (``roofline.weights_read_fraction``).
- **prefill** (a prompt in micro-batches of ``n_ubatch`` = 512 tokens): ops of 32 rows or more run on the GPU
  whatever holds their weights, so every micro-batch copies the host's matrices (its layers, its experts — all of
  them, the whole expert tensor is the operand — and its output head) to the GPU over the host link, then the GPU
  computes; the embedding lookup (``GET_ROWS``) stays on the CPU and copies nothing.

Budgets: the GPU holds its weights, its layers' cache and the compute buffer within ``memory × usable_fraction``;
the host holds its weights, its cache and the output buffer within its RAM × ``usable_fraction`` (the rest is the
operating system's). Units: bytes, seconds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from course.shared.units import GB, GIB
from part1_capacity.calculator import engines
from part1_capacity.calculator.sizing import roofline
from part1_capacity.calculator.plan import deploy
from part1_capacity.calculator.engines import llama_cpp as rules
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.hardware.tiers import tiers_for

OP_OFFLOAD_MIN_BATCH = 32         # ggml-cuda.cu ggml_backend_cuda_device_offload_op: min_batch_size
# The host assumed when none is given: 64 GiB of dual-channel DDR5-5600 (2 channels × 8 bytes × 5,600 MT/s =
# 89.6 GB/s, JEDEC DDR5-5600) — a common desktop beside a 24 GB card. ``--host-memory`` / ``--host-bandwidth``
# or ``--accelerator local`` (this machine, measured) replace it.
DEFAULT_HOST_MEMORY = 64 * GIB
DEFAULT_HOST_BANDWIDTH = 89.6 * GB
DEFAULT_HOST_SOURCE = "assumed: 64 GiB dual-channel DDR5-5600 (89.6 GB/s)"


@dataclass(frozen=True)
class Host:
    """The machine's RAM beside the accelerator: capacity (bytes), the bandwidth the CPU streams it at (bytes/s),
    the link to the accelerator (bytes/s, 0: none or shared memory) and where these figures come from."""
    memory_bytes: float = DEFAULT_HOST_MEMORY
    bandwidth: float = DEFAULT_HOST_BANDWIDTH
    link_bandwidth: float | None = None     # None: the accelerator's host-link tier
    source: str = DEFAULT_HOST_SOURCE


def link_bandwidth(acc, host: Host) -> float:
    """Bytes/s from host RAM to the accelerator: the host's own figure, else the tier table's host-DRAM row for the
    accelerator's kind (PCIe), else 0 (unified memory: nothing is copied)."""
    if host.link_bandwidth is not None:
        return host.link_bandwidth
    if getattr(acc, "unified_memory", False):
        return 0.0
    rows = [t for t in tiers_for(acc) if t.id.startswith("host-dram")]
    return rows[0].bandwidth if rows else 0.0


def tied_embeddings(model) -> bool:
    """Whether the output head is the token embedding: a profile says so in ``_tie_word_embeddings`` (the bundled
    table; a config.json's ``tie_word_embeddings`` through ``param_count.mlp_shapes``); unknown is taken as untied."""
    return bool(model.extra.get("_tie_word_embeddings", False))


def model_tensors(r) -> rules.ModelTensors:
    """The resolved model's tensors at the workload's precision, spread evenly (``rules.uniform_tensors``): the
    embedding ``vocab_size × hidden_size`` weights at the model's average bytes per weight."""
    m = r.model
    per_weight = r.weights_bytes / m.params_total
    embd = m.vocab_size * m.hidden_size * per_weight
    experts = r.expert_bytes if m.is_moe else 0.0
    return rules.uniform_tensors(r.weights_bytes, experts, m.n_layers, embd, tied_embeddings(m))


def graph_shape(model) -> rules.GraphShape:
    ff = max(model.intermediate_size, model.moe_intermediate_size * model.experts_per_token)
    return rules.GraphShape(n_vocab=model.vocab_size, n_embd=model.hidden_size, n_head=model.n_heads,
                            q_width=model.n_heads * model.head_dim, n_ff=ff or 4 * model.hidden_size)


def placement(r, n_gpu_layers: int, n_cpu_moe: int = 0, host: Host | None = None, kv_offload: bool = True) -> dict:
    """Bytes per device, budgets and step times for ``-ngl n_gpu_layers --n-cpu-moe n_cpu_moe`` of the resolved
    workload ``r`` (engine llama.cpp) on one accelerator and the host."""
    host = host or Host()
    m, acc, wl = r.model, r.accelerator, r.workload
    L = m.n_layers
    t = model_tensors(r)
    w = rules.place_weights(t, n_gpu_layers, n_cpu_moe)
    alloc = engines.allocate(m, wl, 1, "llama.cpp")
    kv = rules.place_cache((alloc.kv_bytes_total / L,) * L, n_gpu_layers, kv_offload)
    ctx = rules.context(wl.context * wl.batch, wl.batch)
    compute = rules.compute_buffer_bytes(graph_shape(m), ctx.n_ctx_seq, 0, ctx.n_ubatch)["total"]
    output_buf = float(rules.output_buffer_bytes(m.vocab_size, wl.batch))
    gpu_compute = compute if w["gpu_layers"] or w["output_on_accelerator"] else 0.0
    host_compute = compute - gpu_compute
    devices = [
        {"device": "accelerator", "name": acc.name, "weights_bytes": w["accelerator"]["total"],
         "kv_bytes": kv["accelerator"], "compute_buffer_bytes": gpu_compute, "output_buffer_bytes": 0.0,
         "output_layer_bytes": w["accelerator"]["output"], "token_embd_bytes": 0.0,
         "experts_bytes": w["experts"]["accelerator"],
         "budget_bytes": r.usable_bytes + wl.overhead_bytes},      # memory × usable_fraction (resolve's memory)
        {"device": "host", "name": "host RAM", "weights_bytes": w["host"]["total"], "kv_bytes": kv["host"],
         "compute_buffer_bytes": host_compute, "output_buffer_bytes": output_buf,
         "output_layer_bytes": w["host"]["output"], "token_embd_bytes": w["host"]["token_embd"],
         "experts_bytes": w["experts"]["host"], "budget_bytes": host.memory_bytes * wl.usable_fraction},
    ]
    for d in devices:
        d["total_bytes"] = d["weights_bytes"] + d["kv_bytes"] + d["compute_buffer_bytes"] + d["output_buffer_bytes"]
        d["fits"] = bool(d["total_bytes"] <= d["budget_bytes"])
    times = split_times(r, t, w, kv, host, n_gpu_layers)
    return {"n_gpu_layers": min(int(n_gpu_layers), L + 1), "n_cpu_moe": int(n_cpu_moe), "kv_offload": kv_offload,
            "gpu_layers": w["gpu_layers"], "n_layers": L, "output_on_accelerator": w["output_on_accelerator"],
            "devices": devices, "fits": all(d["fits"] for d in devices), "host_source": host.source,
            "tied_embeddings": t.tied, **times}


def _one_accelerator(seqs: int) -> deploy.Deployment:
    """The accelerator's side of the split as a one-rank deployment, so its time comes from ``deploy``'s one rule
    (``rank_step_time``: the roofline at the weight type's efficiencies)."""
    return deploy.Deployment(tensor=1, pipeline=1, data=1, expert=1, nodes=1, accelerators=1,
                             sequences_per_replica=seqs, weights_per_rank=0.0, cache_per_rank=0.0)


def split_times(r, t: rules.ModelTensors, w: dict, kv: dict, host: Host, n_gpu_layers: int) -> dict:
    """Decode step and prefill of the split (see the module docstring), in seconds."""
    m, acc, wl = r.model, r.accelerator, r.workload
    B, T, P = wl.batch, wl.context, wl.prompt or wl.context
    W, X = r.weights_bytes, sum(t.layer_experts)
    one = _one_accelerator(B)
    share = float(roofline.routed_read_share(m, B)) if X else 1.0
    gpu_w = w["accelerator"]["total"] - w["experts"]["accelerator"] * (1 - share)
    host_w = (w["host"]["total"] - w["host"]["token_embd"] - w["experts"]["host"] * (1 - share)
              + (t.output if t.tied and not w["output_on_accelerator"] else 0.0))    # a tied head is read too
    frac = w["gpu_layers"] / m.n_layers
    flops = float(roofline.decode_flops(m, T, B))
    t_gpu = deploy.rank_step_time(r, B, B, flops * frac, gpu_w, kv["accelerator"], one).time_s if gpu_w else 0.0
    t_host = (host_w + kv["host"]) / host.bandwidth
    decode = t_gpu + t_host
    # prefill: every micro-batch of >= 32 tokens runs its matmuls on the GPU, the host's matrices copied over
    link = link_bandwidth(acc, host)
    n_ub = math.ceil(P / rules.DEFAULT_N_UBATCH)
    copied = w["host"]["total"] - w["host"]["token_embd"] + (t.output if t.tied and not w["output_on_accelerator"]
                                                           else 0.0)
    p_flops = float(roofline.prefill_flops(m, P))
    if link and min(P, rules.DEFAULT_N_UBATCH) >= OP_OFFLOAD_MIN_BATCH:
        t_copy = n_ub * copied / link
        t_pre = deploy.rank_step_time(r, P, 1, p_flops, W - w["host"]["token_embd"], 0.0, one).time_s + t_copy
    else:          # no link (unified memory) or a short prompt: each side computes its own layers
        t_copy = 0.0
        t_pre = (deploy.rank_step_time(r, P, 1, p_flops * frac, gpu_w, 0.0, one).time_s if gpu_w else 0.0) + \
            (w["host"]["total"] / host.bandwidth)
    return {"decode_s": decode, "decode_accelerator_s": t_gpu, "decode_host_s": t_host,
            "decode_tokens_per_s": B / decode if decode else None, "prefill_s": t_pre, "prefill_copy_s": t_copy,
            "prefill_tokens_per_s": P / t_pre if t_pre else None, "link_bandwidth": link,
            "host_bandwidth": host.bandwidth}


def propose(r, host: Host | None = None, kv_offload: bool = True) -> dict:
    """The largest split that fits, as llama.cpp users choose it: every layer on the GPU if that fits; for a MoE,
    then every layer with the fewest first layers' experts on the host (``--n-cpu-moe``); else the most layers
    (``-ngl``, with all experts on the host for a MoE). ``proposed`` is False when nothing fits (the smallest
    split is returned, to show why)."""
    L = r.model.n_layers
    tries = [(rules.ALL_LAYERS, 0)]
    if r.model.is_moe:
        tries += [(rules.ALL_LAYERS, k) for k in range(1, L + 1)]
    base = L if r.model.is_moe else 0
    tries += [(n, base) for n in range(L, -1, -1)]
    last = None
    for ngl, moe in tries:
        last = placement(r, ngl, moe, host, kv_offload)
        if last["fits"]:
            return {**last, "proposed": True}
    return {**last, "proposed": False}


def check_flags(model, n_gpu_layers, n_cpu_moe):
    """--gpu-layers: 0 to any (llama.cpp clamps to the layers + output); --cpu-moe: 0 to n_layers, a MoE only."""
    if n_cpu_moe and not model.is_moe:
        raise InputError(f"--cpu-moe: {model.id} has no routed experts (a dense model); use --gpu-layers")
    if n_cpu_moe is not None and not 0 <= n_cpu_moe <= model.n_layers:
        raise InputError(f"--cpu-moe: {n_cpu_moe} is not a layer count of {model.id}; allowed: 0..{model.n_layers}")
