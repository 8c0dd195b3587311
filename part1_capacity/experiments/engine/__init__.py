"""Checking the calculator against a real engine (llama.cpp through llama-cpp-python) on this machine.

- ``gguf_model``: write llama-architecture GGUF files (random weights: memory and speed do not depend on them)
  and read a model's shape back from any GGUF's metadata.
- ``llama``: the engine itself — its log (the KV line), contexts, the quantize API, prefill/decode by hand.
- ``bench``: llama-bench when it is there, else the same method through the Python API.
- ``host``: this machine's memory bandwidth and matmul throughput, saved as an accelerator profile.
- ``e1`` (the KV slope), ``e2`` (the quantization ladder), ``sitegen`` (the page's tables and charts).
"""
