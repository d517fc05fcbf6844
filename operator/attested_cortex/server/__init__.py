"""The memory server (aiohttp): HTTP in, the service called, JSON out.

Start-up: :mod:`.settings` (``ServerSettings``) -> :mod:`.configuring` (settings into
values) -> :mod:`.assembling` (the composition root: ``open_services``) -> :mod:`.app`
(middleware, routes, ``/mcp``, OpenAPI) -> :mod:`.serving` (listeners, signals). A request:
:mod:`.connections` and :mod:`.middleware` (request id, logs, metrics, authentication with
:mod:`.auth`, :mod:`.auth_kubernetes` and :mod:`.tokens`), :mod:`.body` (validated input),
:mod:`.routes` (one module per resource), :mod:`.errors` (the error boundary), with
:mod:`.responses` and :mod:`.openapi` describing the answers. :mod:`.state` is what the
application holds; :mod:`.mcp_endpoint` mounts :mod:`attested_cortex.mcp` at ``/mcp``.
"""
