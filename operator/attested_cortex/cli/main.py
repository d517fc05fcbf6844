"""``cortexctl``: the command-line entry point.

Each command group lives in its own module of this package and exposes
``register(subparsers)``; this module only assembles them, so adding a command never
touches another command's module. Only the chosen command's module is imported: the
``hookd`` sidecar and ``serve`` never pay for kopf, kubernetes or the CRD models.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

#: The commands (module name = command name), in the order ``cortexctl --help`` lists them.
COMMANDS: dict[str, str] = {
    "serve": "run the memory server (aiohttp)",
    "migrate": "apply schema migrations (idempotent)",
    "operator": "run the Kubernetes operator (kopf)",
    "crds": "print the custom resource definitions as YAML",
    "identity": "Ed25519 agent identities outside Kubernetes",
    "tokens": "bearer tokens for --auth tokens",
    "audit": "verify the signed_events chain; witness its checkpoints",
    "doctor": "show what is configured and live",
    "hookd": "serve a stdio hook program on a socket (sidecar entry point)",
    "mcp": "stdio MCP server forwarding to a running cortex",
    "export": "write a digested, signed bundle of a whole cortex",
    "import": "verify a bundle and import it into an empty cortex, all or nothing",
}
#: Commands whose module is not named like them ("import" is a Python keyword).
_MODULES: dict[str, str] = {"export": "bundling", "import": "bundling"}


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; only ``chosen`` (all when None) registers its full arguments."""
    parser = argparse.ArgumentParser(
        prog="cortexctl",
        description="attested-cortex: trustworthy memory for AI agents.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, summary in COMMANDS.items():
        if chosen is None or name == chosen:
            if name in _MODULES:
                importlib.import_module(f"attested_cortex.cli.{_MODULES[name]}").register(
                    subparsers, name)
            else:
                importlib.import_module(f"attested_cortex.cli.{name}").register(subparsers)
        else:
            subparsers.add_parser(name, help=summary)
    return parser


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command word of ``argv`` (the first argument that is not an option)."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen command; returns the process exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(chosen_command(words) or "")
    args = parser.parse_args(words)
    handler = args.handler
    try:
        code: int = handler(args)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
