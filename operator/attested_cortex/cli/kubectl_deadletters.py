"""``kubectl cortex dead-letters <cortex> <subscription>``: a webhook subscription's dead
letters (issue 41), listed, replayed (``--replay SEQ`` or ``--replay all``) or purged
(``--purge``), through the cortex's API (``/v1/subscriptions/{name}/dead-letters``) with the
caller's token; the caller needs ``subscriptions.manage``. Called by
:mod:`.kubectl_commands`.
"""

from __future__ import annotations

import argparse
import json
import urllib.parse

from attested_cortex.cli.kubectl_commands import PluginError, _base, _bearer, _call, _refused
from attested_cortex.kubeclient import KubeApi


async def dead_letters(api: KubeApi, namespace: str, args: argparse.Namespace) -> int:
    base, token = await _base(api, namespace, args), _bearer(args)
    path = f"{base}/v1/subscriptions/{urllib.parse.quote(args.subscription, safe='')}"
    if args.purge:
        code, answer = _call("DELETE", f"{path}/dead-letters", token=token)
        if code != 200:
            raise _refused(code, answer)
        print(f"purged {answer.get('purged')} dead letters of {args.subscription}")
        return 0
    if args.replay is not None:
        wanted = {} if args.replay == "all" else {"sequence": _sequence(args.replay)}
        code, answer = _call("POST", f"{path}/dead-letters/replay", token=token,
                            body=json.dumps(wanted).encode())
        if code != 200:
            raise _refused(code, answer)
        failed = answer.get("failed") or []
        print(f"delivered {len(answer.get('delivered') or [])}, failed {len(failed)}")
        for item in failed:
            print(f"  {item['sequence']}: {item['error']}")
        return 1 if failed else 0
    code, page = _call("GET", f"{path}/dead-letters?limit=1000", token=token)
    if code != 200:
        raise _refused(code, page)
    letters = page.get("dead_letters") or []
    print(f"{len(letters)} dead letters" + (" (more: page with the API)" if page.get("next")
                                            else ""))
    for dead in letters:
        print(f"  {dead['sequence']}  {dead['event']}  {dead['key']}  {dead['attempts']} "
              f"attempts, last: {dead['last_error']}  ({dead['dead_at']})")
    return 0


def _sequence(text: str) -> int:
    if not text.isdigit():
        raise PluginError(f"--replay takes a sequence number or 'all', not {text!r}")
    return int(text)
