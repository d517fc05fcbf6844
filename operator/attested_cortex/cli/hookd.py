"""``cortexctl hookd --listen ADDR -- CMD...``: the sidecar entry point for daemon hooks.

Registered by :mod:`attested_cortex.cli.main`. Runs CMD as a long-lived stdio hook program
and serves it over ``tcp://HOST:PORT`` or ``unix:///path`` until SIGTERM or SIGINT; the
logic lives in :mod:`attested_cortex.hooks.sidecar`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Any

from attested_cortex.hooks.settings import DEFAULT_MAX_IN_FLIGHT
from attested_cortex.hooks.sidecar import Sidecar, serve_forever


def register(subparsers: Any) -> None:
    """Add the ``hookd`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "hookd", help="serve a stdio hook program over TCP or a Unix socket",
        description="Run CMD as a daemon hook (JSON-RPC 2.0 over stdio) and serve it on ADDR.",
    )
    parser.add_argument("--listen", required=True, metavar="ADDR",
                        help="tcp://HOST:PORT or unix:///path")
    parser.add_argument("--max-in-flight", type=int, default=DEFAULT_MAX_IN_FLIGHT,
                        help="requests outstanding at the program at once (default %(default)s)")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD...",
                        help="the hook program and its arguments")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Serve until signalled; exit 2 on a bad address or a missing command."""
    command = tuple(args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd)
    if not command:
        print("cortexctl hookd: give the hook program after --, e.g. -- python hook.py",
              file=sys.stderr)
        return 2
    try:
        sidecar = Sidecar(command, listen=args.listen, max_in_flight=args.max_in_flight)
    except ValueError as exc:
        print(f"cortexctl hookd: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        asyncio.run(_main(sidecar))
    except OSError as exc:
        print(f"cortexctl hookd: cannot listen on {args.listen}: {exc.strerror}", file=sys.stderr)
        return 1
    return 0


async def _main(sidecar: Sidecar) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await serve_forever(sidecar, stop)
