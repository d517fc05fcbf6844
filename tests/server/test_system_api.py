"""Health, readiness, metrics, capabilities and the OpenAPI document."""

import psycopg

from attested_cortex.store.schema import MAX_SUPPORTED_SCHEMA, MIGRATIONS
from tests.support.cortex import CortexClient, MakeCortex


async def test_health_ready_and_request_ids(cortex: CortexClient) -> None:
    health = await cortex.call("GET", "/healthz")
    assert health.status == 200 and health.headers["X-Request-Id"]
    ready = await cortex.call("GET", "/readyz", headers={"X-Request-Id": "abc-123"})
    assert ready.status == 200 and ready.body["status"] == "ready"
    assert ready.headers["X-Request-Id"] == "abc-123"


async def test_not_ready_until_migrated(make_cortex: MakeCortex, pg15_dsn: str) -> None:
    from attested_cortex.store.migrating import migrate

    await migrate(pg15_dsn, target=1)
    client = await make_cortex(pg15_dsn, migrated=False)
    ready = await client.call("GET", "/readyz")
    assert ready.status == 503 and ready.body["checks"]["schema"]["version"] == 1
    await migrate(pg15_dsn)
    assert (await client.call("GET", "/readyz")).status == 200


async def test_metrics_count_requests(cortex: CortexClient) -> None:
    await cortex.call("GET", "/healthz")
    text = (await cortex.call("GET", "/metrics")).text
    assert 'cortex_http_requests_total{method="GET",route="/healthz",status="200"}' in text


async def test_capabilities_are_read_live(cortex: CortexClient) -> None:
    caps = (await cortex.call("GET", "/v1/capabilities")).body
    assert caps["schema_version"] == MAX_SUPPORTED_SCHEMA
    assert caps["auth"] == {"mode": "dev"}
    assert caps["limits"]["max_body_bytes"] == 1024 * 1024
    with psycopg.connect(cortex.dsn) as conn:  # the database changes under the server
        conn.execute("DELETE FROM schema_migrations WHERE version = %s", (MAX_SUPPORTED_SCHEMA,))
    caps = (await cortex.call("GET", "/v1/capabilities")).body
    assert caps["schema_version"] == MIGRATIONS[-2].version  # the shipped one before


async def test_openapi_documents_every_route(cortex: CortexClient) -> None:
    doc = (await cortex.call("GET", "/v1/openapi.json")).body
    assert doc["openapi"].startswith("3.1")
    documented = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    served = {(r.method, r.resource.canonical) for r in cortex.extra["app"].router.routes()
              if r.method != "HEAD" and r.resource is not None}
    assert served <= documented, served - documented
    for needed in [("POST", "/v1/memories"), ("GET", "/v1/memories/{id}"),
                   ("PATCH", "/v1/memories/{id}"), ("DELETE", "/v1/memories/{id}"),
                   ("POST", "/v1/recall"), ("GET", "/v1/capabilities"), ("GET", "/healthz"),
                   ("GET", "/readyz"), ("GET", "/metrics")]:
        assert needed in documented
