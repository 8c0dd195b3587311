"""The checkpoint reader's bytes (part1_capacity/calculator/readers/checkpoints.py), worked by hand: sub-byte dtypes round
up to whole bytes, and the per-dtype breakdown leaves out the MTP layers vLLM skips (as ``loaded_bytes`` does).

A GGUF's metadata read as llama.cpp reads it (src/llama-hparams.cpp, src/models/<arch>.cpp): tiny files written with
the ``gguf`` package, each figure worked from the fields written; every refusal names its field; a safetensors
folder's shards and the dtype sizes of safetensors' own table."""
import json
import struct

import pytest

from part1_capacity.calculator.readers import checkpoints
from part1_capacity.calculator.base.errors import InputError


def test_sub_byte_tensors_round_up_to_whole_bytes():
    # F4: 3 values × 4 bits = 12 bits → 2 bytes (not 1); F6: 5 × 6 = 30 bits → 4 bytes (not 3); 4 × 6 = 24 → 3.
    assert checkpoints.tensor_bytes("F4", (3,), "t") == 2
    assert checkpoints.tensor_bytes("F6_E2M3", (5,), "t") == 4
    assert checkpoints.tensor_bytes("F6_E3M2", (2, 2), "t") == 3
    assert checkpoints.tensor_bytes("BF16", (3, 5), "t") == 30
    with pytest.raises(InputError, match="tensor dtype 'Q4' is not known; known: BOOL, U8"):
        checkpoints.tensor_bytes("Q4", (3,), "t")


def _safetensors(path, tensors):
    header, off = {}, 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + nbytes]}
        off += nbytes
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"\0" * off)


def test_per_dtype_bytes_leave_out_the_mtp_layers(tmp_path):
    # 1 hidden layer (layers.0, BF16 64 × 128 = 16,384 B) + 1 MTP layer (layers.1, F32 64 × 128 = 32,768 B) + the
    # embedding (BF16 256 × 64 = 32,768 B). A server loads 49,152 B, all BF16; the files hold 81,920 B.
    f = tmp_path / "model.safetensors"
    _safetensors(f, {"model.layers.0.mlp.down_proj.weight": ("BF16", (64, 128), 16384),
                     "model.layers.1.eh_proj.weight": ("F32", (64, 128), 32768),
                     "model.embed_tokens.weight": ("BF16", (256, 64), 32768)})
    c = checkpoints.read_safetensors([f], n_layers=1, n_mtp=1)
    assert (c.loaded_bytes, c.file_bytes, c.n_tensors) == (49152, 81920, 3)
    assert c.by_type == {"BF16": 49152}
    # without MTP layers declared, layers.1 is an ordinary layer and counts everywhere
    c0 = checkpoints.read_safetensors([f], n_layers=1, n_mtp=0)
    assert c0.loaded_bytes == 81920 and c0.by_type == {"BF16": 49152, "F32": 32768}
    # with 0 hidden layers + 1 MTP layer, layers.0 is the skipped one and layers.1, beyond it, loads:
    # only n_layers <= i < n_layers + n_mtp is skipped (81,920 − 16,384 B loaded).
    c2 = checkpoints.read_safetensors([f], n_layers=0, n_mtp=1)
    assert c2.loaded_bytes == 81920 - 16384 and c2.by_type == {"BF16": 32768, "F32": 32768}


