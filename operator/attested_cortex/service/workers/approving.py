"""Approvals: AskUser operations held for a human, decided through a signed request.

The pipeline's approval gate (:func:`..pipeline.running._gate`) calls :meth:`Approvals.hold` for an
AskUser decision in enforce mode (the client gets 202 and the approval id) and
:meth:`Approvals.check` when the client resubmits the same request with
``X-Cortex-Approval: <id>``: **the client completes an approved operation**. The write spends
the approval in its own transaction (:mod:`..pipeline.settling`): the conditional UPDATE of
:func:`attested_cortex.store.approvals.consume` lets exactly one resubmission through,
whichever server it reaches, and a write that fails or never commits leaves it usable. A
hold comes after the rate and storage quotas and within the agent's :class:`HeldBounds`
(open actions and their request bytes, else 429); the list pages by ``(created_at, id)``. A
sweeper purges actions closed longer than the retention, expires overdue actions (they are
denied), refreshes ``remember: forever`` rules written by any server and prunes used
signatures. Events (created, decided, expired) go through PostgreSQL NOTIFY so every
server's ``GET /v1/approvals/stream`` subscribers see every event once.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import hashlib
import json
import logging
import math
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final

from prometheus_client import Gauge

from attested_cortex import tasks
from attested_cortex.attest.masterkeys import Domain
from attested_cortex.attest.sealing import Sealer, UnsealError
from attested_cortex.errors import (
    ConflictError,
    CortexError,
    DeniedError,
    NotFoundError,
    QuotaExceededError,
    UnauthenticatedError,
)
from attested_cortex.policy.decisions import Decision
from attested_cortex.policy.patterns import parse_pattern
from attested_cortex.policy.rules import Rule, RuleSet
from attested_cortex.policy.signatures import MAX_AGE_S, MAX_SKEW_S
from attested_cortex.store import approvals as rows
from attested_cortex.store import notifications
from attested_cortex.store.approvals import Action
from attested_cortex.store.database import Database

log = logging.getLogger("attested_cortex.policy")
CHANNEL: Final = "cortex_approvals"
#: Put in a subscriber's queue when the server stops: the stream ends.
CLOSED: Final[dict[str, Any]] = {"event": "closed"}
#: How long a new stream subscriber waits for the NOTIFY listener to be LISTENing.
LISTEN_WAIT_S: Final = 5.0
#: Records an approval event (kind, action) in the log and the audit hook point.
Recorder = Callable[[str, Action], Awaitable[None]]


def _domain(operation: str) -> Domain:
    """The subkey a held request is sealed under: its resource's."""
    return "transcripts" if operation.startswith("transcript") else "memory"


