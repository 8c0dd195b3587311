"""E3 — what an mmap-opened vector index really costs, measured while a co-located process takes memory away.

- ``index``      writes a FAISS flat index file (the real on-disk layout, streamed so 5 GB never sit in RAM)
- ``searcher``   maps it and times random 4 KiB page reads (the access pattern of a search), counting faults
- ``hog``        a separate process that grows anonymous memory in steps, with a floor and a cap of its own
- ``knee``       finds where a latency series leaves its baseline (pure function)
- ``experiment`` runs the cycles, enforces the safety rules and cleans up on every exit path
- ``sitegen``    figures and tables for site/part1/e3_page_cache.md from the saved runs in results/part1/
"""