# --- GGUF metadata, worked by hand -----------------------------------------------------------------------------------
def gguf_file(tmp_path, arch, fields, tensors=None, name="m"):
    """A GGUF of ``arch`` with ``fields`` (keys without a ``general.`` / ``split.`` namespace get ``<arch>.``; an int is
    written as uint32, a float as float32, a list as an array, a str as a string) and ``tensors`` (name → numpy array)."""
    import gguf
    import numpy as np

    p = tmp_path / f"{name}.gguf"
    w = gguf.GGUFWriter(str(p), arch)
    for key, v in fields.items():
        k = key if key.startswith(("general.", "split.")) else f"{arch}.{key}"
        if isinstance(v, list):
            w.add_array(k, v)
        elif isinstance(v, str):
            w.add_string(k, v)
        elif isinstance(v, float):
            w.add_float32(k, v)
        else:
            w.add_uint32(k, v)
    for t, a in (tensors if tensors is not None else {"a.weight": np.zeros((10, 64), np.float32)}).items():
        w.add_tensor(t, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return p


BASE = {"block_count": 4, "embedding_length": 64, "context_length": 2048, "attention.head_count": 4,
        "attention.head_count_kv": 2}


def layers_of(tmp_path, arch, **fields):
    d = checkpoints.gguf_profile_dict(gguf_file(tmp_path, arch, {**BASE, **fields}))
    return d["n_window_layers"], d["n_full_layers"]


def test_a_sliding_window_pattern_of_0_makes_every_layer_slide(tmp_path):
    # llama.cpp src/llama-hparams.cpp set_swa_pattern: is_swa = n_pattern == 0 || il % n_pattern < n_pattern - 1
    assert layers_of(tmp_path, "gemma2", **{"attention.sliding_window": 128,
                                            "attention.sliding_window_pattern": 0}) == (4, 0)


def test_gguf_field_reads_strings_numbers_lists_and_string_lists(tmp_path):
    p = gguf_file(tmp_path, "llama", {**BASE, "general.name": "Tiny", "attention.head_count": [4, 4, 4, 4],
                                      "tags": ["a", "bc"]})
    r = checkpoints._open_gguf(p, "model")
    assert checkpoints.gguf_field(r, "general.name") == "Tiny"
    assert checkpoints.gguf_field(r, "llama.block_count") == 4
    assert checkpoints.gguf_field(r, "llama.attention.head_count") == [4, 4, 4, 4]
    assert checkpoints.gguf_field(r, "llama.tags") == ["a", "bc"]
    assert checkpoints.gguf_field(r, "llama.nothing") is None


def test_a_full_attention_gguf_by_hand(tmp_path):
    import numpy as np

    # 10 × 64 float32 (640 values, 2,560 B) + 4 × 8 × 16 float16 (512 values, 1,024 B)
    tensors = {"a.weight": np.zeros((10, 64), np.float32), "b.weight": np.zeros((4, 8, 16), np.float16)}
    p = gguf_file(tmp_path, "llama", {**BASE, "general.name": "Tiny\x1b[31m"}, tensors)
    d = checkpoints.gguf_profile_dict(p)
    ckpt = d.pop("_checkpoint")
    assert d == {"id": "gguf:m", "name": "Tiny\\x1b[31m", "_architecture": "llama", "n_layers": 4, "n_heads": 4,
                 "n_kv_heads": 2, "head_dim": 16, "hidden_size": 64, "max_context": 2048,
                 "source": "read from the GGUF's metadata (llama)", "n_full_layers": 4, "params_total": 1152.0,
                 "params_active": 1152.0, "native_dtype": "fp32"}
    assert (ckpt.source, ckpt.loaded_bytes, ckpt.file_bytes, ckpt.n_tensors, ckpt.path) == (
        "gguf", 3584.0, 3584.0, 2, str(p))
    assert ckpt.by_type == {"F32": 2560, "F16": 1024}


def test_heads_and_head_size_as_llama_cpp_defaults_them(tmp_path):
    def fields(**kw):
        d = checkpoints.gguf_profile_dict(gguf_file(tmp_path, "llama", {**BASE, **kw}, name="x"))
        return d["name"], d["n_kv_heads"], d["head_dim"]
    no_kv = {k: v for k, v in BASE.items() if k != "attention.head_count_kv"}
    d = checkpoints.gguf_profile_dict(gguf_file(tmp_path, "llama", no_kv, name="nokv"))
    assert d["n_kv_heads"] == 4                                    # head_count_kv defaults to head_count
    assert fields() == ("x", 2, 16)                                # the file's stem without general.name; 64 / 4
    assert fields(**{"attention.key_length": 32}) == ("x", 2, 32)
    assert fields(**{"attention.head_count_kv": 3}) == ("x", 4, 16)   # 3 does not divide 4: one K/V per head
    # llama-model.cpp: n_embd_head_k = n_embd / n_head, unsigned integer division: 64 / 3 → 21
    assert fields(**{"attention.head_count": 3, "attention.head_count_kv": 1}) == ("x", 1, 21)


@pytest.mark.parametrize("count, used, active", [
    # 640 dense values + two expert tensors of 512: 1,664 in all, 1,024 of them routed
    (4, 1, 1664 - 1024 * 3 / 4), (4, 8, 1664), (4, 0, 1664 - 1024), (4, None, 1664 - 1024), (None, 1, 1664),
    (None, 0, 1664), (0, 1, 1664)])
def test_routed_experts_count_k_of_n_toward_the_active_parameters(tmp_path, count, used, active):
    import numpy as np

    tensors = {"a.weight": np.zeros((10, 64), np.float32), "blk.0.ffn_up_exps.weight": np.zeros((4, 8, 16), np.float32),
               "blk.1.ffn_up_exps.weight": np.zeros((4, 8, 16), np.float32)}
    extra = {**({} if used is None else {"expert_used_count": used}), **({} if count is None else {"expert_count": count})}
    d = checkpoints.gguf_profile_dict(gguf_file(tmp_path, "llama", {**BASE, **extra}, tensors))
    assert (d["params_total"], d["params_active"]) == (1664.0, active)
    assert d["_checkpoint"].by_type == {"F32": 1664 * 4}               # three F32 tensors summed under one type


@pytest.mark.parametrize("file_type, name", [
    # llama.cpp include/llama.h enum llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q8_0 7, MOSTLY_Q5_0 8,
    # MOSTLY_Q4_K_M 15, MOSTLY_BF16 32, MOSTLY_MXFP4_MOE 38; any other (or none) read as fp32
    (0, "fp32"), (1, "fp16"), (7, "q8_0"), (8, "q5_0"), (15, "q4_k_m"), (32, "bf16"), (38, "mxfp4"), (99, "fp32"),
    ("q8_0", "fp32"), (7.0, "fp32"), ([7, 7], "fp32"), (None, "fp32")])
def test_the_files_type(tmp_path, file_type, name):
    extra = {} if file_type is None else {"general.file_type": file_type}
    assert checkpoints.gguf_profile_dict(gguf_file(tmp_path, "llama", {**BASE, **extra}))["native_dtype"] == name


@pytest.mark.parametrize("arch, n, pattern, expected", [
    # set_swa_pattern(n_pattern): layer il slides when il % n_pattern < n_pattern − 1 (gemma2 2, gemma3 6,
    # openai-moe 2 by default, src/models/<arch>.cpp load_swa_pattern)
    ("gemma2", 4, None, (2, 2)), ("gemma3", 7, None, (6, 1)), ("gpt-oss", 3, None, (2, 1)),
    ("gemma3", 6, 3, (4, 2)), ("gemma2", 4, 1, (0, 4)), ("gemma2", 4, 512, (4, 0)),
    ("gemma2", 4, [1, 1, 1, 0], (3, 1))])         # a per-layer array is read as is (load_swa_pattern's get_arr)
def test_sliding_window_layers(tmp_path, arch, n, pattern, expected):
    extra = {"block_count": n, "attention.sliding_window": 128}
    if pattern is not None:
        extra["attention.sliding_window_pattern"] = pattern
    d = checkpoints.gguf_profile_dict(gguf_file(tmp_path, arch, {**BASE, **extra}))
    assert (d["n_window_layers"], d["n_full_layers"], d["window"]) == (*expected, 128)


def test_mla_by_hand(tmp_path):
    mla = {**BASE, "block_count": 3, "attention.head_count_kv": 1, "attention.kv_lora_rank": 32,
           "attention.key_length_mla": 24, "rope.dimension_count": 8, "attention.key_length": 40}
    d = checkpoints.gguf_profile_dict(gguf_file(tmp_path, "deepseek2", mla))
    assert (d["n_kv_heads"], d["kv_lora_rank"], d["qk_rope_head_dim"], d["head_dim"], d["n_full_layers"]) == \
        (4, 32, 8, 24, 3)
    old = ("model: a deepseek2 GGUF without attention.key_length_mla caches decompressed K/V (an old conversion); "
           "convert it again with a current llama.cpp")
    for drop in ("attention.key_length_mla", "attention.kv_lora_rank"):
        with pytest.raises(InputError) as e:
            checkpoints.gguf_profile_dict(gguf_file(tmp_path, "deepseek2", {k: v for k, v in mla.items() if k != drop},
                                                    name=drop))
        assert str(e.value) == old


SSM = {"ssm.conv_kernel": 4, "ssm.inner_size": 256, "ssm.state_size": 16, "ssm.time_step_rank": 8,
       "ssm.group_count": 2}


def test_recurrent_layers_of_each_architecture(tmp_path):
    def read(arch, name, **kw):
        d = checkpoints.gguf_profile_dict(gguf_file(tmp_path, arch, {**BASE, **SSM, **kw}, name=name))
        return d["n_full_layers"], d["n_kv_heads"], d["ssm"]
    # nemotron_h: recurrent where head_count_kv and feed_forward_length are both 0 (layers 0 and 3); attention where
    # only the feed-forward is 0 (layer 1); layer 2 is an MLP
    assert read("nemotron_h", "n", **{"attention.head_count_kv": [0, 2, 0, 0], "feed_forward_length": [0, 0, 128, 0]}) \
        == (1, 2, {"kind": "mamba2", "n_heads": 8, "head_dim": 32, "d_state": 16, "d_conv": 4, "n_groups": 2,
                   "n_layers": 2})
    # one K/V head is an attention layer too; without feed_forward_length every head-less layer is recurrent
    assert read("nemotron_h", "n1", **{"attention.head_count_kv": [0, 1, 0, 0], "feed_forward_length": [0, 0, 128, 0]})[0] == 1
    assert read("nemotron_h", "n2", **{"attention.head_count_kv": [0, 2, 0, 0]})[::2] == (
        1, {"kind": "mamba2", "n_heads": 8, "head_dim": 32, "d_state": 16, "d_conv": 4, "n_groups": 2, "n_layers": 3})
    # the head size is d_inner / heads in unsigned integer division (src/models/nemotron-h.cpp): 260 / 8 → 32
    assert read("nemotron_h", "n3", **{"attention.head_count_kv": [0, 2, 0, 0], "ssm.inner_size": 260})[2]["head_dim"] == 32
    # jamba: recurrent wherever head_count_kv is 0
    assert read("jamba", "j", **{"attention.head_count_kv": [0, 2, 0, 0]}) == (
        1, 2, {"kind": "mamba1", "d_inner": 256, "d_state": 16, "d_conv": 4, "n_layers": 3})
    assert read("jamba", "j2", **{"attention.head_count_kv": [0, 2, 0, 2]})[0] == 2
    # qwen3next: every 4th layer is attention (3 and 7 of 8), or every full_attention_interval-th
    delta = {"kind": "gated_deltanet", "n_k_heads": 2, "n_v_heads": 8, "k_head_dim": 16, "v_head_dim": 16, "d_conv": 4}
    assert read("qwen3next", "q", block_count=8) == (2, 2, {**delta, "n_layers": 6})
    assert read("qwen3next", "q2", block_count=8, full_attention_interval=2) == (4, 2, {**delta, "n_layers": 4})
    assert read("qwen3next", "q7", block_count=7) == (1, 2, {**delta, "n_layers": 6})    # only layer 3 of 0..6
    assert read("qwen3next", "q3", block_count=3) == (0, 2, {**delta, "n_layers": 3})
    no_groups = {k: v for k, v in SSM.items() if k != "ssm.group_count"}
    d = checkpoints.gguf_profile_dict(gguf_file(tmp_path, "qwen3next", {**BASE, **no_groups}, name="q3"))
    assert d["ssm"]["n_k_heads"] == 0


def refused(tmp_path, arch, fields, message, name="m"):
    with pytest.raises(InputError) as e:
        checkpoints.gguf_profile_dict(gguf_file(tmp_path, arch, fields, name=name))
    assert str(e.value) == message


@pytest.mark.parametrize("change, message", [
    ({"block_count": None}, "model: m.gguf: missing GGUF field 'llama.block_count'"),
    ({"embedding_length": [64, 64]}, "model: GGUF field 'llama.embedding_length' must be one number, got a list of 2"),
    ({"attention.head_count": [4, 4, 4]}, "model: m.gguf: a per-layer field has 3 values for 4 layers"),
    ({"attention.head_count": 0, "attention.head_count_kv": None}, "model: m.gguf: attention.head_count must be >= 1"),
    ({"attention.head_count_kv": 0}, "model: m.gguf: attention.head_count_kv must be >= 1 on at least one layer "
                                     "(0 marks a layer without attention)"),
    ({"block_count": [4, 4]}, "model: GGUF field 'llama.block_count' must be one number, got a list of 2"),
    ({"attention.head_count": [4097] * 4},
     "model: GGUF field 'llama.attention.head_count': must be >= 0 and <= 4,096, got 4097"),
    ({"attention.head_count": [4.5] * 4}, "model: GGUF field 'llama.attention.head_count': must be an integer, got 4.5"),
    ({"attention.head_count_kv": [-1] * 4},
     "model: GGUF field 'llama.attention.head_count_kv': must be >= 0 and <= 4,096, got -1"),
    ({"block_count": 0}, "model: GGUF field 'llama.block_count': must be a positive integer <= 512, got 0"),
    ({"block_count": 513}, "model: GGUF field 'llama.block_count': must be a positive integer <= 512, got 513"),
    ({"embedding_length": 0}, "model: GGUF field 'llama.embedding_length': must be a positive integer <= 65,536, got 0"),
    ({"embedding_length": 65537},
     "model: GGUF field 'llama.embedding_length': must be a positive integer <= 65,536, got 65537"),
    ({"attention.head_count": 4097},
     "model: GGUF field 'llama.attention.head_count': must be >= 0 and <= 4,096, got 4097"),
    ({"attention.head_count_kv": 4097},
     "model: GGUF field 'llama.attention.head_count_kv': must be >= 0 and <= 4,096, got 4097"),
    ({"attention.key_length": 0},
     "model: GGUF field 'llama.attention.key_length': must be a positive integer <= 2,147,483,648, got 0"),
    ({"context_length": 0},
     "model: GGUF field 'llama.context_length': must be a positive integer <= 2,147,483,648, got 0"),
    ({"context_length": 2 ** 31 + 1},
     "model: GGUF field 'llama.context_length': must be a positive integer <= 2,147,483,648, got 2147483649"),
    ({"feed_forward_length": 2 ** 31 + 1},
     "model: GGUF field 'llama.feed_forward_length': must be >= 0 and <= 2,147,483,648, got 2147483649"),
    ({"expert_count": 2 ** 31 + 1},
     "model: GGUF field 'llama.expert_count': must be >= 0 and <= 2,147,483,648, got 2147483649"),
    ({"expert_count": 2, "expert_used_count": 2 ** 31 + 1},
     "model: GGUF field 'llama.expert_used_count': must be >= 0 and <= 2,147,483,648, got 2147483649"),
])
def test_metadata_out_of_range_is_refused_naming_the_field(tmp_path, change, message):
    fields = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    refused(tmp_path, "llama", fields, message)


def test_an_unsupported_architecture_names_the_supported_ones(tmp_path):
    refused(tmp_path, "rwkv6", BASE, "model: GGUF architecture 'rwkv6' is not supported; supported: llama, mistral, "
            "qwen2, qwen3, granite, olmo2, phi3, stablelm, gemma2, gemma3, gpt-oss, deepseek2, nemotron_h, jamba, "
            "qwen3next")


@pytest.mark.parametrize("arch, change, message", [
    ("gemma2", {"attention.sliding_window_pattern": 513},
     "model: GGUF field 'gemma2.attention.sliding_window_pattern': must be >= 0 and <= 512, got 513"),
    ("gemma2", {"attention.sliding_window": 0},
     "model: GGUF field 'gemma2.attention.sliding_window': must be a positive integer <= 2,147,483,648, got 0"),
    ("gemma2", {}, "model: m.gguf: missing GGUF field 'gemma2.attention.sliding_window'"),
    ("deepseek2", {"attention.kv_lora_rank": 0, "attention.key_length_mla": 24, "rope.dimension_count": 8},
     "model: GGUF field 'deepseek2.attention.kv_lora_rank': must be a positive integer <= 2,147,483,648, got 0"),
    ("deepseek2", {"attention.kv_lora_rank": 32, "attention.key_length_mla": 0, "rope.dimension_count": 8},
     "model: GGUF field 'deepseek2.attention.key_length_mla': must be a positive integer <= 2,147,483,648, got 0"),
    ("deepseek2", {"attention.kv_lora_rank": 32, "attention.key_length_mla": 24, "rope.dimension_count": 0},
     "model: GGUF field 'deepseek2.rope.dimension_count': must be a positive integer <= 2,147,483,648, got 0"),
    ("qwen3next", {**SSM, "full_attention_interval": 0},
     "model: GGUF field 'qwen3next.full_attention_interval': must be a positive integer <= 512, got 0"),
    ("qwen3next", {**SSM, "full_attention_interval": 513},
     "model: GGUF field 'qwen3next.full_attention_interval': must be a positive integer <= 512, got 513"),
    *[("jamba", {**SSM, "attention.head_count_kv": [0, 2, 0, 0], k: 0},
       f"model: GGUF field 'jamba.{k}': must be a positive integer <= 2,147,483,648, got 0")
      for k in ("ssm.conv_kernel", "ssm.inner_size", "ssm.state_size", "ssm.time_step_rank")],
    ("nemotron_h", {**SSM, "attention.head_count_kv": [0, 2, 0, 0], "ssm.group_count": 2 ** 31 + 1},
     "model: GGUF field 'nemotron_h.ssm.group_count': must be >= 0 and <= 2,147,483,648, got 2147483649"),
])
def test_layer_kind_fields_out_of_range_are_refused(tmp_path, arch, change, message):
    refused(tmp_path, arch, {**BASE, **change}, message)


def test_edges_that_are_accepted(tmp_path):
    big = {**BASE, "block_count": 512, "embedding_length": 65536, "attention.head_count": 4096,
           "attention.head_count_kv": 4096, "context_length": 2 ** 31}
    d = checkpoints.gguf_profile_dict(gguf_file(tmp_path, "llama", big, name="big"))
    assert (d["n_layers"], d["hidden_size"], d["n_heads"], d["n_kv_heads"], d["max_context"]) == (
        512, 65536, 4096, 4096, 2 ** 31)
    one = {**BASE, "block_count": 1, "embedding_length": 1, "attention.head_count": 1, "attention.head_count_kv": 1,
           "context_length": 1, "attention.key_length": 1}
    d = checkpoints.gguf_profile_dict(gguf_file(tmp_path, "llama", one, name="one"))
    assert (d["n_layers"], d["hidden_size"], d["head_dim"], d["max_context"]) == (1, 1, 1, 1)
    q = {**BASE, **{k: 1 for k in SSM}, "full_attention_interval": 512, "ssm.group_count": 0}
    d = checkpoints.gguf_profile_dict(gguf_file(tmp_path, "qwen3next", q, name="q"))
    assert d["n_full_layers"] == 0 and d["ssm"]["n_layers"] == 4 and d["ssm"]["d_conv"] == 1
    mla = {**BASE, "attention.kv_lora_rank": 1, "attention.key_length_mla": 1, "rope.dimension_count": 1}
    d = checkpoints.gguf_profile_dict(gguf_file(tmp_path, "deepseek2", mla, name="mla"))
    assert (d["kv_lora_rank"], d["head_dim"], d["qk_rope_head_dim"]) == (1, 1, 1)
    g = {**BASE, "attention.sliding_window": 1, "attention.sliding_window_pattern": 0}
    assert checkpoints.gguf_profile_dict(gguf_file(tmp_path, "gemma2", g, name="g"))["window"] == 1


def test_split_gguf_naming(tmp_path):
    one = gguf_file(tmp_path, "llama", {**BASE, "split.count": 1}, name="whole")
    assert checkpoints.gguf_profile_dict(one)["n_layers"] == 4           # one part: nothing else to open
    refused(tmp_path, "llama", {**BASE, "split.count": 2}, "model: m.gguf is one part of a split GGUF (2 parts): "
            "pass the first part, named like model-00001-of-00002.gguf")
    refused(tmp_path, "llama", {**BASE, "split.count": 3}, "model: m-00002-of-00003.gguf is one part of a split GGUF "
            "(3 parts): pass the first part, named like model-00001-of-00003.gguf", name="m-00002-of-00003")
    refused(tmp_path, "llama", {**BASE, "split.count": 1001},
            "model: GGUF field 'split.count': must be a positive integer <= 1,000, got 1001")


# --- safetensors folders ---------------------------------------------------------------------------------------------
# safetensors' Dtype sizes (safetensors/src/tensor.rs Dtype::bitsize): a byte for BOOL, 8-bit integers and
# floats, F4 4 bits, F6 6 bits, 16-, 32- and 64-bit types
BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
        "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32,
        "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64}


@pytest.mark.parametrize("dtype", BITS)
def test_bits_of_every_safetensors_dtype(dtype):
    assert checkpoints.tensor_bytes(dtype, (2, 4), "t") == BITS[dtype]          # 8 values: the bits are the bytes


def test_an_unknown_dtype_lists_the_known_ones():
    with pytest.raises(InputError) as e:
        checkpoints.tensor_bytes("Q4", (3,), "hub: tensor 'w'")
    assert str(e.value) == "hub: tensor 'w': tensor dtype 'Q4' is not known; known: " + ", ".join(BITS)


def test_layers_without_the_model_prefix_and_the_last_mtp_layer(tmp_path):
    # 2 hidden layers + 2 MTP layers (2 and 3) are skipped; layer 4 lies beyond them and loads; "layers.2" counts
    # without a "model." prefix; "model.layers.20x." is not a layer name
    c = checkpoints.checkpoint_from_tensors([
        ("layers.1.w", "BF16", (4,)), ("layers.2.w", "BF16", (4,)), ("model.layers.3.w", "F32", (4,)),
        ("model.layers.4.w", "F32", (4,)), ("model.layers.2x.w", "U8", (4,))], 2, 2, "p", "where")
    assert (c.loaded_bytes, c.file_bytes, c.n_tensors, c.path) == (8 + 16 + 4, 8 + 8 + 16 + 16 + 4, 5, "p")
    assert c.by_type == {"BF16": 8, "F32": 16, "U8": 4} and c.source == "safetensors"


def _st(path, names=("w",)):
    _safetensors(path, {n: ("BF16", (2,), 4) for n in names})


def test_which_folders_hold_a_model(tmp_path):
    (tmp_path / "a").mkdir()
    assert not checkpoints.is_model_folder(tmp_path / "a")
    (tmp_path / "a" / "model.safetensors.index.json").write_text("{}")
    assert checkpoints.is_model_folder(tmp_path / "a")
    (tmp_path / "b").mkdir()
    _st(tmp_path / "b" / "x.safetensors")
    assert checkpoints.is_model_folder(tmp_path / "b") and not checkpoints.is_model_folder(tmp_path / "b" / "x.safetensors")


def test_shards_without_an_index_are_every_safetensors_file_in_name_order(tmp_path):
    _st(tmp_path / "b.safetensors", ("w2",))
    _st(tmp_path / "a.safetensors", ("w1",))
    assert checkpoints.safetensors_files(tmp_path) == [tmp_path / "a.safetensors", tmp_path / "b.safetensors"]
    assert [t[0] for t in checkpoints.safetensors_tensors(checkpoints.safetensors_files(tmp_path))] == ["w1", "w2"]
    (tmp_path / "e").mkdir()
    with pytest.raises(InputError) as e:
        checkpoints.safetensors_files(tmp_path / "e")
    assert str(e.value) == f"model: folder {tmp_path / 'e'} has no *.safetensors and no model.safetensors.index.json"


NOT_A_NAME = "is not a file name (one name in the folder, at most 255 bytes)"


@pytest.mark.parametrize("index, message", [
    ({}, "model: model.safetensors.index.json has no 'weight_map' object naming the shards"),
    ({"weight_map": {}}, "model: model.safetensors.index.json has no 'weight_map' object naming the shards"),
    ({"weight_map": ["a.safetensors"]}, "model: model.safetensors.index.json has no 'weight_map' object naming the shards"),
    ({"weight_map": {"w": ["a.safetensors"]}},
     "model: model.safetensors.index.json: 'weight_map' values must be shard file names, got ['a.safetensors']"),
    *[({"weight_map": {"w": n}}, f"model: model.safetensors.index.json: shard name {shown} {NOT_A_NAME}")
      for n, shown in (("sub/a.safetensors", "'sub/a.safetensors'"), ("sub\\a.safetensors", "'sub\\\\a.safetensors'"),
                       ("", "''"), (".", "'.'"), ("..", "'..'"),
                       ("a" * 256, "'" + "a" * 34 + "…(258 chars)"),           # names cut to 40 characters
                       ("é" * 128, "'" + "é" * 34 + "…(130 chars)"))],       # 128 characters but 256 bytes
])
def test_an_index_that_names_no_shards_is_refused(tmp_path, index, message):
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(InputError) as e:
        checkpoints.safetensors_files(tmp_path)
    assert str(e.value) == message


def test_an_index_names_each_shard_once_and_a_255_byte_name_is_a_file_name(tmp_path):
    name = "a" * 243 + ".safetensors"                    # 255 bytes
    _st(tmp_path / name, ("w1", "w2"))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w1": name, "w2": name}}))
    assert checkpoints.safetensors_files(tmp_path) == [tmp_path / name]


def test_a_folder_reads_its_mtp_layers_from_the_text_config(tmp_path):
    from part1_capacity.calculator.readers.loader import load_model

    cfg = {"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
           "num_key_value_heads": 2, "intermediate_size": 16, "vocab_size": 4, "max_position_embeddings": 64}
    d = tmp_path / "mtpmodel"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**cfg, "num_nextn_predict_layers": 1}))
    _safetensors(d / "model.safetensors", {"model.layers.0.w": ("BF16", (8,), 16), "model.layers.1.w": ("BF16", (8,), 16)})
    m = load_model(str(d))
    assert (m.checkpoint.loaded_bytes, m.checkpoint.file_bytes) == (16, 32)
    assert m.id == "mtpmodel" and m.source.endswith("; weights from 2 safetensors headers")
    (d / "config.json").write_text(json.dumps({**cfg, "num_nextn_predict_layers": 17}))
    with pytest.raises(InputError) as e:
        load_model(str(d))
    assert str(e.value) == ("model: config.json: field 'num_nextn_predict_layers': must be >= 0 and <= 16, got 17")