def fingerprint(*, agent_id: str, operation: str, request: dict[str, Any]) -> str:
    """What identifies one held request: the agent, the operation and its exact input."""
    canonical = json.dumps({"agent": agent_id, "operation": operation, "request": request},
                           sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def action_view(action: Action) -> dict[str, Any]:
    """An action as API JSON."""
    return {
        "id": str(action.id), "agent_id": action.agent_id, "operation": action.operation,
        "namespace": action.namespace, "request": action.request, "reason": action.reason,
        "source": action.source, "status": action.status, "remember": action.remember,
        "created_at": action.created_at.isoformat(),
        "expires_at": action.expires_at.isoformat(),
        "decided_at": action.decided_at.isoformat() if action.decided_at else None,
        "decided_by": action.decided_by,
        "consumed": action.consumed_at is not None,
    }


def remembered_rule(row: dict[str, Any]) -> Rule:
    """The allow rule a ``remember: forever`` approval persisted: the agent, the operation,
    exactly the namespace it was held in (``**`` when it named none), highest priority."""
    return Rule(source=f"approval/{row['approval_id']}", pattern=parse_pattern(row["namespace"]),
                agents=(row["agent_id"],), operations=frozenset({row["operation"]}),
                verdict="allow", inherit=False, priority=1000,
                reason="remembered approval", order=-1)


@dataclass(frozen=True)
class HeldBounds:
    """What one agent may hold at once, and how long closed actions are kept (ADR 0017)."""

    max_actions: int = 100
    max_request_bytes: int = 4 * 1024 * 1024
    retention_s: int = 7 * 86400


def held_refusal(agent_id: str, held: rows.Held, *, adds: int,
                 bounds: HeldBounds) -> QuotaExceededError | None:
    """The 429 of a hold past the agent's bounds (None: it fits). Retry-After: until the
    agent's oldest open action expires, at the latest (a decision frees room sooner)."""
    if held.count < bounds.max_actions and held.request_bytes + adds <= bounds.max_request_bytes:
        return None
    wait = 1 if held.next_expiry is None else max(
        1, math.ceil((held.next_expiry - datetime.now(UTC)).total_seconds()))
    return QuotaExceededError(
        f"agent {agent_id} already waits on {held.count} approvals holding "
        f"{held.request_bytes} bytes of requests; this one adds {adds} and the bounds are "
        f"{bounds.max_actions} approvals and {bounds.max_request_bytes} bytes "
        "(approval.max_held_per_agent, approval.max_held_bytes_per_agent): wait for a "
        "decision or an expiry", retry_after=wait, limit="held_approvals",
        code="held_quota_exceeded", held=held.count, held_bytes=held.request_bytes, adds=adds)


@dataclass
class Approvals:
    """The approval service of one server (state shared with others through the database)."""

    db: Database
    secret: bytes | None
    timeout_s: int
    rules: RuleSet
    record: Recorder | None = None
    sweep_interval_s: float = 1.0
    bounds: HeldBounds = field(default_factory=lambda: HeldBounds())
    #: ``cortex_approvals_pending``, set by every sweep (the dashboard's approvals panel).
    pending_gauge: Gauge | None = None
    _subscribers: set[asyncio.Queue[dict[str, Any]]] = field(default_factory=set)
    _remembered: set[str] = field(default_factory=set)
    _loops: list[tasks.Loop] = field(default_factory=list)
    #: The listener's wait before it reconnects (doubles to 10 s, back to 0.1 s once in).
    _listen_delay_s: float = 0.1
    #: Set while the NOTIFY listener is LISTENing: events are only delivered through it.
    _listening: asyncio.Event = field(default_factory=asyncio.Event)
    #: Seals held requests at rest with ``encryption.at_rest`` on, opens them for the
    #: approver (ADR 0056); None: no master key.
    sealer: Sealer | None = None
    #: Appends an approval's outbox event in the transaction that holds, decides or expires
    #: it (issue 41, seed 000 K4: approval events through subscriptions); set at start-up
    #: when the outbox exists (:func:`attested_cortex.service.pipeline.outboxing.approvals`).
    outbox: Callable[[Any, str, Action], Awaitable[None]] | None = None

    @property
    def enabled(self) -> bool:
        """Decisions need the HMAC secret: without it the API is off, never open."""
        return self.secret is not None

    # -- the gate ------------------------------------------------------------------------
    async def hold(self, *, agent_id: str, operation: str, rule_operation: str | None,
                   namespace: str | None, request: dict[str, Any], decision: Decision) -> Action:
        """Record a held operation and announce it (429 past the agent's bounds)."""
        action_id = uuid.uuid4()
        version, stored = self._sealed(action_id, operation, request)
        adds = len(json.dumps(stored, default=str).encode())  # what is stored
        async with self.db.transaction() as conn:
            refused = held_refusal(agent_id, await rows.held_by(conn, agent_id), adds=adds,
                                   bounds=self.bounds)
            if refused is not None:
                raise refused
            action = self._opened(await rows.insert(
                conn, agent_id=agent_id, operation=operation, rule_operation=rule_operation,
                namespace=namespace, request=stored,
                fingerprint=fingerprint(agent_id=agent_id, operation=operation,
                                        request=request),
                reason=decision.reason, source=decision.source, timeout_s=self.timeout_s,
                action_id=action_id, key_version=version))
            await self._notify(conn, "created", action)
        return action

    def _sealed(self, action_id: uuid.UUID, operation: str,
                request: dict[str, Any]) -> tuple[int | None, dict[str, Any]]:
        """(key version, the request as stored): sealed with ``encryption.at_rest`` on."""
        if self.sealer is None or not self.sealer.seals:
            return None, request
        plain = json.dumps(request, default=str, separators=(",", ":")).encode()
        version, sealed = self.sealer.seal(_domain(operation), action_id, plain)
        return version, {"sealed": base64.b64encode(sealed).decode("ascii")}

    def _opened(self, action: Action) -> Action:
        """The action with its request as the agent sent it; a request that does not open
        (no key, or a version the ring lacks) says so instead of failing the listing."""
        if action.key_version is None:
            return action
        try:
            if self.sealer is None:
                raise UnsealError("no master key is configured")
            plain = self.sealer.open(_domain(action.operation), action.id, action.key_version,
                                     base64.b64decode(str(action.request.get("sealed", ""))))
            request = json.loads(plain)
        except (UnsealError, ValueError) as exc:
            request = {"unreadable": f"sealed under master key v{action.key_version}: {exc}"}
        return replace(action, request=request)

    async def check(self, approval_id: str, *, agent_id: str, operation: str,
                    request: dict[str, Any]) -> uuid.UUID:
        """The approval of this exact request, approved and not used yet (403 if it is for
        another, 409 if not approved or already used); spent by the write that completes it
        (:mod:`..pipeline.settling`), or by :meth:`spend`."""
        action_id = _uuid(approval_id)
        async with self.db.connection() as conn:
            action = await rows.get(conn, action_id)
        if action is None:
            raise NotFoundError(f"no approval {approval_id}", approval_id=approval_id)
        wanted = fingerprint(agent_id=agent_id, operation=operation, request=request)
        if action.fingerprint != wanted:
            raise DeniedError("this approval is for another agent, operation or request",
                              code="approval_mismatch", approval_id=approval_id)
        if action.status != "approved" or action.consumed_at is not None:
            raise _not_usable(action)
        return action_id

    async def spend(self, action_id: uuid.UUID) -> uuid.UUID:
        """Spend a checked approval in its own statement (an operation that does not settle
        it in its transaction): 409 when another request spent it first."""
        async with self.db.connection() as conn:
            if not await rows.consume(conn, action_id):
                action = await rows.get(conn, action_id)
                assert action is not None  # actions are purged only once decided and old
                raise _not_usable(action)
        return action_id

    async def release(self, action_id: uuid.UUID) -> None:
        """The approved operation failed before writing: its approval may be used again."""
        async with self.db.connection() as conn:
            await rows.release(conn, action_id)

    # -- the API -------------------------------------------------------------------------
    async def pending(self, *, after: tuple[datetime, uuid.UUID] | None,
                      limit: int) -> list[Action]:
        """Undecided actions, oldest first, after a page's last ``(created_at, id)``."""
        async with self.db.connection() as conn:
            return [self._opened(a) for a in await rows.pending(conn, after=after, limit=limit)]

    async def count_pending(self) -> int:
        """How many actions wait."""
        async with self.db.connection() as conn:
            return await rows.count_pending(conn)

    async def get(self, approval_id: str) -> Action:
        """One action (404 if unknown)."""
        async with self.db.connection() as conn:
            action = await rows.get(conn, _uuid(approval_id))
        if action is None:
            raise NotFoundError(f"no approval {approval_id}", approval_id=approval_id)
        return self._opened(action)

    async def decide(self, approval_id: str, *, approve: bool, remember: bool,
                     decided_by: str, signature: str) -> Action:
        """Approve or reject once (409 when already decided or expired), spending the
        decision's ``signature`` in the same transaction (401 for a replay): a decision
        refused before this step (scope, rules, hooks) or here (404, 409) leaves the
        signature unspent, so a caller without the right to decide cannot burn it."""
        action_id = _uuid(approval_id)
        async with self.db.transaction() as conn:
            if not await rows.use_signature(conn, signature):
                raise UnauthenticatedError("this approval signature was used before (a replay)",
                                           code="approval_signature_replayed")
            decided = await rows.decide(conn, action_id, decided_by=decided_by,
                                        status="approved" if approve else "rejected",
                                        remember=remember and approve)
            action = None if decided is None else self._opened(decided)
            if action is None:
                current = await rows.get(conn, action_id)
                if current is None:
                    raise NotFoundError(f"no approval {approval_id}", approval_id=approval_id)
                raise ConflictError(f"approval {approval_id} is already {current.status}",
                                    code="already_decided", status=current.status)
            if action.remember:
                await rows.remember(conn, action)
            await self._notify(conn, "decided", action)
        await self._after_decision(action)
        return action

    async def _after_decision(self, action: Action) -> None:
        """What follows a committed decision never fails it (the caller would retry a
        decision already made, and meet 409): a rule not loaded yet is loaded by the next
        sweep, a lost audit record is logged loudly, as the pipeline's audit step does."""
        if action.remember:
            try:
                await self.refresh_rules()
            except (CortexError, OSError) as exc:
                log.warning("remembered rules not refreshed yet (the sweeper retries): %s",
                            type(exc).__name__)
        if self.record is not None:
            try:
                await self.record("decided", action)
            except Exception:  # the decision stands
                log.exception("the audit record of a decision failed",
                              extra={"approval_id": str(action.id)})

    # -- background ----------------------------------------------------------------------
    async def start(self, dsn: str) -> None:
        """Load remembered rules; start the sweeper and the NOTIFY listener (only with the
        API enabled). A database not migrated yet is tolerated: the sweeper retries."""
        if not self.enabled:
            return
        try:
            await self.refresh_rules()
        except CortexError as exc:
            log.warning("remembered rules not loaded yet: %s", type(exc).__name__)
        if not self._loops:
            self._loops = [
                tasks.Loop("approvals-sweeper", self._sweep_pass, retry_s=self.sweep_interval_s,
                           expected=(CortexError, OSError)),
                tasks.Loop("approvals-listen", functools.partial(self._listen_pass, dsn),
                           retry_s=self._listen_delay_s)]
        for loop in self._loops:
            loop.start()

    async def aclose(self) -> None:
        """Stop the background tasks."""
        for loop in self._loops:
            await loop.stop()

    async def sweep(self) -> list[Action]:
        """Expire overdue actions (denied), refresh remembered rules, prune signatures,
        purge actions closed for longer than the retention."""
        async with self.db.transaction() as conn:
            expired = [self._opened(a) for a in await rows.expire(conn)]
            for action in expired:
                await self._notify(conn, "expired", action)
            await rows.prune_signatures(conn, older_than_s=MAX_AGE_S + MAX_SKEW_S + 60)
        for action in expired:
            if self.record is not None:
                await self.record("expired", action)
        if self.pending_gauge is not None:
            self.pending_gauge.set(await self.count_pending())
        await self.refresh_rules()
        async with self.db.transaction() as conn:  # last and apart: it never holds up expiry
            await rows.purge(conn, older_than_s=self.bounds.retention_s)
        return expired

    async def refresh_rules(self) -> None:
        """Add remembered rules written by any server since the last look."""
        async with self.db.connection() as conn:
            found = await rows.remembered(conn)
        unseen = [r for r in found if str(r["approval_id"]) not in self._remembered]
        self._remembered.update(str(r["approval_id"]) for r in unseen)  # a bad row: once
        new = [rule for r in unseen if (rule := _loaded(r)) is not None]
        if new:
            self.rules.add(new)

    async def _sweep_pass(self) -> float:
        await self.sweep()
        return self.sweep_interval_s

    # -- events --------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[asyncio.Queue[dict[str, Any]]]:
        """A queue of events while the block runs (bounded: a slow reader loses events,
        the server never grows without limit)."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=1000)
        self._subscribers.add(queue)
        # Every event (this server's too) arrives through the listener: a subscriber that
        # starts before its LISTEN would miss the first events. Bounded: a database that is
        # away must not hold the stream open forever; events then flow once it reconnects.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(LISTEN_WAIT_S):
                await self._listening.wait()
        try:
            yield queue
        finally:
            self._subscribers.discard(queue)

    def close_streams(self) -> None:
        """End every stream (server shutdown): each subscriber gets the closing event."""
        for queue in list(self._subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(CLOSED)

    @property
    def subscribers(self) -> int:
        """Live stream subscribers on this server."""
        return len(self._subscribers)

    async def _notify(self, conn: Any, kind: str, action: Action) -> None:
        if self.outbox is not None:
            await self.outbox(conn, kind, action)
        event: dict[str, Any] = {"event": kind, "approval": action_view(action)}
        text = json.dumps(event, default=str)
        if action.key_version is not None:  # a NOTIFY rests in pg_notify's files: not there
            event["approval"]["request"] = {"omitted": "sealed at rest; GET /v1/approvals"}
            text = json.dumps(event, default=str)
        if len(text) > 7900:  # NOTIFY payloads stop at 8000 bytes: send the request by id
            event["approval"]["request"] = {"omitted": "too large; GET /v1/approvals"}
            text = json.dumps(event, default=str)
        await notifications.notify(conn, CHANNEL, text)

    def _deliver(self, payload: str) -> None:
        event = json.loads(payload)
        for queue in list(self._subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(event)

    async def _listen_pass(self, dsn: str) -> float:
        """LISTEN until the connection ends; returns the wait before reconnecting."""
        try:
            async with notifications.listening(dsn, CHANNEL) as payloads:
                self._listening.set()
                self._listen_delay_s = 0.1
                async for payload in payloads:
                    self._deliver(payload)
        except (CortexError, OSError) as exc:
            log.warning("approval event listener reconnecting: %s", type(exc).__name__)
        finally:
            self._listening.clear()
        delay, self._listen_delay_s = self._listen_delay_s, min(self._listen_delay_s * 2, 10.0)
        return delay


def _loaded(row: dict[str, Any]) -> Rule | None:
    """A remembered rule, or None (logged) for a row no rule can be made of (a table edited
    behind the server): one bad row must not keep every other rule out."""
    try:
        return remembered_rule(row)
    except CortexError as exc:
        log.warning("a remembered rule cannot be loaded: %s", exc.message,
                    extra={"approval_id": str(row["approval_id"])})
        return None


def _not_usable(action: Action) -> ConflictError:
    return ConflictError(
        f"approval {action.id} is {action.status}"
        f"{' and already used' if action.consumed_at else ''}: it cannot complete this "
        "request", code="approval_not_usable", status=action.status)


def _uuid(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError as exc:
        raise NotFoundError(f"no approval {value[:64]}", approval_id=value[:64]) from exc
