"""Reproduce the shipped model: a byte-level BPE tokenizer and a small GPT2LMHeadModel trained on the Python
Language Reference topics (``pydoc_data.topics``, see data.py for why this corpus).

    .venv/bin/python -m part0_foundations.l04_gpt2_int8.train            # writes part0_foundations/l04_gpt2_int8/model
    .venv/bin/python -m part0_foundations.l04_gpt2_int8.train --out /tmp/m --minutes 1

Uses one CPU thread by default (at most two) and stops after ``--steps`` steps or ``--minutes`` minutes, whichever comes first. The
architecture is GPT-2's own (``transformers``' ``GPT2LMHeadModel``: ``Conv1D`` projections, tied ``wte``/``lm_head``),
only narrower and shallower, so that the saved folder stays well under 20 MB.
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch

from course.machine import records
from part0_foundations.l04_gpt2_int8.data import HELDOUT_PATH, SHIPPED_MODEL_DIR, corpus_split, perplexity, sha256, token_windows

EOT = "<|endoftext|>"
MAX_SHIPPED_BYTES = 20 * 1024 * 1024

NOTICE = """# Model card: the lesson-04 GPT-2-architecture model

- Architecture: `transformers.GPT2LMHeadModel` ({n_layer} layers, {n_head} heads, n_embd {n_embd},
  n_positions {n_positions}, vocab {vocab_size}; `Conv1D` projections and `lm_head` tied to `wte`, as in GPT-2).
- Tokenizer: byte-level BPE trained with `tokenizers` on the same training text.
- Training text: the Python Language Reference topics shipped with CPython as `pydoc_data.topics`
  (Python {python}), every {every}th topic (sorted by name) held out (`../heldout.txt`).
- Reproduce: `.venv/bin/python -m part0_foundations.l04_gpt2_int8.train` (see `train_log.json`).

The training text is Python documentation, Copyright © 2001 Python Software Foundation; All Rights Reserved,
licensed under the PSF License Agreement (https://docs.python.org/3/license.html), which permits derivative works
to be prepared and distributed provided this notice is retained. This model and `../heldout.txt` are such
derivative works, distributed with the course under the same terms.
"""


def train_tokenizer(text: str, vocab_size: int):
    """A byte-level BPE (GPT-2's scheme) trained on ``text``, wrapped as a transformers fast tokenizer."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2TokenizerFast

    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator([text], vocab_size=vocab_size, min_frequency=2, special_tokens=[EOT], show_progress=False)
    return GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, bos_token=EOT, eos_token=EOT, unk_token=EOT)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=SHIPPED_MODEL_DIR)
    p.add_argument("--vocab-size", type=int, default=2048)
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-positions", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--minutes", type=float, default=14.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="CPU threads, at most 2 (the machine is shared; the shipped run used 1)")
    args = p.parse_args(argv)

    from transformers import GPT2Config, GPT2LMHeadModel

    torch.set_num_threads(max(1, min(2, args.threads)))  # the machine is shared
    torch.manual_seed(args.seed)
    train_text, held_text = corpus_split()
    tokenizer = train_tokenizer(train_text, args.vocab_size)
    ids = torch.tensor(tokenizer(train_text)["input_ids"])
    config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=args.n_positions, n_embd=args.n_embd, n_layer=args.n_layer,
        n_head=args.n_head, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    model = GPT2LMHeadModel(config)
    n_params = sum(p.numel() for p in model.parameters())  # the tied weight counts once
    print(f"{len(ids):,} training tokens, vocab {len(tokenizer)}, {n_params:,} parameters", flush=True)

    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, betas=(0.9, 0.95))
    warmup = max(1, args.steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, args.steps) / args.steps)))
    gen = torch.Generator().manual_seed(args.seed)
    t0, log, step = time.time(), [], 0
    model.train()
    while step < args.steps and time.time() - t0 < args.minutes * 60:
        start = torch.randint(0, len(ids) - args.n_positions - 1, (args.batch_size,), generator=gen)
        x = torch.stack([ids[s : s + args.n_positions] for s in start])
        loss = model(x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        step += 1
        if step % 50 == 0 or step == 1:
            log.append({"step": step, "loss": round(loss.item(), 4), "seconds": round(time.time() - t0, 1)})
            print(f"step {step:5d}  loss {loss.item():.3f}  {time.time() - t0:6.1f} s", flush=True)
    model.eval()

    held = token_windows(tokenizer, held_text, args.n_positions, 10**9)
    ppl = perplexity(model, held)
    print(f"held-out perplexity {ppl:.2f} after {step} steps ({time.time() - t0:.0f} s)")

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    from pydoc_data.topics import topics  # noqa: F401 - recorded below: the corpus depends on the Python version

    (out / "NOTICE.md").write_text(NOTICE.format(python=platform.python_version(), every=10, **config.to_dict()))
    (out / "train_log.json").write_text(json.dumps({
        "record": records.run_record(argv, program="python -m part0_foundations.l04_gpt2_int8.train"),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "torch": torch.__version__,
        "train_tokens": len(ids), "parameters": n_params, "steps": step,
        "seconds": round(time.time() - t0, 1), "heldout_perplexity": round(ppl, 3), "log": log,
    }, indent=1) + "\n")
    if out.resolve() == SHIPPED_MODEL_DIR.resolve():
        HELDOUT_PATH.write_text(held_text, encoding="utf-8")
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    print(f"saved {out} ({size / 1e6:.1f} MB, model.safetensors sha256 {sha256(out / 'model.safetensors')[:12]})")
    if size > MAX_SHIPPED_BYTES:
        print(f"warning: {size:,} bytes is over the 20 MB the repository allows", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
