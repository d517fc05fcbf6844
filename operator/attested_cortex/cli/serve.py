"""``cortexctl serve``: run the memory server."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from attested_cortex.errors import CortexError, operator_message


def register(subparsers: Any) -> None:
    """Add the ``serve`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve", help="run the memory server (aiohttp)",
        description="Serve the HTTP API. Flags override the --config file.",
    )
    parser.add_argument("--database-url", default=os.environ.get("CORTEX_DATABASE_URL"),
                        help="PostgreSQL URL (default: $CORTEX_DATABASE_URL, then "
                        "database_url in --config)")
    parser.add_argument("--listen", action="append",
                        help="HOST:PORT to listen on (repeatable; default 127.0.0.1:8080)")
    parser.add_argument("--auth", choices=["dev", "tokens", "kubernetes"])
    parser.add_argument("--tokens-file", type=Path, help="token hash file for --auth tokens")
    parser.add_argument("--kubeconfig", type=Path,
                        help="--auth kubernetes outside a cluster: where the API server is")
    parser.add_argument("--graph-backend", choices=["Auto", "AGE", "CTE"])
    parser.add_argument("--hooks-file", type=Path, help="hook configuration file")
    parser.add_argument("--keys-dir", type=Path, help="directory of agent key Secrets")
    parser.add_argument("--embedder", metavar="minilm|static|onnx|none|client|URL",
                        help="hybrid recall's embedder: minilm (the embedded all-MiniLM-L6-v2, "
                        "the default), static (the embedded wordllama model, fast to write; "
                        "also called default), onnx (a model of your own: embedding.onnx in "
                        "--config), none (full-text recall only), client (vectors sent with "
                        "each request) or an OpenAI-compatible endpoint URL")
    parser.add_argument("--tls-cert-file", type=Path,
                        help="serve HTTPS with this PEM certificate (and chain); reloaded when "
                        "the file changes (with --tls-key-file)")
    parser.add_argument("--tls-key-file", type=Path, help="the certificate's PEM private key")
    parser.add_argument("--master-key-file", type=Path,
                        help="the cortex's master key (32 raw bytes or 64 hex characters); "
                        "the operator mounts its Secret instead (master_key.dir)")
    parser.add_argument("--master-key-passphrase-file", type=Path,
                        help="standalone: derive the master key from the passphrase in this "
                        "file with Argon2id (with --master-key-salt)")
    parser.add_argument("--master-key-salt", metavar="HEX32",
                        help="the passphrase's salt: 32 hex characters, fixed for the "
                        "installation")
    parser.add_argument("--config", type=Path, help="YAML settings file")
    parser.set_defaults(handler=run)


def _tls(args: argparse.Namespace) -> dict[str, Path] | None:
    """The ``tls`` section from the two flags (both or neither)."""
    if (args.tls_cert_file is None) != (args.tls_key_file is None):
        raise CortexError("--tls-cert-file and --tls-key-file go together")
    if args.tls_cert_file is None:
        return None
    return {"cert_file": args.tls_cert_file, "key_file": args.tls_key_file}


def _master_key(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``master_key`` section from the flags (a key file, or a passphrase and salt)."""
    if args.master_key_file is not None and args.master_key_passphrase_file is not None:
        raise CortexError("--master-key-file and --master-key-passphrase-file exclude "
                          "each other")
    if (args.master_key_salt is not None) != (args.master_key_passphrase_file is not None):
        raise CortexError("--master-key-passphrase-file and --master-key-salt go together")
    if args.master_key_file is not None:
        return {"file": args.master_key_file}
    if args.master_key_passphrase_file is not None:
        return {"passphrase_file": args.master_key_passphrase_file,
                "salt": args.master_key_salt}
    return None


def run(args: argparse.Namespace) -> int:
    """Load the settings and serve until interrupted."""
    from attested_cortex.server.logs import setup_logging
    from attested_cortex.server.serving import run_server
    from attested_cortex.server.settings import load_settings

    try:
        settings = load_settings(args.config, {
            "database_url": args.database_url, "listen": args.listen, "auth": args.auth,
            "tokens_file": args.tokens_file, "kubeconfig": args.kubeconfig,
            "graph_backend": args.graph_backend,
            "hooks_file": args.hooks_file, "keys_dir": args.keys_dir,
            "embedder": args.embedder, "tls": _tls(args),
            "master_key": _master_key(args),
        })
        if not settings.database_url:
            raise CortexError("--database-url is required (or database_url in --config)")
        setup_logging(settings.log_level)
        # asyncio's own event loop, not uvloop's: docs/adr/0075-the-write-path-on-uvloop.md
        # says what uvloop gained and why it was taken out (daemon hooks could not start).
        asyncio.run(run_server(settings))
    except CortexError as exc:
        print(f"cortexctl serve: {operator_message(exc)}", file=sys.stderr)
        return 1
    return 0
