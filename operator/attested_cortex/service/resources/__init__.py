"""The per-resource operations, the service's top layer (ADR 0025): each builds a pipeline
Call and hands it to :func:`..pipeline.running.run`.

:mod:`.memories`, :mod:`.links`, :mod:`.kg`, :mod:`.recall`, :mod:`.transcripts`,
:mod:`.approvals_api`, :mod:`.auditing` and :mod:`.introspection` (readiness,
capabilities); their inputs (:mod:`.commands`, :mod:`.graph_commands`,
:mod:`.transcript_commands`, :mod:`.queries`), answers (:mod:`.views`, :mod:`.graph_views`,
:mod:`.answers` for byte bounds, :mod:`.cursors` for paging). Called by the HTTP routes and
the MCP tools.
"""
