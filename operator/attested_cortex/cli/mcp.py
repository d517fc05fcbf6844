"""``cortexctl mcp --server URL``: a stdio MCP server for local agent hosts (Claude Code,
Cursor, ...) forwarding to a running cortex with the caller's credentials.

Credentials, first found wins: ``--token-file FILE`` (a ``cortexctl tokens`` token or a
Kubernetes service-account token, sent as ``Authorization: Bearer``), ``$CORTEX_TOKEN``
(the same, from the environment), then ``--agent-id`` / ``$CORTEX_AGENT_ID`` (sent as
``X-Agent-Id``, for a server run with ``--auth dev``). ``--scopes`` / ``$CORTEX_SCOPES``
narrows what the token may do (``X-Cortex-Scopes``). The token is read once and never
logged. An ``https://`` cortex is verified against ``--ca-file`` / ``$CORTEX_CA_FILE`` (the
CA bundle the operator publishes, ADR 0047), else the system's roots. See docs/mcp.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``mcp`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "mcp", help="stdio MCP server forwarding to a running cortex",
        description="Serve the cortex's memory tools over stdio (for an agent host's "
        "mcpServers entry), forwarding each call to --server with your credentials.",
    )
    parser.add_argument("--server", default=os.environ.get("CORTEX_URL"),
                        help="the cortex's base URL, e.g. http://127.0.0.1:8080 (default: "
                        "$CORTEX_URL)")
    parser.add_argument("--token-file", type=Path,
                        help="file holding the bearer token (a cortexctl tokens token or a "
                        "service-account token); else $CORTEX_TOKEN")
    parser.add_argument("--agent-id", default=os.environ.get("CORTEX_AGENT_ID"),
                        help="X-Agent-Id for a server with --auth dev (default: "
                        "$CORTEX_AGENT_ID)")
    parser.add_argument("--scopes", default=os.environ.get("CORTEX_SCOPES"),
                        help="narrow the token to these scopes (X-Cortex-Scopes)")
    parser.add_argument("--ca-file", type=Path,
                        default=os.environ.get("CORTEX_CA_FILE") or None,
                        help="PEM CA bundle that verifies an https:// cortex (default: "
                        "$CORTEX_CA_FILE, else the system's roots)")
    parser.set_defaults(handler=run)


class CredentialsError(Exception):
    """No usable credentials were given."""


def credentials(args: argparse.Namespace, env: dict[str, str]) -> dict[str, str]:
    """The headers that say who is calling."""
    headers: dict[str, str] = {}
    token = None
    if args.token_file is not None:
        try:
            token = args.token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise CredentialsError(f"cannot read --token-file: {exc.strerror}") from exc
    elif env.get("CORTEX_TOKEN"):
        token = env["CORTEX_TOKEN"].strip()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    elif args.agent_id:
        headers["X-Agent-Id"] = args.agent_id
    else:
        raise CredentialsError("give --token-file, $CORTEX_TOKEN, or (for a server with "
                               "--auth dev) --agent-id / $CORTEX_AGENT_ID")
    if args.scopes:
        headers["X-Cortex-Scopes"] = args.scopes
    return headers


def run(args: argparse.Namespace) -> int:
    """Serve stdio until the agent host closes it."""
    import logging

    from attested_cortex import pki
    from attested_cortex.mcp.relay import Upstream, endpoint_url, serve_stdio

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)  # stdout is the protocol
    if not args.server:
        print("cortexctl mcp: --server URL is required (or $CORTEX_URL)", file=sys.stderr)
        return 2
    try:
        headers = credentials(args, dict(os.environ))
    except CredentialsError as exc:
        print(f"cortexctl mcp: {exc}", file=sys.stderr)
        return 2
    try:
        tls = pki.client_context(args.ca_file)
    except OSError as exc:
        print(f"cortexctl mcp: cannot read --ca-file: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve_stdio(Upstream(endpoint_url(args.server), headers, tls)))
    except Exception as exc:  # cannot reach or authenticate to the cortex at start-up
        print(f"cortexctl mcp: cannot serve {endpoint_url(args.server)}: "
              f"{_first_cause(exc)}", file=sys.stderr)
        return 1
    return 0


def _first_cause(exc: BaseException) -> str:
    """The innermost error of an exception group (what the user can act on)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"
