"""What every transport shares: the request envelope, the failure causes, the Protocol.

The three transports (:mod:`.transports.exec`, :mod:`.transports.daemon`,
:mod:`.transports.remote`) implement :class:`Transport` and never import each other; the
pipeline (:mod:`.dispatching`) calls them and turns a :class:`HookFailure` into the hook's
fail mode. ``cortexctl hookd`` uses the same envelope on its socket.
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal, Protocol, TypedDict

FailureCause = Literal[
    "timeout", "crash", "malformed", "empty", "oversized", "unavailable", "overloaded",
    "refused",
]

#: JSON-RPC 2.0 method a daemon hook answers.
RPC_METHOD: Final = "hook.fire"
#: Environment variable telling a hook program how it is run: ``exec`` or ``daemon``.
MODE_ENV: Final = "CORTEX_HOOK_MODE"


class RawHookRequest(TypedDict):
    """What a hook receives: on stdin (exec) or as JSON-RPC ``params`` (daemon, remote)."""

    hook: str
    event: str
    agent_id: str
    namespace: str | None
    payload: dict[str, Any]
    deadline_ms: int


class HookFailure(Exception):
    """A hook did not produce a usable decision; ``cause`` says why."""

    def __init__(self, cause: FailureCause, detail: str) -> None:
        super().__init__(f"{cause}: {detail}")
        self.cause: FailureCause = cause
        self.detail = detail


class TransportState(TypedDict):
    """Live state of a transport, for ``/v1/capabilities`` and ``doctor --hooks``."""

    state: Literal["ready", "starting", "up", "backoff", "closed"]
    restarts: int
    pid: int | None
    last_error: str | None


class Transport(Protocol):
    """Delivers one request to a hook and returns its decoded JSON answer."""

    async def start(self) -> None:
        """Start long-lived children or connections (no-op for exec)."""

    async def wait_settled(self, timeout_s: float) -> None:
        """Wait (bounded) until a long-lived child or connection is up or has failed."""

    async def call(self, request: RawHookRequest, *, timeout_s: float) -> object:
        """Return the hook's decoded answer, or raise :class:`HookFailure`."""

    def state(self) -> TransportState:
        """Live state for describe()."""

    async def aclose(self) -> None:
        """Stop children and connections; pending calls fail with ``crash``."""


def decode_answer(data: bytes) -> object:
    """Decode one JSON answer; empty or undecodable output is a :class:`HookFailure`."""
    if not data.strip():
        raise HookFailure("empty", "the hook printed nothing")
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past the parser
        raise HookFailure("malformed", f"the hook's output is not JSON: {exc}") from exc
