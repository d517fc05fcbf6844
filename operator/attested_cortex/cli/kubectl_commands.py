"""The ``kubectl cortex`` commands over the Kubernetes API and the cortex's HTTP API.

Called by :mod:`.kubectl` (which parses the words and finds the API server). Kubernetes
reads and the one write (a TokenRequest) go through :class:`~attested_cortex.kubeclient.KubeApi`;
the cortex's API is called with ``urllib`` (the CLI stays off aiohttp: an import contract).
Names of children come from :mod:`attested_cortex.builders.names`, the operator's own.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from attested_cortex.builders import names
from attested_cortex.builders.secrets import HMAC_KEY
from attested_cortex.crd import GROUP, VERSION
from attested_cortex.kubeclient import ApiNotFoundError, Connection, KubeApi
from attested_cortex.policy.signatures import sign

Object = dict[str, Any]
#: Kind, plural (the API's path and the heading of its list).
SATELLITES = (("PermissionRule", "PermissionRules", "permissionrules"),
              ("HookChain", "HookChains", "hookchains"),
              ("AgentIdentity", "AgentIdentities", "agentidentities"))
HTTP_TIMEOUT_S = 600.0  # a deep audit walks every row


class PluginError(Exception):
    """What the user must change (a missing token, a cortex without an endpoint, ...)."""


def context_namespace(kubeconfig: Path) -> str:
    """The current context's namespace, as kubectl takes it (``default`` when none)."""
    try:
        config = yaml.safe_load(kubeconfig.read_text(encoding="utf-8")) or {}
        current = config.get("current-context")
        for entry in config.get("contexts") or []:
            if entry.get("name") == current:
                return str((entry.get("context") or {}).get("namespace") or "default")
    except (OSError, yaml.YAMLError, AttributeError):
        pass
    return "default"


async def run(args: argparse.Namespace, info: Connection, namespace: str) -> int:
    """Run the parsed command against the API server ``info`` names."""
    api = KubeApi(info)
    try:
        from attested_cortex.cli.kubectl_deadletters import dead_letters  # its own module

        command = {"status": status, "verify": verify, "token": token,
                   "approvals": approvals, "logs": logs,
                   "dead-letters": dead_letters}[args.command]
        return await command(api, namespace, args)
    finally:
        await api.close()


def _own(namespace: str, plural: str, name: str = "") -> str:
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{plural}"
    return f"{path}/{name}" if name else path


async def _cortex(api: KubeApi, namespace: str, name: str) -> Object:
    try:
        return await api.request("GET", _own(namespace, "memorycortexes", name))
    except ApiNotFoundError as exc:
        raise PluginError(f"no MemoryCortex {name} in namespace {namespace}") from exc


