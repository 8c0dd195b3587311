"""Spec of the Part 1 exercise "KV bytes per token from config.json" (see course/grading/notebook_spec.py). Run
`make notebooks` after editing."""
from course.grading.notebook_spec import code, graded, md, solution
from part1_capacity.exercises.kv_from_config import checks

ASSIGNMENT = "p1_01_kv_from_config"
NOTEBOOK = "kv_from_config.ipynb"
AUTOGRADER = "tests/autograder/test_kv_from_config.py"
SRC = "part1_capacity/exercises/kv_from_config/reference.py"

CELLS = [
    md(r"""
# Part 1 · Exercise 1 — A model's KV cache per token, from its `config.json`

Every figure the calculator gives starts from a handful of numbers in a model's `config.json`: layers, K/V heads,
the width of a head — or, for MLA, the width of the latent. Lesson 03 derived the laws; here you read them off
real, published configuration files, the way `capacity plan --model path/to/config.json` does.

$$\text{bytes per token} = 2 \times L \times n_{kv} \times d_{head} \times b \qquad \text{(MHA, GQA, MQA)}$$

$$\text{bytes per token} = L \times (\text{kv\_lora\_rank} + \text{qk\_rope\_head\_dim}) \times b \qquad \text{(MLA)}$$

The catch is in the reading: the families name their fields differently, and a field a file leaves out has a
default. About 20 minutes.
"""),
    code("""
from part1_capacity.exercises.kv_from_config import checks
from part1_capacity.exercises.kv_from_config.checks import read_config

FIELDS = ("model_type", "num_hidden_layers", "n_layer", "num_attention_heads", "n_head", "num_key_value_heads",
          "hidden_size", "n_embd", "head_dim", "kv_lora_rank", "qk_rope_head_dim")
for name in ("gpt2", "qwen2.5-0.5b", "llama-3.1-70b", "mistral-nemo-12b", "deepseek-r1"):
    cfg = read_config(name)
    print(f"{name:18s}", {k: cfg[k] for k in FIELDS if k in cfg})
"""),
    md(r"""
## 1. Full attention: MHA, GQA, MQA

Each layer caches, for every token, a key and a value in each **K/V head** — `num_key_value_heads` of them (fewer
than the query heads in GQA, one in MQA; when the file has no such field, every query head has its own: MHA). A
head is `head_dim` wide; a file that does not say takes `hidden_size / num_attention_heads`. Older families use
their own names: GPT-2 has `n_layer`, `n_head` and `n_embd`.

Write `kv_bytes_per_token(config, bytes_per_element)`: the bytes one more token adds to one sequence's cache, every
layer attending to the whole context. `bytes_per_element` may be fractional (q8_0 stores 32 values in 34 bytes).
"""),
    solution(SRC, ["kv_bytes_per_token"], grade_id="kv_bytes_per_token_impl"),
    *graded(checks.LESSON, "full_attention"),
    md(r"""
## 2. MLA: a latent instead of keys and values

DeepSeek-V2 and V3 (and R1, Kimi K2) cache one compressed latent of width `kv_lora_rank` per layer and token, plus a
RoPE key of width `qk_rope_head_dim` shared by all heads; the keys and values of the heads are rebuilt from the
latent at attention time. There is no factor 2, and `num_key_value_heads` plays no part. A file with a
`kv_lora_rank` is an MLA model: make your function handle it.
"""),
    *graded(checks.LESSON, "mla"),
    md(r"""
## 3. What it means

The same per-token figure, times the context and the number of sequences, is the whole KV cache `capacity plan`
reports. Compare the structures at bf16:
"""),
    code("""
for name in ("gpt2", "qwen2.5-0.5b", "qwen3-8b", "llama-3.1-70b", "mistral-nemo-12b", "deepseek-r1"):
    per_token = kv_bytes_per_token(read_config(name), 2)
    print(f"{name:18s} {per_token / 1024:8.1f} KiB per token   {per_token * 131072 / 2**30:7.1f} GiB per 128K sequence")
"""),
    md(r"""
DeepSeek-R1 has 61 layers and 128 attention heads, yet caches less per token than Llama 3.1 70B with 80 layers and
8 K/V heads: that is what the latent buys. Try the same models in the calculator page (*Part 1 › Try the
calculator*) or with `capacity plan --model tests/data/configs/deepseek-r1/config.json --accelerator h200
--context 128K`.
"""),
]
