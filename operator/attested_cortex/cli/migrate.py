"""``cortexctl migrate``: bring a database to this build's schema (idempotent)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from attested_cortex.errors import CortexError, operator_message


def register(subparsers: Any) -> None:
    """Add the ``migrate`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "migrate", help="apply schema migrations (idempotent)",
    )
    env_url = os.environ.get("CORTEX_DATABASE_URL")
    parser.add_argument("--database-url", required=not env_url, default=env_url,
                        help="PostgreSQL URL (default: $CORTEX_DATABASE_URL)")
    parser.add_argument("--target", type=int, help="stop at this schema version")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    parser.add_argument("--app-role", help="grant this role what the server needs "
                        "(SELECT/INSERT/UPDATE on memories and links, append-only audit)")
    parser.add_argument("--wait-seconds", type=float, default=0.0,
                        help="wait up to this long for the database to accept a connection "
                             "first (a database still starting); default: do not wait")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the plan or apply it; a non-zero exit with a clear message on refusal."""
    from attested_cortex.store import migrating

    try:
        if args.dry_run:
            plan = asyncio.run(migrating.planned(args.database_url, target=args.target))
            print(f"schema version {plan.current}; target {plan.target}")
            for m in plan.pending:
                print(f"would apply {m.version:04d}_{m.name}")
            if not plan.pending:
                print("nothing to apply")
            return 0
        if args.wait_seconds > 0:
            asyncio.run(migrating.reachable_within(args.database_url, args.wait_seconds))
        report = asyncio.run(migrating.migrate(args.database_url, target=args.target,
                                               app_role=args.app_role))
    except CortexError as exc:
        print(f"cortexctl migrate: {operator_message(exc)}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"cortexctl migrate: {exc}", file=sys.stderr)
        return 1
    for name in report.applied:
        print(f"applied {name}")
    print(f"schema version {report.before} -> {report.after}"
          + ("; graph ready" if report.graph else "")
          + ("; vectors ready" if report.vectors else "; no pgvector: full-text recall only"))
    return 0
