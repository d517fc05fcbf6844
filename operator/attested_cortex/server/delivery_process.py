"""The server's side of the delivery process (ADR 0142): start it, talk to it, restart it.

:class:`DeliveryProcess` is what ``Services.deliverer`` holds when
``subscriptions.delivery`` is ``process`` (the default). Its loop starts the child
(:mod:`.delivery`) once this cortex has a subscription to deliver (an enabled row, or a
declared one: a cortex without subscriptions runs no extra process), sends it the settings
over a socketpair, and waits for it to end; a child that ends is started again after 0.5 s,
doubling to 30 s while it keeps ending within a minute. :meth:`aclose` (the server's stop)
sends SIGTERM and waits at most ``STOP_S`` before SIGKILL.

What the serving process used to read from the deliverer's memory now comes from the
database (lag, head, times, errors, dead letters: every replica answers the same) or from
the child: which subscriptions' leases it holds (``running``: this replica delivers it),
and its metrics (appended to ``/metrics``). A dead-letter replay is one attempt the server
makes itself, answered with its outcome, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import signal
import socket
import sys
import uuid
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter

from attested_cortex import tasks
from attested_cortex.attest.sealing import Sealer
from attested_cortex.errors import CortexError
from attested_cortex.server.delivery import LINE_LIMIT
from attested_cortex.server.settings import ServerSettings
from attested_cortex.server.subscribing import delivery_settings
from attested_cortex.service.workers.delivering import new_sender, replay_dead
from attested_cortex.store import subscriptions as subs
from attested_cortex.store.database import Database
from attested_cortex.store.subscriptions import Subscription

log = logging.getLogger(__name__)

#: Restarts wait this long, doubling up to ``BACKOFF_MAX_S`` while the child keeps dying
#: within ``STABLE_S`` of its start.
BACKOFF_S: Final = 0.5
BACKOFF_MAX_S: Final = 30.0
STABLE_S: Final = 60.0
#: How long a stopping child has before SIGKILL (its lanes stop within 10 s, ADR 0128).
STOP_S: Final = 12.0
#: How long ``/metrics`` waits for the child's series.
METRICS_S: Final = 2.0


class DeliveryProcess:
    """Webhook delivery in a child process, as the server sees it (the ``Delivery``
    protocol of :mod:`attested_cortex.service.workers.delivering`)."""

    def __init__(self, settings: ServerSettings, db: Database, sealer: Sealer | None, *,
                 at_rest_default: bool = False,
                 registry: CollectorRegistry | None = None) -> None:
        self.settings = delivery_settings(settings)
        self._starts = Counter("cortex_delivery_process_starts_total",
                               "Delivery processes started (ADR 0142): more than one is a "
                               "restart", registry=registry)
        self._server_settings = settings
        self._db, self._sealer = db, sealer
        self._at_rest_default = at_rest_default
        self._held: frozenset[uuid.UUID] = frozenset()
        self._process: asyncio.subprocess.Process | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ready = False
        self._answers: dict[int, asyncio.Future[str]] = {}
        self._ids = itertools.count(1)
        self._failures = 0
        self._wanted = bool(settings.subscriptions.declared)
        self._closing = False
        self._loop = tasks.Loop("delivery-process", self._step, retry_s=self.settings.sync_s,
                                expected=(CortexError, OSError),
                                first_delay_s=self.settings.first_delay_s)
        #: The running child's pid (None: none now), for the logs, the tests and the bench.
        self.pid: int | None = None

    # -- the Delivery protocol ---------------------------------------------------------
    def start(self, dsn: str) -> None:
        self._loop.start()

    async def aclose(self) -> None:
        self._closing = True  # the loop starts no child from now on
        await self._terminate()
        await self._loop.stop(timeout_s=STOP_S + 2)

    @property
    def running(self) -> bool:
        return self._ready

    @property
    def held(self) -> frozenset[uuid.UUID]:
        return self._held

    def changed(self) -> None:
        self._wanted = True  # a subscription was made here: start the child now
        self._loop.wake()
        self._send({"op": "changed"})

    def kick(self) -> None:
        self._send({"op": "kick"})

    async def replay_dead(self, sub: Subscription, seq: int) -> str | None:
        sender = new_sender(self.settings, sub)
        try:
            return await replay_dead(self._db, self._sealer, sub, seq, sender)
        finally:
            await sender.close()

    async def exposition(self) -> bytes:
        if not self._ready:
            return b""
        ident = next(self._ids)
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._answers[ident] = answer
        try:
            self._send({"op": "metrics", "id": ident})
            async with asyncio.timeout(METRICS_S):
                return (await answer).encode()
        except (TimeoutError, ConnectionError):
            return b""  # a child busy or restarting: its series are missing this scrape
        finally:
            self._answers.pop(ident, None)

    # -- the child ---------------------------------------------------------------------
    async def _step(self) -> float:
        if self._closing:
            return STOP_S
        if not self._wanted and not await self._any_enabled():
            return self.settings.sync_s
        self._wanted = True  # once started, always restarted
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            code = await self._run_child()
        finally:
            await self._terminate()
        if self._closing:
            return STOP_S
        if loop.time() - started >= STABLE_S:
            self._failures = 0
        self._failures += 1
        wait = min(BACKOFF_MAX_S, BACKOFF_S * 2.0 ** (self._failures - 1))
        log.warning("delivery process ended; starting it again",
                    extra={"returncode": code, "restart_in_s": wait})
        return wait

    async def _any_enabled(self) -> bool:
        async with self._db.connection() as conn:
            return any(s.enabled for s in await subs.listed(conn))

    async def _run_child(self) -> int | None:
        ours, theirs = socket.socketpair()
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "attested_cortex.server.delivery",
                "--parent", str(os.getpid()), "--fd", str(theirs.fileno()),
                pass_fds=(theirs.fileno(),), stdin=asyncio.subprocess.DEVNULL,
                env=_child_env())
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._process, self.pid = process, process.pid
        self._starts.inc()
        reader, writer = await asyncio.open_unix_connection(sock=ours, limit=LINE_LIMIT)
        self._writer = writer
        try:
            self._send({"settings": self._server_settings.model_dump(mode="json"),
                        "at_rest_default": self._at_rest_default})
            while line := await reader.readline():
                self._heard(json.loads(line))
        finally:
            self._writer, self._ready, self._held = None, False, frozenset()
            for answer in self._answers.values():
                if not answer.done():
                    answer.set_exception(ConnectionError("the delivery process ended"))
            writer.close()
        return await process.wait()

    def _heard(self, message: dict[str, Any]) -> None:
        if message.get("ready"):
            self._ready = True
            log.info("delivery process started", extra={"pid": message.get("pid")})
        elif "held" in message:
            self._held = frozenset(uuid.UUID(h) for h in message["held"])
        elif "id" in message:
            answer = self._answers.get(int(message["id"]))
            if answer is not None and not answer.done():
                answer.set_result(str(message.get("metrics", "")))

    def _send(self, message: dict[str, Any]) -> None:
        writer = self._writer
        if writer is not None and not writer.is_closing():
            writer.write(json.dumps(message).encode() + b"\n")

    async def _terminate(self) -> None:
        """Stop the child, bounded: SIGTERM, then SIGKILL after ``STOP_S``."""
        process, self._process = self._process, None
        self.pid = None
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(STOP_S):
                await process.wait()
        except TimeoutError:
            log.warning("delivery process did not stop in %.0f s: killed", STOP_S)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


def _child_env() -> dict[str, str]:
    """The server's environment, with the server's own import path: the child runs the
    server's code, from a source tree as from an installed package, in the same order."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env
