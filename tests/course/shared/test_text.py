"""course.shared.text.printable: learner text shown as text (control, format and separator characters as escapes)."""
from course.shared.text import printable


def test_controls_are_escaped_and_text_is_kept():
    # ESC, CR, BEL, DEL, a C1 control (CSI), a bidi override, a zero-width space, a line separator, a lone surrogate
    raw = "a\x1b[2Kb\rc\x07d\x7fe\x9bf\u202eg\u200bh\u2028i\ud800"
    assert printable(raw) == "a\\x1b[2Kb\\x0dc\\x07d\\x7fe\\x9bf\\u202eg\\u200bh\\u2028i\\ud800"
    assert printable("attention 어텐션 é ü ∑ √d, tabs\tand\nlines") == "attention 어텐션 é ü ∑ √d, tabs\\x09and\\x0alines"
    assert printable("one\n\ttwo\x1b", newlines=True) == "one\n\ttwo\\x1b"


def test_printable_is_idempotent_and_takes_any_object():
    once = printable("x\x1b[31my\r")
    assert printable(once) == once
    assert printable(ValueError("bad\x1b")) == "bad\\x1b"
