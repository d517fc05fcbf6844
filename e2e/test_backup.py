"""Physical backups and the verified restore on the real node (issue 24).

A real S3 server (MinIO built here, a pod with its own volume: hack/objectstore.py, ADR 0037)
and one ``cloudNativePG`` cortex with ``backup`` (one instance: the time budget). In file
order, sharing the module's cortexes:

1. the ScheduledBackup's immediate backup completes, is listed in ``status.backup`` and its
   objects are in the bucket; ``BackupHealthy`` is True; CloudNativePG's retention run after
   it posts no ``RetentionPolicyFailed``;
2. writes, then at once a restore to the latest point (the documented target: none): the
   source's ``status.backup`` says how far the archive reaches (the last archived WAL, its
   end LSN and time, the WAL not yet archived), and the restore holds exactly the
   acknowledged writes from before its ``status.restore.reachedAt``: every one, or the
   status names the point past which they were not reachable (issue 38 item 4);
3. writes A (memories, a link signed with the agent's own key, a transcript and a memory
   citing it), an instant T, writes B, the WAL switched so the archive has it all; a new
   cortex restored to T holds exactly A, ``DataVerified=True`` naming the last event kept,
   and serves; a new cortex restored to the end (the full restore) answers as the source
   does: the same memories, the same links whose signatures verify with the agent's public
   key, the same replay, the same per-agent usage, ``audit verify --deep`` clean and the
   same chain head;
4. the logical path: ``spec.backup.logical``'s CronJob (run now by a Job made from it) exports
   the source to MinIO; a new cortex with ``spec.restore.logical`` and the source's audit
   signer pinned by its Secret (ADR 0064) imports it, ``DataVerified=True``, and lists the
   same memories as the source;
5. one of B's memory rows changed behind the server (psql as the superuser on the source's
   primary), archived, and a third cortex restored to the end: ``DataVerified=False``
   naming that memory, ``Ready=False RestoreNotVerified``, no server Deployment; the
   source is untouched by every restore;
6. the object store down (its Deployment scaled to 0) while WAL must be archived:
   ``BackupHealthy=False`` with barman-cloud's reason, a Warning event, and the cortex
   keeps answering writes; the store back, archiving resumes.

It prints how long the backup, each restore and its verification took.
"""

from __future__ import annotations

import base64
import json
import math
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from hack import objectstore
from hack.support.waiting import wait_until
from minio import Minio
from tests.support.cnpg import CloudNativePG

from attested_cortex.attest.keys import key_from_seed, seed_from_pem
from attested_cortex.attest.payloads import link_payload
from attested_cortex.attest.signing import sign
from attested_cortex.types import AgentId
from e2e import hacluster
from e2e.conftest import kubectl, kubectl_json
from e2e.test_system import Forward, verify_link

SOURCE, PITR, FULL, TAMPERED = "bk-src", "bk-pitr", "bk-full", "bk-tampered"
LOGICAL, LATEST = "bk-logical", "bk-latest"
WRITER = "bk-writer"  # the service account, and its AgentIdentity holding its own key
BUCKET, PREFIX = "cortex-backups", "e2e"
READY_S = 600.0          # a Cluster (initdb or a restore), the migration, the server
BACKUP_S = 300.0
CREDENTIALS = "s3-credentials"
Get = Callable[[str], tuple[int, Any]]


def ok(result: Any) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return str(result.stdout)


def store_spec() -> dict[str, Any]:
    return {"endpoint": objectstore.endpoint(), "bucket": BUCKET, "path": PREFIX,
            "credentialsSecretRef": {"name": CREDENTIALS}}


def cortex(name: str, namespace: str, **database: Any) -> dict[str, Any]:
    body = hacluster.memorycortex(name, namespace, instances=1, synchronous=None)
    body["spec"]["database"]["cloudNativePG"].update(database)
    return body  # a new cortex: its rows sealed at rest (ADR 0079)


