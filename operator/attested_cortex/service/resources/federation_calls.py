"""The writes an inbound federated change makes: the ordinary memory store, update and
delete and link create and invalidate calls (same scopes, rules, quotas, audit records),
whose hook payloads also carry ``origin`` (the cortex that made the change, its revision,
the signing agent). Called by :mod:`.federation` only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from attested_cortex.hooks.events import EventName
from attested_cortex.service.resources.links import CreateCall, InvalidateCall
from attested_cortex.service.resources.memories import DeleteCall, StoreCall, UpdateCall
from attested_cortex.store.links import Link
from attested_cortex.store.memories import Memory


@dataclass
class FederatedStore(StoreCall):
    """A store on behalf of a peer."""

    origin: dict[str, Any] = field(default_factory=dict)

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        return {**super().pre_payload(event), "origin": self.origin}

    def post_payload(self, event: EventName, result: Memory) -> dict[str, Any]:
        return {**super().post_payload(event, result), "origin": self.origin}


@dataclass
class FederatedUpdate(UpdateCall):
    """An update on behalf of a peer."""

    origin: dict[str, Any] = field(default_factory=dict)

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        return {**super().pre_payload(event), "origin": self.origin}

    def post_payload(self, event: EventName, result: Memory) -> dict[str, Any]:
        return {**super().post_payload(event, result), "origin": self.origin}


@dataclass
class FederatedDelete(DeleteCall):
    """A delete on behalf of a peer."""

    origin: dict[str, Any] = field(default_factory=dict)

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        return {**super().pre_payload(event), "origin": self.origin}

    def post_payload(self, event: EventName, result: Memory) -> dict[str, Any]:
        return {**super().post_payload(event, result), "origin": self.origin}


@dataclass
class FederatedLinkCreate(CreateCall):
    """A link created on behalf of a peer (observed by ``peer:<name>``)."""

    origin: dict[str, Any] = field(default_factory=dict)

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        return {**super().pre_payload(event), "origin": self.origin}

    def post_payload(self, event: EventName, result: Link) -> dict[str, Any]:
        return {**super().post_payload(event, result), "origin": self.origin}


@dataclass
class FederatedLinkInvalidate(InvalidateCall):
    """A link's window closed on behalf of a peer."""

    origin: dict[str, Any] = field(default_factory=dict)

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        return {**super().pre_payload(event), "origin": self.origin}

    def post_payload(self, event: EventName, result: Link) -> dict[str, Any]:
        return {**super().post_payload(event, result), "origin": self.origin}
