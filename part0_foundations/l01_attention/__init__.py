"""Lesson 01: scaled dot-product attention and multi-head attention (MHA/GQA/MQA)."""
from part0_foundations.l01_attention.attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention

__all__ = ["MultiHeadAttention", "causal_mask", "scaled_dot_product_attention"]