def copy_master_key(name: str, namespace: str) -> None:
    """The source's master key ring copied under ``name``'s Secret name (docs/backup.md:
    a restore of sealed rows needs it; the operator adopts an existing Secret)."""
    secret = kubectl_json("get", f"secret/{SOURCE}-master-key", "-n", namespace)
    ok(kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Secret", "type": secret.get("type", "Opaque"),
        "metadata": {"name": f"{name}-master-key", "namespace": namespace},
        "data": secret["data"]})))


def restore_from_source(name: str, namespace: str, recovery: dict[str, Any]) -> None:
    """Apply a cortex restored from the source's backup, with the source's master key ring
    copied under its name first (docs/keys.md): the verification Job checks the restored
    HMAC-keyed chain with it (ADR 0066) and the server opens the sealed rows with it."""
    copy_master_key(name, namespace)
    ok(kubectl("apply", "-f", "-", input=json.dumps(cortex(
        name, namespace, bootstrap={"recovery": recovery}))))


def status(namespace: str, name: str) -> dict[str, Any]:
    return dict(kubectl_json("get", f"memorycortex/{name}", "-n", namespace).get("status") or {})


def condition(namespace: str, name: str, type_: str) -> dict[str, Any]:
    found = [c for c in status(namespace, name).get("conditions") or [] if c["type"] == type_]
    return found[0] if found else {}


@dataclass(frozen=True)
class Store:
    """MinIO on the node and its root credentials (the host reaches its pod's IP)."""

    installer: objectstore.Installer
    access: str
    secret: str

    def client(self) -> Minio:
        ip = self.installer.pod_ip()
        assert ip, "MinIO's pod has no IP"
        return Minio(f"{ip}:{objectstore.PORT}", access_key=self.access,
                     secret_key=self.secret, secure=False)

    def keys(self, prefix: str) -> list[str]:
        return sorted(str(o.object_name) for o in self.client().list_objects(
            BUCKET, prefix=prefix, recursive=True))


@pytest.fixture(scope="module")
def store(namespace: str) -> Iterator[Store]:
    """MinIO on the node, a bucket, and the credentials Secret in the release namespace."""
    found = Store(objectstore.Installer(kubectl), "e2e-" + secrets.token_hex(4),
                  secrets.token_hex(20))
    found.installer.apply(objectstore.manifests(access_key=found.access,
                                                secret_key=found.secret))
    wait_until(found.installer.ready, seconds=180, interval_s=1.0, what="MinIO's pod ready")
    found.client().make_bucket(BUCKET)
    found.installer.apply([objectstore.credentials_secret(
        CREDENTIALS, namespace, access_key=found.access, secret_key=found.secret)])
    yield found
    found.installer.uninstall()


def wait_ready(namespace: str, name: str) -> float:
    began = time.monotonic()
    try:
        wait_until(lambda: condition(namespace, name, "Ready").get("status") == "True",
                   seconds=READY_S, interval_s=2.0, what=f"{name} Ready")
    except BaseException:  # the timeout too: say what the cortex reports
        print(f"{name} not Ready: {json.dumps(status(namespace, name), indent=1)}")
        raise
    return round(time.monotonic() - began, 1)


@pytest.fixture(scope="module")
def source(namespace: str, cnpg: CloudNativePG, store: Store) -> Iterator[str]:
    ok(kubectl("create", "serviceaccount", WRITER, "-n", namespace))
    body = cortex(SOURCE, namespace, backup={"objectStore": store_spec(), "retention": "7d"})
    identity = {"apiVersion": "cortex.attested.dev/v1alpha1", "kind": "AgentIdentity",
                "metadata": {"name": WRITER, "namespace": namespace},
                "spec": {"cortexRef": {"name": SOURCE}, "keyCustody": "Agent",
                         "serviceAccountRef": {"name": WRITER}}}
    ok(kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                      "items": [body, identity]})))
    print(f"\n{SOURCE} Ready in {wait_ready(namespace, SOURCE)} s")
    ok(kubectl("wait", "-n", namespace, "--for=condition=Ready", "--timeout=120s",
               f"agentidentity/{WRITER}"))
    # The writer's public key is in the server's configuration: the pass that counted the
    # identity rolled the server out with it (Ready in the same status waits for that).
    wait_until(lambda: status(namespace, SOURCE).get("identities") == 1 and condition(
        namespace, SOURCE, "Ready").get("status") == "True", seconds=READY_S, interval_s=2.0,
        what=f"{SOURCE} serving with {WRITER}'s key")
    ok(kubectl("rollout", "status", "-n", namespace, f"deployment/{SOURCE}-server",
               "--timeout=180s"))
    yield namespace
    # The release namespace is shared with the later modules (test_ha_lifecycle uninstalls
    # CloudNativePG; test_system waits on its cortex): leave no cortex of this module behind.
    kubectl("delete", f"agentidentity/{WRITER}", "-n", namespace, "--ignore-not-found")
    for name in (SOURCE, PITR, FULL, TAMPERED, LOGICAL, LATEST):
        kubectl("delete", f"memorycortex/{name}", "-n", namespace, "--ignore-not-found",
                "--wait=true", "--timeout=180s")


