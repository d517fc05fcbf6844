"""Opaque cursors for listings: a position ``(created_at, id)`` in a listing ordered newest
first by creation. Both never change, so a walk sees each item that existed when it began
exactly once however many writes land meanwhile (an order by ``updated_at`` moved an edited
memory ahead of the cursor, or behind it twice). Pure; called by :mod:`.memories`.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime

from attested_cortex.errors import InvalidInputError

Position = tuple[datetime, uuid.UUID]


def encode(position: Position) -> str:
    """The cursor a client sends back as ``?cursor=`` for the next page."""
    at, item = position
    raw = f"{at.isoformat()}|{item}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str) -> Position:
    """The position a cursor names; 400 ``bad_cursor`` for anything this server did not
    make."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, _, item = raw.partition("|")
        moment, ident = datetime.fromisoformat(at), uuid.UUID(item)
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidInputError("cursor is not one this server gave out: send back the "
                                "`next` of the previous page", field="cursor",
                                code="bad_cursor") from exc
    if moment.tzinfo is None:
        raise InvalidInputError("cursor is not one this server gave out", field="cursor",
                                code="bad_cursor")
    return moment, ident
