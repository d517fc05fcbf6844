"""``GET /v1/export``: the bundle of the whole cortex as a streamed tar (docs/backup.md).

The response starts with the first file the export makes, so a refusal (scope, database)
before it is an ordinary JSON error; a failure after it ends the stream without the end of
archive marker, and without ``manifest.json`` (the last file), which no importer accepts.
"""

from __future__ import annotations

from aiohttp import web

from attested_cortex.bundles import tarring
from attested_cortex.server.openapi import Operation
from attested_cortex.server.state import caller, state
from attested_cortex.service.resources import exporting

routes = web.RouteTableDef()


@routes.get("/v1/export")
async def export(request: web.Request) -> web.StreamResponse:
    """The bundle: ``chunks/*.copy``, ``keys.json``, ``manifest.sig.json``, ``manifest.json``."""
    response = web.StreamResponse(headers={"Content-Type": "application/x-tar"})

    async def sink(name: str, data: bytes) -> None:
        if not response.prepared:
            await response.prepare(request)
        await response.write(tarring.member(name, data))

    await exporting.export(state(request).services, caller(request), sink)
    if not response.prepared:
        await response.prepare(request)
    await response.write(tarring.END)
    await response.write_eof()
    return response


operations = [
    Operation("GET", "/v1/export", "The whole cortex as a digested, signed bundle (a tar "
              "stream; scopes audit.read and memory.read unqualified)", 200, None),
]
