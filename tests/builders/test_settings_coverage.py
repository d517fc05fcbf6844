"""Every server setting is reachable from Git, or deliberately is not.

Walks :class:`ServerSettings` (nested sections included) and fails for a setting that has
neither a custom-resource path in :data:`FROM_RESOURCES` nor a reason in
:data:`SERVER_ONLY` (ADR 0036 explains the list). A new server setting therefore fails here
until someone decides where a GitOps user sets it. Each path named is checked against the
rendered CRD, so the table cannot point at a field that does not exist.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from attested_cortex.crd import KINDS, build_crd
from attested_cortex.server.settings import ServerSettings

#: Setting (dotted, as in config.yaml) -> "<Kind> <field path>" it is rendered from.
FROM_RESOURCES: dict[str, str] = {
    "database_url": "MemoryCortex spec.database",
    "auth": "MemoryCortex spec.server.auth.mode",
    "tokens_file": "MemoryCortex spec.server.auth.tokensSecretRef",
    "graph_backend": "MemoryCortex spec.graph.backend",
    "hooks_file": "HookChain spec.hooks",
    "keys_dir": "AgentIdentity spec.keyCustody",
    "audit_signer": "MemoryCortex spec.audit.signer.mode",
    "audit.record_reads": "MemoryCortex spec.audit.recordReads",
    "audit.witnesses": "MemoryCortex spec.audit.witnesses",
    "permissions.mode": "MemoryCortex spec.permissions.mode",
    "permissions.rules": "PermissionRule spec.decision",
    "permissions.write_default": "MemoryCortex spec.permissions.writeDefault",
    "agents": "AgentIdentity spec.serviceAccountRef",
    "approval.enabled": "MemoryCortex spec.approval.enabled",
    "approval.timeout_seconds": "MemoryCortex spec.approval.timeoutSeconds",
    "approval.hmac_secret_file": "MemoryCortex spec.approval.hmacSecretRef",
    "approval.max_held_per_agent": "MemoryCortex spec.approval.maxHeldPerAgent",
    "approval.max_held_bytes_per_agent": "MemoryCortex spec.approval.maxHeldBytesPerAgent",
    "approval.retention_seconds": "MemoryCortex spec.approval.retentionSeconds",
    "transcripts.enabled": "MemoryCortex spec.transcripts.enabled",
    "transcripts.retention_days": "MemoryCortex spec.transcripts.retentionDays",
    "transcripts.namespaces": "MemoryCortex spec.transcripts.namespaces",
    "transcripts.prune_after_days": "MemoryCortex spec.transcripts.pruneAfterDays",
    "transcripts.max_bytes": "MemoryCortex spec.transcripts.maxBytes",
    "quotas.requests_per_second": "MemoryCortex spec.quotas.requestsPerSecond",
    "quotas.storage_per_agent_bytes": "MemoryCortex spec.quotas.storagePerAgent",
    "quotas.enabled": "MemoryCortex spec.quotas.enabled",
    "quotas.per_agent": "AgentIdentity spec.quotas",
    "trust.default_tier": "MemoryCortex spec.trust.defaultTier",
    "trust.ceilings": "MemoryCortex spec.trust.ceilings",
    "encryption.at_rest": "MemoryCortex spec.encryption.atRest",
    "encryption.sealed_namespaces": "MemoryCortex spec.encryption.sealedNamespaces",
    "limits.max_body_bytes": "MemoryCortex spec.limits.maxBodyBytes",
    "limits.max_content_chars": "MemoryCortex spec.limits.maxContentChars",
    "limits.max_metadata_bytes": "MemoryCortex spec.limits.maxMetadataBytes",
    "limits.recall_pool": "MemoryCortex spec.limits.recallPool",
    "limits.body_read_timeout_s": "MemoryCortex spec.limits.bodyReadTimeoutSeconds",
    "limits.max_answer_bytes": "MemoryCortex spec.limits.maxAnswerBytes",
    "limits.max_import_bytes": "MemoryCortex spec.limits.maxImportBytes",
    "limits.max_staged_bytes_per_agent": "MemoryCortex spec.limits.maxStagedBytesPerAgent",
    "embedder": "MemoryCortex spec.embedding.mode",
    "embedding.model": "MemoryCortex spec.embedding.model",
    "embedding.dimension": "MemoryCortex spec.embedding.dimension",
    "embedding.api_key_file": "MemoryCortex spec.embedding.apiKeySecretRef",
    "embedding.timeout_ms": "MemoryCortex spec.embedding.timeoutMs",
    "embedding.onnx": "MemoryCortex spec.embedding.onnx",
    "spoke_memory.reflection": "MemoryCortex spec.spokeMemory.reflection",
    "log_level": "MemoryCortex spec.server.logLevel",
    "tls": "MemoryCortex spec.server.tls",
    "db_lock_timeout_ms": "MemoryCortex spec.database.timeouts.lockMs",
    "db_statement_timeout_ms": "MemoryCortex spec.database.timeouts.statementMs",
    "db_write_timeout_ms": "MemoryCortex spec.database.timeouts.writeMs",
    "federation": "MemoryCortex spec.federation",
    "subscriptions.declared": "CortexSubscription spec.url",
}

#: Setting -> why no custom resource sets it (ADR 0036).
_DELIVERY = ("delivery tuning with the defaults of ADR 0107 (seed 000 K6's"
             " schedule); a cortex-wide field for it is not asked for yet")
SERVER_ONLY: dict[str, str] = {
    "subscriptions.enabled": _DELIVERY,
    "subscriptions.retry_schedule_seconds": _DELIVERY,
    "subscriptions.retry_factor": _DELIVERY,
    "subscriptions.retry_cap_seconds": _DELIVERY,
    "subscriptions.max_attempts": _DELIVERY,
    "subscriptions.connect_timeout_ms": _DELIVERY,
    "subscriptions.total_timeout_ms": _DELIVERY,
    "subscriptions.max_response_bytes": _DELIVERY,
    "subscriptions.batch": _DELIVERY,
    "subscriptions.retention_seconds": _DELIVERY,
    "subscriptions.allow_private_targets": "each CortexSubscription allows itself "
                                           "(spec.allowPrivateTargets); the cortex-wide switch is "
                                           "for cortexctl serve",
    "subscriptions.refused_cidrs": "the cluster's own ranges are refused by the SSRF guard's "
                                   "defaults; extra ranges are for cortexctl serve",
    "subscriptions.delivery": "where the server delivers from (ADR 0142), not a policy: "
                              "the child process unless debugging",
    "subscriptions.delivery_nice": "a CPU priority of the delivery process (ADR 0142), "
                                   "tuning measured by the benchmark",
    "audit.checkpoints.every_events": "a checkpoint cadence (ADR 0099), not a policy",
    "audit.checkpoints.every_seconds": "a checkpoint cadence (ADR 0099), not a policy",
    "audit.checkpoints.origin": "the default names the audit signer, which the operator "
                                "names after the cortex (cortex:<namespace>/<name>)",
    "listen": "the operator owns the pod's port; users choose spec.server.service.port",
    "kubeconfig": "in a pod the server reviews tokens with its own service account",
    "token_audiences": "a custom audience needs a projected token in every agent pod, which "
                       "the operator does not make; the API server's default audience is used",
    "approval.sweep_interval_seconds": "an internal cadence (how late past its timeout an "
                                       "action expires), not a policy",
    "transcripts.sweep_interval_seconds": "an internal cadence; retention is in days",
    "embedding.backfill_batch": "throughput tuning measured by the benchmarks (ADR 0014)",
    "embedding.backfill_pause_ms": "throughput tuning measured by the benchmarks (ADR 0014)",
    "embedding.min_similarity": "depends on the model's score scale; no cutoff until a "
                                "quality set per model says otherwise",
    "embedding.vector_pool": "chosen by the recall quality set (ADR 0014)",
    "embedding.write_queue": "memory bound of the write-behind embedder, sized with the "
                             "container's memory by the operator's defaults",
    "master_key": "the operator always mounts its own <cortex>-master-key Secret (ADR 0050); "
                  "a file or a passphrase is for a server outside Kubernetes",
    "encryption.reseal_batch": "throughput tuning of the re-sealing worker (ADR 0056), "
                                "not a policy",
    "encryption.reseal_pause_ms": "an internal cadence of the re-sealing worker (ADR 0056)",
    "spoke_memory.export_pending_records": "a latency bound of the export op (when it leaves "
                                           "the request for the pending worker), not a "
                                           "policy (ADR 0069)",
    "spoke_memory.pending_poll_ms": "an internal cadence of the pending-receipt worker "
                                    "(ADR 0069)",
    "pool_max_size": "replicas x pool must stay under the database's max_connections, "
                     "which the operator sizes for its default",
    "db_reconnect_wait_ms": "the wait for a failover's new primary (ADR 0126), kept under "
                            "spec.database.timeouts.writeMs's default; not a policy",
}


def settings_paths(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    """Every leaf setting; nested sections are walked, lists of entries are one setting."""
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from settings_paths(annotation, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}"


def crd_has(kind_name: str, path: str) -> bool:
    kind = next(k for k in KINDS if k.kind == kind_name)
    node: dict[str, Any] = build_crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for part in path.split("."):
        node = node.get("properties", {}).get(part)
        if node is None:
            return False
    return bool(node.get("description"))


def test_every_setting_has_a_crd_path_or_a_reason() -> None:
    unplaced = [p for p in settings_paths(ServerSettings)
                if p not in FROM_RESOURCES and p not in SERVER_ONLY]
    assert unplaced == [], "add a CRD field (and a builder test) or a reason in SERVER_ONLY"


def test_the_table_names_only_real_settings() -> None:
    real = set(settings_paths(ServerSettings))
    assert set(FROM_RESOURCES) - real == set()
    assert set(SERVER_ONLY) - real == set()
    assert not set(FROM_RESOURCES) & set(SERVER_ONLY)


def test_every_crd_path_exists_and_is_described() -> None:
    missing = [f"{setting}: {target}" for setting, target in FROM_RESOURCES.items()
               if not crd_has(*target.split(" ", 1))]
    assert missing == []
