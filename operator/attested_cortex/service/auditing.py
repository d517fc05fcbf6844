"""Verifying the audit chain for ``GET /v1/audit/verify`` (the CLI does the same offline)."""

from __future__ import annotations

import dataclasses
from typing import Any

from attested_cortex.attest.auditing import verify_chain
from attested_cortex.service import attesting
from attested_cortex.service.context import Caller, Services


async def verify(svc: Services, caller: Caller) -> dict[str, Any]:
    """Walk every event: hashes always, signatures of agents the keyring knows."""
    keyring = attesting.snapshot(svc.keys).keyring
    async with svc.db.connection() as conn:
        report = await verify_chain(conn, keyring=keyring)
        await conn.rollback()
    return dataclasses.asdict(report)
