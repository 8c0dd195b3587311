"""Tiny random-weight GGUF files, one per cache structure, for checking what llama.cpp allocates.

Each ``TinySpec`` lists the metadata keys and the tensors (name, shape in ggml order: fastest dimension first)
that the vendored llama.cpp reads for its architecture — ``load_arch_hparams`` and ``load_arch_tensors`` in
``src/models/<arch>.cpp`` of the pinned llama-cpp-python sdist. The shapes are small (a few MB per file, loaded
in well under a second) but keep each structure's cache layout: GQA/MQA heads, the MLA latent with its RoPE key,
interleaved sliding-window layers, Mamba-1/Mamba-2 and gated delta-net recurrent layers beside attention layers.

Cache sizes depend on the shapes only; the weights are random (normal, std 0.02, F32, seeded), as in
``gguf_model``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from part1_capacity.experiments.engine.gguf_model import add_tokenizer
from part1_capacity.calculator.base.errors import InputError

D = 256          # n_embd
VOCAB = 512
HEADS, HEAD_DIM = 4, 64
FF = 512


@dataclass(frozen=True)
class TinySpec:
    """One tiny model: its selector (``capacity e1 --structure``), GGUF architecture, metadata and tensors."""

    selector: str
    architecture: str
    metadata: dict            # "<arch>." is prefixed to keys without a dot-namespace of their own
    tensors: tuple            # ((name, ggml shape), ...)
    note: str = ""


def _common(n_layers, extra=None):
    md = {"context_length": 32768, "embedding_length": D, "block_count": n_layers,
          "attention.layer_norm_rms_epsilon": 1e-5, "rope.freq_base": 10000.0}
    md.update(extra or {})
    return md


def _io(tied=False):
    out = [("token_embd.weight", (D, VOCAB)), ("output_norm.weight", (D,))]
    if not tied:
        out.append(("output.weight", (D, VOCAB)))
    return out


def _attn(i, n_kv, q_width=HEADS * HEAD_DIM, head_dim=HEAD_DIM, o_width=None):
    b = f"blk.{i}."
    return [(b + "attn_q.weight", (D, q_width)), (b + "attn_k.weight", (D, n_kv * head_dim)),
            (b + "attn_v.weight", (D, n_kv * head_dim)),
            (b + "attn_output.weight", (o_width or HEADS * head_dim, D))]


def _mlp(i, gate=True, ff=FF):
    b = f"blk.{i}."
    t = [(b + "ffn_up.weight", (D, ff)), (b + "ffn_down.weight", (ff, D))]
    return t + ([(b + "ffn_gate.weight", (D, ff))] if gate else [])


def llama(n_kv: int, structure: str) -> TinySpec:
    """``llama``: 2 layers, 4 query heads of 64, ``n_kv`` K/V heads (2: GQA, 1: MQA). src/models/llama.cpp"""
    t = _io()
    for i in range(2):
        t += [(f"blk.{i}.attn_norm.weight", (D,)), (f"blk.{i}.ffn_norm.weight", (D,))] + _attn(i, n_kv) + _mlp(i)
    md = _common(2, {"attention.head_count": HEADS, "attention.head_count_kv": n_kv,
                     "rope.dimension_count": HEAD_DIM, "feed_forward_length": FF})
    return TinySpec(structure, "llama", md, tuple(t))


KV_LORA, ROPE, Q_LORA, NOPE, V_MLA = 128, 32, 64, 64, 64


def deepseek2() -> TinySpec:
    """``deepseek2`` with MLA as current converters write it: one K/V "head" whose key is the latent plus the
    RoPE key (key_length = kv_lora_rank + qk_rope_head_dim) and no V cache. Both layers dense
    (leading_dense_block_count = 2), so no experts are needed. src/models/deepseek2.cpp"""
    t = _io()
    for i in range(2):
        b = f"blk.{i}."
        t += [(b + "attn_norm.weight", (D,)), (b + "attn_q_a_norm.weight", (Q_LORA,)),
              (b + "attn_kv_a_norm.weight", (KV_LORA,)), (b + "attn_q_a.weight", (D, Q_LORA)),
              (b + "attn_q_b.weight", (Q_LORA, HEADS * (NOPE + ROPE))),
              (b + "attn_kv_a_mqa.weight", (D, KV_LORA + ROPE)),
              (b + "attn_k_b.weight", (NOPE, KV_LORA, HEADS)), (b + "attn_v_b.weight", (KV_LORA, V_MLA, HEADS)),
              (b + "attn_output.weight", (HEADS * V_MLA, D)), (b + "ffn_norm.weight", (D,))] + _mlp(i)
    md = _common(2, {"attention.head_count": HEADS, "attention.head_count_kv": 1,
                     "attention.key_length": KV_LORA + ROPE, "attention.value_length": KV_LORA,
                     "attention.key_length_mla": NOPE + ROPE, "attention.value_length_mla": V_MLA,
                     "attention.q_lora_rank": Q_LORA, "attention.kv_lora_rank": KV_LORA,
                     "rope.dimension_count": ROPE, "feed_forward_length": FF, "leading_dense_block_count": 2,
                     "expert_feed_forward_length": FF, "expert_shared_count": 1})
    return TinySpec("mla", "deepseek2", md, tuple(t))


WINDOW = 128


def gemma(version: int) -> TinySpec:
    """``gemma2`` (4 layers, every other one sliding) or ``gemma3`` (6 layers: 5 sliding, 1 full), window 128.
    src/models/gemma2.cpp, gemma3.cpp (load_swa_pattern 2 and 6)."""
    n = 4 if version == 2 else 6
    t = _io(tied=True)
    for i in range(n):
        b = f"blk.{i}."
        t += [(b + "attn_norm.weight", (D,)), (b + "post_attention_norm.weight", (D,)),
              (b + "ffn_norm.weight", (D,)), (b + "post_ffw_norm.weight", (D,))] + _attn(i, 2) + _mlp(i)
        if version == 3:
            t += [(b + "attn_k_norm.weight", (HEAD_DIM,)), (b + "attn_q_norm.weight", (HEAD_DIM,))]
    md = _common(n, {"attention.head_count": HEADS, "attention.head_count_kv": 2, "attention.key_length": HEAD_DIM,
                     "attention.value_length": HEAD_DIM, "feed_forward_length": FF,
                     "attention.sliding_window": WINDOW})
    return TinySpec("swa", f"gemma{version}", md, tuple(t))


N_EXPERT, FF_EXP = 2, 128


def gpt_oss() -> TinySpec:
    """``gpt-oss``: 2 layers alternating sliding (window 128) and full, attention sinks, 2 experts.
    src/models/openai-moe.cpp"""
    t = _io()
    for i in range(2):
        b = f"blk.{i}."
        t += [(b + "attn_norm.weight", (D,)), (b + "post_attention_norm.weight", (D,))] + _attn(i, 2)
        t += [(b + "attn_output.bias", (D,)), (b + "attn_sinks.weight", (HEADS,)),
              (b + "ffn_gate_inp.weight", (D, N_EXPERT)), (b + "ffn_gate_inp.bias", (N_EXPERT,)),
              (b + "ffn_gate_exps.weight", (D, FF_EXP, N_EXPERT)), (b + "ffn_up_exps.weight", (D, FF_EXP, N_EXPERT)),
              (b + "ffn_down_exps.weight", (FF_EXP, D, N_EXPERT)),
              (b + "ffn_gate_exps.bias", (FF_EXP, N_EXPERT)), (b + "ffn_up_exps.bias", (FF_EXP, N_EXPERT)),
              (b + "ffn_down_exps.bias", (D, N_EXPERT))]
    md = _common(2, {"attention.head_count": HEADS, "attention.head_count_kv": 2, "rope.dimension_count": HEAD_DIM,
                     "attention.key_length": HEAD_DIM, "attention.value_length": HEAD_DIM,
                     "attention.sliding_window": WINDOW, "expert_count": N_EXPERT, "expert_used_count": 1,
                     "expert_feed_forward_length": FF_EXP, "feed_forward_length": FF_EXP})
    return TinySpec("swa", "gpt-oss", md, tuple(t))


# Mamba-2 (nemotron_h): 16 heads of 64 (d_inner 1024), state 128, 4 groups, conv kernel 4.
M2_HEADS, M2_HEAD_DIM, M2_STATE, M2_GROUPS, D_CONV = 16, 64, 128, 4, 4


def nemotron_h() -> TinySpec:
    """``nemotron_h``: layers Mamba-2, attention, MLP, Mamba-2. A layer is recurrent when its head_count_kv and
    feed_forward_length are both 0. src/models/nemotron-h.cpp"""
    d_inner = M2_HEADS * M2_HEAD_DIM
    conv_dim = d_inner + 2 * M2_GROUPS * M2_STATE
    kinds = ("M", "A", "F", "M")
    t = _io()
    for i, k in enumerate(kinds):
        b = f"blk.{i}."
        t.append((b + "attn_norm.weight", (D,)))
        if k == "M":
            t += [(b + "ssm_in.weight", (D, 2 * d_inner + 2 * M2_GROUPS * M2_STATE + M2_HEADS)),
                  (b + "ssm_conv1d.weight", (D_CONV, conv_dim)), (b + "ssm_conv1d.bias", (conv_dim,)),
                  (b + "ssm_dt.bias", (M2_HEADS,)), (b + "ssm_a", (1, M2_HEADS)), (b + "ssm_d", (1, M2_HEADS)),
                  (b + "ssm_norm.weight", (d_inner // M2_GROUPS, M2_GROUPS)), (b + "ssm_out.weight", (d_inner, D))]
        elif k == "A":
            t += _attn(i, 2)
        else:
            t += _mlp(i, gate=False)
    md = _common(len(kinds), {
        "attention.head_count": HEADS, "attention.head_count_kv": [2 if k == "A" else 0 for k in kinds],
        "feed_forward_length": [FF if k == "F" else 0 for k in kinds], "attention.key_length": HEAD_DIM,
        "attention.value_length": HEAD_DIM, "rope.dimension_count": HEAD_DIM,
        "attention.layer_norm_epsilon": 1e-5, "ssm.conv_kernel": D_CONV, "ssm.inner_size": d_inner,
        "ssm.state_size": M2_STATE, "ssm.time_step_rank": M2_HEADS, "ssm.group_count": M2_GROUPS})
    return TinySpec("ssm", "nemotron_h", md, tuple(t))


M1_STATE, M1_DT_RANK = 16, 16


def jamba() -> TinySpec:
    """``jamba``: a Mamba-1 layer then an attention layer (d_inner = 2 × n_embd, the only expansion llama.cpp
    supports). src/models/jamba.cpp"""
    d_inner = 2 * D
    kinds = ("M", "A")
    t = _io()
    for i, k in enumerate(kinds):
        b = f"blk.{i}."
        t += [(b + "attn_norm.weight", (D,)), (b + "ffn_norm.weight", (D,))] + _mlp(i)
        if k == "M":
            t += [(b + "ssm_in.weight", (D, 2 * d_inner)), (b + "ssm_conv1d.weight", (D_CONV, d_inner)),
                  (b + "ssm_conv1d.bias", (d_inner,)), (b + "ssm_x.weight", (d_inner, M1_DT_RANK + 2 * M1_STATE)),
                  (b + "ssm_dt_norm.weight", (M1_DT_RANK,)), (b + "ssm_dt.weight", (M1_DT_RANK, d_inner)),
                  (b + "ssm_dt.bias", (d_inner,)), (b + "ssm_b_norm.weight", (M1_STATE,)),
                  (b + "ssm_c_norm.weight", (M1_STATE,)), (b + "ssm_a", (M1_STATE, d_inner)),
                  (b + "ssm_d", (d_inner,)), (b + "ssm_out.weight", (d_inner, D))]
        else:
            t += _attn(i, 2, q_width=D, o_width=D)
    md = _common(len(kinds), {
        "attention.head_count": HEADS, "attention.head_count_kv": [0, 2], "feed_forward_length": FF,
        "ssm.conv_kernel": D_CONV, "ssm.inner_size": d_inner, "ssm.state_size": M1_STATE,
        "ssm.time_step_rank": M1_DT_RANK})
    return TinySpec("ssm", "jamba", md, tuple(t))


# Gated delta-net (qwen3next): 2 key heads, 4 value heads, head dim 64, conv kernel 4; full attention every 4th.
GDN_K_HEADS, GDN_V_HEADS, GDN_HEAD = 2, 4, 64


def qwen3next() -> TinySpec:
    """``qwen3next``: layers 0-2 gated delta-net, layer 3 full (gated) attention; MoE with a shared expert.
    src/models/qwen3next.cpp"""
    key_dim, value_dim = GDN_K_HEADS * GDN_HEAD, GDN_V_HEADS * GDN_HEAD
    t = _io()
    for i in range(4):
        b = f"blk.{i}."
        t += [(b + "attn_norm.weight", (D,)), (b + "post_attention_norm.weight", (D,)),
              (b + "ffn_gate_inp.weight", (D, N_EXPERT)), (b + "ffn_down_exps.weight", (FF_EXP, D, N_EXPERT)),
              (b + "ffn_gate_exps.weight", (D, FF_EXP, N_EXPERT)), (b + "ffn_up_exps.weight", (D, FF_EXP, N_EXPERT)),
              (b + "ffn_gate_inp_shexp.weight", (D,)), (b + "ffn_gate_shexp.weight", (D, FF_EXP)),
              (b + "ffn_up_shexp.weight", (D, FF_EXP)), (b + "ffn_down_shexp.weight", (FF_EXP, D))]
        if i == 3:
            t += _attn(i, 2, q_width=2 * HEADS * HEAD_DIM)
            t += [(b + "attn_q_norm.weight", (HEAD_DIM,)), (b + "attn_k_norm.weight", (HEAD_DIM,))]
        else:
            t += [(b + "attn_qkv.weight", (D, 2 * key_dim + value_dim)), (b + "attn_gate.weight", (D, value_dim)),
                  (b + "ssm_conv1d.weight", (D_CONV, 2 * key_dim + value_dim)), (b + "ssm_dt.bias", (GDN_V_HEADS,)),
                  (b + "ssm_a", (GDN_V_HEADS,)), (b + "ssm_ba.weight", (D, 2 * GDN_V_HEADS)),
                  (b + "ssm_norm.weight", (GDN_HEAD,)), (b + "ssm_out.weight", (value_dim, D))]
    md = _common(4, {"attention.head_count": HEADS, "attention.head_count_kv": 2, "attention.key_length": HEAD_DIM,
                     "attention.value_length": HEAD_DIM, "rope.dimension_count": HEAD_DIM,
                     "feed_forward_length": FF_EXP, "expert_count": N_EXPERT, "expert_used_count": 1,
                     "expert_feed_forward_length": FF_EXP, "expert_shared_feed_forward_length": FF_EXP,
                     "full_attention_interval": 4, "ssm.conv_kernel": D_CONV, "ssm.inner_size": value_dim,
                     "ssm.state_size": GDN_HEAD, "ssm.group_count": GDN_K_HEADS, "ssm.time_step_rank": GDN_V_HEADS})
    return TinySpec("linear", "qwen3next", md, tuple(t))


def specs() -> list[TinySpec]:
    """Every tiny model, in the order of the engine-checks table."""
    return [llama(2, "gqa"), llama(1, "mqa"), deepseek2(), gemma(2), gemma(3), gpt_oss(), nemotron_h(), jamba(),
            qwen3next()]


# What `capacity e1 --structure` selects: GQA, MQA, MLA, sliding window, Mamba (SSM) hybrids, linear-attention
# (gated delta-net) hybrids. The result rows also carry the structure id of the laws (profiles.STRUCTURES).
SELECTORS = ("gqa", "mqa", "mla", "swa", "ssm", "linear")


def specs_for(selector: str) -> list[TinySpec]:
    """The tiny models ``capacity e1 --structure <selector>`` checks ("all": every one)."""
    if selector != "all" and selector not in SELECTORS:
        raise InputError(f"--structure: unknown '{selector}'; allowed: {', '.join(SELECTORS)}, all")
    return [s for s in specs() if selector in ("all", s.selector)]


def write(spec: TinySpec, path, seed: int = 0) -> Path:
    """Write ``spec`` as a GGUF file (random F32 weights, the minimal llama tokenizer) and return its path."""
    import gguf

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), spec.architecture)
    w.add_name(f"course-tiny-{spec.architecture}-{spec.selector}")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    for key, value in spec.metadata.items():
        full = f"{spec.architecture}.{key}"
        if isinstance(value, list):
            w.add_array(full, value)
        elif isinstance(value, float):
            w.add_float32(full, value)
        else:
            w.add_uint32(full, int(value))
    add_tokenizer(w, VOCAB)
    rng = np.random.default_rng(seed)
    for name, ggml_shape in spec.tensors:
        w.add_tensor(name, rng.standard_normal(tuple(reversed(ggml_shape)), dtype=np.float32) * np.float32(0.02))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
