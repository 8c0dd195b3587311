"""llama.cpp's allocation rules (part1_capacity/calculator/engines/llama_cpp.py) at their edges, worked by hand on
small stand-in shapes: the sliding-window cells of a unified and a split context, every note, the defaults of each
function, the output buffer and the compute-buffer stages (llama-context.cpp, llama-kv-cache-iswa.cpp,
llama-graph.cpp: the files the module names)."""
from types import SimpleNamespace as NS

from part1_capacity.calculator.engines import llama_cpp as lc


def _profile(**fields):
    """A stand-in profile: the fields given, and the per-layer-type K/V widths a profile derives when it states none
    (values as wide as keys, window layers with the full layers' heads), no indexer keys."""
    fields.setdefault("index_head_dim", 0)
    if "head_dim" in fields:
        fields.setdefault("kv_v_dim", fields["head_dim"])
        fields.setdefault("window_kv", (fields.get("n_kv_heads"), fields["head_dim"], fields["head_dim"]))
    return NS(**fields)


SWA = _profile(is_mla=False, n_full_layers=2, n_window_layers=2, window=100, n_kv_heads=1, head_dim=64, ssm=None)
PADDED = "context padded: 1,000 tokens over 1 sequence(s) → 1,024 cells per sequence (multiples of 256; llama-context.cpp)"
RECURRENT = "recurrent state kept in fp32, one row per sequence ({}) (llama-model.cpp create_memory, llama-memory-recurrent.cpp)"


def test_sliding_window_cells_per_stream():
    # unified 8,192 cells, 2 sequences: one stream holds both windows: pad(min(8,192, 2 × 1,000 + 512), 256) = 2,560
    assert lc.swa_cells(lc.context(8192, 2, unified=True), 1000) == 2560
    # split: 2 streams of 4,096 cells, each one window: pad(min(4,096, 1,000 + 512), 256) = 1,536
    assert lc.swa_cells(lc.context(8192, 2), 1000) == 1536
    assert lc.swa_cells(lc.context(8192, 2), 1000, swa_full=True) == 4096


def test_notes_for_each_rule():
    # 1,000 tokens → 1,024 cells; window: pad(min(1,024, 100 + 512), 256) = 768 cells
    assert lc.notes(SWA, 1000, 1) == [PADDED, "sliding-window layers hold 768 cells per sequence, not min(T, 100): "
                                      "window + micro-batch 512 rounded up to 256 (llama-kv-cache-iswa.cpp)"]
    assert lc.notes(SWA, 1000, 1, swa_full=True) == [PADDED, "--swa-full: sliding-window layers hold the whole context"]
    # 2,048 tokens over 2 sequences: 1,024 cells each, nothing padded; a plain model: no note at all
    plain = _profile(is_mla=False, n_window_layers=0, ssm=None)
    assert lc.notes(plain, 2048, 2) == []
    mla = _profile(is_mla=True, n_window_layers=0, ssm=None)
    assert lc.notes(mla, 1024, 1) == ["MLA: the latent and RoPE key are cached as K, no V (llama-kv-cache.cpp)"]
    hybrid = _profile(is_mla=False, n_window_layers=0, ssm=NS())
    assert lc.notes(hybrid, 3072, 3) == [RECURRENT.format(3)]


def test_mla_caches_no_v_and_the_component_defaults():
    mla = _profile(is_mla=True, n_full_layers=2, kv_lora_rank=32, qk_rope_head_dim=8, n_window_layers=0)
    # 100 tokens × 2 layers × (32 + 8) × 2 B = 16,000 B, all K
    assert lc.kv_components(mla, 100, 0, 2) == {"K": 16000, "V": 0}
    # defaults: 1 sequence, 2-byte K/V: 1,024 cells × 2 layers × 1 head × 64 × 2 B = 262,144 B each of K and V;
    # window layers pad(min(1,024, 100 + 512), 256) = 768 cells: 196,608 B each
    plain = _profile(is_mla=False, n_full_layers=2, n_window_layers=2, window=100, n_kv_heads=1, head_dim=64, ssm=None)
    assert lc.components(plain, 1024) == {"K": 262144.0, "V": 262144.0, "K_swa": 196608.0, "V_swa": 196608.0}


def test_output_buffer():
    # float32 logits of 1,000 entries for one row by default; embeddings only when asked for
    assert lc.output_buffer_bytes(1000) == 4000
    assert lc.output_buffer_bytes(1000, 1, n_embd=64) == 4000
    assert lc.output_buffer_bytes(1000, embeddings=True) == 4000                  # n_embd defaults to 0
    assert lc.output_buffer_bytes(1000, 3, n_embd=64, embeddings=True) == (1000 + 64) * 3 * 4


