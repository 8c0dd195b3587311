"""Lesson 03: every structure's measured cache equals its law to the byte; the laws agree with published figures.

Expected sizes come from laws.py (formulas) or from published per-token figures in the model cards/configs (cited in
/shared/reference/models.md and in part1's profile data); nothing is copied from a run of the model.
"""
import subprocess
import sys

import pytest
import torch

from part0_foundations.l03_kv_cache import laws
from part0_foundations.l03_kv_cache.gpt import GPT, GPTConfig
from part0_foundations.l03_kv_cache.structures import STRUCTURES, law_bytes, law_growth_per_token

T_VALUES = (16, 64, 256, 1024)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
KiB = 1024


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _measure(name, dtype, t_values=T_VALUES):
    """Cache bytes (whole cache, and per layer) after a prefill of T tokens, for each T."""
    torch.manual_seed(0)
    model = GPT(STRUCTURES[name]).to(dtype).eval()
    out = {}
    for T in t_values:
        cache = model.new_cache()
        with torch.no_grad():
            model(torch.randint(0, model.config.vocab_size, (1, T)), cache)
        for t in cache.tensors():
            assert t.dtype == dtype
        out[T] = (cache.nbytes(), [sum(t.element_size() * t.numel() for t in layer.tensors()) for layer in cache.layers])
    return out


@pytest.fixture(scope="module")
def measured():
    torch.set_num_threads(1)
    return {(name, dt): _measure(name, DTYPES[dt]) for name in STRUCTURES for dt in DTYPES}


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", STRUCTURES)
def test_measured_bytes_equal_the_law(measured, name, dt):
    bpe = {"fp32": 4, "bf16": 2}[dt]
    for T, (got, _) in measured[name, dt].items():
        assert got == law_bytes(STRUCTURES[name], T, bpe), (name, dt, T)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", STRUCTURES)
def test_slope_equals_bytes_per_token(measured, name, dt):
    bpe = {"fp32": 4, "bf16": 2}[dt]
    m, cfg = measured[name, dt], STRUCTURES[name]
    # 256 → 1024: past the window W = 128, so a window model grows by its full layers only.
    assert (m[1024][0] - m[256][0]) / (1024 - 256) == law_growth_per_token(cfg, bpe)
    assert (m[64][0] - m[16][0]) / (64 - 16) == law_growth_per_token(cfg, bpe, beyond_window=False)


def test_window_layers_stop_at_W_and_full_layers_grow(measured):
    cfg = STRUCTURES["sliding window"]
    W, kinds = cfg.window, cfg.layer_types
    assert 64 < W < 256
    per_layer = {T: layers for T, (_, layers) in measured["sliding window", "fp32"].items()}
    row = 2 * cfg.n_kv_heads * cfg.head_dim * 4  # K and V of one token in one layer, fp32
    for i, kind in enumerate(kinds):
        if kind == "window":
            assert per_layer[64][i] == 64 * row
            assert per_layer[256][i] == per_layer[1024][i] == W * row
        else:
            assert per_layer[1024][i] == 1024 * row


def test_ssm_state_does_not_grow(measured):
    cfg = STRUCTURES["SSM hybrid"]
    per_layer = {T: layers for T, (_, layers) in measured["SSM hybrid", "bf16"].items()}
    state = 2 * ((cfg.d_conv - 1) * cfg.d_inner + cfg.d_inner * cfg.d_state)  # conv window + h, bf16
    row = 2 * cfg.n_kv_heads * cfg.head_dim * 2  # K and V of one token in one attention layer, bf16
    for i, kind in enumerate(cfg.layer_types):
        sizes = [per_layer[T][i] for T in T_VALUES]
        assert sizes == ([state] * len(T_VALUES) if kind == "ssm" else [T * row for T in T_VALUES]), (i, kind)


def test_mla_caches_no_k_or_v():
    cfg = STRUCTURES["MLA"]
    model = GPT(cfg).eval()
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.randint(0, 64, (1, 9)), cache)
    for layer in cache.layers:
        assert [tuple(t.shape) for t in layer.tensors()] == [(1, 9, cfg.kv_lora_rank), (1, 9, cfg.qk_rope_head_dim)]
    # Per token per layer: 32 + 8 = 40 elements, against 2 × 4 heads × 16 = 128 for the K and V it rebuilds.
    assert law_bytes(cfg, 1, 4) == cfg.n_layer * 40 * 4


@pytest.mark.parametrize("name", STRUCTURES)
def test_generate_with_cache_equals_without(name):
    torch.manual_seed(3)
    model = GPT(STRUCTURES[name]).eval()
    prompt = torch.randint(0, 64, (2, 5))
    a, la = model.generate(prompt, 12, use_cache=True, return_logits=True)
    b, lb = model.generate(prompt, 12, use_cache=False, return_logits=True)
    assert torch.equal(a, b)
    torch.testing.assert_close(la, lb, atol=1e-5, rtol=0)


