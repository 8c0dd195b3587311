"""How a config.json's fields are read (calculator/model/config_fields.py): made-up configs whose layer kinds, state
shapes and head counts are worked by hand."""
import pytest

from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.model.config_fields import Fields, layer_kinds, ssm_fields


def kinds(**config):
    return layer_kinds(Fields(config, {}, "config.json"))


def test_the_global_layer_of_a_period_is_the_last_of_it_at_every_layer_count():
    """Layer i is global when (i + 1) is a multiple of the period. Period 6 (Gemma 3's sliding_window_pattern) on 11
    layers: only layer 5 is global (layer 11 would be the next). Reading the first of each period (layers 0 and 6)
    or shifting by one (i + 2: layers 4 and 10) gives 2 global layers; on 5 layers, none is global (i + 2: layer 4)."""
    cfg = {"num_hidden_layers": 11, "sliding_window": 512, "sliding_window_pattern": 6,
           "max_position_embeddings": 8192}
    assert kinds(**cfg) == ["window"] * 5 + ["full"] + ["window"] * 5
    assert kinds(**{**cfg, "num_hidden_layers": 5}) == ["window"] * 5
    # Qwen3-Next's full_attention_interval 4 on 7 layers: layer 3 is attention, the others linear
    qwen = {"num_hidden_layers": 7, "full_attention_interval": 4, "linear_num_key_heads": 16}
    assert kinds(**qwen) == ["linear"] * 3 + ["full"] + ["linear"] * 3


def state(**config):
    return ssm_fields(Fields(config, {}, "config.json"), 5)


def refusal(**config) -> str:
    with pytest.raises(InputError) as e:
        state(**config)
    return str(e.value)


def test_a_kda_state_from_its_block_or_from_the_top_level_fields():
    """ssm_fields, Kimi Delta Attention's shape: heads, head width and convolution from linear_attn_config, a field it leaves out
    from the top level; or from the top-level fields alone. vLLM keeps the state in float32 whatever the cache."""
    block = {"num_heads": 2, "head_dim": 4, "short_conv_kernel_size": 3}
    want = {"kind": "kda", "n_layers": 5, "n_heads": 2, "head_dim": 4, "d_conv": 3, "state_dtype": "fp32"}
    assert state(linear_attn_config=block) == want
    assert state(linear_attn_config={"num_heads": 2}, linear_num_heads=9, linear_head_dim=4,
                 linear_conv_kernel_dim=3) == want
    assert state(linear_num_heads=2, linear_head_dim=4, linear_conv_kernel_dim=3) == want
    # each bound: 1 to 4,096, whole
    assert state(linear_attn_config={"num_heads": 1, "head_dim": 4096, "short_conv_kernel_size": 3})["n_heads"] == 1
    for bad, rule in ((0, "a positive integer <= 4,096, got 0"), (4097, "a positive integer <= 4,096, got 4097")):
        assert refusal(linear_attn_config={**block, "head_dim": bad}) == (
            f"config.json: field 'linear_attn_config.head_dim': must be {rule}")
    assert refusal(linear_attn_config={**block, "num_heads": 2.5}).startswith(
        "config.json: field 'linear_attn_config.num_heads': must be an integer")
    # one of the two top-level fields alone is not KDA: here, with LFM2's convolution window, a short convolution
    assert state(linear_num_heads=2, conv_L_cache=3, hidden_size=8)["kind"] == "short_conv"
    assert state(linear_head_dim=4, conv_L_cache=3, hidden_size=8)["kind"] == "short_conv"


def test_a_gated_deltanet_state_and_the_dtype_it_names():
    """ssm_fields on Qwen3-Next's fields, each its own value; the state dtype the file names (the cache's first), else none."""
    gdn = {"linear_num_key_heads": 1, "linear_num_value_heads": 2, "linear_key_head_dim": 3,
           "linear_value_head_dim": 4, "linear_conv_kernel_dim": 5}
    assert state(**gdn) == {"kind": "gated_deltanet", "n_layers": 5, "n_k_heads": 1, "n_v_heads": 2, "k_head_dim": 3,
                            "v_head_dim": 4, "d_conv": 5}
    assert state(**gdn, mamba_ssm_dtype="float32")["state_dtype"] == "fp32"
    assert state(**gdn, mamba_ssm_cache_dtype="bfloat16", mamba_ssm_dtype="float32")["state_dtype"] == "bf16"
    # either field marks the kind; a missing or zero one is named
    assert refusal(linear_key_head_dim=3) == "config.json: missing field 'linear_num_key_heads'"
    assert refusal(linear_num_key_heads=1) == "config.json: missing field 'linear_num_value_heads'"
    for key in gdn:
        assert refusal(**{**gdn, key: 0}) == f"config.json: field '{key}': must be a positive integer, got 0", key


