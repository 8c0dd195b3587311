"""`capacity plan --engine llama.cpp`: llama.cpp on one accelerator and the host's RAM (calculator/plan/offload.py) —
the bytes per device worked by hand, the proposed split at its exact boundary (it fits, one layer more or one
expert layer fewer on the host does not), the decode time of the split by hand, and `--emit llama.cpp` writing
the split's flags."""
import json

import pytest

from course.shared.units import GB, GIB
from part1_capacity.calculator.plan import offload
from part1_capacity.calculator.base.dtypes import get_dtype
from part1_capacity.calculator.engines import llama_cpp as rules
from part1_capacity.calculator.hardware.accelerators import load_accelerator
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.plan.resolve import Workload, resolve
from tests.support.in_process import capacity


def _r(model, acc="rtx-4090", **kw):
    kw = {"context": 8192, "kv_dtype": "fp16", "engine": "llama.cpp", **kw}
    return resolve(load_model(model), load_accelerator(acc), Workload(**kw))


def test_dense_split_by_hand():
    # Llama-3.1-70B at q4_k_m, -ngl 40: W = 70.55e9 × q4_k_m bytes; the embedding and the (untied) output head
    # 128,256 × 8,192 weights each at W's average bytes per weight; the rest spread over 80 layers. The vendored
    # llama.cpp offloads the output layer first, then the last 39 layers; 41 layers and the embedding stay on the host
    r = _r("llama-3.1-70b", weights_dtype="q4_k_m")
    W = 70.55e9 * get_dtype("q4_k_m").bytes
    embd = 128_256 * 8_192 * W / 70.55e9
    layer = (W - 2 * embd) / 80
    p = offload.placement(r, 40)
    acc, host = p["devices"]
    assert acc["weights_bytes"] == pytest.approx(39 * layer + embd) and acc["output_layer_bytes"] == pytest.approx(embd)
    assert host["weights_bytes"] == pytest.approx(41 * layer + embd)
    assert host["token_embd_bytes"] == pytest.approx(embd) and host["output_layer_bytes"] == 0
    # the cache: f16 K and V of 8,192 cells, 8 heads of 128, per layer; each layer's on its layer's side
    per_layer = 8192 * 8 * 128 * 2 * 2
    assert acc["kv_bytes"] == pytest.approx(39 * per_layer) and host["kv_bytes"] == pytest.approx(41 * per_layer)
    # decode: the host streams its layers (of the embedding one row is read) and their cache at 89.6 GB/s
    assert p["decode_host_s"] == pytest.approx((41 * layer + 41 * per_layer) / (89.6 * GB))
    # --no-kv-offload: every layer's cache on the host
    nkvo = offload.placement(r, 40, kv_offload=False)["devices"]
    assert nkvo[0]["kv_bytes"] == 0 and nkvo[1]["kv_bytes"] == pytest.approx(80 * per_layer)


def test_proposed_dense_split_is_the_largest_that_fits():
    r = _r("llama-3.1-70b", weights_dtype="q4_k_m")
    p = offload.propose(r)
    n = p["n_gpu_layers"]
    assert p["proposed"] and p["fits"] and 0 < n < 80
    assert not offload.placement(r, n + 1)["devices"][0]["fits"]


def test_moe_split_keeps_all_layers_and_fewest_experts_on_host():
    r = _r("gpt-oss-120b")
    p = offload.propose(r)
    k = p["n_cpu_moe"]
    assert p["proposed"] and p["n_gpu_layers"] > 36 and 0 < k < 36
    assert not offload.placement(r, rules.ALL_LAYERS, k - 1)["fits"]
    # the experts of the first k layers are on the host, the attention of every layer on the accelerator
    t = offload.model_tensors(r)
    host = p["devices"][1]
    assert host["experts_bytes"] == pytest.approx(k * t.layer_experts[0])


def test_nothing_fits_says_so():
    # Llama-3.1-405B bf16 (812 GB) on a 24 GB card and 64 GiB of RAM
    p = offload.propose(_r("llama-3.1-405b", kv_dtype="fp16"))
    assert not p["proposed"] and not p["fits"]


def test_host_memory_bounds_the_split():
    r = _r("gpt-oss-120b")
    small = offload.Host(memory_bytes=32 * GIB)
    assert not offload.propose(r, small)["fits"]         # ~60 GB of experts do not fit 32 GiB of RAM


def test_cli_json_placement_and_emit():
    base = ["plan", "--model", "gpt-oss-120b", "--accelerator", "rtx-4090", "--context", "8192", "--engine",
            "llama.cpp", "--kv-dtype", "fp16"]
    r = capacity(*base, "--json")
    d = json.loads(r.stdout)
    assert r.returncode == 0 and [x["device"] for x in d["placement"]] == ["accelerator", "host"]
    assert {"weights_bytes", "kv_bytes", "compute_buffer_bytes", "output_layer_bytes"} <= set(d["placement"][0])
    k = d["offload"]["n_cpu_moe"]
    r = capacity(*base, "--emit", "llama.cpp")
    assert r.returncode == 0 and "-ngl 999" in r.stdout and f"--n-cpu-moe {k}" in r.stdout
    r = capacity("plan", "--model", "llama-3.1-70b", "--accelerator", "rtx-4090", "--context", "8192",
                 "--engine", "llama.cpp", "--weights-dtype", "q4_k_m", "--kv-dtype", "fp16", "--gpu-layers", "30",
                 "--no-kv-offload", "--emit", "llama.cpp")
    assert r.returncode == 0 and "-ngl 30" in r.stdout and "-nkvo" in r.stdout and "--n-cpu-moe" not in r.stdout
    r = capacity("plan", "--model", "llama-3.1-70b", "--accelerator", "rtx-4090", "--context", "8192",
                 "--engine", "llama.cpp", "--weights-dtype", "q4_k_m", "--kv-dtype", "fp16")
    assert r.returncode == 0 and "the largest split that fits" in r.stdout and "decode:" in r.stdout


