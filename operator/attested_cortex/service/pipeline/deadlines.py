"""The write deadline: no write waits on the database past ``limits.write_timeout_ms``.

Called by :mod:`.running` (the operation step of every write-class operation) and by
:mod:`attested_cortex.service.resources.idempotency` (the answer of a keyed write kept on a
retry). PostgreSQL bounds a lock wait (``lock_timeout``) and a statement
(``statement_timeout``) but not a commit waiting for a synchronous replica: that wait comes
after the statement timeout is disarmed, so with ``synchronous.dataDurability: required`` and
no replica attached (the first seconds after a promotion, or every replica down) a write
waited as long as that lasted (issue 38: 201 after 7-9 s during a failover). Past the
deadline the write is cancelled (psycopg sends the server a cancel: a commit waiting for its
replica then stands on the primary alone, never acknowledged) and answered 503
``commit_unconfirmed`` with Retry-After (ADR 0090). Such a write may have committed: sent again
with its Idempotency-Key it is answered once, and only once a replica has it too.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

from attested_cortex.errors import NotReadyError

#: The 503 code of a write cancelled at its deadline (it may have committed on the primary).
COMMIT_UNCONFIRMED: Final = "commit_unconfirmed"


@asynccontextmanager
async def write_deadline(timeout_ms: int) -> AsyncIterator[None]:
    """The block bounded by ``timeout_ms``; past it, 503 ``commit_unconfirmed``."""
    try:
        async with asyncio.timeout(timeout_ms / 1000):
            yield
    except TimeoutError as exc:
        raise NotReadyError(
            f"the write was not confirmed within {timeout_ms} ms (the database or its "
            "synchronous replica did not answer; a primary may be changing). It may have "
            "committed on the primary: send it again with the same Idempotency-Key",
            code=COMMIT_UNCONFIRMED) from exc
