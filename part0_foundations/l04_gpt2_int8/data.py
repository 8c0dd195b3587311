"""The lesson's model and text: the corpus, the held-out text, loading a GPT-2 folder, perplexity and logits.

Corpus: the Python Language Reference topics that ship inside every CPython as ``pydoc_data.topics`` (the text
``help("if")`` prints). It is on every machine that runs this course, needs no download, is real English technical
prose, and is licensed under the PSF License Agreement, which allows derived works to be redistributed with the
notice kept (see ``model/NOTICE.md``). Every 10th topic (sorted by name) is held out; the held-out text is shipped
as ``heldout.txt`` so that the perplexity does not depend on the Python patch version.
"""
from __future__ import annotations

import hashlib
import math
from pathlib import Path

import torch

LESSON_DIR = Path(__file__).resolve().parent
SHIPPED_MODEL_DIR = LESSON_DIR / "model"
HELDOUT_PATH = LESSON_DIR / "heldout.txt"
RESULTS_PATH = LESSON_DIR / "results" / "comparison.json"
HELDOUT_EVERY = 10
# The fixed prompt whose CPU latency the comparison measures.
PROMPT = ("The with statement is used to wrap the execution of a block with methods defined by a context manager. "
          "This allows common try, except and finally usage patterns to be encapsulated for convenient reuse.")


def corpus_split() -> tuple[str, str]:
    """(training text, held-out text) from ``pydoc_data.topics``: every 10th topic by sorted name is held out."""
    from pydoc_data.topics import topics

    train, held = [], []
    for i, key in enumerate(sorted(topics)):
        (held if i % HELDOUT_EVERY == 0 else train).append(topics[key].strip())
    return "\n\n".join(train), "\n\n".join(held)


def heldout_text() -> str:
    return HELDOUT_PATH.read_text(encoding="utf-8")


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_model(model_dir=None):
    """(GPT2LMHeadModel in eval mode, tokenizer) from a local ``save_pretrained`` folder; the shipped one by default.

    Never touches a hub: the folder must exist locally with a ``config.json`` whose ``model_type`` is ``gpt2``.
    """
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    path = Path(model_dir) if model_dir is not None else SHIPPED_MODEL_DIR
    if not (path / "config.json").is_file():
        raise ValueError(f"model_dir: {path} is not a folder saved with save_pretrained (no config.json in it)")
    config = GPT2Config.from_pretrained(path, local_files_only=True)
    if config.model_type != "gpt2":
        raise ValueError(f"model_dir: {path} holds a {config.model_type!r} model; allowed: a 'gpt2' model")
    try:
        model = GPT2LMHeadModel.from_pretrained(path, local_files_only=True).eval()
    except (OSError, ValueError) as exc:
        raise ValueError(f"model_dir: {path} has no GPT-2 weights transformers can load locally "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0][:160]})") from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError, TypeError) as exc:
        raise ValueError(f"model_dir: {path} has no tokenizer transformers can load locally (save it with "
                         f"tokenizer.save_pretrained; {type(exc).__name__})") from None
    probe = tokenizer("The with statement")["input_ids"]
    if not probe:  # transformers builds an empty tokenizer when the folder has none
        raise ValueError(f"model_dir: {path} has no tokenizer files (save the tokenizer with save_pretrained too)")
    if len(tokenizer) > model.config.vocab_size:
        raise ValueError(f"model_dir: {path}: the tokenizer has {len(tokenizer)} tokens but the model only "
                         f"{model.config.vocab_size} embeddings")
    return model, tokenizer


def token_windows(tokenizer, text: str, window: int, max_tokens: int) -> torch.Tensor:
    """Non-overlapping windows (n, window) of the tokenized text, at most ``max_tokens`` tokens in all."""
    ids = tokenizer(text, return_tensors=None)["input_ids"][:max_tokens]
    n = len(ids) // window
    if n == 0:
        raise ValueError(f"max_eval_tokens: {len(ids)} tokens is shorter than one window of {window} tokens")
    return torch.tensor(ids[: n * window]).view(n, window)


# Float32 logits are window × vocabulary × 4 bytes per window: 206 MB for GPT-2 124M at 1024 tokens.
LOGIT_BYTES_BUDGET = 256 * 2**20


def windows_per_batch(window: int, vocab_size: int) -> int:
    """How many windows fit the logit budget (at least one)."""
    return max(1, LOGIT_BYTES_BUDGET // (window * vocab_size * 4))


@torch.no_grad()
def perplexity(model, windows: torch.Tensor, batch_size: int | None = None) -> float:
    """exp(mean next-token negative log-likelihood) over every predicted position of every window."""
    batch_size = batch_size or windows_per_batch(windows.shape[1], model.config.vocab_size)
    nll, count = 0.0, 0
    for i in range(0, len(windows), batch_size):
        x = windows[i : i + batch_size]
        logits = model(x).logits[:, :-1].float()
        target = x[:, 1:]
        nll += float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), reduction="sum"))
        count += target.numel()
    return math.exp(nll / count)


@torch.no_grad()
def logits(model, windows: torch.Tensor) -> torch.Tensor:
    return model(windows).logits.float()
