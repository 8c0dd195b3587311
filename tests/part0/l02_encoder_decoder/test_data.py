"""Lesson 02 data set: forms, vocabulary, splits. Expectations come from the calendar (``datetime``) and from the
issue's own examples, never from the code under test."""
import datetime as dt
import random

import pytest

from part0_foundations.l02_encoder_decoder import data


def test_issue_examples_are_forms_of_their_date():
    d = dt.date(2021, 3, 3)
    assert d.strftime("%a") == "Wed"  # the calendar, not our weekday table
    forms = {data.render(d, f) for f in data.FORM_NAMES}
    for text in ["3 March 2021", "March 3, 2021", "03/03/21", "Wed, 3 Mar 2021", "2021년 3월 3일",
                 "the 3rd of March '21", "3 Mar 2021", "the 3rd of March 2021"]:
        assert text in forms, text


@pytest.mark.parametrize("text, iso", [
    ("31 Oct 2011", "2011-10-31"), ("the 2nd of July 1969", "1969-07-02"), ("Oct 31, 2011", "2011-10-31"),
    ("03/04/05", "2005-03-04"),      # year last with slashes: month first (the stated US convention)
    ("04.03.2021", "2021-03-04"),    # dots: day first
    ("04-03-2021", "2021-03-04"),    # dashes with the year last: day first
    ("2021. 3. 4.", "2021-03-04"),   # Korean numeric: year first
    ("2021년 3월 3일 수요일", "2021-03-03"), ("4 marzo 2021", "2021-03-04"),
])
def test_forms_people_write_read_exactly(text, iso):
    got = data.read_exactly(text)
    assert got is not None and got[0].isoformat() == iso, got


@pytest.mark.parametrize("text", ["31 February 2021", "hello", "13/13/13", "3 March 2150", "Tue, 3 Mar 2021"])
def test_read_exactly_refuses_non_dates(text):
    assert data.read_exactly(text) is None


def test_weekday_and_month_names_follow_the_calendar():
    # strftime's English names under the C locale are an independent source for every date of a leap year.
    d = dt.date(2000, 1, 1)
    while d.year == 2000:
        assert data.render(d, "weekday_d_month_yyyy") == d.strftime("%A ") + f"{d.day} " + d.strftime("%B %Y")
        assert data.render(d, "dd-mon-yyyy") == d.strftime("%d-%b-%Y")
        assert data.render(d, "mm/dd/yy") == d.strftime("%m/%d/%y")
        d += dt.timedelta(days=1)


@pytest.mark.parametrize("n, want", [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"),
                                     (13, "13th"), (21, "21st"), (22, "22nd"), (23, "23rd"), (30, "30th"),
                                     (31, "31st")])
def test_ordinal(n, want):
    assert data.ordinal(n) == want


def test_no_string_means_two_dates():
    # The whole supported range, every form, compared the way translate() compares (case, commas, spaces).
    seen = {}
    for d in data.all_dates():
        for f in data.FORM_NAMES:
            key = " ".join(data.render(d, f).casefold().replace(",", " ").split())
            assert seen.setdefault(key, d) == d, f"{key!r} is both {seen[key]} and {d}"


def test_two_digit_years_pivot_at_50():
    assert data.render(dt.date(1950, 1, 1), "mm/dd/yy") == "01/01/50"
    assert data.render(dt.date(2049, 12, 31), "mm/dd/yy") == "12/31/49"
    assert (data.FIRST_DATE, data.LAST_DATE) == (dt.date(1950, 1, 1), dt.date(2049, 12, 31))


def test_splits_are_disjoint_by_date_and_cover_the_range():
    s = data.splits()
    test, val, train = (set(s[k]) for k in ("test", "val", "train"))
    assert (len(test), len(val)) == (2000, 1000)
    assert not (test & val or test & train or val & train)
    n_days = (dt.date(2049, 12, 31) - dt.date(1950, 1, 1)).days + 1
    assert len(test | val | train) == n_days == len(s["test"]) + len(s["val"]) + len(s["train"])
    assert data.splits() == s  # deterministic
    assert data.fixed_examples("test") == data.fixed_examples("test")


def test_vocabulary_covers_every_form_and_length_bound_holds():
    assert data.VOCAB[:3] == ["<pad>", "<bos>", "<eos>"] and len(set(data.VOCAB)) == len(data.VOCAB)
    rng = random.Random(1)
    for d in rng.sample(data.all_dates(), 3000):
        for f in data.FORM_NAMES:
            for casing in data.CASINGS:
                s = data.render(d, f, casing)
                assert len(s) <= data.MAX_SOURCE_LEN
                assert all(c in data.STOI for c in s), s
    # The longest form: weekday and month names of nine letters, a two-digit day.
    assert data.MAX_SOURCE_LEN == len("Wednesday, September 27, 2000")


def test_casings_are_drawn_with_their_weights():
    ex = data.sample_examples(data.splits()["train"][:20000], random.Random(0))
    cased = [t for t, *_ in ex if t.upper() != t.lower()]  # texts with letters that have a case
    upper = sum(t == t.upper() for t in cased) / len(cased)  # no form is written all in capitals by itself
    assert 0.085 < upper < 0.115, upper  # CASINGS: 10 % upper case
    assert {f for *_, f in ex} == set(data.FORM_NAMES)


def test_batch_tensors_layout():
    ex = [("3 March 2021", "2021-03-03"), ("03/03/21", "2021-03-03")]
    src, tgt = data.batch_tensors(ex)
    assert src.shape == (2, len("3 March 2021")) and tgt.shape == (2, 12)
    assert (src[1, len("03/03/21"):] == data.PAD_ID).all() and (src[1, : len("03/03/21")] != data.PAD_ID).all()
    assert tgt[0, 0] == data.BOS_ID and tgt[0, -1] == data.EOS_ID
    assert data.decode_ids(tgt[0, 1:]) == "2021-03-03"
    assert data.decode_ids(src[1]) == "03/03/21"
    with pytest.raises(KeyError):
        data.encode_text("3 March 2021!")
