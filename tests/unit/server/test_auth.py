"""Authentication methods: dev header, hashed bearer tokens, and the loopback rule."""

from pathlib import Path

import pytest

from attested_cortex.errors import InvalidInputError, UnauthenticatedError
from attested_cortex.server.auth import DevAuth, TokenAuth, check_dev_listen
from attested_cortex.server.tokens import digest, generate, well_formed

TOKEN, HASH = generate()


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


async def test_token_auth_maps_hash_to_agent_and_scopes(tmp_path: Path) -> None:
    auth = TokenAuth.from_file(tokens_file(
        tmp_path, f"# agents\n{HASH} k8s:ns/planner memory.read:team/**,graph.read\n"))
    caller = await auth.authenticate({"Authorization": f"Bearer {TOKEN}"})
    assert caller.agent_id == "k8s:ns/planner" and caller.auth == "tokens"
    assert str(caller.scopes) == "graph.read memory.read:team/**"


@pytest.mark.parametrize("header", ["", "Bearer", "Bearer wrong", f"Basic {TOKEN}", TOKEN,
                                    f"Bearer {TOKEN}x"])
async def test_token_auth_rejects(tmp_path: Path, header: str) -> None:
    auth = TokenAuth.from_file(tokens_file(tmp_path, f"{HASH} agent\n"))
    with pytest.raises(UnauthenticatedError) as err:
        await auth.authenticate({"Authorization": header})
    assert TOKEN not in err.value.message


def test_generated_tokens_have_256_bits_and_the_mark() -> None:
    tokens = {generate()[0] for _ in range(20)}
    assert len(tokens) == 20 and all(well_formed(t) and len(t) == 47 for t in tokens)


def test_a_hand_chosen_token_is_refused_when_the_file_is_loaded(tmp_path: Path) -> None:
    weak = next(t for t in (f"hunter{i}" for i in range(100)) if digest(t)[0] != 0)
    with pytest.raises(InvalidInputError, match="cortexctl tokens generate"):
        TokenAuth.from_file(tokens_file(tmp_path, f"{digest(weak).hex()} agent\n"))


def test_unknown_scopes_in_the_tokens_file_name_the_line(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"tokens:1: unknown scope 'memory.rede'"):
        TokenAuth.from_file(tokens_file(tmp_path, f"{HASH} agent memory.rede\n"))


def test_token_file_errors_name_the_line(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"tokens:2: expected"):
        TokenAuth.from_file(tokens_file(tmp_path, "# ok\nnot-a-hash agent\n"))


def test_dev_auth_only_on_loopback() -> None:
    check_dev_listen(["127.0.0.1", "::1", "localhost", "127.0.0.2"])
    with pytest.raises(InvalidInputError, match="only allowed on loopback"):
        check_dev_listen(["127.0.0.1", "0.0.0.0"])
