"""``GET /v1/export``: the whole cortex as a bundle, through the operation pipeline.

Scope (ADR 0033): ``audit.read`` (the pipeline's check) and ``memory.read`` held unqualified
(checked here): the bundle holds every namespace's memories and the whole chain, so an agent
whose reads are narrowed to some namespaces may not export. The manifest is signed by the
server's ``audit_signer`` when it has one; the bundle carries the server's keyring.
"""

from __future__ import annotations

from dataclasses import dataclass

from attested_cortex.bundles.exporting import ExportReport, SinkFn, export_bundle
from attested_cortex.errors import DeniedError
from attested_cortex.service.pipeline import attesting
from attested_cortex.service.pipeline import operations as ops
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.running import Call, run


@dataclass
class ExportCall(Call[ExportReport]):
    """Stream every table, the keys and the manifest to ``sink``."""

    spec = ops.EXPORT
    sink: SinkFn

    async def execute(self, svc: Services, caller: Caller) -> ExportReport:
        if not caller.scopes.holds("memory.read"):
            raise DeniedError("exporting needs memory.read on every namespace (unqualified) "
                              "and audit.read", code="scope_denied")
        key_of = svc.transcripts.audit_key if svc.transcripts is not None else None
        async with svc.db.connection() as conn:
            return await export_bundle(conn, self.sink,
                                       keyring=attesting.snapshot(svc.keys).keyring,
                                       signer=key_of() if key_of is not None else None)


async def export(svc: Services, caller: Caller, sink: SinkFn) -> ExportReport:
    """Export the cortex to ``sink`` (raises before the first byte when denied)."""
    return await run(svc, caller, ExportCall(sink))
