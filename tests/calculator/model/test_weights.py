"""Weight bytes: per-tensor-group sums and what a server loads, each figure against its primary source."""
import pytest

from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.model import weights
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.plan.plan import make_plan

GiB = 2 ** 30


@pytest.mark.parametrize("model, card_gib, old_gib", [("gpt-oss-20b", 12.8, 10.3), ("gpt-oss-120b", 60.8, 57.8)])
def test_gpt_oss_weights_are_mxfp4_experts_plus_bf16_rest(model, card_gib, old_gib):
    """gpt-oss model card (arXiv 2508.10925, read 2026-12-02), Table 1: checkpoint 12.8 GiB (20b), 60.8 GiB (120b).
    Only the MoE expert weights are MXFP4 (4.25 bits); attention, embeddings, router and norms are bf16. Every
    parameter at 4.25 bits gave 10.3 / 57.8 GiB."""
    m = load_model(model)
    w = weights.weights_bytes(m)
    assert w / GiB == pytest.approx(card_gib, rel=0.005)
    assert abs(w / GiB - old_gib) > 1.0
    rep = weights.weights_report(m)
    assert rep["weights_bytes_source"] == "parameters × dtype"
    assert {g["dtype"] for g in rep["weights_groups"]} == {"mxfp4", "bf16"}
    assert sum(g["params"] for g in rep["weights_groups"]) == pytest.approx(m.params_total, rel=1e-3)  # card rounding


def test_gpt_oss_requantized_is_every_parameter_at_the_new_dtype():
    m = load_model("gpt-oss-20b")
    assert weights.weights_bytes(m, "bf16") == pytest.approx(m.params_total * 2)
    assert weights.weights_bytes(m, "mxfp4") == weights.weights_bytes(m)      # native: the group sum


def test_deepseek_v3_server_loads_671b_not_the_685b_checkpoint():
    """DeepSeek-V3 README: 671 B parameters + 14 B MTP module = 685 B on the hub. vLLM's DeepseekV2Model.load_weights
    skips the MTP (spec-decode) layers unless MTP speculative decoding is on (vllm/model_executor/models/
    deepseek_v2.py, read 2026-12-02). FP8: one byte per parameter → 625 GiB loaded, 638 GiB with the module."""
    m = load_model("deepseek-v3")
    assert weights.weights_bytes(m) == pytest.approx(671e9)
    assert weights.weights_bytes(m) / GiB == pytest.approx(625, abs=0.5)
    assert weights.weights_bytes(m, mtp=True) / GiB == pytest.approx(638, abs=0.5)
    plan = make_plan(m, "h200", context=131072, batch=64, kv_dtype="bf16").to_dict()
    kv = 64 * 131072 * 61 * (512 + 64) * 2                                    # 589.5 GB of bf16 latent
    assert plan["kv_to_weights_ratio"] == pytest.approx(kv / 671e9) and round(plan["kv_to_weights_ratio"], 2) == 0.88
    # the original study's 0.86 is the whole checkpoint, MTP module included
    assert round(plan["kv_to_weights_ratio_with_mtp"], 2) == 0.86


def test_a_model_without_mtp_shows_one_case():
    plan = make_plan("llama-3.1-8b", "h100", context=4096).to_dict()
    assert "weights_bytes_with_mtp" not in plan and plan["weights_bytes"] == pytest.approx(8.03e9 * 2)


def test_weight_groups_in_a_data_file_are_validated():
    from part1_capacity.calculator.base.errors import InputError
    with pytest.raises(InputError, match=r"weight_groups\[0\].params: must be a finite number"):
        weights.groups_from_list([{"name": "x", "params": float("nan"), "dtype": "bf16"}], "model 'm'")
    with pytest.raises(InputError, match="unknown dtype 'fp3'"):
        weights.groups_from_list([{"name": "x", "params": 1, "dtype": "fp3"}], "model 'm'")


