"""A newline-delimited JSON-RPC 2.0 client over one pair of asyncio streams.

Used by :mod:`.supervising` for both the daemon transport (a child's stdin/stdout) and the
remote transport (a TCP or Unix socket). Requests are multiplexed by ``id``; at most
``max_in_flight`` are outstanding (backpressure: further callers wait for a slot within
their own deadline, then fail ``overloaded``). A call past its deadline is abandoned and
its late reply discarded; after :data:`MAX_CONSECUTIVE_TIMEOUTS` timeouts with no reply in
between the peer is taken as hung and the stream is ended (the supervisor restarts it).
When the stream ends, every pending call fails ``crash``.

A reply line is matched to its call by an integer ``id`` (JSON ``true`` is not one, though
Python's ``True == 1``: it answered call 1). A reply that is valid JSON but carries an
integer Python refuses to convert (more than 4300 digits) fails only its own call
(``malformed``, as infinite): it is not garbage, and the other calls on the stream go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import sys
from typing import Any, cast, get_args

import orjson

from attested_cortex.hooks.wire import RPC_METHOD, FailureCause, HookFailure, RawHookRequest

MAX_CONSECUTIVE_TIMEOUTS = 3
_MIN_ROUNDTRIP_S = 0.001


def encode(message: object) -> bytes:
    """A request line's JSON (without its newline), in C: a post_recall request carries its
    ten results, and ``json.dumps`` of it cost about 70 us of the hook's overhead
    (docs/adr/0044). What orjson refuses (an integer past 64 bits in a memory's metadata)
    goes through the standard library as before."""
    try:
        return orjson.dumps(message, default=str)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(message, default=str).encode()


class RpcConnection:
    """One live JSON-RPC stream; :meth:`run` reads replies until the stream ends."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, max_in_flight: int
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._slots = asyncio.Semaphore(max_in_flight)
        self._pending: dict[int, asyncio.Future[object]] = {}
        self._ids = itertools.count(1)
        self._closed: HookFailure | None = None
        self._timeouts = 0

    async def call(self, request: RawHookRequest, *, timeout_s: float) -> object:
        """Send ``request`` as ``hook.fire`` and return the ``result`` of the reply."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        queued = self._slots.locked()
        if queued:
            await self._wait_for_slot(timeout_s)
        else:
            await self._slots.acquire()  # free: returns without suspending
        try:
            left_s = deadline - loop.time()
            if left_s < _MIN_ROUNDTRIP_S:  # got a slot too late to use it
                raise HookFailure("overloaded", "no in-flight slot within the budget")
            try:
                return await self._roundtrip(request, left_s)
            except HookFailure as failure:
                if queued and failure.cause == "timeout":
                    # Waiting for a slot ate the budget: backpressure, not a slow hook.
                    raise HookFailure("overloaded", f"queued for a slot, then {failure.detail}"
                                      ) from failure
                raise
        finally:
            self._slots.release()

    async def _wait_for_slot(self, timeout_s: float) -> None:
        try:
            async with asyncio.timeout(timeout_s):
                await self._slots.acquire()
        except TimeoutError as exc:
            raise HookFailure("overloaded", "the in-flight queue stayed full") from exc

    async def _roundtrip(self, request: RawHookRequest, timeout_s: float) -> object:
        if self._closed is not None:
            raise self._closed
        call_id = next(self._ids)
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        message = {"jsonrpc": "2.0", "id": call_id, "method": RPC_METHOD, "params": request}
        try:
            self._writer.write(encode(message) + b"\n")
            async with asyncio.timeout(timeout_s):
                return await future
        except TimeoutError as exc:
            self._count_timeout()
            raise HookFailure("timeout", f"no reply within {timeout_s * 1000:.0f} ms") from exc
        finally:
            self._pending.pop(call_id, None)

    def _count_timeout(self) -> None:
        self._timeouts += 1
        if self._timeouts >= MAX_CONSECUTIVE_TIMEOUTS and self._closed is None:
            self.fail_all(HookFailure("timeout", f"{self._timeouts} timeouts in a row: hung"))
            self._reader.feed_eof()  # ends run(): the supervisor kills and restarts the peer

    async def run(self) -> HookFailure:
        """Dispatch replies until the stream ends; returns why it ended."""
        try:
            while line := await self._reader.readline():
                self._dispatch(line)
            reason = self._closed or HookFailure("crash", "the hook closed its output")
        except HookFailure as failure:
            reason = failure
        except ValueError as exc:  # a line longer than the stream limit
            reason = HookFailure("oversized", f"a reply exceeded the size cap: {exc}")
        except ConnectionError as exc:
            reason = HookFailure("crash", f"the connection broke: {exc}")
        self.fail_all(reason)
        return reason

    def _dispatch(self, line: bytes) -> None:
        try:
            reply = json.loads(line, parse_int=_int_or_inf)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested past the parser
            # stdout is the protocol channel: garbage there means the stream is out of step
            raise HookFailure("malformed", f"the hook wrote a non-JSON line: {exc}") from exc
        if not isinstance(reply, dict) or type(reply.get("id")) is not int:
            raise HookFailure("malformed", "the hook wrote a reply without an integer id")
        self._timeouts = 0
        future = self._pending.get(reply["id"])
        if future is None or future.done():
            return
        if "result" in reply:
            future.set_result(reply["result"])
        else:
            future.set_exception(_rpc_failure(reply))

    def fail_all(self, reason: HookFailure) -> None:
        """Fail every pending call and refuse new ones with ``reason``."""
        self._closed = reason
        for future in self._pending.values():
            if not future.done():
                future.set_exception(reason)
        self._pending.clear()

    async def aclose(self) -> None:
        """Close the write side; the reader ends when the peer closes."""
        self.fail_all(HookFailure("crash", "the connection was closed"))
        with contextlib.suppress(ConnectionError):
            self._writer.close()
            await self._writer.wait_closed()


def _int_or_inf(text: str) -> int | float:
    """An integer, or infinity past Python's digit limit (the decision parser refuses it)."""
    if len(text.lstrip("-")) > sys.get_int_max_str_digits() > 0:
        return math.inf
    return int(text)


def _rpc_failure(reply: dict[str, Any]) -> HookFailure:
    """A JSON-RPC error reply; ``cortexctl hookd`` passes the original cause in ``data``."""
    error = reply.get("error")
    if not isinstance(error, dict):
        return HookFailure("malformed", "the reply has neither result nor error")
    data = error.get("data")
    cause = data.get("cause") if isinstance(data, dict) else None
    text = f"JSON-RPC error {error.get('code')}: {error.get('message')}"
    if cause in get_args(FailureCause):
        return HookFailure(cast(FailureCause, cause), text)
    return HookFailure("malformed", text)
