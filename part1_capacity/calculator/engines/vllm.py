"""What vLLM (v1 engine) reserves for one request, per tensor-parallel rank — read in vLLM's own source.

vLLM cuts the cache into pages: one page holds ``block_size`` tokens of one layer (attention) or one sequence's
whole state (Mamba / linear attention). Rules, each with the file it comes from:

- **page of an attention layer** (``vllm/v1/kv_cache_interface.py``, ``FullAttentionSpec.real_page_size_bytes``):
  ``block_size × num_kv_heads × (head_size + head_size_v) × dtype bytes``; MLA (``MLAAttentionSpec``): one "head"
  of ``kv_lora_rank + qk_rope_head_dim``, K only, plus the indexer's key for DeepSeek-V3.2 — each the lesson-03
  law for one layer (``laws.kv_bytes_per_token`` / ``laws.mla_bytes_per_token``), called, not restated.
- **block size** (``vllm/config/cache.py``, ``CacheConfig.block_size``): 16 tokens on CUDA.
- **K/V heads under tensor parallelism** (``vllm/model_executor/models/llama.py`` and the other attention models:
  ``num_kv_heads = max(1, total_num_kv_heads // tp_size)``): split, but each rank keeps at least one — replicated
  when ``tp > n_kv_heads``. MLA (``vllm/model_executor/layers/mla.py``): the latent is not split, every rank
  holds all of it.
- **one request's reservation** (``vllm/v1/core/kv_cache_utils.py``, ``_max_memory_usage_bytes_from_groups``;
  the "Maximum concurrency" log uses it): ``group_size × page × Σ_groups ⌈max_memory_usage(group) / page⌉``.
  Full attention: ``⌈max_model_len / block_size⌉`` pages (``FullAttentionSpec.max_memory_usage_bytes``); sliding
  window: ``⌈min(window − 1 + max_num_batched_tokens, max_model_len) / block_size⌉ + 1`` pages
  (``SlidingWindowSpec``); chunked local attention (Llama 4): ``⌈min(chunk + max_num_batched_tokens,
  max_model_len) / block_size⌉`` pages, no −1 and no extra page (``ChunkedLocalAttentionSpec``, a layer type of its
  own; the hybrid manager keeps it, ``VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE`` on by default in v0.19,
  vllm/envs.py); Mamba / linear attention: one page (``MambaSpec``, ``mamba_cache_mode`` "none").
- **grouping** (``kv_cache_utils.py``, ``_get_kv_cache_groups_uniform_page_size``): layers of one type form
  groups of ``group_size`` layers — the smallest type's layer count, or the largest when it is < 1.5 × the
  smallest — the last group of a type padded with empty layers.
- **page-size unification across layer types with their own K/V widths** (Gemma 4, MiMo-V2-Flash;
  ``kv_cache_utils.py``, ``unify_kv_cache_spec_page_size``): the largest page of 16 tokens stays, each smaller
  page's block size is multiplied until its page is as large (refused when it does not divide); with
  ``--disable-hybrid-kv-cache-manager`` every layer is full attention, one group of all layers each at its own page
  (``UniformTypeKVCacheSpecs``).
- **page-size unification for Mamba / linear hybrids** (``vllm/platforms/interface.py``,
  ``_align_hybrid_block_size``, without prefix caching): the attention block size becomes
  ``16 × ⌈mamba_page / (16 × attention_page_per_token)⌉`` tokens and the state page is padded up to that page.
- **state dtypes** (``vllm/model_executor/layers/mamba/mamba_utils.py``, ``MambaStateDtypeCalculator``): the
  convolution state in the model dtype (``mamba_cache_dtype`` "auto"), the SSM state in
  ``mamba_ssm_cache_dtype`` — float32 for Nemotron-H (``vllm/model_executor/models/config.py``,
  ``NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE``); shapes split by tensor parallelism
  (``MambaStateShapeCalculator``).
- **``--disable-hybrid-kv-cache-manager``** (``kv_cache_utils.py``, ``unify_hybrid_kv_cache_specs``): sliding
  layers become full-attention layers (every layer at full length); a Mamba / linear hybrid cannot be unified and
  vLLM refuses to start.

Units: bytes, tokens.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from part0_foundations.l03_kv_cache import laws
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.sizing.sharding import kv_heads_per_rank, state_shards
from course.shared.units import GIB, ceil_div

BLOCK_SIZE = 16                 # vllm/config/cache.py: block_size 16 on CUDA
KERNEL_BLOCK_ALIGNMENT = 16     # vllm/platforms/interface.py: max(backend's smallest kernel block, block_size)
GROUP_SIZE_SLACK = 1.5          # kv_cache_utils.py: max_num_layers < min_num_layers * 1.5 → group by the max
SOURCE = "vLLM v1 (vllm-project/vllm main)"


cdiv = ceil_div   # vLLM's name (vllm/utils: cdiv)


def max_num_batched_tokens(memory_bytes: float, name: str = "", acc_id: str = "") -> int:
    """``vllm serve``'s default (vllm/engine/arg_utils.py, ``EngineArgs.get_batch_defaults``, usage context
    OPENAI_API_SERVER): TPU v6e 1024, v5e 512, v5p 256; GPUs with >= 70 GiB (as the runtime reports them) other
    than the A100, 8192; every other GPU 2048."""
    tpu = {"tpu-v6e": 1024, "tpu-v5e": 512, "tpu-v5p": 256}
    if acc_id in tpu:
        return tpu[acc_id]
    return 8192 if memory_bytes >= 70 * GIB and "a100" not in name.lower() else 2048


def attention_page_per_token(profile, tp: int, kv_bytes: float, window: bool = False) -> float:
    """Bytes one token adds to one attention layer's page on one rank (kv_cache_interface.py): the lesson-03 law
    for one layer, never restated here. MLA (``MLAAttentionSpec``: one "head" of the latent, not split by TP) with
    the sparse-attention indexer's key when the model has one (DeepSeek-V3.2: vLLM allocates the indexer cache
    beside the latent, vllm/model_executor/models/deepseek_v2.py ``DeepseekV32IndexerCache``); GQA/MQA with the
    K/V heads this rank holds (``kv_heads_per_rank``: split, replicated below one head), each head a key of
    ``head_size`` and a value of ``head_size_v`` (``AttentionSpec.real_page_size_bytes``; MiMo-V2-Flash's 192 and
    128, vllm/model_executor/models/mimo_v2_flash.py). ``window``: a window layer's page, at its own K/V heads and
    widths (Gemma 4's sliding layers, vllm/model_executor/models/gemma4.py; MiMo-V2-Flash's ``swa_*`` fields)."""
    if profile.is_mla:
        return laws.mla_bytes_per_token(1, profile.kv_lora_rank, profile.qk_rope_head_dim, kv_bytes,
                                        profile.index_head_dim)
    if window:
        heads, k, v = profile.window_kv
        return laws.kv_bytes_per_token(1, kv_heads_per_rank(heads, tp), k, kv_bytes, v)
    return laws.kv_bytes_per_token(1, kv_heads_per_rank(profile.n_kv_heads, tp), profile.head_dim, kv_bytes,
                                   profile.kv_v_dim)


def state_page(profile, tp: int, conv_bytes: float, ssm_bytes: float) -> float:
    """One sequence's state of one recurrent layer on one rank (MambaSpec.page_size_bytes): convolution state in
    ``conv_bytes``, SSM / delta-net state in ``ssm_bytes``, both split over ``tp`` ranks (mamba_utils.py). Not
    modelled: the B/C groups vLLM replicates when ``n_groups`` does not divide by ``tp``
    (``MambaStateShapeCalculator.extra_groups_for_head_shards``), a few percent of the convolution state."""
    s = profile.ssm
    split = state_shards(s.n_heads, tp)
    return (s.conv_elements * conv_bytes + (s.state_elements - s.conv_elements) * ssm_bytes) / split


@dataclass
class Reservation:
    """vLLM's reservation for one request of ``max_model_len`` tokens on one tensor-parallel rank."""

    bytes_per_request: float
    bytes_per_token: float          # growing slope per rank (full-attention layers), bytes per token
    state_bytes: float              # the recurrent-state pages of one request on one rank (padded)
    block_size: int
    page_bytes: float
    group_size: int
    groups: dict                    # layer type → number of groups
    notes: list = field(default_factory=list)


