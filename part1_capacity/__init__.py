"""Part 1 — capacity: model profiles × accelerators × memory tiers × workload → a plan, and the experiments
that check it on this machine. The cache-size laws come from ``part0_foundations.l03_kv_cache.laws``."""
