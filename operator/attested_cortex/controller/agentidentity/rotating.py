"""Key rotation: stage the next key, swap it into the key Secret, drop the staged copy.

Every step is safe to repeat and to interrupt: the staged Secret (create-only) holds the
next key and the retiring key's public half; the swap replaces the key Secret only if it is
unchanged since read (resourceVersion); a staged Secret whose revision is already in force
is just removed; one controlled by another owner (an earlier identity of the same name) is
never swapped in. A pass killed anywhere ends, on the next pass, with the same keys.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from attested_cortex.builders import names as n
from attested_cortex.builders import secrets as secret_builders
from attested_cortex.builders.inputs import Identity
from attested_cortex.builders.schedules import next_fire, parse_schedule
from attested_cortex.controller.agentidentity.keys import new_key_files, read_public
from attested_cortex.controller.applying import check_controller
from attested_cortex.controller.runtime import Runtime
from attested_cortex.crd import GROUP
from attested_cortex.kubeclient import ApiConflictError

Object = dict[str, Any]
PREVIOUS_REVISION: Final = f"{GROUP}/previous-revision"
PREVIOUS_KEY: Final = f"{GROUP}/previous-public-key"
PREVIOUS_FINGERPRINT: Final = f"{GROUP}/previous-fingerprint"


def revision_of(secret: Object) -> int:
    """The key revision a Secret holds (1 for a Secret without the annotation)."""
    annotations = secret["metadata"].get("annotations") or {}
    value = str(annotations.get(n.KEY_REVISION_ANNOTATION, "1"))
    return int(value) if value.isascii() and value.isdigit() else 1


def created_at(secret: Object) -> datetime:
    """When the Secret's key was generated (its creationTimestamp when not annotated)."""
    meta = secret["metadata"]
    text = (meta.get("annotations") or {}).get(n.KEY_CREATED_ANNOTATION) or meta.get(
        "creationTimestamp")
    return datetime.fromisoformat(str(text).replace("Z", "+00:00"))


def due_at(identity: Identity, secret: Object) -> datetime | None:
    """When the key in ``secret`` is due for rotation (None: never)."""
    schedule = identity.spec.rotation_schedule
    if identity.spec.rotation_policy != "Always" or not schedule:
        return None
    return next_fire(parse_schedule(schedule), created_at(secret))


async def _staged(rt: Runtime, identity: Identity, current: Object, stamp: str) -> Object:
    name = n.staged_key_secret_name(identity.meta.name)
    staged = await rt.writer.get("v1", "Secret", identity.meta.namespace, name)
    if staged is not None:
        check_controller(staged, n.owner_reference("AgentIdentity", identity.meta))
        return staged
    retiring = read_public(current)
    obj = secret_builders.build_key_secret(
        identity, name=name, files=new_key_files(retiring.agent_id),
        revision=revision_of(current) + 1, created_at=stamp)
    obj["metadata"]["annotations"] |= {PREVIOUS_REVISION: str(revision_of(current)),
                                       PREVIOUS_KEY: retiring.public_key,
                                       PREVIOUS_FINGERPRINT: retiring.fingerprint}
    try:
        return await rt.writer.create(obj)
    except ApiConflictError:
        again = await rt.writer.get("v1", "Secret", identity.meta.namespace, name)
        if again is None:
            raise
        return again


async def rotate(rt: Runtime, identity: Identity, current: Object, stamp: str) -> Object:
    """Swap a new key into ``current``; returns the key Secret now in force."""
    staged = await _staged(rt, identity, current, stamp)
    if revision_of(staged) > revision_of(current):
        swapped = {**current, "data": staged["data"],
                   "metadata": {**current["metadata"], "annotations": {
                       **(current["metadata"].get("annotations") or {}),
                       **(staged["metadata"].get("annotations") or {})}}}
        current = await rt.writer.replace(swapped)
    await rt.writer.delete("v1", "Secret", identity.meta.namespace, staged["metadata"]["name"])
    return current


async def finish_interrupted(rt: Runtime, identity: Identity, current: Object) -> Object:
    """Complete a rotation a killed pass left staged (or drop a stale staged key)."""
    name = n.staged_key_secret_name(identity.meta.name)
    staged = await rt.writer.get("v1", "Secret", identity.meta.namespace, name)
    if staged is None:
        return current
    check_controller(staged, n.owner_reference("AgentIdentity", identity.meta))
    return await rotate(rt, identity, current, stamp="")
