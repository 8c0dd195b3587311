"""Part 0 — foundations: attention by hand up to GPT-2 in INT8 and a framework-free RAG.

One sub-package per lesson (``l01_attention``, ``l02_...``). Importing this package imports nothing heavy.
"""
