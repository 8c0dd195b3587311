"""One rule, one place: vLLM's page per token is the lesson-03 law for one layer, for every cache structure — every
bundled model and every published config.json in tests/data/configs, under each engine."""
from pathlib import Path

import pytest

from part1_capacity.calculator import engines
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.engines import vllm
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.model.profiles import bundled_models
from part1_capacity.calculator.plan.resolve import Workload

CONFIGS = sorted(p for p in (Path(__file__).parents[2] / "data" / "configs").glob("*/config.json")
                 if "refused" not in p.parts)
PROFILES = [*bundled_models().values(), *(load_model(str(p)) for p in CONFIGS)]


@pytest.mark.parametrize("m", PROFILES, ids=lambda m: m.id)
def test_every_structure_pages_exactly_what_the_law_counts(m):
    if m.index_head_dim and not m.is_mla:
        # MiniMax-M3's indexer keys beside K/V: the law sizes them, each engine refuses by name in one line
        T = min(1024, m.max_context)
        for engine in ("vllm", "llama.cpp"):
            wl = Workload(context=T, engine=engine).validate(m)
            name = {"vllm": "vLLM"}.get(engine, engine)
            with pytest.raises(InputError, match=f"^{name}: block-sparse attention's indexer keys beside K/V "
                                                 r"\(MiniMax-M3\)") as e:
                engines.allocate(m, wl, 1, engine)
            assert "\n" not in str(e.value)
        return
    # at one rank, all attention layers of one token: the growing law's bytes (windows and recurrent state apart)
    for kvb in (2, 1):
        assert vllm.attention_page_per_token(m, 1, kvb) * m.n_full_layers == pytest.approx(m.kv_bytes_per_token(kvb))
    T = min(1024, m.max_context)
    law = Workload(context=T, engine="law").validate(m)
    b = engines.allocate(m, law, 1, "law")
    for engine in ("vllm", "llama.cpp"):
        wl = Workload(context=T, engine=engine).validate(m)
        assert engines.allocate(m, wl, 1, engine).kv_bytes_per_token == pytest.approx(b.kv_bytes_per_token), \
            (m.id, engine)


def test_deepseek_v32_indexer_keys_under_vllm_by_hand():
    # DeepSeek-V3.2: 61 layers × (512 latent + 64 rope + 128 indexer key) × 2 B = 85,888 B per token, not the
    # 70,272 of the latent alone (61 × 576 × 2)
    m = load_model(str(Path(__file__).parents[2] / "data" / "configs" / "deepseek-v3.2" / "config.json"))
    wl = Workload(context=4096, engine="vllm").validate(m)
    assert engines.allocate(m, wl, 1, "vllm").kv_bytes_per_token == 61 * (512 + 64 + 128) * 2 == 85_888
    # the latent is whole on every tensor rank
    assert engines.allocate(m, wl, 8, "vllm").kv_bytes_per_token == 85_888
