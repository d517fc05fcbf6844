"""Daemon hooks as sidecar containers of the server pod, sharing the hook socket volume.

Each sidecar learns where to listen from ``CORTEX_HOOK_ADDRESS`` (the address the server's
hook file names); with no command the image's entry point must serve there, e.g.
``cortexctl hookd --listen $(CORTEX_HOOK_ADDRESS) -- my-hook``. A hook that calls the cortex
back (the reference auto-link hook) finds the server of its own pod in ``CORTEX_URL`` and,
under Kubernetes auth, its credentials (the pod's service-account token, which the kubelet
rotates) in ``CORTEX_TOKEN_FILE``; values the hook sets itself win. When the server serves
TLS the URL is ``https://`` and ``CORTEX_CA_FILE`` names the CA of its certificate, mounted
alone (never the server's key, ADR 0047). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from attested_cortex.builders import hookfiles, names, security
from attested_cortex.crd.hookchain import Hook

Object = dict[str, Any]

HOOK_ADDRESS_ENV: Final = "CORTEX_HOOK_ADDRESS"
URL_ENV: Final = "CORTEX_URL"
TOKEN_FILE_ENV: Final = "CORTEX_TOKEN_FILE"
CA_FILE_ENV: Final = "CORTEX_CA_FILE"
SERVICE_ACCOUNT_TOKEN: Final = "/var/run/secrets/kubernetes.io/serviceaccount/token"
SOCKET_VOLUME: Final = "hook-sockets"


def container_name(hook: str) -> str:
    """``hook-<name>``: never clashes with the server container or another hook."""
    return names.dns_label("hook-", hook)


def _cortex_env(server_port: int, token_file: bool, ca_file: str | None) -> list[Object]:
    """Where the pod's own server is, how to verify it, and the pod's token when agents
    authenticate with one."""
    scheme = "https" if ca_file is not None else "http"
    env: list[Object] = [{"name": URL_ENV, "value": f"{scheme}://127.0.0.1:{server_port}"}]
    if ca_file is not None:
        env.append({"name": CA_FILE_ENV, "value": ca_file})
    if token_file:
        env.append({"name": TOKEN_FILE_ENV, "value": SERVICE_ACCOUNT_TOKEN})
    return env


def build_sidecar(hook: Hook, pull_policy: str, *, server_port: int = 8080,
                  token_file: bool = False, ca_file: str | None = None,
                  mounts: Sequence[Object] = ()) -> Object:
    """The container of one Daemon hook; ``token_file`` under Kubernetes auth, ``ca_file``
    (and its ``mounts``) when the server serves TLS."""
    sidecar = hook.sidecar
    if sidecar is None:
        raise ValueError(f"hook {hook.name} is not a Daemon hook")
    env = [{"name": e.name, "value": e.value} for e in sidecar.env or []
           if e.name != HOOK_ADDRESS_ENV]  # the operator decides where the server calls
    env.append({"name": HOOK_ADDRESS_ENV, "value": hookfiles.socket_address(hook.name)})
    own = {e["name"] for e in env}
    env.extend(e for e in _cortex_env(server_port, token_file, ca_file) if e["name"] not in own)
    container: Object = {
        "name": container_name(hook.name), "image": sidecar.image,
        "imagePullPolicy": pull_policy, "env": env,
        "volumeMounts": [{"name": SOCKET_VOLUME, "mountPath": hookfiles.SOCKET_DIR},
                         {"name": "tmp", "mountPath": "/tmp"}, *mounts],
        "resources": security.resources(sidecar.resources),
        "securityContext": security.container_security(),
    }
    if sidecar.command:
        container["command"] = list(sidecar.command)
    return container


def build_sidecars(hooks: Iterable[Hook], pull_policy: str, *, server_port: int = 8080,
                   token_file: bool = False, ca_file: str | None = None,
                   mounts: Sequence[Object] = ()) -> list[Object]:
    """Sidecars of every Daemon hook, in name order (a stable pod template)."""
    daemons = sorted((h for h in hooks if h.mode == "Daemon"), key=lambda h: h.name)
    return [build_sidecar(h, pull_policy, server_port=server_port, token_file=token_file,
                          ca_file=ca_file, mounts=mounts)
            for h in daemons]
