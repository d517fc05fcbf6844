"""The MemoryCortex spec, section by section, as ``config.yaml`` sections.

Each ``*_settings`` function is the whole translation of one spec section (``spec.server.auth``,
``spec.permissions`` with the PermissionRules in force, ``spec.trust``, ``spec.approval``,
``spec.transcripts``, ``spec.quotas`` with the AgentIdentities' overrides, ``spec.limits``,
``spec.embedding``, ``spec.encryption``, ``spec.database.timeouts``, ``spec.audit``,
``spec.spokeMemory``, ``spec.server.tls``) into the top-level keys
:class:`attested_cortex.server.settings.ServerSettings` reads, including the paths of the
files the server pod mounts for it (a Secret is only ever referenced by a mounted file path,
never copied here): a field's way to the server is one function, not a walk between modules.
:mod:`.configmaps` puts the sections together; :mod:`.deployments` mounts the files. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from attested_cortex.builders import certificates, federation, keyrings, names, rules
from attested_cortex.builders.inputs import Cortex, Identity, Rule
from attested_cortex.builders.quantities import quantity_bytes

Object = dict[str, Any]

#: Where the API tokens Secret is mounted (``spec.server.auth.mode: Tokens``).
TOKENS_DIR: Final = "/etc/cortex-tokens"
#: Where the approval HMAC secret is mounted (``spec.approval.enabled``).
APPROVAL_DIR: Final = "/var/run/cortex/approval"
MODES: Final = {"Advisory": "advisory", "Enforce": "enforce", "Off": "off"}
WRITE_DEFAULTS: Final = {"Allow": "allow", "Deny": "deny", "AskUser": "ask_user"}
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
    """``spec.embedding`` as ``embedder`` (the source) and ``embedding``; the key only as a
    file path."""
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
    return {"embedder": embedder(cortex), "embedding": section}


def spoke_memory_settings(cortex: Cortex) -> Object:
    """``spec.spokeMemory`` in the server's names; nothing when nothing is set (the rendered
    settings of a cortex without it stay as they were: no rollout on upgrade)."""
    spec = cortex.spec.spoke_memory.reflection
    if spec is None:
        return {}
    reflection: Object = {"endpoint": spec.url, "model": spec.model,
                          "timeout_ms": spec.timeout_ms, "max_tokens": spec.max_tokens}
    if spec.api_key_secret_ref is not None:
        reflection["api_key_file"] = f"{REFLECTION_DIR}/{EMBEDDING_KEY_FILE}"
    return {"spoke_memory": {"reflection": reflection}}


def limits_settings(cortex: Cortex) -> Object:
    """``spec.limits`` in the server's names."""
    spec = cortex.spec.limits
    return {"limits": {
        "max_body_bytes": spec.max_body_bytes, "max_content_chars": spec.max_content_chars,
        "max_metadata_bytes": spec.max_metadata_bytes, "recall_pool": spec.recall_pool,
        "body_read_timeout_s": spec.body_read_timeout_seconds,
        "max_answer_bytes": spec.max_answer_bytes, "max_import_bytes": spec.max_import_bytes,
        "max_staged_bytes_per_agent": spec.max_staged_bytes_per_agent}}


def approval_settings(cortex: Cortex) -> Object:
    """``spec.approval``, with the HMAC secret's mounted file when approvals are on."""
    spec = cortex.spec.approval
    section: Object = {"enabled": spec.enabled, "timeout_seconds": spec.timeout_seconds,
                       "max_held_per_agent": spec.max_held_per_agent,
                       "max_held_bytes_per_agent": spec.max_held_bytes_per_agent,
                       "retention_seconds": spec.retention_seconds}
    if spec.enabled:
        section["hmac_secret_file"] = f"{APPROVAL_DIR}/hmac"
    return {"approval": section}


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
    return {"quotas": {"enabled": spec.enabled, "requests_per_second": spec.requests_per_second,
                       "storage_per_agent_bytes": quantity_bytes(spec.storage_per_agent),
                       "per_agent": agent_quotas(identities)}}


