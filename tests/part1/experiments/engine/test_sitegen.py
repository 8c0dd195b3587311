"""The engine-checks page is generated from saved runs: tables, findings and charts (no measurement, seconds)."""

import pytest

from part1_capacity.experiments.engine import sitegen
from part1_capacity.experiments.engine.common import load_result


def _level(t, mb, pp, tg, pred_pp=100.0, pred_tg=10.0):
    return {"type": t, "file_bytes": mb * 1e6, "bits_per_weight": 8.0, "pp512_tps": pp, "pp512_stddev": 1.0,
            "tg128_tps": tg, "tg128_stddev": 0.1, "predicted_pp512_tps": pred_pp, "predicted_tg128_tps": pred_tg,
            "bandwidth_fraction": 0.5, "matmul_peak_fraction": 0.5, "bench_command": "llama-bench -m x"}


def test_findings_detect_prefill_order_against_size():
    # Sizes fall F16 > Q8_0 > Q5_0 > Q4_K_M. Prefill rising with every smaller file is monotonic; a dip is not.
    rising = {"levels": [_level("F16", 100, 10, 1), _level("Q8_0", 53, 20, 2), _level("Q5_0", 34, 30, 3),
                         _level("Q4_K_M", 30, 40, 4)]}
    dipping = {"levels": [_level("F16", 100, 10, 1), _level("Q8_0", 53, 30, 2), _level("Q5_0", 34, 12, 3),
                          _level("Q4_K_M", 30, 25, 4)]}
    assert "Prefill is monotonic" in sitegen.e2_findings(rising)
    text = sitegen.e2_findings(dipping)
    assert "Prefill is not monotonic" in text
    # F16 → Q4_K_M: file 100/30 = 3.33× smaller, decode 4/1 = 4.00× faster.
    assert "3.33× smaller" in text and "tg128 is 4.00× as fast" in text


def test_e1_tables_have_one_row_per_context_and_type():
    r = {"by_kv_type": [
        {"kv_type": "f16", "cells": [2048, 4096], "reported_bytes": [2 * 2 ** 20, 4 * 2 ** 20],
         "log_lines": ["llama_kv_cache: size =    2.00 MiB (...)", "llama_kv_cache: size =    4.00 MiB (...)"],
         "formula_bytes_per_token": 1024, "slope_bytes_per_token": 1024.0, "intercept_bytes": 0.0, "match": True}]}
    per_ctx, summary = sitegen.e1_tables(r)
    assert per_ctx.count("\n| f16 |") == 2 and "`size = 4.00 MiB`" in per_ctx
    assert "| f16 | 1,024.00 | 1,024 | 0 | yes |" in summary


