"""Evaluate the date translator: exact match on the held-out test dates, and the cross-attention ablation.

    python -m part0_foundations.l02_encoder_decoder.evaluate     # re-measure the shipped checkpoint, compare
                                                                # with the numbers recorded in results.json

The ablation runs the *same* trained decoder with the encoder output cut off (replaced by zeros): cross-attention
then carries no information about the source, and the decoder can only write a date it finds likely in general.
Chance is what the best constant answer scores: one fixed date string (exact match), or the most frequent training
character at each position (character accuracy).
"""
from __future__ import annotations

import argparse
import collections
import json
import sys

import torch

from part0_foundations.l02_encoder_decoder import data
from part0_foundations.l02_encoder_decoder.model import CHECKPOINT, greedy_decode, load_model

RESULTS = CHECKPOINT.parent / "results.json"


def translate_examples(model, examples, batch_size=500) -> list[str]:
    """Greedy translations of the texts of (text, iso, ...) examples, batched by similar length."""
    order = sorted(range(len(examples)), key=lambda i: len(examples[i][0]))
    preds = [None] * len(examples)
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            src, _ = data.batch_tensors([examples[i] for i in idx])
            out = greedy_decode(model, src, data.TARGET_LEN)
            for i, row in zip(idx, out):
                preds[i] = data.decode_ids(row)
    return preds


class EncoderCutOff:
    """The same trained model, with the encoder's output replaced by zeros before the decoder reads it."""

    def __init__(self, model):
        self.model, self.config = model, model.config

    def encode(self, src):
        return torch.zeros_like(self.model.encode(src))

    def padding_mask(self, src):
        return self.model.padding_mask(src)

    def decode(self, *args, **kwargs):
        return self.model.decode(*args, **kwargs)


def char_accuracy(preds, targets) -> float:
    """Fraction of the ten ISO characters right, position by position (a short prediction misses the rest)."""
    hits = sum(sum(a == b for a, b in zip(p[:10], t)) for p, t in zip(preds, targets))
    return hits / (10 * len(targets))


def constant_baselines(test_targets) -> dict:
    """What knowing nothing about the source scores: the best single date string, and, per position, the training
    set's most frequent character."""
    train_targets = [d.isoformat() for d in data.splits()["train"]]
    majority = "".join(collections.Counter(t[i] for t in train_targets).most_common(1)[0][0] for i in range(10))
    top_count = collections.Counter(test_targets).most_common(1)[0][1]
    return {"chance_exact_match": top_count / len(test_targets),
            "chance_char_accuracy": char_accuracy([majority] * len(test_targets), test_targets),
            "majority_string": majority}


def evaluate(model, per_form=True) -> dict:
    """Accuracy, ablation and chance on the 2,000 test dates (each in one form and casing fixed by a seed); with
    ``per_form``, also exact match per form over every test date written in that form."""
    test = data.fixed_examples("test")
    targets = [e[1] for e in test]
    preds = translate_examples(model, test)
    cut = translate_examples(EncoderCutOff(model), test)
    res = {
        "n_test": len(test),
        "test_exact_match": sum(p == t for p, t in zip(preds, targets)) / len(test),
        "test_char_accuracy": char_accuracy(preds, targets),
        "ablation_exact_match": sum(p == t for p, t in zip(cut, targets)) / len(test),
        "ablation_char_accuracy": char_accuracy(cut, targets),
        "ablation_distinct_outputs": len(set(cut)),
        **constant_baselines(targets),
        "errors": [{"text": e[0], "target": e[1], "got": p} for e, p in zip(test, preds) if p != e[1]],
    }
    if per_form:
        dates = data.splits()["test"]
        res["per_form_exact_match"], res["per_form_errors"] = {}, []
        for form in data.FORM_NAMES:
            ex = [(data.render(d, form), d.isoformat()) for d in dates]
            got = translate_examples(model, ex)
            res["per_form_exact_match"][form] = sum(g == e[1] for g, e in zip(got, ex)) / len(ex)
            wrong = [{"form": form, "text": e[0], "target": e[1], "got": g} for g, e in zip(got, ex) if g != e[1]]
            res["per_form_errors"] += wrong[:5]  # a few per form: enough to see what goes wrong
    return res


def heldout_forms(model, forms) -> dict:
    """Exact match of a model trained WITHOUT ``forms`` on the test dates written in each of them (forms it never
    saw), beside its exact match on the test dates in the forms it was trained on."""
    dates = data.splits()["test"]
    per_form, errors = {}, []
    for form in forms:
        ex = [(data.render(d, form), d.isoformat()) for d in dates]
        got = translate_examples(model, ex)
        per_form[form] = sum(g == e[1] for g, e in zip(got, ex)) / len(ex)
        errors += [{"form": form, "text": e[0], "target": e[1], "got": g} for g, e in zip(got, ex) if g != e[1]][:5]
    seen = data.fixed_examples("test", forms=[f for f in data.FORM_NAMES if f not in forms])
    preds = translate_examples(model, seen)
    return {"forms": list(forms), "n_test_dates": len(dates),
            "per_form_exact_match": per_form,
            "heldout_exact_match": sum(per_form.values()) / len(per_form),
            "seen_exact_match": sum(p == e[1] for p, e in zip(preds, seen)) / len(seen),
            "errors": errors}


def main(argv=None):
    p = argparse.ArgumentParser(description="Re-measure the shipped checkpoint on the test dates.")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--write", action="store_true",
                   help="replace the evaluation section of results.json (the training record stays)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    results = json.loads(RESULTS.read_text())
    recorded = results["evaluation"]
    res = evaluate(load_model(), per_form=args.write)
    if args.write:
        results["evaluation"] = res
        RESULTS.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {RESULTS}")
    for key in ("test_exact_match", "ablation_exact_match", "chance_exact_match", "test_char_accuracy",
                "ablation_char_accuracy", "chance_char_accuracy"):
        print(f"{key:24s} measured {res[key]:.4f}   recorded in results.json {recorded[key]:.4f}")
    same = all(abs(res[k] - recorded[k]) < 1e-9 for k in ("test_exact_match", "ablation_exact_match"))
    print("matches results.json" if same else "DIFFERS from results.json: retrain or re-run the training script")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
