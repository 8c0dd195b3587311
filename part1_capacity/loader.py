"""``load_model(name_or_path)``: a model profile from whatever the user names — a bundled id or a config.json.

The one entry point the CLI, the plan and the site use. A bundled id needs only ``profiles`` (no transformers, no
llama_cpp); a path goes through ``configs``, imported only then.
"""
from __future__ import annotations

from pathlib import Path

from part1_capacity.dtypes import closest
from part1_capacity.errors import InputError
from part1_capacity.profiles import ModelProfile, bundled_models


def load_model(name_or_path) -> ModelProfile:
    """A bundled profile by id (case-insensitive), or a Hugging Face ``config.json`` by path."""
    s = str(name_or_path).strip()
    if s.endswith(".json") or "/" in s or Path(s).is_file():
        from part1_capacity.configs import profile_from_config_path

        return profile_from_config_path(s)
    models = bundled_models()
    key = s.lower()
    if key not in models:
        raise InputError(f"model: unknown '{s}'{closest(key, models)}; see `capacity list models` "
                         f"or pass a config.json path")
    return models[key]