def test_window_model_differs_from_full_attention_past_W():
    # The window really limits attention: past W tokens, the output differs from the same weights without window.
    cfg = GPTConfig(vocab_size=32, n_layer=1, d_model=32, n_head=2, n_kv_heads=2, head_dim=16, d_ff=64,
                    layer_types=("window",), window=4)
    torch.manual_seed(0)
    win = GPT(cfg).eval()
    full = GPT(GPTConfig(**{**vars(cfg), "layer_types": ("full",)})).eval()
    full.load_state_dict(win.state_dict())
    idx = torch.randint(0, 32, (1, 10))
    with torch.no_grad():
        a, b = win(idx), full(idx)
    torch.testing.assert_close(a[:, :4], b[:, :4])  # within the window: identical
    assert not torch.allclose(a[:, 4:], b[:, 4:])


def test_trained_checkpoint_generates_the_same_with_and_without_cache():
    from part0_foundations.l03_kv_cache.train import CHECKPOINT, load_checkpoint

    assert CHECKPOINT.stat().st_size < 4e6
    model, tok = load_checkpoint()
    prompt = torch.tensor([tok.encode("The KV cache")])
    a, la = model.generate(prompt, 40, use_cache=True, return_logits=True)
    b, lb = model.generate(prompt, 40, use_cache=False, return_logits=True)
    assert torch.equal(a, b)
    # fp32: a batched prefill and one-row decode steps round differently (different GEMM shapes). The trained model's
    # logits reach ~20, so the agreement is 1e-5 relative to the logit scale (the untrained models above: 1e-5 abs).
    scale = max(1.0, lb.abs().max().item())
    assert (la - lb).abs().max().item() <= 1e-5 * scale
    with pytest.raises(ValueError, match="prompt"):
        tok.encode("héllo ☃")


# --- the laws themselves ---------------------------------------------------------------------------------------------
def test_laws_import_without_torch():
    code = "import sys, part0_foundations.l03_kv_cache.laws; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("kwargs, published", [
    # Published bf16 KV bytes per token (model configs; see part1 profiles / models.md for sources).
    (dict(n_layers=32, n_kv_heads=8, head_dim=128), 128 * KiB),   # Llama-3.1-8B
    (dict(n_layers=80, n_kv_heads=8, head_dim=128), 320 * KiB),   # Llama-3.1-70B
    (dict(n_layers=40, n_kv_heads=8, head_dim=128), 160 * KiB),   # Mistral-NeMo-12B
    (dict(n_layers=12, n_kv_heads=12, head_dim=64), 36 * KiB),    # GPT-2 124M
])
def test_attention_law_matches_published_figures(kwargs, published):
    assert laws.kv_bytes_per_token(bytes_per_element=2, **kwargs) == published


def test_mla_law_matches_deepseek_v3():
    # DeepSeek-V3: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64 → 70,272 B per token in bf16, no factor 2.
    assert laws.mla_bytes_per_token(61, 512, 64, 2) == 70_272


def test_window_law_gemma2_9b():
    # Gemma-2-9B: 21 window + 21 full layers, 8 KV heads × 256, W = 4096: grows 168 KiB/token past W, 336 before.
    assert laws.sliding_window_growth_bytes_per_token(21, 8, 256, 2) == 168 * KiB
    at = lambda T: laws.sliding_window_bytes(T, 21, 21, 4096, 8, 256, 2)  # noqa: E731
    assert at(4096) == 4096 * 336 * KiB
    assert at(8192) - at(4096) == 4096 * 168 * KiB


def test_ssm_law_is_constant_in_T():
    elems = laws.mamba1_state_elements(d_inner=8192, d_state=16, d_conv=4)  # Jamba-1.5-Mini's Mamba layers
    assert elems == 3 * 8192 + 8192 * 16
    a = laws.ssm_hybrid_bytes(1000, 4, 8, 128, 2, 28, elems, 2)
    b = laws.ssm_hybrid_bytes(2000, 4, 8, 128, 2, 28, elems, 2)
    assert b - a == 1000 * 16 * KiB  # only the 4 attention layers grow: Jamba's 16 KiB/token


def test_laws_accept_numpy_arrays():
    np = pytest.importorskip("numpy")
    T = np.array([16, 4096, 100_000])
    got = laws.sliding_window_bytes(T, 1, 3, 4096, 2, 64, 2)
    assert list(got) == [laws.sliding_window_bytes(int(t), 1, 3, 4096, 2, 64, 2) for t in T]


def test_bad_config_names_the_field():
    with pytest.raises(ValueError, match="layer_types"):
        GPTConfig(n_layer=2, layer_types=("full", "lstm"))
    with pytest.raises(ValueError, match="n_kv_heads"):
        GPTConfig(n_head=4, n_kv_heads=3)
    with pytest.raises(ValueError, match="layer_types"):
        law_bytes(GPTConfig(n_layer=2, layer_types=("mla", "ssm")), 10, 2)