# --- what only a file written byte by byte can hold (GGUF v3, github.com/ggml-org/ggml docs/gguf.md) ----------------
U32, STR, ARR = 4, 8, 9


def _s(b: bytes) -> bytes:
    return struct.pack("<Q", len(b)) + b


def _kv(key: str, vtype: int, payload: bytes) -> bytes:
    return _s(key.encode()) + struct.pack("<I", vtype) + payload


def raw_gguf(path, kvs):
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs))
    return path


LLAMA_KVS = [_kv("general.architecture", STR, _s(b"llama")), _kv("llama.block_count", U32, struct.pack("<I", 4)),
             _kv("llama.embedding_length", U32, struct.pack("<I", 64)),
             _kv("llama.context_length", U32, struct.pack("<I", 2048))]


def test_text_that_is_not_utf_8_is_read_with_replacement_characters(tmp_path):
    p = raw_gguf(tmp_path / "bad.gguf", [
        *LLAMA_KVS, _kv("llama.attention.head_count", U32, struct.pack("<I", 4)),
        _kv("general.name", STR, _s(b"Tiny\xff")),
        _kv("llama.tags", ARR, struct.pack("<IQ", STR, 2) + _s(b"a\xfe") + _s(b"bc"))])
    r = checkpoints._open_gguf(p, "model")
    assert checkpoints.gguf_field(r, "general.name") == "Tiny\ufffd"
    assert checkpoints.gguf_field(r, "llama.tags") == ["a\ufffd", "bc"]
    assert checkpoints.gguf_profile_dict(p)["name"] == "Tiny\ufffd"


