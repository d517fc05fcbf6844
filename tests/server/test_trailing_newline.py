"""A final ``\\n`` walks past no rule (issue 20, item 11): ``$`` with ``re.match`` accepts
one, so namespace ``"held\\n"`` was stored (201) where ``held/x`` is held (202). Every
pattern that validates input now matches the whole string."""

from __future__ import annotations

from pathlib import Path

import pytest

from attested_cortex.errors import InvalidInputError
from attested_cortex.hooks.loading import parse_hook
from attested_cortex.hooks.settings import HookConfigError
from attested_cortex.namespaces import namespace_problem
from attested_cortex.policy.patterns import parse_pattern
from attested_cortex.server.auth import AGENT_ID
from attested_cortex.server.tokens import generate, well_formed
from tests.server.test_hooks_api import count_memories
from tests.server.test_pipeline import approval_settings
from tests.support.cortex import MakeCortex


async def test_a_namespace_with_a_final_newline_is_400_not_stored(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, **approval_settings(tmp_path))
    for namespace in ("held\n", "held/x\n", "t\n"):
        reply = await client.call("POST", "/v1/memories",
                                  {"namespace": namespace, "content": "walks past"})
        assert reply.status == 400, (namespace, reply.text)
    recall = await client.call("POST", "/v1/recall", {"query": "walks past"})
    assert recall.body["results"] == [] and count_memories(migrated_pg15_dsn) == 0


@pytest.mark.parametrize("text", ["held\n", "team/*\n", "a/**/b\n"])
def test_a_rule_pattern_with_a_final_newline_is_refused(text: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_pattern(text)
    assert namespace_problem(text.replace("*", "x")) is not None


def test_agent_ids_and_tokens_with_a_final_newline_are_not_accepted() -> None:
    assert AGENT_ID.fullmatch("dev:a\n") is None
    token, _ = generate()
    assert well_formed(token) and not well_formed(token + "\n")


def test_a_hook_name_with_a_final_newline_is_refused() -> None:
    with pytest.raises(HookConfigError):
        parse_hook({"name": "audit\n", "events": ["pre_store"], "mode": "exec",
                    "command": ["/bin/true"]}, index=0)
