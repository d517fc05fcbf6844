"""HTTPS of ``cortexctl serve`` (ADR 0047), one real server process over real PostgreSQL.

Its certificate sits in a directory laid out as a Kubernetes Secret volume (``tls.crt`` ->
``..data/tls.crt`` -> ``..<version>/tls.crt``) and is renewed the way the kubelet does it,
by swapping the ``..data`` link: new handshakes (with SNI and without) get the new
certificate within the reload interval, a connection opened before keeps working, and a
pair that does not match is refused while the previous certificate keeps serving. The
clients are real: aiohttp, the standard library, ``openssl s_client``, ``cortexctl doctor``,
``cortexctl mcp`` and the reference hook's client, each verifying with the CA file.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest
import yaml
from hack.support.pgservers import PgServer
from hack.support.served import CORTEXCTL, Served, serve
from hack.support.waiting import wait_until
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from attested_cortex import pki
from attested_cortex.cli import serve as serve_cli
from attested_cortex.errors import CortexError, InvalidInputError
from attested_cortex.hooks.reference.autolink import CortexClient
from attested_cortex.server.settings import TlsSettings
from attested_cortex.server.tls import ReloadingTls
from attested_cortex.store.migrating import migrate
from tests.support.postgres import fresh_database

NAMES = ["localhost"]
IPS = ["127.0.0.1"]


def secret_volume(directory: Path, version: str, cert_pem: str, key_pem: str) -> None:
    """Write ``..<version>`` and point ``..data`` at it atomically, as the kubelet does."""
    target = directory / f"..{version}"
    target.mkdir()
    (target / "tls.crt").write_text(cert_pem)
    (target / "tls.key").write_text(key_pem)
    link = directory / "..data_tmp"
    link.symlink_to(target.name)
    os.replace(link, directory / "..data")
    for name in ("tls.crt", "tls.key"):
        if not (directory / name).is_symlink():
            (directory / name).symlink_to(f"..data/{name}")


def served_fingerprint(port: int, *, sni: bool) -> str:
    """SHA-256 of the certificate a fresh handshake gets (verification off: we compare)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname="localhost" if sni else None) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return hashlib.sha256(der).hexdigest()


