"""Every accelerator's memory as its runtime reports it, the marketed figure beside it, and the plan counting the
runtime's: the data file, `capacity list accelerators`, `plan --json` and a user's accelerator file."""
import json

import pytest

from part1_capacity.calculator.hardware.accelerators import (MARKETED_SOURCE, accelerator_from_dict,
                                                            bundled_accelerators, load_accelerator, runtime_memory)
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.plan.plan import make_plan
from tests.support.in_process import capacity

GIB = 2 ** 30


def test_every_bundled_accelerator_carries_a_runtime_total_with_its_source():
    for a in bundled_accelerators().values():
        assert a.engine_memory_bytes > 0 and a.engine_memory_source.strip(), a.id
        # what a runtime reports is at most what is installed (a marketed "GB" may be binary: up to 2^30/10^9 more)
        assert a.engine_memory_bytes <= a.memory_bytes * GIB / 1e9 * 1.0001, a.id
    accs = bundled_accelerators()
    # the figures the logs and OOM messages give, in GiB (typed from the sources, not from the program)
    for aid, gib in {"h100": 79.19, "a100": 79.15, "h200": 139.80, "l40s": 44.42, "l4": 22.05, "rtx-4090": 23.64,
                     "rtx-3090": 23.58, "mi300x": 191.98}.items():
        assert accs[aid].engine_memory_bytes == pytest.approx(gib * GIB), aid


def test_the_plan_counts_the_runtime_total_and_says_so_in_json():
    d = make_plan("qwen2.5-7b", "a100", context=4096, batch=1).to_dict()
    assert d["accelerator_memory_bytes"] == pytest.approx(79.15 * GIB)      # not 80e9 B = 74.5 GiB
    assert d["accelerator_memory_marketed_bytes"] == 80e9
    assert "79.15" in d["accelerator_memory_source"]
    # the CLI prints the same keys
    out = capacity("plan", "--model", "qwen2.5-7b", "--accelerator", "l4", "--context", "4096", "--json")
    j = json.loads(out.stdout)
    assert out.returncode == 0 and j["accelerator_memory_bytes"] == pytest.approx(22.05 * GIB)


def test_the_plan_text_names_both_figures_with_their_units():
    out = capacity("plan", "--model", "qwen2.5-7b", "--accelerator", "rtx-4090", "--context", "4096")
    assert "23.64 GiB as the runtime reports it (marketed 24 GB)" in out.stdout


def test_list_accelerators_shows_both_columns_and_the_units_once():
    out = capacity("list", "accelerators").stdout
    head = out.splitlines()[0]
    assert "marketed GB" in head and "runtime GiB" in head
    assert out.count("2^30 bytes") == 1 and out.count("10^9 bytes") == 1
    row = next(line.split() for line in out.splitlines() if line.startswith("rtx-3090 "))
    assert row[2:4] == ["24", "23.58"]                 # sold as 24 GB, not the 26 GB 24 GiB would print as
    row = next(line.split() for line in out.splitlines() if line.startswith("gaudi3 "))
    assert row[3].endswith("*")                        # no runtime total found: the marketed bytes, starred


ACC = {"id": "mine", "bandwidth_gb_s": 1000, "bf16_tflops": 100}


def test_a_users_file_may_give_either_figure_named():
    marketed = accelerator_from_dict({**ACC, "memory_gb": 48})
    assert runtime_memory(marketed) == (48e9, MARKETED_SOURCE)
    seen = accelerator_from_dict({**ACC, "engine_memory_gib": 44.42})
    assert seen.runtime_memory_bytes == pytest.approx(44.42 * GIB) and seen.memory_bytes == seen.runtime_memory_bytes
    assert "given in" in runtime_memory(seen)[1]
    both = accelerator_from_dict({**ACC, "memory_gb": 48, "engine_memory_gib": 44.42,
                                  "engine_memory_source": "my nvidia-smi"})
    assert runtime_memory(both) == (pytest.approx(44.42 * GIB), "my nvidia-smi") and both.memory_bytes == 48e9