def test_an_empty_per_layer_array_is_refused_in_one_line(tmp_path):
    p = raw_gguf(tmp_path / "empty.gguf", [*LLAMA_KVS, _kv("llama.attention.head_count", ARR, struct.pack("<IQ", U32, 0))])
    r = checkpoints._open_gguf(p, "model")
    assert checkpoints.gguf_field(r, "llama.attention.head_count") == []
    with pytest.raises(InputError) as e:
        checkpoints.gguf_profile_dict(p)
    assert str(e.value) == "model: empty.gguf: a per-layer field has 0 values for 4 layers"


def test_the_field_named_in_every_refusal_of_a_file(tmp_path):
    import os

    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + b"\xff" * 60)
    for call in (lambda p, f: checkpoints.gguf_profile_dict(p, f), lambda p, f: checkpoints.profile_from_gguf(p, f)):
        for path in (fifo, junk):
            with pytest.raises(InputError) as e:
                call(path, "--gguf")
            assert str(e.value).startswith("--gguf: "), str(e.value)
    with pytest.raises(InputError) as e:
        checkpoints.profile_from_gguf(fifo)
    assert str(e.value) == f"model: {fifo} is a FIFO; expected a regular file"


def _split(tmp_path, n, name="s"):
    """``n`` parts of a split llama GGUF in a new folder ``tmp_path / name``, each its own file with one F32 tensor
    of 640 values."""
    import numpy as np

    tmp_path = tmp_path / name
    tmp_path.mkdir()
    paths = [tmp_path / f"{name}-{i:05d}-of-{n:05d}.gguf" for i in range(1, n + 1)]
    for i, p in enumerate(paths):
        fields = {**BASE, "split.count": n} if i == 0 else {"split.count": n}
        gguf_file(tmp_path, "llama", fields, {f"t{i}.weight": np.zeros((10, 64), np.float32)}, name=p.stem)
    return paths


