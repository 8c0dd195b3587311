"""Train the date translator and reproduce the shipped checkpoint and its results.

    python -m part0_foundations.l02_encoder_decoder.train            # a few minutes on 2 CPU cores; writes
                                                                    # checkpoint.pt and results.json here
                                                                    # (results.json records the time it took)
    python -m part0_foundations.l02_encoder_decoder.train --steps 50 --out /tmp/try   # a quick try elsewhere

Teacher forcing (the decoder reads the true output shifted right and predicts the next character at every position
at once), AdamW, linear warm-up then cosine decay, fixed seeds. Each step draws a fresh batch of training dates in
random forms, so the model never sees the same (date, form) pair twice on purpose and never sees a test date.
"""
from __future__ import annotations

import os

# Set before torch loads OpenMP: on a shared machine, OpenMP threads that spin while waiting for each other made
# 2 threads ~10x slower than 1 here; passive waiting keeps the second core useful.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402
from dataclasses import asdict, dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from course.machine import records  # noqa: E402
from part0_foundations.l02_encoder_decoder import data  # noqa: E402
from part0_foundations.l02_encoder_decoder.model import (  # noqa: E402
    CHECKPOINT, Seq2Seq, Seq2SeqConfig, save_checkpoint)

RESULTS = CHECKPOINT.parent / "results.json"


@dataclass
class TrainConfig:
    steps: int = 1200
    batch_size: int = 128
    lr: float = 2e-3
    warmup: int = 100  # steps
    weight_decay: float = 0.01
    seed: int = 0
    log_every: int = 20  # steps between training-loss records
    eval_every: int = 100  # steps between validation exact-match records
    n_val: int = 500  # validation examples per record
    threads: int = 2
    exclude_forms: tuple = ()  # forms never shown in training (the held-out-forms model)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up to ``cfg.lr`` over ``cfg.warmup`` steps, then cosine decay to 0 at ``cfg.steps``."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def loss_fn(model, src, tgt):
    """Mean cross-entropy of predicting tgt[:, 1:] from tgt[:, :-1] (teacher forcing); <pad> targets ignored."""
    logits = model(src, tgt[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt[:, 1:].reshape(-1),
                           ignore_index=model.config.pad_id)


def exact_match(model, examples, batch_size=500) -> float:
    """Fraction of examples whose greedy translation equals the ISO target exactly."""
    from part0_foundations.l02_encoder_decoder.evaluate import translate_examples

    preds = translate_examples(model, examples, batch_size)
    return sum(p == e[1] for p, e in zip(preds, examples)) / len(examples)


def train(model_cfg: Seq2SeqConfig, cfg: TrainConfig, log=print):
    """Train a fresh model; returns (model in eval mode, history dict with the training curve)."""
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    model = Seq2Seq(model_cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), weight_decay=cfg.weight_decay)
    train_dates = data.splits()["train"]
    forms = [f for f in data.FORM_NAMES if f not in cfg.exclude_forms]
    val = data.fixed_examples("val", forms=forms)[: cfg.n_val]
    curve, val_curve = [], []
    # Wall-clock and CPU time of the training steps only (validation excluded). On a shared machine the CPU time
    # (all threads together) says what the work costs; the wall-clock time says what it cost today.
    train_seconds = cpu_seconds = 0.0
    running = None
    for step in range(cfg.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        model.train()
        src, tgt = data.batch_tensors(data.sample_examples(rng.choices(train_dates, k=cfg.batch_size), rng, forms))
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cfg)
        loss = loss_fn(model, src, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        train_seconds += time.perf_counter() - t0
        cpu_seconds += time.process_time() - c0
        running = loss.item() if running is None else 0.9 * running + 0.1 * loss.item()
        done = step + 1
        if done % cfg.log_every == 0 or done == cfg.steps:
            curve.append({"step": done, "seconds": round(train_seconds, 2), "loss": round(running, 5)})
        if done % cfg.eval_every == 0 or done == cfg.steps:
            model.eval()
            acc = exact_match(model, val)
            val_curve.append({"step": done, "seconds": round(train_seconds, 2), "exact_match": acc})
            log(f"step {done:5d}  {train_seconds:6.1f} s  loss {running:.4f}  val exact match {acc:.3f}")
    model.eval()
    history = {"train_seconds": round(train_seconds, 1), "train_cpu_seconds": round(cpu_seconds, 1),
               "loss_curve": curve, "val_curve": val_curve}
    return model, history


def machine_note(record: dict) -> dict:
    """The run record taken when training started (``course.machine.records``) plus what the machine was doing at the end:
    a training time means little without it."""
    load5 = round(os.getloadavg()[1], 2) if hasattr(os, "getloadavg") else None
    return {**record, "load_average_at_end": records.load_average(), "load_average_5min_at_end": load5,
            "torch_threads": torch.get_num_threads(), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            "torch": torch.__version__}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=TrainConfig.steps)
    p.add_argument("--threads", type=int, default=TrainConfig.threads)
    p.add_argument("--skip-heldout-forms", action="store_true",
                   help="train only the shipped model (not the second one, trained without data.HELDOUT_FORMS)")
    p.add_argument("--out", type=Path, default=CHECKPOINT.parent,
                   help="directory for checkpoint.pt and results.json (default: the package, i.e. the shipped files)")
    args = p.parse_args(argv)
    if args.steps <= 0 or args.threads <= 0:
        p.error("--steps and --threads must be positive")
    torch.set_num_threads(args.threads)
    record = records.run_record(argv, program="python -m part0_foundations.l02_encoder_decoder.train")
    cfg = TrainConfig(steps=args.steps, threads=args.threads)
    model_cfg = Seq2SeqConfig(vocab_size=len(data.VOCAB), pad_id=data.PAD_ID, bos_id=data.BOS_ID,
                              eos_id=data.EOS_ID)
    t0 = time.perf_counter()
    model, history = train(model_cfg, cfg)
    wall = time.perf_counter() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    save_checkpoint(model, data.VOCAB, args.out / CHECKPOINT.name)

    from part0_foundations.l02_encoder_decoder.evaluate import evaluate

    results = {
        "model": asdict(model_cfg),
        "n_parameters": sum(p.numel() for p in model.parameters()),
        "training": {**asdict(cfg), **history, "wall_seconds_with_validation": round(wall, 1),
                     "machine": machine_note(record)},
        "evaluation": evaluate(model),
    }
    if not args.skip_heldout_forms:
        from part0_foundations.l02_encoder_decoder.evaluate import heldout_forms

        cfg2 = TrainConfig(steps=args.steps, threads=args.threads, exclude_forms=data.HELDOUT_FORMS)
        model2, history2 = train(model_cfg, cfg2)
        results["heldout_forms"] = {**heldout_forms(model2, data.HELDOUT_FORMS),
                                    "training": {**asdict(cfg2), **history2}}
    (args.out / RESULTS.name).write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    ev = results["evaluation"]
    print(f"trained {cfg.steps} steps in {history['train_seconds']:.0f} s ({wall:.0f} s with validation), "
          f"{cfg.threads} threads; test exact match {ev['test_exact_match']:.4f}, "
          f"encoder cut off {ev['ablation_exact_match']:.4f}; wrote {args.out}")
    if "heldout_forms" in results:
        h = results["heldout_forms"]
        print(f"held-out forms (never trained on): exact match {h['heldout_exact_match']:.4f} "
              f"({', '.join(f'{k} {v:.3f}' for k, v in h['per_form_exact_match'].items())}); "
              f"trained forms {h['seen_exact_match']:.4f}")


if __name__ == "__main__":
    main()
