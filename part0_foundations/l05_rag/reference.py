"""The reference definitions the autograder grades when no notebook is given (they live in two modules)."""
from part0_foundations.l05_rag.index import flat_index_bytes
from part0_foundations.l05_rag.rag import build_prompt, chunk_text, cosine_top_k

__all__ = ["build_prompt", "chunk_text", "cosine_top_k", "flat_index_bytes"]
