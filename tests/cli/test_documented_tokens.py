"""The tokens example in docs/authentication.md works as written (issue 20, item 15): it
showed hand-made tokens (``token_urlsafe`` + ``sha256sum``), which the server refuses at
start-up and at request time. The documented commands are run in a real shell and the file
they write is loaded as the server loads it, then the token they print authenticates."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attested_cortex.server.auth import TokenAuth

DOC = Path(__file__).parents[2] / "docs" / "authentication.md"


def documented_example() -> str:
    """The ``sh`` block of the tokens file section, without its ``curl`` line."""
    section = DOC.read_text(encoding="utf-8").split("## The tokens file", 1)[1]
    (block,) = re.findall(r"```sh\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    return "\n".join(line for line in block.splitlines() if not line.startswith("curl"))


@pytest.mark.spawns  # bash runs the documented cortexctl lines
def test_the_documented_token_is_accepted_with_its_scopes(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    script = documented_example() + '\nprintf "%s" "$token" > token.txt\n'
    subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                   check=True, timeout=60)
    auth = TokenAuth.from_file(tmp_path / "tokens")
    token = (tmp_path / "token.txt").read_text()
    caller = asyncio.run(auth.authenticate({"Authorization": f"Bearer {token}"}))
    assert caller.agent_id == "agent-1"
    assert sorted(str(s) for s in caller.scopes.scopes) == [
        "memory.read:team/**", "memory.write:team/**"]
