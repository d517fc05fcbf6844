"""``cortexctl identity``: Ed25519 agent identities outside Kubernetes.

``generate`` writes an identity directory in the format the operator's key Secrets hold
(:mod:`attested_cortex.attest.keyfiles`; private key 0600, directory 0700); ``show`` prints
its public facts; ``export-pub`` prints the public key as a keyring document (JSON, what a
cortex's keyring directory accepts) or as PEM. No subcommand ever prints private material.
Called by :mod:`attested_cortex.cli.main`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from attested_cortex.errors import CortexError

DEFAULT_DIR = Path("~/.config/attested-cortex/identity")


def register(subparsers: Any) -> None:
    """Add the ``identity`` command and its subcommands."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "identity", help="Ed25519 agent identities (generate, show, export-pub)"
    )
    actions = parser.add_subparsers(dest="identity_action", metavar="ACTION", required=True)
    generate = actions.add_parser("generate", help="create a new key pair in a directory")
    generate.add_argument("--agent-id", required=True, help="the agent id the key belongs to")
    generate.add_argument("--out", type=Path, default=DEFAULT_DIR, help="identity directory")
    show = actions.add_parser("show", help="print the public facts of an identity")
    show.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="identity directory")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    export = actions.add_parser("export-pub", help="print the public key for a keyring")
    export.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="identity directory")
    export.add_argument("--format", choices=("json", "pem"), default="json")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run one identity action; exit 1 with a message on stderr when it cannot."""
    action = {"generate": _generate, "show": _show, "export-pub": _export}[args.identity_action]
    try:
        action(args)
    except (CortexError, OSError) as exc:
        message = exc.message if isinstance(exc, CortexError) else str(exc)
        print(f"cortexctl identity {args.identity_action}: {message}", file=sys.stderr)
        return 1
    return 0


def _generate(args: argparse.Namespace) -> None:
    from attested_cortex.attest import keyfiles
    from attested_cortex.attest.keys import generate_key
    from attested_cortex.types import AgentId

    if not args.agent_id.strip():
        raise _invalid("--agent-id must not be empty")
    directory = args.out.expanduser()
    key = generate_key(AgentId(args.agent_id.strip()))
    keyfiles.write_identity(directory, key)
    _print_public(directory, as_json=False)


def _show(args: argparse.Namespace) -> None:
    _print_public(args.dir.expanduser(), as_json=args.json)


def _export(args: argparse.Namespace) -> None:
    from attested_cortex.attest import keyfiles
    from attested_cortex.attest.keyring import render_keyring_file
    from attested_cortex.attest.keys import public_pem

    directory = args.dir.expanduser()
    if args.format == "pem":
        sys.stdout.write(public_pem(keyfiles.read_public(directory).public_key))
        return
    print(json.dumps(render_keyring_file(keyfiles.read_revisions(directory)), indent=2))


def _print_public(directory: Path, *, as_json: bool) -> None:
    from attested_cortex.attest import keyfiles

    public = keyfiles.read_public(directory)
    facts = {
        "agent_id": public.agent_id,
        "fingerprint": public.fingerprint,
        "public_key": public.public_b64,
        "directory": str(directory),
        "private_key": "present" if keyfiles.has_private_key(directory) else "absent",
    }
    if as_json:
        print(json.dumps(facts, indent=2))
        return
    for name, value in facts.items():
        print(f"{name}: {value}")


def _invalid(message: str) -> CortexError:
    from attested_cortex.errors import InvalidInputError

    return InvalidInputError(message)
