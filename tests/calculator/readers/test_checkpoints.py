"""A local checkpoint as --model: weight bytes from safetensors headers or a GGUF tensor table, exact.

Expected bytes are worked out here by hand from the shapes and dtypes written (elements × bytes per element; GGUF
Q8_0: 34 bytes per block of 32 — llama.cpp ggml-common.h block_q8_0)."""
import json
import struct

import numpy as np
import pytest

from part1_capacity.cli import main
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.readers.loader import load_model

# A tiny llama: 2 layers, hidden 64, 4 heads (head_dim 16), 2 KV heads, MLP 128, vocab 256.
TINY = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256, "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16"}


def write_safetensors(path, tensors, header_text=None):
    """tensors: name → (dtype, shape, bytes); the data region is zeros of the stated size."""
    header, off = {}, 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + nbytes]}
        off += nbytes
    h = (header_text if header_text is not None else json.dumps(header)).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"\0" * off)


def folder(tmp_path, config, shards, index=True):
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    weight_map = {}
    for fname, tensors in shards.items():
        write_safetensors(d / fname, tensors)
        weight_map.update({k: fname for k in tensors})
    if index and len(shards) > 1:
        (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return d


# FP8 matrices with bf16 norms and fp32 block scales, in two shards
FP8_SHARDS = {
    "model-00001-of-00002.safetensors": {
        "model.embed_tokens.weight": ("BF16", (256, 64), 256 * 64 * 2),                  # 32,768
        "model.layers.0.self_attn.q_proj.weight": ("F8_E4M3", (64, 64), 64 * 64),         # 4,096
        "model.layers.0.self_attn.q_proj.weight_scale_inv": ("F32", (1, 1), 4),           # 4
        "model.layers.0.input_layernorm.weight": ("BF16", (64,), 128),                    # 128
    },
    "model-00002-of-00002.safetensors": {
        "model.layers.1.mlp.experts.gate_up_proj_blocks": ("U8", (4, 256, 2, 16), 4 * 256 * 2 * 16),   # 32,768
        "model.layers.1.mlp.experts.gate_up_proj_scales": ("U8", (4, 256, 2), 4 * 256 * 2),            # 2,048
        "lm_head.weight": ("BF16", (256, 64), 256 * 64 * 2),                                           # 32,768
    },
}
FP8_BYTES = 32768 + 4096 + 4 + 128 + 32768 + 2048 + 32768


def test_a_model_folder_gets_its_weight_bytes_from_the_safetensors_headers(tmp_path, capsys):
    d = folder(tmp_path, TINY, FP8_SHARDS)
    m = load_model(str(d))
    assert m.checkpoint.loaded_bytes == FP8_BYTES == 104_580
    assert m.checkpoint.by_type == {"BF16": 32768 + 128 + 32768, "F8_E4M3": 4096, "F32": 4, "U8": 32768 + 2048}
    assert m.n_layers == 2 and m.kv_bytes_per_token(2) == 2 * 2 * 2 * 16 * 2
    assert {m: 1}[m] == 1                                   # a profile stays hashable with its checkpoint
    assert main(["plan", "--model", str(d), "--accelerator", "h100", "--context", "1024", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["weights_bytes"] == FP8_BYTES and plan["weights_bytes_source"] == "safetensors"
    # the same model from its config.json alone: parameters × dtype
    assert main(["plan", "--model", str(d / "config.json"), "--accelerator", "h100", "--context", "1024",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["weights_bytes_source"] == "parameters × dtype"


def test_a_requantized_plan_falls_back_to_parameters_times_dtype(tmp_path):
    m = load_model(str(folder(tmp_path, TINY, FP8_SHARDS)))
    from part1_capacity.calculator.model import weights
    rep = weights.weights_report(m, "fp16")
    assert rep["weights_bytes_source"] == "parameters × dtype" and rep["weights_bytes"] == m.params_total * 2


def test_the_mtp_layers_a_server_skips_are_counted_apart(tmp_path):
    """DeepSeek-style checkpoint: num_hidden_layers 1 + one MTP layer (model.layers.1), which vLLM skips."""
    cfg = {"model_type": "deepseek_v3", "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
           "num_key_value_heads": 4, "intermediate_size": 128, "moe_intermediate_size": 32, "vocab_size": 256,
           "kv_lora_rank": 32, "q_lora_rank": 48, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16,
           "n_routed_experts": 4, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
           "num_nextn_predict_layers": 1, "max_position_embeddings": 4096}
    shards = {"model.safetensors": {"model.layers.0.mlp.down_proj.weight": ("BF16", (64, 128), 64 * 128 * 2),
                                    "model.layers.1.eh_proj.weight": ("BF16", (64, 128), 64 * 128 * 2)}}
    m = load_model(str(folder(tmp_path, cfg, shards)))
    assert (m.checkpoint.loaded_bytes, m.checkpoint.file_bytes) == (16384, 32768)
    from part1_capacity.calculator.model import weights
    assert weights.weights_bytes(m) == 16384 and weights.weights_bytes(m, mtp=True) == 32768


def one_line_error(capsys, argv, fragment):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err and "Traceback" not in err, err


def test_a_folder_without_config_json(tmp_path, capsys):
    (tmp_path / "m").mkdir()
    write_safetensors(tmp_path / "m" / "model.safetensors", {"w": ("BF16", (2,), 4)})
    one_line_error(capsys, ["plan", "--model", str(tmp_path / "m"), "--accelerator", "h100", "--context", "8"],
                   "has no config.json")


@pytest.mark.parametrize("header, fragment", [
    ("this is not json", "not a readable safetensors file"),
    ('{"w": {"dtype": "F7_X", "shape": [2], "data_offsets": [0, 4]}}', "F7_X"),
])
def test_a_bad_safetensors_header_is_one_line(tmp_path, capsys, header, fragment):
    d = folder(tmp_path, TINY, {})
    write_safetensors(d / "model.safetensors", {"w": ("BF16", (2,), 4)}, header_text=header)
    one_line_error(capsys, ["plan", "--model", str(d), "--accelerator", "h100", "--context", "8"], fragment)


def test_a_shard_that_is_a_fifo_does_not_block(tmp_path, capsys):
    import os
    d = folder(tmp_path, TINY, {})
    os.mkfifo(d / "model.safetensors")
    one_line_error(capsys, ["plan", "--model", str(d), "--accelerator", "h100", "--context", "8"], "is a FIFO")


def test_a_missing_shard_is_named(tmp_path):
    d = folder(tmp_path, TINY, FP8_SHARDS)
    (d / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(InputError, match="model-00002-of-00002.safetensors is missing"):
        load_model(str(d))


def write_gguf(path):
    import gguf
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(2)
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_file_type(7)                                                    # mostly Q8_0
    w.add_tensor("token_embd.weight", np.zeros((100, 64), np.float16))   # 6,400 × 2 B
    w.add_tensor("output_norm.weight", np.zeros(64, np.float32))         # 64 × 4 B
    q = gguf.quants.quantize(np.zeros((64, 64), np.float32), gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("blk.0.attn_q.weight", q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_a_gguf_file_as_model(tmp_path, capsys):
    p = tmp_path / "tiny.gguf"
    write_gguf(p)
    m = load_model(str(p))
    assert (m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.max_context) == (2, 4, 2, 16, 2048)
    assert m.params_total == 6400 + 64 + 4096 and m.native_dtype == "q8_0"
    assert m.checkpoint.loaded_bytes == 6400 * 2 + 64 * 4 + 4096 // 32 * 34
    assert main(["plan", "--model", str(p), "--accelerator", "h100", "--context", "1024", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["weights_bytes_source"] == "gguf" and plan["weights_bytes"] == 12800 + 256 + 4352


def test_a_file_that_is_not_gguf(tmp_path, capsys):
    p = tmp_path / "fake.gguf"
    p.write_bytes(b"GGML" + b"\0" * 60)
    one_line_error(capsys, ["plan", "--model", str(p), "--accelerator", "h100", "--context", "8"],
                   "not a readable GGUF file")
    one_line_error(capsys, ["plan", "--model", str(tmp_path), "--accelerator", "h100", "--context", "8"],
                   "has no config.json")


def test_a_split_gguf_counts_every_part(tmp_path):
    """llama.cpp's gguf-split: metadata in the first part, tensors spread; split.count says how many parts."""
    import gguf
    names = [tmp_path / f"tiny-{i:05d}-of-00002.gguf" for i in (1, 2)]
    for i, p in enumerate(names):
        w = gguf.GGUFWriter(str(p), "llama")
        w.add_uint16("split.no", i)
        w.add_uint16("split.count", 2)
        w.add_int32("split.tensors.count", 2)
        if i == 0:
            for add, v in ((w.add_block_count, 2), (w.add_context_length, 2048), (w.add_embedding_length, 64),
                           (w.add_feed_forward_length, 128), (w.add_head_count, 4), (w.add_head_count_kv, 2)):
                add(v)
        w.add_tensor(f"t{i}.weight", np.zeros((100, 64), np.float16))          # 12,800 bytes each
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    m = load_model(str(names[0]))
    assert m.checkpoint.loaded_bytes == 2 * 12800 and m.params_total == 2 * 6400
    with pytest.raises(InputError, match="pass the first part"):
        load_model(str(names[1]))
    names[1].unlink()
    with pytest.raises(InputError, match="tiny-00002-of-00002.gguf is missing"):
        load_model(str(names[0]))
