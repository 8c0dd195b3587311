"""Lesson 02: the full encoder–decoder Transformer, trained to translate human-written dates into ISO.

Modules: ``data`` (the date data set), ``model`` (the Transformer, greedy decoding, checkpoints), ``train``,
``evaluate``, ``translate`` (function and CLI). Nothing is imported here, so that ``train`` can configure OpenMP
before torch loads.
"""