class Client:
    """A port-forward to one cortex's Service and calls with the writer's token."""

    def __init__(self, namespace: str, name: str, token: str) -> None:
        self.forward = Forward(namespace, service=name)
        self.forward.start()
        self.token = token

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        request = urllib.request.Request(  # noqa: S310 (the loopback forward)
            self.forward.base + path, method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}",
                     "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def get(self, path: str) -> Any:
        code, answer = self.call("GET", path)
        assert code == 200, (path, code, answer)
        return answer


@pytest.fixture(scope="module")
def token(source: str) -> str:
    return ok(kubectl("create", "token", WRITER, "-n", source, "--duration", "2h")).strip()


@pytest.fixture(scope="module")
def api(source: str, token: str) -> Iterator[tuple[Get, Callable[[str, dict[str, Any]],
                                                            tuple[int, Any]]]]:
    client = Client(source, SOURCE, token)
    yield (lambda path: client.call("GET", path)), (lambda path, body: client.call(
        "POST", path, body))
    client.forward.stop()


def write(post: Callable[[str, dict[str, Any]], tuple[int, Any]], label: str,
          count: int) -> list[str]:
    ids = []
    for i in range(count):
        code, answer = post("/v1/memories", {"namespace": "bk", "content": f"{label} {i}"})
        assert code == 201, answer
        ids.append(answer["id"])
    return ids


def sql(namespace: str, name: str, query: str) -> list[list[str]]:
    return hacluster.rows(kubectl, namespace, name, query)


def test_a_scheduled_backup_succeeds_and_is_listed(source: str,
                                                   store: Store) -> None:
    began = time.monotonic()
    wait_until(lambda: condition(source, SOURCE, "BackupHealthy").get("status") == "True",
               seconds=BACKUP_S, interval_s=2.0,
               what=f"{SOURCE}'s first backup (BackupHealthy)")
    backup = status(source, SOURCE)["backup"]
    print(f"\nfirst backup completed {round(time.monotonic() - began, 1)} s after Ready: "
          f"{backup}")
    assert backup["completed"] >= 1 and backup["lastBackupName"], backup
    assert backup["firstRecoverabilityPoint"], backup
    listed = kubectl_json("get", "backups.postgresql.cnpg.io", "-n", source)["items"]
    assert backup["lastBackupName"] in [b["metadata"]["name"] for b in listed]
    keys = store.keys(f"{PREFIX}/{SOURCE}-db/")
    assert any("/base/" in k and k.endswith("backup.info") for k in keys), keys[:20]
    assert any("/wals/" in k for k in keys), keys[:20]
    # CloudNativePG's retention run follows each backup and ends by setting the Cluster's
    # firstRecoverabilityPoint; it failed after every backup (issue 38 item 9: a slash
    # after the path made barman-cloud list "e2e//<server>/base/", which MinIO refuses).
    wait_until(lambda: bool(kubectl_json("get", f"clusters.postgresql.cnpg.io/{SOURCE}-db",
                                         "-n", source)["status"].get(
        "firstRecoverabilityPoint")), seconds=120, interval_s=1.0,
        what="the retention run after the first backup")
    events = kubectl_json("get", "events", "-n", source, "--field-selector",
                          f"involvedObject.name={SOURCE}-db")["items"]
    assert not [e for e in events if e["reason"] == "RetentionPolicyFailed"], events


