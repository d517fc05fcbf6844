"""The hook pipeline: the one object the service layer calls on every operation; it
dispatches each event to the chain configured for it.

The server builds it at startup with :func:`open_pipeline` (which also starts the config
watcher of :mod:`.watching`), calls :meth:`HookPipeline.fire` around each operation,
reads :meth:`HookPipeline.describe` for ``/v1/capabilities`` and ``cortexctl doctor
--hooks``, and calls :meth:`HookPipeline.aclose` at shutdown. With no hook configured for
an event, ``fire`` returns Allow without touching any transport.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from attested_cortex.hooks.chaining import ChainResult
from attested_cortex.hooks.describing import RawHooksDescription, hook_state
from attested_cortex.hooks.events import EVENTS, EventName
from attested_cortex.hooks.firing import Fire, run_chain
from attested_cortex.hooks.generations import Generation
from attested_cortex.hooks.loading import load_settings
from attested_cortex.hooks.metrics import HookMetrics
from attested_cortex.hooks.settings import HooksSettings
from attested_cortex.hooks.supervising import DEFAULT_BACKOFF, Backoff
from attested_cortex.hooks.watching import ConfigWatcher

logger = logging.getLogger(__name__)


class _Closable(Protocol):
    async def aclose(self) -> None: ...


class HookPipeline:
    """Fires hook chains; swaps configurations without disturbing fires in flight."""

    def __init__(
        self, settings: HooksSettings, *, registry: CollectorRegistry,
        path: Path | None = None, backoff: Backoff = DEFAULT_BACKOFF,
    ) -> None:
        self.metrics = HookMetrics(registry)
        self.path = path
        self._backoff = backoff
        self._current = self._build(settings, number=1)
        self._last_error: str | None = None
        self._retiring: set[asyncio.Task[None]] = set()
        self._closers: list[_Closable] = []

    def _build(self, settings: HooksSettings, *, number: int) -> Generation:
        return Generation.build(settings, number=number, backoff=self._backoff,
                                on_restart=self._count_restart)

    def _count_restart(self, hook: str) -> None:
        self.metrics.restarts.labels(hook).inc()

    @property
    def settings(self) -> HooksSettings:
        """The live configuration."""
        return self._current.settings

    async def start(self) -> None:
        """Start daemons and connections of the initial configuration."""
        await self._current.start()

    def wants(self, event: EventName) -> bool:
        """Whether a hook is configured for ``event`` (a fire would run a chain)."""
        return event in self._current.by_event

    async def fire(
        self, event: EventName, payload: Mapping[str, Any], *, agent_id: str, namespace: str | None
    ) -> ChainResult:
        """Run the chain for ``event``; never raises for a hook's misbehaviour."""
        generation = self._current
        hooks = generation.matching(event, namespace) if generation.by_event else ()
        if not hooks:
            if event not in EVENTS:
                raise ValueError(f"unknown hook event {event!r}")
            return ChainResult(decision="allow", payload=payload)
        async with generation.pinned():
            return await run_chain(
                Fire(event=event, payload=payload, agent_id=agent_id, namespace=namespace),
                hooks, metrics=self.metrics,
            )

    async def reload(self, settings: HooksSettings) -> None:
        """Swap in ``settings``: new fires use it, in-flight fires finish on the old one."""
        new = self._build(settings, number=self._current.number + 1)
        try:
            await new.start()
        except BaseException:
            # Cancelled (a shutdown stops the watcher mid-reload) or failed: nobody else
            # holds this generation, so its daemons would outlive the server.
            await new.retire()
            raise
        old, self._current = self._current, new
        self._last_error = None
        self.metrics.reloads.labels("ok").inc()
        self.metrics.config_valid.set(1)
        task = asyncio.create_task(old.retire(), name=f"hooks-retire-{old.number}")
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)
        logger.info("hook config generation %d loaded (%d hooks)", new.number,
                    len(settings.hooks))

    def report_error(self, message: str) -> None:
        """Record that a new configuration was rejected; the old one stays live."""
        self._last_error = message
        self.metrics.reloads.labels("error").inc()
        self.metrics.config_valid.set(0)
        logger.error("hook config rejected, keeping generation %d: %s",
                     self._current.number, message)

    def add_closer(self, closer: _Closable) -> None:
        """Register an object with ``aclose()`` to stop before the transports (the watcher)."""
        self._closers.append(closer)

    def describe(self) -> RawHooksDescription:
        """Live state by event, for ``/v1/capabilities`` and ``cortexctl doctor --hooks``."""
        current = self._current
        return {
            "config": {
                "path": str(self.path) if self.path else None, "generation": current.number,
                "loaded_at": current.loaded_at, "valid": self._last_error is None,
                "last_error": self._last_error, "in_flight": current.in_flight,
            },
            "by_event": {
                event: [hook_state(hook) for hook in hooks]
                for event, hooks in current.by_event.items()
            },
        }

    async def aclose(self) -> None:
        """Stop the watcher, every daemon and connection; wait for retiring generations."""
        for closer in self._closers:
            await closer.aclose()
        await self._current.retire()
        await asyncio.gather(*self._retiring)


async def open_pipeline(
    path: Path | None, *, registry: CollectorRegistry, watch_interval_s: float | None = 1.0
) -> HookPipeline:
    """Load ``path`` (absent or None: no hooks), start the pipeline and, unless
    ``watch_interval_s`` is None, a watcher that hot-reloads the file when it changes.

    Raises :class:`~attested_cortex.hooks.settings.HookConfigError` if the file is invalid.
    """
    settings = load_settings(path) if path is not None else HooksSettings()
    pipeline = HookPipeline(settings, registry=registry, path=path)
    await pipeline.start()
    if path is not None and watch_interval_s is not None:
        watcher = ConfigWatcher(path, pipeline, interval_s=watch_interval_s)
        await watcher.start()
        pipeline.add_closer(watcher)
    return pipeline
