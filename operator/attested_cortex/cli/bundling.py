"""``cortexctl export`` and ``cortexctl import``: the logical backup path from a shell.

``export --database-url URL`` reads the database directly (with ``--keys`` for the public
keys the bundle carries and ``--signer`` for the agent whose private key signs the
manifest); ``export --server URL`` downloads ``GET /v1/export`` (a tar stream the server
signs with its audit signer) and unpacks it. ``--out DIR`` writes a directory, ``--to
s3://bucket/path`` a new bundle in an object store (``--retain N`` then prunes; the logical
backup CronJob runs exactly this). ``import`` verifies a bundle (``--bundle DIR`` or
``--from s3://...``) and imports it into an empty database as the migrating role. Exit 0
done, 1 bundle or target refused (the message names what and where; nothing was imported),
2 the command could not run. Thin over
:mod:`attested_cortex.bundles`; registered by :mod:`attested_cortex.cli.main`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import sys
import tarfile
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from attested_cortex.errors import CortexError, operator_message


def register(subparsers: Any, name: str) -> None:
    """Add ``export`` or ``import``."""
    if name == "export":
        parser = subparsers.add_parser("export", help="write a bundle of a whole cortex")
        env_url = os.environ.get("CORTEX_DATABASE_URL")
        source = parser.add_mutually_exclusive_group(required=not env_url)
        source.add_argument("--server", help="base URL of a running cortex (GET /v1/export)")
        source.add_argument("--database-url", default=env_url, help="PostgreSQL URL of the "
                            "cortex's database (default: $CORTEX_DATABASE_URL)")
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--out", type=Path, help="new or empty directory")
        target.add_argument("--to", metavar="s3://BUCKET/PATH",
                            help="an S3-compatible object store: a new bundle in a folder "
                            "named by the export's UTC time under PATH (credentials from "
                            "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)")
        parser.add_argument("--retain", type=int, metavar="N",
                            help="with --to: then delete all but the newest N bundles")
        _endpoint_argument(parser)
        parser.add_argument("--keys", type=Path, help="key root: the public keys to carry and "
                            "the signer's private key (with --database-url)")
        parser.add_argument("--signer", help="agent id whose private key in --keys signs "
                            "the manifest (with --database-url)")
        parser.add_argument("--token-file", type=Path, help="bearer token file (--server); "
                            "else $CORTEX_TOKEN")
        parser.add_argument("--agent-id", default=os.environ.get("CORTEX_AGENT_ID"),
                            help="X-Agent-Id for a server with --auth dev")
        parser.add_argument("--scopes", default=None, help=argparse.SUPPRESS)
        parser.set_defaults(handler=run_export)
    else:
        parser = subparsers.add_parser("import", help="verify a bundle; import it into an "
                                       "empty cortex, all or nothing")
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--bundle", type=Path, help="bundle directory")
        source.add_argument("--from", dest="from_", metavar="s3://BUCKET/PATH",
                            help="a bundle in an S3-compatible object store: PATH names the "
                            "bundle's folder, or the folder of a scheduled backup (its newest "
                            "complete bundle)")
        _endpoint_argument(parser)
        env_url = os.environ.get("CORTEX_DATABASE_URL")
        parser.add_argument("--database-url", required=not env_url, default=env_url,
                            help="PostgreSQL URL of the empty target, as the migrating role "
                            "(default: $CORTEX_DATABASE_URL, as the operator's import Job "
                            "gives it)")
        parser.add_argument("--keys", type=Path, help="trusted key root: verify the manifest "
                            "and the chain with these keys instead of the bundle's own")
        parser.add_argument("--require-signature", action="store_true",
                            help="refuse a bundle whose manifest is not signed")
        parser.add_argument("--signer", metavar="KEY_ID|PUBLIC_PEM|IDENTITY_DIR",
                            help="the only acceptable manifest signer (the source cortex's "
                            "audit signer): its key id, or a file or identity directory with "
                            "its public.pem; a bundle signed by any other key, or unsigned, "
                            "is refused")
        parser.add_argument("--already-ok", action="store_true",
                            help="a target that already holds exactly this bundle (its chain "
                            "head and event count) is reported as imported, not refused")
        parser.add_argument("--summary", type=Path,
                            help="also write a one-line JSON report to this file (the "
                            "operator's import Job: its termination message)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    if name == "import":
        parser.set_defaults(handler=run_import)


def _endpoint_argument(parser: Any) -> None:
    parser.add_argument("--endpoint", default=None, help="the object store's http(s) URL "
                        "(else $AWS_ENDPOINT_URL)")


def run_export(args: argparse.Namespace) -> int:
    """Export; print what was written."""
    try:
        if args.to:
            report, where = _export_to_store(args)
        else:
            report, where = _export_to_directory(args), str(args.out)
    except (CortexError, OSError, ValueError) as exc:
        return _failed("export", exc)
    print(json.dumps(report, indent=2) if args.json else
          f"exported {report['chain_events']} events, head {report['chain_head']}; "
          f"signed by {report['signed_by'] or '(unsigned)'} -> {where}")
    if report.get("omitted"):
        print(f"cortexctl export: INCOMPLETE: {_omitted_text(report['omitted'])}",
              file=sys.stderr)
    return 0


def _omitted_text(omitted: dict[str, list[str]]) -> str:
    """What a bundle did not carry, for a person (ADR 0085)."""
    return ("the bundle does not carry " + "; ".join(
        f"{table} ({', '.join(columns)})" for table, columns in sorted(omitted.items()))
        + ": this build does not know them; a restore from it will not verify")


def _export_to_directory(args: argparse.Namespace) -> dict[str, Any]:
    out: Path = args.out
    if args.retain is not None:
        raise ValueError("--retain needs --to")
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"--out {out} is not empty")
    out.mkdir(parents=True, exist_ok=True)
    if args.server:
        return _download(args, out)
    return dataclasses.asdict(asyncio.run(_export(args, out)))


def _export_to_store(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """A new bundle under ``--to`` (then retention); the report names it and what went."""
    from datetime import UTC, datetime

    from attested_cortex.bundles import objectstores

    if args.server:
        raise ValueError("--to exports with --database-url (a server's export: --out)")
    if args.retain is not None and args.retain < 1:
        raise ValueError("--retain must be at least 1")
    store = _bundle_store(args, args.to)
    bundle = objectstores.bundle_name(datetime.now(UTC))
    report = dataclasses.asdict(asyncio.run(_export(args, store.sink(bundle))))
    report["bundle"] = store.location.url() + "/" + bundle
    if args.retain is not None:
        report["pruned"] = store.prune(args.retain)
    return report, report["bundle"]


def _bundle_store(args: argparse.Namespace, url: str) -> Any:
    from attested_cortex.bundles import objectstores

    settings = objectstores.StoreSettings.from_env(os.environ, endpoint=args.endpoint)
    return objectstores.BundleStore(settings, objectstores.parse_location(url))


def run_import(args: argparse.Namespace) -> int:
    """Verify and import; print what was imported, or what was refused and where."""
    from attested_cortex.attest.keyfiles import key_id
    from attested_cortex.bundles import BundleError, import_bundle

    source: str | None = None
    try:
        trusted = _keys(args.keys).keyring if args.keys else None
        signer = key_id(args.signer) if args.signer else None
        with _fetched(args) as (bundle, source):
            report = asyncio.run(import_bundle(args.database_url, bundle, trusted=trusted,
                                               require_signed=args.require_signature,
                                               already_ok=args.already_ok, signer=signer))
    except BundleError as exc:
        _summary(args, {"ok": False, "refused": True, "source": source, "code": exc.what,
                        "where": exc.where, "message": exc.message[:1000]})
        print(f"cortexctl import: refused, nothing imported: {exc.message}", file=sys.stderr)
        return 1
    except (CortexError, OSError, ValueError) as exc:
        message = operator_message(exc) if isinstance(exc, CortexError) else str(exc)
        _summary(args, {"ok": False, "source": source, "error": message[:1000]})
        return _failed("import", exc)
    _summary(args, {"ok": True, "source": source, "already": report.already,
                    "memories": report.rows.get("memories", 0),
                    "links": report.rows.get("links", 0),
                    "transcripts": report.rows.get("transcripts", 0),
                    "events": report.chain_events, "head_hash": report.chain_head,
                    "signatures_checked": report.signatures_checked,
                    "signed_by": report.signed_by, "complete": report.complete,
                    **({"omitted": report.omitted} if report.omitted else {})})
    if args.json:
        print(json.dumps(dataclasses.asdict(report), indent=2))
    elif report.already:
        print(f"already imported: the target's chain ends at the bundle's head "
              f"{report.chain_head} ({report.chain_events} events); nothing copied")
    else:
        print(f"imported {report.rows.get('memories', 0)} memories, "
              f"{report.rows.get('links', 0)} links, {report.chain_events} events (head "
              f"{report.chain_head}); {report.signatures_checked} signatures checked with "
              f"the {report.keys}'s keys; signed by {report.signed_by or '(unsigned)'}")
    if report.omitted:
        print(f"cortexctl import: INCOMPLETE: {_omitted_text(report.omitted)}",
              file=sys.stderr)
    return 0


def _summary(args: argparse.Namespace, data: dict[str, Any]) -> None:
    if args.summary is not None:
        args.summary.write_text(json.dumps(data, separators=(",", ":")) + "\n")


@contextlib.contextmanager
def _fetched(args: argparse.Namespace) -> Iterator[tuple[Path, str]]:
    """The bundle directory to import and where it came from: ``--bundle``, or ``--from``
    downloaded into a private temporary directory (removed after; the import verifies every
    byte of it), named by its folder (``latest`` resolved)."""
    if args.from_ is None:
        yield args.bundle, str(args.bundle)
        return
    from attested_cortex.bundles import objectstores

    location = objectstores.parse_location(args.from_)
    parent, _, last = location.prefix.rpartition("/")
    with tempfile.TemporaryDirectory(prefix="cortex-bundle-") as tmp:
        named = _bundle_store(args, f"s3://{location.bucket}/{parent}") if last else None
        if named is not None and last in named.bundles():
            named.download(last, Path(tmp))
            yield Path(tmp), location.url()
        else:
            store = _bundle_store(args, args.from_)
            chosen = store.download(None, Path(tmp))
            yield Path(tmp), f"{store.location.url()}/{chosen}"


def _failed(command: str, exc: Exception) -> int:
    message = operator_message(exc) if isinstance(exc, CortexError) else str(exc)
    print(f"cortexctl {command}: {message}", file=sys.stderr)
    return 2


def _keys(root: Path) -> Any:
    from attested_cortex.attest.loading import load_snapshot

    if not root.is_dir():
        raise NotADirectoryError(f"--keys {root} is not a directory")
    return load_snapshot(root)


async def _export(args: argparse.Namespace, target: Any) -> Any:
    """Export ``--database-url`` to a directory (a Path) or a sink (an object store's)."""
    from attested_cortex.attest.keyring import EMPTY_KEYRING
    from attested_cortex.bundles import DirectorySink, export_bundle
    from attested_cortex.store.dumping import owner_connection
    from attested_cortex.types import AgentId

    snapshot = _keys(args.keys) if args.keys else None
    signer = None
    if args.signer:
        signer = snapshot.signing_keys.get(AgentId(args.signer)) if snapshot else None
        if signer is None:
            raise ValueError(f"--signer {args.signer} has no private key under --keys")
    async with owner_connection(args.database_url) as conn:
        sink = DirectorySink(target) if isinstance(target, Path) else target
        return await export_bundle(conn, sink, signer=signer,
                                   keyring=snapshot.keyring if snapshot else EMPTY_KEYRING)


def _download(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from attested_cortex.cli.mcp import CredentialsError, credentials

    try:
        headers = credentials(args, dict(os.environ))
    except CredentialsError as exc:
        raise ValueError(str(exc)) from exc
    if not args.server.startswith(("http://", "https://")):
        raise ValueError("--server must be an http:// or https:// URL")
    url = args.server.rstrip("/") + "/v1/export"
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 (checked above)
    with (urllib.request.urlopen(request, timeout=60) as answer,  # noqa: S310
          tarfile.open(fileobj=answer, mode="r|") as archive):
        archive.extractall(out, filter="data")
    manifest = json.loads((out / "manifest.json").read_bytes())
    return {"rows": manifest["rows"], "chain_events": manifest["chain"]["events"],
            "chain_head": manifest["chain"]["head"], "signed_by": manifest.get("signed_by"),
            "omitted": manifest.get("omitted") or {}}
