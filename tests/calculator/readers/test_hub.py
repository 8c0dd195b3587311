"""A Hub repository id as --model, read from a small Hub on 127.0.0.1 (tests/support/local_hub.py) serving checkpoints
written here: nothing leaves the machine.

Expected bytes are worked by hand from the shapes written (elements × bytes per element); the Hub's log shows that
only headers were read (every safetensors or GGUF request is a range, and far less than the file was sent).
"""
import json
import struct

import numpy as np
import pytest

from part1_capacity.cli import main
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.readers.loader import load_model
from tests.support.local_hub import Hub, Repo

# A tiny llama: 2 layers, hidden 64, 4 heads (head_dim 16), 2 K/V heads, MLP 2048, vocab 4096 (every shard is
# over 500 KB, so the header read, at most 100,001 bytes, is far less than the file)
TINY = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 2048, "vocab_size": 4096,
        "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": True}


def safetensors(tensors) -> bytes:
    """name → (dtype, shape, bytes per element): a file whose data region is zeros of the stated size."""
    header, off = {}, 0
    for name, (dtype, shape, width) in tensors.items():
        n = int(np.prod(shape)) * width
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + b"\0" * off


def llama_tensors():
    t = {"model.embed_tokens.weight": ("BF16", (4096, 64), 2), "model.norm.weight": ("BF16", (64,), 2)}
    for i in range(2):
        p = f"model.layers.{i}"
        t.update({f"{p}.self_attn.q_proj.weight": ("BF16", (64, 64), 2),
                  f"{p}.self_attn.k_proj.weight": ("BF16", (32, 64), 2),
                  f"{p}.self_attn.v_proj.weight": ("BF16", (32, 64), 2),
                  f"{p}.self_attn.o_proj.weight": ("BF16", (64, 64), 2),
                  f"{p}.mlp.gate_proj.weight": ("BF16", (2048, 64), 2),
                  f"{p}.mlp.up_proj.weight": ("BF16", (2048, 64), 2),
                  f"{p}.mlp.down_proj.weight": ("BF16", (64, 2048), 2),
                  f"{p}.input_layernorm.weight": ("BF16", (64,), 2),
                  f"{p}.post_attention_layernorm.weight": ("BF16", (64,), 2)})
    return t


# elements: embedding 262,144 + final norm 64 + per layer (q 4,096 + k 2,048 + v 2,048 + o 4,096 + MLP 3 × 131,072
# + norms 128) = 405,632 → 262,144 + 64 + 2 × 405,632 = 1,073,472 parameters, 2,146,944 bytes in bf16
PARAMS, BYTES = 1_073_472, 2_146_944


def sharded_repo(**kw):
    t = llama_tensors()
    names = sorted(t)
    first = {n: t[n] for n in names if n.startswith("model.embed")}
    rest = {n: t[n] for n in names if n not in first}
    index = {"metadata": {"total_size": BYTES},
             "weight_map": {**{n: "model-00001-of-00002.safetensors" for n in first},
                            **{n: "model-00002-of-00002.safetensors" for n in rest}}}
    return Repo(files={"config.json": json.dumps(TINY).encode(), "model.safetensors.index.json":
                       json.dumps(index).encode(), "model-00001-of-00002.safetensors": safetensors(first),
                       "model-00002-of-00002.safetensors": safetensors(rest)}, **kw)


def gguf_bytes(tmp_path) -> bytes:
    """A llama GGUF of 2 blocks whose tensor data (a 4,096 × 512 f16 embedding: 4,194,304 bytes) is far larger than
    its header (the first range asks for 1 MiB)."""
    import gguf
    p = tmp_path / "tiny.gguf"
    w = gguf.GGUFWriter(str(p), "llama")
    w.add_block_count(2)
    w.add_context_length(2048)
    w.add_embedding_length(512)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_file_type(1)
    w.add_tensor("token_embd.weight", np.zeros((4096, 512), np.float16))
    w.add_tensor("output_norm.weight", np.zeros(512, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return p.read_bytes()


@pytest.fixture
def hub(monkeypatch, tmp_path):
    h = Hub().start()
    monkeypatch.setenv("HF_ENDPOINT", h.url)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "5")
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "5")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    yield h
    h.stop()


def only_headers_read(h: Hub, repo: Repo, suffixes=(".safetensors", ".gguf")):
    for e in h.log:
        if e["method"] == "GET" and e["path"].endswith(suffixes):
            size = len(repo.files[e["path"].rsplit("/", 1)[1]])
            assert e["range"], e                    # never a whole weight file
            assert e["sent"] < size / 4, (e, size)


def one_line(capsys, argv, fragment):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err, err
    assert "Traceback" not in err


