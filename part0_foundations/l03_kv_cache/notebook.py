"""Spec of the lesson 03 notebook (see course/grading/notebook_spec.py). Run `make notebooks` after editing."""
from course.grading.notebook_spec import code, given, graded, md, solution
from part0_foundations.l03_kv_cache import checks

ASSIGNMENT = "03_kv_cache"
NOTEBOOK = "kv_cache.ipynb"
AUTOGRADER = "tests/autograder/test_kv_cache.py"
SRC = checks.LESSON.source_file()

CELLS = [
    md(r"""
# Lesson 03 — A KV-cached GPT and the cache-size laws

A decoder generates one token at a time, and every new token attends to the keys and values of all the tokens
before it. Recomputing them at every step costs a whole forward pass over the sequence; **caching** them costs
memory instead — and that memory is what this course is about.

You will write the cache append, the ring buffer of a sliding-window layer, the cached attention step and the MLA
latent cache, and then measure that the cache really holds what the law says, to the byte:

$$\text{bytes}(T) = 2 \times L \times n_{kv} \times d_{head} \times b \times T \qquad \text{(MHA, GQA, MQA)}$$

The model (`part0_foundations/l03_kv_cache/gpt.py`) is given around your cells; the site page
*Part 0 › 03 KV cache* derives each law.
"""),
    code("""
import torch
from torch import nn

torch.set_num_threads(1)  # tiny tensors: more threads only add overhead
from part0_foundations.l01_attention.attention import scaled_dot_product_attention
from part0_foundations.l03_kv_cache import checks, laws
from part0_foundations.l03_kv_cache.gpt import GPT, GPTConfig, ModelCache, apply_rope
from part0_foundations.l03_kv_cache.structures import STRUCTURES, law_bytes
"""),
    md(r"""
## 1. The cache append

A full-attention layer keeps the keys and values of every token: tensors of shape
`(B, n_kv_heads, T, head_dim)` that grow by `t` rows when `t` new tokens arrive (the whole prompt at prefill, one
token per decode step). `append` returns everything cached, with the positions `0 … T−1`.
"""),
    solution(SRC, ["LayerKV"], grade_id="layer_kv_impl"),
    *graded(checks.LESSON, "layer_kv_append"),
    md(r"""
## 2. A ring buffer for a sliding window

A window layer only ever looks at the last $W$ tokens, so it keeps only those: token $p$ lives in slot $p \bmod W$.
The buffer grows until it holds $W$ tokens, then each new token overwrites the oldest. `append` first returns
what the new queries may look at (the held tokens, oldest first, plus the new ones — `ordered()` is given), then
stores the new tokens and counts them in `self.n`.
"""),
    solution(SRC, ["WindowKV"], grade_id="window_kv_impl"),
    *graded(checks.LESSON, "window_ring_buffer"),
    md(r"""
## 3. The cached attention step

`forward(x, positions, cache)` receives only the **new** tokens `x` at absolute `positions`. Project them to
queries, keys and values, rotate queries and keys by their positions (`apply_rope`), append the keys and values
to the layer cache, let each K/V head serve its group of `n_head // n_kv_heads` query heads, and attend with a
mask built from positions: a query at $p$ may see a key at $j$ if $j \le p$ (and $j > p - W$ for a window layer).
With `cache=None`, `x` is the whole sequence (the uncached path): the same code must give the same result.
"""),
    solution(SRC, ["CausalSelfAttention"], grade_id="attention_impl"),
    *graded(checks.LESSON, "cached_equals_uncached", "attention_cache_bytes", "window_cache_stops_at_W"),
    md(r"""
## 4. The MLA latent cache

Multi-head latent attention (DeepSeek-V2/V3) caches, per layer and token, a latent
$c^{KV} = \mathrm{norm}(W^{DKV} x)$ of width `kv_lora_rank` and one RoPE key $k^R = \mathrm{RoPE}(W^{KR} x)$ of
width `qk_rope_head_dim` shared by all heads. At attention time the per-head keys and values are rebuilt:
$k^C = W^{UK} c^{KV}$, $v = W^{UV} c^{KV}$, and each head's key is $[k^C; k^R]$. Nothing else is cached — so

$$\text{bytes}(T) = L \times (\text{kv\_lora\_rank} + \text{qk\_rope\_head\_dim}) \times b \times T \qquad \text{(no factor 2)}.$$
"""),
    solution(SRC, ["LatentKV", "MLAttention"], grade_id="mla_impl"),
    *graded(checks.LESSON, "mla_cached_equals_uncached", "mla_cache_bytes"),
    md(r"""
## 5. The trained model, and the four structures side by side

A small character-level GPT trained on the course's own text ships with the lesson. It generates the same text
with the cache and without; the cache it fills holds exactly $2 \times L \times n_{kv} \times d_{head} \times 4$
bytes per token.
"""),
    code("""
from part0_foundations.l03_kv_cache.train import load_checkpoint

model, tok = load_checkpoint()
prompt = torch.tensor([tok.encode("The KV cache")])
with_cache, l1 = model.generate(prompt, 120, use_cache=True, return_logits=True)
without, l2 = model.generate(prompt, 120, use_cache=False, return_logits=True)
print(tok.decode(with_cache[0].tolist()))
print("same tokens:", torch.equal(with_cache, without), "| max logit difference:", (l1 - l2).abs().max().item())

cache = model.new_cache()
with torch.no_grad():
    model(with_cache, cache)
c = model.config
T = with_cache.shape[1]
print(f"T = {T}: measured {cache.nbytes():,} bytes, law {laws.kv_bytes(T, c.n_layer, c.n_kv_heads, c.head_dim, 4):,} bytes")
"""),
    code("""
# Every structure's small model, prefilled with 256 tokens in bf16: measured bytes against its law.
for name, cfg in STRUCTURES.items():
    m = GPT(cfg).to(torch.bfloat16).eval()
    cache = m.new_cache()
    with torch.no_grad():
        m(torch.randint(0, cfg.vocab_size, (1, 256)), cache)
    print(f"{name:15s} measured {cache.nbytes():>8,} B   law {law_bytes(cfg, 256, 2):>8,} B")
"""),
    md(r"""
Past the window, the sliding-window model grows only through its one full layer; the SSM hybrid's three state-space
layers hold the same few kilobytes at 256 tokens as at a million. Lesson 03's page scales these laws to real models
at 128K tokens.
"""),
]