@pytest.mark.parametrize("argv,field", [
    (["--engine", "law", "--gpu-layers", "10"], "--gpu-layers"),
    (["--engine", "llama.cpp", "--cpu-moe", "4"], "--cpu-moe"),            # a dense model
    (["--engine", "llama.cpp", "--gpu-layers", "-1"], "--gpu-layers"),
    (["--engine", "llama.cpp", "--host-memory", "0"], "--host-memory"),
])
def test_bad_offload_input_is_one_line(argv, field):
    r = capacity("plan", "--model", "llama-3.1-70b", "--accelerator", "rtx-4090", "--context", "8192",
                 "--kv-dtype", "fp16", *argv)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and field in r.stderr


def test_cpu_moe_beyond_the_layers_is_refused():
    r = capacity("plan", "--model", "gpt-oss-120b", "--accelerator", "rtx-4090", "--context", "8192",
                 "--engine", "llama.cpp", "--kv-dtype", "fp16", "--cpu-moe", "37")
    assert r.returncode == 2 and "--cpu-moe" in r.stderr and "0..36" in r.stderr


def test_the_live_page_shows_fit_and_the_split_as_the_cli_computes_them():
    from part1_capacity.calculator.uses import browser

    d = json.loads(browser.plan("llama-3.1-70b", "rtx-4090", "8K", 1, "q4_k_m", "fp16", "llama.cpp"))
    n = offload.propose(_r("llama-3.1-70b", weights_dtype="q4_k_m"))["gpu_layers"]
    assert d["text"]["llama_cpp_split"].startswith(f"the output layer and {n} of 80 layers on the accelerator")
    assert d["text"]["fit_max_context"].startswith("none: the weights alone do not fit")
    d = json.loads(browser.plan("llama-3.1-8b", "rtx-4090", "4096", 1, "bf16", "bf16", "law"))
    from part1_capacity.calculator.uses.fit import fit
    f = fit(load_model("llama-3.1-8b"), load_accelerator("rtx-4090"), Workload(context=4096), "batch")
    assert d["text"]["fit_max_batch"] == f"{f.value:,} sequences at this context (memory)"
    assert d["text"]["llama_cpp_split"] == "choose the llama.cpp engine"


@pytest.mark.parametrize("model,acc", [("deepseek-v2-lite", "rtx-4090"),        # MLA, MoE with dense-first layers
                                       ("jamba-1.5-mini", "rtx-4090"),          # hybrid: Mamba + attention, MoE
                                       ("nemotron-h-8b", "rtx-3090"),           # hybrid, dense
                                       ("gemma-2-9b", "rtx-3090")])             # sliding window
def test_every_structure_places_all_its_bytes_once(model, acc):
    # whatever the split, the devices together hold the weights once (the embedding on the host, an untied head
    # once) and the engine's whole cache; -ngl 0 leaves the accelerator empty, -ngl 999 leaves the host the embedding
    r = _r(model, acc=acc, kv_dtype="fp16")
    from part1_capacity.calculator import engines
    cache = engines.allocate(r.model, r.workload, 1, "llama.cpp").kv_bytes_total
    t = offload.model_tensors(r)
    for ngl in (0, 1, r.model.n_layers // 2, rules.ALL_LAYERS):
        p = offload.placement(r, ngl)
        acc_d, host = p["devices"]
        dup = t.output if t.tied and p["output_on_accelerator"] else 0.0
        assert acc_d["weights_bytes"] + host["weights_bytes"] == pytest.approx(r.weights_bytes + dup)
        assert acc_d["kv_bytes"] + host["kv_bytes"] == pytest.approx(cache)
    assert offload.placement(r, 0)["devices"][0]["weights_bytes"] == 0
    assert offload.placement(r, rules.ALL_LAYERS)["devices"][1]["weights_bytes"] == pytest.approx(t.token_embd)


def test_a_tied_output_head_is_copied_to_the_gpu(tmp_path):
    # Gemma-2-9B ties its head to the embedding (256,000 × 3,584): all on the GPU, the GPU holds the duplicate and
    # every layer — the whole weights — and the host keeps the embedding
    r = _r("gemma-2-9b", acc="rtx-3090")
    t = offload.model_tensors(r)
    assert t.tied and not offload.model_tensors(_r("llama-3.1-8b")).tied
    acc, host = offload.placement(r, rules.ALL_LAYERS)["devices"]
    assert acc["weights_bytes"] == pytest.approx(r.weights_bytes) and host["weights_bytes"] == pytest.approx(t.token_embd)
    # a config.json says it too
    cfg = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "hidden_size": 64, "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 4096}
    for tie in (True, False):
        p = tmp_path / f"tie{tie}" / "config.json"
        p.parent.mkdir()
        p.write_text(json.dumps({**cfg, "tie_word_embeddings": tie}))
        assert offload.tied_embeddings(load_model(str(p))) is tie
