"""Verifying the audit chain for ``GET /v1/audit/verify`` (the CLI does the same offline);
``?deep=true`` adds the sweep of rows against write records
(:mod:`~attested_cortex.attest.sweeping`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from attested_cortex.attest.auditing import verify_chain
from attested_cortex.attest.sweeping import sweep
from attested_cortex.service import attesting
from attested_cortex.service.context import Caller, Services


async def verify(svc: Services, caller: Caller, *, deep: bool = False) -> dict[str, Any]:
    """Walk every event: hashes always, signatures of agents the keyring knows; with
    ``deep``, also every memory and link row against its latest write record (``ok`` then
    holds only when both hold)."""
    keyring = attesting.snapshot(svc.keys).keyring
    async with svc.db.connection() as conn:
        report = dataclasses.asdict(await verify_chain(conn, keyring=keyring))
        await conn.rollback()
        if deep:
            swept = (await sweep(conn)).as_json()
            report["deep"] = swept
            report["ok"] = bool(report["ok"] and swept["ok"])
    return report
