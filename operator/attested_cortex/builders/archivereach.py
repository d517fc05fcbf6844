"""How far the WAL archive of a ``cloudNativePG`` cortex reaches, from its primary's own
report. Pure.

CloudNativePG's instance manager answers ``GET /pg/status`` on each instance (port 8000;
what ``kubectl cnpg status`` prints as "Last Archived WAL"): on the primary it carries
``pg_stat_archiver``'s ``last_archived_wal`` and ``last_archived_time`` and the current
write position ``currentLsn`` (ADR 0110). A restore to the latest point replays the archive
to the end of the last archived segment: every write before that position is in it, every
write after is not. So:

- ``lastArchivedLSN`` is the end of the last archived segment (its name is the timeline,
  then the segment number: the end is ``(number + 1) * segment size``);
- ``unarchivedBytes`` is how much WAL the primary has written past it (0: a restore to the
  latest point holds every write acknowledged so far);
- ``latestRestorePoint`` is ``last_archived_time``: the segment closed just before it was
  archived, so a write acknowledged after this instant is not in the archive (when
  ``unarchivedBytes`` is above 0; at 0 every write is).

A history file or a ``.partial`` segment (a promotion's) moves no position: the LSN fields
are left out then, the time stays.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

#: PostgreSQL's default WAL segment size (CloudNativePG's ``walSegmentSize`` changes it).
DEFAULT_SEGMENT_MB: Final = 16
_SEGMENT: Final = re.compile(r"^([0-9A-F]{8})([0-9A-F]{8})([0-9A-F]{8})$")
_LSN: Final = re.compile(r"^([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})$")


def segment_mb(cluster: Mapping[str, Any] | None) -> int:
    """The Cluster's WAL segment size in MiB (``bootstrap.initdb.walSegmentSize``)."""
    spec = (cluster or {}).get("spec") or {}
    size = ((spec.get("bootstrap") or {}).get("initdb") or {}).get("walSegmentSize")
    return int(size) if isinstance(size, int) and size > 0 else DEFAULT_SEGMENT_MB


def segment_end(name: str, size_mb: int = DEFAULT_SEGMENT_MB) -> int | None:
    """The position just past a WAL segment named ``name`` (None: not a segment's name)."""
    found = _SEGMENT.match(name)
    if found is None:
        return None
    size = size_mb * 1024 * 1024
    log, seg = int(found.group(2), 16), int(found.group(3), 16)
    return log * (1 << 32) + (seg + 1) * size


def parse_lsn(text: object) -> int | None:
    """``X/Y`` as PostgreSQL prints a position, as a number (None: not one)."""
    found = _LSN.match(str(text or ""))
    return None if found is None else (int(found.group(1), 16) << 32) + int(found.group(2), 16)


def format_lsn(value: int) -> str:
    """A position as PostgreSQL prints it."""
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


def _archived_time(text: object) -> str | None:
    """``last_archived_time`` as RFC 3339 in UTC (the instance manager passes on what the
    driver printed: ``-infinity`` for never, else an ISO-like time with an offset)."""
    value = str(text or "").strip()
    if not value or "infinity" in value:
        return None
    try:
        when = datetime.fromisoformat(value.replace(" ", "T", 1))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def reach(instance_status: Mapping[str, Any] | None,
          size_mb: int = DEFAULT_SEGMENT_MB) -> dict[str, Any]:
    """``status.backup``'s reach fields from the primary's ``/pg/status`` answer (empty: no
    answer, not the primary, or nothing archived yet)."""
    if not instance_status or not instance_status.get("isPrimary"):
        return {}
    wal = str(instance_status.get("lastArchivedWAL") or "")
    if not wal:
        return {}
    out: dict[str, Any] = {"lastArchivedWAL": wal[:64],
                           "latestRestorePoint": _archived_time(
                               instance_status.get("lastArchivedWALTime"))}
    end = segment_end(wal, size_mb)
    current = parse_lsn(instance_status.get("currentLsn"))
    if end is not None:
        out["lastArchivedLSN"] = format_lsn(end)
        if current is not None:
            out["unarchivedBytes"] = max(0, current - end)
    return {k: v for k, v in out.items() if v is not None}