def _group_size(counts: dict) -> int:
    lo, hi = min(counts.values()), max(counts.values())
    return hi if hi < lo * GROUP_SIZE_SLACK else lo


def reservation(profile, max_model_len: int, tp: int = 1, kv_bytes: float = 2, conv_bytes: float = 2,
                ssm_bytes: float = 4, batched_tokens: int = 8192, hybrid_manager: bool = True,
                block_size: int = BLOCK_SIZE) -> Reservation:
    """What vLLM reserves per request on one of ``tp`` ranks (see the module docstring for each rule)."""
    if profile.index_head_dim and not profile.is_mla:
        raise InputError("vLLM: block-sparse attention's indexer keys beside K/V (MiniMax-M3) sit in a side cache of "
                         "their own (vllm/models/minimax_m3/common/indexer.py MiniMaxM3IndexerCache) whose pages are "
                         "not modelled; plan it with --engine law")
    notes = []
    page_tok = attention_page_per_token(profile, tp, kv_bytes)
    window_kind = "chunked" if getattr(profile, "window_kind", "sliding") == "chunked" else "sliding"
    tok = {"full": page_tok, window_kind: attention_page_per_token(profile, tp, kv_bytes, window=True)}
    if not profile.is_mla and min(profile.n_kv_heads, profile.window_kv[0]) < tp:
        heads = sorted({profile.n_kv_heads, profile.window_kv[0] if profile.n_window_layers else profile.n_kv_heads})
        per_rank = ("1 head" if len(heads) == 1 else
                    " and ".join(str(kv_heads_per_rank(h, tp)) for h in heads) + " heads (by layer type)")
        notes.append(f"K/V heads replicated: {' and '.join(map(str, heads))} K/V heads over {tp} ranks → "
                     f"{per_rank} per rank (vllm/model_executor/models/llama.py)")
    if profile.is_mla and tp > 1:
        notes.append("MLA latent kept whole on every rank (vllm/model_executor/layers/mla.py)")
    widths_differ = profile.n_window_layers and tok[window_kind] != page_tok
    counts = {}
    if profile.n_full_layers:
        counts["full"] = profile.n_full_layers
    if profile.n_window_layers:
        if hybrid_manager:
            counts[window_kind] = profile.n_window_layers
        elif widths_differ:
            # all full attention then, at two widths: one group of every layer, each its own page
            # (kv_cache_utils.py UniformTypeKVCacheSpecs, _get_kv_cache_groups_uniform_type)
            counts["full window-width"] = profile.n_window_layers
            tok["full window-width"] = tok[window_kind]
            notes.append("--disable-hybrid-kv-cache-manager: sliding-window layers allocated at full length, each "
                         "at its own K/V width (vllm/v1/core/kv_cache_utils.py unify_hybrid_kv_cache_specs)")
        else:
            counts["full"] = counts.get("full", 0) + profile.n_window_layers
            notes.append("--disable-hybrid-kv-cache-manager: sliding-window layers allocated at full length "
                         "(vllm/v1/core/kv_cache_utils.py unify_hybrid_kv_cache_specs)")
    block = block_size
    state = 0.0
    if profile.ssm is not None:
        if not hybrid_manager:
            raise InputError("--disable-hybrid-kv-cache-manager: vLLM cannot serve a Mamba / linear-attention "
                             "hybrid without the hybrid KV cache manager (kv_cache_utils.py raises)")
        if widths_differ:
            raise InputError("vLLM: window layers with K/V widths of their own beside recurrent layers: the page "
                             "unification of such a hybrid is not modelled")
        counts["state"] = profile.ssm.n_layers
        mamba_page = state_page(profile, tp, conv_bytes, ssm_bytes)
        block = KERNEL_BLOCK_ALIGNMENT * cdiv(mamba_page, KERNEL_BLOCK_ALIGNMENT * page_tok)
        notes.append(f"attention block size raised to {block:,} tokens so a page holds one sequence's state of a "
                     f"recurrent layer ({mamba_page / 2 ** 20:.2f} MiB, padded to {block * page_tok / 2 ** 20:.2f} "
                     "MiB) (vllm/platforms/interface.py _align_hybrid_block_size)")
        notes.append("one state page per recurrent layer and request: mamba_cache_mode 'none', prefix caching off "
                     "(vllm/model_executor/models/config.py MambaModelConfig); with prefix caching vLLM keeps 2 "
                     "('align') or one per block ('all') (kv_cache_interface.py MambaSpec.max_memory_usage_bytes)")
        state = mamba_page
    page = block * page_tok
    blocks = {k: block for k in counts}
    page_of = {k: page for k in counts}
    if len(counts) == 1:
        # one type: every layer its own page, no group padding (kv_cache_utils.py _get_kv_cache_groups_uniform_spec)
        kind, n = next(iter(counts.items()))
        group_size, groups = n, {kind: 1}
    elif "full window-width" in counts:
        group_size, groups = 1, dict(counts)
        page_of = {k: block * tok[k] for k in counts}
    else:
        if widths_differ:
            page, blocks = _unified_pages(tok, counts, block, notes)
            page_of = {k: page for k in counts}
        group_size = _group_size(counts)
        groups = {k: cdiv(n, group_size) for k, n in counts.items()}
        padded = {k: groups[k] * group_size - n for k, n in counts.items() if groups[k] * group_size != n}
        if padded:
            empty = ", ".join(f"{n} empty {k} layer(s)" for k, n in padded.items())
            notes.append(f"layers grouped by {group_size}: {empty}"
                         " padded in (kv_cache_utils.py _get_kv_cache_groups_uniform_page_size)")
    win_block = blocks.get(window_kind, block)
    pages = {"full": cdiv(max_model_len, blocks.get("full", block)),
             "full window-width": cdiv(max_model_len, block),
             "sliding": cdiv(min(profile.window - 1 + batched_tokens, max_model_len), win_block) + 1,
             "chunked": cdiv(min(profile.window + batched_tokens, max_model_len), win_block),
             "state": 1}
    if "sliding" in counts:
        steady = cdiv(min(profile.window, max_model_len), win_block) + 1
        notes.append(f"sliding-window layers budget {pages['sliding']} blocks of {win_block} per request: window − 1 + "
                     f"{batched_tokens:,} tokens of a chunked-prefill step, capped at the context, + 1 "
                     "(kv_cache_interface.py SlidingWindowSpec.max_memory_usage_bytes) — the start-up worst case "
                     "vLLM's 'Maximum concurrency' log divides by, not what a running server holds: in steady "
                     f"decode a request keeps about {steady} blocks per sliding layer (its window + the block being "
                     "filled; older blocks are freed, vllm/v1/core/single_type_kv_cache_manager.py "
                     "SlidingWindowManager.remove_skipped_blocks)")
    if "chunked" in counts:
        notes.append(f"chunked layers budget {pages['chunked']} blocks of {win_block} per request: the chunk + "
                     f"{batched_tokens:,} tokens of a chunked-prefill step, capped at the context "
                     "(kv_cache_interface.py ChunkedLocalAttentionSpec.max_memory_usage_bytes)")
    total = group_size * sum(groups[k] * page_of[k] * pages[k] for k in groups)
    slope = group_size * sum(groups[k] * tok[k] for k in groups if k in ("full", "full window-width"))
    full_block = blocks.get("full", block)
    if cdiv(max_model_len, full_block) * full_block != max_model_len:
        notes.append(f"context rounded up to whole blocks of {full_block} tokens")
    return Reservation(float(total), float(slope), float(group_size * groups.get("state", 0) * page), block,
                       float(page), group_size, groups, notes)


