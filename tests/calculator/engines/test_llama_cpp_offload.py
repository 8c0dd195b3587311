"""Which llama.cpp tensors and buffers go to the GPU and which stay on the host (engines/llama_cpp.py:
``gpu_layers``, ``place_weights``, ``place_cache``), worked by hand from llama.cpp's source and held against
published logs of split runs (each with its source in
part1_capacity/experiments/engine/data/llama_cpp_offload_logs.json): every logged buffer within 2 %."""
from dataclasses import replace

import pytest

from part1_capacity.calculator.engines import llama_cpp as rules
from part1_capacity.experiments.engine import offload_logs as logs

MIB = 2 ** 20


@pytest.mark.parametrize("point", logs.published_points(), ids=lambda p: p["id"])
def test_published_split_runs_reproduce(point):
    assert point["source"] and point["shape_source"]
    for key, err in logs.errors(point).items():
        assert err is None or abs(err) <= logs.TOLERANCE, (key, err)


def test_the_output_layer_goes_first_then_the_last_layers():
    # the vendored llama-model.cpp: i_gpu_start = max(n_layer + 1 − ngl, 0), the output layer is "layer n_layer"
    assert rules.gpu_layers(10, 1) == (range(10, 10), True)
    assert rules.gpu_layers(10, 4) == (range(7, 10), True)
    assert rules.gpu_layers(10, 11) == (range(0, 10), True)
    assert rules.gpu_layers(10, rules.ALL_LAYERS) == (range(0, 10), True)
    assert rules.gpu_layers(10, 0) == (range(10, 10), False)
    # before llama.cpp pull request #18148: i_gpu_start = max(n_layer − ngl, 0), the output layer only past n_layer
    assert rules.gpu_layers(10, 4, output_first=False) == (range(6, 10), False)
    assert rules.gpu_layers(10, 10, output_first=False) == (range(0, 10), False)
    assert rules.gpu_layers(10, 11, output_first=False) == (range(0, 10), True)


def test_weights_by_hand():
    # 10 layers of 9 bytes (4 of them experts), embedding 5, untied output 5: -ngl 4 puts the output and layers
    # 7–9 on the GPU, keeps layers 0–6 and the embedding on the host (an older build: layers 6–9, the output on the host)
    t = rules.uniform_tensors(100.0, 40.0, 10, 5.0, tied=False)
    w = rules.place_weights(t, 4)
    assert w["accelerator"]["total"] == 3 * 9 + 5 and w["host"]["total"] == 7 * 9 + 5
    w = rules.place_weights(t, 4, output_first=False)
    assert w["accelerator"]["total"] == 4 * 9 and w["host"]["total"] == 6 * 9 + 5 + 5
    # -ngl 999 --n-cpu-moe 3: every layer and the output on the GPU, the experts of layers 0–2 on the host
    w = rules.place_weights(t, rules.ALL_LAYERS, 3)
    assert w["host"] == {"token_embd": 5.0, "layers": 0.0, "experts": 12.0, "output": 0.0, "total": 17.0}
    assert w["accelerator"]["total"] == 10 * 9 - 12 + 5
    # --n-cpu-moe names the FIRST layers: with -ngl 4 (layers 7–9 offloaded) --n-cpu-moe 3 moves nothing more
    assert rules.place_weights(t, 4, 3) == rules.place_weights(t, 4)
    # tied: on the host the output shares the embedding's bytes; on the GPU it is a duplicate
    tied = replace(t, tied=True)
    assert rules.place_weights(tied, 4, output_first=False)["host"]["output"] == 0
    assert rules.place_weights(tied, 4)["accelerator"]["output"] == 5


def test_cache_follows_its_layer_unless_no_kv_offload():
    layers = (1.0,) * 10
    assert rules.place_cache(layers, 4) == {"accelerator": 3.0, "host": 7.0}          # the output layer has none
    assert rules.place_cache(layers, 4, output_first=False) == {"accelerator": 4.0, "host": 6.0}
    assert rules.place_cache(layers, 4, kv_offload=False) == {"accelerator": 0.0, "host": 10.0}


def _with(point, **flags):
    return {**point, "flags": {**point["flags"], **flags}}


def test_wrong_rules_miss_the_published_logs():
    pts = {p["id"]: p for p in logs.published_points()}
    # the output head on the GPU beside the 30 layers: Qwen3-30B-A3B at -ngl 30 would hold 243 MiB more there
    p = pts["qwen3-30b-a3b-ngl30"]
    t = logs.tensors(p)
    wrong = rules.place_weights(t, 30, output_first=False)["accelerator"]["total"] + t.output
    assert abs(wrong / MIB / p["logged"]["accelerator_weights_mib"] - 1) > logs.TOLERANCE
    # the output layer offloaded last in a build after the change: OLMoE at -ngl 1 held the output head alone
    p = pts["olmoe-1b-7b-ngl1"]
    wrong = logs.predict(_with(p, output_first=False))["accelerator_weights_mib"]     # a layer, not the output
    assert abs(wrong / p["logged"]["accelerator_weights_mib"] - 1) > logs.TOLERANCE
    # the input embedding offloaded with the layers: the host buffers of full offloads would be empty
    for key in ("command-r-35b-all-layers", "glm-4-32b-all-layers", "qwen3-30b-a3b-all-layers"):
        wrong = logs.predict(pts[key])["host_weights_mib"] - logs.tensors(pts[key]).token_embd / MIB
        assert abs(wrong / pts[key]["logged"]["host_weights_mib"] - 1) > logs.TOLERANCE
    # the cache kept on the GPU despite --no-kv-offload
    assert logs.predict(_with(pts["command-a-111b-no-kv-offload"], kv_offload=True))["kv_layers_on"] != "host"
    # the cache of the host's layers on the GPU: Mixtral at -ngl 0 logged all 64 MiB on the host
    assert logs.predict(_with(pts["mixtral-8x7b-ngl0"], n_gpu_layers=33))["host_kv_mib"] == 0
