"""MemoryCortex: database, schema, server and readiness, one module each.

:func:`reconcile` is the whole pass, a short list of steps; each step applies its objects
and returns the condition it owns, and the last one writes the status. Called by the work
queue (:mod:`attested_cortex.controller.registry`).
"""

from attested_cortex.controller.memorycortex.reconciling import KIND, cleanup_orphans, reconcile

__all__ = ["KIND", "cleanup_orphans", "reconcile"]
