"""Starters and clients of the local services that tests, benchmarks and ``make serve`` share:
PostgreSQL (+ AGE) servers and streaming standbys, the cortex server as a process, MinIO, the
Helm chart on a control plane, the real node's readiness, the one bounded wait, and the steady
HA writer. The pytest fixtures over them stay in tests/support/ (ADR 0117).
"""
