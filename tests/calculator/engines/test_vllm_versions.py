"""--vllm-version: the start-up rules that changed between vLLM releases, each read in a named log or source file
(engines/vllm_memory.py RELEASES), and the PCIe rule for non-torch memory at tensor parallelism."""
import json

import pytest

from part1_capacity.calculator.engines import vllm_memory as vm
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.hardware.accelerators import load_accelerator
from part1_capacity.calculator.readers.loader import load_model
from tests.support.in_process import capacity

GIB = 2 ** 30


@pytest.mark.parametrize("asked, rules, noted", [("0.19", "0.19", False), ("v0.19.0", "0.19", False),
                                                 ("0.10.2", "0.10", False), ("0.12.1", "0.10", True),
                                                 ("0.7.2", "0.6", True), ("0.20.1", "0.20", False),
                                                 ("0.21.0", "0.21", False), ("0.26.0", "0.21", True)])
def test_a_release_picks_the_newest_rules_not_newer_and_says_so(asked, rules, noted):
    r, notes = vm.release(asked)
    assert r.name == rules and bool(notes) == noted


@pytest.mark.parametrize("bad", ["0.5.4", "latest", "1", ""])
def test_releases_before_the_modelled_ones_or_not_releases_are_refused(bad):
    with pytest.raises(InputError, match="--vllm-version"):
        vm.release(bad)


def _startup(acc, tp, version, **kw):
    m = load_model("llama-3.1-8b")
    return vm.startup(m, load_accelerator(acc), 8192, 16.06e9, tp, flags=vm.StartupFlags(vllm_version=version, **kw))


def test_non_torch_memory_by_release_and_by_link():
    # tensor 2 over NVLink: 2.1 GiB per rank in v0.19 (llm-d, H100), 1.38 in v0.10.2 (H200 log), 3.58 in v0.6.5
    assert _startup("h100", 2, None).budget["non_torch_bytes"] == 2.1 * GIB
    assert _startup("h100", 2, "0.10").budget["non_torch_bytes"] == 1.38 * GIB
    assert _startup("h100", 2, "0.6.5").budget["non_torch_bytes"] == 3.58 * GIB
    # over PCIe only (an RTX 4090 pair, L40S): no NVLink buffers, 0.21 GiB (8 L40S, v0.10.2), and said so
    s = _startup("rtx-4090", 2, None)
    assert s.budget["non_torch_bytes"] == 0.21 * GIB and any("PCIe only" in n for n in s.notes)
    assert not any("PCIe only" in n for n in _startup("h100", 2, None).notes)


def test_v0_non_torch_memory_on_cards_without_nvlink():
    # V0 on GeForce logged far less than v0.6.5 on an H100 (1.79 GiB): 0.35 GiB alone (three RTX 3090 runs,
    # vllm issue #10517, v0.6.4) and 0.33 GiB per pipeline stage (two RTX 5090, issue #14452, v0.8.5)
    assert _startup("rtx-3090", 1, "0.6.4").budget["non_torch_bytes"] == 0.35 * GIB
    assert _startup("h100", 1, "0.6.5").budget["non_torch_bytes"] == 1.79 * GIB
    m, acc = load_model("llama-3.1-8b"), load_accelerator("rtx-5090")
    pp2 = vm.startup(m, acc, 8192, 16.06e9, 1, 2, flags=vm.StartupFlags(vllm_version="0.8.5"))
    assert pp2.budget["non_torch_bytes"] == 0.33 * GIB
    # a release without a separate PCIe figure keeps its own (v0.19 alone: 0.25 GiB on any card)
    assert _startup("rtx-3090", 1, None).budget["non_torch_bytes"] == 0.25 * GIB
    assert vm.non_torch_bytes(1, 1, None, vm.RELEASES["0.6"]) == 1.79 * GIB


def test_the_default_utilization_and_v0_scheduler_by_release():
    # no version given: the newest release modelled (the current one a user installs), v0.21's rules
    assert vm.DEFAULT_RELEASE == max(vm.RELEASES, key=lambda k: tuple(map(int, k.split("."))))
    assert _startup("h100", 1, None).budget == _startup("h100", 1, "0.21").budget
    assert _startup("h100", 1, "0.19").budget["utilization"] == 0.9
    assert _startup("h100", 1, "0.21").budget["utilization"] == 0.92          # after v0.19 (PR #38284)
    # V0 (v0.6): one step holds max(max_model_len, 2048) tokens and 256 sequences, whatever the accelerator;
    # above 32K contexts chunked prefill was on by default, 2,048 tokens a step
    s = _startup("h100", 1, "0.6")
    assert (s.flags["max_num_batched_tokens"], s.flags["max_num_seqs"]) == (8192, 256)
    long = vm.startup(load_model("llama-3.1-8b"), load_accelerator("h100"), 65536, 16.06e9,
                      flags=vm.StartupFlags(vllm_version="0.6"))
    assert long.flags["max_num_batched_tokens"] == 2048
    assert s.flags["vllm_version"] == "0.6" and s.to_fields()["engine_startup_source"] == "vLLM v0.6"


def test_the_sampler_pass_by_release_by_hand():
    # Llama-3.1-8B on H100 (v0.19 defaults: 8,192 tokens a step, 1,024 sequences): the sampler pass holds
    # 1,024 rows x 128,256 vocabulary x 14 B + 8,192 x 4,096 x 2 B of hidden state
    assert _startup("h100", 1, None).budget["activation_bytes"] == 1024 * 128256 * 14 + 8192 * 4096 * 2
    # v0.10 sorted for top-k/top-p: 38.5 B per logit
    assert _startup("h100", 1, "0.10").budget["activation_bytes"] == pytest.approx(1024 * 128256 * 38.5
                                                                                   + 8192 * 4096 * 2)


def test_the_cli_flag_and_its_refusals():
    out = capacity("plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "8192",
                   "--tensor-parallel", "2", "--engine", "vllm", "--vllm-version", "0.10.2", "--json")
    d = json.loads(out.stdout)
    assert out.returncode == 0 and d["engine_memory_budget"]["non_torch_bytes"] == 1.38 * GIB
    assert d["engine_startup_source"] == "vLLM v0.10"
    bad = capacity("plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "8192",
                   "--engine", "vllm", "--vllm-version", "0.4")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--vllm-version" in bad.stderr
    law = capacity("plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "8192",
                   "--vllm-version", "0.10")
    assert law.returncode == 2 and "only with --engine vllm" in law.stderr


def test_cuda_graph_memory_inside_the_budget_from_v0_21():
    # v0.21.0 turned VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS on by default (vllm/envs.py): the worker subtracts the
    # graphs' estimate from the requested memory (gpu_worker.py determine_available_memory). Same utilization, same
    # scheduler defaults: v0.21's KV memory is v0.20's less exactly CUDA_GRAPH_ESTIMATE (0.78 GiB), and it says so
    before = _startup("h100", 1, "0.20.1", gpu_memory_utilization=0.9)
    after = _startup("h100", 1, "0.21.0", gpu_memory_utilization=0.9)
    assert before.budget["cuda_graph_bytes"] == 0 and after.budget["cuda_graph_bytes"] == 0.78 * GIB
    assert before.kv_cache_memory_bytes - after.kv_cache_memory_bytes == pytest.approx(0.78 * GIB)
    assert any("inside this budget" in n for n in after.notes)
    assert not any("inside this budget" in n for n in before.notes)
    # --kv-cache-memory skips the profiling: the given figure stands, graphs or not
    given = _startup("h100", 1, "0.21", kv_cache_memory_bytes=20 * GIB)
    assert given.kv_cache_memory_bytes == 20 * GIB
