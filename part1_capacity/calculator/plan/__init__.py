"""The plan layer: a workload resolved once against a model (``resolve``), phase times (``speed``), the
deployment search and the one place a pass becomes time (``deploy``), and the plan itself (``plan``). It may import
``engines/`` and every layer below it."""
