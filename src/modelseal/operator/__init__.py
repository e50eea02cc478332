"""A kopf operator for LLMKube's ``Model``: no Ready without an admitted attestation.

``settings`` parses LLMKube's flags, ``gate`` decides (pure), ``conditions``
turns a decision into status (pure), ``kube`` talks to the API, ``reconciler``
ties them together, and ``handlers`` wires them into kopf.
"""
