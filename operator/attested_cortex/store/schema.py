"""The shipped migrations and the schema plan: pure functions over versions and checksums.

:mod:`.migrating` feeds these functions what the database says and applies the plan;
``cortexctl migrate --dry-run`` prints it. Keeping the decision pure lets every refusal
(checksum drift, a database newer than this build) be tested without a server.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

from attested_cortex.errors import (
    InvalidInputError,
    MigrationChecksumError,
    MigrationRecordError,
    SchemaTooNewError,
)

_NAME = re.compile(r"([0-9]{4})_([a-z0-9_]+)\.sql")


@dataclass(frozen=True)
class Migration:
    """One shipped migration file."""

    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        """SHA-256 of the file text: an applied migration must never change."""
        return hashlib.sha256(self.sql.encode()).hexdigest()


@dataclass(frozen=True)
class Plan:
    """What a migrate run will do: the current version and the migrations to apply."""

    current: int
    target: int
    pending: tuple[Migration, ...]


def shipped_migrations() -> tuple[Migration, ...]:
    """Every migration file in the package, ordered by version."""
    found: list[Migration] = []
    for entry in resources.files("attested_cortex.store.migrations").iterdir():
        match = _NAME.fullmatch(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    return tuple(found)


MIGRATIONS: tuple[Migration, ...] = shipped_migrations()
#: The newest schema this build understands; a newer database is refused.
MAX_SUPPORTED_SCHEMA: int = MIGRATIONS[-1].version if MIGRATIONS else 0


def check_applied(applied: dict[int, str], shipped: tuple[Migration, ...] = MIGRATIONS) -> int:
    """Validate what the database recorded; return its current version.

    Raises :class:`SchemaTooNewError` when the database holds a version this build does
    not ship, :class:`MigrationChecksumError` when an applied file has since changed.
    """
    by_version = {m.version: m for m in shipped}
    newest = max(applied, default=0)
    if newest > MAX_SUPPORTED_SCHEMA:
        raise SchemaTooNewError(
            f"the database is at schema version {newest}, newer than this build supports "
            f"({MAX_SUPPORTED_SCHEMA}); upgrade attested-cortex before using this database",
            database_version=newest,
            max_supported=MAX_SUPPORTED_SCHEMA,
        )
    _check_recorded(applied, by_version, newest)
    for version, checksum in sorted(applied.items()):
        if by_version[version].checksum != checksum:
            raise MigrationChecksumError(
                f"migration {version:04d}_{by_version[version].name} was changed after it was "
                "applied (checksum mismatch); restore the original file or restore the database",
                version=version,
            )
    return newest


def _check_recorded(applied: dict[int, str], by_version: dict[int, Migration],
                    newest: int) -> None:
    """schema_migrations must list shipped versions 1..newest without a gap; anything else
    means someone edited the table, and applying migrations over it would fail half-way."""
    unknown = sorted(v for v in applied if v not in by_version)
    if unknown:
        raise MigrationRecordError(
            f"schema_migrations records version {unknown[0]}, which no build ships; the "
            "table was edited by hand: restore it from a backup", version=unknown[0],
        )
    missing = sorted(v for v in by_version if v < newest and v not in applied)
    if missing:
        raise MigrationRecordError(
            f"schema_migrations lacks version {missing[0]} although {newest} is applied; the "
            "table was edited by hand: restore its row from a backup", version=missing[0],
        )


def plan(
    applied: dict[int, str], *, target: int | None = None,
    shipped: tuple[Migration, ...] = MIGRATIONS,
) -> Plan:
    """The migrations to apply to reach ``target`` (default: the newest shipped)."""
    current = check_applied(applied, shipped)
    goal = MAX_SUPPORTED_SCHEMA if target is None else target
    if goal < 0 or goal > MAX_SUPPORTED_SCHEMA:
        raise InvalidInputError(
            f"--target {goal} is outside 0..{MAX_SUPPORTED_SCHEMA}", field="target"
        )
    pending = tuple(m for m in shipped if m.version not in applied and m.version <= goal)
    return Plan(current=current, target=max(goal, current), pending=pending)
