"""Lesson 01 reference behaviour beyond the autograder checks."""
import pytest
import torch

from part0_foundations.l01_attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention


def test_decode_step_sees_every_cached_key():
    # One query over a cache of 6 keys (a decode step) must equal the last row of full causal attention.
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 6, 4, generator=g) for _ in range(3))
    full = scaled_dot_product_attention(q, k, v, causal=True)
    step = scaled_dot_product_attention(q[:, :, -1:], k, v, causal=True)
    torch.testing.assert_close(step, full[:, :, -1:], atol=1e-6, rtol=0)
    assert causal_mask(1, 6).all()
    assert torch.equal(causal_mask(3, 3), torch.ones(3, 3, dtype=torch.bool).tril())


def test_fully_masked_row_gives_zero_not_nan():
    q, k, v = torch.randn(1, 3, 4), torch.randn(1, 5, 4), torch.randn(1, 5, 2)
    mask = torch.ones(1, 3, 5, dtype=torch.bool)
    mask[0, 1] = False
    out, w = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    assert torch.isfinite(out).all()
    assert torch.equal(w[0, 1], torch.zeros(5)) and torch.equal(out[0, 1], torch.zeros(2))


@pytest.mark.parametrize("kwargs, field", [
    (dict(d_model=32, n_heads=6, n_kv_heads=4), "n_kv_heads"),
    (dict(d_model=30, n_heads=4), "head_dim"),
    (dict(d_model=32, n_heads=0), "n_heads"),
])
def test_constructor_errors_name_the_argument(kwargs, field):
    with pytest.raises(ValueError, match=field):
        MultiHeadAttention(**kwargs)


def test_non_bool_mask_refused():
    q = torch.randn(1, 2, 3)
    with pytest.raises(ValueError, match="mask"):
        scaled_dot_product_attention(q, q, q, mask=torch.ones(2, 2))
