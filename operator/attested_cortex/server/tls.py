"""HTTPS for ``cortexctl serve``: the server's ``ssl.SSLContext``, reloaded when its files change.

A Kubernetes Secret volume renews a certificate by swapping the ``..data`` symlink of its
directory: the paths stay, the files behind them change at once. :class:`ReloadingTls`
watches the (mtime, inode, size) of both files through the links every
``reload_interval_seconds`` and, when they change, builds a whole new context from them; a
pair that does not load (a key that is not the certificate's, a half-written file) is
logged and the running context kept, tried again on the next change. The listening context
hands each handshake to the newest one through its SNI callback (OpenSSL calls it for every
ClientHello, with or without a server name), so new connections get the new certificate
and open ones keep theirs: no restart, no dropped connection (ADR 0047).

Called by :mod:`.serving`; the settings are :class:`~.settings.TlsSettings`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from attested_cortex import pki
from attested_cortex.errors import InvalidInputError
from attested_cortex.server.settings import TlsSettings

log = logging.getLogger(__name__)

VERSIONS: Final = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}

Stamp = tuple[tuple[int, int, int], ...]


def _stamp(*paths: Path) -> Stamp:
    """What changes when a file is replaced or rewritten (through symlinks)."""
    stats = [os.stat(p) for p in paths]
    return tuple((s.st_mtime_ns, s.st_ino, s.st_size) for s in stats)


def server_context(settings: TlsSettings, client_cas: Sequence[Path] = ()) -> ssl.SSLContext:
    """A server context with the certificate pair loaded; ``ssl.SSLError``/``OSError`` when
    the files do not load. With ``client_cas`` (the federation peers' bundles) a client may
    present a certificate, which must chain to one of them (docs/adr/0121); clients with
    none (agents with tokens) are served as before."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = VERSIONS[settings.min_version]
    context.load_cert_chain(settings.cert_file, settings.key_file)
    for bundle in client_cas:
        context.load_verify_locations(cafile=str(bundle))
    if client_cas:
        context.verify_mode = ssl.CERT_OPTIONAL
    context.set_alpn_protocols(["http/1.1"])
    return context


class ReloadingTls:
    """The listening context and the current one behind it."""

    def __init__(self, settings: TlsSettings, client_cas: Sequence[Path] = ()) -> None:
        self._settings = settings
        self._client_cas = tuple(client_cas)
        try:
            self._stamp = _stamp(settings.cert_file, settings.key_file)
            self._current = server_context(settings, self._client_cas)
        except (OSError, ssl.SSLError) as exc:
            raise InvalidInputError(f"cannot load tls.cert_file/tls.key_file: {exc}",
                                    field="tls") from exc
        self.fingerprint = self._fingerprint()
        # answers a client that never reaches SNI
        self.context = server_context(settings, self._client_cas)
        self.context.sni_callback = self._choose

    def _fingerprint(self) -> str:
        return pki.fingerprint(self._settings.cert_file.read_text(encoding="utf-8"))

    def _choose(self, connection: ssl.SSLObject, _name: str | None,
                _context: ssl.SSLContext) -> None:
        connection.context = self._current

    def check(self) -> bool:
        """Load the files again if they changed; whether a new certificate is served."""
        try:
            stamp = _stamp(self._settings.cert_file, self._settings.key_file)
            if stamp == self._stamp:
                return False
            self._stamp = stamp
            self._current = server_context(self._settings, self._client_cas)
            self.fingerprint = self._fingerprint()
        except (OSError, ssl.SSLError, ValueError) as exc:
            log.warning("tls certificate not reloaded; still serving the previous one",
                        extra={"error": str(exc), "fingerprint": self.fingerprint})
            return False
        log.info("tls certificate reloaded", extra={"fingerprint": self.fingerprint})
        return True

    async def watch(self) -> None:
        """Check every ``reload_interval_seconds`` until cancelled."""
        while True:
            await asyncio.sleep(self._settings.reload_interval_seconds)
            self.check()
