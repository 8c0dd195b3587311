"""Shared course machinery, imported by both parts and importing neither: grading helpers for learner code
(``grading``), the notebook spec that generates solutions/ and exercises/ (``notebook_spec``), the memory probes of
this process and of the page cache (``memstat``), one run record for every experiment (``records``) and the host's
CPU facts (``host``)."""
