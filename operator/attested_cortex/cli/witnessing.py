"""``cortexctl audit witness --server URL --state DIR``: cosign a cortex's checkpoints, and
refuse a shortened or rewritten history (issue 40, ADR 0100).

One round (one every ``--watch`` seconds until a refusal, or every ``--every`` seconds until
stopped, as the operator runs it: ADR 0102): fetch ``GET /v1/audit/checkpoint``, check the
log's signature with the pinned log key, fetch ``GET /v1/audit/consistency`` from the size
it cosigned last, judge (:mod:`attested_cortex.attest.witnessing`), and cosign (C2SP
``tlog-cosignature``) or refuse. The state directory holds the witness's key
(``witness.key``, created on the first run, mode 0600), the log's key (``log.vkey``: given
by ``--log-key``, else pinned from the server's first answer and printed) and the last
cosigned checkpoint with its cosignature (``checkpoint``), replaced atomically. A refusal
leaves the state as it was: the witness keeps holding the log to what it cosigned. With
``--key-file`` the key comes from elsewhere (the operator's Secret); with
``--report-listen`` the outcome of the last round is served on ``GET /report``
(:mod:`.witness_reports`). Every request is bounded (:data:`REQUEST_TIMEOUT_S`).

Exit 0: cosigned (or nothing new); 1: refused (the message names both sizes and roots);
2: the round could not run (server unreachable, a bad answer, unreadable state).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

from attested_cortex import pki
from attested_cortex.attest import notes, witnessing
from attested_cortex.cli import witness_reports

KEY_FILE = "witness.key"
LOG_KEY_FILE = "log.vkey"
CHECKPOINT_FILE = "checkpoint"
#: What was cosigned last and when (the report's source after a restart).
COSIGNED_FILE = "cosigned.json"
#: Every request's bound: a round never hangs on a server that stopped answering.
REQUEST_TIMEOUT_S = 10


def register(actions: Any) -> None:
    """Add ``audit witness`` to the ``audit`` command's actions."""
    parser: argparse.ArgumentParser = actions.add_parser(
        "witness", help="cosign a cortex's checkpoints; refuse a shortened or rewritten "
        "history")
    parser.add_argument("--server", required=True, help="base URL of the cortex")
    parser.add_argument("--state", type=Path, required=True,
                        help="the witness's directory (its key, the log's key, the last "
                        "cosigned checkpoint)")
    parser.add_argument("--name", default=None, help="the witness's key name (default: "
                        "cortexctl-witness/<host name>; fixed at the first run)")
    parser.add_argument("--log-key", default=None, help="the log's verifier key "
                        "(name+id+key); default: pinned from the first answer")
    parser.add_argument("--key-file", type=Path, default=None,
                        help="the witness's key ({name, seed} JSON, as witness.key; the "
                        "operator's Secret); default: witness.key in --state, made once")
    parser.add_argument("--watch", type=float, default=None, metavar="SECONDS",
                        help="run a round every SECONDS until stopped, or a refusal")
    parser.add_argument("--every", type=float, default=None, metavar="SECONDS",
                        help="run a round every SECONDS until stopped; a refusal is "
                        "reported and the witness keeps holding the log to its state")
    parser.add_argument("--report-listen", default=None, metavar="HOST:PORT",
                        help="serve what was last cosigned or refused as JSON on GET "
                        "/report (the operator's status.audit.witnesses)")
    parser.add_argument("--ca-file", type=Path,
                        default=os.environ.get("CORTEX_CA_FILE") or None,
                        help="CA bundle of an https:// cortex (else the system's roots)")
    parser.add_argument("--token-file", type=Path, help="bearer token file; else $CORTEX_TOKEN")
    parser.add_argument("--agent-id", default=os.environ.get("CORTEX_AGENT_ID"),
                        help="X-Agent-Id for a server with --auth dev")
    parser.add_argument("--scopes", default=None, help=argparse.SUPPRESS)
    parser.set_defaults(handler=run)
    push = actions.add_parser(
        "push-checkpoint", help="offer a cortex's latest checkpoint to a C2SP witness "
        "(c2sp.org/tlog-witness add-checkpoint) and print its cosignature")
    push.add_argument("--server", required=True, help="base URL of the cortex")
    push.add_argument("--witness", required=True, help="base URL of the witness")
    push.add_argument("--token-file", type=Path, help="bearer token file; else $CORTEX_TOKEN")
    push.add_argument("--agent-id", default=os.environ.get("CORTEX_AGENT_ID"),
                      help="X-Agent-Id for a server with --auth dev")
    push.add_argument("--scopes", default=None, help=argparse.SUPPRESS)
    push.set_defaults(handler=run_push)


class Unusable(Exception):
    """The round could not run; the message says why (exit 2)."""


