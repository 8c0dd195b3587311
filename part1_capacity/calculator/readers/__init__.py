"""The readers: model files turned into profiles — a config.json folder, safetensors and GGUF headers
(exact bytes), a Hub id, and ``load_model``, which picks the way by its argument. They may import ``model/`` and
``base/``."""
