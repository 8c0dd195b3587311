"""How a model's attention heads, K/V heads and recurrent state split across tensor-parallel ranks — once.

The deployment search (``deploy.py``) and the engine rules (``engines/``) both size a rank with these rules,
so a change here moves every figure alike. The rules are vLLM's, which the calculator follows for tensor
parallelism:

- the query heads must divide by the degree ``t`` and the K/V heads must divide by it or divide it
  (vllm/config: ``verify_with_parallel_config``, total_num_attention_heads % tensor_parallel_size);
- each rank keeps ``max(1, n_kv_heads // t)`` K/V heads (vllm/model_executor/models/llama.py): when ``t`` exceeds
  the K/V heads they are **replicated**, so ``t`` ranks together hold more than one copy of the cache;
- the MLA latent has no heads: every rank holds all of it (vLLM's ``MLAAttentionSpec``: num_kv_heads 1);
- recurrent (SSM / linear-attention) state splits by its heads, at least one head per rank
  (vllm/model_executor/layers/mamba/mamba_utils.py).

What one rank then holds is written here once too: one sequence's cache on a tensor rank (``cache_per_rank``, the
lesson-03 laws × the fractions above), the weights on a rank (``weights_per_rank``) and the sequences on one
data-parallel replica (``sequences_per_replica``, ⌈B/d⌉). Units: bytes.
"""
from __future__ import annotations

from dataclasses import replace


def splits_heads(model, t: int) -> bool:
    """True when ``t`` tensor-parallel ranks split ``model``'s attention heads evenly (vLLM's rule above), the K/V
    heads of every layer type (Gemma 4's window layers have their own)."""
    kinds = {model.n_kv_heads, getattr(model, "window_n_kv_heads", 0) or model.n_kv_heads}
    return model.n_heads % t == 0 and all(kv % t == 0 or t % kv == 0 for kv in kinds)


def kv_heads_per_rank(n_kv_heads: int, t: int) -> int:
    """K/V heads one of ``t`` ranks holds: ``max(1, n_kv_heads // t)`` — replicated when ``t > n_kv_heads``."""
    return max(1, n_kv_heads // t)


def kv_fraction_per_rank(model, t: int) -> float:
    """Share of the full layers' attention cache one of ``t`` ranks holds (MLA: 1, the latent on every rank) — of
    the whole cache too, unless window layers have K/V heads of their own (``model_on_rank`` counts those)."""
    if model.is_mla:
        return 1.0
    return kv_heads_per_rank(model.n_kv_heads, t) / model.n_kv_heads


def model_on_rank(model, t: int):
    """``model`` with the K/V heads one of ``t`` ranks holds, per layer type (``kv_heads_per_rank`` each): its
    cache law then counts one rank's share, each layer type split (or replicated) by its own heads. MLA: the model
    itself (the latent is whole on every rank)."""
    if model.is_mla or t == 1:
        return model
    window = model.window_n_kv_heads and kv_heads_per_rank(model.window_n_kv_heads, t)
    return replace(model, n_kv_heads=kv_heads_per_rank(model.n_kv_heads, t), window_n_kv_heads=window)


def state_shards(n_state_heads: int, t: int) -> int:
    """Ranks the recurrent state is split over: ``min(t, n_state_heads)`` (at least one state head per rank)."""
    return min(t, n_state_heads)


def state_fraction_per_rank(model, t: int) -> float:
    """Share of one sequence's recurrent state one of ``t`` ranks holds (0 for a model without one)."""
    if model.ssm is None:
        return 0.0
    return 1.0 / state_shards(model.ssm.n_heads, t)


def cache_parts_per_rank(model, T, kv_bytes: float, state_bytes: float, t: int):
    """(attention K/V or MLA latent, recurrent state): bytes of ONE sequence's cache at ``T`` tokens (all layers)
    one of ``t`` tensor-parallel ranks holds by the law — each part × its fraction above. ``T`` may be a numpy
    array (the sweep's grid)."""
    return (model_on_rank(model, t).attention_cache_bytes(T, kv_bytes),
            model.state_bytes(state_bytes) * state_fraction_per_rank(model, t))


def cache_per_rank(model, T, kv_bytes: float, state_bytes: float, t: int):
    """Bytes of ONE sequence's cache at ``T`` tokens (all layers) on one of ``t`` tensor-parallel ranks, by the law:
    the sum of ``cache_parts_per_rank``."""
    attention, state = cache_parts_per_rank(model, T, kv_bytes, state_bytes, t)
    return attention + state


def weights_per_rank(weights: float, t: int, p: int = 1, expert_weights: float = 0.0, expert_group: int = 1):
    """Bytes of weights one rank holds among ``t`` tensor ranks × ``p`` pipeline stages: the dense part split over
    the ``t·p`` ranks, the MoE experts (``expert_weights`` of ``weights``) over ``expert_group`` times as many
    (expert parallelism: the experts spread over ``t × d`` ranks, d replicas)."""
    return (weights - expert_weights) / (t * p) + expert_weights / (t * p * expert_group)


def sequences_per_replica(batch, replicas):
    """⌈batch / replicas⌉: the sequences the busiest of ``replicas`` data-parallel replicas holds — and, read the
    other way, the replicas ``batch`` sequences need at ``replicas`` sequences each. Exact on integers; numpy
    arrays and floats too (the sweep's grid)."""
    return -(-batch // replicas)
