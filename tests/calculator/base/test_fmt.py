"""How the calculator writes numbers for people (calculator/base/fmt.py), each wording worked by hand."""
from part1_capacity.calculator.base.fmt import fmt_bytes, fmt_count, fmt_k, fmt_ratio, fmt_time, table


def test_bytes_in_binary_units_at_each_boundary():
    # 160 KiB = 163,840 B; a unit starts at exactly its size (1,024 B is 1.0 KiB, 1,023 B stays bytes)
    assert fmt_bytes(163840) == "160.0 KiB"
    assert (fmt_bytes(1023), fmt_bytes(1024), fmt_bytes(0), fmt_bytes(None)) == ("1,023 B", "1.0 KiB", "0 B", "—")
    assert fmt_bytes(2 ** 20) == "1.0 MiB" and fmt_bytes(2 ** 20 - 1) == "1,024.0 KiB"     # 1,048,575 / 1,024
    assert fmt_bytes(3 * 2 ** 30) == "3.0 GiB" and fmt_bytes(2 ** 40) == "1.0 TiB"
    assert fmt_bytes(2048 * 2 ** 40) == "2,048.0 TiB"
    assert fmt_bytes(-1536) == "-1.5 KiB"                          # a size is compared by its magnitude


def test_counts_ratios_and_binary_thousands():
    assert (fmt_count(None), fmt_count(1234), fmt_count(2.0)) == ("does not fit", "1,234", "2")
    assert (fmt_ratio(0.876), fmt_ratio(1234.5)) == ("0.88", "1,234.50")
    # 131,072 = 128 × 1,024; 2,097,152 = 2 × 1,048,576; 1,536 = 1.5 K stays K (1,536 = 1,024 + 512: 1.5 K)
    assert (fmt_k(131072), fmt_k(2097152), fmt_k(1048576), fmt_k(1024)) == ("128K", "2M", "1M", "1K")
    assert (fmt_k(1536), fmt_k(1000), fmt_k(512), fmt_k(3 * 1048576 + 1024)) == ("1536", "1000", "512", "3073K")
    assert fmt_k(1536 * 1024) == "1536K"                         # 1.5 Mi: not a whole number of Mi
    assert fmt_k(0) == "0"                                       # no tokens: neither 0M nor 0K


def test_times_in_s_ms_and_microseconds_at_each_boundary():
    assert (fmt_time(None), fmt_time(1), fmt_time(1234.5)) == ("—", "1.00 s", "1,234.50 s")
    assert (fmt_time(0.999), fmt_time(1e-3), fmt_time(0.0125)) == ("999.0 ms", "1.0 ms", "12.5 ms")
    assert (fmt_time(0.000999), fmt_time(2.5e-6)) == ("999 µs", "2 µs")     # 2.5 rounds to even: 2


def test_a_table_aligns_names_left_and_numbers_right():
    # widths: "name"/"gpt2" 4, "bytes"/"12" 5; two spaces between; trailing spaces cut
    assert table([["gpt2", "12"], ["a", "3"]], ["name", "bytes"]) == (
        "name  bytes\n"
        "----  -----\n"
        "gpt2     12\n"
        "a         3")
    assert table([["x", "y"]], ["a", "b"], left=(0, 1)) == "a  b\n-  -\nx  y"
    # all right-aligned: a narrow value keeps its leading spaces (only trailing ones are cut)
    assert table([["1"]], ["ab"], left=()) == "ab\n--\n 1"