def test_a_sharded_repository_plans_with_exact_bytes_from_its_headers(hub, capsys):
    repo = hub.repos["org/tiny"] = sharded_repo()
    assert main(["plan", "--model", "org/tiny", "--accelerator", "h100", "--context", "1024", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["weights_bytes"] == BYTES and d["weights_bytes_source"] == "safetensors"
    assert d["kv_bytes_per_token"] == 2 * 2 * 2 * 16 * 2          # 2 layers × K,V × 2 heads × 16 × bf16
    m = load_model("org/tiny")
    assert m.params_total == PARAMS and m.hf_repo == "org/tiny"
    only_headers_read(hub, repo)
    assert any(e["path"].endswith("model-00002-of-00002.safetensors") for e in hub.log)


def test_a_revision_pins_a_commit(hub, capsys):
    hub.repos["org/tiny"] = sharded_repo(revisions=("main", "v1"))
    assert load_model("org/tiny@v1").checkpoint.loaded_bytes == BYTES
    assert any("/resolve/" in e["path"] for e in hub.log)
    one_line(capsys, ["plan", "--model", "org/tiny", "--revision", "nope", "--accelerator", "h100",
                      "--context", "1024"], "org/tiny has no revision 'nope'")


def test_a_missing_repository_is_one_line(hub, capsys):
    one_line(capsys, ["plan", "--model", "org/absent", "--accelerator", "h100", "--context", "1024"],
             "no Hub repository org/absent")


def test_a_gated_repository_needs_a_token(hub, capsys, monkeypatch):
    hub.repos["org/gated"] = sharded_repo(gated=True)
    one_line(capsys, ["plan", "--model", "org/gated", "--accelerator", "h100", "--context", "1024"],
             "org/gated is gated: accept its terms on the Hub and set HF_TOKEN")
    monkeypatch.setenv("HF_TOKEN", "good")
    assert load_model("org/gated").checkpoint.loaded_bytes == BYTES


def test_a_gguf_only_repository_is_read_by_range(hub, capsys, tmp_path):
    data = gguf_bytes(tmp_path)
    repo = hub.repos["org/tiny-gguf"] = Repo(files={"tiny-f16.gguf": data, "README.md": b"x"})
    assert main(["plan", "--model", "org/tiny-gguf", "--accelerator", "h100", "--context", "1024", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    # 4,096 × 512 f16 + 512 f32
    assert d["weights_bytes"] == 4096 * 512 * 2 + 512 * 4 and d["weights_bytes_source"] == "gguf"
    only_headers_read(hub, repo)
    # several GGUF files: the message names them and asks for one
    hub.repos["org/many"] = Repo(files={"a-Q4_K_M.gguf": data, "a-Q8_0.gguf": data})
    one_line(capsys, ["plan", "--model", "org/many", "--accelerator", "h100", "--context", "1024"],
             "org/many holds 2 GGUF files and no safetensors: name one, --model org/many/<file>.gguf")
    assert load_model("org/many/a-Q8_0.gguf").checkpoint.loaded_bytes == 4096 * 512 * 2 + 512 * 4


def test_a_repository_with_nothing_to_read(hub, capsys):
    hub.repos["org/empty"] = Repo(files={"README.md": b"hello"})
    one_line(capsys, ["plan", "--model", "org/empty", "--accelerator", "h100", "--context", "1024"],
             "org/empty has no config.json and no .gguf file")


def test_a_slow_hub_times_out_in_one_line(hub, capsys, monkeypatch):
    hub.repos["org/slow"] = sharded_repo(delay=3)
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "0.5")
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "0.5")
    one_line(capsys, ["plan", "--model", "org/slow", "--accelerator", "h100", "--context", "1024"],
             "org/slow")


def test_no_network_is_one_line(hub, capsys, monkeypatch):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                   # nothing listens there
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    one_line(capsys, ["plan", "--model", "org/tiny", "--accelerator", "h100", "--context", "1024"],
             f"cannot reach the Hub at http://127.0.0.1:{port}")


def test_offline_uses_the_cache(hub, capsys, monkeypatch):
    hub.repos["org/tiny"] = sharded_repo()
    load_model("org/tiny")                      # online: config.json enters the cache
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    n = len(hub.log)
    m = load_model("org/tiny")
    assert len(hub.log) == n                    # nothing asked of the Hub
    assert m.kv_bytes_per_token(2) == 256 and m.checkpoint is None
    one_line(capsys, ["plan", "--model", "org/other", "--accelerator", "h100", "--context", "1024"],
             "HF_HUB_OFFLINE is set and org/other is not in the Hub cache")


def test_a_quantized_repository_keeps_its_quantization(hub, capsys):
    """An FP8 checkpoint: its bytes come from the headers (F8 matrices, bf16 rest); its parameters from the config
    (a header's element counts are not parameters once quantized)."""
    cfg = {**TINY, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    t = {n: (("F8_E4M3", s, 1) if "proj" in n else (d, s, w)) for n, (d, s, w) in llama_tensors().items()}
    repo = hub.repos["org/fp8"] = Repo(files={"config.json": json.dumps(cfg).encode(),
                                              "model.safetensors": safetensors(t)})
    m = load_model("org/fp8")
    proj = 2 * (4096 + 2048 + 2048 + 4096 + 3 * 131072)          # 811,008 FP8 elements, 1 byte each
    assert m.checkpoint.loaded_bytes == proj + (PARAMS - proj) * 2
    assert m.native_dtype == "fp8" and m.params_total == PARAMS
    only_headers_read(hub, repo)


def test_a_name_that_is_not_a_repository_id_is_not_asked_of_the_hub(hub, capsys):
    one_line(capsys, ["plan", "--model", "missing/config.json", "--accelerator", "h100", "--context", "1024"],
             "no config file at 'missing/config.json'")
    assert hub.log == []
    with pytest.raises(InputError, match="no Hub repository org/x"):
        load_model("org/x")
