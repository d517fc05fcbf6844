"""The Model Context Protocol face of the cortex: the tool registry, tool calls through the
service pipeline, and the SDK server mounted at ``/mcp`` (``docs/mcp.md``, ADR 0012)."""
