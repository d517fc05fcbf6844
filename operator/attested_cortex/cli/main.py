"""``cortexctl``: the command-line entry point.

Each command group lives in its own module of this package and exposes
``register(subparsers)``; this module only assembles them, so adding a command never
touches another command's module.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

#: The command modules, in the order ``cortexctl --help`` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "serve",
    "migrate",
    "operator",
    "crds",
    "identity",
    "audit",
    "doctor",
    "hookd",
)


def build_parser() -> argparse.ArgumentParser:
    """Build the full argument parser from every command module."""
    parser = argparse.ArgumentParser(
        prog="cortexctl",
        description="attested-cortex: trustworthy memory for AI agents.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"attested_cortex.cli.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen command; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = args.handler
    try:
        code: int = handler(args)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