def test_a_runtime_total_above_the_installed_memory_is_refused():
    with pytest.raises(InputError, match="'engine_memory_gib' 30 GiB exceeds the memory installed"):
        accelerator_from_dict({**ACC, "memory_gb": 24, "engine_memory_gib": 30})
    # 24 "GB" that are binary (24 GiB) may report up to 24 GiB: allowed
    assert accelerator_from_dict({**ACC, "memory_gb": 24, "engine_memory_gib": 23.99}).engine_memory_bytes


def test_a_file_with_neither_figure_is_refused_naming_both(tmp_path):
    p = tmp_path / "acc.json"
    p.write_text(json.dumps(ACC))
    out = capacity("plan", "--model", "qwen2.5-7b", "--accelerator", str(p), "--context", "1024")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "'memory_gb'" in out.stderr and "'engine_memory_gib'" in out.stderr and "Traceback" not in out.stderr


def test_a_wrong_runtime_figure_would_be_caught():
    # the plan's usable memory moves with the runtime figure: a file with 40 GiB seen gives less than one with 44.42
    small = accelerator_from_dict({**ACC, "memory_gb": 48, "engine_memory_gib": 40})
    large = accelerator_from_dict({**ACC, "memory_gb": 48, "engine_memory_gib": 44.42})
    a = make_plan("qwen2.5-7b", small, context=4096).resolved.usable_bytes
    b = make_plan("qwen2.5-7b", large, context=4096).resolved.usable_bytes
    assert b - a == pytest.approx(4.42 * GIB * 0.9)
    assert load_accelerator("h100").runtime_memory_bytes == pytest.approx(79.19 * GIB)


# --- no silent layout change --------------------------------------------------------------------------------------
QWEN235 = str(__import__("pathlib").Path(__file__).parents[2] / "data" / "configs" / "qwen3-235b-a22b" / "config.json")


def test_a_pinned_tensor_degree_with_stages_added_is_said_in_text_and_json():
    # Qwen3-235B-A22B bf16 ≈ 470 GB; tensor 4 on L40S (44.42 GiB × 0.9 − 2 GiB = 40.8 GB each) holds 163 GB: the
    # search must add pipeline stages, and says so
    out = capacity("plan", "--model", QWEN235, "--accelerator", "l40s", "--context", "8192", "--tensor-parallel", "4",
                   "--engine", "vllm", "--json")
    d = json.loads(out.stdout)
    stages = d["parallelism"]["pipeline"]
    assert out.returncode == 0 and stages > 1
    assert d["layout_notice"].startswith("tensor parallelism pinned to 4: the search added "
                                         f"{stages} pipeline stages")
    assert d["engine_layout"] == {"tensor": 4, "pipeline": stages} and d["engine_pipeline_parallel"] == stages
    text = capacity("plan", "--model", QWEN235, "--accelerator", "l40s", "--context", "8192", "--tensor-parallel",
                    "4", "--engine", "vllm").stdout
    assert "layout: tensor parallelism pinned to 4" in text
    assert f"per worker of tensor 4 × pipeline {stages}" in text


def test_no_notice_when_nothing_or_everything_is_pinned():
    free = make_plan("qwen2.5-7b", "h100", context=4096).to_dict()
    assert free["layout_notice"] is None
    both = capacity("plan", "--model", QWEN235, "--accelerator", "l40s", "--context", "8192", "--tensor-parallel",
                    "4", "--pipeline-parallel", "4", "--json")
    assert json.loads(both.stdout)["layout_notice"] is None
    # a pinned tensor degree the search needs no stages for: nothing added, nothing said
    one = capacity("plan", "--model", "qwen2.5-7b", "--accelerator", "h100", "--context", "4096",
                   "--tensor-parallel", "2", "--json")
    assert json.loads(one.stdout)["layout_notice"] is None
