"""Turn a human-written date into ISO ``YYYY-MM-DD`` with the shipped encoder–decoder.

    python -m part0_foundations.l02_encoder_decoder.translate "3 March 2021" "the 3rd of March '21"

A neural translator always writes *something*. To never return a guess, the model's answer is accepted only when
it is a real calendar date in the supported range and the input is one of the data set's forms of that very date
(compared ignoring case, commas and extra spaces). Anything else — text that is not a date, a date outside
1950–2049, an impossible date such as 31 February, a form the model never learned, a real date the model misreads
(no string is a form of two dates, so a misread never passes; the message then says *misread*, since the form is
supported) — raises ``ValueError`` that names the field ``text`` and says what is allowed. The CLI prints that message on one line and exits 2.
"""
from __future__ import annotations

import datetime as dt
import re
import sys

import torch

from part0_foundations.l02_encoder_decoder import data
from part0_foundations.l02_encoder_decoder.model import greedy_decode, load_model

_MODEL = None
RANGE = f"{data.FIRST_DATE.isoformat()} to {data.LAST_DATE.isoformat()}"
EXAMPLES = "'3 March 2021', 'March 3, 2021', '03/03/21', 'Wed, 3 Mar 2021', '2021년 3월 3일'"


def _model():
    global _MODEL
    if _MODEL is None:
        _MODEL = load_model()
    return _MODEL


def _check_text(text) -> str:
    """The input with runs of white space made single; ValueError naming ``text`` when it cannot be a date."""
    if not isinstance(text, str):
        raise ValueError(f"text: expected a string, got {type(text).__name__}")
    text = " ".join(text.split())
    if not text:
        raise ValueError(f"text: empty; give a date from {RANGE}, e.g. {EXAMPLES}")
    if len(text) > data.MAX_SOURCE_LEN:
        raise ValueError(f"text: {len(text)} characters; no supported date form is longer than "
                         f"{data.MAX_SOURCE_LEN} (e.g. {EXAMPLES})")
    unknown = sorted({c for c in text if c not in data.STOI or data.STOI[c] <= data.EOS_ID})
    if unknown:
        raise ValueError(f"text: character(s) {''.join(unknown)!r} appear in no supported date form; "
                         f"allowed characters: {''.join(data.VOCAB[data.EOS_ID + 1:])!r}")
    for year in re.findall(r"(?<!\d)\d{4}(?!\d)", text):
        if not data.FIRST_DATE.year <= int(year) <= data.LAST_DATE.year:
            raise ValueError(f"text: year {year} is outside the supported range {RANGE}")
    return text


def translate_many(texts) -> list[str]:
    """ISO dates for a list of texts (one batched greedy decode). Raises ValueError for the first bad text."""
    texts = [_check_text(t) for t in texts]
    if not texts:
        return []
    src = data.source_tensor(texts)
    with torch.no_grad():
        out = greedy_decode(_model(), src, data.TARGET_LEN)
    results = []
    for text, row in zip(texts, out):
        iso = data.decode_ids(row)
        try:
            day = dt.date.fromisoformat(iso) if re.fullmatch(r"\d{4}-\d{2}-\d{2}", iso) else None
        except ValueError:
            day = None
        if (day is None or not data.FIRST_DATE <= day <= data.LAST_DATE
                or data.normalise(text) not in {data.normalise(data.render(day, f)) for f in data.FORM_NAMES}):
            known = data.read_exactly(text)
            if known is not None:   # a supported form of a real date: the model got it wrong, and says nothing
                raise ValueError(f"text: {text!r} is a supported form ({known[1]}) of a date, but the model misread "
                                 f"it (it wrote {iso!r}); refusing to return a misread")
            raise ValueError(f"text: {text!r} was not recognised as a date from {RANGE} in a supported form "
                             f"(e.g. {EXAMPLES}); refusing to guess")
        results.append(iso)
    return results


def translate(text: str) -> str:
    """One date string → ISO ``YYYY-MM-DD``; ``ValueError`` naming ``text`` when it is not a supported date."""
    return translate_many([text])[0]


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description="Translate human-written dates to ISO YYYY-MM-DD "
                                            f"(supported range {RANGE}).")
    p.add_argument("text", nargs="+", help=f"a date, e.g. {EXAMPLES}")
    args = p.parse_args(argv)
    torch.set_num_threads(1)  # a few dates: one thread is faster than two that wait for each other
    try:
        for iso in translate_many(args.text):
            print(iso)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