def test_gpt_oss_config_splits_parameters_as_the_checkpoint_stores_them():
    """From the published config.json alone: quantization_config mxfp4 → the routed-expert matrices in MXFP4 and
    the rest (attention, embeddings, router, norms, expert biases) in bf16, as the model card's Table 1 counts
    them (MLP 19.12 B incl. the router; attention 0.64 B + embed/unembed 1.16 B) → 12.8 GiB."""
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "data" / "configs" / "gpt-oss-20b" / "config.json"
    m = load_model(str(path))
    rep = weights.weights_report(m)
    by_dtype = {g["dtype"]: g["params"] for g in rep["weights_groups"]}
    assert by_dtype["mxfp4"] == pytest.approx(19.12e9, rel=0.002)
    assert by_dtype["bf16"] == pytest.approx(0.64e9 + 1.16e9, rel=0.01)
    assert rep["weights_bytes"] / GiB == pytest.approx(12.8, rel=0.005)


def _model(**kw):
    """A made-up profile with what weights.py reads: 100 parameters, bf16, no checkpoint, no groups, no MTP."""
    from types import SimpleNamespace
    base = dict(native_dtype="bf16", params_total=100, params_checkpoint=0, checkpoint=None, weight_groups=())
    return SimpleNamespace(**{**base, **kw})


def test_weight_groups_and_checkpoints_by_hand():
    from part1_capacity.calculator.model.weights import Checkpoint, WeightGroup
    g = WeightGroup("g", 100, "q8_0")                     # 100 × 34/32 bytes
    assert g.to_dict() == {"name": "g", "params": 100, "dtype": "q8_0", "bytes": 106.25}
    with pytest.raises(InputError, match=r"^weight group 'h'.dtype: unknown dtype 'int3'"):
        WeightGroup("h", 1, "int3").bytes
    c = Checkpoint("gguf", 150.0, 170.0, {"Q4_K": 100.0}, 3, "/m.gguf")
    assert c.to_dict() == {"source": "gguf", "loaded_bytes": 150.0, "file_bytes": 170.0, "by_type": {"Q4_K": 100.0},
                           "n_tensors": 3, "path": "/m.gguf"}
    assert c.to_dict()["by_type"] is not c.by_type


def test_groups_from_a_data_file_by_hand():
    from part1_capacity.calculator.model.weights import WeightGroup, groups_from_list
    assert groups_from_list(None, "m") == ()
    assert groups_from_list([{"params": 5, "dtype": "BF16"}, {"name": "x", "params": 2.5, "dtype": "fp8"}], "m") == (
        WeightGroup("group 0", 5.0, "bf16"), WeightGroup("x", 2.5, "fp8"))
    for rows in ([], {"name": "x"}):
        with pytest.raises(InputError, match=r"^m.weight_groups: expected a non-empty list of \{name, params, dtype\}$"):
            groups_from_list(rows, "m")
    with pytest.raises(InputError, match=r"^m.weight_groups\[1\]: expected an object with name, params, dtype$"):
        groups_from_list([{"params": 1, "dtype": "bf16"}, 7], "m")
    with pytest.raises(InputError, match=r"^m.weight_groups\[0\].params"):
        groups_from_list([{"params": -1, "dtype": "bf16"}], "m")
    with pytest.raises(InputError, match=r"^m.weight_groups\[0\].params"):
        groups_from_list([{"params": 1e15 + 1, "dtype": "bf16"}], "m")
    assert groups_from_list([{"params": 1e15, "dtype": "bf16"}, {"params": 0, "dtype": "bf16"}], "m")[0].params == 1e15
    with pytest.raises(InputError, match=r"^m.weight_groups\[0\].dtype: unknown dtype ''"):
        groups_from_list([{"params": 1}], "m")


