"""The subscription API's operations (``/v1/subscriptions``; MCP tools and ``kubectl
cortex`` call the same functions), each a pipeline Call (issue 41, ADR 0106).

Every operation needs ``subscriptions.manage`` held bare: a subscription may name any
namespace and receives the content written there, so managing one is a whole-cortex power
(Trusted tier and above). The secret is never shown but once, in the answer to the create
that generated it. A change here wakes this server's deliverer (or its delivery process, ADR
0142) at once; other replicas see it at their next sync (a second).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, ClassVar

from attested_cortex.attest.sealing import UnsealError
from attested_cortex.errors import ConflictError, InvalidInputError, NotFoundError
from attested_cortex.policy.targets import check_addresses, networks, parse_target
from attested_cortex.service.pipeline import operations as ops
from attested_cortex.service.pipeline import outboxing
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.deciding import require_bare
from attested_cortex.service.pipeline.operations import OperationSpec
from attested_cortex.service.pipeline.running import Call, run
from attested_cortex.service.resources.subscription_commands import (
    CreateSubscription,
    ReplayDead,
    ReplayFrom,
    UpdateSubscription,
    dead_letter_view,
    subscription_view,
)
from attested_cortex.service.workers.delivering import Delivery, statuses
from attested_cortex.service.workers.webhooks import check_secret, new_secret
from attested_cortex.store import outbox
from attested_cortex.store import subscriptions as rows
from attested_cortex.store.subscriptions import Subscription

#: How long a create or update waits for its target's name to resolve (SSRF check).
RESOLVE_TIMEOUT_S = 2.0


def _enabled(svc: Services) -> None:
    if not svc.outbox:
        raise NotFoundError("subscriptions need the event outbox (migration 0038): migrate "
                            "the database", code="subscriptions_unavailable")


async def _status(svc: Services, sub: Subscription) -> dict[str, Any] | None:
    if svc.deliverer is None:
        return None
    async with svc.db.connection() as conn:
        return (await statuses(conn, svc.deliverer, [sub]))[0]


def _changed(svc: Services) -> None:
    if svc.deliverer is not None:
        svc.deliverer.changed()


async def check_target(svc: Services, url: str, *, allow_private: bool) -> None:
    """Refuse (400 ``target_refused``) a target whose host resolves to an address the
    subscription may not reach; a name that does not resolve yet is let through (each
    delivery checks again, and fails visibly)."""
    deliverer = svc.deliverer
    if allow_private or (deliverer is not None and deliverer.settings.allow_private):
        return
    refused = deliverer.settings.refused if deliverer is not None else networks(())
    host, port = parse_target(url)
    try:
        async with asyncio.timeout(RESOLVE_TIMEOUT_S):
            found = await asyncio.get_running_loop().getaddrinfo(host, port)
    except (OSError, TimeoutError):
        return
    check_addresses(host, sorted({str(info[4][0]) for info in found}),
                    allow_private=False, refused=refused)


async def find(svc: Services, name: str) -> Subscription:
    async with svc.db.connection() as conn:
        sub = await rows.by_name(conn, name)
    if sub is None:
        raise NotFoundError(f"no subscription named {name!r}", code="subscription_not_found",
                            name=name)
    return sub


@dataclass
class _Managed(Call[dict[str, Any]]):
    """A subscription operation: the bare scope, then :meth:`act`."""

    name: str = ""
    spec: ClassVar[OperationSpec] = ops.SUBSCRIPTIONS["get"]

    async def execute(self, svc: Services, caller: Caller) -> dict[str, Any]:
        require_bare(caller, "subscriptions.manage", "a subscription")
        _enabled(svc)
        return await self.act(svc)

    async def act(self, svc: Services) -> dict[str, Any]:
        raise NotImplementedError

    def request(self) -> dict[str, Any]:
        """Only the name: a request's secret never reaches a record or a log."""
        return {"name": self.name}


