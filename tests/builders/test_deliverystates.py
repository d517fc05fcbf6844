"""A CortexSubscription's delivery status from its cortex's report (ADR 0130), with literals:
the fields as the report says them (values the server should not send dropped), and the
Delivering condition's reason for each state a user must tell apart."""

from __future__ import annotations

from typing import Any

from attested_cortex.builders.deliverystates import delivery
from attested_cortex.builders.reasons import REASONS, TRANSITIONS

OK = {"name": "archive", "enabled": True, "lag": 0,
      "last_success_at": "2026-12-05T05:00:00+00:00", "last_failure_at": None,
      "last_error": None, "dead_letters": 0, "behind_retention": False}


def reason(item: dict[str, Any] | None, name: str = "archive") -> tuple[str, str]:
    _, observed = delivery({"subscriptions": [item] if item else []}, name)
    return observed.status, observed.reason


def test_a_healthy_subscription_shows_its_lag_and_last_success() -> None:
    shown, observed = delivery({"subscriptions": [{**OK, "name": "other"}, {**OK, "lag": 3}]},
                               "archive")
    assert shown == {"lag": 3, "lastSuccessTime": "2026-12-05T05:00:00+00:00",
                     "deadLetters": 0, "behindRetention": False}
    assert (observed.type, observed.status, observed.reason) == ("Delivering", "True",
                                                                 "Delivering")


def test_each_state_has_its_reason() -> None:
    assert reason(None) == ("False", "DeliveryPending")
    assert reason({**OK, "enabled": False}) == ("False", "DeliveryDisabled")
    assert reason({**OK, "behind_retention": True, "dead_letters": 2}) == (
        "False", "BehindRetention")
    assert reason({**OK, "dead_letters": 2}) == ("False", "DeadLetters")
    failing = {**OK, "last_failure_at": "2026-12-05T05:00:01+00:00", "last_error": "HTTP 503"}
    assert reason(failing) == ("False", "DeliveryFailing")
    recovered = {**failing, "last_success_at": "2026-12-05T05:00:02+00:00"}
    assert reason(recovered) == ("True", "Delivering")
    never = {**failing, "last_success_at": None}
    assert reason(never) == ("False", "DeliveryFailing")


def test_a_failure_says_its_class_and_values_the_server_should_not_send_are_dropped() -> None:
    shown, observed = delivery({"subscriptions": [{
        **OK, "lag": -1, "dead_letters": True, "last_success_at": "yesterday",
        "last_failure_at": "2026-12-05T05:00:01+00:00", "last_error": "HTTP 503" + "x" * 300,
        "behind_retention": "no"}]}, "archive")
    assert shown == {"lastFailureTime": "2026-12-05T05:00:01+00:00",
                     "lastError": ("HTTP 503" + "x" * 300)[:128]}
    assert observed.reason == "DeliveryFailing" and "HTTP 503" in observed.message
    assert delivery({"subscriptions": "nonsense"}, "archive")[0] is None


def test_the_reasons_are_classified() -> None:
    for name in ("Delivering", "DeliveryPending", "DeliveryDisabled", "DeliveryFailing",
                 "DeadLetters", "BehindRetention"):
        assert name in REASONS
    assert {"DeliveryPending", "DeliveryDisabled"} <= TRANSITIONS  # Normal events
    assert not {"DeliveryFailing", "DeadLetters", "BehindRetention"} & TRANSITIONS  # Warnings
