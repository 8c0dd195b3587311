"""Every check of every lesson rejects wrong work: each graded definition meets at least two plausible mistakes,
written as mutants of the reference solution (one edit of its source), and the check fails with the message that
names the rule. The reference itself passes every check (tests/autograder without --notebook)."""
import importlib
import sys
import types

import pytest

from course.grading.contract import CheckFailed
from course.grading.notebook_spec import REPO, all_specs

CHECKS = {spec.ASSIGNMENT: importlib.import_module(spec.__name__.rsplit(".", 1)[0] + ".checks") for spec in all_specs()}
LESSONS = {a: m.LESSON for a, m in CHECKS.items() if hasattr(m, "LESSON")}

# (lesson, graded definition, check id, [(old, new), ...] edits of the reference module's source, words the
# failure message must contain). The module is the lesson reference module that defines the definition.
MUTANTS = [
    # --- 01 attention ---------------------------------------------------------------------------------------------
    ("01_attention", "scaled_dot_product_attention", "sdpa_matches_torch",
     [("q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])", "q @ k.transpose(-2, -1)")], "softmax(q kᵀ / √d) v"),
    ("01_attention", "scaled_dot_product_attention", "sdpa_matches_torch",
     [("    if causal:\n        c = causal_mask", "    if False:\n        c = causal_mask")], "causal=True"),
    ("01_attention", "scaled_dot_product_attention", "sdpa_matches_torch",
     [("    out = weights @ v\n", "    out = weights.double() @ v.double()\n")], "dtype torch.float64"),
    ("01_attention", "scaled_dot_product_attention", "sdpa_stable",
     [("e = torch.exp(scores - row_max)", "e = torch.exp(scores)")], "row max"),
    ("01_attention", "scaled_dot_product_attention", "sdpa_masked_weights_zero",
     [("    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))\n", "")],
     "fully masked row"),
    ("01_attention", "scaled_dot_product_attention", "sdpa_masked_weights_zero",
     [("weights = e / torch.where(denom > 0, denom, torch.ones_like(denom))", "weights = e / denom")],
     "fully masked row"),
    ("01_attention", "scaled_dot_product_attention", "sdpa_causal_decode",
     [("c = causal_mask(lq, lk, device=q.device)", "c = torch.ones(lq, lk, dtype=torch.bool).tril()")],
     "aligned to the end of the keys"),
    ("01_attention", "scaled_dot_product_attention", "sdpa_causal_decode",
     [("allowed = c if allowed is None else (allowed & c)", "allowed = c")], "mask and causal=True together"),
    ("01_attention", "MultiHeadAttention", "gqa_equals_repeated_mha",
     [("k = k.repeat_interleave(group, dim=1)", "k = k.repeat(1, group, 1, 1)"),
      ("v = v.repeat_interleave(group, dim=1)", "v = v.repeat(1, group, 1, 1)")], "h // group"),
    ("01_attention", "MultiHeadAttention", "mha_matches_torch",
     [("mask=mask, causal=causal, return_weights=True)", "mask=mask, causal=False, return_weights=True)")],
     "causal self-attention"),
    ("01_attention", "MultiHeadAttention", "mqa_and_cross_attention",
     [("k = self.split_heads(self.k_proj(src), self.n_kv_heads)", "k = self.split_heads(self.k_proj(x), self.n_kv_heads)")],
     "cross-attention"),
    ("01_attention", "MultiHeadAttention", "mha_mask_every_head",
     [("            mask = mask.unsqueeze(1)  # (B, Lq, Lk) → (B, 1, Lq, Lk), shared by every head\n",
       "            pass\n")],
     "padding mask (B, 1, Lk) shared by every head"),
    ("01_attention", "MultiHeadAttention", "mha_mask_every_head",
     [("out, weights = scaled_dot_product_attention(q, k, v, mask=mask, causal=causal, return_weights=True)",
       "out, weights = scaled_dot_product_attention(q, k, v, causal=causal, return_weights=True)")],
     "padding mask (B, 1, Lk) shared by every head"),
    # --- 02 encoder-decoder ---------------------------------------------------------------------------------------
    ("02_encoder_decoder", "EncoderLayer", "encoder_layer_matches_torch",
     [("        x = self.norm1(x + self.dropout(self.self_attn(x, mask=mask)))\n        x = self.norm2(x + self.dropout(self.ff(x)))",
       "        x = x + self.dropout(self.self_attn(self.norm1(x), mask=mask))\n        x = x + self.dropout(self.ff(self.norm2(x)))")],
     "norm(x + sublayer(x))"),
    ("02_encoder_decoder", "EncoderLayer", "encoder_layer_ignores_padding",
     [("self.self_attn(x, mask=mask)", "self.self_attn(x)")], "pass mask to self-attention"),
    ("02_encoder_decoder", "DecoderLayer", "decoder_layer_causal",
     [("self.self_attn(x, causal=True)", "self.self_attn(x)")], "must be causal"),
    ("02_encoder_decoder", "DecoderLayer", "decoder_layer_reads_source",
     [("self.cross_attn(x, memory, mask=memory_mask, return_weights=True)", "self.cross_attn(x, memory, return_weights=True)")],
     "memory_mask"),
    ("02_encoder_decoder", "DecoderLayer", "decoder_layer_matches_torch",
     [("x = self.norm2(x + self.dropout(attended))", "x = self.norm2(self.dropout(attended))")],
     "nn.TransformerDecoderLayer"),
    ("02_encoder_decoder", "greedy_decode", "greedy_decode_batched",
     [("        if bool(done.all()):\n            break\n", "")], "generated tokens"),
    ("02_encoder_decoder", "greedy_decode", "greedy_decode_batched",
     [("        next_id = next_id.masked_fill(done, cfg.pad_id)  # finished rows only pad\n", "")], "<pad>"),
    ("02_encoder_decoder", "greedy_decode", "greedy_decode_translates",
     [("[:, -1].argmax(dim=-1)", "[:, 0].argmax(dim=-1)")], "translated"),
    ("02_encoder_decoder", "Seq2Seq", "checkpoint_in_your_layers",
     [("x = self.norm2(x + self.dropout(attended))", "x = self.norm2(x)")], "with your layers"),
    ("02_encoder_decoder", "Seq2Seq", "checkpoint_in_your_layers",
     [("        x = self.norm1(x + self.dropout(self.self_attn(x, mask=mask)))\n", "")], "with your layers"),
    # --- 03 KV cache ----------------------------------------------------------------------------------------------
    ("03_kv_cache", "LayerKV", "layer_kv_append",
     [("torch.cat([self.k, k], dim=2)", "torch.cat([self.k, k], dim=1)")], "the token axis"),
    ("03_kv_cache", "LayerKV", "layer_kv_append",
     [("self.v = v if self.v is None else torch.cat([self.v, v], dim=2)", "self.v = v")], "values after"),
    ("03_kv_cache", "WindowKV", "window_ring_buffer",
     [("elif slot == self.k.shape[2]:", "elif True:")], "min(T, W)"),
    ("03_kv_cache", "WindowKV", "window_ring_buffer",
     [("        self.n += t\n        ### END SOLUTION", "        ### END SOLUTION")], "positions returned"),
    ("03_kv_cache", "CausalSelfAttention", "cached_equals_uncached",
     [("        if self.window is not None:\n            allowed = allowed & (k_pos[None, :] > positions[:, None] - self.window)\n", "")],
     "W=4"),
    ("03_kv_cache", "CausalSelfAttention", "cached_equals_uncached",
     [("k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)",
       "k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)")], "h // group"),
    ("03_kv_cache", "CausalSelfAttention", "cached_equals_uncached",
     [("            k, v, k_pos = cache.append(k, v)", "            cache.append(k, v)\n            k_pos = positions")],
     "with the cache vs without"),
    ("03_kv_cache", "CausalSelfAttention", "attention_cache_bytes",
     [("            k, v, k_pos = cache.append(k, v)", "            cache.append(k, v)\n            k, v, k_pos = cache.append(k, v)")],
     "the law says"),
    ("03_kv_cache", "CausalSelfAttention", "window_cache_stops_at_W",
     [("            k, v, k_pos = cache.append(k, v)", "            cache.append(k, v)\n            k, v, k_pos = cache.append(k, v)")],
     "the law says"),
    ("03_kv_cache", "MLAttention", "mla_cached_equals_uncached",
     [("c_kv = self.kv_norm(self.kv_down(x))", "c_kv = self.kv_down(x)")], "reference"),
    ("03_kv_cache", "MLAttention", "mla_cached_equals_uncached",
     [("k_rope = apply_rope(self.k_rope_proj(x), positions, self.rope_theta)", "k_rope = self.k_rope_proj(x)")],
     "reference"),
    ("03_kv_cache", "MLAttention", "mla_cache_bytes",
     [("            c_kv, k_rope = cache.append(c_kv, k_rope)",
       "            cache.append(c_kv, k_rope)\n            c_kv, k_rope = cache.append(c_kv, k_rope)")], "the law says"),
    # --- 04 GPT-2 INT8 --------------------------------------------------------------------------------------------
    ("04_gpt2_int8", "conv1d_to_linear", "conversion_exact",
     [("linear.weight.copy_(child.weight.t())", "linear.weight.copy_(child.weight.reshape(nf, nx))")], "transposed"),
    ("04_gpt2_int8", "conv1d_to_linear", "conversion_exact",
     [("                if child.bias is not None:\n                    linear.bias.copy_(child.bias)\n", "")], ".bias"),
    ("04_gpt2_int8", "conv1d_to_linear", "lm_head_untouched_and_tied",
     [("        else:\n            conv1d_to_linear(child)",
       "        elif isinstance(child, nn.Linear):\n            setattr(model, name, nn.Linear(child.in_features, "
       "child.out_features, bias=False))\n        else:\n            conv1d_to_linear(child)")], "lm_head was replaced"),
    ("04_gpt2_int8", "conv1d_to_linear", "lm_head_untouched_and_tied",
     [("        else:\n            conv1d_to_linear(child)", "")], "8 block Linears"),
    ("04_gpt2_int8", "quantize_per_tensor", "per_tensor_matches_torch",
     [("scale = w.abs().max().clamp(min=MIN_MAX_ABS) / QMAX", "scale = w.abs().max().clamp(min=MIN_MAX_ABS) / 128")],
     "max|w| / 127"),
    ("04_gpt2_int8", "quantize_per_tensor", "rounding_and_clamping",
     [("q = torch.clamp(torch.round(w / scale), QMIN, QMAX)", "q = torch.clamp(torch.floor(w / scale + 0.5), QMIN, QMAX)")],
     "round half to even"),
    ("04_gpt2_int8", "quantize_per_tensor", "rounding_and_clamping",
     [("q = torch.clamp(torch.round(w / scale), QMIN, QMAX)", "q = torch.round(w / scale)")], "clamp to [-128, 127]"),
    ("04_gpt2_int8", "quantize_per_channel", "per_channel_matches_torch",
     [("max_abs = w.abs().amax(dim=other) if other else w.abs()", "max_abs = w.abs().amax(dim=axis)")],
     "one scale per channel"),
    ("04_gpt2_int8", "quantize_per_channel", "per_channel_matches_torch",
     [("scales = max_abs.clamp(min=MIN_MAX_ABS) / QMAX", "scales = max_abs / QMAX")], "all-zero channel"),
    ("04_gpt2_int8", "quantize_per_channel", "per_channel_not_worse",
     [("max_abs = w.abs().amax(dim=other) if other else w.abs()", "max_abs = w.abs().max().expand(w.shape[axis])")],
     "per-channel mean squared error"),
    ("04_gpt2_int8", "dequantize", "dequantize",
     [("shape[axis % q.dim()] = -1", "shape[0] = -1")], "axis=1"),
    ("04_gpt2_int8", "dequantize", "dequantize",
     [("w = q.float() * scale", "w = (q.float() * scale).round()")], "per tensor"),
    ("04_gpt2_int8", "int8_round_trip", "minilm_layer_sqnr", [("out = copy.deepcopy(linear)", "out = linear")],
     "return a copy"),
    ("04_gpt2_int8", "int8_round_trip", "minilm_layer_sqnr",
     [("q, scales = quantize_per_channel(linear.weight, axis=0)", "q, scales = quantize_per_channel(linear.weight, axis=1)"),
      ("out.weight.copy_(dequantize(q, scales, axis=0))", "out.weight.copy_(dequantize(q, scales, axis=1))")],
     "one scale per OUTPUT channel"),
    ("04_gpt2_int8", "int8_round_trip", "minilm_embeddings_match",
     [("q, scales = quantize_per_channel(linear.weight, axis=0)", "q, scales = quantize_per_channel(linear.weight, axis=1)"),
      ("out.weight.copy_(dequantize(q, scales, axis=0))", "out.weight.copy_(dequantize(q, scales, axis=1))")],
     "the scales' axis"),
    # --- 05 RAG ---------------------------------------------------------------------------------------------------
    ("05_rag", "chunk_text", "chunk_offsets_exact",
     [("        if end == len(text):\n            break  # the next window would lie wholly inside this one\n", "")],
     "chunks for"),
    ("05_rag", "chunk_text", "chunk_overlap_exact", [("    step = size - overlap\n", "    step = size\n")], "share exactly"),
    ("05_rag", "chunk_text", "chunk_edge_cases",
     [("        if end == len(text):\n            break  # the next window would lie wholly inside this one\n", "")],
     "exactly size"),
    ("05_rag", "chunk_text", "chunk_any_length",
     [("    while start < len(text):\n", "    while start < len(text) - overlap:\n")],
     "a 1-character text (size 2, overlap 1): expected the windows [(0, 1)], got []"),
    ("05_rag", "chunk_text", "chunk_any_length",
     [("chunks.append(Chunk(source, start, end, text[start:end]))",
       "chunks.append(Chunk(source, start, end, text.encode()[start:end].decode(errors='ignore')))")],
     "offsets count characters, not bytes"),
    ("05_rag", "cosine_top_k", "topk_matches_faiss",
     [("sims = unit(queries) @ unit(docs).T", "sims = queries @ docs.T")], "FAISS"),
    ("05_rag", "cosine_top_k", "topk_matches_faiss",
     [("np.argsort(-np.take_along_axis(sims, ids, axis=1), axis=1, kind=\"stable\")",
       "np.argsort(np.take_along_axis(sims, ids, axis=1), axis=1, kind=\"stable\")")], "FAISS"),
    ("05_rag", "cosine_top_k", "topk_zero_and_ties",
     [("return x / np.where(norms > 0, norms, 1.0)", "return x / norms"),
      ("ids = np.nonzero(above | tied)[1].reshape(len(sims), k)", "ids = np.argsort(-sims, axis=1, kind='stable')[:, :k]")],
     "got NaN"),
    ("05_rag", "cosine_top_k", "topk_zero_and_ties",
     [("    tied &= np.cumsum(tied, axis=1) <= k - above.sum(axis=1, keepdims=True)\n"
       "    ids = np.nonzero(above | tied)[1].reshape(len(sims), k)  # k per row, in id order\n",
       "    ids = np.sort(np.argpartition(-sims, k - 1, axis=1)[:, :k], axis=1)\n")],
     "equal cosines, the lower id first"),
    ("05_rag", "build_prompt", "prompt_budget_never_exceeded",
     [("            blocks, cited = candidate, cited + [hit]\n",
       "            blocks, cited = candidate, cited + [hit]\n        else:\n            break\n")],
     "fitted but was left out"),
    ("05_rag", "build_prompt", "prompt_citations_numbered",
     [("candidate = blocks + [format_source(len(blocks) + 1, hit.chunk)]",
       "candidate = blocks + [format_source(hit.rank, hit.chunk)]")], "consecutive"),
    ("05_rag", "build_prompt", "prompt_counts_whole_prompt",
     [("        if count_tokens(format_prompt(question, candidate)) <= budget:\n",
       "        if count_words(format_prompt(question, candidate)) <= budget:\n")], "over the budget"),
    ("05_rag", "build_prompt", "prompt_counts_whole_prompt",
     [("        if count_tokens(format_prompt(question, candidate)) <= budget:\n",
       "        if count_tokens(format_prompt(question, blocks)) + count_tokens(candidate[-1]) <= budget:\n")],
     "over the budget"),
    ("05_rag", "flat_index_bytes", "index_bytes_formula",
     [("n_bytes = FOURCC + HEADER_BYTES + 8 + 4 * n * d", "n_bytes = 4 * n * d")], "FAISS writes"),
    ("05_rag", "flat_index_bytes", "index_bytes_formula",
     [("n_bytes = FOURCC + HEADER_BYTES + 8 + 4 * n * d", "n_bytes = FOURCC + HEADER_BYTES + 4 * n * d")],
     "FAISS writes"),
    # --- Part 1, exercise 1: KV bytes per token from config.json ---------------------------------------------------
    ("p1_01_kv_from_config", "kv_bytes_per_token", "full_attention",
     [("per_token = 2 * layers * kv_heads", "per_token = layers * kv_heads")], "key AND a value"),
    ("p1_01_kv_from_config", "kv_bytes_per_token", "full_attention",
     [('kv_heads = config.get("num_key_value_heads") or heads', "kv_heads = heads")], "num_key_value_heads"),
    ("p1_01_kv_from_config", "kv_bytes_per_token", "full_attention",
     [('head_dim = config.get("head_dim") or hidden // heads', "head_dim = hidden // heads")], "sets head_dim"),
    ("p1_01_kv_from_config", "kv_bytes_per_token", "mla",
     [('per_token = layers * (config["kv_lora_rank"]', 'per_token = 2 * layers * (config["kv_lora_rank"]')],
     "one latent per token"),
    ("p1_01_kv_from_config", "kv_bytes_per_token", "mla",
     [('(config["kv_lora_rank"] + config["qk_rope_head_dim"])', '(config["kv_lora_rank"])')], "the law gives"),
    # --- Part 1, exercise 2: the context that adds an accelerator ---------------------------------------------------
    ("p1_02_one_more_accelerator", "first_context_adding_an_accelerator", "bisection",
     [("mid = (lo + hi) // 2", "mid = lo + 1")], "bisection"),
    ("p1_02_one_more_accelerator", "first_context_adding_an_accelerator", "bisection",
     [("first = hi", "first = lo")], "you return"),
    ("p1_02_one_more_accelerator", "first_context_adding_an_accelerator", "none_when_never",
     [("    first = None\n", "    first = max_context\n")], "None"),
    ("p1_02_one_more_accelerator", "first_context_adding_an_accelerator", "real_deployments",
     [("first = hi", "first = lo")], "adds no accelerator yet"),
]


