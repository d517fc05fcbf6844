"""A federated cortex's files for ``cortexctl serve``: its CA, server and client
certificates, its identity directory, a signing agent in its ``keys_dir``, and the
``federation`` configuration naming its peers. For the benchmark (bench/federation.py) and
tests that start several cortexes; docs/federation.md describes the same files.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from attested_cortex import pki
from attested_cortex.attest.keyfiles import write_identity
from attested_cortex.attest.keyring import KeyRevision, render_keyring_file
from attested_cortex.attest.keys import AgentKey, generate_key
from attested_cortex.attest.payloads import memory_payload
from attested_cortex.attest.signing import sign
from attested_cortex.types import AgentId


@dataclass
class Material:
    """One cortex's identity, certificates and signing agent."""

    name: str
    workdir: Path
    identity: AgentKey
    agent: AgentKey

    @property
    def ca_file(self) -> Path:
        return self.workdir / "ca.crt"


def write_peer_files(workdir: Path, name: str, now: datetime) -> tuple[pki.Issued, AgentKey]:
    """A cortex's federation files in ``workdir``: its own CA (``ca.crt``), a loopback
    server certificate and a client certificate named ``name`` issued by it, its identity
    key (``identity``) and an empty ``keys/``; (the CA, the identity)."""
    ca = pki.issue_ca(f"{name} CA", now=now)
    (workdir / "ca.crt").write_text(ca.cert_pem)
    server = pki.issue_leaf(ca, dns_names=["localhost"], ip_addresses=["127.0.0.1"], now=now)
    client = pki.issue_leaf(ca, dns_names=[name], now=now, client=True)
    for stem, issued in (("server", server), ("client", client)):
        (workdir / f"{stem}.crt").write_text(issued.cert_pem)
        (workdir / f"{stem}.key").write_text(issued.key_pem)
    identity = generate_key(AgentId(name))
    write_identity(workdir / "identity", identity)
    (workdir / "keys").mkdir()
    return ca, identity


def make_material(root: Path, name: str) -> Material:
    """Fresh files for cortex ``name`` under ``root/name``."""
    workdir = root / name
    workdir.mkdir(parents=True)
    _, identity = write_peer_files(workdir, name, datetime.now(UTC))
    agent = generate_key(AgentId(f"dev:writer-{name}"))
    (workdir / "keys" / "writer.json").write_text(json.dumps(render_keyring_file(
        [KeyRevision(agent.agent_id, agent.public.public_key)])))
    return Material(name, workdir, identity, agent)


def write_config(cortex: Material, peers: list[tuple[Material, str]], *,
                 patterns: tuple[str, ...] = ("team/**",), **federation: Any) -> Path:
    """``config.yaml`` of ``cortex``: each peer (with the URL it is reached at) sent and
    accepted ``patterns``, landing under ``fed/<peer>``; ``federation``: more settings."""
    path = cortex.workdir / "config.yaml"
    path.write_text(yaml.safe_dump({
        "embedder": "none", "keys_dir": str(cortex.workdir / "keys"),
        "quotas": {"enabled": False},
        "tls": {"cert_file": str(cortex.workdir / "server.crt"),
                "key_file": str(cortex.workdir / "server.key")},
        "federation": {
            "identity_dir": str(cortex.workdir / "identity"),
            "client_cert_file": str(cortex.workdir / "client.crt"),
            "client_key_file": str(cortex.workdir / "client.key"), **federation,
            "peers": [{"name": p.name, "url": url, "ca_file": str(p.ca_file),
                       "public_key": p.identity.public.public_b64, "send": list(patterns),
                       "accept": list(patterns), "into": f"fed/{p.name}"}
                      for p, url in peers]}}))
    return path


def signed_body(agent: AgentKey, namespace: str, content: str) -> dict[str, str]:
    """A ``POST /v1/memories`` body the agent signed (docs/attestation.md)."""
    moment = datetime.now(UTC).replace(microsecond=0)
    payload = memory_payload(namespace=namespace, title="", content=content,
                             author=agent.agent_id, signed_at=moment)
    return {"namespace": namespace, "title": "", "content": content,
            "signed_at": moment.isoformat(),
            "signature": base64.b64encode(sign(agent, payload.encode())).decode()}
