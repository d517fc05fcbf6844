"""``cortexctl audit verify``: check the whole signed_events chain of a database (the
``witness`` and ``push-checkpoint`` actions live in :mod:`.witnessing`).

Exit 0 when every event links to its predecessor (and, with ``--keys``, every event of a
known agent carries a valid signature, and with ``--deep`` every memory, link and transcript
row matches its latest write record); exit 1 with the first bad sequence number or the
mismatches, by id, when not; exit 2 when the check could not run (database unreachable,
unreadable keys). Called by :mod:`attested_cortex.cli.main`.

``--summary FILE`` also writes a one-line JSON summary there (the counts, the last event
kept and the first mismatch, at most :data:`SUMMARY_BYTES`): the restore verification Job
(``builders/verification.py``) points it at its termination message, which the operator
reads into ``DataVerified`` and ``status.restore``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any, Final

from attested_cortex.errors import CortexError, operator_message

#: Kubernetes keeps at most 4096 bytes of a termination message.
SUMMARY_BYTES: Final = 4000


def register(subparsers: Any) -> None:
    """Add the ``audit`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "audit", help="verify the signed_events audit chain; witness its checkpoints"
    )
    actions = parser.add_subparsers(dest="audit_action", metavar="ACTION", required=True)
    verify = actions.add_parser("verify", help="verify every event of the chain")
    env_url = os.environ.get("CORTEX_DATABASE_URL")
    verify.add_argument("--database-url", required=not env_url, default=env_url,
                        help="PostgreSQL URL (default: $CORTEX_DATABASE_URL)")
    verify.add_argument(
        "--keys", type=Path, help="key root (identity dirs, keyring JSON) to check signatures"
    )
    key = verify.add_mutually_exclusive_group()
    key.add_argument("--master-key-file", type=Path,
                     help="the cortex's master key, to check the HMAC-keyed chain")
    key.add_argument("--master-key-dir", type=Path,
                     help="the cortex's master key ring (its mounted Secret), likewise")
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.add_argument("--deep", action="store_true",
                        help="also check every memory, link and transcript row against its "
                        "write record")
    verify.add_argument(
        "--timeout", type=float, default=10.0, help="seconds to wait for the database"
    )
    verify.add_argument("--summary", type=Path,
                        help="also write a one-line JSON summary to this file")
    verify.add_argument("--against-checkpoint", type=Path, metavar="FILE",
                        help="a checkpoint note held elsewhere (a witness's state, a saved "
                        "GET /v1/audit/checkpoint): the chain must extend it")
    verify.add_argument("--log-key", default=None, help="with --against-checkpoint: the "
                        "log's verifier key its signature must verify with")
    parser.set_defaults(handler=run)
    from attested_cortex.cli import witnessing

    witnessing.register(actions)


def run(args: argparse.Namespace) -> int:
    """Verify the chain and print the report."""
    from attested_cortex.attest.auditing import ChainReport

    try:
        keyring = _load_keyring(args.keys)
        master = _load_master(args.master_key_file, args.master_key_dir)
        held = _held_checkpoint(args.against_checkpoint, args.log_key)
        report: ChainReport
        roots: dict[int, bytes] = {}
        report, swept, reached = asyncio.run(
            _verify(args.database_url, keyring, master, wait_seconds=args.timeout,
                    deep=args.deep, held=held, roots=roots)
        )
    except (CortexError, OSError) as exc:
        message = operator_message(exc) if isinstance(exc, CortexError) else str(exc)
        print(f"cortexctl audit verify: {message}", file=sys.stderr)
        if args.summary is not None:
            _write_summary(args.summary, {"ok": False, "error": message[:1000]})
        return 2
    if args.summary is not None:
        _write_summary(args.summary, summary(dataclasses.asdict(report), swept,
                                             last_event_at=reached))
    if held is not None:
        from attested_cortex.attest.witnessing import against

        refusal = against(held, report.events, roots.get(held.size))
        if refusal is not None:
            print(f"refused against {args.against_checkpoint}: {refusal.message}",
                  file=sys.stderr)
            report = dataclasses.replace(
                report, ok=False, reason=report.reason or refusal.kind,
                first_bad_sequence=report.first_bad_sequence or report.events + 1)
    if args.json:
        print(json.dumps({**dataclasses.asdict(report),
                          **({"deep": swept} if swept is not None else {})}, indent=2))
    else:
        _print(report, swept)
    return 0 if report.ok and (swept is None or swept["ok"]) else 1


def _first_mismatch(swept: dict[str, Any] | None) -> str | None:
    if swept and swept.get("incomplete"):
        return ("incomplete_restore: the bundle this database was restored from did not "
                "carry " + "; ".join(f"{t} ({', '.join(c)})"
                                     for t, c in sorted(swept["incomplete"].items())))
    if not swept or not swept["mismatches"]:
        return None
    m = swept["mismatches"][0]
    fields = f" ({', '.join(m['fields'])})" if m["fields"] else ""
    at = f" [event {m['sequence']}]" if m["sequence"] is not None else ""
    return f"{m['kind']} {m['id']}: {m['problem']}{fields}{at}"


def summary(chain: dict[str, Any], swept: dict[str, Any] | None, *,
            last_event_at: str | None = None) -> dict[str, Any]:
    """The counts, the last event kept (and when it was written) and the first problem, as
    one small JSON object."""
    ok = bool(chain["ok"]) and (swept is None or bool(swept["ok"]))
    out: dict[str, Any] = {
        "ok": ok, "events": chain["events"], "head_hash": chain["head_hash"],
        "last_event": chain["events"] if chain["ok"] else None,
        "signatures_checked": chain["signatures_checked"], "unverified": chain["unverified"]}
    if last_event_at is not None and chain["ok"]:
        out["last_event_at"] = last_event_at
    keyed = chain.get("keyed") or {}
    if keyed.get("checked"):
        out["macs_checked"] = keyed["macs_checked"]
    if not chain["ok"]:
        out["first_mismatch"] = (f"event {chain['first_bad_sequence']}: {chain['reason']}")
        if keyed.get("keyed_from") is not None and keyed.get("macs_checked") == 0:
            # Not one MAC verifies: far likelier another key than a forgery of every event.
            out["first_mismatch"] += (" (no MAC verifies: is the master key Secret the one "
                                      "the source cortex wrote with? docs/keys.md)")
    if swept is not None:
        out.update({k: swept[k] for k in ("memories", "links", "transcripts",
                                          "mismatch_count")})
        out.setdefault("first_mismatch", _first_mismatch(swept))
    return out


def _write_summary(path: Path, data: dict[str, Any]) -> None:
    text = json.dumps(data, separators=(",", ":"))
    if len(text.encode()) > SUMMARY_BYTES and data.get("first_mismatch"):
        data = {**data, "first_mismatch": str(data["first_mismatch"])[:500]}
        text = json.dumps(data, separators=(",", ":"))
    path.write_text(text + "\n")


def _print(report: Any, swept: dict[str, Any] | None) -> None:
    keyed = report.keyed
    if report.ok:
        print(f"ok: {report.events} events; head {report.head_hash or '(empty chain)'}"
              f"; signatures checked {report.signatures_checked}, unverified {report.unverified}")
    elif keyed["checked"] and not keyed["ok"] and report.events:
        print(f"keyed chain broken at sequence {report.first_bad_sequence}: {report.reason} "
              f"(the hash chain of {report.events} events holds)")
    else:
        print(f"chain broken at sequence {report.first_bad_sequence}: {report.reason} "
              f"({report.events} events verified before it)")
    _print_keyed(keyed)
    if swept is None:
        return
    print(f"deep: {swept['memories']} memories, {swept['links']} links, "
          f"{swept['transcripts']} transcripts, {swept['records']} write records, "
          f"{swept['agents']} usage counters; "
          f"{swept['mismatch_count']} mismatches")
    if swept.get("incomplete"):
        print(f"  {_first_mismatch(swept)}")
    for m in swept["mismatches"]:
        fields = f" ({', '.join(m['fields'])})" if m["fields"] else ""
        at = f" [event {m['sequence']}]" if m["sequence"] is not None else ""
        print(f"  {m['kind']} {m['id']}: {m['problem']}{fields}{at}")
    if swept["truncated"]:
        print(f"  ... {swept['mismatch_count'] - len(swept['mismatches'])} more")


def _print_keyed(keyed: dict[str, Any]) -> None:
    if not keyed["checked"]:
        print(f"keyed: not checked: {keyed['reason']}")
        return
    print(f"keyed: {keyed['macs_checked']} MACs checked from event {keyed['keyed_from']} "
          f"(key versions {keyed['key_versions']}); {keyed['unkeyed_before']} events before "
          f"the key; {keyed['fault_count']} faults")
    for fault in keyed["faults"]:
        print(f"  event {fault['sequence']}: {fault['problem']}")
    if keyed["truncated"]:
        print(f"  ... {keyed['fault_count'] - len(keyed['faults'])} more")


def _load_master(file: Path | None, directory: Path | None) -> Any:
    from attested_cortex.attest.masterkeys import load_key_file, load_ring_dir

    if file is not None:
        return load_key_file(file)
    return None if directory is None else load_ring_dir(directory)


def _load_keyring(keys: Path | None) -> Any:
    from attested_cortex.attest.loading import load_snapshot

    if keys is None:
        return None
    if not keys.is_dir():
        raise NotADirectoryError(f"--keys {keys} is not a directory")
    return load_snapshot(keys).keyring


def _held_checkpoint(path: Path | None, log_key: str | None) -> Any:
    """The checkpoint of ``--against-checkpoint`` (its signature checked with
    ``--log-key`` when given; else only read: its root is what the events must have)."""
    from attested_cortex.attest import notes

    if path is None:
        return None
    text = path.read_text(encoding="utf-8")
    try:
        if log_key is not None:
            return notes.open_checkpoint(text, notes.Verifier.parse(log_key))
        return notes.Checkpoint.parse(notes.split(text)[0])
    except notes.NoteError as exc:
        raise OSError(f"--against-checkpoint {path}: {exc}") from exc


async def _verify(database_url: str, keyring: Any, master: Any, *, wait_seconds: float,
                  deep: bool, held: Any = None, roots: dict[int, bytes] | None = None,
                  ) -> tuple[Any, dict[str, Any] | None, str | None]:
    from attested_cortex.attest.auditing import verify_chain
    from attested_cortex.attest.sweeping import sweep
    from attested_cortex.bundles.importing import with_completeness
    from attested_cortex.store import checkpoints, events
    from attested_cortex.store.database import Database

    # An operator's audit of a large chain may run long statements: an hour, not the
    # server's 30 s (it still never waits on a lock longer than the server does).
    database = await Database.open(
        database_url, min_size=1, max_size=1, wait_seconds=wait_seconds,
        statement_timeout_s=3600.0,
    )
    try:
        async with database.connection() as conn:
            distrusted: set[int] = set()
            # The cortex's own checkpoints and the one held elsewhere: the events must have
            # each root (recomputed from them; ADR 0099).
            expected = await checkpoints.roots(conn)
            if held is not None:
                expected[held.size] = held.root
            report = await verify_chain(conn, keyring=keyring, master=master,
                                        distrusted=distrusted, checkpoints=expected,
                                        roots=roots)
            swept = await with_completeness(conn, (await sweep(conn, distrusted)).as_json()) \
                if deep else None
            # the point in time the chain reaches (a restore's reach, status.restore)
            at = await events.written_at(conn, report.events) if report.ok else None
            return report, swept, at.isoformat() if at is not None else None
    finally:
        await database.close()
