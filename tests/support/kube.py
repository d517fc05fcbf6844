"""Kubernetes control-plane fixtures (filled in by the Kubernetes foundation work)."""
