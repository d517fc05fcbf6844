"""The spoke-memory family's operations (seed 001, ADR 0060), one module per concern.

A package of its own (issue 43 item 7) so the family's dependency on the core is one way:
these modules use the core's pipeline, resources and store, and the core operation modules
never import them (an import contract in pyproject.toml keeps it so).
"""
