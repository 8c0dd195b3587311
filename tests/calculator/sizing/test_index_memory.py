"""`capacity index`: index bytes from lesson 05's formulas (checked against files FAISS writes), E3's law applied."""
import json

import numpy as np
import pytest

from part0_foundations.l05_rag import index as l05
from part1_capacity.calculator.sizing import index_memory as im
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.experiments.page_cache import index as e3_index

GB = 10**9


def test_e3_writes_lesson_05s_flat_layout(tmp_path):
    faiss = pytest.importorskip("faiss")
    d, n = 16, 300
    ref = faiss.IndexFlatL2(d)
    ref.add(np.random.default_rng(1).random((n, d), dtype=np.float32))
    written = tmp_path / "faiss.index"
    faiss.write_index(ref, str(written))
    # One count of the bytes before the vectors: 4 (fourcc) + 33 (common header) + 8 (vector length) = 45.
    assert written.stat().st_size == l05.flat_index_bytes(n, d) == e3_index.file_bytes(n, d) == 45 + 4 * n * d
    assert e3_index.vectors_offset(d) == l05.FOURCC + l05.HEADER_BYTES + 8 == 45
    assert written.read_bytes()[:45] == e3_index.header(d, n)  # E3's packed header is FAISS's, byte for byte


@pytest.mark.parametrize("n, d, m", [(2000, 32, 16), (3000, 16, 8)])
def test_hnsw_formula_against_a_real_file(n, d, m):
    faiss = pytest.importorskip("faiss")
    index = faiss.IndexHNSWFlat(d, m)
    index.add(np.random.default_rng(0).random((n, d), dtype=np.float32))
    real = faiss.serialize_index(index).size
    # Random levels: the expectation is within a fraction of a percent of one real file.
    assert abs(l05.hnsw_flat_index_bytes(n, d, m) / real - 1) < 0.005
    # By hand, the level-0 part alone: 2·M int32 neighbour slots per vector, plus level and offset, plus vectors.
    assert real > n * (4 * 2 * m + 4 + 8 + 4 * d)


def _save(tmp_path, name, index_bytes, avail_at_knee, confirmed=True, baselines=True, node="?", host_mem=25 * GB):
    run = {"stop_reason": "past_knee_limit", "index_bytes": index_bytes, "host_mem_bytes": host_mem,
           "record": {"host": {"node": node}},
           "knee_p99": {"confirmed": confirmed, "mem_available_bytes": avail_at_knee, "hog_bytes": 10 * GB},
           "cycles": [{"mem_available_bytes": 22 * GB}]}
    if baselines:
        run["baselines"] = {"idle_p99_us": 1.0}
    (tmp_path / name).write_text(json.dumps(run))


def test_law_is_index_plus_largest_hot_cache_measured_under_the_hog(tmp_path):
    _save(tmp_path, "e3_index5gb.json", 5 * GB, 6 * GB)         # 1.0 GB above the index
    _save(tmp_path, "e3_index2.5gb.json", 2.5 * GB, 3.7 * GB)   # 1.2 GB above
    _save(tmp_path, "e3_index1gb.json", 1 * GB, 9 * GB, confirmed=False)        # unconfirmed: left out
    _save(tmp_path, "e3_index0.5gb.json", 0.5 * GB, 9 * GB, baselines=False)    # the old rule: left out
    runs = im.knee_runs(tmp_path)
    assert [r.file for r in runs] == ["e3_index2.5gb.json", "e3_index5gb.json"]
    assert runs[1].ratio == 1.2 and runs[0].hot_cache_bytes == 1.2 * GB
    plan = im.plan_index("flat", vectors=1_000_000, dim=384, host_memory_bytes=8 * GB, results_dir=tmp_path)
    assert plan.index_bytes == 45 + 4 * 1_000_000 * 384                       # 1,536,000,045 bytes
    assert plan.hot_cache_bytes == 1.2 * GB
    assert plan.host_memory_needed_bytes == 1_536_000_045 + 1_200_000_000
    assert plan.knee_ratio == pytest.approx(2_736_000_045 / 1_536_000_045)
    assert plan.headroom_bytes == 8 * GB - 2_736_000_045 and plan.p99_flat
    # The original study's host: 6.67 GB available at the knee of a 5 GB index → 1.67 GB of other hot cache.
    study_host = im.plan_index("flat", 1_000_000, 384, host_memory_bytes=3 * GB, hot_cache=1.67 * GB)
    assert study_host.headroom_bytes == 3 * GB - 1_536_000_045 - 1_670_000_000 and not study_host.p99_flat


def test_a_knee_below_the_index_size_gives_no_negative_hot_cache(tmp_path):
    _save(tmp_path, "e3_index2.5gb.json", 2.5 * GB, 2.38 * GB)
    assert im.plan_index("flat", 1000, 8, results_dir=tmp_path).hot_cache_bytes == 0


