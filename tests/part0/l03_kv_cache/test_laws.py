"""The lesson-03 cache laws (part0_foundations/l03_kv_cache/laws.py) on small numbers worked by hand, every argument a
different value so a swapped or dropped factor shows. The lesson's own tests measure a model against the laws; these
pin each formula as its docstring states it."""
import numpy as np

from part0_foundations.l03_kv_cache import laws


def test_attention_laws():
    # K and V: 2 × 3 layers × 5 K/V heads × 7 dims × 2 B = 420 B per token; 11 tokens: 4,620 B
    assert laws.kv_bytes_per_token(3, 5, 7, 2) == 420 and laws.kv_bytes(11, 3, 5, 7, 2) == 4620
    # MLA: 3 layers × (5 latent + 7 rope) × 2 B = 72 B per token, no factor 2; 11 tokens: 792 B
    assert laws.mla_bytes_per_token(3, 5, 7, 2) == 72 and laws.mla_bytes(11, 3, 5, 7, 2) == 792


def test_sliding_window_laws():
    assert laws.window_tokens(11, 7) == 7 and laws.window_tokens(5, 7) == 5 and laws.window_tokens(5.5, 7) == 5.5
    assert laws.window_tokens(np.array([5, 11]), 7).tolist() == [5, 7]
    # per layer and token 2 × 5 heads × 13 dims × 2 B = 260 B; 2 full layers × 11 + 3 window layers × min(11, 7) = 43
    assert laws.sliding_window_bytes(11, 2, 3, 7, 5, 13, 2) == 260 * 43
    # past the window only the 2 full layers grow: 2 × 2 × 5 × 13 × 2 = 520 B per token
    assert laws.sliding_window_growth_bytes_per_token(2, 5, 13, 2) == 520


def test_state_laws():
    assert laws.ssm_state_bytes(3, 1000, 4) == 12000
    # 11 tokens × 2 × 2 layers × 5 × 13 × 2 B = 5,720 + 3 layers × 1,000 × 4 B = 17,720
    assert laws.ssm_hybrid_bytes(11, 2, 5, 13, 2, 3, 1000, 4) == 17720
    assert laws.conv_state_elements(4, 100) == 300                        # (4 − 1) × 100
    assert laws.mamba1_conv_state_elements(100, 4) == 300
    assert laws.mamba1_state_elements(100, 16, 4) == 300 + 100 * 16
    # Mamba-2, 8 heads × 64, state 128, conv 4, 2 groups: conv 3 × (512 + 2 × 2 × 128) = 3,072; SSM 8 × 64 × 128
    assert laws.mamba2_conv_state_elements(8, 64, 128, 4, 2) == 3072
    assert laws.mamba2_state_elements(8, 64, 128, 4, 2) == 3072 + 65536
    # Gated DeltaNet, 2 key heads × 8, 4 value heads × 16, conv 4: conv 3 × (2 × 2 × 8 + 4 × 16) = 288; 4 × 8 × 16 = 512
    assert laws.gated_deltanet_conv_state_elements(2, 4, 8, 16, 4) == 288
    assert laws.gated_deltanet_state_elements(2, 4, 8, 16, 4) == 288 + 512


def test_mla_with_an_indexer_key():
    # 3 layers × (5 latent + 7 rope + 11 indexer) × 2 B = 138 B per token; 13 tokens: 1,794 B; no indexer by default
    assert laws.mla_bytes_per_token(3, 5, 7, 2, 11) == 138 and laws.mla_bytes(13, 3, 5, 7, 2, 11) == 1794
    assert laws.mla_bytes(13, 3, 5, 7, 2) == 13 * 72


def test_chunked_attention_laws():
    # the tokens of the current chunk of 7: ((T − 1) mod 7) + 1
    assert [laws.chunk_tokens(t, 7) for t in (1, 6, 7, 8, 15, 20)] == [1, 6, 7, 1, 1, 6]
    # room for a whole chunk once T reaches it: min(T, 7)
    assert laws.chunk_room_tokens(5, 7) == 5 and laws.chunk_room_tokens(11, 7) == 7
    assert laws.chunk_room_tokens(np.array([5, 11]), 7).tolist() == [5, 7]
    # per layer and token 2 × 5 heads × 13 dims × 2 B = 260 B; 2 global layers × 11 + 3 chunked layers × min(11, 7)
    assert laws.chunked_attention_bytes(11, 2, 3, 7, 5, 13, 2) == 260 * (22 + 21)
    assert laws.chunked_attention_bytes(np.array([5, 11]), 2, 3, 7, 5, 13, 2).tolist() == [260 * 25, 260 * 43]


def test_lightning_attention_state():
    # 3 heads of a 5 × 5 matrix Σ kᵀv each
    assert laws.lightning_state_elements(3, 5) == 75
