"""The calculator's ``ModelProfile`` of any supported GGUF: full, sliding-window, MLA and recurrent layers.

The reading itself lives in ``part1_capacity.calculator.readers.checkpoints`` (one GGUF reader for ``--model x.gguf`` and for E1);
E1 wants a context limit high enough for any run it asks for, and counts the file's own types elsewhere.
"""
from __future__ import annotations

from part1_capacity.calculator.readers.checkpoints import (  # noqa: F401
    FULL_ATTENTION, GGUF_ARCHITECTURES, MLA, RECURRENT, SWA_PERIOD)
from part1_capacity.calculator.readers.checkpoints import gguf_profile_dict

SUPPORTED = GGUF_ARCHITECTURES


def profile_dict(path) -> dict:
    """Profile fields (the bundled table's format, ``profiles.profile_from_dict``) from a GGUF's metadata."""
    out = gguf_profile_dict(path, field="--gguf")
    out.pop("_checkpoint", None)
    out.update(max_context=max(out["max_context"], 1 << 20), native_dtype="fp32")
    return out


def calculator_profile(path):
    """The calculator's ``ModelProfile`` for the GGUF at ``path`` (validated by ``profile_from_dict``)."""
    from part1_capacity.calculator.model.profiles import profile_from_dict

    return profile_from_dict(profile_dict(path), where="gguf")   # profile.extra["_architecture"]: the GGUF's
