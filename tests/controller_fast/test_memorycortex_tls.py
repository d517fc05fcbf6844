"""selfSigned TLS on the in-memory cluster (ADR 0047): the CA and leaf made once, the pass
idle afterwards, a leaf past 2/3 of its life or no longer signed by the CA renewed with an
Event, and the pass asking to come back before the next renewal is due."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

from attested_cortex import pki
from attested_cortex.builders import certificates
from attested_cortex.builders import names as n
from attested_cortex.builders.inputs import Cortex, parse_cortex
from tests.controller_fast.conftest import (
    Operated,
    cortex,
    database_runs,
    job_finished,
    server_rolled,
)

KIND = "MemoryCortex"
LEAF, CA, BUNDLE = n.tls_secret_name("mem"), n.tls_ca_secret_name("mem"), n.ca_bundle_name("mem")


def pem(op: Operated, name: str, key: str = "tls.crt") -> str:
    return base64.b64decode((op.get("Secret", name, "v1") or {})["data"][key]).decode()


async def roll(op: Operated) -> float | None:
    await op.reconcile(KIND, "mem")
    database_runs(op)
    await op.reconcile(KIND, "mem")
    job_finished(op, n.job_name("mem", op.rt.defaults.schema_version))
    await op.reconcile(KIND, "mem")
    server_rolled(op)
    return await op.reconcile(KIND, "mem")


def put_leaf(op: Operated, issued: pki.Issued, ca_pem: str) -> None:
    secret = certificates.build_leaf_secret(_cortex(op), cert_pem=issued.cert_pem,
                                            key_pem=issued.key_pem, ca_pem=ca_pem)
    secret["metadata"]["namespace"] = "ns"
    secret["metadata"]["resourceVersion"] = (op.get("Secret", LEAF, "v1") or {})[
        "metadata"]["resourceVersion"]
    op.cluster.replace(secret, manager="kubectl")


def _cortex(op: Operated) -> Cortex:
    return parse_cortex(op.get(KIND, "mem") or {})


async def test_made_once_then_idle(op: Operated) -> None:
    op.apply(cortex("mem", server={"tls": {"selfSigned": {}}}))
    wait = await roll(op)
    ca_pem, leaf_pem = pem(op, CA), pem(op, LEAF)
    assert pki.issued_by(leaf_pem, ca_pem)
    assert pki.covers(leaf_pem, ["mem", "mem.ns", "mem.ns.svc", "mem.ns.svc.cluster.local"])
    assert (op.get("ConfigMap", BUNDLE, "v1") or {})["data"] == {"ca.crt": ca_pem}
    assert op.reasons(KIND, "mem")["Ready"] == ("True", "CortexReady")
    assert op.status(KIND, "mem")["endpoint"] == "https://mem.ns.svc:8080"
    assert wait is not None and 0 < wait <= 86400  # back before the next renewal is due
    changes = op.cluster.changes
    await op.reconcile(KIND, "mem")
    assert op.cluster.changes == changes  # an idle pass writes nothing
    assert pem(op, CA) == ca_pem and pem(op, LEAF) == leaf_pem
    assert ("Normal", "CertificateRenewed") not in op.events(KIND, "mem")


async def test_an_old_leaf_and_a_new_ca_are_renewed_with_an_event(op: Operated) -> None:
    op.apply(cortex("mem", server={"tls": {"selfSigned": {}}}))
    await roll(op)
    ca = pki.Issued(pem(op, CA), pem(op, CA, "tls.key"))
    names = certificates.dns_names(_cortex(op))
    old = pki.issue_leaf(ca, dns_names=names, now=datetime.now(UTC) - timedelta(days=61))
    put_leaf(op, old, ca.cert_pem)
    await op.reconcile(KIND, "mem")
    renewed = pem(op, LEAF)
    assert renewed != old.cert_pem and pki.issued_by(renewed, ca.cert_pem)
    assert not pki.renewal_due(renewed, now=datetime.now(UTC))
    assert op.events(KIND, "mem").count(("Normal", "CertificateRenewed")) == 1

    op.cluster.delete("v1", "Secret", "ns", CA)  # a manual CA rotation
    await op.reconcile(KIND, "mem")
    new_ca = pem(op, CA)
    assert new_ca != ca.cert_pem and pki.issued_by(pem(op, LEAF), new_ca)
    assert (op.get("ConfigMap", BUNDLE, "v1") or {})["data"] == {"ca.crt": new_ca}
    assert op.events(KIND, "mem").count(("Normal", "CertificateRenewed")) == 2