SAME = "is the same file as another part of the split GGUF: every part is counted once, so each must be its own file"


def test_split_parts_are_each_their_own_file(tmp_path):
    import os

    a = _split(tmp_path, name="a", n=2)
    assert checkpoints.gguf_profile_dict(a[0])["params_total"] == 1280.0
    # a hard link to the first part resolves to another path but is the same file
    b = _split(tmp_path, name="b", n=2)
    b[1].unlink()
    os.link(b[0], b[1])
    with pytest.raises(InputError) as e:
        checkpoints.gguf_profile_dict(b[0])
    assert str(e.value) == f"model: {b[1].name} {SAME}"
    # the third part a link to the second
    c = _split(tmp_path, name="c", n=3)
    c[2].unlink()
    c[2].symlink_to(c[1])
    with pytest.raises(InputError) as e:
        checkpoints.gguf_profile_dict(c[0], "--gguf")
    assert str(e.value) == f"--gguf: {c[2].name} {SAME}"
    # a later part that is not a GGUF is refused naming the field given
    c[2].unlink()
    c[2].write_bytes(b"GGUF" + b"\xff" * 60)
    with pytest.raises(InputError) as e:
        checkpoints.gguf_profile_dict(c[0], "--gguf")
    assert str(e.value).startswith("--gguf: ")