@dataclass
class CreateCall(_Managed):
    spec: ClassVar[OperationSpec] = ops.SUBSCRIPTIONS["create"]
    cmd: CreateSubscription | None = None

    async def act(self, svc: Services) -> dict[str, Any]:
        assert self.cmd is not None
        cmd = self.cmd
        await check_target(svc, cmd.url, allow_private=cmd.allow_private_targets)
        secret = check_secret(cmd.secret) if cmd.secret is not None else new_secret()
        fields = {**cmd.model_dump(), "managed_by": "api",
                  "secret": outboxing.seal_secret(svc.sealer, cmd.name, secret)}
        async with svc.db.transaction() as conn:
            sub = await rows.create(conn, fields)
        _changed(svc)
        view = subscription_view(sub, await _status(svc, sub))
        if cmd.secret is None:
            view["secret"] = secret  # shown once: the only answer that carries it
        return view


@dataclass
class ListCall(_Managed):
    spec: ClassVar[OperationSpec] = ops.SUBSCRIPTIONS["list"]

    async def act(self, svc: Services) -> dict[str, Any]:
        async with svc.db.connection() as conn:
            found = await rows.listed(conn)
            if svc.deliverer is None:
                return {"subscriptions": [subscription_view(s, None) for s in found]}
            states = await statuses(conn, svc.deliverer, found)
        return {"subscriptions": [subscription_view(s, state)
                                  for s, state in zip(found, states, strict=True)]}


@dataclass
class GetCall(_Managed):
    spec: ClassVar[OperationSpec] = ops.SUBSCRIPTIONS["get"]

    async def act(self, svc: Services) -> dict[str, Any]:
        sub = await find(svc, self.name)
        return subscription_view(sub, await _status(svc, sub))


@dataclass
class UpdateCall(_Managed):
    spec: ClassVar[OperationSpec] = ops.SUBSCRIPTIONS["update"]
    cmd: UpdateSubscription | None = None

    async def act(self, svc: Services) -> dict[str, Any]:
        assert self.cmd is not None
        sub = await find(svc, self.name)
        changes = self.cmd.model_dump(exclude_unset=True)
        if "secret" in changes:
            changes["secret"] = outboxing.seal_secret(svc.sealer, sub.name,
                                                      check_secret(changes["secret"]))
        if "url" in changes or "allow_private_targets" in changes:
            await check_target(svc, changes.get("url", sub.url), allow_private=changes.get(
                "allow_private_targets", sub.allow_private_targets))
        async with svc.db.transaction() as conn:
            updated = await rows.update(conn, sub.id, changes)
        if updated is None:
            raise NotFoundError(f"no subscription named {self.name!r}",
                                code="subscription_not_found", name=self.name)
        _changed(svc)
        return subscription_view(updated, await _status(svc, updated))


@dataclass
class DeleteCall(_Managed):
    spec: ClassVar[OperationSpec] = ops.SUBSCRIPTIONS["delete"]

    async def act(self, svc: Services) -> dict[str, Any]:
        sub = await find(svc, self.name)
        async with svc.db.transaction() as conn:
            await rows.delete(conn, sub.id)
        _changed(svc)
        return {"deleted": sub.name}


@dataclass
class ReplayCall(_Managed):
    """Move the cursor back: every event from ``from_sequence`` on is delivered again."""

    spec: ClassVar[OperationSpec] = ops.SUBSCRIPTIONS["replay"]
    cmd: ReplayFrom | None = None

    async def act(self, svc: Services) -> dict[str, Any]:
        assert self.cmd is not None
        sub = await find(svc, self.name)
        start = self.cmd.from_sequence
        async with svc.db.transaction() as conn:
            dropped, head = await outbox.bounds(conn)
            if start <= dropped:
                raise ConflictError(
                    f"the outbox no longer holds events before {dropped + 1} (retention): "
                    f"replay from {dropped + 1} or later", code="replay_before_retention",
                    oldest=dropped + 1)
            if start > head + 1:
                raise InvalidInputError(f"the outbox's head is {head}", field="from_sequence")
            await rows.rewind(conn, sub.id, start - 1)
        if svc.deliverer is not None:
            svc.deliverer.kick()
        return {"name": sub.name, "cursor": start - 1, "head": head}


@dataclass
class DeadListCall(_Managed):
    spec: ClassVar[OperationSpec] = ops.SUBSCRIPTIONS["dead_letters.list"]
    after: int = 0
    limit: int = 100

    async def act(self, svc: Services) -> dict[str, Any]:
        sub = await find(svc, self.name)
        async with svc.db.connection() as conn:
            found = await rows.dead_letters(conn, sub.id, after=self.after,
                                            limit=self.limit + 1)
        page = found[:self.limit]
        return {"dead_letters": [dead_letter_view(d, payload=False) for d in page],
                "next": page[-1].seq if len(found) > self.limit else None}