def archived_after_switch(namespace: str) -> Callable[[], bool]:
    """Switch to a new WAL segment; the check is that the one just closed is archived."""
    (closed,) = sql(namespace, SOURCE, "SELECT pg_walfile_name(pg_switch_wal())")[0]

    def archived() -> bool:
        (last,) = sql(namespace, SOURCE,
                      "SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver")[0]
        return last >= closed
    return archived


@dataclass(frozen=True)
class Signed:
    """What the full restore must answer as the source did: the memories a link and a
    replay start from, and the agent key that signed the link."""

    link_src: str
    cited: str
    public_key: bytes


def signed_link_and_transcript(namespace: str, post: Callable[[str, dict[str, Any]],
                                                             tuple[int, Any]]) -> tuple[
        Signed, list[str]]:
    """A link signed with the writer's own key (custody Agent) and a transcript cited by a
    memory, written through the API; the ids of the memories written."""
    secret = kubectl_json("get", "secret", f"{WRITER}-agent-key", "-n", namespace)["data"]
    agent_id = base64.b64decode(secret["agent-id"]).decode()
    key = key_from_seed(AgentId(agent_id),
                        seed_from_pem(base64.b64decode(secret["private.pem"]).decode()))
    a, b = write(post, "linked", 2)
    body = {"src_id": a, "dst_id": b, "relation": "derived_from",
            "valid_from": "2026-11-01T10:00:00Z"}
    payload = link_payload(src_id=a, dst_id=b, relation="derived_from", observed_by=agent_id,
                           valid_from=datetime.fromisoformat(body["valid_from"]),
                           valid_until=None)
    body["signature"] = base64.b64encode(sign(key, payload.encode())).decode()
    code, link = post("/v1/links", body)
    assert code == 201 and link["attest_level"] == "peer_attested", link
    code, transcript = post("/v1/transcripts", {
        "namespace": "bk", "content": "user: where do backups go?\nagent: to MinIO, hourly"})
    assert code == 201, transcript
    code, cited = post("/v1/memories", {"namespace": "bk", "content": "backups go to MinIO",
                                        "citations": [{"transcript_id": transcript["id"],
                                                       "start": 34, "end": 50}]})
    assert code == 201, cited
    return Signed(a, cited["id"], key.public.public_key), [a, b, cited["id"]]


def answers(client: Client, signed: Signed) -> dict[str, Any]:
    """What the full restore must answer exactly as the source: the memories, the signed
    link and the replay."""
    return {"memories": client.get("/v1/memories?namespace=bk&limit=500"),
            "links": client.get(f"/v1/memories/{signed.link_src}/links"),
            "replay": client.get(f"/v1/memories/{signed.cited}/replay?full=true")}


USAGE = "SELECT agent, memories, transcripts FROM agent_usage ORDER BY agent"


