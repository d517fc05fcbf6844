"""A test hook for the spoke-memory family's events (exec or daemon, CORTEX_HOOK_MODE).

Appends every request to RECORD_FILE (one JSON line, under an exclusive lock). Answers:
SPOKE_DENY_OP names an op whose pre_spoke_write is denied; SPOKE_REDACT rewrites the text
of a memory.records.create's content on pre_spoke_write (a Modify); SPOKE_DENY_RECALL denies
post_recall; SPOKE_BAD_MODIFY adds a field no request has; SPOKE_SLEEP_S sleeps before
answering (past a hook's timeout); else allow.
"""

import fcntl
import json
import os
import sys
import time

RECORD = os.environ["RECORD_FILE"]


def decide(request):
    with open(RECORD, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(json.dumps({"event": request["event"], "agent_id": request["agent_id"],
                                 "namespace": request["namespace"],
                                 "payload": request["payload"]}) + "\n")
    time.sleep(float(os.environ.get("SPOKE_SLEEP_S", "0")))
    event, payload = request["event"], request["payload"]
    if event == "pre_spoke_write" and payload["op"] == os.environ.get("SPOKE_DENY_OP"):
        return {"decision": "deny", "reason": "not through here", "code": "spoke_policy"}
    redact = os.environ.get("SPOKE_REDACT")
    if redact and event == "pre_spoke_write" and payload["op"] == "memory.records.create":
        request_ = dict(payload["request"])
        request_["content"] = {**request_["content"], "text": redact}
        return {"decision": "modify", "delta": {"request": request_}}
    if event == "pre_spoke_write" and os.environ.get("SPOKE_BAD_MODIFY"):
        return {"decision": "modify", "delta": {"request": {"nonsense": 1}}}
    if event == "post_recall" and os.environ.get("SPOKE_DENY_RECALL"):
        return {"decision": "deny", "reason": "recall withheld", "code": "no_recall"}
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