def test_a_mamba_2_state_under_each_familys_names():
    """ssm_fields under Bamba's, Nemotron-H's and Zamba2's names for one shape: 4 heads of 8, state 16, convolution 4, groups 1 or 2.
    Nemotron-H's state is kept in float32 unless the file names a cache dtype; Falcon-H1's "auto" head width is
    mamba_d_ssm ÷ heads = 32 ÷ 4 = 8."""
    def mamba2(n_groups=1, **extra):
        return {"kind": "mamba2", "n_layers": 5, "n_heads": 4, "head_dim": 8, "d_state": 16, "d_conv": 4,
                "n_groups": n_groups, **extra}
    assert state(mamba_n_heads=4, mamba_d_head=8, mamba_d_state=16, mamba_d_conv=4, mamba_n_groups=1) == mamba2()
    nemotron = dict(mamba_num_heads=4, mamba_head_dim=8, ssm_state_size=16, conv_kernel=4, n_groups=2)
    assert state(**nemotron) == mamba2(2)
    assert state(**nemotron, architectures=["NemotronHForCausalLM"]) == mamba2(2, state_dtype="fp32")
    assert state(**nemotron, mamba_ssm_cache_dtype="bfloat16") == mamba2(2, state_dtype="bf16")
    assert state(n_mamba_heads=4, mamba_headdim=8, mamba_d_state=16, mamba_d_conv=4, mamba_ngroups=1) == mamba2()
    assert state(mamba_n_heads=4, mamba_d_head="auto", mamba_d_ssm=32, mamba_d_state=16, mamba_d_conv=4,
                 mamba_n_groups=1) == mamba2()
    # the name the file uses wins over the defaults' other name for the same field; the rest come from the defaults
    f = Fields({"mamba_n_heads": 4, "ssm_state_size": 32}, {"mamba_d_head": 8, "mamba_d_state": 16, "mamba_d_conv": 4,
                                                            "mamba_n_groups": 1}, "config.json")
    assert ssm_fields(f, 5) == {**mamba2(), "d_state": 32}
    # a default under a family's other name (Zamba2's mamba_headdim, Nemotron-H's ssm_state_size) is found
    f = Fields({"mamba_n_heads": 4}, {"mamba_headdim": 8, "ssm_state_size": 16, "conv_kernel": 4, "n_groups": 1},
               "config.json")
    assert ssm_fields(f, 5) == mamba2()


def test_mamba_1_lfm2_and_lightning_states_and_a_config_that_gives_none():
    """ssm_fields. Jamba: d_inner = mamba_expand × hidden = 2 × 8 = 16. A Mamba-1 stack: intermediate_size, else expand × hidden;
    with n_groups, a Mamba-2 stack. LFM2: a convolution of conv_L_cache inputs over the hidden size. Lightning
    attention (MiniMax): heads × head width, hidden ÷ heads = 32 ÷ 4 = 8 unless head_dim is stated."""
    assert state(mamba_expand=2, hidden_size=8, mamba_d_state=16, mamba_d_conv=4) == {
        "kind": "mamba1", "n_layers": 5, "d_inner": 16, "d_state": 16, "d_conv": 4}
    stack = {"state_size": 16, "conv_kernel": 4, "expand": 2, "hidden_size": 8}
    assert state(**stack) == {"kind": "mamba1", "n_layers": 5, "d_inner": 16, "d_state": 16, "d_conv": 4}
    assert state(**stack, intermediate_size=20)["d_inner"] == 20
    assert state(**stack, n_groups=1, num_heads=4, head_dim=8) == {
        "kind": "mamba2", "n_layers": 5, "n_heads": 4, "head_dim": 8, "d_state": 16, "d_conv": 4, "n_groups": 1}
    assert state(conv_L_cache=3, hidden_size=8) == {"kind": "short_conv", "n_layers": 5, "d_inner": 8, "d_conv": 3}
    assert refusal(conv_L_cache=65, hidden_size=8) == (
        "config.json: field 'conv_L_cache': must be a positive integer <= 64, got 65")
    light = {"kind": "lightning", "n_layers": 5, "n_heads": 4, "head_dim": 8}
    for marker in ({"block_size": 256}, {"attn_type_list": [0, 1]}, {"linear_attn_alpha_factor": 1}):
        assert state(**marker, num_attention_heads=4, hidden_size=32) == light, marker
    assert state(block_size=256, num_attention_heads=4, hidden_size=32, head_dim=16)["head_dim"] == 16
    assert refusal(hidden_size=32) == (
        "config.json: recurrent (linear-attention) layers whose state shape the config does not give (no Mamba, "
        "gated DeltaNet or lightning-attention fields): not modelled")


