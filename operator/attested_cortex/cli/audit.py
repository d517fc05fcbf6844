"""``cortexctl audit verify``: check the whole signed_events chain of a database.

Exit 0 when every event links to its predecessor (and, with ``--keys``, every event of a
known agent carries a valid signature, and with ``--deep`` every memory, link and transcript
row matches its latest write record); exit 1 with the first bad sequence number or the
mismatches, by id, when not; exit 2 when the check could not run (database unreachable,
unreadable keys). Called by :mod:`attested_cortex.cli.main`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from attested_cortex.errors import CortexError, operator_message


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
    verify.add_argument("--deep", action="store_true",
                        help="also check every memory, link and transcript row against its "
                        "write record")
    verify.add_argument(
        "--timeout", type=float, default=10.0, help="seconds to wait for the database"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Verify the chain and print the report."""
    from attested_cortex.attest.auditing import ChainReport

    try:
        keyring = _load_keyring(args.keys)
        report: ChainReport
        report, swept = asyncio.run(
            _verify(args.database_url, keyring, wait_seconds=args.timeout, deep=args.deep)
        )
    except (CortexError, OSError) as exc:
        message = operator_message(exc) if isinstance(exc, CortexError) else str(exc)
        print(f"cortexctl audit verify: {message}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({**dataclasses.asdict(report),
                          **({"deep": swept} if swept is not None else {})}, indent=2))
    else:
        _print(report, swept)
    return 0 if report.ok and (swept is None or swept["ok"]) else 1


def _print(report: Any, swept: dict[str, Any] | None) -> None:
    if report.ok:
        print(f"ok: {report.events} events; head {report.head_hash or '(empty chain)'}"
              f"; signatures checked {report.signatures_checked}, unverified {report.unverified}")
    else:
        print(f"chain broken at sequence {report.first_bad_sequence}: {report.reason} "
              f"({report.events} events verified before it)")
    if swept is None:
        return
    print(f"deep: {swept['memories']} memories, {swept['links']} links, "
          f"{swept['transcripts']} transcripts, {swept['records']} write records, "
          f"{swept['agents']} usage counters; "
          f"{swept['mismatch_count']} mismatches")
    for m in swept["mismatches"]:
        fields = f" ({', '.join(m['fields'])})" if m["fields"] else ""
        at = f" [event {m['sequence']}]" if m["sequence"] is not None else ""
        print(f"  {m['kind']} {m['id']}: {m['problem']}{fields}{at}")
    if swept["truncated"]:
        print(f"  ... {swept['mismatch_count'] - len(swept['mismatches'])} more")


def _load_keyring(keys: Path | None) -> Any:
    from attested_cortex.attest.loading import load_snapshot

    if keys is None:
        return None
    if not keys.is_dir():
        raise NotADirectoryError(f"--keys {keys} is not a directory")
    return load_snapshot(keys).keyring


async def _verify(database_url: str, keyring: Any, *, wait_seconds: float,
                  deep: bool) -> tuple[Any, dict[str, Any] | None]:
    from attested_cortex.attest.auditing import verify_chain
    from attested_cortex.attest.sweeping import sweep
    from attested_cortex.store.database import Database

    # An operator's audit of a large chain may run long statements: an hour, not the
    # server's 30 s (it still never waits on a lock longer than the server does).
    database = await Database.open(
        database_url, min_size=1, max_size=1, wait_seconds=wait_seconds,
        statement_timeout_s=3600.0,
    )
    try:
        async with database.connection() as conn:
            report = await verify_chain(conn, keyring=keyring)
            swept = (await sweep(conn)).as_json() if deep else None
            return report, swept
    finally:
        await database.close()
