"""``cortexctl tokens generate``: a bearer token for ``--auth tokens`` and its file line.

Registered by ``attested_cortex.cli.main``. The token is printed once, on stdout, for the
agent's secret store; the line for the server's tokens file (hash, agent id, scopes, trust
tier) goes to stderr, or is appended to ``--tokens-file``. The server never sees or stores
the token.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from attested_cortex.errors import InvalidInputError
from attested_cortex.policy.scopes import ScopeSet
from attested_cortex.policy.tiers import CALLER_TIERS
from attested_cortex.server.auth import AGENT_ID
from attested_cortex.server.tokens import generate


def register(subparsers: Any) -> None:
    """Add the ``tokens`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "tokens", help="generate bearer tokens for --auth tokens")
    sub = parser.add_subparsers(dest="tokens_command", required=True)
    gen = sub.add_parser("generate", help="print a new token; its hash line goes to the file")
    gen.add_argument("--agent-id", required=True)
    gen.add_argument("--scope", action="append", default=[],
                     help="a scope such as memory.read:team/** (repeat; none: the defaults)")
    gen.add_argument("--trust-tier", choices=CALLER_TIERS, default=None,
                     help="the token's trust tier (ADR 0049; none: the server's default)")
    gen.add_argument("--tokens-file", type=Path, default=None,
                     help="append the hash line to this file instead of printing it")
    gen.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Generate one token."""
    if not AGENT_ID.fullmatch(args.agent_id):
        raise InvalidInputError("--agent-id is not a valid agent id", field="agent_id")
    scopes = ScopeSet.parse(args.scope)
    token, hashed = generate()
    line = f"{hashed} {args.agent_id}"
    if args.scope:
        line += " " + ",".join(str(s) for s in scopes.scopes)
    if args.trust_tier is not None:
        line += f" tier={args.trust_tier}"
    if args.tokens_file is not None:
        with args.tokens_file.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
    else:
        print(line, file=sys.stderr)
    print(token)
    return 0
