"""One loaded hook configuration with its live transports: a generation.

The pipeline (:mod:`.dispatching`) holds the current generation and swaps in a new one on
reload. A fire pins the generation it started on (:meth:`Generation.pinned`), so in-flight
fires finish on the old configuration; :meth:`Generation.retire` waits for them (bounded by
the longest class deadline) before stopping the old daemons.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from attested_cortex.hooks.events import CLASS_DEADLINES_MS, EVENTS
from attested_cortex.hooks.firing import BoundHook
from attested_cortex.hooks.settings import HookSpec, HooksSettings
from attested_cortex.hooks.supervising import Backoff
from attested_cortex.hooks.transports.daemon import DaemonTransport
from attested_cortex.hooks.transports.exec import ExecTransport
from attested_cortex.hooks.transports.remote import RemoteTransport
from attested_cortex.hooks.wire import Transport

#: How long a retiring generation waits for its in-flight fires.
_DRAIN_S = max(CLASS_DEADLINES_MS.values()) / 1000 + 1
#: How long a reload waits for new daemons to come up before swapping anyway.
START_WAIT_S = 5.0

RestartFn = Callable[[str], None]


def build_transport(spec: HookSpec, *, backoff: Backoff, on_restart: RestartFn) -> Transport:
    """The transport for ``spec.mode``."""
    def restarted() -> None:
        on_restart(spec.name)

    if spec.mode == "exec":
        return ExecTransport(spec.command, max_output_bytes=spec.max_output_bytes, env=spec.env)
    if spec.mode == "daemon":
        return DaemonTransport(
            spec.command, name=spec.name, max_in_flight=spec.max_in_flight,
            max_output_bytes=spec.max_output_bytes, env=spec.env, backoff=backoff,
            on_restart=restarted,
        )
    assert spec.address is not None
    return RemoteTransport(
        spec.address, name=spec.name, max_in_flight=spec.max_in_flight,
        max_output_bytes=spec.max_output_bytes, backoff=backoff, on_restart=restarted,
    )


@dataclass
class Generation:
    """A configuration and its transports, indexed by event in priority order."""

    settings: HooksSettings
    number: int
    by_event: dict[str, tuple[BoundHook, ...]]
    loaded_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    in_flight: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)

    @classmethod
    def build(
        cls, settings: HooksSettings, *, number: int, backoff: Backoff, on_restart: RestartFn
    ) -> Generation:
        """Create (not start) the transports of ``settings``."""
        bound = [
            BoundHook(spec, build_transport(spec, backoff=backoff, on_restart=on_restart))
            for spec in settings.hooks
        ]
        by_event = {
            event: tuple(sorted(
                (hook for hook in bound if event in hook.spec.events),
                key=lambda hook: -hook.spec.priority,
            ))
            for event in EVENTS
        }
        return cls(settings=settings, number=number,
                   by_event={event: hooks for event, hooks in by_event.items() if hooks})

    def hooks(self) -> tuple[BoundHook, ...]:
        """Every bound hook once."""
        unique = {id(h.transport): h for hooks in self.by_event.values() for h in hooks}
        return tuple(unique.values())

    async def start(self) -> None:
        """Start every transport and wait (bounded) for daemons to come up."""
        for hook in self.hooks():
            await hook.transport.start()
        await asyncio.gather(*(h.transport.wait_settled(START_WAIT_S) for h in self.hooks()))

    def matching(self, event: str, namespace: str | None) -> tuple[BoundHook, ...]:
        """Hooks for ``event`` whose namespace filter admits ``namespace``."""
        return tuple(
            hook for hook in self.by_event.get(event, ())
            if _admits(hook.spec.namespaces, namespace)
        )

    @contextlib.asynccontextmanager
    async def pinned(self) -> AsyncIterator[None]:
        """Count a fire as in flight on this generation."""
        self.in_flight += 1
        self.idle.clear()
        try:
            yield
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self.idle.set()

    async def retire(self) -> None:
        """Wait for in-flight fires (bounded), then stop every transport."""
        if self.in_flight:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_DRAIN_S):
                    await self.idle.wait()
        await asyncio.gather(*(hook.transport.aclose() for hook in self.hooks()))


def _admits(patterns: tuple[str, ...], namespace: str | None) -> bool:
    """No filter admits everything; a filter admits only a namespace matching a glob."""
    if not patterns:
        return True
    if namespace is None:
        return False
    return any(fnmatch.fnmatchcase(namespace, pattern) for pattern in patterns)
