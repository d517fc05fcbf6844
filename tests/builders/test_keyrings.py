"""Public keys of AgentIdentities as keyring documents the server trusts."""

import base64
from dataclasses import replace
from datetime import UTC, datetime

from attested_cortex.attest.keyring import parse_keyring_file
from attested_cortex.builders.inputs import Identity, parse_identity
from attested_cortex.builders.keyrings import (
    admitted,
    agent_id,
    key_holder_of,
    keyring_file,
    keyring_files,
    rival_of,
)
from tests.builders.specs import CORTEX, NAMESPACE, body, identity, public_key


def test_agent_id_default_and_explicit() -> None:
    assert agent_id(identity("planner")) == f"k8s:{NAMESPACE}/planner"
    assert agent_id(identity("planner", agent_id="planner@corp")) == "planner@corp"


def test_single_key_is_open_on_both_sides() -> None:
    doc = keyring_file(identity("planner"))
    key, fingerprint = public_key(1)
    assert doc == {"agent_id": f"k8s:{NAMESPACE}/planner", "keys": [
        {"revision": 1, "public_key": key, "fingerprint": fingerprint, "valid_from": None,
         "valid_until": None}]}
    assert len(parse_keyring_file(doc)) == 1


def test_rotations_chain_windows_oldest_first() -> None:
    times = [datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC),
             datetime(2026, 7, 1, tzinfo=UTC)]
    doc = keyring_file(identity("planner", revision=4, retired=times))
    assert doc is not None
    keys = doc["keys"]
    assert [k["revision"] for k in keys] == [1, 2, 3, 4]
    ms = [int(t.timestamp() * 1000) for t in times]
    assert [(k["valid_from"], k["valid_until"]) for k in keys] == [
        (None, ms[0]), (ms[0], ms[1]), (ms[1], ms[2]), (ms[2], None)]
    assert [r.public_key for r in parse_keyring_file(doc)] == [
        base64.b64decode(public_key(n)[0]) for n in (1, 2, 3, 4)]


def test_agent_custody_contributes_its_public_key() -> None:
    doc = keyring_file(identity("scout", custody="Agent"))
    assert doc is not None and doc["keys"][0]["public_key"] == public_key(1)[0]


def test_no_key_yet_no_document() -> None:
    fresh = parse_identity(body("AgentIdentity", "fresh", {"cortexRef": {"name": CORTEX}}))
    assert keyring_file(fresh) is None
    assert keyring_files([fresh]) == {}


def test_files_named_per_identity_in_name_order() -> None:
    files = keyring_files([identity("writer"), identity("planner")])
    assert list(files) == ["keyring-planner.json", "keyring-writer.json"]


def test_no_private_material() -> None:
    text = str(keyring_files([identity("planner", revision=2,
                                       retired=[datetime(2026, 1, 1, tzinfo=UTC)])]))
    assert "PRIVATE" not in text and "private" not in text


def _created(name: str, at: str, agent: str = "bob") -> Identity:
    made = identity(name, agent_id=agent)
    return replace(made, meta=replace(made.meta, created=at))


def test_one_agent_id_one_identity_the_first_created_holds_it() -> None:
    first = _created("zed", "2026-01-01T00:00:00Z")
    later = _created("amy", "2026-01-02T00:00:00Z")
    other = _created("cat", "2026-01-03T00:00:00Z", agent="cat")
    assert rival_of(later, [first, later, other]) == (first, "agent id bob")
    assert rival_of(first, [first, later, other]) is None
    assert admitted([later, other, first]) == [other, first]
    files = keyring_files([later, first, other])
    assert sorted(files) == ["keyring-cat.json", "keyring-zed.json"]


def test_one_agent_id_created_in_the_same_second_goes_to_the_first_name() -> None:
    a, b = _created("a", "2026-01-01T00:00:00Z"), _created("b", "2026-01-01T00:00:00Z")
    assert admitted([b, a]) == [a]


def test_one_service_account_one_identity() -> None:
    first = replace(identity("p", service_account="sa"),
                    meta=replace(identity("p").meta, created="2026-01-01T00:00:00Z"))
    later = replace(identity("q", service_account="sa"),
                    meta=replace(identity("q").meta, created="2026-01-02T00:00:00Z"))
    assert rival_of(later, [first, later]) == (first, f"service account {NAMESPACE}/sa")
    assert admitted([later, first]) == [first]


def test_a_key_recorded_by_an_earlier_identity_is_not_another_ones() -> None:
    first = _created("p", "2026-01-01T00:00:00Z", "p")
    later = _created("q", "2026-01-02T00:00:00Z", "q")
    fingerprint = first.status.fingerprint
    assert fingerprint and key_holder_of(later, fingerprint, [first, later]) == first
    assert key_holder_of(first, fingerprint, [first, later]) is None
    assert key_holder_of(later, public_key(9)[1], [first, later]) is None
