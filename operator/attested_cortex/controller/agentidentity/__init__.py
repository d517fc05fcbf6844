"""AgentIdentity: the key pair Secret (create-only, adopted, rotated on schedule) and the
identity's status. Called by the work queue (:mod:`attested_cortex.controller.registry`).
"""

from attested_cortex.controller.agentidentity.reconciling import KIND, reconcile

__all__ = ["KIND", "reconcile"]
