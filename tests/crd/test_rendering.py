"""The renderer turns the models into structural CRDs the API server accepts (pure checks).

Admission against a real API server is in ``test_admission.py``; these tests pin the
properties that make a schema structural and self-describing, without a cluster.
"""

from __future__ import annotations

import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from attested_cortex.crd import KINDS, build_crd, render_all
from attested_cortex.crd.hookchain import HookEvent, timeout_rules
from attested_cortex.crd.structural import SchemaTranslationError, structural_schema
from attested_cortex.hooks.events import CLASS_DEADLINES_MS, EVENTS
from tests.crd.cases import CREATE_CASES, Case

FORBIDDEN_KEYS = {"$ref", "$defs", "title", "const", "discriminator"}


def walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its dotted path."""
    yield path, node
    for name, prop in node.get("properties", {}).items():
        yield from walk(prop, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")


def schema_of(kind_name: str) -> dict[str, Any]:
    kind = next(k for k in KINDS if k.kind == kind_name)
    crd = build_crd(kind)
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


@pytest.fixture(params=[k.kind for k in KINDS])
def schema(request: pytest.FixtureRequest) -> dict[str, Any]:
    return schema_of(request.param)


def test_every_field_has_a_description(schema: dict[str, Any]) -> None:
    missing = [
        f"{path}.{name}"
        for path, node in walk(schema)
        for name, prop in node.get("properties", {}).items()
        if name != "metadata" and not prop.get("description")
    ]
    assert missing == []


def test_schema_is_structural(schema: dict[str, Any]) -> None:
    for path, node in walk(schema):
        assert not FORBIDDEN_KEYS & set(node), path
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            continue
        assert "type" in node, path
        assert "anyOf" not in node, path
        assert not ("properties" in node and "additionalProperties" in node), path
        assert node.get("default", "") is not None, path


def test_strings_and_lists_are_bounded_for_cel_cost(schema: dict[str, Any]) -> None:
    for path, node in walk(schema):
        if node.get("type") == "array":
            assert "maxItems" in node, path
        if node.get("type") == "string" and path.startswith(".spec"):
            assert {"maxLength", "enum", "format"} & set(node), path


def test_kinds_have_names_columns_and_status() -> None:
    short = {k.kind: k.short_name for k in KINDS}
    assert short == {
        "MemoryCortex": "mcx",
        "HookChain": "hc",
        "PermissionRule": "prule",
        "AgentIdentity": "aid",
        "CortexSubscription": "csub",
    }
    for kind in KINDS:
        crd = build_crd(kind)
        version = crd["spec"]["versions"][0]
        assert crd["spec"]["group"] == "cortex.attested.dev"
        assert version["name"] == "v1alpha1"
        assert version["subresources"] == {"status": {}}
        assert crd["spec"]["names"]["categories"] == ["cortex"]
        columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
        assert {"Ready", "Reason", "Age", "Message"} <= set(columns)
        assert columns["Message"]["priority"] == 1
        assert "priority" not in columns["Ready"]


def test_spec_defaults_reach_nested_fields() -> None:
    spec = schema_of("MemoryCortex")["properties"]["spec"]["properties"]
    assert spec["server"]["default"] == {}
    assert spec["server"]["properties"]["replicas"]["default"] == 1
    assert spec["server"]["properties"]["replicas"]["maximum"] == 20
    assert spec["permissions"]["properties"]["mode"]["default"] == "Advisory"
    assert spec["graph"]["properties"]["backend"]["enum"] == ["Auto", "AGE", "CTE"]


def test_conditions_have_the_metav1_shape(schema: dict[str, Any]) -> None:
    conditions = schema["properties"]["status"]["properties"]["conditions"]
    item = conditions["items"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert set(item["required"]) == {"type", "status", "lastTransitionTime", "reason", "message"}
    assert set(item["properties"]) == set(item["required"]) | {"observedGeneration"}


def test_hook_events_match_the_event_table() -> None:
    assert set(typing.get_args(HookEvent)) == set(EVENTS)


def test_timeout_rules_cover_every_class_below_the_maximum() -> None:
    tight = {c for c, ms in CLASS_DEADLINES_MS.items() if ms < max(CLASS_DEADLINES_MS.values())}
    messages = " ".join(rule["message"] for rule in timeout_rules())
    assert tight
    for cls in tight:
        assert f"{cls} event class deadline of {CLASS_DEADLINES_MS[cls]} ms" in messages


def test_unions_without_a_structural_form_are_refused() -> None:
    class Bad(BaseModel):
        value: int | str

    with pytest.raises(SchemaTranslationError, match="unsupported union"):
        structural_schema(Bad)


@pytest.mark.spawns
def test_cli_prints_all_crds_as_one_stream() -> None:
    command = [sys.executable, "-m", "attested_cortex", "crds"]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    documents = list(yaml.safe_load_all(result.stdout))
    assert documents == [build_crd(kind) for kind in KINDS]
    assert result.stdout == render_all()


@pytest.mark.spawns
def test_cli_writes_one_file_per_crd(tmp_path: Path) -> None:
    out = tmp_path / "out"
    subprocess.run(
        [sys.executable, "-m", "attested_cortex", "crds", "--out-dir", str(out)],
        capture_output=True,
        check=True,
    )
    names = sorted(path.name for path in out.iterdir())
    assert names == sorted(f"cortex.attested.dev_{k.plural}.yaml" for k in KINDS)


@pytest.mark.parametrize("case", [c for c in CREATE_CASES if c.error is None], ids=lambda c: c.id)
def test_models_read_every_valid_object(case: Case) -> None:
    kind = next(k for k in KINDS if k.kind == case.manifest["kind"])
    spec = kind.spec.model_validate(case.manifest["spec"])
    assert spec.model_dump(by_alias=True, exclude_unset=True) == case.manifest["spec"]
