"""``cortexctl doctor``: what is configured and live, asked of a running server or worked
out from a configuration exactly as ``serve`` would (schema, graph backend, hooks, rules).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import urllib.error
import urllib.request
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from attested_cortex.errors import CortexError


def register(subparsers: Any) -> None:
    """Add the ``doctor`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "doctor", help="show what is configured and live",
        description="Ask a running server (--server) or check a configuration locally.",
    )
    parser.add_argument("--server", help="base URL of a running server, e.g. http://127.0.0.1:8080")
    parser.add_argument("--agent-id", default="dev:doctor", help="X-Agent-Id for dev auth")
    parser.add_argument("--token", help="bearer token for tokens auth")
    parser.add_argument("--database-url", help="check locally against this database")
    parser.add_argument("--config", type=Path, help="serve's YAML settings file")
    parser.add_argument("--hooks", action="store_true", help="list hooks by event in detail")
    parser.add_argument("--json", action="store_true", help="print the raw capabilities JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Collect the capabilities and print them."""
    try:
        caps = _remote(args) if args.server else asyncio.run(_local(args))
    except CortexError as exc:
        print(f"cortexctl doctor: {exc.message}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(caps, indent=2))
    else:
        print(render(caps, hooks=args.hooks))
    return 0


def render(caps: dict[str, Any], *, hooks: bool) -> str:
    """A human summary of a capabilities document."""
    lines = [
        f"schema version   {caps['schema_version']} (this build supports "
        f"{caps['max_supported_schema']})",
        f"graph backend    {caps.get('kg_backend') or 'none'}",
        f"auth             {caps['auth'].get('mode')}",
        f"permissions      {caps['permissions'].get('mode')}, "
        f"{caps['permissions'].get('rules', 0)} rule(s)",
        f"attestation      {caps['attestation']}",
        f"transcripts      {'on' if caps['transcripts'].get('enabled') else 'off'}",
    ]
    description = caps.get("hooks", {})
    by_event: dict[str, Any] = description.get("by_event", {})
    lines.append(f"hooks            {sum(len(v) for v in by_event.values())} on "
                 f"{len(by_event)} event(s)")
    if hooks and "config" in description:
        from attested_cortex.hooks.reporting import render_hooks

        lines.append(render_hooks(description))
    return "\n".join(lines)


def _remote(args: argparse.Namespace) -> dict[str, Any]:
    headers = {"X-Agent-Id": args.agent_id}
    if args.token:
        headers = {"Authorization": f"Bearer {args.token}"}
    if not args.server.startswith(("http://", "https://")):
        raise CortexError(f"--server must be an http(s) URL, not {args.server!r}")
    request = urllib.request.Request(  # noqa: S310 - scheme checked above
        f"{args.server.rstrip('/')}/v1/capabilities", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            result: dict[str, Any] = json.load(response)
            return result
    except urllib.error.HTTPError as exc:
        raise CortexError(f"{args.server} answered {exc.code}: {exc.read()[:300]!r}") from exc
    except OSError as exc:
        raise CortexError(f"cannot reach {args.server}: {exc}") from exc


async def _local(args: argparse.Namespace) -> dict[str, Any]:
    from attested_cortex.server.serving import open_services
    from attested_cortex.server.settings import load_settings
    from attested_cortex.service.introspection import capabilities

    settings = load_settings(args.config, {"database_url": args.database_url})
    if not settings.database_url:
        raise CortexError("give --server URL, or --database-url / --config to check locally")
    async with AsyncExitStack() as stack:
        services = await open_services(settings, stack)
        return await capabilities(services)
