"""The AgentIdentity pass: the key Secret (created once, adopted, rotated when due) and
status (public key, fingerprint, revision, Secret name, previous keys; never private data).

Before any key work, the refusals of :mod:`.checking`: a duplicate agent id or
ServiceAccount, and a key Secret edited away from the key status recorded (ADR 0021).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from attested_cortex.builders import names as n
from attested_cortex.builders import secrets as secret_builders
from attested_cortex.builders.conditions import Observation, cortex_found, ready
from attested_cortex.builders.inputs import Identity, InvalidSpecError, parse_identity, parse_meta
from attested_cortex.builders.keyrings import agent_id
from attested_cortex.builders.schedules import ScheduleError
from attested_cortex.controller.agentidentity import rotating
from attested_cortex.controller.agentidentity.checking import (
    DuplicateAgentIdError,
    DuplicateKeyError,
    DuplicateServiceAccountError,
    KeyMismatchError,
    check_own_key,
    check_recorded,
    check_unique,
)
from attested_cortex.controller.agentidentity.keys import (
    UnreadableKeyError,
    new_key_files,
    read_public,
)
from attested_cortex.controller.applying import check_controller
from attested_cortex.controller.eventing import now
from attested_cortex.controller.queueing import Key
from attested_cortex.controller.runtime import Runtime
from attested_cortex.controller.statuses import write_status
from attested_cortex.kubeclient import ApiConflictError

KIND = "AgentIdentity"
Object = dict[str, Any]


async def ensure_secret(rt: Runtime, identity: Identity) -> tuple[Object, bool]:
    """The key Secret: read, or created once (a lost create race adopts the winner's); one
    another owner controls is never taken (:class:`CollisionError`)."""
    ns, name = identity.meta.namespace, n.key_secret_name(identity.meta.name)
    secret = await rt.writer.get("v1", "Secret", ns, name)
    if secret is not None:
        check_controller(secret, n.owner_reference(KIND, identity.meta))
        return secret, False
    if identity.status.key_revision:
        raise KeyLostError(f"Secret {name} held key revision {identity.status.key_revision} and "
                           "is gone; restore it, or delete and recreate the AgentIdentity")
    obj = secret_builders.build_key_secret(identity, name=name,
                                           files=new_key_files(agent_id(identity)),
                                           revision=1, created_at=now())
    try:
        return await rt.writer.create(obj), True
    except ApiConflictError:
        again = await rt.writer.get("v1", "Secret", ns, name)
        if again is None:
            raise
        check_controller(again, n.owner_reference(KIND, identity.meta))
        return again, False


class KeyLostError(RuntimeError):
    """The key Secret was deleted behind the operator's back: never silently replaced."""


REASONS: dict[type[Exception], str] = {
    InvalidSpecError: "InvalidSpec", KeyLostError: "KeyLost",
    UnreadableKeyError: "UnreadableKey", ScheduleError: "InvalidSchedule",
    DuplicateAgentIdError: "DuplicateAgentId",
    DuplicateServiceAccountError: "DuplicateServiceAccount", DuplicateKeyError: "DuplicateKey",
    KeyMismatchError: "KeyMismatch"}
REFUSALS = tuple(REASONS)


def previous_keys(identity: Identity, secret: Object) -> list[Object]:
    """Retired public keys, newest first, within revisionHistoryLimit."""
    keys = [k.model_dump(by_alias=True, mode="json", exclude_none=True)
            for k in identity.status.previous_keys or []]
    annotations = secret["metadata"].get("annotations") or {}
    revision = str(annotations.get(rotating.PREVIOUS_REVISION, ""))
    known = revision.isascii() and revision.isdigit()  # isdigit alone also takes '²'
    if known and all(k["keyRevision"] != int(revision) for k in keys):
        keys.insert(0, {"keyRevision": int(revision),
                        "publicKey": annotations[rotating.PREVIOUS_KEY],
                        "fingerprint": annotations[rotating.PREVIOUS_FINGERPRINT],
                        "retiredAt": annotations.get(n.KEY_CREATED_ANNOTATION)})
    keys.sort(key=lambda k: -int(k["keyRevision"]))
    return keys[: identity.spec.revision_history_limit]


async def _follow_template(rt: Runtime, identity: Identity, secret: Object) -> None:
    """Keep the Secret's labels and annotations up to date with ``secretTemplate``."""
    template = identity.spec.secret_template
    if template is None:
        return
    meta = secret["metadata"]
    labels, annotations = template.labels or {}, template.annotations or {}
    if labels.items() <= (meta.get("labels") or {}).items() and annotations.items() <= (
            meta.get("annotations") or {}).items():
        return
    await rt.writer.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": meta["name"], "namespace": meta["namespace"], "labels": labels,
        "annotations": annotations}})


async def _key_pass(rt: Runtime, identity: Identity) -> tuple[Object, float | None]:
    check_unique(rt, identity)
    secret, _ = await ensure_secret(rt, identity)
    check_recorded(identity, secret)
    check_own_key(rt, identity, secret)
    await _follow_template(rt, identity, secret)
    secret = await rotating.finish_interrupted(rt, identity, secret)
    due = rotating.due_at(identity, secret)
    if due is None:
        return secret, None
    moment = datetime.now(UTC)
    if due <= moment:
        secret = await rotating.rotate(rt, identity, secret, stamp=now())
        due = rotating.due_at(identity, secret)
    return secret, None if due is None else max(1.0, (due - moment).total_seconds())


async def reconcile(rt: Runtime, key: Key) -> float | None:
    """One pass over an AgentIdentity."""
    body = rt.views.get(KIND, key.namespace, key.name)
    if body is None:
        return None  # the key Secret goes with it (owner reference)
    status = body.get("status") or {}
    try:
        identity = parse_identity(body)
        secret, retry = await _key_pass(rt, identity)
        public = read_public(secret)
    except REFUSALS as exc:
        failed = Observation.of("KeyReady", False, REASONS[type(exc)], str(exc))
        await write_status(rt.writer, kind=KIND, meta=parse_meta(body), current=status,
                           observed=[failed, ready([failed])])
        return None
    cortex = identity.spec.cortex_ref.name
    found = rt.views.get("MemoryCortex", key.namespace, cortex) is not None
    parts = [Observation.of("KeyReady", True, "KeyInSecret",
                            f"key revision {rotating.revision_of(secret)} in Secret "
                            f"{secret['metadata']['name']}"),
             cortex_found(cortex, found)]
    fields = {"agentId": public.agent_id, "publicKey": public.public_key,
              "fingerprint": public.fingerprint, "keyRevision": rotating.revision_of(secret),
              "secretName": secret["metadata"]["name"],
              "previousKeys": previous_keys(identity, secret) or None}
    await write_status(rt.writer, kind=KIND, meta=identity.meta, current=status,
                       observed=[*parts, ready(parts, ready_reason="KeyReady",
                                               ready_message="key pair ready")], fields=fields)
    return retry
