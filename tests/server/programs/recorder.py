"""A test hook that records every request it receives and answers what RECORDER_ANSWER says.

Works as exec or daemon (CORTEX_HOOK_MODE). Each request is appended to RECORD_FILE as one
JSON line (written whole under an exclusive lock, so concurrent fires never interleave).
RECORDER_ANSWER is a JSON decision (default allow); RECORDER_MODIFY_CONTENT, when set,
answers pre_store/pre_update with a Modify that replaces the content; RECORDER_DENY_CONTENT,
when set, denies a pre_store whose content contains it.
"""

import fcntl
import json
import os
import sys

RECORD = os.environ["RECORD_FILE"]
ANSWER = json.loads(os.environ.get("RECORDER_ANSWER", '{"decision": "allow"}'))
MODIFY = os.environ.get("RECORDER_MODIFY_CONTENT")
DENY = os.environ.get("RECORDER_DENY_CONTENT")


def decide(request):
    with open(RECORD, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(json.dumps({"event": request["event"], "agent_id": request["agent_id"],
                                 "namespace": request["namespace"],
                                 "payload": request["payload"]}) + "\n")
    if (DENY is not None and request["event"] == "pre_store"
            and DENY in request["payload"]["content"]):
        return {"decision": "deny", "reason": "not this one", "code": "no_secrets"}
    if MODIFY is not None and request["event"] in ("pre_store", "pre_update"):
        return {"decision": "modify", "delta": {"content": MODIFY}}
    return ANSWER


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
