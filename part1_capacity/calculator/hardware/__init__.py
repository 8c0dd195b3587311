"""The hardware layer: accelerators (``accelerators.py``: memory, peak rates, the engines that run on
them, a measured host's kernel constants) and the memory tiers beyond one accelerator (``tiers.py``). It may import
``readers/``, ``model/`` and ``base/``."""
