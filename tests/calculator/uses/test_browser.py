"""The live page's pasted config.json (uses/browser.py) against the CLI's reading of the same file: the page has no
transformers, so it answers exactly the files the CLI reads without it — the stored types and the repositories that
ship their own code (Kimi-K3, MiniMax-M1) — and refuses only a type whose defaults and count need transformers. The
browser itself runs this in Chromium in a long test (tests/site/test_site.py); this is its quick twin."""
import json
from pathlib import Path

import pytest

from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.model import configs
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.uses.browser import profile_from_text

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "configs"
PUBLISHED = sorted(p.parent.name for p in CONFIGS.glob("*/config.json"))


@pytest.mark.parametrize("name", PUBLISHED)
def test_the_page_reads_a_published_config_as_the_cli_does(name):
    text = (CONFIGS / name / "config.json").read_text()
    d = json.loads(text)
    if configs.stored_type(d) is None and configs.transformers_has_class(d):
        with pytest.raises(InputError, match="which this page does not carry"):
            profile_from_text(text)
        return
    page, cli = profile_from_text(text), load_model(str(CONFIGS / name / "config.json"))
    assert (page.params_total, page.params_active) == (cli.params_total, cli.params_active), name
    assert page.kv_bytes_per_token(2) == cli.kv_bytes_per_token(2), name


def test_an_own_code_multimodal_file_is_read_not_refused():
    # Kimi-K3: model_type kimi_k3 and its architecture unknown to transformers, a text_config inside (the page
    # refused any file with a text_config whose type transformers lacks, while the CLI read it from its own fields)
    d = json.loads((CONFIGS / "kimi-k3" / "config.json").read_text())
    assert not configs.transformers_has_class(d) and isinstance(d.get("text_config"), dict)
    cli = load_model(str(CONFIGS / "kimi-k3" / "config.json"))
    assert profile_from_text(json.dumps(d)).params_total == cli.params_total
