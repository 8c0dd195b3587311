"""Customer archetypes and the evidence ledger.

Five buying organisations, described by their *structure* (who signs off, what they are measured on, what they
cannot give up, how decisions are made), each with a typical workload expressed as calculator inputs
(``data/archetypes.toml``), and a ledger of every quantitative statement made about them (``data/claims.toml``).

A claim whose source could not be checked is quarantined: it is loaded (so editors can see it with
``capacity claims --unverified``) but kept apart from the verified claims and never reaches any other output.
An archetype with no verified claim is marked as having no quantitative evidence and shows no numbers at all.
"""
