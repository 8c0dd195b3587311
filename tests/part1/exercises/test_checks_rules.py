"""Every rule of Part 1's exercise checks, with the learner's message it gives, word for word.

tests/part1/exercises/test_exercises.py shows each check rejecting plausible mistakes; here each message is pinned whole (the
label of the file or deployment, the numbers, the hint), worked by hand from the published config.json files
(tests/data/configs/), and each choice a check makes about its inputs is held by the implementation it is there to
catch: a function that raises at one call gets ``"<label> raised <error>"`` (course.grading.contract.call's format); the
tolerance both accepts a float rounding and refuses 5 × itself; the search budget allows exactly ⌈log2 M⌉ + 2 calls.
Plain functions without arguments, so that ``tools/mutation.py --verify`` can run them."""
import pytest

from course.grading.contract import CheckFailed
from part1_capacity.exercises.kv_from_config import checks as kv
from part1_capacity.exercises.kv_from_config.reference import kv_bytes_per_token
from part1_capacity.exercises.one_more_accelerator import checks as acc
from part1_capacity.exercises.one_more_accelerator.reference import added_by_kv, first_context_adding_an_accelerator
from tests.support.rules import message


# --- KV bytes per token from config.json ---------------------------------------------------------------------------
def _scaled(factor):
    return lambda cfg, b: kv_bytes_per_token(cfg, b) * factor


def _mla_only(wrong):
    """Right on full attention, ``wrong`` on MLA files."""
    return lambda cfg, b: wrong(cfg, b) if cfg.get("kv_lora_rank") else kv_bytes_per_token(cfg, b)


def _full_only(wrong):
    return lambda cfg, b: kv_bytes_per_token(cfg, b) if cfg.get("kv_lora_rank") else wrong(cfg, b)


def test_hints_word_for_word():
    # GPT-2: 12 layers, 12 heads of 768 / 12 = 64, no K/V field (MHA): 2 × 12 × 12 × 64 × 2 = 36,864 bytes at bf16
    assert message(kv.check_full_attention, _scaled(0.5)) == (
        "gpt2 config.json at 2 bytes per element: you give 18,432.00 bytes per token, the law gives 36,864.00"
        " — half the answer: a token stores a key AND a value in each K/V head")

    def query_heads(cfg, b):
        return kv_bytes_per_token({k: v for k, v in cfg.items() if k != "num_key_value_heads"}, b)
    # Qwen2.5-0.5B: 24 layers, 2 K/V heads of 896 / 14 = 64: 2 × 24 × 2 × 64 × 2 = 12,288; its 14 query heads: 86,016
    assert message(kv.check_full_attention, query_heads) == (
        "qwen2.5-0.5b config.json at 2 bytes per element: you give 86,016.00 bytes per token, the law gives 12,288.00"
        " — this counts every query head; only the K/V heads (num_key_value_heads) are cached")

    def head_dim_from_hidden(cfg, b):
        return kv_bytes_per_token({k: v for k, v in cfg.items() if k != "head_dim"}, b)
    # Mistral NeMo: 40 layers, 8 K/V heads, head_dim 128 in the file (5120 / 32 = 160): 163,840 against 204,800
    assert message(kv.check_full_attention, head_dim_from_hidden) == (
        "mistral-nemo-12b config.json at 2 bytes per element: you give 204,800.00 bytes per token, the law gives "
        "163,840.00 — this file sets head_dim itself; it is not hidden_size / num_attention_heads here")

    # q8_0's 34/32 bytes per element rounded to 1: 18,432 against 36,864 × 34 / 64 = 19,584; no hint fits
    assert message(kv.check_full_attention, lambda cfg, b: kv_bytes_per_token(cfg, int(b))) == (
        "gpt2 config.json at 1.0625 bytes per element: you give 18,432.00 bytes per token, the law gives 19,584.00")

    # DeepSeek-R1: 61 layers × (512 + 64) × 2 = 70,272 bytes; twice that with a key and a value
    assert message(kv.check_mla, _mla_only(_scaled(2))) == (
        "deepseek-r1 config.json at 2 bytes per element: you give 140,544.00 bytes per token, the law gives 70,272.00"
        " — twice the answer: MLA caches one latent per token, not a key and a value")

    # read as full attention: 128 K/V heads of 7168 / 128 = 56: 2 × 61 × 128 × 56 × 2 = 1,748,992; no hint fits
    # (it is not twice the law, though the file has a kv_lora_rank)
    def as_gqa(cfg, b):
        return kv_bytes_per_token({k: v for k, v in cfg.items() if k != "kv_lora_rank"}, b)
    assert message(kv.check_mla, as_gqa) == (
        "deepseek-r1 config.json at 2 bytes per element: you give 1,748,992.00 bytes per token, the law gives "
        "70,272.00")


