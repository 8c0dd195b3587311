"""What a LoRA adapter and a speculative-decoding draft model add to a server's memory.

**LoRA** (rank ``r``) adds to each target linear layer of ``in × out`` weights two factors, ``A`` (``r × in``) and
``B`` (``out × r``): ``r × (in + out)`` parameters per layer, kept in the model's compute dtype. Which layers:

- the adapter itself (the textbook count, and llama.cpp's ``--lora FILE``, which loads the adapter's tensors as
  they are): its target modules, by default PEFT's for Llama-style models, ``q_proj`` and ``v_proj``
  (peft/utils/constants.py, ``TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING``), once per adapter loaded;
- vLLM (``--enable-lora --max-loras N --max-lora-rank R``) preallocates, for EVERY linear layer it wraps (the fused
  ``qkv_proj``, ``o_proj``, ``gate_up_proj``, ``down_proj``), ``N`` slots of rank ``R`` whatever the adapters
  target: ``lora_a_stacked`` (N, 1, R, in) and ``lora_b_stacked`` (N, 1, out, R) per slice
  (vllm/lora/layers/base_linear.py ``create_lora_weights``); ``R`` must be one of ``VLLM_RANKS``
  (vllm/config/lora.py).

The shapes come from the profile: queries ``n_heads × head_dim`` wide, keys and values ``n_kv_heads × head_dim``,
the MLP ``intermediate_size``. MLA attention and recurrent layers have other projections: refused, not guessed.

**A draft model** (``--draft-model``) is a second, smaller model the engine loads beside the target: its weights,
and a cache of its own for every sequence (vLLM's draft layers share the paged pool; llama.cpp's ``-md`` opens a
second context of the same size). Each step it proposes ``K`` tokens (``--num-speculative-tokens``) the target
then verifies.

Units: bytes, parameters.
"""
from __future__ import annotations

from part1_capacity.calculator.base.dtypes import get_dtype
from part1_capacity.calculator.base.errors import InputError

MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
DEFAULT_TARGETS = ("q_proj", "v_proj")          # PEFT's default for Llama-style models
VLLM_MODULES = MODULES                          # vLLM wraps every linear layer (qkv, o, gate_up, down)
VLLM_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)   # vllm/config/lora.py MaxLoRARanks


def module_shapes(model) -> dict[str, tuple[int, int]]:
    """``(in, out)`` of each target module of one layer."""
    if model.is_mla or model.ssm is not None:
        raise InputError(f"--lora-rank: {model.id}'s {model.structure} layers have projections this calculator "
                         f"does not size for LoRA (MLA latents, recurrent mixers); allowed: attention models "
                         f"(mha, gqa, mqa, sliding window)")
    D, q, kv = model.hidden_size, model.n_heads * model.head_dim, model.n_kv_heads * model.head_dim
    inner = model.moe_intermediate_size if model.is_moe and model.moe_intermediate_size else model.intermediate_size
    if not inner:
        inner = 4 * D
    return {"q_proj": (D, q), "k_proj": (D, kv), "v_proj": (D, kv), "o_proj": (q, D),
            "gate_proj": (D, inner), "up_proj": (D, inner), "down_proj": (inner, D)}


def parse_targets(text: str | None) -> tuple[str, ...]:
    """``--lora-targets q_proj,v_proj`` → the module names, checked."""
    if text is None:
        return DEFAULT_TARGETS
    names = tuple(t.strip() for t in str(text).split(",") if t.strip())
    bad = [n for n in names if n not in MODULES]
    if not names or bad:
        raise InputError(f"--lora-targets: unknown module {', '.join(bad) or '(none given)'}; allowed: "
                         f"{', '.join(MODULES)} (comma-separated)")
    return names


def lora_params(model, rank: int, targets=DEFAULT_TARGETS) -> float:
    """Parameters of one adapter of rank ``rank`` on ``targets`` in every layer: ``Σ r × (in + out) × layers``.
    A MoE's MLP targets are counted once per layer (the adapter on a shared MLP), not per expert."""
    shapes = module_shapes(model)
    return float(rank * sum(shapes[t][0] + shapes[t][1] for t in targets) * model.n_layers)


def vllm_rank(rank: int) -> int:
    """The smallest ``--max-lora-rank`` vLLM accepts that holds ``rank``."""
    for r in VLLM_RANKS:
        if r >= rank:
            return r
    raise InputError(f"--lora-rank: {rank} exceeds vLLM's largest --max-lora-rank {VLLM_RANKS[-1]}")


def lora_bytes(model, engine: str, rank: int, targets, max_loras: int) -> float:
    """Bytes the adapters take under ``engine``: vLLM's preallocated slots (every linear layer, ``max_loras`` ×
    the rank vLLM accepts), else ``max_loras`` adapters on their targets; in the model's compute dtype."""
    b = get_dtype(model.compute_dtype).bytes
    if engine == "vllm":
        return max_loras * lora_params(model, vllm_rank(rank), VLLM_MODULES) * b
    return max_loras * lora_params(model, rank, targets) * b
