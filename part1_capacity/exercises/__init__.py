"""Part 1's exercises: each a reference solution, its checks and its notebook spec, like a Part 0 lesson.

- ``kv_from_config``: a model's KV bytes per token, read from its ``config.json`` (GQA/MHA/MQA and MLA);
- ``one_more_accelerator``: the context at which a deployment needs one more accelerator, by bisection over the
  calculator's own plans.
"""