# --- safetensors: the edges of reading them -----------------------------------------------------------------------
def test_the_default_place_names_and_mtp_count(tmp_path):
    with pytest.raises(InputError) as e:
        checkpoints.checkpoint_from_tensors([("w", "Q4", (3,))], 1, 0, "p")
    assert str(e.value).startswith("model: tensor 'w': tensor dtype 'Q4' is not known; known: BOOL, ")
    f = tmp_path / "model.safetensors"
    _safetensors(f, {"model.layers.0.w": ("BF16", (8,), 16), "model.layers.1.w": ("BF16", (8,), 16)})
    c = checkpoints.read_safetensors([f], n_layers=1)                  # no MTP layers unless said
    assert (c.loaded_bytes, c.path) == (32, str(tmp_path))


def test_a_shard_that_cannot_be_read_is_named_with_the_first_line_of_why(tmp_path, monkeypatch):
    import os

    import safetensors

    fifo = tmp_path / "model.safetensors"
    os.mkfifo(fifo)
    with pytest.raises(InputError) as e:
        checkpoints.safetensors_tensors([fifo])
    assert str(e.value) == f"model: {fifo} is a FIFO; expected a regular file"
    fifo.unlink()
    _st(fifo)

    def refuse(text):
        def open_(*a, **k):
            raise ValueError(text)
        return open_
    for text, shown in (("", "ValueError"), ("x" * 300, "x" * 240), ("first\nsecond", "first")):
        monkeypatch.setattr(safetensors, "safe_open", refuse(text))
        with pytest.raises(InputError) as e:
            checkpoints.safetensors_tensors([fifo])
        assert str(e.value) == f"model: model.safetensors is not a readable safetensors file ({shown})"