def test_recurrent_width_defaults():
    # in_proj 10 + 2 × conv 20 + 2 × d_inner 30 = 110; the delta-net adds 2 × d_state × value heads only when its
    # key heads (n_group) are fewer than, and not equal to, the value heads
    assert lc.recurrent_width(10, 20, 30) == 110
    assert lc.recurrent_width(10, 20, 30, d_state=8, n_group=2, n_v_heads=4) == 110            # not a delta-net
    assert lc.recurrent_width(10, 20, 30, d_state=8, n_group=2, n_v_heads=4, delta_net=True) == 110 + 64
    assert lc.recurrent_width(10, 20, 30, n_group=2, n_v_heads=4, delta_net=True) == 110          # d_state 0
    assert lc.recurrent_width(10, 20, 30, d_state=8, n_v_heads=4, delta_net=True) == 110          # no key heads given
    assert lc.recurrent_width(10, 20, 30, d_state=8, n_group=2, delta_net=True) == 110            # value heads 0


def test_compute_buffer_stages():
    shape = lc.GraphShape(n_vocab=1000, n_embd=64, n_head=4, q_width=64, n_ff=128, post_norms=True)
    # 256 cache cells, 512-token micro-batch, flash attention (float16 mask): masks 256 × 512 × 2 = 262,144 B
    # output, 1 row: 512 × 64 × 4 + 1 × 1,000 × 4 = 135,072; attention 262,144 + 4 × 512 × 64 × 4 = 786,432;
    # feed-forward with gemma's post-norms (5 activations): 262,144 + 512 × (2 × 128 + 5 × 64) × 4 = 1,441,792
    b = lc.compute_buffer_bytes(shape, 256, 0, n_ubatch=512, n_outputs=1, flash_attn=True)
    assert b == {"output": 135072.0, "attention": 786432.0, "feed_forward": 1441792.0, "recurrent": 262144.0,
                 "total": 1441792.0}
    # defaults: no window cache, 512 tokens, every token an output (512 × 1,000 × 4 more), flash attention
    d = lc.compute_buffer_bytes(shape, 256)
    assert d["output"] == 512 * 64 * 4 + 512 * 1000 * 4 == d["total"] and d["attention"] == 786432.0
    # without flash attention: float32 mask 524,288 + scores 256 × 512 × 4 heads × 4 = 2,097,152 + 524,288
    assert lc.compute_buffer_bytes(shape, 256, flash_attn=False)["attention"] == 524288 + 2097152 + 524288
    # without post-norms: 4 activations
    plain = lc.GraphShape(n_vocab=1000, n_embd=64, n_head=4, q_width=64, n_ff=128)
    assert lc.compute_buffer_bytes(plain, 256)["feed_forward"] == 262144 + 512 * (256 + 256) * 4


def test_context_defaults_and_the_request_kept():
    # one sequence, n_batch 2,048, n_ubatch 512 (common defaults): 1,000 → 1,024 cells in one stream
    c = lc.context(1000)
    assert (c.n_ctx_requested, c.n_seq, c.n_ctx, c.n_ctx_seq, c.n_stream, c.n_ubatch) == (1000, 1, 1024, 1024, 1, 512)


def test_padding_note_of_a_split_context_counts_whole_cells():
    # 4,096 over 3 sequences: ⌈1,365.3 / 256⌉ × 256 = 1,536 cells each
    plain = _profile(is_mla=False, n_window_layers=0, ssm=None)
    assert lc.notes(plain, 4096, 3) == ["context padded: 4,096 tokens over 3 sequence(s) → 1,536 cells per sequence "
                                        "(multiples of 256; llama-context.cpp)"]


def test_components_pass_the_batch_sizes_on():
    # n_batch 256 clamps the micro-batch to 256 (llama-context.cpp n_ubatch = min(n_batch, n_ubatch)); the window
    # cache is then pad(min(16,384, 100 + 256), 256) = 512 cells; 2 window layers × 1 head × 64 × 2 B = 256 B a cell
    assert lc.components(SWA, 16384, n_batch=256)["K_swa"] == 512 * 256
    assert lc.components(SWA, 16384, n_ubatch=256)["K_swa"] == 512 * 256
    assert lc.components(SWA, 16384)["K_swa"] == 768 * 256             # 100 + 512 → 768 with the defaults


def test_recurrent_rows_with_snapshots_per_sequence():
    # llama-memory-recurrent.cpp: n_rows = mem_size × (1 + n_rs_seq), mem_size = max(1, n_seq_max)
    assert lc.recurrent_cells(2, 1) == 4 and lc.recurrent_cells(0, 2) == 3
    hybrid = _profile(is_mla=False, n_full_layers=0, n_window_layers=0, n_kv_heads=1, head_dim=64,
                ssm=NS(n_layers=2, conv_elements=10, state_elements=110))
    # 2 rows × 2 layers × 10 conv values × 4 B = 160 B; the SSM state 2 × 2 × 100 × 4 B = 1,600 B
    c = lc.components(hybrid, 256, n_seq=1, n_rs_seq=1)
    assert (c["R"], c["S"]) == (160, 1600)
