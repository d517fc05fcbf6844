"""Verifying the audit chain for ``GET /v1/audit/verify`` (the CLI does the same offline),
through the operation pipeline (scope ``audit.read``); ``?deep=true`` adds the sweep of rows
against write records (:mod:`~attested_cortex.attest.sweeping`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from attested_cortex.attest.auditing import verify_chain
from attested_cortex.attest.sweeping import sweep
from attested_cortex.service import attesting
from attested_cortex.service import operations as ops
from attested_cortex.service.context import Caller, Services
from attested_cortex.service.pipeline import Call, run


@dataclass
class VerifyChainCall(Call[dict[str, Any]]):
    """Walk every event: hashes always, signatures of agents the keyring knows; with
    ``deep``, also every memory and link row against its latest write record (``ok`` then
    holds only when both hold)."""

    spec = ops.AUDIT_VERIFY
    deep: bool = False

    async def execute(self, svc: Services, caller: Caller) -> dict[str, Any]:
        keyring = attesting.snapshot(svc.keys).keyring
        async with svc.db.connection() as conn:
            report = dataclasses.asdict(await verify_chain(conn, keyring=keyring))
            await conn.rollback()
            if self.deep:
                swept = (await sweep(conn)).as_json()
                report["deep"] = swept
                report["ok"] = bool(report["ok"] and swept["ok"])
        return report


async def verify(svc: Services, caller: Caller, *, deep: bool = False) -> dict[str, Any]:
    """The chain report (``deep``: with the row sweep)."""
    return await run(svc, caller, VerifyChainCall(deep))