def test_kv_non_number_named():
    assert message(kv.check_full_attention, lambda cfg, b: f"{kv_bytes_per_token(cfg, b)} bytes") == (
        "gpt2 config.json: kv_bytes_per_token must return a number of bytes, got str")
    assert message(kv.check_full_attention, lambda cfg, b: True) == (
        "gpt2 config.json: kv_bytes_per_token must return a number of bytes, got bool")


def test_kv_call_labels():
    def boom(cfg, b):
        raise RuntimeError("boom")
    assert message(kv.check_full_attention, boom) == "kv_bytes_per_token(<gpt2 config.json>, 2) raised RuntimeError: boom"
    assert message(kv.check_mla, boom) == "kv_bytes_per_token(<deepseek-r1 config.json>, 2) raised RuntimeError: boom"


def test_kv_variants_named():
    # a Llama-style file is assumed to name its K/V heads: the MHA variant leaves the field out
    def needs_kv_field(cfg, b):
        if "num_attention_heads" in cfg and not cfg.get("kv_lora_rank"):
            cfg["num_key_value_heads"]
        return kv_bytes_per_token(cfg, b)
    assert message(kv.check_full_attention, needs_kv_field) == (
        "kv_bytes_per_token(<llama-3.1-70b without num_key_value_heads or head_dim (so MHA, head_dim = hidden / heads),"
        " 10 layers>, 2) raised KeyError: 'num_key_value_heads'")

    def no_mqa(cfg, b):
        if cfg.get("num_key_value_heads") == 1:
            raise ValueError("one K/V head")
        return kv_bytes_per_token(cfg, b)
    assert message(kv.check_full_attention, no_mqa) == (
        "kv_bytes_per_token(<llama-3.1-70b made MQA (1 K/V head) with head_dim 256>, 2) raised ValueError: "
        "one K/V head")

    # R1's RoPE key width (64) written in instead of read: 27 × (256 + 64) × 2 = 17,280 against 27 × (256 + 32) × 2
    def rope_64(cfg, b):
        return cfg["num_hidden_layers"] * (cfg["kv_lora_rank"] + 64) * b
    assert message(kv.check_mla, _mla_only(rope_64)) == (
        "deepseek-r1 with 27 layers, kv_lora_rank 256, qk_rope_head_dim 32 at 2 bytes per element: you give "
        "17,280.00 bytes per token, the law gives 15,552.00")


def test_each_kv_check_grades_its_own_structure():
    wrong = _scaled(2)
    kv.check_full_attention(_mla_only(wrong))     # an MLA mistake costs the MLA check's points only
    kv.check_mla(_full_only(wrong))               # and a full-attention mistake the full-attention check's


def test_kv_mla_variant_is_a_whole_file():
    # the smaller DeepSeek-R1 keeps every field of the published file: a function that reads the heads before it
    # tells MLA apart is right
    def heads_first(cfg, b):
        cfg["n_head"] if "n_head" in cfg else cfg["num_attention_heads"]
        return kv_bytes_per_token(cfg, b)
    kv.check_mla(heads_first)
    kv.check_full_attention(heads_first)


