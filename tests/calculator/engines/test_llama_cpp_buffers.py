"""llama.cpp's other start-up buffers (engines/llama_cpp.py): model, output and compute, worked by hand from
the vendored llama.cpp source and held against published context logs (each point with its source in
part1_capacity/experiments/engine/data/llama_cpp_buffer_logs.json). No llama.cpp needed: E1's run of the same
rules on this machine is in test_engine_structures.py."""
import pytest

from part1_capacity.calculator.engines import llama_cpp as rules
from part1_capacity.experiments.engine import buffers, tiny_models

MIB = 2 ** 20


@pytest.mark.parametrize("point", buffers.published_points(), ids=lambda p: p["id"])
def test_published_buffers_reproduce(point):
    assert point["source"] and point["shape_source"]
    pred = buffers.predict_published(point)
    logged = point["logged"]
    if "output_mib" in logged:                       # exact: the log rounds to two decimals
        assert round(pred["output"] / MIB, 2) == logged["output_mib"]
    assert abs(pred["compute"] / MIB / logged["compute_mib"] - 1) <= buffers.COMPUTE_TOLERANCE


def test_output_buffer_by_hand():
    # llama-context.cpp output_reserve(n_seq_max): n_vocab × max(n_outputs, n_seq_max) float32 (+ embeddings)
    assert rules.output_buffer_bytes(32000, 1) == 128000
    assert rules.output_buffer_bytes(512, 4) == 512 * 4 * 4
    assert rules.output_buffer_bytes(128256, 1, n_embd=4096, embeddings=True) == (128256 + 4096) * 4


def test_model_buffer_is_the_file_range_of_the_tensors():
    # get_mapping_range: from the first tensor's offset to the end of the last; every tensor but the last is
    # followed by padding to 32 bytes (gguf.cpp GGUF_DEFAULT_ALIGNMENT)
    assert rules.model_buffer_bytes([100, 64, 10]) == 128 + 64 + 10
    assert rules.model_buffer_bytes([]) == 0


def test_model_buffer_of_a_tiny_gguf_matches_its_offsets(tmp_path):
    # a second implementation: the reader's own data offsets, last end − first start
    from gguf import GGUFReader

    spec = tiny_models.specs_for("gqa")[0]
    path = tiny_models.write(spec, tmp_path / "t.gguf")
    _, nbytes = buffers.gguf_shapes(path)
    ts = sorted(GGUFReader(str(path)).tensors, key=lambda t: t.data_offset)
    assert rules.model_buffer_bytes(nbytes) == ts[-1].data_offset + ts[-1].n_bytes - ts[0].data_offset


def test_compute_buffer_by_hand():
    # TinyLlama, 4,096 cells, micro-batch 512, no flash attention: scores 4096 × 512 × 32 heads × 4 B = 256 MiB,
    # the float32 mask 4096 × 512 × 4 B = 8 MiB, four 512 × 2048 float32 activations = 16 MiB → 280 MiB
    s = rules.GraphShape(n_vocab=32000, n_embd=2048, n_head=32, q_width=2048, n_ff=5632)
    c = rules.compute_buffer_bytes(s, 4096, 0, 512, flash_attn=False)
    assert c["attention"] == c["total"] == (256 + 8 + 16) * MIB
    # flash attention: no scores, an f16 mask (4 MiB); the logits stage wins: 512 × 32000 × 4 + 512 × 2048 × 4
    c = rules.compute_buffer_bytes(s, 4096, 0, 512, flash_attn=True)
    assert c["total"] == c["output"] == 512 * 32000 * 4 + 512 * 2048 * 4


def test_a_wrong_compute_rule_misses_the_published_points():
    # were the soft-max not done in place (two score tensors), TinyLlama's 280.01 MiB would be missed by far
    p = next(x for x in buffers.published_points() if x["id"] == "tinyllama-cpu-4096")
    s, c = rules.GraphShape(**p["shape"]), p["context"]
    right = rules.compute_buffer_bytes(s, c["n_ctx"], 0, c["n_ubatch"], flash_attn=False)
    wrong = right["attention"] + c["n_ctx"] * c["n_ubatch"] * s.n_head * 4
    assert abs(wrong / MIB / p["logged"]["compute_mib"] - 1) > buffers.COMPUTE_TOLERANCE


def test_log_lines_parse():
    lines = ["load_tensors:   CPU_Mapped model buffer size =    63.84 MiB",
             "llama_context:        CPU  output buffer size =     0.49 MiB",
             "llama_context:        CPU compute buffer size =   280.01 MiB"]
    got = buffers.parse(lines)
    assert got["model"] == {"CPU_Mapped": round(63.84 * MIB)} and got["output"] == round(0.49 * MIB)
    assert got["compute"] == {"CPU": round(280.01 * MIB)}
    assert buffers.flash_attention_on(["llama_context: flash_attn            = auto"])
    assert not buffers.flash_attention_on(["llama_context: flash_attn    = 0"])


def test_recurrent_width_by_hand():
    # Mamba-2 (nemotron_h tiny): in_proj 2·1024 + 2·4·128 + 16 = 3,088, conv 1,024 + 2·4·128 = 2,048, d_inner 1,024
    assert rules.recurrent_width(3088, 2048, 1024) == 3088 + 4096 + 2048
    # Mamba-1 adds x_db (dt_rank + 2·d_state) and dt (d_inner); the delta-net repeats q and k to 4 value heads
    assert rules.recurrent_width(1024, 512, 512, x_proj=48) == 1024 + 1024 + 1024 + 48 + 512
    assert rules.recurrent_width(776, 512, 256, d_state=64, n_group=2, n_v_heads=4, delta_net=True) == \
        776 + 1024 + 512 + 2 * 64 * 4
    s = rules.GraphShape(n_vocab=512, n_embd=256, n_head=4, q_width=256, n_ff=512, recurrent_width=9232)
    c = rules.compute_buffer_bytes(s, 1024, 0, 512, flash_attn=True)
    assert c["total"] == c["recurrent"] == 1024 * 512 * 2 + 512 * 9232 * 4
