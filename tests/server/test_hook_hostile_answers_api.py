"""Hostile hook answers over HTTP: values a client could not send (NaN, Infinity, lone
surrogates, nesting past the body bound, NUL in a Deny's text) are a ``malformed`` failure
of the hook, so its fail mode decides and nothing half-valid is written.

Before: a Modify with a lone surrogate in ``content`` was a 500 (UnicodeEncodeError in the
driver), NaN or Infinity in ``metadata`` a 400 from the database (``invalid_input``, not the
hook's fail mode), and metadata nested 500 deep was stored although a client body is
refused past 64 levels.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from tests.support.cortex import MakeCortex

DEEP = '{"a":' * 500 + "1" + "}" * 500
#: Over a body's 64 levels once taken back into the request, within an answer's bound.
DEEP_65 = '{"a":' * 64 + "1" + "}" * 64
HOSTILE = {
    "nan": '{"decision":"modify","delta":{"metadata":{"x":NaN}}}',
    "infinity": '{"decision":"modify","delta":{"metadata":{"x":1e999}}}',
    "lone_surrogate_content": '{"decision":"modify","delta":{"content":"a\\ud800b"}}',
    "lone_surrogate_key": '{"decision":"modify","delta":{"metadata":{"\\udc00":1}}}',
    "nested_500": '{"decision":"modify","delta":{"metadata":' + DEEP + "}}",
    "deny_surrogate": '{"decision":"deny","reason":"no\\ud800"}',
    "deny_nul": '{"decision":"deny","reason":"no\\u0000"}',
    "ask_surrogate": '{"decision":"ask_user","prompt":"ok\\udfff?"}',
}
#: Answers a JSON-RPC daemon: the hostile answer of ANSWER_FILE for every request.
DAEMON = ("import json, os, sys\n"
          "answer = open(os.environ['ANSWER_FILE']).read()\n"
          "for line in sys.stdin:\n"
          "    rid = json.loads(line)['id']\n"
          "    reply = '{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":%s}' % (rid, answer)\n"
          "    sys.stdout.write(reply + '\\n')\n"
          "    sys.stdout.flush()\n")


def answering(tmp_path: Path, raw: str, *, events: list[str], mode: str = "exec",
              fail_mode: str = "closed") -> Path:
    """A hooks file with one hook that prints ``raw`` as its answer."""
    answer = tmp_path / "answer.json"
    answer.write_text(raw)
    command = (["sh", "-c", f"cat >/dev/null; cat {answer}"] if mode == "exec"
               else [sys.executable, "-c", DAEMON])
    path = tmp_path / "hooks.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "hooks": [{
        "name": "hostile", "events": events, "mode": mode, "command": command,
        "env": {"ANSWER_FILE": str(answer)}, "timeout_ms": 2000, "fail_mode": fail_mode}]}))
    return path


def count(dsn: str, table: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        assert row is not None
        return int(row[0])


def assert_failed_closed(reply: Any) -> None:
    assert reply.status == 403, reply.text
    error = reply.body["error"]
    assert error["details"]["hook_code"] == "hook_failed", error
    assert "(malformed)" in error["message"], error


@pytest.mark.parametrize("mode", ["exec", "daemon"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
async def test_a_hostile_answer_fails_closed_and_stores_nothing(
    case: str, mode: str, make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, graph_backend="CTE",
                               hooks_file=answering(tmp_path, HOSTILE[case], mode=mode,
                                                    events=["pre_store"]))
    reply = await client.call("POST", "/v1/memories", {"namespace": "kb", "content": "c"})
    assert_failed_closed(reply)
    assert count(migrated_pg15_dsn, "memories") == 0


async def test_a_hostile_answer_fails_open_to_the_request_as_sent(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    hooks = answering(tmp_path, HOSTILE["lone_surrogate_content"], events=["pre_store"],
                      fail_mode="open")
    client = await make_cortex(migrated_pg15_dsn, migrated=False, graph_backend="CTE",
                               hooks_file=hooks)
    stored = await client.store("kb", "as sent")
    assert stored["content"] == "as sent"
    assert count(migrated_pg15_dsn, "memories") == 1


async def test_a_hostile_transcript_modify_stores_no_transcript(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    hooks = answering(tmp_path, HOSTILE["lone_surrogate_content"],
                      events=["pre_transcript_store"])
    client = await make_cortex(migrated_pg15_dsn, migrated=False, graph_backend="CTE",
                               hooks_file=hooks, transcripts={"enabled": True})
    reply = await client.call("POST", "/v1/transcripts", {"namespace": "kb", "content": "t"})
    assert_failed_closed(reply)
    assert count(migrated_pg15_dsn, "transcripts") == 0


async def test_a_modify_nested_past_the_body_bound_is_an_invalid_modify(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    hooks = answering(tmp_path, '{"decision":"modify","delta":{"metadata":' + DEEP_65 + "}}",
                      events=["pre_store"])
    client = await make_cortex(migrated_pg15_dsn, migrated=False, graph_backend="CTE",
                               hooks_file=hooks)
    reply = await client.call("POST", "/v1/memories", {"namespace": "kb", "content": "c"})
    assert reply.status == 400, reply.text
    assert reply.body["error"]["code"] == "hook_invalid_modify"
    assert count(migrated_pg15_dsn, "memories") == 0



async def test_a_hostile_answer_to_an_mcp_tool_call_is_refused_like_http(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    from tests.mcp.conftest import mcp_client

    hooks = answering(tmp_path, HOSTILE["lone_surrogate_content"], events=["pre_store"])
    client = await make_cortex(migrated_pg15_dsn, migrated=False, graph_backend="CTE",
                               hooks_file=hooks)
    async with mcp_client(client) as mcp:
        result = await mcp.call_tool("memory_store", {"namespace": "kb", "content": "c"})
    assert result.is_error
    refused = result.structured_content
    assert refused["status"] == 403, refused
    assert refused["error"]["details"]["hook_code"] == "hook_failed"
    assert count(migrated_pg15_dsn, "memories") == 0