def mutant(lesson, name: str, edits):
    """The definition ``name`` from a copy of its reference module with ``edits`` applied (each must occur once)."""
    module = next(m for m in lesson.reference if hasattr(__import__(m, fromlist=["_"]), name))
    src = (REPO / lesson.source_file(module)).read_text()
    for old, new in edits:
        assert src.count(old) == 1, f"{module}: the mutant's text {old!r} occurs {src.count(old)} times"
        src = src.replace(old, new)
    mod = types.ModuleType(f"{module}_mutant")
    mod.__file__ = str(REPO / lesson.source_file(module))
    sys.modules[mod.__name__] = mod  # dataclasses look their module up
    try:
        exec(compile(src, f"<mutant of {module}>", "exec"), mod.__dict__)  # noqa: S102
    finally:
        sys.modules.pop(mod.__name__, None)
    return getattr(mod, name)


@pytest.mark.parametrize("assignment, name, check_id, edits, says", MUTANTS,
                         ids=[f"{m[2]}-{i}" for i, m in enumerate(MUTANTS)])
def test_check_rejects_a_mutant_of_the_solution(assignment, name, check_id, edits, says, one_torch_thread):
    lesson = LESSONS[assignment]
    check = lesson.get(check_id)
    assert check.name == name
    with pytest.raises(CheckFailed) as err:
        check.fn(mutant(lesson, name, edits))
    assert says.lower() in str(err.value).lower(), str(err.value)