def test_build_from_saved_results(tmp_path):
    sitegen.build(tmp_path)
    for name in ("e1_table.md", "e1_summary.md", "e1_run.md", "e2_table.md", "e2_findings.md", "host_table.md"):
        assert (tmp_path / name).stat().st_size > 0
    for name in ("e2_prefill.png", "e2_decode.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    e2 = load_result("e2")
    if e2:  # the saved run's levels all appear in the table
        table = (tmp_path / "e2_table.md").read_text()
        assert all(f"| {lv['type']} |" in table for lv in e2["levels"])
        assert (e2.get("date_utc") or e2["date"]) in (tmp_path / "e2_run.md").read_text()


def _structure_row(selector, structure, arch, match):
    case = {"context": 4096, "n_seq": 4}
    return {"selector": selector, "structure": structure, "architecture": arch, "cases": [case],
            "reported": {"K": [2 ** 20], "V": [2 ** 20]}, "predicted": {"K": [2 ** 20], "V": [2 ** 20]},
            "law": {"K": [2 ** 20], "V": [2 ** 20]}, "details": [{**case, "match": match}], "match": match}


def test_e1_structures_table_and_confirmations():
    r = {"structures": [_structure_row("swa", "sliding_window", "gemma3", True),
                        _structure_row("ssm", "ssm_hybrid", "nemotron_h", False)]}
    table = sitegen.e1_structures_table(r)
    assert '<a id="e1-swa-gemma3"></a>' in table and "| 1/1 |" in table and "| 0/1 |" in table
    # only a structure whose every buffer matched counts as confirmed
    assert sitegen.e1_confirmations(r) == {"sliding_window": [("gemma3", "e1-swa-gemma3")]}


def test_calculator_page_says_confirmed_or_computed_only():
    from part1_capacity.pages import sitegen as calc

    confirmed = {"mla": [("deepseek2", "e1-mla-deepseek2")]}
    assert calc.engine_check("mla", confirmed).endswith("(E1: [`deepseek2`](engine_checks.md#e1-mla-deepseek2))")
    assert calc.engine_check("gqa", confirmed) == "computed only"
    text = calc.worked_examples(confirmed)
    assert text.count("computed only") == 3 and text.count("engine_checks.md#e1-mla-deepseek2") == 1


def test_the_studys_hybrid_figure_is_set_beside_the_courses_with_the_reason():
    """The study's 0.75 GB for Nemotron-3-Nano at 128K is its attention cache alone: by hand 6 full-attention
    layers × 2 (K, V) × 2 K/V heads × 128 × 2 B = 6 KiB per token, × 131,072 = 768 MiB = 0.75 GiB; the course's
    figure adds the Mamba-2 state (23 layers × 542,720 × 4 B = 47.6 MiB), 815.6 MiB in all."""
    from part1_capacity.pages import sitegen as calc

    text = calc.worked_examples({})
    line = next(ln for ln in text.splitlines() if "Nemotron-3-Nano" in ln)
    assert "holds **815.6 MiB**" in line
    assert "The original study gave 0.75 GB for it at this length: its attention cache alone, 768.0 MiB here " \
           "(0.75 GiB); the course adds the recurrent state, 47.6 MiB" in line


def test_calculator_page_engines_table_has_law_llama_cpp_and_vllm():
    from part1_capacity.pages import sitegen as calc

    text = calc.engines_table()
    assert "| structure | model | tensor-parallel ranks | law | llama.cpp | vLLM |" in text
    assert text.count("\n| ") == 4                      # the four structures (the header starts the text)
    assert "768 cells" in text and "2,096 tokens" in text   # the window cache and the hybrid block size


def test_stream_table_ratios_and_ranges():
    r = {"threads": 2, "date_utc": "2026-01-01T00:00:00", "long_run_gbs": [40.0, 60.0], "long_run_window_s": 0.25,
         "rounds": [{"llama_bench_gbs": 40.0, "matmul_bench_gbs": 50.0}, {"llama_bench_gbs": 66.0, "matmul_bench_gbs": 60.0}]}
    text = sitegen.e2_stream(r)
    assert "| 1 | 40.0 | 50.0 | 0.80 |" in text and "| 2 | 66.0 | 60.0 | 1.10 |" in text
    assert "llama-bench ranges 40–66 GB/s and matmul-bench 50–60" in text and "(median 0.95)" in text
    assert "saved run" in sitegen.e2_stream(None)


def test_drift_lists_each_rounds_streaming_rate():
    def run(t, sec, rnd, th=2):
        return {"kind": "stream", "threads": th, "type": t, "k": 1000, "m": 1000, "copies": 1, "seconds": [sec],
                "round": rnd}
    kern = {"date_utc": "2026-01-01T00:00", "runs": [run("f32", 4e-4, 0), run("f32", 1e-4, 1),   # 4 MB: 10, 40 GB/s
                                                        run("f16", 1e-4, 0), run("f16", 2e-4, 1)]}  # 2 MB: 20, 10
    text = sitegen.e2_drift(kern, {})
    assert "| 2 | 10, 40 | 20, 10 |" in text


def test_misses_name_every_level_outside_its_goal():
    from part1_capacity.experiments.engine import quant_ladder as ql

    ladders = ql.saved_ladders()
    rows = ql.validation_rows(ladders)
    text = sitegen.e2_misses(ladders)
    for x in rows:
        named = f"{x['type']} decode, {x['params'] / 1e9:.2f} B at {x['threads']} thread" in text
        assert named == (not x["tg128_ok"]), x


def test_study_claims_are_counted_on_the_ladders():
    # decode gain vs prefill gain against F32, per rung: F16 (2.0 vs 1.1), Q8_0 (3.0 vs 1.2), Q5_0 (1.1 vs 1.5: prefill
    # wins), Q4_K_M (4.0 vs 1.0) → 3 of 4; F16 prefill 1.1× F32's
    levels = [_level("F32", 400, 100, 10), _level("F16", 200, 110, 20), _level("Q8_0", 106, 120, 30),
              _level("Q5_0", 69, 150, 11), _level("Q4_K_M", 60, 100, 40)]
    ladders = {"e2": {"levels_by_threads": {"2": levels}}}
    build = {"build": {"avx2": 1, "avx512_vnni": 0}, "cpu": {"avx2": 1, "avx512_vnni": 1}}
    text = sitegen.study_claims(ladders, None, build)
    assert "in 3 of 4 comparisons" in text
    assert "F16 prefill is 1.10–1.10× F32's" in text
    assert "AVX2 on, AVX512_VNNI off — while this CPU has AVX512_VNNI" in text


def test_e1_against_the_studys_slope_names_the_layers():
    text = sitegen.e1_study({"slope_bytes_per_token": 40960.0,
                             "model": {"n_kv_heads": 4, "head_dim": 128, "n_layers": 20}})
    # gpt-oss-20b: 24 layers × 8 × 64 × 2 × 2 B = 48 KiB at full length; 4 × 128 = 8 × 64 = 512 values per layer
    assert "48.0 KiB per token" in text and "40.0 KiB" in text and "all 24 of its layers" in text
    assert "The width per layer is the same; the difference is the layer count" in text
    # the study does not name its model: gpt-oss-20b is this course's inference, and the page says so
    assert "The study does not name its model; its figure fits gpt-oss-20b" in text
    assert "this course's inference, not the study's word" in text


def test_the_build_reports_the_instruction_sets_the_makefile_asks_for():
    import re

    from part1_capacity.experiments.engine import build_features as bf

    # `make test` always builds llama.cpp: a missing library is a broken set-up, not a reason to skip
    assert bf.LIB.is_file(), f"no llama.cpp build at {bf.LIB} (make llama)"
    flags = re.search(r"^GGML_FLAGS := (.*)$", (bf.REPO / "Makefile").read_text(), re.M).group(1)
    asked = {m.lower() for m in re.findall(r"-DGGML_(\w+)=ON", flags)}
    got = bf.build_features()
    assert "native=off" in flags.lower()
    for name in ("avx", "avx2", "fma", "f16c"):
        assert got[name] == int(name in asked), name
    for name in ("avx512", "avx512_vnni", "avx_vnni"):     # never asked for: the portable build leaves them out
        assert got[name] == 0, name


SMAPS = """\
7f0000000000-7f0040000000 r--s 00000000 fe:00 123                        /scratch/x/model-f32.gguf
Size:            1048576 kB
Rss:              600000 kB
AnonHugePages:         0 kB
FilePmdMapped:    509952 kB
VmFlags: rd sh mr mw me ms
7f0040000000-7f0060000000 r--s 40000000 fe:00 123                        /scratch/x/model-f32.gguf
Rss:              400000 kB
FilePmdMapped:    348160 kB
55d000000000-55d020000000 rw-p 00000000 00:00 0
Rss:              524288 kB
AnonHugePages:    522240 kB
FilePmdMapped:         0 kB
"""


def test_smaps_are_summed_over_the_files_mappings_only():
    from part1_capacity.experiments import bench_pages

    # the model file's two mappings: 600,000 + 400,000 kB resident, 509,952 + 348,160 in 2 MB pages
    assert bench_pages.parse_smaps(SMAPS, "model-f32.gguf") == {"Rss": 1_000_000, "FilePmdMapped": 858_112,
                                                                 "AnonHugePages": 0}
    assert bench_pages.parse_smaps(SMAPS)["AnonHugePages"] == 522_240            # every mapping: the anonymous one
    assert bench_pages.parse_smaps(SMAPS, "other.gguf") == {"Rss": 0, "FilePmdMapped": 0, "AnonHugePages": 0}


def test_pages_table_pairs_each_rounds_runs():
    def run(t, pages, gbs, rnd, huge):
        return {"type": t, "threads": 1, "pages": pages, "gbs": gbs, "round": rnd, "anon_huge_mb": huge,
                "weight_mb": 512.0}
    r = {"date_utc": "2026-01-01 00:00 UTC", "load_average_at_start": 3.0, "load_average_at_end": 4.0,
         "llama_bench_mapping_mb": {"rss": 2000.0, "pmd_mapped": 1700.0},
         "runs": [run("f32", "4K", 10.0, 0, 0), run("f32", "2M", 15.0, 0, 530), run("f32", "4K", 8.0, 1, 0),
                  run("f32", "2M", 16.0, 1, 540)]}
    from part1_capacity.experiments import bench_pages

    assert bench_pages.ratios(r) == {(1, "f32"): [1.5, 2.0]}                     # 15 ÷ 10, 16 ÷ 8
    text = sitegen.e2_pages(r)
    assert "| 1 | F32 | 10.0, 8.0 | 15.0, 16.0 | 1.75 (1.50–2.00) |" in text
    assert "1,700 of its 2,000 MB (85%)" in text and "530–540 MB in the 2 MB runs, 0–0 MB in the 4 KB runs" in text
    assert "saved run" in sitegen.e2_pages(None)


def test_what_a_decode_step_reads_is_taken_from_the_files_tensors():
    # 1,000 matmul weights, 100 output, 100 embedding: the output is 100 ÷ 1,200 = 8.33 % of the file's weights
    lv = {"type": "F32", "weight_types": {"matmul": {"f32": 1000}, "output": {"f32": 100}, "lookup": {"f32": 100}}}
    ladders = {"e2": {"model": {"n_params": 1200, "hidden_size": 10}, "levels": [lv]}}
    text = sitegen.e2_reads(ladders)
    assert "1,000 matmul weights and 100 of the output projection (8.33% of" in text
    assert "100-weight embedding table (8.33%) one row of 10 is read" in text
    tied = {"e2": {**ladders["e2"], "levels": [{**lv, "weight_types": {**lv["weight_types"], "output": {}}}]}}
    with pytest.raises(RuntimeError, match="tied"):
        sitegen.e2_reads(tied)