def audit_signer(cortex: Cortex) -> str | None:
    """The agent id the operator-made audit key signs as; None when ``mode: Off``."""
    if cortex.spec.audit.signer.mode == "Off":
        return None
    return f"cortex:{cortex.meta.namespace}/{cortex.meta.name}"


def audit_signer_secret(cortex: Cortex) -> str | None:
    """The Secret holding the audit signer's key; None when ``mode: Off``."""
    return None if audit_signer(cortex) is None else names.audit_signer_secret_name(
        cortex.meta.name)


def audit_settings(cortex: Cortex) -> Object:
    """``spec.audit``: the signer's agent id, reads recorded, the witnesses; nothing when the
    signer is ``Off``."""
    signer = audit_signer(cortex)
    if signer is None:
        return {}
    spec = cortex.spec.audit
    audit: Object = {"record_reads": spec.record_reads}
    external = [{"name": w.name, "url": w.url} for w in spec.witnesses
                if w.url is not None]  # the operator-run ones pull (ADR 0102)
    if external:
        audit["witnesses"] = external
    return {"audit_signer": signer, "audit": audit}


def auth_settings(cortex: Cortex) -> Object:
    """``spec.server.auth``: the mode, and the tokens file where its Secret is mounted."""
    if cortex.spec.server.auth.mode == "Kubernetes":
        return {"auth": "kubernetes"}
    return {"auth": "tokens", "tokens_file": f"{TOKENS_DIR}/tokens"}


def permissions_settings(cortex: Cortex, in_force: Iterable[Rule]) -> Object:
    """``spec.permissions`` with the PermissionRules in force, in evaluation order."""
    spec = cortex.spec.permissions
    return {"permissions": {"mode": MODES[spec.mode],
                            "write_default": WRITE_DEFAULTS[spec.write_default],
                            "rules": [rules.compile_rule(r) for r in rules.ordered(in_force)]}}


def trust_settings(cortex: Cortex) -> Object:
    """``spec.trust``: the default tier and each tier's ceilings."""
    spec = cortex.spec.trust
    return {"trust": {"default_tier": spec.default_tier,
                      "ceilings": {tier: dict(sorted(marks.items()))
                                   for tier, marks in sorted(spec.ceilings.items())}}}


def transcripts_settings(cortex: Cortex) -> Object:
    """``spec.transcripts`` as the server's ``transcripts`` settings."""
    spec = cortex.spec.transcripts
    return {"transcripts": {
        "enabled": spec.enabled, "retention_days": spec.retention_days,
        "prune_after_days": spec.prune_after_days, "max_bytes": spec.max_bytes,
        "namespaces": [{"namespace": n.namespace, "retention_days": n.retention_days}
                       for n in spec.namespaces]}}


def encryption_settings(cortex: Cortex) -> Object:
    """``spec.encryption`` as the server's ``encryption`` settings: ``at_rest`` only when set
    (unset, the server takes the cortex's own default, kept in its database: ADR 0079);
    sealed namespaces only when some are listed (an existing cortex's configuration, and so
    its pods, stay as they were). The master key's mount is where the ring is read."""
    spec = cortex.spec.encryption
    section: Object = {} if spec.at_rest is None else {"at_rest": spec.at_rest}
    if spec.sealed_namespaces:
        section["sealed_namespaces"] = list(spec.sealed_namespaces)
    return {"encryption": section, "master_key": {"dir": MASTER_KEY_DIR}}


def tls_settings(cortex: Cortex) -> Object:
    """``spec.server.tls``: the mounted certificate's files; nothing without TLS."""
    tls = certificates.server_tls_settings(cortex)
    return {} if tls is None else {"tls": tls}


def federation_settings(cortex: Cortex) -> Object:
    """``spec.federation``: this cortex's peer identity and its peers; nothing without it."""
    federated = federation.federation_settings(cortex)
    return {} if federated is None else {"federation": federated}
