"""Train the lesson's small character-level GPT on the course's own text, and ship the checkpoint.

    .venv/bin/python -m part0_foundations.l03_kv_cache.train                    # reproduces gpt_course.pt
    .venv/bin/python -m part0_foundations.l03_kv_cache.train --snapshot-corpus  # refresh data/corpus.txt first

The corpus is ``data/corpus.txt``: a frozen snapshot of this repository's own prose (the README, the site's pages
and the docstrings of the lesson and calculator modules). It is ours to ship, needs no download, and is about the
very subject of the course, so a sample of the model reads like the course. It is small (tens of KB), so the model
partly memorises it: that is fine for a lesson about the cache, not about language modelling.

Two threads, a few minutes, a fixed seed. The checkpoint stores the config, the character vocabulary, the weights in
bfloat16 (half the file; the model runs in fp32 after loading) and how it was made.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import math
import time
from pathlib import Path

import torch

from course.machine import records
from part0_foundations.l03_kv_cache.gpt import GPT, GPTConfig

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CORPUS = HERE / "data" / "corpus.txt"
CHECKPOINT = HERE / "gpt_course.pt"
MODEL = dict(n_layer=4, d_model=128, n_head=4, n_kv_heads=4, head_dim=32, d_ff=512)


def snapshot_corpus(path: Path = CORPUS) -> str:
    """Gather the course's prose: Markdown pages, the README and every module/class/function docstring."""
    parts = [(REPO / "README.md").read_text()]
    parts += [p.read_text() for p in sorted((REPO / "site").glob("**/*.md"))
              if "generated" not in p.parts and not p.name.endswith(".ko.md")]  # the English pages, not translations
    for pkg in ("part0_foundations", "part1_capacity"):
        for p in sorted((REPO / pkg).glob("**/*.py")):
            tree = ast.parse(p.read_text())
            for node in [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))]:
                doc = ast.get_docstring(node)
                if doc and len(doc) > 80:
                    parts.append(doc)
    text = "\n\n".join(s.strip() for s in parts) + "\n"
    text = "".join(ch for ch in text if ch == "\n" or ch.isprintable())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return text


class CharTokenizer:
    """One token per character of the corpus."""

    def __init__(self, chars: str):
        self.chars = chars
        self.index = {c: i for i, c in enumerate(chars)}

    def encode(self, text: str) -> list[int]:
        unknown = sorted({c for c in text if c not in self.index})
        if unknown:
            raise ValueError(f"prompt: characters {unknown} are not in the model's vocabulary")
        return [self.index[c] for c in text]

    def decode(self, ids) -> str:
        return "".join(self.chars[i] for i in ids)


def load_checkpoint(path: Path = CHECKPOINT, dtype=torch.float32):
    """The shipped model (eval mode, in ``dtype``) and its tokenizer."""
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    model = GPT(GPTConfig(**ckpt["config"]))
    state = {k: v.to(torch.float32) for k, v in ckpt["state_dict"].items()}
    state["lm_head.weight"] = state["tok_emb.weight"]  # tied: stored once
    model.load_state_dict(state)
    return model.to(dtype).eval(), CharTokenizer(ckpt["chars"])


def train(steps=1200, batch_size=16, seq_len=128, lr=3e-3, seed=0, threads=2, minutes=12.0):
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    text = CORPUS.read_text()
    tok = CharTokenizer("".join(sorted(set(text))))
    data = torch.tensor(tok.encode(text), dtype=torch.long)
    n_val = len(data) // 10
    train_data, val_data = data[:-n_val], data[-n_val:]
    config = GPTConfig(vocab_size=len(tok.chars), **MODEL)
    model = GPT(config)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(seed)

    def batch(src):
        ix = torch.randint(len(src) - seq_len - 1, (batch_size,), generator=g)
        x = torch.stack([src[i:i + seq_len] for i in ix])
        y = torch.stack([src[i + 1:i + seq_len + 1] for i in ix])
        return x, y

    t0, cpu0, step = time.time(), time.process_time(), 0
    for step in range(1, steps + 1):
        # Linear warm-up, then cosine decay to a tenth.
        frac = step / steps
        for group in opt.param_groups:
            group["lr"] = lr * min(1.0, step / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        x, y = batch(train_data)
        _, loss = model(x, targets=y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0:
            print(f"step {step:5d}  train loss {loss.item():.3f}  {time.time() - t0:.0f} s", flush=True)
        if time.process_time() - cpu0 > minutes * 60 * threads:  # CPU time: a busy shared machine is not penalised
            print(f"stopping at step {step}: the {minutes} min × {threads} threads CPU budget is spent")
            break
    model.eval()
    with torch.no_grad():
        vx, vy = batch(val_data)
        val = model(vx, targets=vy)[1].item()
    print(f"validation loss {val:.3f} (uniform guess: {math.log(len(tok.chars)):.3f})")
    torch.save({
        "config": {k: v for k, v in vars(config).items() if k != "extra"},
        "chars": tok.chars,
        "state_dict": {k: v.to(torch.bfloat16) for k, v in model.state_dict().items() if k != "lm_head.weight"},
        "made": {"steps": step, "batch_size": batch_size, "seq_len": seq_len, "lr": lr, "seed": seed,
                 "threads": threads, "final_train_loss": round(loss.item(), 4), "val_loss": round(val, 4),
                 "corpus_sha256": hashlib.sha256(text.encode()).hexdigest(), "corpus_chars": len(text),
                 "seconds": round(time.time() - t0, 1), "cpu_seconds": round(time.process_time() - cpu0, 1),
                 "record": records.run_record(program="python -m part0_foundations.l03_kv_cache.train")},
    }, CHECKPOINT)
    print(f"saved {CHECKPOINT.relative_to(REPO)} ({CHECKPOINT.stat().st_size / 1e6:.2f} MB)")
    return model, tok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--snapshot-corpus", action="store_true", help="rebuild data/corpus.txt from the repo's text")
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--minutes", type=float, default=12.0, help="safety cap: stop after this many minutes of CPU per thread")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if args.snapshot_corpus:
        text = snapshot_corpus()
        print(f"corpus: {len(text):,} characters -> {CORPUS.relative_to(REPO)}")
    model, tok = train(steps=args.steps, minutes=args.minutes, threads=args.threads)
    prompt = "The KV cache"
    out = model.generate(torch.tensor([tok.encode(prompt)]), 200)
    print(tok.decode(out[0].tolist()))


if __name__ == "__main__":
    main()
