"""What E1 and E2 share: the calculator's view of a GGUF model, scratch space, and the record of a run."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from course.machine import records
from part1_capacity.experiments.engine.gguf_model import GGUFShape
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.base.saved_runs import RESULTS  # results/part1/: generated, outside the code tree

REPO = Path(__file__).resolve().parents[3]

# llama.cpp's names for storage types → the calculator's dtype names (part1_capacity/calculator/base/dtypes.py).
CALCULATOR_DTYPE = {"f32": "fp32", "f16": "fp16", "q8_0": "q8_0", "q5_0": "q5_0", "q4_k_m": "q4_k_m"}


def calculator_profile(shape: GGUFShape):
    """The calculator's ``ModelProfile`` for the model in a GGUF, built from its metadata through the calculator's
    own validation (``profile_from_dict``): the cache formula then comes from the lesson-03 laws, as everywhere."""
    from part1_capacity.calculator.model.profiles import profile_from_dict

    if shape.head_dim_k != shape.head_dim_v:
        raise InputError(f"--gguf: key_length {shape.head_dim_k} differs from value_length {shape.head_dim_v}; "
                         "the calculator's profiles have one head_dim")
    return profile_from_dict({
        "id": f"gguf:{shape.name}", "name": shape.name, "n_layers": shape.n_layers, "n_heads": shape.n_heads,
        "n_kv_heads": shape.n_kv_heads, "head_dim": shape.head_dim_k, "hidden_size": shape.hidden_size,
        "params_total": shape.n_params, "max_context": max(shape.n_ctx_train, 16384), "native_dtype": "fp32",
        "source": "read from the GGUF's metadata",
    }, where="gguf")


def scratch_root() -> Path:
    """Where large generated files go: ``$CAPACITY_SCRATCH`` or the repository's gitignored ``scratch/``."""
    return Path(os.environ.get("CAPACITY_SCRATCH") or REPO / "scratch")


@contextlib.contextmanager
def scratch_dir(prefix: str):
    """A fresh folder under the scratch root, deleted (with every model in it) when the block ends."""
    root = scratch_root()
    root.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_record(argv=None) -> dict:
    """The shared run record (``course.machine.records``) plus the engine's version."""
    import llama_cpp

    return records.run_record(argv, llama_cpp_python=llama_cpp.__version__)


def save_result(name: str, result: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    return path


def load_result(name: str) -> dict | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None
