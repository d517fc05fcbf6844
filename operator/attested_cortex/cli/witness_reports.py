"""What a running witness tells the operator: the last cosigned size, root and time, and
its last refusal or failure to run, served as JSON on ``GET /report`` (ADR 0102).

Started by ``cortexctl audit witness --every N --report-listen HOST:PORT``; the operator
reads it from the pod's IP (controller/memorycortex/witnesses.py): the witness needs no
Kubernetes permission, and the operator no exec or log access. The report holds sizes,
roots, times and refusal messages: public facts about the log, never the witness's key.
A thread of the standard library's HTTP server; the witness's rounds never wait on it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: The report's keys (the operator reads them: builders/witnessstates.py).
SIZE, ROOT, AT, ERROR = "cosignedSize", "cosignedRoot", "cosignedAt", "lastError"


@dataclass(frozen=True, slots=True)
class Cosigned:
    """The last checkpoint the witness cosigned."""

    size: int
    root: str
    at: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """One round: its exit code, what the state holds, and the refusal or failure."""

    code: int
    cosigned: Cosigned | None
    error: str | None

    def report(self) -> dict[str, Any]:
        """The JSON the operator reads (absent keys: nothing cosigned, no error)."""
        out: dict[str, Any] = {}
        if self.cosigned is not None:
            out.update({SIZE: self.cosigned.size, ROOT: self.cosigned.root})
            if self.cosigned.at:
                out[AT] = self.cosigned.at
        if self.error:
            out[ERROR] = self.error[:1024]
        return out


class ReportServer:
    """Serves the latest outcome until the process ends."""

    def __init__(self, listen: str) -> None:
        host, _, port = listen.rpartition(":")
        self.latest: bytes = b"{}"
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                found = self.path.split("?")[0] == "/report"
                body = owner.latest if found else b'{"error": "not found"}'
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return  # a probe every few seconds is not worth a line

        self.server = ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler)  # noqa: S104
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True,
                         name="witness-report").start()

    def publish(self, outcome: Outcome) -> None:
        """Serve ``outcome`` from now on."""
        self.latest = json.dumps(outcome.report(), sort_keys=True).encode()
