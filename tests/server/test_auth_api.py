"""Authentication over HTTP: 401 without credentials, tokens mode end to end."""

from pathlib import Path

from attested_cortex.server.auth import TokenAuth
from attested_cortex.server.tokens import generate
from tests.support.cortex import CortexClient, MakeCortex


async def test_missing_identity_is_401_but_health_is_public(cortex: CortexClient) -> None:
    reply = await cortex.call("POST", "/v1/recall", {"query": "x"}, agent=None)
    assert reply.status == 401 and reply.body["error"]["code"] == "unauthenticated"
    assert (await cortex.call("GET", "/healthz", agent=None)).status == 200
    assert (await cortex.call("GET", "/v1/openapi.json", agent=None)).status == 200


async def test_tokens_mode(make_cortex: MakeCortex, pg15_dsn: str, tmp_path: Path) -> None:
    token, digest = generate()
    (tmp_path / "tokens").write_text(f"{digest} k8s:team/writer\n")
    client = await make_cortex(pg15_dsn, auth=TokenAuth.from_file(tmp_path / "tokens"))
    ok = await client.call("POST", "/v1/memories", {"namespace": "n", "content": "c"},
                           agent=None, headers={"Authorization": f"Bearer {token}"})
    assert ok.status == 201 and ok.body["author"] == "k8s:team/writer"
    spoof = await client.call("POST", "/v1/memories", {"namespace": "n", "content": "c"},
                              agent="dev:mallory")
    assert spoof.status == 401
    bad = await client.call("POST", "/v1/memories", {"namespace": "n", "content": "c"},
                            agent=None, headers={"Authorization": "Bearer nope"})
    assert bad.status == 401 and "nope" not in bad.text
