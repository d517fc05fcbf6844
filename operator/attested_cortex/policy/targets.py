"""Which webhook targets a subscription may reach (the SSRF guard, ADR 0107). Pure.

A target URL must be http(s) with a host and no credentials; every address its host resolves
to must be public: loopback, link-local (the cloud metadata address), private, shared
(100.64/10), multicast, reserved and unspecified addresses are refused, and so are the extra
``refused`` ranges (a cluster's pod and service CIDRs), unless the subscription or the cortex
allows private targets. The deliverer checks the addresses it actually connects to
(:mod:`attested_cortex.service.workers.delivering` resolves through this check), so a name
that resolves differently later is checked again.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

from attested_cortex.errors import InvalidInputError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_target(url: str) -> tuple[str, int]:
    """The host and port of a target URL; :class:`InvalidInputError` when it is no webhook
    target."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError(f"target {url[:200]!r} must be an http(s) URL with a host",
                                field="url", code="invalid_target")
    if parts.username or parts.password:
        raise InvalidInputError("target URL must not carry credentials (sign with the "
                                "subscription's secret instead)", field="url",
                                code="invalid_target")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise InvalidInputError(f"target {url[:200]!r} has a bad port", field="url",
                                code="invalid_target") from exc
    return parts.hostname, port


def networks(cidrs: Iterable[str]) -> tuple[Network, ...]:
    """The extra refused ranges, parsed (a bad one is an input error)."""
    try:
        return tuple(ipaddress.ip_network(c, strict=False) for c in cidrs)
    except ValueError as exc:
        raise InvalidInputError(str(exc), field="subscriptions.refused_cidrs") from exc


def refusal(address: str, refused: Sequence[Network] = ()) -> str | None:
    """Why ``address`` is not a public target (None: it is)."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for name, hit in (("loopback", ip.is_loopback), ("link-local", ip.is_link_local),
                      ("private", ip.is_private), ("multicast", ip.is_multicast),
                      ("reserved", ip.is_reserved), ("unspecified", ip.is_unspecified),
                      ("shared", ip in ipaddress.ip_network("100.64.0.0/10"))):
        if hit:
            return f"{address} is a {name} address"
    for net in refused:
        if ip.version == net.version and ip in net:
            return f"{address} is in the refused range {net}"
    return None


def check_addresses(host: str, addresses: Sequence[str], *, allow_private: bool,
                    refused: Sequence[Network] = ()) -> None:
    """Raise :class:`InvalidInputError` (``target_refused``) unless every address is one
    the subscription may reach."""
    if allow_private:
        return
    if not addresses:
        raise InvalidInputError(f"target host {host!r} resolves to no address", field="url",
                                code="target_refused")
    for address in addresses:
        why = refusal(address, refused)
        if why is not None:
            raise InvalidInputError(
                f"target host {host!r} refused: {why} (set allowPrivateTargets on the "
                "subscription to reach it)", field="url", code="target_refused")
