"""The sizing layer: how a model splits across tensor-parallel ranks (``sharding``), the roofline (FLOPs,
bytes, ridge point, step time) and a retrieval index's memory — the only layer that calls the lesson-03 cache laws.
It may import ``hardware/``, ``readers/``, ``model/`` and ``base/``."""