def _unified_pages(tok: dict, counts: dict, block: int, notes: list) -> tuple[float, dict]:
    """One page size for layer types whose K/V widths differ (kv_cache_utils.py ``unify_kv_cache_spec_page_size``):
    the largest page of ``block`` tokens, and each smaller type's block size multiplied until its page is that large
    — vLLM refuses (NotImplementedError) when a smaller page does not divide the largest. Returns the page and the
    block size per layer type."""
    page = max(block * tok[k] for k in counts)
    blocks = {}
    for k in counts:
        ratio, rest = divmod(page, block * tok[k])
        if rest:
            raise InputError(f"vLLM: the {k} layers' page ({block * tok[k]:,.0f} B) does not divide the largest "
                             f"({page:,.0f} B): vLLM cannot unify these layer types' page sizes (vllm/v1/core/"
                             "kv_cache_utils.py unify_kv_cache_spec_page_size)")
        blocks[k] = int(block * ratio)
    raised = {k: b for k, b in blocks.items() if b != block}
    if raised:
        notes.append("page sizes unified across layer types with their own K/V widths: "
                     + ", ".join(f"{k} layers in blocks of {b} tokens" for k, b in raised.items())
                     + f" so their page equals the others' {page:,.0f} B (vllm/v1/core/kv_cache_utils.py "
                     "unify_kv_cache_spec_page_size)")
    return page, blocks