def test_kv_each_call_gets_the_file_as_published():
    # a function that consumes what it reads, nested fields too (Llama 3.1's rope_scaling factor), is graded on each
    # call alone: every call gets its own deep copy of the file
    def consumes(cfg, b):
        scaling = cfg.get("rope_scaling")
        if isinstance(scaling, dict) and scaling.get("rope_type") == "llama3":
            scaling.pop("factor")                     # KeyError if an earlier call's pop were seen
        return kv_bytes_per_token(cfg, b)
    kv.check_full_attention(consumes)


def test_kv_tolerance():
    kv.check_full_attention(_scaled(1 + 1e-12))   # a float rounding away from the law passes
    kv.check_mla(_scaled(1 - 1e-12))
    # 5e-9 off: 5 × the 1e-9 allowed
    assert message(kv.check_full_attention, _scaled(1 + 5e-9)).startswith(
        "gpt2 config.json at 2 bytes per element: you give 36,864.00 bytes per token, the law gives 36,864.00")


# --- the context that adds an accelerator --------------------------------------------------------------------------
def _plus(n):
    """The reference answer moved by ``n`` tokens."""
    def f(added, m):
        t = first_context_adding_an_accelerator(added, m)
        return None if t is None else t + n
    return f


def test_search_messages_word_for_word():
    # one too low: at max_context 1 the threshold is 1, added(0) = 0 below it; 0 is returned
    assert message(acc.check_bisection, _plus(-1)) == (
        "max_context 1: the first context with an accelerator added is 1 tokens (added(0) = 0, added(1) = 1); you "
        "return 0")
    assert message(acc.check_none_when_never, lambda added, m: m) == (
        "max_context 1: the cache adds no accelerator even at max_context, so the answer is None; you return 1")

    def made_up_only(added, m):        # right on the made-up deployments, max_context on the real one
        return first_context_adding_an_accelerator(added, m) if isinstance(added, acc.Counted) else m
    assert message(acc.check_none_when_never, made_up_only) == (
        "qwen2.5-0.5b on h200, batch 1: its cache never adds an accelerator; you return 32768")
    # None for everything: right wherever nothing is added, and not the search (131,072 // 3 = 43,690 by hand)
    assert message(acc.check_none_when_never, lambda added, m: None) == (
        "max_context 131,072: the first context with an accelerator added is 43,690 tokens, so the answer is not None "
        "there; you return None")


def test_search_reads_the_real_deployment_too():
    # reading the made-up deployment's threshold instead of asking added() passes the made-up ones only
    def peeks(added, m):
        t = added.threshold
        return t if t <= m else None
    acc.check_bisection(peeks)
    with pytest.raises(CheckFailed, match=r"^first_context_adding_an_accelerator\(<qwen2.5-0.5b on h200>, \.\.\.\) "
                                          r"raised AttributeError"):
        acc.check_none_when_never(peeks)


def test_search_call_labels():
    def boom(added, m):
        raise RuntimeError("boom")
    assert message(acc.check_bisection, boom) == "first_context_adding_an_accelerator(added, 1) raised RuntimeError: boom"
    assert message(acc.check_none_when_never, boom) == (
        "first_context_adding_an_accelerator(added, 1) raised RuntimeError: boom")
    assert message(acc.check_real_deployments, boom) == (
        "first_context_adding_an_accelerator(<llama-3.1-70b on h100, batch 8, KV bf16>, 131,072) raised RuntimeError: "
        "boom")

    def real_only(added, m):
        if isinstance(added, acc.Counted):
            return first_context_adding_an_accelerator(added, m)
        raise RuntimeError("boom")
    assert message(acc.check_none_when_never, real_only) == (
        "first_context_adding_an_accelerator(<qwen2.5-0.5b on h200>, ...) raised RuntimeError: boom")


