"""Verifying the audit chain for ``GET /v1/audit/verify`` (the CLI does the same offline),
through the operation pipeline (scope ``audit.read``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from attested_cortex.attest.auditing import verify_chain
from attested_cortex.service import attesting
from attested_cortex.service import operations as ops
from attested_cortex.service.context import Caller, Services
from attested_cortex.service.pipeline import Call, run


class VerifyChainCall(Call[dict[str, Any]]):
    """Walk every event: hashes always, signatures of agents the keyring knows."""

    spec = ops.AUDIT_VERIFY

    async def execute(self, svc: Services, caller: Caller) -> dict[str, Any]:
        keyring = attesting.snapshot(svc.keys).keyring
        async with svc.db.connection() as conn:
            report = await verify_chain(conn, keyring=keyring)
            await conn.rollback()
        return dataclasses.asdict(report)


async def verify(svc: Services, caller: Caller) -> dict[str, Any]:
    """The chain report."""
    return await run(svc, caller, VerifyChainCall())