def run(args: argparse.Namespace) -> int:
    """Witness one round; every ``--watch`` seconds until a refusal; or every ``--every``
    seconds until stopped (a refusal is reported and the next round judged against the same
    state: a Deployment's witness keeps holding the log to what it cosigned)."""
    reporter = (None if args.report_listen is None
                else witness_reports.ReportServer(args.report_listen))
    if reporter is not None:
        print(f"serving the report on port {reporter.port}", flush=True)
    every = args.every if args.every is not None else args.watch
    while True:
        outcome = attempt(args)
        if reporter is not None:
            reporter.publish(outcome)
        if every is None or (args.watch is not None and outcome.code == 1):
            return outcome.code
        time.sleep(every)


def attempt(args: argparse.Namespace) -> witness_reports.Outcome:
    """One round, its failures to run included (code 2 and why)."""
    try:
        code, refusal = judged_round(args)
    except (Unusable, OSError, ValueError) as exc:
        print(f"cortexctl audit witness: {exc}", file=sys.stderr)
        return witness_reports.Outcome(2, _cosigned(args.state), f"could not run: {exc}")
    return witness_reports.Outcome(code, _cosigned(args.state), refusal)


def _cosigned(state: Path) -> witness_reports.Cosigned | None:
    """What the state says was cosigned last (``cosigned.json``; for a state an older
    witness wrote, the held checkpoint and its cosignature's time), if it can be read."""
    try:
        data = json.loads((state / COSIGNED_FILE).read_text(encoding="utf-8"))
        return witness_reports.Cosigned(int(data["size"]), str(data["root"]), str(data["at"]))
    except FileNotFoundError:
        return _held(state)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _held(state: Path) -> witness_reports.Cosigned | None:
    try:
        text, lines = notes.split((state / CHECKPOINT_FILE).read_text(encoding="utf-8"))
        held = notes.Checkpoint.parse(text)
    except (OSError, ValueError):
        return None
    stamps = [int.from_bytes(x.signature[:8], "big") for x in lines if len(x.signature) == 72]
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamps[-1])) if stamps else ""
    return witness_reports.Cosigned(held.size, base64.b64encode(held.root).decode(), at)


def round_once(args: argparse.Namespace) -> int:
    """One round: 0 cosigned or unchanged, 1 refused."""
    return judged_round(args)[0]


def judged_round(args: argparse.Namespace) -> tuple[int, str | None]:
    """One round: its exit code, and the refusal's words when it refused."""
    from attested_cortex.cli.mcp import CredentialsError, credentials

    state: Path = args.state
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    witness = (_witness(state, args.name) if args.key_file is None
               else _key_file(args.key_file))
    _TLS.context = None if args.ca_file is None else pki.client_context(args.ca_file)
    try:
        headers = credentials(args, dict(os.environ))
    except CredentialsError as exc:
        raise Unusable(str(exc)) from exc
    base = args.server.rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise Unusable("--server must be an http:// or https:// URL")
    log = _log_key(state, args.log_key, base, headers)
    note = _get(f"{base}/v1/audit/checkpoint", headers, accept="text/plain")
    try:
        new = notes.open_checkpoint(note, log)
    except notes.NoteError as exc:
        raise Unusable(f"the log's checkpoint does not verify: {exc}") from exc
    old = _last(state, log)
    proof: list[bytes] = []
    if old is not None and witnessing.needs_proof(old, new):
        answer = json.loads(_get(f"{base}/v1/audit/consistency?from={old.size}&to={new.size}",
                                 headers, accept="application/json"))
        proof = [base64.b64decode(h) for h in answer["proof"]]
    refusal = witnessing.judge(old, new, proof)
    if refusal is not None:
        said = f"refused ({refusal.kind}): {refusal.message}"
        print(said, file=sys.stderr)
        return 1, said
    if old is not None and old.size == new.size:
        print(f"unchanged: size {new.size}")
        return 0, None
    now = int(time.time())
    line = notes.cosign(note, witness, now)
    _write(state / CHECKPOINT_FILE, notes.with_signatures(note, [line]))
    _write(state / COSIGNED_FILE, json.dumps({
        "size": new.size, "root": base64.b64encode(new.root).decode(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))}) + "\n")
    print(f"cosigned: size {new.size} root {base64.b64encode(new.root).decode()}")
    print(line.line())
    return 0, None


def run_push(args: argparse.Namespace) -> int:
    """Offer the latest checkpoint; 0 cosigned, 1 refused, 2 could not run."""
    try:
        return push_once(args)
    except (Unusable, OSError, ValueError) as exc:
        print(f"cortexctl audit push-checkpoint: {exc}", file=sys.stderr)
        return 2


