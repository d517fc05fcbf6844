"""Hot reload: polls the hook config file and hands a valid new version to the pipeline.

Started by :func:`attested_cortex.hooks.dispatching.open_pipeline`. Polling ``stat`` through
symlinks sees the way Kubernetes updates a mounted ConfigMap (the ``..data`` symlink is
swapped atomically) as well as an in-place edit. An unchanged content hash is not a reload.
An invalid new file (not UTF-8, not YAML, nested past the parser, or breaking the rules), or
the file disappearing, keeps the live configuration; the pipeline logs it, counts it and
shows it in ``describe()``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from pathlib import Path
from typing import Protocol

from attested_cortex import tasks
from attested_cortex.hooks.loading import parse_settings_text
from attested_cortex.hooks.settings import HookConfigError, HooksSettings

logger = logging.getLogger(__name__)

Fingerprint = tuple[int, int, int, int]


class Reloadable(Protocol):
    """What the watcher drives: the pipeline."""

    async def reload(self, settings: HooksSettings) -> None:
        """Swap in a new configuration."""

    def report_error(self, message: str) -> None:
        """Record a rejected configuration."""


class ConfigWatcher:
    """Reloads ``path`` into ``target`` whenever the file's identity or content changes."""

    def __init__(self, path: Path, target: Reloadable, *, interval_s: float) -> None:
        self._path = path
        self._target = target
        self._interval_s = interval_s
        self._stamp = _fingerprint(path)
        self._digest = _digest(path)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Begin polling in the background."""
        self._task = asyncio.create_task(self._loop(), name="hooks-config-watcher")

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.check()
            except Exception:  # a reload bug must not kill the watcher
                logger.exception("hook config reload failed")

    async def check(self) -> None:
        """Reload now if the file changed."""
        stamp = _fingerprint(self._path)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        digest = _digest(self._path)
        if digest == self._digest:
            return
        self._digest = digest
        if digest is None:
            self._target.report_error(f"hook config {self._path} disappeared")
            return
        try:
            settings = parse_settings_text(self._path.read_text(encoding="utf-8"))
        except (HookConfigError, OSError) as exc:
            self._target.report_error(str(exc))
            return
        except UnicodeDecodeError as exc:  # was logged by the loop, while describe() said valid
            self._target.report_error(f"hook config {self._path} is not UTF-8 (byte {exc.start})")
            return
        await self._target.reload(settings)

    async def aclose(self) -> None:
        """Stop polling."""
        await tasks.stop((self._task,))


def _fingerprint(path: Path) -> Fingerprint | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