TORCH_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def default_ssm_state_dtype(profile) -> str:
    """The SSM state dtype vLLM picks by itself (``--mamba-ssm-cache-dtype auto``): the checkpoint's
    ``mamba_ssm_cache_dtype`` or the family's default — float32 for Nemotron-H
    (vllm/model_executor/models/config.py, NemotronHForCausalLMConfig) — recorded as ``SSM.state_dtype``; else
    the model dtype (mamba_utils.py ``_mamba_state_dtype``: "auto" follows the conv state, the model dtype)."""
    return profile.ssm.state_dtype or profile.compute_dtype


def mamba_ssm_cache_dtype_args(profile, state_dtype: str) -> list[str]:
    """``["--mamba-ssm-cache-dtype", X]`` for ``vllm serve`` when the plan keeps the SSM state in another dtype
    than vLLM would pick by itself; ``[]`` when they agree or the model has no recurrent layers."""
    if profile.ssm is None or state_dtype == default_ssm_state_dtype(profile):
        return []
    if state_dtype not in TORCH_DTYPE:
        raise InputError(f"state_dtype: vLLM's --mamba-ssm-cache-dtype takes {', '.join(TORCH_DTYPE)}, "
                         f"not {state_dtype}")
    return ["--mamba-ssm-cache-dtype", TORCH_DTYPE[state_dtype]]
