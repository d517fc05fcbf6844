"""``cortexctl hookd``: not implemented yet."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``hookd`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser("hookd", help="(not implemented yet)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Explain that the command is missing."""
    print("cortexctl hookd: not implemented yet")
    return 2
