"""Property-based API testing: schemathesis drives the real server from its own OpenAPI
document and finds no 5xx and no response that breaks the documented schema.

The example count is bounded so the suite stays fast; the server runs as a real
``cortexctl serve`` subprocess (schemathesis' client is synchronous), with transcripts on, so
``POST /v1/transcripts``, ``GET /v1/memories/{id}/replay`` and a memory store's
``citations`` run their real code rather than the ``transcripts_disabled`` refusal.
"""

import itertools
from collections.abc import Iterator

import psycopg
import pytest
import requests
import schemathesis
from hack.support.pgservers import PgServer
from hack.support.served import serve
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from psycopg import sql
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)


@pytest.fixture(scope="module")
def schemathesis_dsn(pg15_server: PgServer, pg15_template: str) -> str:
    name = "schemathesis_db"
    with psycopg.connect(pg15_server.admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(pg15_template)))
    return pg15_server.dsn(name)


@pytest.fixture(scope="module")
def served_base(
    schemathesis_dsn: str, tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("served")
    config = workdir / "serve.yaml"
    config.write_text("transcripts:\n  enabled: true\n")
    with serve(schemathesis_dsn, workdir, "--config", str(config)) as served:
        yield served.base


@pytest.fixture(scope="module")
def api_schema(served_base: str) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{served_base}/v1/openapi.json")


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]


def test_api_conforms(api_schema: schemathesis.BaseSchema, served_base: str) -> None:
    """Every documented operation, with generated (valid and invalid) inputs."""
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 9
    for operation, mode in itertools.product(operations, GenerationMode):

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=25, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
        def run(case: schemathesis.Case) -> None:
            response = case.call(headers={"X-Agent-Id": "dev:schemathesis"})
            case.validate_response(response, checks=CHECKS)

        try:
            run()
        except Unsatisfiable:
            # an operation without inputs has no invalid input to generate
            assert mode is GenerationMode.NEGATIVE and not operation.definition.raw.get(
                "parameters") and "requestBody" not in operation.definition.raw
    # transcripts were on, so their routes ran their real code (generated stores succeed
    # only now and then: the schema cannot say "exactly one of content and frame")
    caps = requests.get(f"{served_base}/v1/capabilities", timeout=30,
                        headers={"X-Agent-Id": "dev:schemathesis"}).json()
    assert caps["transcripts"]["enabled"] is True
