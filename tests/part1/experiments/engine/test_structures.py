"""E1 for every cache structure: tiny GGUFs of each architecture opened in the real llama.cpp (about a second in all),
and llama.cpp's allocation rules checked against hand-worked examples from its source.

Expected values are worked by hand from the tiny models' shapes and the rules as the vendored llama.cpp states them
(src/llama-context.cpp, llama-kv-cache-iswa.cpp, llama-memory-recurrent.cpp, llama-model.cpp) — never copied from
the code's output. Every rule has a test that fails when the rule is removed.
"""
import json

import pytest

from part1_capacity.experiments.engine import structures, tiny_models
from part1_capacity.experiments.engine.gguf_profile import calculator_profile
from part1_capacity.calculator.engines import llama_cpp as rules
from tests.support.in_process import capacity

MIB = 2 ** 20
CONTEXTS, N_SEQ = (1000, 4096), (1, 3)


@pytest.fixture(scope="module")
def ggufs(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    return {s.architecture + "-" + s.selector: (s, tiny_models.write(s, d / f"{s.architecture}-{s.selector}.gguf"))
            for s in tiny_models.specs()}


# --- the engine, every structure --------------------------------------------------------------------------------
def test_every_structure_matches_llama_cpp_buffer_by_buffer(ggufs):
    seen = set()
    for spec, path in ggufs.values():
        row = structures.check(path, spec.selector, CONTEXTS, N_SEQ)
        assert row["match"], (spec.architecture, [c for c in row["details"] if not c["match"]])
        assert row["architecture"] == spec.architecture
        seen.add(row["structure"])
        for key in ("contexts", "n_seq", "reported", "predicted"):
            assert key in row
    assert seen == {"gqa", "mqa", "mla", "sliding_window", "ssm_hybrid"}


def test_tiny_models_have_the_layers_written(ggufs):
    """The calculator's reading of each GGUF, by hand from tiny_models: layer kinds per architecture."""
    by = {k: calculator_profile(p) for k, (_, p) in ggufs.items()}
    assert (by["gemma3-swa"].n_full_layers, by["gemma3-swa"].n_window_layers, by["gemma3-swa"].window) == (1, 5, 128)
    assert (by["gemma2-swa"].n_full_layers, by["gemma2-swa"].n_window_layers) == (2, 2)
    assert (by["gpt-oss-swa"].n_full_layers, by["gpt-oss-swa"].n_window_layers) == (1, 1)
    assert (by["deepseek2-mla"].kv_lora_rank, by["deepseek2-mla"].qk_rope_head_dim) == (128, 32)
    nem = by["nemotron_h-ssm"]
    assert (nem.n_full_layers, nem.ssm.kind, nem.ssm.n_layers) == (1, "mamba2", 2)
    # Mamba-2 state of one layer: conv 3 × (1024 + 2·4·128) = 6,144; SSM 16 heads × 64 × 128 = 131,072
    assert (nem.ssm.conv_elements, nem.ssm.state_elements) == (6144, 6144 + 131072)
    q = by["qwen3next-linear"]
    # gated delta-net: conv 3 × (2·2·64 + 4·64) = 1,536; state 4 value heads × 64 × 64 = 16,384
    assert (q.n_full_layers, q.ssm.n_layers, q.ssm.conv_elements, q.ssm.state_elements) == (1, 3, 1536, 17920)


# --- the rules, by hand --------------------------------------------------------------------------------------------
def test_context_padding_and_streams():
    # llama-context.cpp: 1,000 → 1,024 cells; 4,096 over 3 sequences → 1,365 → padded to 1,536 per stream.
    c = rules.context(1000, 1)
    assert (c.n_ctx, c.n_ctx_seq, c.n_stream, c.n_ubatch) == (1024, 1024, 1, 512)
    c = rules.context(4096, 3)
    assert (c.n_ctx_seq, c.n_ctx, c.n_stream) == (1536, 4608, 3)
    assert rules.context(256, 1).n_ubatch == 256     # n_batch = min(n_ctx, 2048), n_ubatch = min(n_batch, 512)


def test_sliding_window_cache_is_window_plus_ubatch_padded_to_256():
    # llama-kv-cache-iswa.cpp: min(16,384, 128 + 512) = 640 → 768 cells (the figure public gemma runs show).
    assert rules.swa_cells(rules.context(16384, 1), 128) == 768
    assert rules.swa_cells(rules.context(1000, 4), 128) == 256          # capped by the 256-cell stream
    assert rules.swa_cells(rules.context(16384, 1), 4096) == 4608       # 4,096 + 512
    assert rules.swa_cells(rules.context(16384, 1), 128, swa_full=True) == 16384


def test_recurrent_state_is_fp32_one_row_per_sequence():
    # llama-model.cpp create_memory: GGML_TYPE_F32 r and s, max(1, n_seq_max) rows.
    assert rules.RECURRENT_BYTES == 4 and rules.recurrent_cells(4) == 4 and rules.recurrent_cells(0) == 1


def test_tiny_nemotron_buffers_by_hand(ggufs):
    """nemotron_h, 4,096 tokens over 3 sequences: streams of 1,536 cells; 1 attention layer of 2 KV heads × 64;
    2 Mamba-2 layers, 3 rows of fp32 state."""
    p = calculator_profile(ggufs["nemotron_h-ssm"][1])
    c = rules.components(p, 4096, 3, kv_bytes=2)
    assert c["K"] == c["V"] == 1536 * 3 * 1 * 2 * 64 * 2
    assert c["R"] == 3 * 2 * 6144 * 4 and c["S"] == 3 * 2 * 131072 * 4
    law = rules.law_components(p, 4096, 3, 2, 2)                       # the law: fp16 state, no padding
    assert law["S"] == 3 * 2 * 131072 * 2 and law["K"] == 4096 * 2 * 64 * 2


@pytest.mark.parametrize("broken, arch", [
    ("swa", "gemma3-swa"), ("fp16_state", "nemotron_h-ssm"), ("no_padding", "llama-gqa"), ("mla_v", "deepseek2-mla"),
])
def test_removing_a_rule_breaks_the_match(ggufs, monkeypatch, broken, arch):
    if broken == "swa":        # the textbook window: min(T, W) cells
        monkeypatch.setattr(rules, "swa_cells", lambda ctx, w, swa_full=False: min(ctx.n_ctx_seq, w))
    elif broken == "fp16_state":
        monkeypatch.setattr(rules, "RECURRENT_BYTES", 2)
    elif broken == "no_padding":
        monkeypatch.setattr(rules, "CELL_PAD", 1)
    else:                      # MLA with a V cache as large as K
        real = rules.kv_components

        def with_v(profile, *a):
            out = real(profile, *a)
            out["V"] = out["K"]
            return out
        monkeypatch.setattr(rules, "kv_components", with_v)
    spec, path = ggufs[arch]
    assert not structures.check(path, spec.selector, (1000, 4096), (1,))["match"]


# --- the command -----------------------------------------------------------------------------------------------
def test_capacity_e1_structure_json_keys():
    out = capacity("e1", "--structure", "mla", "--json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    (row,) = r["structures"]
    assert row["architecture"] == "deepseek2" and row["match"] is True
    assert len(row["contexts"]) >= 3 and len(row["n_seq"]) >= 2
    assert set(row["reported"]) == set(row["predicted"]) == {"K", "V"}
    assert all(v == 0 for v in row["reported"]["V"])                  # MLA: no V cache


def test_bad_structure_and_unsupported_architecture_exit_2(tmp_path):
    import gguf

    path = tmp_path / "rwkv.gguf"
    w = gguf.GGUFWriter(str(path), "rwkv6")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    for args, field in ((("e1", "--structure", "sliding"), "--structure"), (("e1", "--gguf", str(path)), "--gguf")):
        out = capacity(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert field in out.stderr and "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_capacity_e1_structure_json_is_strict(monkeypatch):
    # a non-finite figure becomes the one-line error naming it, never `NaN` in the printed JSON
    real = structures.run

    def with_nan(*a, **k):
        r = real(*a, **k)
        r["structures"][0]["predicted"]["K"][0] = float("nan")
        return r
    monkeypatch.setattr(structures, "run", with_nan)
    out = capacity("e1", "--structure", "mqa", "--json")
    assert out.returncode == 2 and "NaN" not in out.stdout, out.stdout[:200]
    last = out.stderr.strip().splitlines()[-1]           # the lines before it are the progress bar
    assert last.startswith("capacity: error: output: 'structures[0].predicted.K[0]'"), out.stderr[-300:]
    assert "Traceback" not in out.stderr


def test_every_structure_reports_its_other_buffers_beside_the_rules(ggufs):
    # model (get_mapping_range) and output (output_reserve) buffers exact to the log's two decimals; the compute
    # buffer (the largest live set of one micro-batch's graph) within 10 %
    for spec, path in ggufs.values():
        row = structures.check(path, spec.selector, CONTEXTS, N_SEQ)
        for case in row["details"]:
            b = case["buffers"]
            assert b["model"]["within"] and b["output"]["within"], (spec.architecture, case["context"], b)
            assert b["compute"]["reported"] and b["compute"]["within"], (spec.architecture, case["context"], b)
        assert row["buffers_match"]
