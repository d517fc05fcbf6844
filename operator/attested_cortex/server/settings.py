"""``ServerSettings``: everything ``cortexctl serve`` is configured with.

Read from an optional YAML file (``--config``; the operator renders it into a ConfigMap)
and overridden by command-line flags. Unknown keys are errors, so a typo never silently
falls back to a default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from attested_cortex.errors import InvalidInputError


class PermissionsSettings(BaseModel):
    """Permission evaluation."""

    model_config = ConfigDict(extra="forbid")
    mode: Literal["advisory", "enforce", "off"] = "advisory"


class LimitsSettings(BaseModel):
    """Overrides of :class:`attested_cortex.service.limits.Limits`."""

    model_config = ConfigDict(extra="forbid")
    max_body_bytes: int = Field(1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    max_content_chars: int = Field(256 * 1024, ge=1, le=16 * 1024 * 1024)
    max_metadata_bytes: int = Field(16 * 1024, ge=2, le=1024 * 1024)
    recall_pool: int = Field(200, ge=10, le=10_000)


class ServerSettings(BaseModel):
    """The server's configuration."""

    model_config = ConfigDict(extra="forbid")

    database_url: str = ""
    listen: list[str] = Field(default_factory=lambda: ["127.0.0.1:8080"])
    auth: Literal["dev", "tokens", "kubernetes"] = "dev"
    tokens_file: Path | None = None
    kubeconfig: Path | None = None  # --auth kubernetes outside a cluster
    token_audiences: list[str] = Field(default_factory=list)
    graph_backend: Literal["Auto", "AGE", "CTE"] = "Auto"
    hooks_file: Path | None = None
    keys_dir: Path | None = None
    permissions: PermissionsSettings = Field(default_factory=PermissionsSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    log_level: str = "INFO"
    pool_max_size: int = Field(10, ge=1, le=200)


def load_settings(path: Path | None, overrides: dict[str, Any]) -> ServerSettings:
    """Settings from ``path`` (if any) with ``overrides`` (non-None flags) applied."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise InvalidInputError(f"cannot read config {path}: {exc}", field="config") from exc
        if not isinstance(loaded, dict):
            raise InvalidInputError(f"config {path} must be a YAML mapping", field="config")
        data.update(loaded)
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return ServerSettings.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise InvalidInputError(f"config: {where}: {err['msg']}", field=where) from exc


def split_listen(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 in brackets) as a pair; a clear error otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host or not 0 < int(port) < 65536:
        raise InvalidInputError(f"--listen {address!r} must be HOST:PORT", field="listen")
    return host.strip("[]"), int(port)
