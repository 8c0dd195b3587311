"""The data set: human-written dates → ISO ``YYYY-MM-DD``, deterministic and split by calendar date.

An *example* is a calendar date, a surface form (``FORMS``) and a casing, drawn with the same distribution in every
split. The splits are disjoint by calendar date: a date in the test set never appears in training, in any form.

Conventions that make every string mean exactly one date (``tests/part0/l02_encoder_decoder/test_data.py`` checks it over
the whole range):
- the supported range is 1950-01-01 … 2049-12-31, so a two-digit year is never ambiguous (50–99 → 19xx,
  00–49 → 20xx);
- a four-digit year written first is always year, month, day (``2021/03/04``, ``2021. 3. 4.``, ISO);
- with the year last, slashes are month-first (US: ``03/04/05`` is 4 March 2005), dots and dashes are day-first
  (European: ``04.03.2021`` and ``04-03-2021`` are 4 March 2021).

Characters are the tokens: one shared vocabulary with ``<pad>``, ``<bos>`` and ``<eos>``.
"""
from __future__ import annotations

import datetime as dt
import random

FIRST_DATE = dt.date(1950, 1, 1)
LAST_DATE = dt.date(2049, 12, 31)
N_TEST_DATES = 2000
N_VAL_DATES = 1000
SPLIT_SEED = 2021

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS_FR = ["janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre",
             "novembre", "décembre"]
MONTHS_DE = ["Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober",
             "November", "Dezember"]
MONTHS_IT = ["gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio", "agosto", "settembre", "ottobre",
             "novembre", "dicembre"]
WEEKDAYS_KO = ["월요일", "화요일", "수요일", "목요일", "금요일", "토요일", "일요일"]
MONTHS_ES = ["enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto", "septiembre", "octubre",
             "noviembre", "diciembre"]


