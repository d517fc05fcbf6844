"""Each top-level key of the server's ``config.yaml`` is made whole in one place (issue 43
item 10): a spec section's translation is one function of builders/settings.py, which
``configmaps.server_settings`` only puts together, never completes afterwards (the approval
section was made in settings.py and given its HMAC file in configmaps.py). Pure, a few ms."""

from __future__ import annotations

from attested_cortex.builders import configmaps
from attested_cortex.builders.configmaps import Satellites
from tests.builders.specs import cortex
from tests.support.walks import sections

#: Every section the assembly could complete after the fact is on: approval with its HMAC
#: Secret, token auth (tokens_file), transcripts, quotas.
SPEC = {"approval": {"enabled": True, "timeoutSeconds": 600,
                     "hmacSecretRef": {"name": "approval-hmac", "key": "hmac"}},
        "server": {"auth": {"mode": "Tokens", "tokensSecretRef": {"name": "agent-tokens"}}},
        "transcripts": {"enabled": True, "retentionDays": 30},
        "quotas": {"requestsPerSecond": 25, "storagePerAgent": "1.5Gi"}}


def test_each_config_section_is_made_by_one_function_and_left_whole() -> None:
    made = sections(configmaps.server_settings, cortex(SPEC), Satellites())
    assert {s.key for s in made} >= {"approval", "auth", "tokens_file", "transcripts"}
    assert [s for s in made if len(s.makers) > 1 or s.patched] == []
    approval = next(s for s in made if s.key == "approval")
    assert approval.makers == ["builders.settings.approval_settings"]
