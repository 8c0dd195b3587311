"""What ``transformers`` knows about a ``config.json``: its defaults and derived fields, and the exact parameter list.

The thin layer under ``configs.profile_from_fields``: that function is pure Python (any Python, the browser's
included) and takes a config plus a dict of defaults; here ``transformers`` supplies those defaults, the way an
engine loading the model sees them — the config class for the file's ``model_type`` (or, for a repository that
ships its own code, the class its ``architectures`` names) built from the file's fields, so omitted fields get the
class's defaults and derived fields (``layer_types`` from ``sliding_window_pattern``, ``no_rope_layers`` or
``full_attention_interval``; ``mlp_layer_types`` from ``first_k_dense_replace``) are derived by the class's own
code. ``attribute_map`` aliases (GPT-2's ``n_layer``) are written under both names.

``transformers`` is imported only when a function here is called; ``torch`` only by ``meta_parameters``.
Nothing is downloaded (``for_model`` and ``from_config`` build from the fields given; the Hub is ``hub.py``'s).
"""
from __future__ import annotations

from part1_capacity.calculator.base.errors import InputError


def _transformers():
    # nothing here downloads: AutoConfig.for_model and from_config build from the fields given
    import transformers

    transformers.logging.set_verbosity_error()            # a config's harmless notices are not our output
    return transformers


def known_model_type(config: dict) -> str | None:
    """The ``model_type`` whose config class reads this file: its own when ``transformers`` has it, else the one
    behind the first class ``architectures`` names (Kimi-K2 ships ``kimi_k2`` code for ``DeepseekV3ForCausalLM``)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_MAPPING_NAMES

    mt = config.get("model_type")
    if isinstance(mt, str) and mt in CONFIG_MAPPING_NAMES:
        return mt
    for arch in config.get("architectures") or []:
        for mapping in (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_MAPPING_NAMES):
            for t, cls in mapping.items():
                if cls == arch or (isinstance(cls, (list, tuple)) and arch in cls):
                    return t
    return None


def _as_dict(cfg) -> dict:
    d = cfg.to_dict()
    for canonical, alias in getattr(type(cfg), "attribute_map", {}).items():
        try:
            d.setdefault(canonical, getattr(cfg, canonical))
        except AttributeError:
            pass
    return d


def build(config: dict, where: str):
    """``transformers``' config object for the file (nothing downloaded); one-line ``InputError`` when it refuses."""
    tr = _transformers()
    mt = known_model_type(config)
    if mt is None:
        raise InputError(f"{where}: model_type {config.get('model_type')!r} is not one transformers "
                         f"{tr.__version__} knows (and no known class in 'architectures'): its layers cannot be read")
    if getattr(tr.CONFIG_MAPPING[mt], "is_encoder_decoder", False) is True or config.get("is_encoder_decoder"):
        raise InputError(f"{where}: an encoder-decoder's cross-attention caches the encoder output per sequence "
                         f"('is_encoder_decoder'): not modelled")
    fields = {k: v for k, v in config.items() if k not in ("model_type", "auto_map")}
    try:
        cfg = tr.AutoConfig.for_model(mt, **fields)
    except (Exception, RecursionError) as exc:   # transformers' own validation: one line, the first of its message
        msg = (str(exc).strip().splitlines() or [type(exc).__name__])
        raise InputError(f"{where}: transformers refuses this {mt} config: {' '.join(msg[:2])[:200]}") from None
    text = cfg.get_text_config()
    if text is not cfg and "tie_word_embeddings" not in config and hasattr(text, "tie_word_embeddings"):
        # whether the output head is the embedding is the language model's: a multimodal file that does not say so
        # at its top level follows its text config (Mistral3Config defaults to true above a MistralConfig's false,
        # which would tie away Mistral-Small-3.1's own 0.67B-parameter head; vLLM builds the head from the text
        # config, vllm/model_executor/models/llama.py `if config.tie_word_embeddings`)
        cfg.tie_word_embeddings = text.tie_word_embeddings
    return cfg


def defaults_for(config: dict, where: str = "config.json") -> dict:
    """The defaults ``configs.profile_from_fields`` takes: the whole config as ``transformers`` resolves it, with
    its text part (a multimodal checkpoint's language model) under ``text_config``."""
    cfg = build(config, where)
    out = _as_dict(cfg)
    text = cfg.get_text_config()
    if text is not cfg:
        out["text_config"] = _as_dict(text)
    return out


