"""``X-Cortex-Timestamp`` is ASCII digits only (issue 20, item 13): ``²`` was a 500 (over
HTTP and as an MCP tool error), and Arabic-Indic or fullwidth digits were read as a second
spelling of a valid timestamp. Each is now the same 401 as any other bad timestamp."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from attested_cortex.builders.schedules import ScheduleError, parse_schedule
from attested_cortex.errors import InvalidInputError
from attested_cortex.policy.signatures import sign
from attested_cortex.server.settings import split_listen
from tests.mcp.conftest import mcp_client
from tests.mcp.test_mcp_http import error
from tests.server.test_approvals_api import hold, server
from tests.server.test_pipeline import SECRET
from tests.support.cortex import MakeCortex

ARABIC_INDIC = str.maketrans("0123456789", "".join(chr(0x660 + d) for d in range(10)))
FULLWIDTH = str.maketrans("0123456789", "".join(chr(0xFF10 + d) for d in range(10)))


def spellings() -> dict[str, str]:
    """The current unix time in non-ASCII digits, and a superscript that ``int`` refuses."""
    now = str(int(time.time()))
    return {"superscript": "²", "superscript in a number": now[:-1] + "²",
            "arabic-indic": now.translate(ARABIC_INDIC), "fullwidth": now.translate(FULLWIDTH)}


async def test_non_ascii_digits_in_the_timestamp_header_are_401(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    client = await server(make_cortex, migrated_pg15_dsn, tmp_path)
    approval = await hold(client)
    path = f"/v1/approvals/{approval}"
    body = json.dumps({"decision": "approve"}).encode()
    for name, stamp in spellings().items():
        mac = sign(SECRET, timestamp=stamp, method="POST", path=path, body=body)
        headers = {"X-Cortex-Timestamp": stamp, "X-Cortex-Signature": f"sha256={mac}"}
        reply = await client.call("POST", path, raw=body, headers=headers)
        assert (reply.status, reply.body["error"]["code"]) == (
            401, "approval_signature_invalid"), (name, reply.text)
    pending = await client.call("GET", "/v1/approvals")
    assert [a["id"] for a in pending.body["approvals"]] == [approval]


async def test_non_ascii_digits_in_an_mcp_decision_are_401(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    from attested_cortex.service.resources.approvals_api import DecideApproval, canonical_body

    cortex = await server(make_cortex, migrated_pg15_dsn, tmp_path)
    approval = await hold(cortex)
    body = canonical_body(DecideApproval(decision="approve"))
    async with mcp_client(cortex) as client:
        for name, stamp in spellings().items():
            mac = sign(SECRET, timestamp=stamp, method="POST",
                       path=f"/v1/approvals/{approval}", body=body)
            refused = error(await client.call_tool("approval_decide", {
                "id": approval, "decision": "approve", "timestamp": stamp,
                "signature": f"sha256={mac}"}))
            assert (refused["status"], refused["error"]["code"]) == (
                401, "approval_signature_invalid"), (name, refused)


def test_other_digit_fields_take_ascii_digits_only() -> None:
    """The same ``isdigit`` flaw elsewhere: a rotation schedule and a listen port with
    ``²`` were a ValueError instead of the clear refusal."""
    for text in ("²  * * * *", "0 ²-3 * * *", "*/² * * * *", "0 \u0663 * * *"):
        with pytest.raises(ScheduleError):
            parse_schedule(text)
    for address in ("127.0.0.1:8²", "127.0.0.1:\u0668\u0660"):
        with pytest.raises(InvalidInputError):
            split_listen(address)
