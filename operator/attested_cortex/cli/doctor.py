"""``cortexctl doctor``: what is configured and live, asked of a running server or worked
out from a configuration exactly as ``serve`` would (schema, graph backend, hooks, rules,
where transcripts are kept and for how long, with their live counts and sweeper). An
``https://`` server is verified against ``--ca-file`` (ADR 0047), else the system's roots.
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

from attested_cortex.errors import CortexError, operator_message


def register(subparsers: Any) -> None:
    """Add the ``doctor`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "doctor", help="show what is configured and live",
        description="Ask a running server (--server) or check a configuration locally.",
    )
    parser.add_argument("--server", help="base URL of a running server, e.g. http://127.0.0.1:8080")
    parser.add_argument("--agent-id", default="dev:doctor", help="X-Agent-Id for dev auth")
    parser.add_argument("--token", help="bearer token for tokens auth")
    parser.add_argument("--ca-file", type=Path,
                        help="PEM CA bundle that verifies an https:// server (default: the "
                        "system's roots)")
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
        print(f"cortexctl doctor: {operator_message(exc)}", file=sys.stderr)
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
        *transcript_lines(caps.get("transcripts", {})),
    ]
    description = caps.get("hooks", {})
    by_event: dict[str, Any] = description.get("by_event", {})
    lines.append(f"hooks            {sum(len(v) for v in by_event.values())} on "
                 f"{len(by_event)} event(s)")
    if hooks and "config" in description:
        from attested_cortex.hooks.reporting import render_hooks

        lines.append(render_hooks(description))
    return "\n".join(lines)


def _days(days: object) -> str:
    return "forever" if days is None else f"{days} day{'' if days == 1 else 's'}"


def transcript_lines(state: dict[str, Any]) -> list[str]:
    """Where transcripts are kept and how long, what the database holds, what the sweeper
    did: the ``transcripts`` section of capabilities."""
    enabled = bool(state.get("enabled"))
    lines = [f"transcripts      {'on' if enabled else 'off'}"]
    if enabled:
        compression = state.get("compression") or {}
        lines[0] += (f": {compression.get('codec', 'zstd')} level {compression.get('level')}, "
                     f"at most {state.get('max_bytes')} bytes each")
        lines += [f"  {rule['namespace']:<22} kept {_days(rule.get('retention_days'))}"
                  for rule in state.get("namespaces", [])]
    if enabled or state.get("default_retention_days") is not None:
        lines.append(f"  {'retention':<22} {_days(state.get('default_retention_days'))} "
                     "cortex-wide; archived transcripts pruned after "
                     f"{_days(state.get('prune_after_days'))}")
    counts = state.get("counts")
    if counts and (enabled or any(counts.values())):
        lines.append(f"  {'counts':<22} {counts['stored']} stored, {counts['archived']} "
                     f"archived, {counts['pruned']} pruned; {counts['stored_bytes']} bytes at "
                     f"rest ({counts['raw_bytes']} raw)")
    sweeper = state.get("sweeper")
    if sweeper and (enabled or sweeper.get("running")):
        last = sweeper.get("last")
        done = (f"; last {last['at']}: {last['archived']} archived, {last['pruned']} pruned"
                if last else "; no sweep yet")
        lines.append(f"  {'sweeper':<22} "
                     f"{'running' if sweeper.get('running') else 'stopped'}, every "
                     f"{sweeper.get('interval_seconds'):g} s{done}")
    return lines


def _remote(args: argparse.Namespace) -> dict[str, Any]:
    from attested_cortex import pki

    headers = {"X-Agent-Id": args.agent_id}
    if args.token:
        headers = {"Authorization": f"Bearer {args.token}"}
    if not args.server.startswith(("http://", "https://")):
        raise CortexError(f"--server must be an http(s) URL, not {args.server!r}")
    request = urllib.request.Request(  # noqa: S310 - scheme checked above
        f"{args.server.rstrip('/')}/v1/capabilities", headers=headers)
    try:
        tls = pki.client_context(args.ca_file)
    except OSError as exc:
        raise CortexError(f"cannot read --ca-file: {exc}") from exc
    try:
        with urllib.request.urlopen(request, timeout=10,  # noqa: S310
                                    context=tls) as response:
            result: dict[str, Any] = json.load(response)
            return result
    except urllib.error.HTTPError as exc:
        raise CortexError(f"{args.server} answered {exc.code}: {exc.read()[:300]!r}") from exc
    except OSError as exc:
        raise CortexError(f"cannot reach {args.server}: {exc}") from exc


async def _local(args: argparse.Namespace) -> dict[str, Any]:
    from attested_cortex.server.assembling import open_services
    from attested_cortex.server.settings import load_settings
    from attested_cortex.service.resources.introspection import capabilities

    settings = load_settings(args.config, {"database_url": args.database_url})
    if not settings.database_url:
        raise CortexError("give --server URL, or --database-url / --config to check locally")
    async with AsyncExitStack() as stack:
        services = await open_services(settings, stack)
        return await capabilities(services)
