"""The rule tests read a measured number back from a message and compare it within a tolerance: the helper must
take another CPU's last digits and refuse another number or other words."""
import pytest

from tests.support.rules import figures, states

TEMPLATE = "k=1: scores: differs from the reference by up to {} (allowed {} + {}·|ref|)"


def test_other_cpus_digits_pass():
    # this machine printed 5e-05, an AMD EPYC 5.01e-05: the same rule, stated both ways
    for printed in ("5e-05", "5.01e-05", "4.99e-05"):
        assert states(f"k=1: scores: differs from the reference by up to {printed} (allowed 1e-05 + 1e-05·|ref|)",
                      TEMPLATE, 5e-5, 1e-5, 1e-5)


def test_another_number_is_refused():
    with pytest.raises(AssertionError, match="states 5.5e-05 where 5e-05"):
        states("k=1: scores: differs from the reference by up to 5.5e-05 (allowed 1e-05 + 1e-05·|ref|)",
               TEMPLATE, 5e-5, 1e-5, 1e-5)
    with pytest.raises(AssertionError, match="states 0.0001 where 1e-05"):
        states("k=1: scores: differs from the reference by up to 5e-05 (allowed 1e-04 + 1e-05·|ref|)",
               TEMPLATE, 5e-5, 1e-5, 1e-5)


def test_other_words_are_refused():
    with pytest.raises(AssertionError, match="does not read as"):
        states("k=5: scores: differs from the reference by up to 5e-05 (allowed 1e-05 + 1e-05·|ref|)",
               TEMPLATE, 5e-5, 1e-5, 1e-5)
    with pytest.raises(AssertionError, match="does not read as"):   # words after the template need prefix=True
        states("k=1: scores: differs from the reference by up to 5e-05 (allowed 1e-05 + 1e-05·|ref|); and more",
               TEMPLATE, 5e-5, 1e-5, 1e-5)
    assert states("k=1: scores: differs from the reference by up to 5e-05 (allowed 1e-05 + 1e-05·|ref|); and more",
                  TEMPLATE, 5e-5, 1e-5, 1e-5, prefix=True)


def test_numbers_as_checks_print_them():
    assert figures("1,234.50 bytes, 2 dB, -3e+02, nan", "{} bytes, {} dB, {}, {}")[:3] == [1234.5, 2.0, -300.0]
    with pytest.raises(AssertionError, match="2 numbers, 1 expected"):
        states("1 and 2", "{} and {}", 1.0)
