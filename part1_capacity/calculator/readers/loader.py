"""``load_model(name_or_path)``: a model profile from whatever the user names — a bundled id, a config.json, a
Hugging Face model folder (config.json + safetensors: exact weight bytes from their headers), a GGUF file, or a
Hub repository id (``org/name``, ``org/name@revision``, ``org/name/file.gguf``: ``hub.py``, read over HTTP).

The one entry point the CLI, the plan and the site use. A bundled id needs only ``profiles`` (no transformers, no
llama_cpp, no safetensors or gguf); a path goes through ``configs``/``checkpoints``, imported only then.
"""
from __future__ import annotations

from pathlib import Path

from part1_capacity.calculator.base.dtypes import closest
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.model.profiles import ModelProfile, bundled_models
from part1_capacity.calculator.base.validate import show

MAX_NAME = 4096    # PATH_MAX on Linux


def load_model(name_or_path) -> ModelProfile:
    """A bundled profile by id (case-insensitive), or a profile read from a local path."""
    s = str(name_or_path).strip()
    if len(s) > MAX_NAME or any(len(part) > 255 for part in s.split("/")) or "\0" in s:
        # longer than any path the system can open (PATH_MAX 4096, a file name 255 bytes): refused before the
        # filesystem is asked, so the message is ours and one short line
        raise InputError(f"model: {show(s)} is not a model id or a path (at most {MAX_NAME} characters, "
                         f"255 per file name)")
    from part1_capacity.calculator.readers import hub       # the Hub's rule for ids: no third-party import

    if "/" in s and hub.looks_like_repo(s):
        return hub.profile_from_hub(s)
    if s.lower().endswith(".gguf"):
        from part1_capacity.calculator.readers.checkpoints import profile_from_gguf

        return profile_from_gguf(s)
    if Path(s).is_dir():
        from part1_capacity.calculator.readers.checkpoints import is_model_folder, profile_from_folder

        if is_model_folder(s):
            return profile_from_folder(s)
    if s.endswith(".json") or "/" in s or Path(s).exists():
        from part1_capacity.calculator.model.configs import profile_from_config_path

        return profile_from_config_path(s)
    models = bundled_models()
    key = s.lower()
    if key not in models:
        raise InputError(f"model: unknown {show(s)}{closest(key, models)}; see `capacity list models` "
                         f"or pass a config.json, a model folder or a .gguf file")
    return models[key]
