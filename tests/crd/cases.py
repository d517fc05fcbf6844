"""Custom resources to submit to the API server, each with the verdict admission must give.

Used by ``test_admission.py``. ``error=None`` means the object must be accepted; otherwise
``error`` is a fragment of the message the API server must answer with: the CEL message or
OpenAPI check meant to catch exactly that mistake.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

API_VERSION = "cortex.attested.dev/v1alpha1"
Manifest = dict[str, Any]


@dataclass(frozen=True)
class Case:
    """One object and the expected verdict."""

    id: str
    manifest: Manifest
    error: str | None = None


def obj(kind: str, name: str, spec: dict[str, Any]) -> Manifest:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


def cortex(name: str, **spec: Any) -> Manifest:
    return obj("MemoryCortex", name, {"database": {"managed": {}}, **spec})


def chain(name: str, *hooks: dict[str, Any]) -> Manifest:
    return obj("HookChain", name, {"cortexRef": {"name": "main"}, "hooks": list(hooks)})


def hook(name: str = "h", *, events: list[str] | None = None, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": name, "events": events or ["pre_store"], "command": ["/bin/h"]}
    return {**base, **fields}


def rule(name: str, namespace: str, **spec: Any) -> Manifest:
    base = {
        "cortexRef": {"name": "main"},
        "namespace": namespace,
        "agents": ["*"],
        "operations": ["store"],
        "decision": "Allow",
    }
    return obj("PermissionRule", name, {**base, **spec})


def identity(name: str, **spec: Any) -> Manifest:
    return obj("AgentIdentity", name, {"cortexRef": {"name": "main"}, **spec})


EXTERNAL = {"external": {"secretRef": {"name": "pg", "key": "uri"}}}
SIDECAR = {
    "image": "hooks/redactor:1.0",
    "command": ["cortexctl", "hookd", "--listen", "127.0.0.1:7000", "--", "redact"],
    "env": [{"name": "LEVEL", "value": "2"}],
    "resources": {"limits": {"memory": "64Mi"}},
}
DAEMON = {"name": "redact", "events": ["post_recall"], "mode": "Daemon", "sidecar": SIDECAR}

CORTEX_CASES = [
    Case("cortex-managed-minimal", cortex("c-min")),
    Case("cortex-external", obj("MemoryCortex", "c-ext", {"database": EXTERNAL})),
    Case(
        "cortex-full",
        cortex(
            "c-full",
            database={
                "managed": {
                    "storage": {"size": "20Gi", "storageClassName": "fast"},
                    "resources": {"requests": {"cpu": "500m", "memory": 1073741824}},
                }
            },
            graph={"backend": "CTE"},
            server={"replicas": 20, "service": {"type": "NodePort", "port": 9000}},
            permissions={"mode": "Enforce"},
            approval={"timeoutSeconds": 60},
            transcripts={"enabled": True, "retentionDays": 30, "pruneAfterDays": 3,
                         "namespaces": [{"namespace": "support/**", "retentionDays": 365},
                                        {"namespace": "team/*/chats"}]},
            quotas={"requestsPerSecond": 50, "storagePerAgent": "1Gi"},
            schema={"targetVersion": 3},
            paused=True,
        ),
    ),
    Case(
        "cortex-transcripts-bad-namespace",
        cortex("c-trail", transcripts={"enabled": True, "namespaces": [{"namespace": "a//b"}]}),
        "namespace pattern has an empty segment",
    ),
    Case(
        "cortex-transcripts-retention-zero",
        cortex("c-trail0", transcripts={"namespaces": [{"namespace": "a", "retentionDays": 0}]}),
        "retentionDays",
    ),
    Case(
        "cortex-both-databases",
        obj("MemoryCortex", "c-both", {"database": {"managed": {}, **EXTERNAL}}),
        "set exactly one of database.managed, database.external or database.cloudNativePG",
    ),
    Case(
        "cortex-no-database-kind",
        obj("MemoryCortex", "c-none", {"database": {}}),
        "set exactly one of database.managed, database.external or database.cloudNativePG",
    ),
    Case(
        "cortex-cloudnativepg",
        obj("MemoryCortex", "c-cnpg", {"database": {"cloudNativePG": {
            "instances": 3, "storage": {"size": "10Gi", "storageClassName": "fast"},
            "synchronous": {"number": 1, "method": "first", "dataDurability": "preferred"},
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
            "parameters": {"max_connections": "200", "work_mem": "16MB"}}}}),
    ),
    Case(
        "cortex-cloudnativepg-and-managed",
        obj("MemoryCortex", "c-cnpg2", {"database": {"managed": {}, "cloudNativePG": {}}}),
        "set exactly one of database.managed, database.external or database.cloudNativePG",
    ),
    Case(
        "cortex-cloudnativepg-sync-too-many",
        obj("MemoryCortex", "c-cnpg3", {"database": {"cloudNativePG": {
            "instances": 2, "synchronous": {"number": 2}}}}),
        "synchronous.number must be less than instances",
    ),
    Case(
        "cortex-cloudnativepg-owned-parameter",
        obj("MemoryCortex", "c-cnpg4", {"database": {"cloudNativePG": {
            "parameters": {"shared_preload_libraries": "pg_stat_statements"}}}}),
        "shared_preload_libraries and synchronous_standby_names are set by the operator",
    ),
    Case(
        "cortex-cloudnativepg-no-instances",
        obj("MemoryCortex", "c-cnpg5", {"database": {"cloudNativePG": {"instances": 0}}}),
        "instances in body should be greater than or equal to 1",
    ),
    Case(
        "cortex-cloudnativepg-backup-and-restore",
        obj("MemoryCortex", "c-cnpg6", {"database": {"cloudNativePG": {
            "backup": {"objectStore": {"endpoint": "http://minio.b:9000", "bucket": "bkp",
                                       "path": "a/b", "credentialsSecretRef": {"name": "s3"}},
                       "retention": "7d", "schedule": "0 */5 * * * *"},
            "bootstrap": {"recovery": {
                "objectStore": {"endpoint": "http://minio.b:9000", "bucket": "bkp",
                                "credentialsSecretRef": {"name": "s3"}},
                "sourceCortex": "old", "targetTime": "2026-12-02T12:00:00Z"}}}}}),
    ),
    Case(
        "cortex-cloudnativepg-restore-two-sources",
        obj("MemoryCortex", "c-cnpg7", {"database": {"cloudNativePG": {"bootstrap": {
            "recovery": {"backupName": "b1", "sourceCortex": "old", "objectStore": {
                "endpoint": "http://minio.b:9000", "bucket": "bkp",
                "credentialsSecretRef": {"name": "s3"}}}}}}}),
        "set exactly one of recovery.objectStore (with sourceCortex) or recovery.backupName",
    ),
    Case(
        "cortex-cloudnativepg-restore-no-source-cortex",
        obj("MemoryCortex", "c-cnpg8", {"database": {"cloudNativePG": {"bootstrap": {
            "recovery": {"objectStore": {"endpoint": "http://minio.b:9000", "bucket": "bkp",
                                         "credentialsSecretRef": {"name": "s3"}}}}}}}),
        "recovery.objectStore needs sourceCortex",
    ),
    Case(
        "cortex-logical-restore",
        cortex("c-lr1", restore={"logical": {"objectStore": {
            "endpoint": "http://minio.b:9000", "bucket": "bkp",
            "credentialsSecretRef": {"name": "s3"}}, "sourceCortex": "old",
            "bundle": "20261202T030000.123456Z", "requireSignature": True}}),
    ),
    Case(
        "cortex-logical-restore-pinned-signer",
        cortex("c-lr4", restore={"logical": {"objectStore": {
            "endpoint": "http://minio.b:9000", "bucket": "bkp",
            "credentialsSecretRef": {"name": "s3"}}, "sourceCortex": "old",
            "signer": {"secretRef": {"name": "old-audit-signer"}}}}),
    ),
    Case(
        "cortex-logical-restore-two-signers",
        cortex("c-lr5", restore={"logical": {"objectStore": {
            "endpoint": "http://minio.b:9000", "bucket": "bkp",
            "credentialsSecretRef": {"name": "s3"}}, "sourceCortex": "old",
            "signer": {"keyId": "ab" * 32, "secretRef": {"name": "old-audit-signer"}}}}),
        "restore.logical.signer needs exactly one of keyId or secretRef",
    ),
    Case(
        "cortex-logical-restore-no-folder",
        cortex("c-lr2", restore={"logical": {"objectStore": {
            "endpoint": "http://minio.b:9000", "bucket": "bkp",
            "credentialsSecretRef": {"name": "s3"}}}}),
        "restore.logical needs objectStore.path or sourceCortex",
    ),
    Case(
        "cortex-logical-and-physical-restore",
        obj("MemoryCortex", "c-lr3", {
            "database": {"cloudNativePG": {"bootstrap": {"recovery": {"backupName": "b1"}}}},
            "restore": {"logical": {"objectStore": {
                "endpoint": "http://minio.b:9000", "bucket": "bkp", "path": "a",
                "credentialsSecretRef": {"name": "s3"}}}}}),
        "restore.logical and database.cloudNativePG.bootstrap.recovery are exclusive",
    ),
    Case(
        "cortex-missing-database",
        obj("MemoryCortex", "c-missing", {}),
        "spec.database: Required value",
    ),
    Case(
        "cortex-too-many-replicas",
        cortex("c-r21", server={"replicas": 21}),
        "spec.server.replicas in body should be less than or equal to 20",
    ),
    Case(
        "cortex-negative-replicas",
        cortex("c-rneg", server={"replicas": -1}),
        "should be greater than or equal to 0",
    ),
    Case(
        "cortex-bad-storage-size",
        cortex("c-gb", database={"managed": {"storage": {"size": "10 GB"}}}),
        "spec.database.managed.storage.size in body should match",
    ),
    Case(
        "cortex-zero-storage-size",
        cortex("c-zero", database={"managed": {"storage": {"size": "0Gi"}}}),
        "spec.database.managed.storage.size in body should match",
    ),
    Case(
        "cortex-bad-cpu-quantity",
        cortex("c-cpu", server={"resources": {"limits": {"cpu": "lots"}}}),
        "spec.server.resources.limits.cpu in body should match",
    ),
    Case(
        "cortex-unknown-graph-backend",
        cortex("c-neo", graph={"backend": "Neo4j"}),
        'spec.graph.backend: Unsupported value: "Neo4j"',
    ),
    Case(
        "cortex-lowercase-permission-mode",
        cortex("c-mode", permissions={"mode": "enforce"}),
        'spec.permissions.mode: Unsupported value: "enforce"',
    ),
    Case(
        "cortex-unknown-field",
        cortex("c-typo", paused=False, databse={}),
        'unknown field "spec.databse"',
    ),
]

CHAIN_CASES = [
    Case(
        "hooks-exec-write-at-deadline", chain("hc-write", hook(timeoutMs=5000, failMode="Closed"))
    ),
    Case(
        "hooks-read-at-deadline",
        chain("hc-read", hook(events=["pre_recall", "post_search"], timeoutMs=2000)),
    ),
    Case(
        "hooks-daemon",
        chain("hc-daemon", DAEMON, hook("audit", events=["post_store"])),
    ),
    Case(
        "hooks-read-over-deadline",
        chain("hc-slow-read", hook(events=["pre_store", "pre_recall"], timeoutMs=2500)),
        "timeoutMs exceeds the read event class deadline of 2000 ms",
    ),
    Case(
        "hooks-index-over-deadline",
        chain("hc-slow-index", hook(events=["pre_index"], timeoutMs=1500)),
        "timeoutMs exceeds the index event class deadline of 1000 ms",
    ),
    Case(
        "hooks-write-over-deadline",
        chain("hc-slow-write", hook(timeoutMs=5001)),
        "should be less than or equal to 5000",
    ),
    Case(
        "hooks-exec-without-command",
        chain("hc-nocmd", {"name": "h", "events": ["pre_store"]}),
        "Exec hooks need command",
    ),
    Case(
        "hooks-daemon-without-sidecar",
        chain("hc-nosidecar", {"name": "h", "events": ["post_store"], "mode": "Daemon"}),
        "Daemon hooks need sidecar",
    ),
    Case(
        "hooks-exec-with-sidecar",
        chain("hc-both", hook(sidecar={"image": "hooks/x:1"})),
        "Exec hooks take no sidecar",
    ),
    Case(
        "hooks-unknown-event",
        chain("hc-event", hook(events=["pre_fly"])),
        'Unsupported value: "pre_fly"',
    ),
    Case("hooks-duplicate-names", chain("hc-dup", hook("a"), hook("a")), "Duplicate value"),
    Case("hooks-empty-chain", chain("hc-empty"), "spec.hooks: Invalid value: 0"),
    Case(
        "hooks-bad-fail-mode",
        chain("hc-failmode", hook(failMode="open")),
        'Unsupported value: "open"',
    ),
]

RULE_CASES = [
    Case("rule-wildcards", rule("r-wild", "team/*/notes", decision="AskUser", reason="review")),
    Case("rule-deep-wildcard", rule("r-deep", "projects/**", operations=["*"], inherit=False)),
    Case("rule-dotted-segments", rule("r-dots", "a.b/c-d_e/...x/8/7/6/5/4")),
    Case(
        "rule-empty-segment",
        rule("r-empty", "team//notes"),
        "namespace pattern has an empty segment",
    ),
    Case("rule-trailing-slash", rule("r-trail", "team/"), "namespace pattern has an empty segment"),
    Case(
        "rule-dotdot-segment",
        rule("r-dotdot", "team/../secrets"),
        "namespace pattern segments may not be '.' or '..'",
    ),
    Case(
        "rule-uppercase",
        rule("r-upper", "Team/notes"),
        "namespace pattern segments are [a-z0-9._-] characters, '*' or '**'",
    ),
    Case(
        "rule-partial-wildcard",
        rule("r-star", "team/no*"),
        "namespace pattern segments are [a-z0-9._-] characters, '*' or '**'",
    ),
    Case(
        "rule-too-deep",
        rule("r-nine", "a/b/c/d/e/f/g/h/i"),
        "namespace pattern has more than 8 levels",
    ),
    Case("rule-too-long", rule("r-long", "a" * 513), "may not be more than 512"),
    Case(
        "rule-unknown-decision",
        rule("r-maybe", "team", decision="Maybe"),
        'Unsupported value: "Maybe"',
    ),
    Case(
        "rule-unknown-operation",
        rule("r-op", "team", operations=["fly"]),
        'Unsupported value: "fly"',
    ),
    Case("rule-no-agents", rule("r-agents", "team", agents=[]), "spec.agents: Invalid value: 0"),
]

IDENTITY_CASES = [
    Case("identity-minimal", identity("aid-min")),
    Case(
        "identity-agent-custody",
        identity(
            "aid-agent",
            agentId="k8s:team/bot",
            keyCustody="Agent",
            rotationPolicy="Always",
            rotationSchedule="0 3 1 * *",
            serviceAccountRef={"name": "bot"},
        ),
    ),
    Case(
        "identity-rotation-without-schedule",
        identity("aid-rot", rotationPolicy="Always"),
        "rotationPolicy Always needs rotationSchedule",
    ),
    Case(
        "identity-bad-agent-id",
        identity("aid-space", agentId="my agent"),
        "spec.agentId in body should match",
    ),
    Case(
        "identity-claims-the-cortex-signer",
        identity("aid-signer", agentId="cortex:team/mem"),
        "agentId may not start with cortex:",
    ),
    Case(
        "identity-unknown-custody",
        identity("aid-hsm", keyCustody="HSM"),
        'Unsupported value: "HSM"',
    ),
]

ENDPOINT = {"mode": "Endpoint", "url": "https://embed.example/v1", "model": "m",
            "apiKeySecretRef": {"name": "embed-key"}, "timeoutMs": 2000}

#: The server settings a cortex or an identity tunes (issue 26).
SETTINGS_CASES = [
    Case(
        "settings-full",
        cortex(
            "c-settings",
            embedding=ENDPOINT,
            permissions={"mode": "Enforce", "writeDefault": "Deny"},
            limits={"maxBodyBytes": 2097152, "maxContentChars": 100000,
                    "maxMetadataBytes": 4096, "recallPool": 100, "bodyReadTimeoutSeconds": 10,
                    "maxAnswerBytes": 1048576, "maxImportBytes": 8388608,
                    "maxStagedBytesPerAgent": 16777216},
            approval={"maxHeldPerAgent": 5, "maxHeldBytesPerAgent": 65536,
                      "retentionSeconds": 3600},
            database={"managed": {}, "timeouts": {"lockMs": 1000, "statementMs": 20000}},
            server={"logLevel": "Debug"},
            transcripts={"maxBytes": 65536},
            quotas={"enabled": False},
            audit={"signer": {"mode": "Off"}},
        ),
    ),
    Case("settings-client-vectors",
         cortex("c-client", embedding={"mode": "Client", "model": "m", "dimension": 384})),
    Case("settings-endpoint-without-url",
         cortex("c-nourl", embedding={"mode": "Endpoint"}),
         "embedding mode Endpoint needs url"),
    Case("settings-url-without-endpoint",
         cortex("c-url", embedding={"url": "https://embed.example/v1"}),
         "embedding url is only used with mode Endpoint"),
    Case("settings-key-without-endpoint",
         cortex("c-key", embedding={"mode": "None", "apiKeySecretRef": {"name": "k"}}),
         "embedding apiKeySecretRef is only used with mode Endpoint"),
    Case("settings-client-without-dimension",
         cortex("c-nodim", embedding={"mode": "Client", "model": "m"}),
         "embedding mode Client needs model and dimension"),
    Case("settings-url-not-http",
         cortex("c-ftp", embedding={"mode": "Endpoint", "url": "ftp://embed.example"}),
         "spec.embedding.url in body should match"),
    Case("settings-own-onnx-model",
         cortex("c-onnx", embedding={"mode": "Onnx", "model": "team/bge", "onnx": {
             "image": "registry.example/models/bge:1", "path": "bge",
             "modelSha256": "a" * 64, "tokenizerSha256": "b" * 64, "pooling": "CLS"}})),
    Case("settings-onnx-mode-without-files",
         cortex("c-onnx-none", embedding={"mode": "Onnx"}),
         "embedding mode Onnx needs onnx"),
    Case("settings-onnx-files-without-mode",
         cortex("c-onnx-mode", embedding={"mode": "MiniLM", "onnx": {
             "claimName": "models", "modelSha256": "a" * 64, "tokenizerSha256": "b" * 64}}),
         "embedding mode Onnx needs onnx"),
    Case("settings-onnx-image-and-claim",
         cortex("c-onnx-both", embedding={"mode": "Onnx", "onnx": {
             "image": "registry.example/m:1", "claimName": "models",
             "modelSha256": "a" * 64, "tokenizerSha256": "b" * 64}}),
         "embedding.onnx needs exactly one of image"),
    Case("settings-onnx-unpinned",
         cortex("c-onnx-pin", embedding={"mode": "Onnx", "onnx": {
             "claimName": "models", "modelSha256": "abc", "tokenizerSha256": "b" * 64}}),
         "spec.embedding.onnx.modelSha256 in body should be at least 64 chars long"),
    Case("settings-onnx-not-hex",
         cortex("c-onnx-hex", embedding={"mode": "Onnx", "onnx": {
             "claimName": "models", "modelSha256": "z" * 64, "tokenizerSha256": "b" * 64}}),
         "spec.embedding.onnx.modelSha256 in body should match"),
    Case("settings-unknown-embedding-mode",
         cortex("c-small", embedding={"mode": "Huge"}),
         'Unsupported value: "Huge"'),
    Case("settings-ask-without-approval",
         cortex("c-ask", permissions={"writeDefault": "AskUser"}, approval={"enabled": False}),
         "permissions.writeDefault AskUser needs approval.enabled"),
    Case("settings-ask-with-approval", cortex("c-ask-ok", permissions={"writeDefault": "AskUser"})),
    Case("settings-content-over-body",
         cortex("c-content", limits={"maxBodyBytes": 4096, "maxContentChars": 8192}),
         "limits.maxContentChars must not exceed limits.maxBodyBytes"),
    Case("settings-body-too-small",
         cortex("c-body", limits={"maxBodyBytes": 10}),
         "should be greater than or equal to 1024"),
    Case("settings-lock-over-statement",
         cortex("c-lock", database={"managed": {}, "timeouts": {"lockMs": 60000,
                                                                "statementMs": 1000}}),
         "database.timeouts.lockMs must not exceed statementMs"),
    Case("settings-log-level-lowercase",
         cortex("c-log", server={"logLevel": "debug"}),
         'Unsupported value: "debug"'),
    Case("settings-unknown-signer",
         cortex("c-signer", audit={"signer": {"mode": "Agent"}}),
         'Unsupported value: "Agent"'),
    Case("identity-quotas", identity("aid-q", quotas={"requestsPerSecond": 5, "storage": "1Gi"})),
    Case("identity-empty-quotas", identity("aid-q0", quotas={}),
         "quotas needs requestsPerSecond or storage"),
    Case("identity-bad-storage", identity("aid-q1", quotas={"storage": "lots"}),
         "spec.quotas.storage in body should match"),
]

#: spec.trust (ADR 0049) and AgentIdentity.spec.trustTier.
TRUST_CASES = [
    Case("trust-ceilings", cortex("c-trust", trust={
        "defaultTier": "SemiTrusted",
        "ceilings": {"SemiTrusted": {"graph.read": "granted", "memory.forget": "denied"},
                     "Untrusted": {"memory.read": "qualified:public/**",
                                   "audit.read": "qualified"}}})),
    Case("trust-kernel-ceiling", cortex("c-trust2", trust={
        "ceilings": {"Kernel": {"memory.read": "denied"}}}), "ceilings are keyed by tier"),
    Case("trust-unknown-scope", cortex("c-trust3", trust={
        "ceilings": {"Trusted": {"shell.exec": "denied"}}}), "a ceiling marks scope bases"),
    Case("trust-bad-mark", cortex("c-trust4", trust={
        "ceilings": {"Trusted": {"memory.read": "sometimes"}}}), "should match"),
    Case("trust-kernel-default", cortex("c-trust5", trust={"defaultTier": "Kernel"}),
         "Unsupported value"),
    Case("sealed-namespaces", cortex("c-sealed", encryption={
        "atRest": True, "sealedNamespaces": ["medical/**", "team/*/private"]})),
    Case("sealed-namespaces-bad-pattern", cortex("c-sealed2", encryption={
        "sealedNamespaces": ["Medical/**"]}), "namespace pattern segments are"),
    Case("sealed-namespaces-duplicate", cortex("c-sealed3", encryption={
        "sealedNamespaces": ["a", "a"]}), "Duplicate value"),
    Case("identity-tier", identity("i-tier", trustTier="Untrusted")),
    Case("identity-kernel", identity("i-kernel", trustTier="Kernel"), "Unsupported value"),
]

#: spec.audit.witnesses (ADRs 0101, 0102): external (url) or operator-run (run), one of them.
WITNESS_CASES = [
    Case("witness-external", cortex("c-wit1", audit={"witnesses": [
        {"name": "witness.example/one", "url": "https://witness.example"}]})),
    Case("witness-run", cortex("c-wit2", audit={"witnesses": [
        {"name": "w1", "run": {}},
        {"name": "w2", "run": {"intervalSeconds": 60, "size": "64Mi",
                               "storageClassName": "local"}}]})),
    Case("witness-both", cortex("c-wit3", audit={"witnesses": [
        {"name": "w1", "url": "https://w.example", "run": {}}]}), "exactly one of url"),
    Case("witness-neither", cortex("c-wit4", audit={"witnesses": [{"name": "w1"}]}),
         "exactly one of url"),
    Case("witness-run-name", cortex("c-wit5", audit={"witnesses": [
        {"name": "witness.example/one", "run": {}}]}), "is a DNS label"),
    Case("witness-duplicate", cortex("c-wit6", audit={"witnesses": [
        {"name": "w1", "run": {}}, {"name": "w1", "url": "https://w.example"}]}),
         "witness names must be unique"),
    Case("witness-interval", cortex("c-wit7", audit={"witnesses": [
        {"name": "w1", "run": {"intervalSeconds": 1}}]}), "should be greater than or equal"),
]

CREATE_CASES = (CORTEX_CASES + CHAIN_CASES + RULE_CASES + IDENTITY_CASES + SETTINGS_CASES
                + TRUST_CASES + WITNESS_CASES)

_STORE = {"endpoint": "http://minio.b:9000", "bucket": "bkp",
          "credentialsSecretRef": {"name": "s3"}}

#: (id, original, updated, expected error or None) for transition rules.
UPDATE_CASES = [
    (
        "identity-change-agent-id",
        identity("aid-u1", agentId="bot-1"),
        identity("aid-u1", agentId="bot-2"),
        "agentId is immutable",
    ),
    (
        "identity-add-agent-id",
        identity("aid-u2"),
        identity("aid-u2", agentId="bot"),
        "agentId is immutable",
    ),
    (
        "identity-change-custody",
        identity("aid-u3"),
        identity("aid-u3", keyCustody="Agent"),
        "keyCustody is immutable",
    ),
    (
        "identity-change-rotation",
        identity("aid-u4", agentId="bot"),
        identity("aid-u4", agentId="bot", rotationPolicy="Always", rotationSchedule="0 3 * * 0"),
        None,
    ),
    ("cortex-scale", cortex("c-u1"), cortex("c-u1", server={"replicas": 3}), None),
    (
        "cortex-add-restore",
        cortex("c-u2"),
        cortex("c-u2", restore={"logical": {"objectStore": _STORE, "sourceCortex": "old"}}),
        "spec.restore is immutable",
    ),
    (
        "cortex-change-restore",
        cortex("c-u3", restore={"logical": {"objectStore": _STORE, "sourceCortex": "old"}}),
        cortex("c-u3", restore={"logical": {"objectStore": _STORE, "sourceCortex": "new"}}),
        "spec.restore is immutable",
    ),
]
