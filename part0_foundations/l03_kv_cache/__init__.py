"""Lesson 03: a KV-cached GPT and the cache-size laws. ``laws`` imports nothing heavy (no torch)."""