def _ready(body: Object) -> str:
    for cond in (body.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return f"{cond.get('status')} ({cond.get('reason')})"
    return "Unknown (no status yet)"


# -- status ------------------------------------------------------------------------------
async def status(api: KubeApi, namespace: str, args: argparse.Namespace) -> int:
    body = await _cortex(api, namespace, args.cortex)
    st = body.get("status") or {}
    generation = (body.get("metadata") or {}).get("generation")
    lines = [f"MemoryCortex {namespace}/{args.cortex}   Ready: {_ready(body)}",
             f"  generation {generation}, observed {st.get('observedGeneration')}",
             f"  endpoint:  {st.get('endpoint') or '-'}",
             f"  schema:    {st.get('schemaVersion', '-')}   graph: {st.get('kgBackend') or '-'}"
             f"   database: {st.get('databaseMode') or '-'}",
             "  conditions:"]
    for cond in st.get("conditions") or []:
        lines.append(f"    {cond.get('type'):<16} {cond.get('status'):<8} "
                     f"{cond.get('reason', '')}: {cond.get('message', '')}")
    lines += reach_lines(st)
    for kind, heading, plural in SATELLITES:
        found = (await api.request("GET", _own(namespace, plural))).get("items") or []
        mine = [o for o in found
                if ((o.get("spec") or {}).get("cortexRef") or {}).get("name") == args.cortex]
        lines.append(f"  {heading} ({len(mine)}):")
        lines += [f"    {o['metadata']['name']:<32} Ready: {_ready(o)}"
                  + _satellite_detail(kind, o) for o in mine]
    print("\n".join(lines))
    return 0


def reach_lines(st: Object) -> list[str]:
    """How far a restore reaches: the backups' and archive's ``status.backup`` (issue 38:
    a restore's reach was invisible), and the point a restored cortex reached."""
    lines = []
    backup = st.get("backup") or {}
    if backup:
        since = backup.get("walArchivingSince")
        within = backup.get("archiveTimeoutSeconds")
        archive = (f"WAL archived since {since}" if since else "WAL archiving NOT confirmed")
        if since and within:
            archive += f": a restore to the latest point reaches every write older than {within} s"
        lines += [f"  backup:    last {backup.get('lastBackupName') or '-'} at "
                  f"{backup.get('lastSuccessfulBackup') or '-'} ({backup.get('completed', 0)} "
                  f"kept); restorable from {backup.get('firstRecoverabilityPoint') or '-'}",
                  f"             {archive}"]
        if backup.get("lastArchivedWAL"):
            pending = backup.get("unarchivedBytes")
            lines.append(f"             archive ends at {backup.get('lastArchivedLSN') or '-'} "
                         f"({backup['lastArchivedWAL']}, archived "
                         f"{backup.get('latestRestorePoint') or '-'}): " + (
                             "a restore to the latest point holds every write so far"
                             if pending == 0 else
                             f"{pending if pending is not None else '?'} bytes of WAL not yet "
                             f"archived; writes acknowledged after "
                             f"{backup.get('latestRestorePoint') or '-'} are not in it"))
    restore = st.get("restore") or {}
    if restore.get("reachedAt") or restore.get("lastEvent"):
        lines.append(f"  restored:  up to {restore.get('reachedAt') or '-'} (event "
                     f"{restore.get('lastEvent') or '-'}), verified: {restore.get('verified')}")
    return lines


def _satellite_detail(kind: str, body: Object) -> str:
    spec, st = body.get("spec") or {}, body.get("status") or {}
    if kind == "PermissionRule":
        return (f"   {spec.get('decision')} {','.join(spec.get('operations') or [])} on "
                f"{spec.get('namespace')}")
    if kind == "HookChain":
        return f"   hooks: {', '.join(h.get('name', '') for h in spec.get('hooks') or [])}"
    return f"   agent {st.get('agentId', '-')}, key {st.get('fingerprint') or '-'}"


# -- verify and approvals: the cortex's HTTP API -----------------------------------------
def _bearer(args: argparse.Namespace) -> str:
    if args.token:
        return str(args.token)
    if args.token_file is not None:
        return Path(args.token_file).read_text(encoding="utf-8").strip()
    if os.environ.get("CORTEX_TOKEN"):
        return os.environ["CORTEX_TOKEN"]
    raise PluginError("give a token: --token, --token-file or $CORTEX_TOKEN "
                      "(kubectl cortex token <identity> mints one)")


async def _base(api: KubeApi, namespace: str, args: argparse.Namespace) -> str:
    if args.server:
        return str(args.server).rstrip("/")
    endpoint = ((await _cortex(api, namespace, args.cortex)).get("status") or {}).get(
        "endpoint")
    if not endpoint:
        raise PluginError(f"MemoryCortex {args.cortex} reports no endpoint yet; pass --server")
    return str(endpoint).rstrip("/")


def _call(method: str, url: str, *, token: str, body: bytes | None = None,
          headers: dict[str, str] | None = None) -> tuple[int, Object]:
    if not url.startswith(("http://", "https://")):
        raise PluginError(f"{url}: not an http(s) URL")
    request = urllib.request.Request(url, data=body, method=method, headers={  # noqa: S310
        "Authorization": f"Bearer {token}", "Accept": "application/json",
        **({"Content-Type": "application/json"} if body is not None else {}),
        **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as reply:  # noqa: S310
            return reply.status, json.loads(reply.read() or b"{}")
    except urllib.error.HTTPError as exc:
        text = exc.read()
        try:
            return exc.code, json.loads(text or b"{}")
        except ValueError:
            return exc.code, {"error": {"message": text.decode(errors="replace")}}
    except (urllib.error.URLError, OSError) as exc:
        raise PluginError(f"{url}: {exc}") from exc


def _refused(code: int, answer: Object) -> PluginError:
    error = answer.get("error") or {}
    return PluginError(f"HTTP {code} {error.get('code', '')}: {error.get('message', answer)}")


async def verify(api: KubeApi, namespace: str, args: argparse.Namespace) -> int:
    base, bearer = await _base(api, namespace, args), _bearer(args)
    deep = "false" if args.shallow else "true"
    code, report = _call("GET", f"{base}/v1/audit/verify?deep={deep}", token=bearer)
    if code != 200:
        raise _refused(code, report)
    print(f"audit of {namespace}/{args.cortex}: {'OK' if report.get('ok') else 'FAILED'}, "
          f"{report.get('events')} events, first bad sequence "
          f"{report.get('first_bad_sequence')}")
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0 if report.get("ok") else 1


async def approvals(api: KubeApi, namespace: str, args: argparse.Namespace) -> int:
    base, bearer = await _base(api, namespace, args), _bearer(args)
    chosen = args.approve or args.reject
    if chosen is None:
        code, page = _call("GET", f"{base}/v1/approvals", token=bearer)
        if code != 200:
            raise _refused(code, page)
        pending = page.get("approvals") or []
        print(f"{len(pending)} pending" + (" (more: page with the API)" if page.get("next")
                                           else ""))
        for action in pending:
            print(f"  {action['id']}  {action['agent_id']}  {action['operation']} on "
                  f"{action['namespace']}  until {action['expires_at']}: {action['reason']}")
        return 0
    secret = await _hmac_key(api, namespace, args.cortex)
    decision: Object = {"decision": "approve" if args.approve else "reject"}
    if args.remember:
        decision["remember"] = "forever"
    body = json.dumps(decision).encode()
    path, stamp = f"/v1/approvals/{chosen}", str(int(time.time()))
    signature = sign(secret, timestamp=stamp, method="POST", path=path, body=body)
    code, answer = _call("POST", base + path, token=bearer, body=body, headers={
        "X-Cortex-Timestamp": stamp, "X-Cortex-Signature": f"sha256={signature}"})
    if code != 200:
        raise _refused(code, answer)
    print(f"approval {chosen}: {answer.get('status')}")
    return 0


async def _hmac_key(api: KubeApi, namespace: str, cortex: str) -> bytes:
    name = names.approval_secret_name(cortex)
    try:
        secret = await api.request("GET", f"/api/v1/namespaces/{namespace}/secrets/{name}")
    except ApiNotFoundError as exc:
        raise PluginError(f"no Secret {name}: is the approval API enabled on {cortex}?") from exc
    data = (secret.get("data") or {}).get(HMAC_KEY)
    if not data:
        raise PluginError(f"Secret {name} has no {HMAC_KEY!r} key")
    return base64.b64decode(data).strip()


# -- token and logs ----------------------------------------------------------------------
async def token(api: KubeApi, namespace: str, args: argparse.Namespace) -> int:
    try:
        identity = await api.request("GET", _own(namespace, "agentidentities", args.identity))
    except ApiNotFoundError as exc:
        raise PluginError(f"no AgentIdentity {args.identity} in {namespace}") from exc
    account = ((identity.get("spec") or {}).get("serviceAccountRef") or {}).get("name")
    if not account:
        raise PluginError(f"AgentIdentity {args.identity} has no spec.serviceAccountRef: "
                          "no ServiceAccount authenticates as it")
    spec: Object = {"expirationSeconds": args.duration}
    if args.audience:
        spec["audiences"] = list(args.audience)
    answer = await api.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
    print((answer.get("status") or {}).get("token", ""))
    return 0


async def logs(api: KubeApi, namespace: str, args: argparse.Namespace) -> int:
    selector = ",".join(f"{k}={v}" for k, v in names.selector(args.cortex, "server").items())
    pods = (await api.request("GET", f"/api/v1/namespaces/{namespace}/pods",
                              params={"labelSelector": selector})).get("items") or []
    if not pods:
        raise PluginError(f"no server pods of {args.cortex} in {namespace}")
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        name = pod["metadata"]["name"]
        text = await api.request_text(
            "GET", f"/api/v1/namespaces/{namespace}/pods/{name}/log",
            params={"container": args.container, "tailLines": str(args.tail)})
        print(f"==> {name} <==")
        print(text.rstrip("\n"))
    return 0