def test_the_index_size_cap_is_64_mib(tmp_path):
    big = tmp_path / "big"
    big.mkdir()
    _st(big / "a.safetensors")
    # a valid index of 17 MiB (more than the 16 MiB a config file may have) is read
    (big / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": "a.safetensors"}})
                                                      + " " * (17 * 2 ** 20))
    assert checkpoints.safetensors_files(big) == [big / "a.safetensors"]
    (tmp_path / "huge").mkdir()
    with open(tmp_path / "huge" / "model.safetensors.index.json", "wb") as fh:
        fh.truncate(64 * 2 ** 20 + 1)                                   # sparse: no 64 MiB written
    with pytest.raises(InputError) as e:
        checkpoints.safetensors_files(tmp_path / "huge")
    assert str(e.value) == (f"model: {tmp_path / 'huge' / 'model.safetensors.index.json'} is larger than 64 MiB; "
                            "expected a small text file")
    (tmp_path / "huge" / "model.safetensors.index.json").write_text("[1]")
    with pytest.raises(InputError) as e:
        checkpoints.safetensors_files(tmp_path / "huge")
    assert str(e.value).startswith("model: ")


# A multimodal checkpoint (gemma3): the language model's fields under text_config
TEXT = {"model_type": "gemma3_text", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128, "vocab_size": 256,
        "max_position_embeddings": 4096, "sliding_window": 128, "sliding_window_pattern": 2}
