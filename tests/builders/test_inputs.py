"""Custom resource bodies parsed into builder inputs, and the refusals with their messages."""

from typing import Any

import pytest

from attested_cortex.builders.inputs import (
    MAX_CORTEX_NAME,
    InvalidSpecError,
    parse_chain,
    parse_cortex,
    parse_identity,
    parse_meta,
    parse_rule,
)
from tests.builders.specs import CORTEX, NAMESPACE, body, cortex, daemon_hook


def test_meta() -> None:
    meta = parse_meta(body("MemoryCortex", "notes", {}, uid="u-1", generation=7))
    assert (meta.name, meta.namespace, meta.uid, meta.generation) == ("notes", NAMESPACE,
                                                                      "u-1", 7)
    assert parse_meta({}).generation == 0


def test_cortex_defaults_are_filled_in() -> None:
    spec = cortex().spec
    assert spec.database.managed is not None and spec.database.external is None
    assert spec.database.managed.storage.size == "10Gi"
    assert spec.server.replicas == 1 and spec.server.auth.mode == "Kubernetes"
    assert spec.approval.enabled is True and spec.permissions.mode == "Advisory"
    assert spec.schema_.target_version is None


def test_name_of_forty_characters_is_accepted() -> None:
    assert parse_cortex(body("MemoryCortex", "n" * MAX_CORTEX_NAME,
                             {"database": {"managed": {}}})).meta.name == "n" * 40


def test_name_longer_than_forty_characters_is_refused() -> None:
    with pytest.raises(InvalidSpecError, match=r"^metadata\.name: at most 40 characters"):
        parse_cortex(body("MemoryCortex", "n" * 41, {"database": {"managed": {}}}))


@pytest.mark.parametrize("name", ["9lives", "team.notes"])
def test_name_that_cannot_name_a_service_is_refused(name: str) -> None:
    """MemoryCortex names are DNS subdomains; the server's Service takes the cortex name and
    must be a DNS-1035 label (a letter first, no dots)."""
    with pytest.raises(InvalidSpecError, match=r"^metadata\.name"):
        parse_cortex(body("MemoryCortex", name, {"database": {"managed": {}}}))


@pytest.mark.parametrize(("spec", "field"), [
    ({"database": {"managed": {}}, "server": {"replicas": 50}}, "spec.server.replicas"),
    ({"database": {"managed": {"storage": {"size": "ten gigs"}}}},
     "spec.database.managed.storage.size"),
    ({"database": {"managed": {}}, "server": {"replicaz": 2}}, "spec.server.replicaz"),
    ({"database": {"managed": {}}, "permissions": {"mode": "Strict"}}, "spec.permissions.mode"),
    ({"database": {"external": {}}}, "spec.database.external.secretRef"),
    ({}, "spec.database"),
])
def test_cortex_spec_not_matching_the_model_names_the_field(spec: dict[str, Any],
                                                            field: str) -> None:
    with pytest.raises(InvalidSpecError, match=rf"^{field.replace('.', chr(92) + '.')}: "):
        parse_cortex(body("MemoryCortex", CORTEX, spec))


def test_invalid_status_names_the_status_field() -> None:
    chain_body = body("HookChain", "c", {"cortexRef": {"name": CORTEX},
                                         "hooks": [daemon_hook("x")]},
                      status={"hookCount": -1})
    with pytest.raises(InvalidSpecError, match=r"^status\.hookCount: "):
        parse_chain(chain_body)


def test_rule_spec_errors_name_the_field() -> None:
    bad = {"cortexRef": {"name": CORTEX}, "namespace": "team/**", "agents": [],
           "operations": ["*"], "decision": "Allow"}
    with pytest.raises(InvalidSpecError, match=r"^spec\.agents: "):
        parse_rule(body("PermissionRule", "r", bad))


def test_identity_spec_errors_name_the_field() -> None:
    bad = {"cortexRef": {"name": CORTEX}, "keyCustody": "Nobody"}
    with pytest.raises(InvalidSpecError, match=r"^spec\.keyCustody: "):
        parse_identity(body("AgentIdentity", "i", bad))


def test_missing_spec_is_refused() -> None:
    with pytest.raises(InvalidSpecError, match=r"^spec\.cortexRef: "):
        parse_rule({"metadata": {"name": "r", "namespace": NAMESPACE}})


def test_inputs_are_frozen() -> None:
    c = cortex()
    with pytest.raises(Exception, match="frozen"):
        c.spec.server.replicas = 3  # type: ignore[misc]
