"""Checks of the embedded default embedding model (run as scripts)."""
