"""``GET /v1/export``: the whole cortex as a bundle, through the operation pipeline.

Scope (ADR 0033): ``audit.read`` and ``memory.read``, both held unqualified (the pipeline
checks the bases, :func:`~.pipeline.deciding.require_bare` here): the bundle holds every
namespace's memories and the whole chain, so an agent whose reads or audit reads are
narrowed to some namespaces may not export (issue 37). The manifest is signed by the
server's ``audit_signer`` when it has one; the bundle carries the server's keyring.
"""

from __future__ import annotations

from dataclasses import dataclass

from attested_cortex.bundles.exporting import ExportReport, SinkFn, export_bundle
from attested_cortex.service.pipeline import attesting
from attested_cortex.service.pipeline import operations as ops
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.deciding import require_bare
from attested_cortex.service.pipeline.running import Call, run


@dataclass
class ExportCall(Call[ExportReport]):
    """Stream every table, the keys and the manifest to ``sink``."""

    spec = ops.EXPORT
    sink: SinkFn

    async def execute(self, svc: Services, caller: Caller) -> ExportReport:
        require_bare(caller, "memory.read", "a cortex export")
        require_bare(caller, "audit.read", "a cortex export")
        key_of = svc.transcripts.audit_key if svc.transcripts is not None else None
        async with svc.db.connection() as conn:
            return await export_bundle(conn, self.sink,
                                       keyring=attesting.snapshot(svc.keys).keyring,
                                       signer=key_of() if key_of is not None else None)


async def export(svc: Services, caller: Caller, sink: SinkFn) -> ExportReport:
    """Export the cortex to ``sink`` (raises before the first byte when denied)."""
    return await run(svc, caller, ExportCall(sink))
