"""The checkpoint reader's bytes (part1_capacity/calculator/checkpoints.py), worked by hand: sub-byte dtypes round
up to whole bytes, and the per-dtype breakdown leaves out the MTP layers vLLM skips (as ``loaded_bytes`` does)."""
import json
import struct

import pytest

from part1_capacity.calculator import checkpoints
from part1_capacity.calculator.errors import InputError


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
    written as uint32, a list as an array, a str as a string) and ``tensors`` (name → numpy array)."""
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
