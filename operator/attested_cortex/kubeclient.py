"""A small async client of the Kubernetes API: the one the package talks to it with.

The operator writes through it (:mod:`.controller.applying`, ``.statuses``, ``.eventing``;
kopf's own watches aside) and the server reviews tokens through it
(:mod:`.server.auth_kubernetes`), ADR 0022. On aiohttp, with a deadline on every request.
It imports no kopf (the server does not load kopf): a :class:`Connection` says where and as
whom; the operator makes one from kopf's login (:mod:`.controller.login`), the server from
its pod's service account or a kubeconfig (:func:`in_cluster`, :func:`from_kubeconfig`).
Errors form one tree, mapped from HTTP statuses here and nowhere else::

    ApiError
    ├── ApiNotFoundError     404
    ├── ApiConflictError     409 (already exists, or a stale resourceVersion)
    ├── ApiInvalidError      400, 422 (the object is refused: permanent)
    ├── ApiForbiddenError    401, 403 (RBAC: permanent until someone changes it)
    └── ApiUnavailableError  timeouts, connection errors, 429, 5xx (come back later)

Every class is prefixed ``Api`` so none shadows the domain's
:class:`~attested_cortex.errors.NotFoundError` or ``ConflictError`` in a module that meets both.

"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import aiohttp
import yaml

Object = dict[str, Any]

REQUEST_TIMEOUT_S: Final = 30.0
ACCOUNT_DIR: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_PATH: Final = ACCOUNT_DIR / "token"


@dataclass(frozen=True)
class Connection:
    """One API server and the credentials to use there (kopf's ``ConnectionInfo`` fields
    this client reads; ``*_data`` PEM or base64 PEM, ``*_path`` files)."""

    server: str
    ca_path: str | None = None
    ca_data: str | bytes | None = None
    insecure: bool = False
    token: str | None = None
    certificate_path: str | None = None
    certificate_data: str | bytes | None = None
    private_key_path: str | None = None
    private_key_data: str | bytes | None = None


class ConnectionConfigError(Exception):
    """No usable service account or kubeconfig."""


class ApiError(Exception):
    """The API server refused or could not answer; ``status`` 0 when it never answered."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message


class ApiNotFoundError(ApiError):
    """404: the object (or its kind) does not exist."""


class ApiConflictError(ApiError):
    """409: the object exists already, or changed since it was read."""


class ApiInvalidError(ApiError):
    """400/422: the object is invalid; retrying the same request cannot help."""


class ApiForbiddenError(ApiError):
    """401/403: the operator's ServiceAccount lacks a permission."""


class ApiUnavailableError(ApiError):
    """Timeouts, connection failures, throttling and 5xx: worth retrying later."""


def _error(status: int, text: str) -> ApiError:
    try:
        message = str(json.loads(text).get("message", text))
    except (ValueError, AttributeError):
        message = text
    message = message[:2000]
    table: dict[int, type[ApiError]] = {404: ApiNotFoundError, 409: ApiConflictError,
                                        400: ApiInvalidError, 422: ApiInvalidError,
                                        401: ApiForbiddenError, 403: ApiForbiddenError}
    return table.get(status, ApiUnavailableError)(status, message)


def _decoded(data: str | bytes) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return raw if raw.lstrip().startswith(b"-----") else base64.b64decode(raw)


def ssl_context(info: Connection) -> ssl.SSLContext:
    """TLS: the cluster CA and, where the kubeconfig has them, a client certificate."""
    context = ssl.create_default_context(
        cafile=os.fspath(info.ca_path) if info.ca_path else None,
        cadata=_decoded(info.ca_data).decode() if info.ca_data else None)
    if info.insecure:
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    cert, key = info.certificate_path, info.private_key_path
    if info.certificate_data or info.private_key_data:
        with tempfile.TemporaryDirectory() as tmp:  # load_cert_chain reads files only
            paths = []
            for name, data in (("cert", info.certificate_data), ("key", info.private_key_data)):
                path = Path(tmp, name)
                path.write_bytes(_decoded(data) if data else b"")
                paths.append(path)
            context.load_cert_chain(cert if cert else paths[0], key if key else paths[1])
    elif cert:
        context.load_cert_chain(cert, key)
    return context


