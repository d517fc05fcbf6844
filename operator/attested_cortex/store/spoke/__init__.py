"""The spoke-memory family's SQL (seed 001, ADR 0060): its tables, reads and staging.

A package of its own (issue 43 item 7): the family's service modules use it, and the core
store modules never import it (an import contract in pyproject.toml keeps it so).
"""
