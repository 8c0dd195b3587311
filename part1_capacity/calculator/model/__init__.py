"""The model layer: what a model is to the calculator — its profile (the cache laws come from lesson 03), its
weights' bytes, the fields of a Hugging Face config.json and the parameter count they imply. It may import
``base/``."""