def in_cluster() -> Connection:
    """The pod's service account: ``KUBERNETES_SERVICE_HOST``/``_PORT``, its CA and token
    (the token is re-read on every request: the kubelet rotates it)."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host or not TOKEN_PATH.is_file():
        raise ConnectionConfigError("not in a pod with a service account "
                                    "(no KUBERNETES_SERVICE_HOST or no token)")
    bracketed = f"[{host}]" if ":" in host else host
    return Connection(server=f"https://{bracketed}:{port}", ca_path=str(ACCOUNT_DIR / "ca.crt"),
                      token=TOKEN_PATH.read_text(encoding="utf-8").strip())


def from_kubeconfig(path: Path) -> Connection:
    """The current context of the kubeconfig at ``path``: its cluster's server and CA, its
    user's token or client certificate (files relative to the kubeconfig's directory).
    Exec and auth-provider plugins are not supported."""
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        context = _named(config, "contexts", config.get("current-context"))["context"]
        cluster = _named(config, "clusters", context.get("cluster"))["cluster"]
        user = _named(config, "users", context.get("user"))["user"] or {}
    except (OSError, yaml.YAMLError, AttributeError, KeyError, TypeError) as exc:
        raise ConnectionConfigError(f"{path}: not a usable kubeconfig ({exc})") from exc

    def file(value: object) -> str | None:
        return None if value is None else os.fspath(path.parent / str(value))

    return Connection(
        server=str(cluster["server"]), ca_path=file(cluster.get("certificate-authority")),
        ca_data=cluster.get("certificate-authority-data"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")), token=user.get("token"),
        certificate_path=file(user.get("client-certificate")),
        certificate_data=user.get("client-certificate-data"),
        private_key_path=file(user.get("client-key")),
        private_key_data=user.get("client-key-data"),
    )


def _named(config: dict[str, Any], section: str, name: object) -> dict[str, Any]:
    for entry in config.get(section) or []:
        if entry.get("name") == name:
            found: dict[str, Any] = entry
            return found
    raise KeyError(f"no {section[:-1]} named {name!r}")


class KubeApi:
    """Requests to one API server; ``await close()`` when done."""

    def __init__(self, info: Connection) -> None:
        self.server = info.server.rstrip("/")
        self._info = info
        self._ssl = ssl_context(info) if self.server.startswith("https") else None
        self._session: aiohttp.ClientSession | None = None

    def _headers(self) -> dict[str, str]:
        token = self._info.token
        if TOKEN_PATH.is_file() and os.environ.get("KUBERNETES_SERVICE_HOST"):
            token = TOKEN_PATH.read_text(encoding="utf-8").strip()  # kubelet rotates it
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S),
                connector=aiohttp.TCPConnector(ssl=self._ssl or False, limit=20))
        return self._session

    async def close(self) -> None:
        """Close the connection pool."""
        if self._session is not None:
            await self._session.close()

    async def request(self, method: str, path: str, *, body: object = None,
                      params: Mapping[str, str] | None = None,
                      content_type: str = "application/json") -> Object:
        """One request; the decoded JSON answer, or an :class:`ApiError`."""
        text = await self.request_text(method, path, body=body, params=params,
                                       content_type=content_type)
        result: Object = json.loads(text) if text else {}
        return result

    async def request_text(self, method: str, path: str, *, body: object = None,
                           params: Mapping[str, str] | None = None,
                           content_type: str = "application/json") -> str:
        """One request; the answer's text (a pod's log), or an :class:`ApiError`."""
        headers = self._headers()
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body), content_type
        try:
            async with self._client().request(method, self.server + path, data=data,
                                              params=params, headers=headers) as response:
                text = await response.text()
                if response.status >= 400:
                    raise _error(response.status, text)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise ApiUnavailableError(0, f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        return text