def ordinal(n: int) -> str:
    """1 → '1st', 2 → '2nd', 3 → '3rd', 11 → '11th', 22 → '22nd'."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"



# Each form is a pure function of the date. Examples are for 2021-03-03 (a Wednesday).
FORMS = {
    "d_month_yyyy": lambda d: f"{d.day} {MONTHS[d.month - 1]} {d.year}",                  # 3 March 2021
    "month_d_yyyy": lambda d: f"{MONTHS[d.month - 1]} {d.day}, {d.year}",                 # March 3, 2021
    "mm/dd/yy": lambda d: f"{d.month:02d}/{d.day:02d}/{d.year % 100:02d}",                # 03/03/21
    "rfc2822": lambda d: f"{WEEKDAYS[d.weekday()][:3]}, {d.day} {MONTHS[d.month - 1][:3]} {d.year}",  # Wed, 3 Mar 2021
    "korean": lambda d: f"{d.year}년 {d.month}월 {d.day}일",                                 # 2021년 3월 3일
    "the_dth_of_month_yy": lambda d: f"the {ordinal(d.day)} of {MONTHS[d.month - 1]} '{d.year % 100:02d}",
    "m/d/yyyy": lambda d: f"{d.month}/{d.day}/{d.year}",                                  # 3/3/2021
    "dd.mm.yyyy": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",                        # 03.03.2021
    "d.m.yy": lambda d: f"{d.day}.{d.month}.{d.year % 100:02d}",                          # 3.3.21
    "yyyy/mm/dd": lambda d: f"{d.year}/{d.month:02d}/{d.day:02d}",                        # 2021/03/03
    "yyyymmdd": lambda d: f"{d.year}{d.month:02d}{d.day:02d}",                            # 20210303
    "weekday_month_d_yyyy": lambda d: f"{WEEKDAYS[d.weekday()]}, {MONTHS[d.month - 1]} {d.day}, {d.year}",
    "weekday_d_month_yyyy": lambda d: f"{WEEKDAYS[d.weekday()]} {d.day} {MONTHS[d.month - 1]} {d.year}",
    "d_mon_yy": lambda d: f"{d.day} {MONTHS[d.month - 1][:3]} {d.year % 100:02d}",         # 3 Mar 21
    "mon_d_'yy": lambda d: f"{MONTHS[d.month - 1][:3]} {d.day} '{d.year % 100:02d}",       # Mar 3 '21
    "month_dth_yyyy": lambda d: f"{MONTHS[d.month - 1]} {ordinal(d.day)}, {d.year}",       # March 3rd, 2021
    "dth_month_yyyy": lambda d: f"{ordinal(d.day)} {MONTHS[d.month - 1]} {d.year}",        # 3rd March 2021
    "dd-mon-yyyy": lambda d: f"{d.day:02d}-{MONTHS[d.month - 1][:3]}-{d.year}",            # 03-Mar-2021
    "iso": lambda d: d.isoformat(),                                                        # 2021-03-03
    "japanese": lambda d: f"{d.year}年{d.month}月{d.day}日",                                 # 2021年3月3日
    "french": lambda d: f"le {'1er' if d.day == 1 else d.day} {MONTHS_FR[d.month - 1]} {d.year}",  # le 3 mars 2021
    "german": lambda d: f"{d.day}. {MONTHS_DE[d.month - 1]} {d.year}",                     # 3. März 2021
    "spanish": lambda d: f"{d.day} de {MONTHS_ES[d.month - 1]} de {d.year}",               # 3 de marzo de 2021
    # Forms as people write them in running text and forms (added with the held-out-forms evaluation):
    "d_mon_yyyy": lambda d: f"{d.day} {MONTHS[d.month - 1][:3]} {d.year}",                 # 3 Mar 2021
    "mon_d_yyyy": lambda d: f"{MONTHS[d.month - 1][:3]} {d.day}, {d.year}",                # Mar 3, 2021
    "the_dth_of_month_yyyy": lambda d: f"the {ordinal(d.day)} of {MONTHS[d.month - 1]} {d.year}",  # the 3rd of March 2021
    "dth_of_month_yyyy": lambda d: f"{ordinal(d.day)} of {MONTHS[d.month - 1]} {d.year}",  # 3rd of March 2021
    "mon_dth_yyyy": lambda d: f"{MONTHS[d.month - 1][:3]} {ordinal(d.day)}, {d.year}",     # Mar 3rd, 2021
    "weekday_mon_d_yyyy": lambda d: f"{WEEKDAYS[d.weekday()][:3]}, {MONTHS[d.month - 1][:3]} {d.day}, {d.year}",
    "dd-mm-yyyy": lambda d: f"{d.day:02d}-{d.month:02d}-{d.year}",                        # 03-03-2021
    "m/d/yy": lambda d: f"{d.month}/{d.day}/{d.year % 100:02d}",                          # 3/3/21
    "korean_numeric": lambda d: f"{d.year}. {d.month}. {d.day}.",                          # 2021. 3. 3.
    "korean_weekday": lambda d: f"{d.year}년 {d.month}월 {d.day}일 {WEEKDAYS_KO[d.weekday()]}",  # 2021년 3월 3일 수요일
    "italian": lambda d: f"{d.day} {MONTHS_IT[d.month - 1]} {d.year}",                     # 3 marzo 2021
}
# Forms the held-out-forms model never sees in training (each has a close sibling it does see): the test of whether
# the model generalises to a *way of writing* it was not taught, beside the held-out *dates* every model is tested on.
HELDOUT_FORMS = ("d_mon_yyyy", "the_dth_of_month_yyyy", "dd-mm-yyyy", "italian")
FORM_NAMES = list(FORMS)
# Casing is drawn per example: most text keeps its form's casing, some is all lower or all upper case.
CASINGS = {"as_written": 0.8, "lower": 0.1, "upper": 0.1}


def render(d: dt.date, form: str, casing: str = "as_written") -> str:
    """The date ``d`` written in ``form`` with ``casing``."""
    s = FORMS[form](d)
    return s.lower() if casing == "lower" else s.upper() if casing == "upper" else s


def all_dates() -> list[dt.date]:
    n = (LAST_DATE - FIRST_DATE).days + 1
    return [FIRST_DATE + dt.timedelta(days=i) for i in range(n)]


def splits(seed: int = SPLIT_SEED) -> dict[str, list[dt.date]]:
    """Calendar dates shuffled once with a fixed seed: the first 2,000 test, the next 1,000 validation, the rest
    training. Disjoint by construction."""
    dates = all_dates()
    random.Random(seed).shuffle(dates)
    return {
        "test": dates[:N_TEST_DATES],
        "val": dates[N_TEST_DATES:N_TEST_DATES + N_VAL_DATES],
        "train": dates[N_TEST_DATES + N_VAL_DATES:],
    }


def sample_examples(dates: list[dt.date], rng: random.Random, forms=None) -> list[tuple[str, str, str]]:
    """One (source text, ISO target, form name) per date: a uniform form (of ``forms``, default all) and a casing
    drawn from ``CASINGS``."""
    casings, weights = list(CASINGS), list(CASINGS.values())
    forms = list(forms or FORM_NAMES)
    out = []
    for d in dates:
        form = rng.choice(forms)
        casing = rng.choices(casings, weights)[0]
        out.append((render(d, form, casing), d.isoformat(), form))
    return out


def fixed_examples(split: str, seed: int = 0, forms=None) -> list[tuple[str, str, str]]:
    """The evaluation set of a split: each of its dates once, in a form (of ``forms``) and casing fixed by ``seed``."""
    return sample_examples(splits()[split], random.Random(seed), forms)


def normalise(s: str) -> str:
    """How two texts are compared: case, commas and runs of white space do not matter."""
    return " ".join(s.casefold().replace(",", " ").split())


def _candidate_years(text: str) -> set[int]:
    import re

    years = set()
    for run in re.findall(r"\d+", text):
        for y in ({int(run)} if len(run) == 4 else {int(run[:4])} if len(run) == 8 else set()):
            years.add(y)
        if len(run) == 2:                                   # a two-digit year: 50–99 → 19xx, 00–49 → 20xx
            years.add((1900 if int(run) >= 50 else 2000) + int(run))
    return {y for y in years if FIRST_DATE.year <= y <= LAST_DATE.year}


def read_exactly(text: str) -> tuple[dt.date, str] | None:
    """(date, form) when ``text`` is, exactly, one of the data set's forms of one date; None otherwise.

    No string is a form of two dates (the tests check the whole range), so the answer is unique. It is found by
    rendering every form of every day of the years the text could name (its four-digit, eight-digit or two-digit
    numbers): a few hundred thousand strings at most, a fraction of a second."""
    key = normalise(text)
    for year in sorted(_candidate_years(text)):
        d = dt.date(year, 1, 1)
        while d.year == year:
            for form in FORM_NAMES:
                if normalise(FORMS[form](d)) == key:
                    return d, form
            d += dt.timedelta(days=1)
    return None


def _one_year_of_forms():
    # A leap year holds every day number, month, weekday, and every (weekday, month) pair with a two-digit day:
    # its strings use every character and reach the longest length any form produces; ten digits cover the years.
    d = dt.date(2000, 1, 1)
    while d.year == 2000:
        for form in FORM_NAMES:
            for casing in CASINGS:
                yield render(d, form, casing)
        d += dt.timedelta(days=1)


VOCAB = ["<pad>", "<bos>", "<eos>"] + sorted(set("0123456789").union(*_one_year_of_forms()))
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
STOI = {c: i for i, c in enumerate(VOCAB)}
TARGET_LEN = len("YYYY-MM-DD") + 1  # ten characters and <eos>
MAX_SOURCE_LEN = max(len(s) for s in _one_year_of_forms())


def encode_text(s: str) -> list[int]:
    """Characters → token ids (no specials). Raises KeyError for a character outside the vocabulary."""
    return [STOI[c] for c in s]


def decode_ids(ids) -> str:
    """Token ids → text, stopping at the first <eos>; <pad> and <bos> are dropped."""
    out = []
    for i in ids:
        i = int(i)
        if i == EOS_ID:
            break
        if i > EOS_ID:
            out.append(VOCAB[i])
    return "".join(out)


def source_tensor(texts):
    """(B, S) LongTensor of the texts' characters, right-padded with <pad> to the longest text."""
    import torch

    src = torch.full((len(texts), max(len(t) for t in texts)), PAD_ID, dtype=torch.long)
    for i, text in enumerate(texts):
        src[i, : len(text)] = torch.tensor(encode_text(text))
    return src


def batch_tensors(examples):
    """(src, tgt) LongTensors for a list of (text, iso, ...) examples.

    ``src``: (B, S) source characters (``source_tensor``).
    ``tgt``: (B, 12) ``<bos> Y Y Y Y - M M - D D <eos>``; the decoder reads ``tgt[:, :-1]`` and predicts
    ``tgt[:, 1:]`` (teacher forcing).
    """
    import torch

    tgt = torch.tensor([[BOS_ID] + encode_text(e[1]) + [EOS_ID] for e in examples], dtype=torch.long)
    return source_tensor([e[0] for e in examples]), tgt
