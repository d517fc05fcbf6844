"""A test post_recall hook that reorders the hits as the query's namespace says (daemon or
exec, CORTEX_HOOK_MODE). The namespace's last segment picks the answer: ``reverse`` (the hits
reversed, scored 1, 2, ...), ``drop`` (only the last hit), ``add`` (an id that was not among
them), ``change`` (the first hit with other content), ``sleep`` (answer after 2 s), anything
else Allow.
"""

import json
import os
import sys
import time


def decide(request):
    payload = request["payload"]
    hits = payload.get("results", [])
    mode = (payload.get("namespace") or "").rsplit("/", 1)[-1]
    if mode == "sleep":
        time.sleep(2)
    if mode == "reverse":
        wanted = [{"id": h["id"], "score": float(i)} for i, h in enumerate(reversed(hits), 1)]
    elif mode == "drop":
        wanted = [{"id": hits[-1]["id"]}]
    elif mode == "add":
        wanted = [{"id": "00000000-0000-0000-0000-000000000000", "score": 1.0}]
    elif mode == "change":
        wanted = [{**hits[0], "content": "something else"}]
    else:
        return {"decision": "allow"}
    return {"decision": "modify", "delta": {"results": wanted}}


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
