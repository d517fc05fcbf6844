"""Meaningful strings of the domain, as ``NewType`` so signatures say what they carry."""

from __future__ import annotations

from typing import NewType

#: An agent's identity, e.g. ``k8s:team-a/planner`` or ``dev:alice``.
AgentId = NewType("AgentId", str)
#: A memory namespace: a ``/``-separated path such as ``org/team/project``.
Namespace = NewType("Namespace", str)
#: SHA-256 (hex) of a raw Ed25519 public key.
Fingerprint = NewType("Fingerprint", str)