def test_real_deployment_messages():
    llama = added_by_kv("llama-3.1-70b", "h100", 8, "bf16")
    t = first_context_adding_an_accelerator(llama, 131072)
    # one past the first: the one before it already adds an accelerator
    assert message(acc.check_real_deployments, _plus(1)) == (
        f"llama-3.1-70b on h100, batch 8, KV bf16: at {t:,} tokens the cache already adds {llama(t)}: {t + 1:,} is "
        f"not the first")
    # 1 token is a context in range; the cache of 8 one-token sequences adds nothing
    assert message(acc.check_real_deployments, lambda added, m: 1) == (
        "llama-3.1-70b on h100, batch 8, KV bf16: at 1 tokens the cache adds no accelerator yet")
    assert message(acc.check_real_deployments, lambda added, m: 0) == (
        "llama-3.1-70b on h100, batch 8, KV bf16: expected a context in 1 … 131,072 tokens, got 0")


def test_real_deployments_are_the_ones_named():
    # the added() each deployment is graded with is the calculator's plan of the deployment its label names (the
    # 8B on L4 with an fp8 cache: a bf16 cache starts adding an accelerator at half the context)
    seen = []

    def spy(added, m):
        seen.append(added)
        return first_context_adding_an_accelerator(added, m)
    acc.check_real_deployments(spy)
    assert len(seen) == len(acc.DEPLOYMENTS)
    for added, (model, a, batch, kv_dtype) in zip(seen, acc.DEPLOYMENTS):
        named = added_by_kv(model, a, batch, kv_dtype)
        for t in (4096, first_context_adding_an_accelerator(named, 131072) - 1, 65536):
            assert added(t) == named(t), (model, t)


def test_search_budget_is_exactly_allowed():
    # ⌈log2 M⌉ + 2 calls are allowed, not one fewer: the reference with one confirming call more uses all of them at
    # a power of two (M = 4096: the first question, 12 halvings, the confirmation)
    def confirms(added, m):
        t = first_context_adding_an_accelerator(added, m)
        if t is not None:
            added(t)
        return t
    acc.check_bisection(confirms)
    c = acc.Counted(5, 4096)
    for _ in range(14):
        c(4096)
    with pytest.raises(CheckFailed, match="more than 14 calls of added"):
        c(4096)


def test_search_edges():
    # the smallest context: a search assuming context 1 adds nothing never returns 1
    def from_two(added, m):
        if added(m) == 0:
            return None
        lo, hi = 1, m
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if added(mid) == 0 else (lo, mid)
        return hi
    assert message(acc.check_bisection, from_two).startswith(
        "max_context 4,096: the first context with an accelerator added is 1 tokens")

    # max_context itself: a search over 1 … max_context − 1 that reads "only at max_context" as never
    def open_top(added, m):
        t = first_context_adding_an_accelerator(added, m)
        return t if t is not None and t < m else None
    assert message(acc.check_bisection, open_top) == (
        "max_context 1: the first context with an accelerator added is 1 tokens (added(0) = 0, added(1) = 1); you "
        "return None")

    # max_context 1: a search that asks about the middle, max_context // 2, first asks about context 0
    def middle_first(added, m):
        mid = m // 2
        if added(mid) != 0:
            lo, hi = 0, mid
        elif added(m) != 0:
            lo, hi = mid, m
        else:
            return None
        while hi - lo > 1:
            x = (lo + hi) // 2
            lo, hi = (x, hi) if added(x) == 0 else (lo, x)
        return hi
    expected = "added() was asked about context 0: contexts are whole tokens from 1 to max_context (1)"
    assert message(acc.check_bisection, middle_first) == expected
    assert message(acc.check_none_when_never, middle_first) == expected


def test_search_message_states_what_added_answered():
    # the message's "added(T − 1) = 0, added(T) = 1" is what the made-up deployment answers at those contexts (a
    # search that misses from 777 tokens on: the first miss is at max_context 4,096, threshold 777)
    answered = []

    def asks_then_misses(added, m):
        t = first_context_adding_an_accelerator(added, m)
        if t is None or t < 777:
            return t
        answered.append((t, added(t)))             # one question more: still within the budget
        return t + 1 if t < m else t - 1
    msg = message(acc.check_bisection, asks_then_misses)
    t, at = answered[-1]
    assert t == 777 and at == 1
    assert f"(added({t - 1:,}) = 0, added({t:,}) = 1)" in msg
