"""The server's checkpointer: signs a checkpoint of the audit tree every N events or T
seconds (issue 40, ADR 0099).

Built at start-up (:func:`attested_cortex.server.assembling.open_services`) when the server
has an ``audit_signer``, kept in ``Services.checkpointer``. One background task looks at the
chain's head every ``min(T, 1)`` seconds and cuts (:func:`attested_cortex.attest.
checkpointing.cut`) when ``every_events`` were appended since the last checkpoint or
``every_seconds`` passed with anything appended; it catches up a long chain in bounded cuts.
:meth:`Checkpointer.cut_now` cuts at once (a proof asked for an event past the latest
checkpoint). Replicas share the work through the cut's database lock: a cut of a size
another replica already signed returns that one. The signer's key is looked up at each cut
(keys rotate); the checkpoint's key name, the origin, stays.

Witnesses (``audit.witnesses``, ADR 0101): after a pass, the latest checkpoint is offered to
each configured c2sp.org/tlog-witness (``POST /add-checkpoint``: from size 0, then from the
size its 409 names, with the consistency proof); a cosignature is kept in
``audit_cosignatures`` and served with the checkpoint; a refusal is logged as an error and
counted in ``cortex_audit_witness_refusals_total``, once per checkpoint; an unreachable
witness counts in ``..._errors_total`` and is offered the checkpoint again at the next pass.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

import aiohttp
from prometheus_client import CollectorRegistry, Counter

from attested_cortex import tasks
from attested_cortex.attest import checkpointing, notes, witnessing
from attested_cortex.attest.keys import AgentKey
from attested_cortex.errors import CortexError, NotReadyError
from attested_cortex.store import checkpoints as store
from attested_cortex.store.checkpoints import CheckpointRow
from attested_cortex.store.database import Database

log = logging.getLogger(__name__)


class Checkpointer:
    """Cuts signed checkpoints in the background and on demand."""

    def __init__(self, db: Database, *, origin: str, key: Callable[[], AgentKey | None],
                 every_events: int, every_seconds: float,
                 witnesses: Sequence[tuple[str, str]] = (),
                 registry: CollectorRegistry | None = None) -> None:
        self.db = db
        self.witnesses = tuple(witnesses)
        #: The checkpoint (size, root) each witness cosigned last (a fork at one size differs).
        self._offered: dict[str, tuple[int, bytes]] = {}
        self._refusals: Counter | None = None
        self._errors: Counter | None = None
        if registry is not None and self.witnesses:
            self._refusals = Counter("cortex_audit_witness_refusals",
                                     "Checkpoints a witness refused", ["witness"],
                                     registry=registry)
            self._errors = Counter("cortex_audit_witness_errors",
                                   "Offers to a witness that could not be made", ["witness"],
                                   registry=registry)
        self.origin = origin
        self._key = key
        self.every_events = every_events
        self.every_seconds = every_seconds
        self._loop: tasks.Loop | None = None
        self._lock = asyncio.Lock()
        self._last_cut = time.monotonic()

    def signer(self) -> notes.Signer:
        """The audit signer's key under the log's origin; NotReadyError when unmounted."""
        key = self._key()
        if key is None:
            raise NotReadyError("the audit signer's private key is not mounted; "
                                "no checkpoint can be signed")
        return notes.Signer(self.origin, notes.ED25519, key.signing_key)

    def verifier(self) -> notes.Verifier | None:
        """The log's verifier key (what a witness pins), when the key is mounted."""
        key = self._key()
        return None if key is None else notes.Verifier(
            self.origin, notes.ED25519, key.public.public_key)

    async def cut_now(self) -> CheckpointRow | None:
        """Cut until the checkpoint covers the chain as it was when asked (a backlog takes
        cuts of at most MAX_LEAVES events; events appended meanwhile wait for the next
        pass, or a busy chain would be cut again and again)."""
        async with self._lock:
            signer = self.signer()
            async with self.db.connection() as conn:
                head = await store.head_size(conn)
            while True:
                row = await checkpointing.cut(self.db, signer)
                self._last_cut = time.monotonic()
                if row is None or row.size >= head:
                    return row

    def start(self) -> None:
        """Start the background task."""
        if self._loop is None:  # looks every second at most; the first look a poll after start
            poll = min(self.every_seconds, 1.0)
            self._loop = tasks.Loop("audit-checkpointer", self._run_pass, retry_s=poll,
                                    first_delay_s=poll)
        self._loop.start()

    async def aclose(self) -> None:
        """Stop the background task."""
        if self._loop is not None:
            await self._loop.stop()

    async def _run_pass(self) -> float:
        try:
            await self._pass()
        except CortexError as exc:
            log.error("audit checkpoint not cut: %s", exc.message, extra={"code": exc.code})
        return min(self.every_seconds, 1.0)

    async def _pass(self) -> None:
        async with self.db.connection() as conn:
            head = await store.head_size(conn)
            last = await store.latest(conn)
        behind = head - (0 if last is None else last.size)
        due = time.monotonic() - self._last_cut >= self.every_seconds
        if behind >= self.every_events or (behind > 0 and due):
            last = await self.cut_now()
        if last is not None:
            await self.offer(last)

    async def offer(self, row: CheckpointRow) -> None:
        """Offer ``row`` to every witness that has not cosigned its size yet."""
        for name, url in self.witnesses:
            if self._offered.get(name) == (row.size, row.root):
                continue
            try:
                await self._offer_one(name, url, row)
                self._offered[name] = (row.size, row.root)  # cosigned, or refused once
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                log.warning("audit witness %s unreachable: %s", name, exc)
                if self._errors is not None:
                    self._errors.labels(name).inc()

    async def _offer_one(self, name: str, url: str, row: CheckpointRow) -> bool:
        known, proof = 0, list[bytes]()
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for _ in range(2):
                body = witnessing.add_checkpoint_body(known, proof, row.note)
                async with session.post(url.rstrip("/") + "/add-checkpoint", data=body) as r:
                    reply = witnessing.interpret(r.status, await r.text(), size=row.size,
                                                 sent_old=known)
                if reply.outcome == "cosigned" and reply.lines:
                    async with self.db.transaction() as conn:
                        await store.add_cosignature(conn, size=row.size, witness=name,
                                                    line=reply.lines[0])
                    return True
                if reply.outcome != "retry":
                    log.error("audit witness %s refused the checkpoint of size %d: %s",
                              name, row.size, reply.message, extra={"witness": name})
                    if self._refusals is not None:
                        self._refusals.labels(name).inc()
                    return False
                known = reply.known
                async with self.db.connection() as conn:
                    proof = await checkpointing.consistency(conn, old=known, new=row.size)
        return False