def test_ivf_and_hnsw_use_lesson_05s_formulas(tmp_path):
    _save(tmp_path, "e3_index5gb.json", 5 * GB, 5 * GB)
    ivf = im.plan_index("ivf", 10_000, 64, results_dir=tmp_path)
    assert ivf.nlist == 100 and ivf.index_bytes == l05.ivf_flat_index_bytes(10_000, 64, 100)
    hnsw = im.plan_index("hnsw", 10_000, 64, hnsw_m=16, results_dir=tmp_path)
    assert hnsw.index_bytes == l05.hnsw_flat_index_bytes(10_000, 64, 16) and hnsw.headroom_bytes is None


@pytest.mark.parametrize("kwargs, field", [
    (dict(kind="annoy", vectors=10, dim=4), "type"),
    (dict(kind="flat", vectors=0, dim=4), "vectors"),
    (dict(kind="flat", vectors=10, dim=10**6), "dim"),
    (dict(kind="ivf", vectors=10, dim=4, nlist=11), "nlist"),
    (dict(kind="flat", vectors=10, dim=4, host_memory_bytes=float("nan")), "host-memory-gb"),
    (dict(kind="flat", vectors=10, dim=4, hot_cache=float("inf")), "hot-cache-gb"),
    (dict(kind="flat", vectors=10, dim=4, hot_cache=-1e9), "hot-cache-gb"),
])
def test_bad_input_names_the_field(kwargs, field):
    with pytest.raises(InputError, match=f"^{field}:"):
        im.plan_index(**kwargs)


def test_cli_index_json_keys(capsys, tmp_path, monkeypatch):
    from part1_capacity import cli

    _save(tmp_path, "e3_index5gb.json", 5 * GB, 6 * GB)
    monkeypatch.setattr(im, "RESULTS", tmp_path)
    assert cli.main(["index", "--vectors", "1000000", "--dim", "384", "--type", "flat",
                     "--host-memory-gb", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"index_bytes", "hot_cache_bytes", "host_memory_needed_bytes", "headroom_bytes", "knee_ratio",
            "p99_flat"} <= out.keys()
    assert out["host_memory_needed_bytes"] == 1_536_000_045 + 1 * GB
    assert out["headroom_bytes"] == 8 * GB - 1_536_000_045 - 1 * GB
    assert cli.main(["index", "--vectors", "-5", "--dim", "384", "--type", "flat"]) == 2
    assert "vectors:" in capsys.readouterr().err


def test_the_hot_cache_is_the_hosts_own_and_another_hosts_default_warns(tmp_path, capsys, monkeypatch):
    here = im.Host("lab", 16 * GB)
    _save(tmp_path, "e3_a.json", 5 * GB, 5.5 * GB, node="lab", host_mem=16 * GB)         # +0.5 GB on this host
    _save(tmp_path, "e3_b.json", 5 * GB, 7 * GB, node="lab", host_mem=32 * GB)           # +2 GB: same node, more memory
    _save(tmp_path, "e3_c.json", 5 * GB, 8 * GB, node="desk", host_mem=16 * GB)          # +3 GB: another node
    mine = im.plan_index("flat", 1000, 8, results_dir=tmp_path, host=here)
    assert (mine.hot_cache_bytes, mine.hot_cache_warning) == (0.5 * GB, None)
    assert im.plan_index("flat", 1000, 8, results_dir=tmp_path, host=im.Host("lab", 16.1 * GB)).hot_cache_bytes \
        == 0.5 * GB                                                                      # within 1 %: the same host
    elsewhere = im.plan_index("flat", 1000, 8, results_dir=tmp_path, host=im.Host("laptop", 8 * GB))
    assert elsewhere.hot_cache_bytes == 3 * GB                                           # the largest of all: safe side
    assert elsewhere.hot_cache_warning == (
        "hot-cache-gb: no E3 run was measured on this host (laptop, 8.00 GB); the default 3.00 GB comes from desk, "
        "16.00 GB; lab, 16.00 GB; lab, 32.00 GB. Measure yours with `capacity e3` on this host (it prints the hot "
        "cache) and pass --hot-cache-gb")
    given = im.plan_index("flat", 1000, 8, results_dir=tmp_path, host=im.Host("laptop", 8 * GB), hot_cache=GB)
    assert given.hot_cache_warning is None
    # the command prints the warning on stderr, the JSON carries it
    from part1_capacity import cli

    monkeypatch.setattr(im, "RESULTS", tmp_path)
    monkeypatch.setattr(im, "this_host", lambda: im.Host("laptop", 8 * GB))
    assert cli.main(["index", "--vectors", "1000", "--dim", "8", "--type", "flat", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["hot_cache_warning"] == elsewhere.hot_cache_warning
    assert captured.err.strip() == "warning: " + elsewhere.hot_cache_warning
