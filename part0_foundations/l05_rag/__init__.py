"""Lesson 05: a framework-free RAG (chunk, embed, FAISS index, retrieve, prompt) and what its index costs in memory."""
from part0_foundations.l05_rag.rag import Chunk, Hit, build_prompt, chunk_text, cosine_top_k

__all__ = ["Chunk", "Hit", "build_prompt", "chunk_text", "cosine_top_k"]
