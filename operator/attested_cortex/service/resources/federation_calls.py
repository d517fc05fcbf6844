"""The writes an inbound federated change makes: the ordinary memory store, update and
delete and link create and invalidate calls (same scopes, rules, quotas, audit records),
whose hook payloads also carry ``origin`` (the cortex that made the change, its revision,
the signing agent). Called by :mod:`.federation` only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from attested_cortex.hooks.events import EventName
from attested_cortex.service.pipeline.calls import Call
from attested_cortex.service.resources.links import CreateCall, InvalidateCall
from attested_cortex.service.resources.memories import DeleteCall, StoreCall, UpdateCall
from attested_cortex.store.links import Link
from attested_cortex.store.memories import Memory

R = TypeVar("R")


@dataclass
class _FromPeer(Call[R]):
    """What every federated call adds to the ordinary one it is mixed into: ``origin`` in its
    pre- and post- hook payloads."""

    origin: dict[str, Any] = field(default_factory=dict)

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        return {**super().pre_payload(event), "origin": self.origin}

    def post_payload(self, event: EventName, result: R) -> dict[str, Any]:
        return {**super().post_payload(event, result), "origin": self.origin}


@dataclass
class FederatedStore(_FromPeer[Memory], StoreCall):
    """A store on behalf of a peer."""


@dataclass
class FederatedUpdate(_FromPeer[Memory], UpdateCall):
    """An update on behalf of a peer."""


@dataclass
class FederatedDelete(_FromPeer[Memory], DeleteCall):
    """A delete on behalf of a peer."""


@dataclass
class FederatedLinkCreate(_FromPeer[Link], CreateCall):
    """A link created on behalf of a peer (observed by ``peer:<name>``)."""


@dataclass
class FederatedLinkInvalidate(_FromPeer[Link], InvalidateCall):
    """A link's window closed on behalf of a peer."""
