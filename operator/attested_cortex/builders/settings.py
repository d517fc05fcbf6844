"""The MemoryCortex spec sections that tune the server, as ``config.yaml`` sections.

Each function turns one spec section (``spec.embedding``, ``spec.limits``, the approval
bounds, ``spec.database.timeouts``, ``spec.quotas`` with the AgentIdentities' overrides,
``spec.audit.signer``) into the keys :class:`attested_cortex.server.settings.ServerSettings`
reads, and names the files the server pod mounts for them (the embedding endpoint's key,
the audit signer's key). Secrets are only ever referenced by a mounted file path, never
copied here. Called by :mod:`.configmaps` (the rendered settings) and :mod:`.deployments`
(the mounts). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from attested_cortex.builders import keyrings, names
from attested_cortex.builders.inputs import Cortex, Identity
from attested_cortex.builders.quantities import quantity_bytes
from attested_cortex.crd.memorycortex import ApprovalSpec

Object = dict[str, Any]

#: Where the embedding endpoint's bearer token is mounted (one file).
EMBEDDING_DIR: Final = "/var/run/cortex/embedding"
EMBEDDING_KEY_FILE: Final = "api-key"
#: Where a model of the user's own is mounted (``spec.embedding.onnx``, docs/adr/0098).
EMBEDDING_MODEL_DIR: Final = "/var/run/cortex/embedding-model"
#: Where the reflection endpoint's bearer token is mounted (one file, ADR 0069).
REFLECTION_DIR: Final = "/var/run/cortex/reflection"
#: Where the audit signer's key Secret is mounted, under ``keys_dir``: ``_`` starts no
#: Kubernetes object name, so no AgentIdentity's own mount can land on it.
AUDIT_SIGNER_SUBDIR: Final = "_audit-signer"
#: Where the master key Secret is mounted (``current`` and ``v<N>`` files, ADR 0050).
MASTER_KEY_DIR: Final = "/var/run/cortex/master-key"
EMBEDDERS: Final = {"Default": "default", "Static": "static", "MiniLM": "minilm", "Onnx": "onnx",
                    "None": "none", "Client": "client"}


def embedder(cortex: Cortex) -> str:
    """The ``embedder`` setting: a mode name, or the endpoint's URL."""
    spec = cortex.spec.embedding
    return str(spec.url) if spec.mode == "Endpoint" else EMBEDDERS[spec.mode]


def embedding_settings(cortex: Cortex) -> Object:
    """``spec.embedding`` without the source (``embedder``); the key only as a file path."""
    spec = cortex.spec.embedding
    section: Object = {"timeout_ms": spec.timeout_ms}
    if spec.model is not None:
        section["model"] = spec.model
    if spec.dimension is not None:
        section["dimension"] = spec.dimension
    if spec.mode == "Endpoint" and spec.api_key_secret_ref is not None:
        section["api_key_file"] = f"{EMBEDDING_DIR}/{EMBEDDING_KEY_FILE}"
    onnx = spec.onnx
    if spec.mode == "Onnx" and onnx is not None:
        section["onnx"] = {
            "dir": f"{EMBEDDING_MODEL_DIR}/{onnx.path}".rstrip("/"),
            "model_file": onnx.model_file, "tokenizer_file": onnx.tokenizer_file,
            "model_sha256": onnx.model_sha256, "tokenizer_sha256": onnx.tokenizer_sha256,
            "pooling": onnx.pooling.lower(), "normalize": onnx.normalize,
            "max_tokens": onnx.max_tokens, "overlap": min(32, onnx.max_tokens // 4)}
    return section


def spoke_memory_settings(cortex: Cortex) -> Object | None:
    """``spec.spokeMemory`` in the server's names; None when nothing is set (the rendered
    settings of a cortex without it stay as they were: no rollout on upgrade)."""
    spec = cortex.spec.spoke_memory.reflection
    if spec is None:
        return None
    reflection: Object = {"endpoint": spec.url, "model": spec.model,
                          "timeout_ms": spec.timeout_ms, "max_tokens": spec.max_tokens}
    if spec.api_key_secret_ref is not None:
        reflection["api_key_file"] = f"{REFLECTION_DIR}/{EMBEDDING_KEY_FILE}"
    return {"reflection": reflection}


def limits_settings(cortex: Cortex) -> Object:
    """``spec.limits`` in the server's names."""
    spec = cortex.spec.limits
    return {"max_body_bytes": spec.max_body_bytes, "max_content_chars": spec.max_content_chars,
            "max_metadata_bytes": spec.max_metadata_bytes, "recall_pool": spec.recall_pool,
            "body_read_timeout_s": spec.body_read_timeout_seconds,
            "max_answer_bytes": spec.max_answer_bytes,
            "max_import_bytes": spec.max_import_bytes,
            "max_staged_bytes_per_agent": spec.max_staged_bytes_per_agent}


def approval_settings(spec: ApprovalSpec) -> Object:
    """``spec.approval`` (the HMAC file is added where the Secret is mounted)."""
    return {"enabled": spec.enabled, "timeout_seconds": spec.timeout_seconds,
            "max_held_per_agent": spec.max_held_per_agent,
            "max_held_bytes_per_agent": spec.max_held_bytes_per_agent,
            "retention_seconds": spec.retention_seconds}


def database_settings(cortex: Cortex) -> Object:
    """``spec.database.timeouts`` as the server's top-level timeout keys."""
    timeouts = cortex.spec.database.timeouts
    return {"db_lock_timeout_ms": timeouts.lock_ms,
            "db_statement_timeout_ms": timeouts.statement_ms,
            "db_write_timeout_ms": timeouts.write_ms}


def agent_quotas(identities: Iterable[Identity]) -> list[Object]:
    """Each AgentIdentity's ``spec.quotas`` as a per-agent override, by agent id."""
    overrides = []
    for identity in identities:
        quotas = identity.spec.quotas
        if quotas is None:
            continue
        entry: Object = {"agent_id": keyrings.agent_id(identity)}
        if quotas.requests_per_second is not None:
            entry["requests_per_second"] = quotas.requests_per_second
        if quotas.storage is not None:
            entry["storage_bytes"] = quantity_bytes(quotas.storage)
        overrides.append(entry)
    return sorted(overrides, key=lambda e: (e["agent_id"], sorted(e.items())))


def quotas_settings(cortex: Cortex, identities: Iterable[Identity]) -> Object:
    """``spec.quotas`` with the identities' overrides."""
    spec = cortex.spec.quotas
    return {"enabled": spec.enabled, "requests_per_second": spec.requests_per_second,
            "storage_per_agent_bytes": quantity_bytes(spec.storage_per_agent),
            "per_agent": agent_quotas(identities)}


def audit_signer(cortex: Cortex) -> str | None:
    """The agent id the operator-made audit key signs as; None when ``mode: Off``."""
    if cortex.spec.audit.signer.mode == "Off":
        return None
    return f"cortex:{cortex.meta.namespace}/{cortex.meta.name}"


def audit_signer_secret(cortex: Cortex) -> str | None:
    """The Secret holding the audit signer's key; None when ``mode: Off``."""
    return None if audit_signer(cortex) is None else names.audit_signer_secret_name(
        cortex.meta.name)
