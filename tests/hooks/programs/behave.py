"""A test hook whose behaviour each request chooses through ``payload["behave"]``.

Runs in exec mode (one request on stdin) or daemon mode (JSON-RPC lines, each request in
its own thread) according to CORTEX_HOOK_MODE. ``argv[1]``, when given, is the default
behaviour as JSON, e.g. ``'{"answer": {"decision": "deny", "reason": "no"}}'``.

Behaviours (keys of the behave object, combined): ``sleep`` seconds first; ``answer`` the
decision to return (default allow); ``append``: Modify that appends the hook's name to the
payload's ``seen`` list; ``crash``: exit 3; ``garbage``: print non-JSON; ``empty``: print
nothing; ``oversized``: pad the answer to that many bytes; ``grandchild``: start a
``sleep 300`` grandchild, write its pid to that path, then hang; ``orphan``: start a
grandchild in a session of its own that keeps stdout open for 300 s, write its pid to that
path, then exit 3 (only the first ``orphan`` request of a daemon's life). Daemon only:
``raw_result``: reply with this JSON text as the result, verbatim, and ``reply_id`` as the
id (default the request's).
"""

import json
import os
import subprocess
import sys
import threading
import time

DEFAULT = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
WRITE = threading.Lock()


def decide(request):
    behave = {**DEFAULT, **request["payload"].get("behave", {})}
    if "sleep" in behave:
        time.sleep(behave["sleep"])
    if behave.get("crash"):
        os._exit(3)
    if behave.get("garbage"):
        return "this is not json"
    if behave.get("empty"):
        return ""
    if "orphan" in behave and not os.environ.get("ORPHANED"):
        os.environ["ORPHANED"] = "1"
        pid = os.fork()
        if pid == 0:
            os.setsid()  # out of the hook's process group: the group kill misses it
            time.sleep(300)
            os._exit(0)
        with open(behave["orphan"], "w") as handle:
            handle.write(str(pid))
        os._exit(3)
    if "grandchild" in behave:
        child = subprocess.Popen(["sleep", "300"])
        with open(behave["grandchild"], "w") as handle:
            handle.write(str(child.pid))
        time.sleep(300)
    if behave.get("append"):
        seen = request["payload"].get("seen", [])
        answer = {"decision": "modify", "delta": {"seen": [*seen, request["hook"]]}}
    else:
        answer = behave.get("answer", {"decision": "allow"})
    text = json.dumps(answer)
    if "oversized" in behave:
        text = text + " " * behave["oversized"]
    return text


def serve_daemon():
    def handle(message):
        behave = {**DEFAULT, **message["params"]["payload"].get("behave", {})}
        if "raw_result" in behave:
            rid = json.dumps(behave.get("reply_id", message["id"]))
            with WRITE:
                sys.stdout.write(f'{{"jsonrpc": "2.0", "id": {rid}, '
                                 f'"result": {behave["raw_result"]}}}\n')
                sys.stdout.flush()
            return
        text = decide(message["params"])
        if text and text[0] == "{":
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": json.loads(text)}
            text = json.dumps(reply) + " " * (len(text) - len(text.rstrip()))
        with WRITE:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()

    for line in sys.stdin:
        threading.Thread(target=handle, args=(json.loads(line),), daemon=True).start()


if os.environ.get("CORTEX_HOOK_MODE") == "daemon":
    serve_daemon()
else:
    sys.stdout.write(decide(json.load(sys.stdin)))