def test_pitr_keeps_exactly_the_earlier_writes_and_a_full_restore_answers_as_the_source(
        source: str, api: tuple[Get, Any], token: str) -> None:
    _, post = api
    signed, extra = signed_link_and_transcript(source, post)
    earlier = write(post, "before", 3) + extra
    instant = math.floor(time.time()) + 1  # a whole second after every earlier commit...
    wait_until(lambda: time.time() > instant + 1, seconds=5, what="the clock past T + 1 s")
    later = write(post, "after", 3)  # ...and at least a second before every later one
    target = datetime.fromtimestamp(instant, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    at_source = Client(source, SOURCE, token)
    # Reads are chained too (memory.access, ADR 0099): read before the last segment is
    # archived, so the full restore holds their records and its head is the source's.
    expected, usage = answers(at_source, signed), sql(source, SOURCE, USAGE)
    wait_until(archived_after_switch(source), seconds=120, interval_s=1.0,
               what="the last WAL segment archived")
    chain = at_source.get("/v1/audit/verify")  # audit reads are not memory reads: unchained
    at_source.forward.stop()

    recovery = {"objectStore": store_spec(), "sourceCortex": SOURCE}
    restore_from_source(PITR, source, {**recovery, "targetTime": target})
    restore_from_source(FULL, source, recovery)
    print(f"\n{PITR} (to {target}) Ready in {wait_ready(source, PITR)} s")
    held = {row[0] for row in sql(source, PITR, "SELECT id::text FROM memories")}
    assert set(earlier) <= held and not held & set(later), (held, earlier, later)
    verified = condition(source, PITR, "DataVerified")
    assert verified["status"] == "True", verified
    restore = status(source, PITR)["restore"]
    assert restore["verified"] and restore["memories"] == len(held), restore
    assert restore["macsChecked"] >= 1, restore  # the keyed chain, with the source's ring
    assert f"to {restore['lastEvent']} (the last event kept" in verified["message"], verified

    print(f"{FULL} Ready in {wait_ready(source, FULL)} s after {PITR}")
    restore = status(source, FULL)["restore"]  # what the Job verified, before any serving
    assert restore["verified"] and restore["links"] >= 1 and restore["transcripts"] >= 1, \
        restore
    assert (restore["lastEvent"], restore["headHash"]) == (chain["events"],
                                                           chain["head_hash"]), (restore, chain)
    at_full = Client(source, FULL, token)
    try:
        restored = answers(at_full, signed)
    finally:
        at_full.forward.stop()
    assert restored == expected  # memories, links and replay alike
    (link,) = [x for x in restored["links"]["links"] if x["relation"] == "derived_from"]
    verify_link(signed.public_key, link)  # the agent's signature, as restored
    assert restored["replay"]["citations"][0]["text"] == "to MinIO, hourly", restored["replay"]
    assert sql(source, FULL, USAGE) == usage  # the quotas' usage counters
    deep = hacluster.deep_audit(kubectl, source, FULL, keyed=True)
    assert deep.returncode == 0 and deep.stdout.startswith("ok:"), deep.stdout + deep.stderr
    for name in (PITR, FULL):  # free the node for the next restore
        kubectl("delete", f"memorycortex/{name}", "-n", source, "--wait=false")
        kubectl("delete", f"clusters.postgresql.cnpg.io/{name}-db", "-n", source,
                "--wait=false")


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def test_a_restore_to_the_latest_point_holds_every_write_or_says_which_not(
        source: str, api: tuple[Get, Any]) -> None:
    """Issue 38 item 4: write, restore at once with the documented "latest" target (no
    ``targetTime``), and compare with the acknowledged writes: the restore holds exactly
    those acknowledged before its ``reachedAt`` (all of them, or the status says where the
    reach ended), and the source's ``status.backup`` told beforehand how far the archive
    reached."""
    _, post = api
    acknowledged: dict[str, datetime] = {}
    for i in range(5):
        code, answer = post("/v1/memories", {"namespace": "bk", "content": f"latest {i}"})
        assert code == 201, answer
        acknowledged[answer["id"]] = _when(answer["created_at"])
    last_ack = max(acknowledged.values())
    restore_from_source(LATEST, source, {"objectStore": store_spec(), "sourceCortex": SOURCE})

    def reach() -> dict[str, Any]:  # the operator reads it from the primary on each pass
        return dict(status(source, SOURCE).get("backup") or {})
    # Refreshed every archiveTimeoutSeconds: a reach that knows of the writes above.
    wait_until(lambda: reach().get("unarchivedBytes", 0) > 0 or _when(
        reach().get("latestRestorePoint") or "1970-01-01T00:00:00Z") >= last_ack,
        seconds=150, interval_s=2.0, what=f"{SOURCE}'s status.backup reaching the writes")
    told = reach()
    print(f"\n{SOURCE}'s archive before the restore: {told}")
    assert told["lastArchivedWAL"] and told["lastArchivedLSN"], told
    complete = told.get("unarchivedBytes") == 0  # said: every write so far is archived
    print(f"{LATEST} Ready in {wait_ready(source, LATEST)} s")
    restore = status(source, LATEST)["restore"]
    # reachedAt: when the last event kept was written; no event kept (the archive ended
    # before any write: lastEvent 0) reaches none of them.
    assert restore["verified"] and (restore.get("reachedAt") or restore["lastEvent"] == 0), \
        restore
    reached = _when(restore["reachedAt"]) if restore.get("reachedAt") else None
    held = {row[0] for row in sql(source, LATEST, "SELECT id::text FROM memories")}
    missing = {i for i in acknowledged if i not in held}
    print(f"{LATEST} reached {restore.get('reachedAt')} (event {restore['lastEvent']}): "
          f"{len(acknowledged) - len(missing)} of {len(acknowledged)} writes just acknowledged")
    # Every acknowledged write up to reachedAt is there, none after: the status names the
    # point, and the writes past it are exactly the ones not reachable.
    assert missing == {i for i, at in acknowledged.items() if reached is None or at > reached}, (
        restore, acknowledged, held)
    assert not (complete and missing), (told, missing)
    kubectl("delete", f"memorycortex/{LATEST}", "-n", source, "--wait=false")
    kubectl("delete", f"clusters.postgresql.cnpg.io/{LATEST}-db", "-n", source, "--wait=false")


def listing(client: Client) -> list[dict[str, Any]]:
    """Every memory, page by page (the cursor of ``GET /v1/memories``)."""
    found, cursor = [], ""
    while True:
        page = client.get(f"/v1/memories?limit=500{cursor}")
        found += page["memories"]
        if not page.get("next"):
            return found
        cursor = "&cursor=" + urllib.parse.quote(page["next"], safe="")


def test_a_logical_backup_restores_into_a_new_cortex_with_the_source_signer_pinned(
        source: str, api: tuple[Get, Any], token: str, store: Store) -> None:
    """The logical path (ADR 0041, 0052, 0064): spec.backup.logical's CronJob exports the
    source to MinIO; a new cortex with spec.restore.logical, the source's audit signer
    pinned by its Secret, imports it, verifies (DataVerified=True) and serves the same
    memories. Before the tampering test: the import refuses a source whose rows do not
    match its chain."""
    _, post = api
    write(post, "logical", 3)
    where = {**store_spec(), "path": f"{PREFIX}-logical"}
    ok(kubectl("patch", f"memorycortex/{SOURCE}", "-n", source, "--type=merge", "-p",
               json.dumps({"spec": {"backup": {"logical": {"objectStore": where}}}})))
    wait_until(lambda: kubectl("get", f"cronjob/{SOURCE}-backup", "-n", source).returncode
               == 0, seconds=120, interval_s=1.0, what="the logical backup's CronJob")
    began = time.monotonic()
    ok(kubectl("create", "job", f"{SOURCE}-backup-now", f"--from=cronjob/{SOURCE}-backup",
               "-n", source))
    ok(kubectl("wait", "-n", source, "--for=condition=Complete", f"--timeout={BACKUP_S:.0f}s",
               f"job/{SOURCE}-backup-now"))
    assert any(k.endswith("/manifest.json") for k in store.keys(f"{PREFIX}-logical/"))
    print(f"\nlogical backup of {SOURCE} in {round(time.monotonic() - began, 1)} s")
    at_source = Client(source, SOURCE, token)
    try:
        memories = listing(at_source)
    finally:
        at_source.forward.stop()

    copy_master_key(LOGICAL, source)  # the bundle's rows rest sealed under it
    body = cortex(LOGICAL, source)
    body["spec"]["restore"] = {"logical": {"objectStore": where, "signer": {
        "secretRef": {"name": f"{SOURCE}-audit-signer"}}}}
    ok(kubectl("apply", "-f", "-", input=json.dumps(body)))
    print(f"{LOGICAL} Ready in {wait_ready(source, LOGICAL)} s")
    verified = condition(source, LOGICAL, "DataVerified")
    assert verified["status"] == "True", verified
    assert status(source, LOGICAL)["restore"]["verified"], status(source, LOGICAL)
    at_restored = Client(source, LOGICAL, token)
    try:
        assert listing(at_restored) == memories
    finally:
        at_restored.forward.stop()
    kubectl("delete", f"memorycortex/{LOGICAL}", "-n", source, "--wait=false")
    kubectl("delete", f"clusters.postgresql.cnpg.io/{LOGICAL}-db", "-n", source, "--wait=false")


def test_a_row_changed_behind_the_server_never_serves(source: str, api: tuple[Get, Any]
                                                       ) -> None:
    get, _ = api
    code, page = get("/v1/memories?limit=500")
    assert code == 200, page
    (victim,) = [m["id"] for m in page["memories"] if m["content"] == "after 1"]
    # its text changed, plain or sealed (one byte of the sealed value: it no longer opens)
    sql(source, SOURCE, "UPDATE memories SET "
                        "content = CASE WHEN sealed IS NULL THEN 'changed behind the server' "
                        "ELSE content END, "
                        "sealed = set_byte(sealed, 20, (get_byte(sealed, 20) + 1) % 256) "
                        f"WHERE id = '{victim}'")
    wait_until(archived_after_switch(source), seconds=120, interval_s=1.0,
               what="the last WAL segment archived")
    restore_from_source(TAMPERED, source, {"objectStore": store_spec(), "sourceCortex": SOURCE})
    began = time.monotonic()
    wait_until(lambda: condition(source, TAMPERED, "DataVerified").get("reason") ==
               "RestoreNotVerified", seconds=READY_S, interval_s=2.0,
               what=f"{TAMPERED}'s verification failing")
    print(f"\n{TAMPERED} refused in {round(time.monotonic() - began, 1)} s: "
          f"{condition(source, TAMPERED, 'DataVerified')['message']}")
    assert victim in status(source, TAMPERED)["restore"]["firstMismatch"]
    assert condition(source, TAMPERED, "Ready")["reason"] == "RestoreNotVerified"
    assert kubectl("get", f"deployment/{TAMPERED}-server", "-n", source).returncode != 0
    events = kubectl_json("get", "events", "-n", source, "--field-selector",
                          f"involvedObject.name={TAMPERED}")["items"]
    assert any(e["type"] == "Warning" and e["reason"] == "RestoreNotVerified" for e in events)
    assert condition(source, SOURCE, "Ready")["status"] == "True"  # the source untouched
    kubectl("delete", f"memorycortex/{TAMPERED}", "-n", source, "--wait=false")
    kubectl("delete", f"clusters.postgresql.cnpg.io/{TAMPERED}-db", "-n", source,
            "--wait=false")


def test_an_unreachable_object_store_is_reported_and_the_cortex_keeps_serving(
        source: str, store: Store, api: tuple[Get, Any]) -> None:
    _, post = api
    store.installer.scale(0)
    try:
        wait_until(lambda: not store.installer.ready(), seconds=60, what="MinIO down")
        write(post, "outage", 2)
        sql(source, SOURCE, "SELECT pg_switch_wal()")
        wait_until(lambda: condition(source, SOURCE, "BackupHealthy").get("status") == "False",
                   seconds=300, interval_s=2.0, what="BackupHealthy False")
        failing = condition(source, SOURCE, "BackupHealthy")
        print(f"\nobject store down: {failing['reason']}: {failing['message']}")
        assert failing["reason"] in ("ArchivingFailing", "BackupFailed"), failing
        events = kubectl_json("get", "events", "-n", source, "--field-selector",
                              f"involvedObject.name={SOURCE}")["items"]
        assert any(e["type"] == "Warning" and e["reason"] == failing["reason"] for e in events)
        assert len(write(post, "still serving", 2)) == 2
        assert condition(source, SOURCE, "Ready")["status"] == "True"
    finally:
        store.installer.scale(1)
    wait_until(store.installer.ready, seconds=180, interval_s=1.0, what="MinIO back")
    wait_until(archived_after_switch(source), seconds=300, interval_s=2.0,
               what="archiving resumed")
