"""A seeded corpus of realistic multi-turn dialogues: what agents store as transcripts.

Each dialogue is a support or engineering conversation between a user and an agent, with
tool calls and their output (log lines, JSON, shell commands, stack traces), timestamps,
ids, hostnames, numbers and code: the mix that makes real transcripts compress as they do
(prose repeats, ids and hashes do not). Turns are drawn from templates filled with seeded
entities, so the same seed always gives the same corpus and runs compare. Called by
:mod:`bench.transcripts`; ``python -m bench.dialogues`` prints one dialogue.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

SERVICES = ("billing-api", "checkout", "search-indexer", "auth-gateway", "reporting",
            "notifications", "ledger", "media-transcoder", "inventory", "scheduler")
PEOPLE = ("Priya", "Tomás", "Aiko", "Femi", "Lena", "Marcus", "Noor", "Jae-won", "Ines")
ERRORS = ("connection reset by peer", "deadline exceeded", "too many open files",
          "certificate has expired", "lock wait timeout exceeded", "OOMKilled",
          "relation \"orders_archive\" does not exist", "503 Service Unavailable",
          "x509: certificate signed by unknown authority", "disk quota exceeded")
USER_TURNS = (
    "Hey, {service} has been throwing errors since about {time}. Can you take a look?",
    "Customers in {region} report that {service} is slow, p95 went from {a} ms to {b} ms.",
    "The deploy of {service} {version} failed on staging. Logs say \"{error}\".",
    "Can you check why the nightly backup of {service} took {a} minutes instead of {b}?",
    "{person} asked whether we can roll back {service} to {version} before the release.",
    "Is the alert \"{service} error rate > {pct}%\" real or flapping again?",
    "What changed in {service} between {version} and the previous release?",
    "Thanks. Please write this down so the on-call knows next time.",
    "Ok, go ahead, but keep the old replica around until tomorrow.",
    "Can you summarize what happened for the incident channel?",
)
AGENT_TURNS = (
    "Looking at {service} now. I'll start with the error logs from the last hour.",
    "Found it: the pods of {service} restart every {a} s with \"{error}\".",
    "The p95 of {service} is {b} ms on {host}, the other replicas are at {a} ms.",
    "I rolled {service} back to {version}; the error rate is down to {pct}%.",
    "Root cause: a migration in {version} holds a lock for {a} s while {service} retries.",
    "Summary: {service} degraded from {time} for {a} minutes; {error}. Fixed by {person}'s "
    "patch; follow-up ticket {ticket}.",
    "I don't have permission to restart {service} in production; {person} can approve it.",
    "Done. I also added a runbook entry under ops/{service}/restarts.",
)
TOOL_CALLS = (
    "$ kubectl -n prod logs deploy/{service} --since=1h | grep -c ERROR\n{a}",
    "$ kubectl -n prod get pods -l app={service}\nNAME                     READY   STATUS    "
    "RESTARTS   AGE\n{service}-{hash5}-{hash4}   1/1     Running   {small}          {b}m\n"
    "{service}-{hash5}-{hash3}   0/1     CrashLoopBackOff   {a}   {b}m",
    "{stamp} ERROR {service} request_id={uuid} {error} (attempt {small}/5)\n"
    "{stamp} WARN  {service} retrying in {a}ms host={host}",
    "{{\"service\": \"{service}\", \"version\": \"{version}\", \"p50_ms\": {a}, \"p95_ms\": "
    "{b}, \"errors\": {small}, \"trace_id\": \"{hash16}\"}}",
    "Traceback (most recent call last):\n  File \"/app/{module}/handlers.py\", line {b}, in "
    "handle\n    rows = await db.fetch(query, *params)\n  File \"/app/{module}/db.py\", line "
    "{a}, in fetch\n    raise TimeoutError(\"{error}\")\nTimeoutError: {error}",
    "$ git log --oneline {version}..HEAD -- services/{service}\n{hash7} Bump client timeout "
    "to {a} ms\n{hash7} Retry idempotent writes ({ticket})\n{hash7} Log request ids",
)


#: Clauses an agent strings together when it explains (varied prose, not one template).
OPENERS = ("I checked", "I looked at", "I compared", "I went through", "I re-ran",
           "I grepped", "I traced", "I profiled", "I diffed", "I read")
OBJECTS = ("the error logs", "the last three deploys", "the connection pool metrics",
           "the slow query log", "the pod events", "the load balancer health checks",
           "the retry budget", "the config map", "the feature flags", "the cron schedule",
           "the disk usage on the primary", "the trace of a failing request")
FINDINGS = ("and nothing stands out before {time}", "and the spike lines up with the deploy",
            "and one replica is clearly behind", "which shows {a} timeouts in the window",
            "and the pool is exhausted at peak", "so the retries amplify the load",
            "but the numbers look normal on {host}", "and the flag was flipped by {person}",
            "which explains why only {region} is affected", "and it matches {ticket}")
NEXT_STEPS = ("Next I'll raise the pool size to {small}0 and watch it.",
              "I suggest we keep the rollback until {person} reviews the patch.",
              "I'll open a ticket and link it here.", "Let me know if I should page the owner.",
              "I'd rather not touch production without an approval.",
              "I'll check again in {small}0 minutes.", "")


class DialogueGenerator:
    """Seeded dialogues of ``turns`` turns (user, agent, sometimes a tool call between)."""

    def __init__(self, seed: int = 16) -> None:
        self.rng = random.Random(seed)
        self.start = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)

    def _scene(self) -> dict[str, str]:
        """What one conversation is about: it keeps its service, people and versions."""
        r = self.rng
        service = r.choice(SERVICES)
        return {"service": service, "module": service.replace("-", "_"),
                "person": r.choice(PEOPLE), "error": r.choice(ERRORS),
                "region": r.choice(("eu-west-1", "us-east-2", "ap-south-1")),
                "version": f"v{r.randrange(1, 4)}.{r.randrange(0, 30)}.{r.randrange(0, 9)}",
                "host": f"ip-10-{r.randrange(256)}-{r.randrange(256)}-{r.randrange(256)}",
                "ticket": f"OPS-{r.randrange(1000, 9999)}"}

    def _fields(self, scene: dict[str, str], moment: datetime) -> dict[str, str]:
        """The scene plus what changes every turn: numbers, times, ids, hashes."""
        r = self.rng
        return {
            **scene, "time": moment.strftime("%H:%M UTC"),
            "stamp": moment.isoformat(timespec="milliseconds"),
            "a": str(r.randrange(2, 900)), "b": str(r.randrange(100, 5000)),
            "small": str(r.randrange(1, 9)), "pct": f"{r.uniform(0.1, 12):.1f}",
            "uuid": str(uuid.UUID(int=r.getrandbits(128))),
            "hash3": f"{r.getrandbits(12):03x}", "hash4": f"{r.getrandbits(16):04x}",
            "hash5": f"{r.getrandbits(20):05x}", "hash7": f"{r.getrandbits(28):07x}",
            "hash16": f"{r.getrandbits(64):016x}",
        }

    def _explanation(self, fields: dict[str, str]) -> str:
        r = self.rng
        said = [f"{r.choice(OPENERS)} {r.choice(OBJECTS)} {r.choice(FINDINGS)}."
                for _ in range(r.randint(1, 3))]
        return " ".join([*said, r.choice(NEXT_STEPS)]).strip().format(**fields)

    def dialogue(self, turns: int) -> str:
        """One conversation of ``turns`` user/agent exchanges, tool output in between."""
        scene = self._scene()
        moment = self.start + timedelta(minutes=self.rng.randrange(60 * 24 * 28))
        lines = []
        for _ in range(turns):
            moment += timedelta(seconds=self.rng.randrange(20, 600))
            fields = self._fields(scene, moment)
            lines.append("user: " + self.rng.choice(USER_TURNS).format(**fields))
            if self.rng.random() < 0.6:
                lines.append("tool: " + self.rng.choice(TOOL_CALLS).format(**fields))
            answer = self.rng.choice(AGENT_TURNS).format(**fields)
            if self.rng.random() < 0.7:
                answer += " " + self._explanation(fields)
            lines.append("assistant: " + answer)
        return "\n".join(lines) + "\n"

    def corpus(self, count: int, *, turns: tuple[int, int] = (6, 60)) -> list[str]:
        """``count`` dialogues of a varied length (short chats to long sessions)."""
        return [self.dialogue(self.rng.randint(*turns)) for _ in range(count)]


if __name__ == "__main__":
    print(DialogueGenerator().dialogue(8))
