"""Policy: who may do what, decided by pure functions over plain values.

:mod:`.scopes` (an agent's capability scopes), :mod:`.patterns` (memory-namespace
patterns), :mod:`.rules` (permission rules and the leaf-to-root walk), :mod:`.decisions`
(the one Decision and how decisions merge), :mod:`.quotas` (per-agent request rate) and
:mod:`.signatures` (HMAC-signed approval decisions). Called by the service pipeline
(:mod:`attested_cortex.service.pipeline`) and the server's start-up; imports no I/O layer.
"""
