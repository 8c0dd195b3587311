"""Exercise: a model's KV-cache bytes per token, from its Hugging Face ``config.json``."""
