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
"""
from __future__ import annotations


def splits_heads(model, t: int) -> bool:
    """True when ``t`` tensor-parallel ranks split ``model``'s attention heads evenly (vLLM's rule above)."""
    return model.n_heads % t == 0 and (model.n_kv_heads % t == 0 or t % model.n_kv_heads == 0)


def kv_heads_per_rank(n_kv_heads: int, t: int) -> int:
    """K/V heads one of ``t`` ranks holds: ``max(1, n_kv_heads // t)`` — replicated when ``t > n_kv_heads``."""
    return max(1, n_kv_heads // t)


def kv_fraction_per_rank(model, t: int) -> float:
    """Share of one sequence's attention cache one of ``t`` ranks holds (MLA: 1, the latent on every rank)."""
    if model.is_mla:
        return 1.0
    return kv_heads_per_rank(model.n_kv_heads, t) / model.n_kv_heads


def state_shards(n_state_heads: int, t: int) -> int:
    """Ranks the recurrent state is split over: ``min(t, n_state_heads)`` (at least one state head per rank)."""
    return min(t, n_state_heads)


def state_fraction_per_rank(model, t: int) -> float:
    """Share of one sequence's recurrent state one of ``t`` ranks holds (0 for a model without one)."""
    if model.ssm is None:
        return 0.0
    return 1.0 / state_shards(model.ssm.n_heads, t)
