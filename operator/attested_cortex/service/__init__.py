"""The service: every operation the cortex offers, run through one pipeline.

Called by the HTTP routes (:mod:`attested_cortex.server.routes`), the MCP tools
(:mod:`attested_cortex.mcp`) and ``cortexctl doctor``; it calls hooks, policy, attestation
and the store. Three layers, enforced by import-linter (ADR 0025), each importing only the
ones below it:

- :mod:`.resources`: the per-resource operations (memories, links, kg, recall,
  transcripts, approvals, audit, capabilities), their request models and JSON views;
- :mod:`.workers`: the long-lived background parts a server starts once (the embedder's
  write-behind and backfill, the approval sweeper, the transcript sweeper);
- :mod:`.pipeline`: the steps every operation passes (scope, rules, hooks, quota, approval
  gate, audit), the values they run over, and :class:`~.pipeline.context.Services`, the
  frozen set of parts assembled by :mod:`attested_cortex.server.assembling`.
"""
