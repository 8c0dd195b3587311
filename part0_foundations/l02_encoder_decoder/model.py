"""Lesson 02 — the encoder–decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017), whole.

Built on lesson 01's ``MultiHeadAttention``: no ``nn.Transformer*``, no ``nn.MultiheadAttention``. The encoder reads
the whole source at once (bidirectional self-attention); the decoder writes the output one token at a time (causal
self-attention) and reads the encoder's output through **cross-attention** — the part a GPT does not have.

Post-norm residual blocks as in the paper (§3.1): ``x = LayerNorm(x + Sublayer(x))``. One embedding matrix is shared
by the source, the target and the output projection (§3.4), scaled by √d_model; positions are sinusoidal (§3.5).

The regions between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` are what learners write in the exercise
notebook (``notebook.py`` copies these definitions; nbgrader blanks the regions).

Shapes: ``B`` batch, ``S`` source length, ``T`` target length. Masks follow lesson 01: boolean, ``True`` = may
attend. A source padding mask has shape (B, 1, S): every query may attend to the real (non-pad) source tokens.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from part0_foundations.l01_attention import MultiHeadAttention

CHECKPOINT = Path(__file__).resolve().parent / "checkpoint.pt"
CHECKPOINT_FORMAT = "l02-seq2seq-v1"


@dataclass
class Seq2SeqConfig:
    vocab_size: int
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 256
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    max_len: int = 64  # longest sequence the position table covers (tokens)
    dropout: float = 0.0
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2


def sinusoidal_positions(max_len: int, d_model: int) -> torch.Tensor:
    """(max_len, d_model): PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(same)."""
    pos = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
    inv_freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(pos * inv_freq)
    pe[:, 1::2] = torch.cos(pos * inv_freq)
    return pe


class FeedForward(nn.Module):
    """Position-wise feed-forward network: Linear(d_model → d_ff), ReLU, Linear(d_ff → d_model)."""

    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(torch.relu(self.linear1(x))))


class EncoderLayer(nn.Module):
    """Self-attention over the whole source, then the feed-forward network; each wrapped as
    ``x = norm(x + sublayer(x))``."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        """x: (B, S, d_model); mask: bool (B, 1, S), True at real source tokens. Returns (B, S, d_model)."""
        ### BEGIN SOLUTION
        x = self.norm1(x + self.dropout(self.self_attn(x, mask=mask)))
        x = self.norm2(x + self.dropout(self.ff(x)))
        ### END SOLUTION
        return x


class DecoderLayer(nn.Module):
    """Causal self-attention over the output so far, cross-attention over the encoder output (``memory``), then
    the feed-forward network; each wrapped as ``x = norm(x + sublayer(x))``."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.cross_attn = MultiHeadAttention(d_model, n_heads)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, memory_mask=None, return_cross_weights=False):
        """x: (B, T, d_model) the target so far; memory: (B, S, d_model) the encoder output; memory_mask: bool
        (B, 1, S), True at real source tokens.

        Returns (B, T, d_model), and the cross-attention weights (B, n_heads, T, S) too when
        ``return_cross_weights``.
        """
        ### BEGIN SOLUTION
        x = self.norm1(x + self.dropout(self.self_attn(x, causal=True)))
        attended, cross_weights = self.cross_attn(x, memory, mask=memory_mask, return_weights=True)
        x = self.norm2(x + self.dropout(attended))
        x = self.norm3(x + self.dropout(self.ff(x)))
        ### END SOLUTION
        return (x, cross_weights) if return_cross_weights else x


class Encoder(nn.Module):
    """A stack of ``n_encoder_layers`` encoder layers."""

    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList(
            EncoderLayer(config.d_model, config.n_heads, config.d_ff, config.dropout)
            for _ in range(config.n_encoder_layers)
        )

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask)
        return x


class Decoder(nn.Module):
    """A stack of ``n_decoder_layers`` decoder layers, each reading the same encoder output."""

    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList(
            DecoderLayer(config.d_model, config.n_heads, config.d_ff, config.dropout)
            for _ in range(config.n_decoder_layers)
        )

    def forward(self, x, memory, memory_mask=None, return_cross_weights=False):
        """Returns (B, T, d_model), and a list with each layer's cross-attention weights when asked."""
        weights = []
        for layer in self.layers:
            x, w = layer(x, memory, memory_mask, return_cross_weights=True)
            weights.append(w)
        return (x, weights) if return_cross_weights else x


