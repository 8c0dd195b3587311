"""Weight bytes: per-tensor-group sums and what a server loads, each figure against its primary source."""
import pytest

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


def test_gpt_oss_config_json_splits_its_parameters_the_way_the_checkpoint_stores_them():
    """From the published config.json alone: quantization_config mxfp4 → the routed-expert matrices in MXFP4 and
    the rest (attention, embeddings, router, norms, expert biases) in bf16, as the model card's Table 1 counts
    them (MLP 19.12 B incl. the router; attention 0.64 B + embed/unembed 1.16 B) → 12.8 GiB."""
    from pathlib import Path
    path = Path(__file__).resolve().parent / "data" / "configs" / "gpt-oss-20b" / "config.json"
    m = load_model(str(path))
    rep = weights.weights_report(m)
    by_dtype = {g["dtype"]: g["params"] for g in rep["weights_groups"]}
    assert by_dtype["mxfp4"] == pytest.approx(19.12e9, rel=0.002)
    assert by_dtype["bf16"] == pytest.approx(0.64e9 + 1.16e9, rel=0.01)
    assert rep["weights_bytes"] / GiB == pytest.approx(12.8, rel=0.005)
