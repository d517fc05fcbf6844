"""``cortexctl operator``: not implemented yet."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``operator`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "operator", help="run the Kubernetes operator (not in this build yet)"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Explain that the command is missing."""
    print("cortexctl operator: not implemented yet")
    return 2