def test_every_part0_lesson_has_a_contract():
    part0 = {a for a, m in CHECKS.items() if m.__name__.startswith("part0_foundations.")}
    assert part0 and part0 <= set(LESSONS), sorted(part0 - set(LESSONS))


@pytest.mark.parametrize("assignment", sorted(LESSONS))
def test_every_graded_definition_and_check_meets_mutants(assignment):
    lesson = LESSONS[assignment]
    per_name = {n: sum(1 for m in MUTANTS if m[0] == assignment and m[1] == n) for n in lesson.names()}
    assert all(n >= 2 for n in per_name.values()), per_name
    untested = set(lesson.ids()) - {m[2] for m in MUTANTS if m[0] == assignment}
    assert not untested, f"checks no mutant is fed to: {sorted(untested)}"


@pytest.mark.parametrize("assignment", sorted(LESSONS))
def test_contract_once_ids_are_check_names_and_notebook_cells(assignment):
    """One vocabulary: a check's id is its function's name, and the notebook's graded test cells are exactly the
    contract's checks, with their points."""
    from course.grading.notebook_spec import build_source_notebook

    lesson = LESSONS[assignment]
    for c in lesson.checks:
        assert c.fn.__name__ == f"check_{c.id}", (c.id, c.fn.__name__)
    spec = next(s for s in all_specs() if s.ASSIGNMENT == assignment)
    cells = [c.metadata["nbgrader"] for c in build_source_notebook(spec).cells
             if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"]["solution"]]
    assert [(c["grade_id"], c["points"]) for c in cells] == [(c.id, c.points) for c in lesson.checks]