def push_once(args: argparse.Namespace) -> int:
    """Offer the checkpoint from size 0; on the witness's 409 (the size it knows), again with
    the consistency proof from that size. A witness that knows more, or refuses the proof,
    is a refusal."""
    from attested_cortex.cli.mcp import CredentialsError, credentials

    try:
        headers = credentials(args, dict(os.environ))
    except CredentialsError as exc:
        raise Unusable(str(exc)) from exc
    base, witness = args.server.rstrip("/"), args.witness.rstrip("/")
    for url in (base, witness):
        if not url.startswith(("http://", "https://")):
            raise Unusable(f"{url} is not an http:// or https:// URL")
    view = json.loads(_get(f"{base}/v1/audit/checkpoint", headers, accept="application/json"))
    note, size = view["note"], int(view["size"])
    known, proof = 0, list[bytes]()
    for _ in range(2):
        status, answer = _post(f"{witness}/add-checkpoint",
                               witnessing.add_checkpoint_body(known, proof, note))
        reply = witnessing.interpret(status, answer, size=size, sent_old=known)
        if reply.outcome == "cosigned":
            print(f"cosigned: size {size}")
            print("".join(f"{line}\n" for line in reply.lines), end="")
            return 0
        if reply.outcome == "refused":
            print(f"refused ({status}): {reply.message}", file=sys.stderr)
            return 1
        known = reply.known
        if known:
            found = json.loads(_get(f"{base}/v1/audit/consistency?from={known}&to={size}",
                                    headers, accept="application/json"))
            proof = [base64.b64decode(h) for h in found["proof"]]
    raise Unusable("the witness keeps answering 409")


def _post(url: str, body: bytes) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, method="POST")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as answer:  # noqa: S310
            return int(answer.status), answer.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode("utf-8", "replace")
    except urllib.error.URLError as exc:
        raise Unusable(f"cannot reach {url}: {exc.reason}") from exc


def _witness(state: Path, name: str | None) -> notes.Signer:
    """The witness's key, made on the first run (its name is kept beside it)."""
    path = state / KEY_FILE
    if not path.exists():
        chosen = name or f"cortexctl-witness/{socket.gethostname()}"
        notes.key_id(chosen, notes.COSIGNATURE_V1, bytes(32))  # a valid key name
        seed = SigningKey.generate().encode()
        _write(path, json.dumps({"name": chosen, "seed": seed.hex()}) + "\n", mode=0o600)
    data = json.loads(path.read_text(encoding="utf-8"))
    if name is not None and name != data["name"]:
        raise Unusable(f"the witness in {state} is named {data['name']!r}, not {name!r}")
    return notes.Signer(data["name"], notes.COSIGNATURE_V1,
                        SigningKey(bytes.fromhex(data["seed"])))


def _key_file(path: Path) -> notes.Signer:
    """A key made elsewhere (the operator's Secret): never written, never printed."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return notes.Signer(str(data["name"]), notes.COSIGNATURE_V1,
                            SigningKey(bytes.fromhex(str(data["seed"]))))
    except (KeyError, TypeError, ValueError) as exc:
        raise Unusable(f"{path} is not a witness key file ({type(exc).__name__})") from exc


class _Tls:
    """The verifying context of an https:// cortex, set once per round."""

    context: ssl.SSLContext | None = None


_TLS = _Tls()


def _log_key(state: Path, given: str | None, base: str, headers: dict[str, str]
             ) -> notes.Verifier:
    path = state / LOG_KEY_FILE
    pinned = notes.Verifier.parse(path.read_text(encoding="utf-8")) if path.exists() else None
    if given is not None:
        wanted = notes.Verifier.parse(given)
        if pinned is not None and pinned != wanted:
            raise Unusable(f"--log-key differs from the key pinned in {path}")
        pinned = wanted
    if pinned is None:
        view = json.loads(_get(f"{base}/v1/audit/checkpoint", headers,
                               accept="application/json"))
        if not view.get("log_key"):
            raise Unusable("the server names no log key; give --log-key")
        pinned = notes.Verifier.parse(view["log_key"])
        print(f"pinned the log key {pinned.vkey()}")
    if not path.exists():
        _write(path, pinned.vkey() + "\n")
    return pinned


def _last(state: Path, log: notes.Verifier) -> notes.Checkpoint | None:
    path = state / CHECKPOINT_FILE
    if not path.exists():
        return None
    try:
        return notes.open_checkpoint(path.read_text(encoding="utf-8"), log)
    except notes.NoteError as exc:
        raise Unusable(f"the cosigned checkpoint in {path} does not verify: {exc}") from exc


def _get(url: str, headers: dict[str, str], *, accept: str) -> str:
    request = urllib.request.Request(url, headers={**headers, "Accept": accept})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S,  # noqa: S310
                                    context=_TLS.context) as answer:
            return str(answer.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        raise Unusable(f"{url.split('?')[0]} answered {exc.code}") from exc
    except urllib.error.URLError as exc:
        raise Unusable(f"cannot reach {url.split('?')[0]}: {exc.reason}") from exc


def _write(path: Path, text: str, *, mode: int = 0o644) -> None:
    """Replace ``path`` atomically (a crash leaves the old file or the new one)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:  # the rename itself survives a crash (kill -9, a node's power) only once synced
        os.fsync(directory)
    finally:
        os.close(directory)