VISION = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
          "image_size": 28, "patch_size": 14}
FP8 = {"quant_method": "fp8"}
TWO_LAYERS_AND_MTP = {"model.layers.0.w": ("BF16", (8,), 16), "model.layers.2.w": ("BF16", (8,), 16)}


def _folder(tmp_path, name, config):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    _safetensors(d / "model.safetensors", TWO_LAYERS_AND_MTP)
    return d


def test_params_from_config_if_quantized_else_from_headers(tmp_path):
    from part1_capacity.calculator.readers.loader import load_model

    plain = load_model(str(_folder(tmp_path, "plain", {"model_type": "gemma3", "text_config": TEXT,
                                                       "vision_config": VISION})))
    assert plain.params_total == 16                                      # 8 + 8 values in the headers
    # packed weights and scales in the headers are not the parameters: the config counts them, whether the
    # quantization is stated at the top or in the language model's part
    for name, cfg in (("top", {"model_type": "gemma3", "text_config": TEXT, "vision_config": VISION,
                               "quantization_config": FP8}),
                      ("inner", {"model_type": "gemma3", "text_config": {**TEXT, "quantization_config": FP8},
                                 "vision_config": VISION})):
        d = _folder(tmp_path, name, cfg)
        m = load_model(str(d))
        assert m.params_total == load_model(str(d / "config.json")).params_total > 16, name
        assert (m.checkpoint.path, m.id) == (str(d), name)


def test_mtp_layers_named_in_the_text_config(tmp_path):
    from part1_capacity.calculator.readers.loader import load_model

    d = _folder(tmp_path, "mtp", {"model_type": "gemma3", "text_config": {**TEXT, "num_nextn_predict_layers": 1},
                                   "vision_config": VISION})
    assert (load_model(str(d)).checkpoint.loaded_bytes, load_model(str(d)).checkpoint.file_bytes) == (16, 32)
    d = _folder(tmp_path, "nomtp", {"model_type": "gemma3", "text_config": TEXT, "vision_config": VISION})
    assert load_model(str(d)).checkpoint.loaded_bytes == 32               # layer 2 is a layer like any other
    d = _folder(tmp_path, "half", {"model_type": "gemma3", "text_config": {**TEXT, "num_nextn_predict_layers": 1.5},
                                    "vision_config": VISION})
    with pytest.raises(InputError) as e:
        load_model(str(d))
    assert str(e.value) == "model: config.json: field 'num_nextn_predict_layers': must be an integer, got 1.5"
    d = _folder(tmp_path, "badcfg", {"model_type": "gemma3", "text_config": {**TEXT, "num_attention_heads": 0},
                                      "vision_config": VISION})
    with pytest.raises(InputError) as e:
        load_model(str(d))
    assert str(e.value).startswith("badcfg/config.json: "), str(e.value)