def port_of(served: Served) -> int:
    return int(served.base.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def ca() -> pki.Issued:
    return pki.issue_ca("test cortex CA", now=datetime.now(UTC))


@pytest.fixture(scope="module")
def https(pg15_server: PgServer, tmp_path_factory: pytest.TempPathFactory,
          ca: pki.Issued) -> Iterator[tuple[Served, Path, pki.Issued, Path]]:
    """One server for the module (each start costs seconds); the reload test, which leaves
    it serving a renewed certificate of the same CA, runs last."""
    workdir = tmp_path_factory.mktemp("tls")
    (workdir / "ca.crt").write_text(ca.cert_pem)
    volume = workdir / "tls"
    volume.mkdir()
    first = pki.issue_leaf(ca, dns_names=NAMES, ip_addresses=IPS, now=datetime.now(UTC))
    secret_volume(volume, "v1", first.cert_pem, first.key_pem)
    config = workdir / "cortex.yaml"
    config.write_text(yaml.safe_dump({"embedder": "none", "tls": {
        "cert_file": str(volume / "tls.crt"), "key_file": str(volume / "tls.key"),
        "reload_interval_seconds": 0.2}}))
    with fresh_database(pg15_server, label="tls") as database:
        asyncio.run(migrate(database.dsn))
        with serve(database.dsn, workdir, "--config", str(config),
                   tls=pki.client_context(workdir / "ca.crt")) as served:
            yield served, volume, first, workdir / "ca.crt"


async def test_aiohttp_and_the_reference_hook_verify_with_the_ca(https) -> None:
    served, _, _, ca_file = https
    context = pki.client_context(ca_file)
    headers = {"X-Agent-Id": "dev:tls"}
    async with aiohttp.ClientSession(headers=headers) as session:
        async with session.post(f"{served.base}/v1/memories", ssl=context, json={
                "namespace": "tls", "content": "served over https"}) as stored:
            assert stored.status == 201
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await session.get(f"{served.base}/healthz")  # the system's roots do not know it
    hook = CortexClient(served.base, token=None, agent_id="dev:tls", token_file=None,
                        ca_file=str(ca_file))
    found = hook.post("/v1/recall", {"query": "https", "namespace": "tls"})
    assert [r["content"] for r in found["results"]] == ["served over https"]


def test_doctor_verifies_with_ca_file(https) -> None:
    served, _, _, ca_path = https
    ca_file = str(ca_path)
    doctor = subprocess.run([*CORTEXCTL, "doctor", "--server", served.base, "--ca-file",
                             ca_file, "--json"], capture_output=True, text=True, timeout=60)
    assert doctor.returncode == 0, doctor.stderr
    unverified = subprocess.run([*CORTEXCTL, "doctor", "--server", served.base],
                                capture_output=True, text=True, timeout=60)
    assert unverified.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in unverified.stderr


async def test_mcp_relays_over_https_with_the_ca_file(https) -> None:
    served, _, _, ca_path = https
    ca_file = str(ca_path)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "attested_cortex", "mcp", "--server", served.base, "--agent-id", "dev:m"],
        env={"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "CORTEX_CA_FILE": ca_file})
    async with Client(params, mode="legacy") as client:
        caps = await client.call_tool("capabilities", {})
    assert not caps.is_error


def test_serves_https_and_reloads_a_renewed_certificate(https, ca: pki.Issued) -> None:
    served, volume, first, ca_file = https
    port = port_of(served)
    assert served_fingerprint(port, sni=True) == pki.fingerprint(first.cert_pem)
    with pytest.raises(OSError):  # plain HTTP on the HTTPS port: closed, no answer
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)
    # A client willing to speak TLS 1.1 (security level 0 lifts its own floor) is refused.
    legacy = subprocess.run(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_1", "-cipher",
         "DEFAULT@SECLEVEL=0"], input="", capture_output=True, text=True, timeout=30)
    assert legacy.returncode != 0 and "no peer certificate available" in legacy.stdout
    verify = subprocess.run(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-CAfile",
         str(ca_file), "-verify_return_error", "-verify_hostname", "localhost"],
        input="", capture_output=True, text=True, timeout=30)
    assert verify.returncode == 0 and "Verify return code: 0 (ok)" in verify.stdout

    # A connection opened before the renewal keeps working after it.
    client = pki.client_context(ca_file)
    kept = client.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5),
                              server_hostname="localhost")
    second = pki.issue_leaf(ca, dns_names=NAMES, ip_addresses=IPS, now=datetime.now(UTC))
    secret_volume(volume, "v2", second.cert_pem, second.key_pem)
    renewed = pki.fingerprint(second.cert_pem)
    wait_until(lambda: served_fingerprint(port, sni=True) == renewed,
               what="new handshakes to get the renewed certificate", seconds=15)
    assert served_fingerprint(port, sni=False) == renewed  # the callback runs without SNI too
    with kept:
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        assert kept.recv(64).startswith(b"HTTP/1.1 200")

    # A certificate with a key that is not its own is refused; the renewed one keeps serving.
    third = pki.issue_leaf(ca, dns_names=NAMES, ip_addresses=IPS, now=datetime.now(UTC))
    secret_volume(volume, "v3", third.cert_pem, second.key_pem)
    wait_until(lambda: "not reloaded" in served.log.read_text(),
               what="the mismatched pair to be refused", seconds=15)
    assert served_fingerprint(port, sni=True) == renewed
    assert second.key_pem.splitlines()[1] not in served.log.read_text()  # no key in logs


def test_serve_refuses_half_a_pair_and_a_pair_that_does_not_load(
        ca: pki.Issued, tmp_path: Path) -> None:
    with pytest.raises(CortexError, match="--tls-key-file go together"):
        serve_cli._tls(argparse.Namespace(tls_cert_file=tmp_path, tls_key_file=None))
    leaf = pki.issue_leaf(ca, dns_names=NAMES, now=datetime.now(UTC))
    (tmp_path / "tls.crt").write_text(leaf.cert_pem)
    (tmp_path / "tls.key").write_text(ca.key_pem)  # not the certificate's key
    with pytest.raises(InvalidInputError, match=r"cannot load tls\.cert_file") as refused:
        ReloadingTls(TlsSettings(cert_file=tmp_path / "tls.crt", key_file=tmp_path / "tls.key"))
    assert "PRIVATE" not in str(refused.value)  # before serve opens anything (serving.py)
