"""``cortexctl audit verify``: check the whole signed_events chain of a database.

Exit 0 when every event links to its predecessor (and, with ``--keys``, every event of a
known agent carries a valid signature); exit 1 with the first bad sequence number when
not; exit 2 when the check could not run (database unreachable, unreadable keys).
Called by :mod:`attested_cortex.cli.main`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from attested_cortex.errors import CortexError


def register(subparsers: Any) -> None:
    """Add the ``audit`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "audit", help="verify the signed_events audit chain"
    )
    actions = parser.add_subparsers(dest="audit_action", metavar="ACTION", required=True)
    verify = actions.add_parser("verify", help="verify every event of the chain")
    verify.add_argument("--database-url", required=True, help="PostgreSQL URL")
    verify.add_argument(
        "--keys", type=Path, help="key root (identity dirs, keyring JSON) to check signatures"
    )
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.add_argument(
        "--timeout", type=float, default=10.0, help="seconds to wait for the database"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Verify the chain and print the report."""
    from attested_cortex.attest.auditing import ChainReport

    try:
        keyring = _load_keyring(args.keys)
        report: ChainReport = asyncio.run(
            _verify(args.database_url, keyring, wait_seconds=args.timeout)
        )
    except (CortexError, OSError) as exc:
        message = exc.message if isinstance(exc, CortexError) else str(exc)
        print(f"cortexctl audit verify: {message}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(dataclasses.asdict(report), indent=2))
    elif report.ok:
        print(f"ok: {report.events} events; head {report.head_hash or '(empty chain)'}"
              f"; signatures checked {report.signatures_checked}, unverified {report.unverified}")
    else:
        print(f"chain broken at sequence {report.first_bad_sequence}: {report.reason} "
              f"({report.events} events verified before it)")
    return 0 if report.ok else 1


def _load_keyring(keys: Path | None) -> Any:
    from attested_cortex.attest.loading import load_snapshot

    if keys is None:
        return None
    if not keys.is_dir():
        raise NotADirectoryError(f"--keys {keys} is not a directory")
    return load_snapshot(keys).keyring


async def _verify(database_url: str, keyring: Any, *, wait_seconds: float) -> Any:
    from attested_cortex.attest.auditing import verify_chain
    from attested_cortex.store.database import Database

    database = await Database.open(
        database_url, min_size=1, max_size=1, wait_seconds=wait_seconds
    )
    try:
        async with database.connection() as conn:
            return await verify_chain(conn, keyring=keyring)
    finally:
        await database.close()