def class_defaults(model_type: str) -> dict:
    """The defaults of ``model_type``'s config class alone (no file): what a stored table for a Python without
    ``transformers`` (the browser) holds. Derived fields are those of the class's default size."""
    cfg = _transformers().AutoConfig.for_model(model_type)
    out = _undrived(cfg, _as_dict(cfg))
    text = cfg.get_text_config()
    if text is not cfg:
        out["text_config"] = _undrived(text, _as_dict(text))
    return out


# sizes a class derives from other sizes when left out (Llama's head_dim = hidden_size / heads): a default
# instance's value would be that of the default size, so the class's own default (None) is kept instead
_DERIVED = ("head_dim", "num_key_value_heads")


def _undrived(cfg, d: dict) -> dict:
    import dataclasses

    if dataclasses.is_dataclass(type(cfg)):
        defaults = {f.name: f.default for f in dataclasses.fields(type(cfg))}
        for k in _DERIVED:
            if k in defaults and defaults[k] is None:
                d[k] = None
    return d


def meta_parameters(config: dict, where: str = "config.json") -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every parameter of the whole model (vision tower too), built by ``transformers`` on
    PyTorch's meta device: shapes only, no memory, no weights."""
    tr = _transformers()
    import torch

    cfg = build(config, where)
    # a multimodal checkpoint as a server loads it (towers included), else the causal LM
    classes = (["AutoModelForImageTextToText"] if cfg.get_text_config() is not cfg else []) + [
        "AutoModelForCausalLM", "AutoModelForImageTextToText"]
    model, first = None, None
    for name in classes:
        try:
            with torch.device("meta"):
                model = getattr(tr, name).from_config(cfg)
            break
        except (Exception, RecursionError) as exc:
            first = first or exc
            if _fill_head_dim(cfg.get_text_config()):
                try:                                  # the class's own fallback, which it never reaches
                    with torch.device("meta"):
                        model = getattr(tr, name).from_config(cfg)
                    break
                except (Exception, RecursionError):
                    pass
    if model is None and cfg.get_text_config() is not cfg:
        # a tower that needs a library not installed (Gemma 3n's vision tower needs timm): the language model alone
        try:
            with torch.device("meta"):
                model = tr.AutoModelForCausalLM.from_config(cfg.get_text_config())
        except (Exception, RecursionError):
            model = None
    if model is None:
        msg = (str(first).strip().splitlines() or [type(first).__name__])[0][:200]
        raise InputError(f"{where}: transformers cannot build this model: {msg}") from None
    return [(n, tuple(p.shape)) for n, p in model.named_parameters()]


def _fill_head_dim(cfg) -> bool:
    """Give ``head_dim`` its derived value when a class leaves it None and its model cannot be built so.

    ``HunYuanMoEV1Config`` (transformers 5.24) declares ``head_dim: int | None = None`` and derives nothing when a
    file leaves it out (Tencent's Hunyuan-A13B file states ``attention_head_dim`` instead); its attention reads
    ``getattr(config, "head_dim", hidden_size // num_attention_heads)`` — the attribute exists, so the fallback never
    applies and ``None ** -0.5`` fails. The value the class meant (and its rotary code computes, and vLLM uses) is
    ``hidden_size // num_attention_heads``. True when it was filled in."""
    heads, hidden = getattr(cfg, "num_attention_heads", None), getattr(cfg, "hidden_size", None)
    if getattr(cfg, "head_dim", 0) is not None or not isinstance(heads, int) or not isinstance(hidden, int) \
            or heads <= 0:
        return False
    cfg.head_dim = hidden // heads
    return True


def version() -> str:
    return _transformers().__version__


def architectures_of(model_type: str) -> list[str]:
    """The causal-LM class names ``transformers`` maps to ``model_type`` (what a config's ``architectures`` names)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    cls = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)
    return [] if cls is None else ([cls] if isinstance(cls, str) else list(cls))


def decoder_types() -> list[str]:
    """Every model_type with a causal-LM or image-text-to-text class (what a server generates text with)."""
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)

    return sorted(set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) | set(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES))


def known_architectures() -> list[str]:
    """Every class name ``known_model_type`` resolves through ``architectures`` (causal-LM and base-model classes)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_MAPPING_NAMES

    names = set()
    for mapping in (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_MAPPING_NAMES):
        for cls in mapping.values():
            names.update([cls] if isinstance(cls, str) else cls)
    return sorted(names)


def known_types() -> list[str]:
    """Every model_type ``transformers`` has a config class for."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return sorted(CONFIG_MAPPING_NAMES)
