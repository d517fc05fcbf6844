#!/usr/bin/env python3
"""A complete hook program using only the standard library: copy it to start your own.

Works in both modes the cortex runs hooks in (it sets CORTEX_HOOK_MODE):
  exec   - one request as JSON on stdin, one decision as JSON on stdout, then exit.
  daemon - newline-delimited JSON-RPC 2.0 on stdin/stdout, one line per message, for as
           long as stdin stays open (also what `cortexctl hookd` serves over a socket).
Log to stderr only: stdout is the protocol channel.

This one denies storing content that contains "DO-NOT-STORE" and allows everything else.
"""

import json
import os
import sys


def decide(request):
    payload = request["payload"]
    if request["event"] == "pre_store" and "DO-NOT-STORE" in payload.get("content", ""):
        return {"decision": "deny", "reason": "content is marked DO-NOT-STORE",
                "code": "marked_private"}
    return {"decision": "allow"}


def main():
    if os.environ.get("CORTEX_HOOK_MODE") != "daemon":
        json.dump(decide(json.load(sys.stdin)), sys.stdout)
        return
    for line in sys.stdin:
        message = json.loads(line)
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": decide(message["params"])}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
