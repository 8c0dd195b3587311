"""The calculator's ``ModelProfile`` of any supported GGUF: full, sliding-window, MLA and recurrent layers.

Which layer is which follows the vendored llama.cpp (``src/models/<arch>.cpp``, ``llama-hparams.cpp``):

- sliding-window layers: ``<arch>.attention.sliding_window_pattern`` when present, else the architecture's default
  period ``n`` (gemma2 2, gemma3 6, gpt-oss 2): layer ``i`` slides when ``i % n < n − 1`` (``set_swa_pattern``);
- recurrent layers: nemotron_h — ``head_count_kv`` and ``feed_forward_length`` both 0 (the rest with
  ``feed_forward_length`` 0 are attention, the others MLP); jamba — ``head_count_kv`` 0; qwen3next — every layer
  but each ``full_attention_interval``-th (default 4);
- MLA (deepseek2): ``attention.kv_lora_rank`` and ``attention.key_length_mla`` present; the cached RoPE key is
  ``rope.dimension_count`` wide.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from part1_capacity.engine.gguf_model import gguf_field
from part1_capacity.errors import InputError

FULL_ATTENTION = ("llama", "mistral", "qwen2", "qwen3", "granite", "olmo2", "phi3", "stablelm")
SWA_PERIOD = {"gemma2": 2, "gemma3": 6, "gpt-oss": 2}
MLA = ("deepseek2",)
RECURRENT = ("nemotron_h", "jamba", "qwen3next")
SUPPORTED = FULL_ATTENTION + tuple(SWA_PERIOD) + MLA + RECURRENT


def _per_layer(value, n_layers):
    return list(value) if isinstance(value, list) else [value] * n_layers


def profile_dict(path) -> dict:
    """Profile fields (the bundled table's format, ``profiles.profile_from_dict``) from a GGUF's metadata."""
    import gguf

    path = Path(path)
    if not path.is_file():
        raise InputError(f"--gguf: no such file: {path}")
    try:
        r = gguf.GGUFReader(str(path))
    except Exception as exc:  # not a GGUF: the reader raises on the magic number
        raise InputError(f"--gguf: not a readable GGUF file ({exc})") from None
    arch = gguf_field(r, "general.architecture")
    if arch not in SUPPORTED:
        raise InputError(f"--gguf: architecture '{arch}' is not supported; allowed: {', '.join(SUPPORTED)}")

    def f(key, default=None):
        v = gguf_field(r, f"{arch}.{key}")
        return default if v is None else v

    n = int(f("block_count"))
    d = int(f("embedding_length"))
    heads = _per_layer(f("attention.head_count"), n)
    kv = _per_layer(f("attention.head_count_kv", heads), n)
    ff = _per_layer(f("feed_forward_length", 0), n)
    n_heads = max(heads)
    head_dim = int(f("attention.key_length", d // n_heads))
    n_kv = max(kv)
    out = {"id": f"gguf:{path.stem}", "name": gguf_field(r, "general.name") or path.stem, "_architecture": arch,
           "n_layers": n, "n_heads": n_heads, "n_kv_heads": n_kv, "head_dim": head_dim, "hidden_size": d,
           "params_total": sum(int(np.prod(t.shape)) for t in r.tensors),
           "max_context": max(int(f("context_length", 0)), 1 << 20), "native_dtype": "fp32",
           "source": f"read from the GGUF's metadata ({arch})"}
    if arch in SWA_PERIOD:
        pattern = f("attention.sliding_window_pattern", SWA_PERIOD[arch])
        swa = ([bool(x) for x in pattern] if isinstance(pattern, list)
               else [i % pattern < pattern - 1 for i in range(n)])
        out.update(n_window_layers=sum(swa), window=int(f("attention.sliding_window")), n_full_layers=n - sum(swa))
    elif arch in MLA:
        if f("attention.kv_lora_rank") is None or f("attention.key_length_mla") is None:
            raise InputError("--gguf: a deepseek2 GGUF without attention.key_length_mla caches decompressed K/V "
                             "(an old conversion); convert it again with a current llama.cpp")
        out.update(n_kv_heads=n_heads, kv_lora_rank=int(f("attention.kv_lora_rank")),
                   qk_rope_head_dim=int(f("rope.dimension_count")), head_dim=int(f("attention.key_length_mla")),
                   n_full_layers=n)
    elif arch in RECURRENT:
        if arch == "nemotron_h":
            recr = [kv[i] == 0 and ff[i] == 0 for i in range(n)]
            attn = [kv[i] > 0 and ff[i] == 0 for i in range(n)]
        elif arch == "jamba":
            recr = [kv[i] == 0 for i in range(n)]
            attn = [not x for x in recr]
        else:
            every = int(f("full_attention_interval", 4))
            recr = [(i + 1) % every != 0 for i in range(n)]
            attn = [not x for x in recr]
        d_conv, d_inner, d_state = int(f("ssm.conv_kernel")), int(f("ssm.inner_size")), int(f("ssm.state_size"))
        rank, groups = int(f("ssm.time_step_rank")), int(f("ssm.group_count", 0))
        if arch == "nemotron_h":
            ssm = {"kind": "mamba2", "n_heads": rank, "head_dim": d_inner // rank, "d_state": d_state,
                   "d_conv": d_conv, "n_groups": groups}
        elif arch == "jamba":
            ssm = {"kind": "mamba1", "d_inner": d_inner, "d_state": d_state, "d_conv": d_conv}
        else:
            ssm = {"kind": "gated_deltanet", "n_k_heads": groups, "n_v_heads": rank, "k_head_dim": d_state,
                   "v_head_dim": d_state, "d_conv": d_conv}
        out.update(n_full_layers=sum(attn), ssm={**ssm, "n_layers": sum(recr)})
    else:
        out.update(n_full_layers=n)
    if n_heads % out["n_kv_heads"]:
        out["n_kv_heads"] = n_heads
    return out


def calculator_profile(path):
    """The calculator's ``ModelProfile`` for the GGUF at ``path`` (validated by ``profile_from_dict``)."""
    from part1_capacity.profiles import profile_from_dict

    return profile_from_dict(profile_dict(path), where="gguf")   # profile.extra["_architecture"]: the GGUF's