@dataclass
class DeadGetCall(_Managed):
    spec: ClassVar[OperationSpec] = ops.SUBSCRIPTIONS["dead_letters.get"]
    sequence: int = 0

    async def act(self, svc: Services) -> dict[str, Any]:
        sub = await find(svc, self.name)
        async with svc.db.connection() as conn:
            dead = await rows.dead_letter(conn, sub.id, self.sequence)
        if dead is None:
            raise NotFoundError(f"subscription {sub.name} has no dead letter "
                                f"{self.sequence}", code="dead_letter_not_found")
        view = dead_letter_view(dead, payload=True)
        try:
            view["payload"] = outboxing.opened(svc.sealer, dead.payload)
        except UnsealError:
            view["payload"], view["sealed"] = None, True  # does not open: kept as it is
        return view


@dataclass
class DeadReplayCall(_Managed):
    """One attempt at one dead letter, or at each (oldest first): delivered ones leave."""

    spec: ClassVar[OperationSpec] = ops.SUBSCRIPTIONS["dead_letters.replay"]
    cmd: ReplayDead | None = None

    async def act(self, svc: Services) -> dict[str, Any]:
        assert self.cmd is not None
        sub = await find(svc, self.name)
        deliverer = _deliverer(svc)
        if self.cmd.sequence is not None:
            wanted = [self.cmd.sequence]
        else:
            async with svc.db.connection() as conn:
                wanted = [d.seq for d in await rows.dead_letters(conn, sub.id,
                                                                 limit=self.cmd.limit)]
        delivered, failed = [], []
        for seq in wanted:
            why = await deliverer.replay_dead(sub, seq)
            if why is None:
                delivered.append(seq)
            else:
                failed.append({"sequence": seq, "error": why})
        return {"delivered": delivered, "failed": failed}


@dataclass
class DeadPurgeCall(_Managed):
    spec: ClassVar[OperationSpec] = ops.SUBSCRIPTIONS["dead_letters.purge"]
    sequence: int | None = None

    async def act(self, svc: Services) -> dict[str, Any]:
        sub = await find(svc, self.name)
        async with svc.db.transaction() as conn:
            count = await rows.forget_dead(conn, sub.id, self.sequence)
        return {"purged": count}


def _deliverer(svc: Services) -> Delivery:
    if svc.deliverer is None:
        raise NotFoundError("webhook delivery is off on this server (subscriptions.enabled)",
                            code="delivery_disabled")
    return svc.deliverer


async def create(svc: Services, caller: Caller, cmd: CreateSubscription) -> dict[str, Any]:
    return await run(svc, caller, CreateCall(cmd.name, cmd))


async def listed(svc: Services, caller: Caller) -> dict[str, Any]:
    return await run(svc, caller, ListCall())


async def get(svc: Services, caller: Caller, name: str) -> dict[str, Any]:
    return await run(svc, caller, GetCall(name))


async def update(svc: Services, caller: Caller, name: str,
                 cmd: UpdateSubscription) -> dict[str, Any]:
    return await run(svc, caller, UpdateCall(name, cmd))


async def delete(svc: Services, caller: Caller, name: str) -> dict[str, Any]:
    return await run(svc, caller, DeleteCall(name))


async def replay(svc: Services, caller: Caller, name: str, cmd: ReplayFrom) -> dict[str, Any]:
    return await run(svc, caller, ReplayCall(name, cmd))


async def dead_letters(svc: Services, caller: Caller, name: str, *, after: int = 0,
                       limit: int = 100) -> dict[str, Any]:
    return await run(svc, caller, DeadListCall(name, after, limit))


async def dead_letter(svc: Services, caller: Caller, name: str,
                      sequence: int) -> dict[str, Any]:
    return await run(svc, caller, DeadGetCall(name, sequence))


async def replay_dead(svc: Services, caller: Caller, name: str,
                      cmd: ReplayDead) -> dict[str, Any]:
    return await run(svc, caller, DeadReplayCall(name, cmd))


async def purge_dead(svc: Services, caller: Caller, name: str,
                     sequence: int | None = None) -> dict[str, Any]:
    return await run(svc, caller, DeadPurgeCall(name, sequence))


