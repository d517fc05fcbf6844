"""Span offsets are Unicode code points, and the conversion docs/transcripts.md gives a
JavaScript client works (issue 20, item 15): the docs said "characters", and a client's
UTF-16 offsets select the wrong text after an emoji. The documented snippet runs in a real
``node``, and its offsets cite the intended text through a real server."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cortex import CortexClient, MakeCortex
from tests.transcripts.common import store_transcript

DOC = Path(__file__).parents[2] / "docs" / "transcripts.md"
TEXT = "user: 😀 the deploy 🚀 failed on staging 👀\nagent: the migration timed out\n"
QUOTE = "the migration timed out"


def documented_snippet() -> str:
    (block,) = re.findall(r"```js\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    return block


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
async def test_the_documented_conversion_cites_the_intended_text(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client: CortexClient = await make_cortex(migrated_pg15_dsn, migrated=False,
                                             transcripts={"enabled": True})
    stored = await store_transcript(client, content=TEXT)
    script = (f"const transcript = {json.dumps(TEXT)}; const quote = {json.dumps(QUOTE)};\n"
              + documented_snippet()
              + "\nconsole.log(JSON.stringify({start, end, naive: transcript.indexOf(quote),"
                " back: toUtf16(transcript, start)}));\n")
    ran = await asyncio.to_thread(subprocess.run, ["node", "-e", script], capture_output=True,
                                  text=True, check=True, timeout=60)
    found = json.loads(ran.stdout)
    assert (found["start"], found["end"]) == (TEXT.index(QUOTE), TEXT.index(QUOTE) + len(QUOTE))
    assert found["naive"] != found["start"] and found["back"] == found["naive"]
    memory = await client.store("support/acme", "why staging failed", citations=[
        {"transcript_id": stored["id"], "start": found["start"], "end": found["end"]}])
    replay = await client.call("GET", f"/v1/memories/{memory['id']}/replay")
    assert replay.body["citations"][0]["text"] == QUOTE