class Seq2Seq(nn.Module):
    """Encoder–decoder Transformer: ``encode`` the source once, ``decode`` the target against it."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        # One embedding for source, target and output (paper §3.4); initialised so that √d_model·E has unit scale.
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        nn.init.normal_(self.embed.weight, std=config.d_model ** -0.5)
        self.register_buffer("positions", sinusoidal_positions(config.max_len, config.d_model), persistent=False)
        self.dropout = nn.Dropout(config.dropout)
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)

    def embed_tokens(self, ids):
        """(B, L) token ids → (B, L, d_model): √d_model-scaled embeddings plus sinusoidal positions."""
        if ids.shape[1] > self.config.max_len:
            raise ValueError(f"ids: length {ids.shape[1]} exceeds max_len {self.config.max_len}")
        x = self.embed(ids) * math.sqrt(self.config.d_model) + self.positions[: ids.shape[1]]
        return self.dropout(x)

    def padding_mask(self, src):
        """(B, S) ids → bool (B, 1, S), True at real (non-pad) source tokens."""
        return (src != self.config.pad_id).unsqueeze(1)

    def encode(self, src):
        """(B, S) source ids → memory (B, S, d_model)."""
        return self.encoder(self.embed_tokens(src), self.padding_mask(src))

    def decode(self, tgt, memory, memory_mask, return_cross_weights=False):
        """(B, T) target ids (starting with <bos>) → logits (B, T, vocab_size) for the next token at each
        position; with ``return_cross_weights`` also each decoder layer's cross-attention weights."""
        h, weights = self.decoder(self.embed_tokens(tgt), memory, memory_mask, return_cross_weights=True)
        logits = h @ self.embed.weight.T
        return (logits, weights) if return_cross_weights else logits

    def forward(self, src, tgt):
        """Teacher forcing: logits (B, T, vocab_size) for every position of ``tgt`` at once."""
        return self.decode(tgt, self.encode(src), self.padding_mask(src))

    def generate(self, src, max_len):
        return greedy_decode(self, src, max_len)


@torch.no_grad()
def greedy_decode(model, src, max_len):
    """Batched greedy decoding: encode once, then append the most likely next token until <eos>.

    src: (B, S) source ids. Returns (B, T) generated ids with T ≤ ``max_len``, <bos> not included: each row holds
    its argmax tokens up to and including its first <eos>, then <pad>. Stops as soon as every row has an <eos>.
    """
    cfg = model.config
    # Grow `out`, (B, 1 + steps) token ids whose first column is <bos>; the function returns it without that column.
    ### BEGIN SOLUTION
    memory = model.encode(src)
    memory_mask = model.padding_mask(src)
    out = torch.full((src.shape[0], 1), cfg.bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        next_id = model.decode(out, memory, memory_mask)[:, -1].argmax(dim=-1)
        next_id = next_id.masked_fill(done, cfg.pad_id)  # finished rows only pad
        out = torch.cat([out, next_id.unsqueeze(1)], dim=1)
        done = done | (next_id == cfg.eos_id)
        if bool(done.all()):
            break
    ### END SOLUTION
    return out[:, 1:]


def save_checkpoint(model, vocab, path=CHECKPOINT):
    """Config, vocabulary and weights in one file that ``torch.load(weights_only=True)`` can read."""
    torch.save({"format": CHECKPOINT_FORMAT, "config": asdict(model.config), "vocab": list(vocab),
                "state_dict": model.state_dict()}, path)


def load_checkpoint_state(path=CHECKPOINT):
    """(config dict, vocabulary, state_dict) from a checkpoint, read with ``weights_only=True`` (no pickled code)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"checkpoint: {path} does not exist; train it with `python -m part0_foundations.l02_encoder_decoder.train`")
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"checkpoint: {path} is not a lesson-02 checkpoint (format {CHECKPOINT_FORMAT!r})")
    return ckpt["config"], ckpt["vocab"], ckpt["state_dict"]


def load_model(path=CHECKPOINT, model_cls=None):
    """The trained model, in eval mode. ``model_cls`` (default ``Seq2Seq``) lets a notebook load the same weights
    into its own layers. Refuses a checkpoint whose vocabulary differs from the data set's."""
    from part0_foundations.l02_encoder_decoder.data import VOCAB

    config, vocab, state = load_checkpoint_state(path)
    if vocab != VOCAB:
        raise ValueError("checkpoint: its vocabulary differs from data.VOCAB; retrain it with "
                         "`python -m part0_foundations.l02_encoder_decoder.train`")
    model = (model_cls or Seq2Seq)(Seq2SeqConfig(**config))
    model.load_state_dict(state)
    return model.eval()
