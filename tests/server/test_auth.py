"""Authentication methods: dev header, hashed bearer tokens, and the loopback rule."""

from dataclasses import replace
from pathlib import Path

import pytest

from attested_cortex.errors import DeniedError, InvalidInputError, UnauthenticatedError
from attested_cortex.policy import tiers
from attested_cortex.policy.scopes import ScopeSet
from attested_cortex.server.auth import DevAuth, TokenAuth, check_dev_listen, confine
from attested_cortex.server.tokens import digest, generate, well_formed
from attested_cortex.service.pipeline.context import Caller
from attested_cortex.types import AgentId

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


async def test_a_tokens_file_line_carries_its_trust_tier(tmp_path: Path) -> None:
    """``tier=`` after the scopes, or alone; none: the default given to the loader."""
    second, hashed = generate()
    auth = TokenAuth.from_file(
        tokens_file(tmp_path, f"{HASH} relay memory.read tier=Untrusted\n{hashed} local\n"),
        default_tier="SemiTrusted")
    relay = await auth.authenticate({"Authorization": f"Bearer {TOKEN}"})
    local = await auth.authenticate({"Authorization": f"Bearer {second}"})
    assert (relay.tier, str(relay.scopes)) == ("Untrusted", "memory.read")
    assert local.tier == "SemiTrusted"
    with pytest.raises(InvalidInputError, match="tokens:1: tier must be one of"):
        TokenAuth.from_file(tokens_file(tmp_path, f"{HASH} relay tier=Root\n"))


def test_confine_caps_lowers_and_refuses() -> None:
    ceilings = tiers.ceilings()
    held = Caller(AgentId("a"), "tokens", ScopeSet.parse(["memory.read", "memory.forget:p/**",
                                                          "memory.forget", "graph.read"]),
                  tier="SemiTrusted")
    semi = confine(held, ceilings, {})
    assert str(semi.scopes) == "memory.forget:p/** memory.read"
    assert semi.held == held.scopes
    low = confine(held, ceilings, {"X-Cortex-Trust-Tier": "Untrusted"})
    assert (low.tier, str(low.scopes)) == ("Untrusted", "")
    for refused, caller in (("Trusted", held), (None, replace(held, tier="Kernel"))):
        headers = {"X-Cortex-Trust-Tier": refused} if refused else {}
        with pytest.raises(DeniedError) as err:
            confine(caller, ceilings, headers)
        assert err.value.code == "trust_ceiling"
