"""The requests of the subscription API (``/v1/subscriptions``, MCP, ``kubectl cortex``) and
their JSON views. Pure: no I/O. Called by :mod:`.subscriptions_api`.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from attested_cortex.policy.patterns import parse_pattern
from attested_cortex.policy.targets import parse_target
from attested_cortex.store.subscriptions import DeadLetter, Subscription

#: The events a subscription may name: what the outbox carries (ADR 0106).
SubscribableEvent = Literal["post_store", "post_update", "post_delete", "post_link",
                            "post_invalidate", "post_transcript_store", "pre_approval",
                            "post_approval", "post_spoke_write", "*"]
NAME_PATTERN: Final = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"


def _patterns(value: list[str] | None) -> list[str] | None:
    for pattern in value or ():
        parse_pattern(pattern)
    return value


def _url(value: str | None) -> str | None:
    if value is not None:
        parse_target(value)
    return value


class CreateSubscription(BaseModel):
    """``POST /v1/subscriptions``: a webhook target and what it receives."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=NAME_PATTERN, max_length=253)
    url: str = Field(min_length=1, max_length=2048, description="http(s) target")
    events: list[SubscribableEvent] = Field(min_length=1, max_length=16)
    namespaces: list[str] = Field(default_factory=lambda: ["**"], min_length=1,
                                  max_length=64, description="Namespace patterns")
    secret: str | None = Field(None, min_length=10, max_length=200, description=(
        "Standard Webhooks secret (whsec_...); absent: generated and shown once"))
    max_in_flight: int = Field(4, ge=1, le=64)
    enabled: bool = True
    allow_private_targets: bool = Field(False, description=(
        "Reach loopback, link-local, private and cluster addresses (refused otherwise)"))

    _check_patterns = field_validator("namespaces")(_patterns)
    _check_url = field_validator("url")(_url)


class UpdateSubscription(BaseModel):
    """``PATCH /v1/subscriptions/{name}``: the fields sent change."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    url: str | None = Field(None, min_length=1, max_length=2048)
    events: list[SubscribableEvent] | None = Field(None, min_length=1, max_length=16)
    namespaces: list[str] | None = Field(None, min_length=1, max_length=64)
    secret: str | None = Field(None, min_length=10, max_length=200)
    max_in_flight: int | None = Field(None, ge=1, le=64)
    enabled: bool | None = None
    allow_private_targets: bool | None = None

    _check_patterns = field_validator("namespaces")(_patterns)
    _check_url = field_validator("url")(_url)


class ReplayFrom(BaseModel):
    """``POST /v1/subscriptions/{name}/replay``: deliver again from ``from_sequence`` on."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    from_sequence: int = Field(ge=1, le=2**62)


class ReplayDead(BaseModel):
    """``POST /v1/subscriptions/{name}/dead-letters/replay``: one (``sequence``) or all."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    sequence: int | None = Field(None, ge=1, le=2**62)
    limit: int = Field(100, ge=1, le=1000, description="At most this many, oldest first")


class ListDeadLetters(BaseModel):
    """``GET /v1/subscriptions/{name}/dead-letters?after=&limit=``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    after: int = Field(0, ge=0, le=2**62, description="`next` of the previous page")
    limit: int = Field(100, ge=1, le=1000)


def subscription_view(sub: Subscription, status: dict[str, Any] | None) -> dict[str, Any]:
    """A subscription as JSON: never its secret."""
    return {"id": str(sub.id), "name": sub.name, "url": sub.url, "events": list(sub.events),
            "namespaces": list(sub.namespaces), "max_in_flight": sub.max_in_flight,
            "enabled": sub.enabled, "allow_private_targets": sub.allow_private_targets,
            "managed_by": sub.managed_by, "created_at": sub.created_at.isoformat(),
            "updated_at": sub.updated_at.isoformat(), "status": status or {
                "cursor": sub.cursor, "delivered": sub.delivered,
                "dead_letters": sub.dead_letters, "running": False}}


def dead_letter_view(dead: DeadLetter, *, payload: bool) -> dict[str, Any]:
    """A dead letter as JSON (its payload only when inspected)."""
    view: dict[str, Any] = {"sequence": dead.seq, "event": dead.event, "key": dead.key,
                            "attempts": dead.attempts, "last_error": dead.last_error,
                            "dead_at": dead.dead_at.isoformat()}
    if payload:
        view["payload"] = dead.payload
    return view


class SubscriptionRef(BaseModel):
    """A subscription by name (the MCP tools' argument; the routes' path)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=NAME_PATTERN, max_length=253)


class UpdateSubscriptionByName(UpdateSubscription):
    """``subscription_update``: the name and the fields that change."""

    name: str = Field(pattern=NAME_PATTERN, max_length=253)

    def changes(self) -> UpdateSubscription:
        return UpdateSubscription.model_validate(
            self.model_dump(exclude_unset=True, exclude={"name"}))


class ReplayFromByName(ReplayFrom):
    """``subscription_replay``."""

    name: str = Field(pattern=NAME_PATTERN, max_length=253)


class DeadLettersByName(ListDeadLetters):
    """``dead_letters_list``."""

    name: str = Field(pattern=NAME_PATTERN, max_length=253)


class DeadLetterRef(SubscriptionRef):
    """``dead_letter_get``."""

    sequence: int = Field(ge=1, le=2**62)


class ReplayDeadByName(ReplayDead):
    """``dead_letters_replay``: one (``sequence``) or all."""

    name: str = Field(pattern=NAME_PATTERN, max_length=253)