def test_state_widths_at_their_lower_bound_and_a_field_stated_nowhere():
    """ssm_fields: every gated DeltaNet width may be 1 (a bound of 2 would refuse it); a Mamba-2 field neither the file nor the
    defaults give is refused under its first name."""
    ones = {"linear_num_key_heads": 1, "linear_num_value_heads": 1, "linear_key_head_dim": 1,
            "linear_value_head_dim": 1, "linear_conv_kernel_dim": 1}
    assert state(**ones) == {"kind": "gated_deltanet", "n_layers": 5, "n_k_heads": 1, "n_v_heads": 1,
                             "k_head_dim": 1, "v_head_dim": 1, "d_conv": 1}
    assert state(**ones, mamba_ssm_cache_dtype="bfloat16")["state_dtype"] == "bf16"
    bamba = {"mamba_n_heads": 4, "mamba_d_head": 8, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_n_groups": 1}
    for key, first in (("mamba_d_state", "mamba_d_state"), ("mamba_d_head", "mamba_d_head"),
                       ("mamba_d_conv", "mamba_d_conv"), ("mamba_n_groups", "mamba_n_groups")):
        assert refusal(**{k: v for k, v in bamba.items() if k != key}) == f"config.json: missing field '{first}'"


def fields(**config):
    return Fields(config, {}, "config.json")


def test_k_v_heads_by_every_way_a_config_states_them():
    """8 query heads: GQA's num_key_value_heads; ChatGLM's groups; Falcon-40B's num_kv_heads under its new decoder;
    Falcon-7B's and GPT-BigCode's one shared head; else one per query head."""
    from part1_capacity.calculator.model.config_fields import kv_heads
    assert kv_heads(fields(num_key_value_heads=2), 8) == 2
    assert kv_heads(fields(multi_query_attention=True, multi_query_group_num=2), 8) == 2
    assert kv_heads(fields(multi_query_attention=True), 8) == 1
    assert kv_heads(fields(num_kv_heads=4, new_decoder_architecture=True, multi_query=True), 8) == 4
    assert kv_heads(fields(num_kv_heads=4), 8) == 4
    assert kv_heads(fields(num_kv_heads=4, multi_query=True), 8) == 1
    assert kv_heads(fields(multi_query=True), 8) == 1
    assert kv_heads(fields(), 8) == 8
    with pytest.raises(InputError) as e:
        kv_heads(fields(num_key_value_heads=1025), 8)
    assert str(e.value) == "config.json: field 'num_key_value_heads': must be a positive integer <= 1,024, got 1025"


def test_the_head_width_and_the_experts():
    """head_dim when stated, else hidden ÷ heads = 32 ÷ 4 = 8. Experts: (routed, per token) by each family's names;
    one expert or none is dense; per-token counts listed by layer must agree."""
    from part1_capacity.calculator.model.config_fields import experts, head_dim_of
    assert (head_dim_of(fields(head_dim=16, hidden_size=32), 4), head_dim_of(fields(hidden_size=32), 4)) == (16, 8)
    assert experts(fields()) == experts(fields(num_local_experts=1, num_experts_per_tok=1)) == (0, 0)
    assert experts(fields(num_experts=[8, 8], num_experts_per_tok=2)) == (0, 0)
    assert experts(fields(num_local_experts=8, num_experts_per_tok=2)) == (8, 2)
    assert experts(fields(n_routed_experts=64, num_experts_per_tok=[6, 6])) == (64, 6)
    assert experts(fields(moe_num_experts=16, moe_topk=4)) == (16, 4)
    assert experts(fields(num_experts=128, top_k_experts=8)) == (128, 8)
    for bad, message in (({"num_experts_per_tok": [2, 3]}, "8 experts but no experts-per-token field "
                                                          "(num_experts_per_tok)"),
                         ({}, "8 experts but no experts-per-token field (num_experts_per_tok)"),
                         ({"num_experts_per_tok": 9}, "field 'num_experts_per_tok': must be a positive integer "
                                                      "<= 8, got 9")):
        with pytest.raises(InputError) as e:
            experts(fields(num_local_experts=8, **bad))
        assert str(e.value) == f"config.json: {message}", bad
    assert experts(fields(num_local_experts=8, num_experts_per_tok=8)) == (8, 8)


STATE_SHAPES = [   # (a config of each state kind with every width 1, what ssm_fields makes of it)
    ({"mamba_n_heads": 1, "mamba_d_head": 1, "mamba_d_state": 1, "mamba_d_conv": 1, "mamba_n_groups": 1},
     {"kind": "mamba2", "n_heads": 1, "head_dim": 1, "d_state": 1, "d_conv": 1, "n_groups": 1}),
    ({"mamba_num_heads": 1, "mamba_head_dim": 1, "ssm_state_size": 1, "conv_kernel": 1, "n_groups": 1},
     {"kind": "mamba2", "n_heads": 1, "head_dim": 1, "d_state": 1, "d_conv": 1, "n_groups": 1}),
    ({"mamba_expand": 1, "hidden_size": 1, "mamba_d_state": 1, "mamba_d_conv": 1},
     {"kind": "mamba1", "d_inner": 1, "d_state": 1, "d_conv": 1}),
    ({"state_size": 1, "conv_kernel": 1, "expand": 1, "hidden_size": 1, "n_groups": 1, "num_heads": 1,
      "head_dim": 1}, {"kind": "mamba2", "n_heads": 1, "head_dim": 1, "d_state": 1, "d_conv": 1, "n_groups": 1}),
    ({"state_size": 1, "conv_kernel": 1, "expand": 1, "hidden_size": 1, "intermediate_size": 1},
     {"kind": "mamba1", "d_inner": 1, "d_state": 1, "d_conv": 1}),
    ({"conv_L_cache": 1, "hidden_size": 1}, {"kind": "short_conv", "d_inner": 1, "d_conv": 1}),
    ({"mamba_n_heads": 1, "mamba_d_head": "auto", "mamba_d_ssm": 1, "mamba_d_state": 1, "mamba_d_conv": 1,
      "mamba_n_groups": 1}, {"kind": "mamba2", "n_heads": 1, "head_dim": 1, "d_state": 1, "d_conv": 1, "n_groups": 1}),
    ({"block_size": 1, "num_attention_heads": 1, "hidden_size": 1}, {"kind": "lightning", "n_heads": 1, "head_dim": 1}),
]
NOT_A_WIDTH = ("block_size", "mamba_d_head", "mamba_d_ssm")   # a marker, "auto", a width read only when non-zero


def test_every_state_width_may_be_1_and_0_is_refused_by_name():
    """ssm_fields: a width of 1 is the least a layer can have (a lower bound of 2 would refuse it); 0 is refused in
    one line naming the field."""
    for config, want in STATE_SHAPES:
        assert state(**config) == {"n_layers": 5, **want}, config
        for key in config:
            if key in NOT_A_WIDTH or "num_heads" in config and key in ("expand", "hidden_size"):
                continue          # a Mamba-2 stack's widths are its heads': these mark the stack and are not read
            bound = " <= 64" if key == "conv_L_cache" else ""           # LFM2's window: at most 64 inputs
            assert refusal(**{**config, key: 0}) == (
                f"config.json: field '{key}': must be a positive integer{bound}, got 0"), (config, key)


def test_the_mamba_blocks_widths_by_hand():
    """ssm_fields. A stated head width wins over mamba_d_ssm ÷ heads (8, not 64 ÷ 4 = 16); "auto" takes the quotient,
    rounded down: 34 ÷ 4 = 8. A Mamba-1 stack without intermediate_size: expand × hidden = 2 × 8 = 16. n_groups
    given by the class defaults alone still makes the stack Mamba-2. mamba_expand without mamba_d_state is no
    Mamba-1 block (nothing else here gives a state shape)."""
    bamba = {"mamba_n_heads": 4, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_n_groups": 1}
    assert state(**bamba, mamba_d_head=8, mamba_d_ssm=64)["head_dim"] == 8
    assert state(**bamba, mamba_d_head="auto", mamba_d_ssm=34)["head_dim"] == 8
    stack = {"state_size": 16, "conv_kernel": 4, "expand": 2, "hidden_size": 8, "num_heads": 4, "head_dim": 4}
    assert state(**stack)["d_inner"] == 16
    f = Fields(stack, {"n_groups": 1}, "config.json")
    assert ssm_fields(f, 5) == {"kind": "mamba2", "n_layers": 5, "n_heads": 4, "head_dim": 4, "d_state": 16,
                                "d_conv": 4, "n_groups": 1}
    assert refusal(mamba_expand=2, hidden_size=8).endswith("not modelled")
    assert "state_dtype" not in state(**bamba, mamba_d_head=8)


def test_layer_types_by_name():
    """named_kinds: each name maps to its kind; a list of other things, a name not known or a list of the wrong length
    is refused in one line."""
    from part1_capacity.calculator.model.config_fields import KINDS, named_kinds
    f = fields(num_hidden_layers=4)
    assert named_kinds(f, ["full_attention", "sliding_attention", "linear_attention", "mlp"], 4) == [
        "full", "window", "linear", "none"]
    for bad in ("full_attention", [1, 2, 3, 4], ["full_attention", None, "mamba", "moe"]):
        with pytest.raises(InputError) as e:
            named_kinds(f, bad, 4)
        assert str(e.value).startswith("config.json: field 'layer_types' must be a list of names, got "), bad
    with pytest.raises(InputError) as e:
        named_kinds(f, ["full_attention", "cross_attention", "x", "mlp"], 4)
    known = ", ".join(k for k in KINDS if len(k) > 1)          # the one-letter pattern codes are not names
    assert str(e.value) == ("config.json: layer type 'cross_attention' is a layer the calculator does not model; "
                            f"known: {known}")
    assert "E" not in known.split(", ") and "full_attention" in known.split(", ")
    with pytest.raises(InputError) as e:
        named_kinds(f, ["full_attention"] * 3, 4)
    assert str(e.value) == "config.json: layer_types has 3 entries for num_hidden_layers=4"


def test_the_sparse_indexers_layers_and_key_width():
    """sparse_index on 4 layers: the layers sparse_attention_freq marks 1 and the key's width; the indexer's value
    must be off (sparse_disable_index_value 1) on each of them — on the others it is not read."""
    from part1_capacity.calculator.model.config_fields import sparse_index

    def index(cfg):
        return sparse_index(fields(sparse_attention_config=cfg), 4)

    def refused(cfg):
        with pytest.raises(InputError) as e:
            index(cfg)
        return str(e.value)
    on = {"sparse_attention_freq": [1, 0, 1, 0], "sparse_disable_index_value": [1, 1, 1, 1], "sparse_index_dim": 64}
    assert index(on) == (2, 64)
    assert sparse_index(fields(), 4) is None and index(False) is None
    assert index({**on, "use_sparse_attention": False}) is None
    assert index({**on, "sparse_attention_freq": [0, 0, 0, 0]}) is None
    assert index({**on, "sparse_attention_freq": [0, 1, 1, 0, 1], "sparse_disable_index_value": [0, 1, 1, 0]}) == (2, 64)
    assert index({**on, "sparse_index_dim": 1}) == (2, 1) and index({**on, "sparse_index_dim": 4096}) == (2, 4096)
    where = "config.json: field 'sparse_attention_config'"
    assert refused("yes") == f"{where} must be a JSON object, got 'yes'"
    for key in ("sparse_attention_freq", "sparse_disable_index_value"):
        for bad in ([1, 0, 1], [1, 0, 2, 0], [True, 0, 0, 0], "1010"):
            assert refused({**on, key: bad}).startswith(f"{where}.{key} must be 4 values of 0 or 1, got "), (key, bad)
    assert refused({k: v for k, v in on.items() if k != "sparse_disable_index_value"}).startswith(
        f"{where}.sparse_disable_index_value must be 4 values of 0 or 1")
    assert refused({**on, "sparse_disable_index_value": [1, 1, 0, 1]}) == (
        f"{where}: sparse layers whose indexer caches an index value beside its key (sparse_disable_index_value 0): "
        "not modelled")
    for bad in (0, 4097, 2.5):
        assert refused({**on, "sparse_index_dim": bad}).startswith(f"{where}.sparse_index_dim: must be "), bad
    assert refused({**on, "sparse_index_dim": 0}) == f"{where}.sparse_index_dim: must be a positive integer <= 4,096, got 0"
