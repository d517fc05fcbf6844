"""The newest schema version this build ships, read from the migration file names.

The controller may not import the storage layer (import-linter), so it reads the shipped
``store/migrations/NNNN_*.sql`` names as package data; a test checks the answer equals
``attested_cortex.store.schema.MAX_SUPPORTED_SCHEMA``.
"""

from __future__ import annotations

import re
from importlib import resources

_NAME = re.compile(r"([0-9]{4})_[a-z0-9_]+\.sql")


def newest_schema_version() -> int:
    """The highest NNNN among the shipped migration files."""
    folder = resources.files("attested_cortex") / "store" / "migrations"
    versions = [int(m.group(1)) for entry in folder.iterdir()
                if (m := _NAME.fullmatch(entry.name))]
    return max(versions, default=0)
