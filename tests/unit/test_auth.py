"""Authentication methods: dev header, hashed bearer tokens, and the loopback rule."""

import hashlib
from pathlib import Path

import pytest

from attested_cortex.errors import InvalidInputError, UnauthenticatedError
from attested_cortex.server.auth import DevAuth, TokenAuth, check_dev_listen


async def test_dev_auth_reads_the_header() -> None:
    assert (await DevAuth().authenticate({"X-Agent-Id": "dev:alice"})).agent_id == "dev:alice"


@pytest.mark.parametrize("headers", [{}, {"X-Agent-Id": ""}, {"X-Agent-Id": "bad id"},
                                     {"X-Agent-Id": "x" * 201}])
async def test_dev_auth_rejects_missing_or_bad_ids(headers: dict[str, str]) -> None:
    with pytest.raises(UnauthenticatedError):
        await DevAuth().authenticate(headers)


def tokens_file(tmp_path: Path, lines: str) -> Path:
    path = tmp_path / "tokens"
    path.write_text(lines)
    return path


async def test_token_auth_maps_hash_to_agent(tmp_path: Path) -> None:
    digest = hashlib.sha256(b"s3cret-token").hexdigest()
    auth = TokenAuth.from_file(tokens_file(tmp_path, f"# agents\n{digest} k8s:ns/planner\n"))
    caller = await auth.authenticate({"Authorization": "Bearer s3cret-token"})
    assert caller.agent_id == "k8s:ns/planner" and caller.auth == "tokens"


@pytest.mark.parametrize("header", ["", "Bearer", "Bearer wrong", "Basic s3cret-token",
                                    "s3cret-token"])
async def test_token_auth_rejects(tmp_path: Path, header: str) -> None:
    digest = hashlib.sha256(b"s3cret-token").hexdigest()
    auth = TokenAuth.from_file(tokens_file(tmp_path, f"{digest} agent\n"))
    with pytest.raises(UnauthenticatedError) as err:
        await auth.authenticate({"Authorization": header})
    assert "s3cret" not in err.value.message


def test_token_file_errors_name_the_line(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"tokens:2: expected"):
        TokenAuth.from_file(tokens_file(tmp_path, "# ok\nnot-a-hash agent\n"))


def test_dev_auth_only_on_loopback() -> None:
    check_dev_listen(["127.0.0.1", "::1", "localhost", "127.0.0.2"])
    with pytest.raises(InvalidInputError, match="only allowed on loopback"):
        check_dev_listen(["127.0.0.1", "0.0.0.0"])