def test_which_figure_the_weights_come_from():
    from part1_capacity.calculator.model.weights import Checkpoint, WeightGroup, plan_fields, weights_report
    # parameters × dtype: 100 × 2 bytes natively, 100 × 1 at fp8; the native name in any case is native
    plain = _model()
    assert weights_report(plain) == {"weights_bytes": 200.0, "weights_bytes_source": "parameters × dtype",
                                     "weights_groups": [{"name": "all parameters", "params": 100, "dtype": "bf16",
                                                         "bytes": 200.0}]}
    assert weights_report(plain, "FP8")["weights_bytes"] == 100.0
    assert weights_report(plain, "fp8")["weights_groups"][0]["dtype"] == "fp8"
    # an unknown precision is refused by its field
    with pytest.raises(InputError, match=r"^weights_dtype: unknown dtype 'fp9'"):
        weights_report(plain, "fp9")
    # groups: 10 bf16 (20 bytes) + 40 int4 (20 bytes) = 40; with an MTP module of 15 more parameters stored in bf16
    # (params_checkpoint 115) and MTP on: + 30 = 70, as a third row
    grouped = _model(weight_groups=(WeightGroup("a", 10, "bf16"), WeightGroup("b", 40, "int4")), params_checkpoint=115)
    assert weights_report(grouped)["weights_bytes"] == 40.0 and len(weights_report(grouped)["weights_groups"]) == 2
    with_mtp = weights_report(grouped, mtp=True)
    assert with_mtp["weights_bytes"] == 70.0 and with_mtp["weights_groups"][-1] == {
        "name": "MTP module", "params": 15, "dtype": "bf16", "bytes": 30.0}
    # another dtype ignores the groups: every parameter the server loads, 115 with MTP, at 1 byte
    assert weights_report(grouped, "fp8", mtp=True)["weights_bytes"] == 115.0
    assert weights_report(grouped, "fp8")["weights_bytes"] == 100.0
    # a profile that carries no checkpoint field at all is read as one without a checkpoint
    from types import SimpleNamespace
    bare = SimpleNamespace(native_dtype="bf16", params_total=100, params_checkpoint=0, weight_groups=())
    assert weights_report(bare)["weights_bytes"] == 200.0
    # a checkpoint's headers win natively: loaded bytes, or every file byte with MTP; types sorted by name
    ck = _model(checkpoint=Checkpoint("gguf", 150.0, 170.0, {"Q4_K": 100.0, "F32": 50.0}))
    assert weights_report(ck) == {"weights_bytes": 150.0, "weights_bytes_source": "gguf",
                                  "weights_groups": [{"name": "F32", "bytes": 50.0}, {"name": "Q4_K", "bytes": 100.0}]}
    assert weights_report(ck, mtp=True)["weights_bytes"] == 170.0
    assert weights_report(ck, "fp8")["weights_bytes"] == 100.0
    # a plan shows the MTP case only when there is one: KV of 340 bytes against 170 with MTP → 2
    assert plan_fields(ck, None, 340.0) == {"weights_bytes_source": "gguf",
                                           "weights_groups": weights_report(ck)["weights_groups"],
                                           "weights_bytes_with_mtp": 170.0, "kv_to_weights_ratio_with_mtp": 2.0}
    assert plan_fields(grouped, None, 140.0)["kv_to_weights_ratio_with_mtp"] == 2.0       # 140 / 70
    # at another precision both cases are at it: 100 and 115 parameters at fp8, one row of all parameters
    assert plan_fields(grouped, "fp8", 230.0) == {
        "weights_bytes_source": "parameters × dtype",
        "weights_groups": [{"name": "all parameters", "params": 100, "dtype": "fp8", "bytes": 100.0}],
        "weights_bytes_with_mtp": 115.0, "kv_to_weights_ratio_with_mtp": 2.0}
    # a checkpoint of exactly the served parameters has no MTP case
    assert set(plan_fields(_model(params_checkpoint=100), None, 1.0)) == {"weights_bytes_source", "weights_groups"}
    assert set(plan_fields(plain, None, 1.0)) == {"weights_bytes_source", "weights_groups"}
    same = _model(checkpoint=Checkpoint("gguf", 150.0, 150.0))
    assert set(plan_fields(same, None, 1.0)) == {"weights_bytes_source", "weights_groups"}
