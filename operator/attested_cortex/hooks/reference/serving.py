"""The hook side of the wire protocol, for the reference hooks (and hook authors to copy).

:func:`serve` runs a ``decide(request) -> decision`` function the way the pipeline runs the
program: once over stdin/stdout in exec mode, or as a newline-delimited JSON-RPC 2.0 loop
in daemon mode (``CORTEX_HOOK_MODE=daemon``; ``cortexctl hookd`` also uses daemon mode).
An ``after`` callback runs once the reply is written: work the operation must not wait on.
Synchronous on purpose: a hook program needs nothing but the standard library.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from attested_cortex.hooks.wire import MODE_ENV, RawHookRequest

DecideFn = Callable[[RawHookRequest], dict[str, Any]]
AfterFn = Callable[[RawHookRequest], None]


def serve(decide: DecideFn, *, after: AfterFn | None = None) -> None:
    """Serve ``decide`` on stdin/stdout in the mode the pipeline chose."""
    if os.environ.get(MODE_ENV) == "daemon":
        serve_daemon(decide, after=after, stdin=sys.stdin, stdout=sys.stdout)
    else:
        request = json.load(sys.stdin)
        _reply(sys.stdout, decide(request))
        if after is not None:
            after(request)


def serve_daemon(decide: DecideFn, *, after: AfterFn | None, stdin: TextIO,
                 stdout: TextIO) -> None:
    """Answer ``hook.fire`` requests line by line until stdin closes."""
    for line in stdin:
        message = json.loads(line)
        request: RawHookRequest = message["params"]
        try:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": decide(request)}
        except Exception as exc:  # report it rather than die: the pipeline applies fail_mode
            error = {"code": -32000, "message": f"{type(exc).__name__}: {exc}"}
            reply = {"jsonrpc": "2.0", "id": message["id"], "error": error}
        _reply(stdout, reply)
        if after is not None:
            after(request)


def _reply(stdout: TextIO, message: dict[str, Any]) -> None:
    stdout.write(json.dumps(message) + "\n")
    stdout.flush()
