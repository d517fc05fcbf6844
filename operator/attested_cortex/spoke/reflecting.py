"""The default reflection engine: deterministic and free of I/O (seed 001: algorithm policy
is separable). Called by the service's ``spoke.reflections``.

The **basis** of a reflection pins what it was generated over: the authorized record ids
and revisions, the profile revisions by kind, the engine policy identity and the pinned
cognition filter. Its ``state_digest`` is the SHA-256 of the basis in canonical JSON
(sorted keys, no spaces), so any change of the source set, a revision, a profile or the
policy changes the digest and a reflection generated before reads ``stale``.

The synthesis is **extractive**: the subject's profile documents by kind, then the first
sentence of each record in creation order, each line at most 280 characters, the whole at
most 4,000 characters. No model is called, so the same basis always gives the same text.

The optional OpenAI-compatible engine (ADR 0069) is another policy over the same basis: its
identity is ``openai-compatible/<model>`` (so switching engines makes every reflection
stale), its input is :func:`prompt` (the same profiles and record texts, bounded) and its
output is cut by :func:`bounded` like the extractive text.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Sequence
from typing import Final

from attested_cortex.spoke.models import RecordRevision, ReflectionBasis

ENGINE_POLICY: Final = "attested-cortex/extractive-1"
#: The profile kinds generation requires (reported by ``memory.describe``): none.
REQUIRED_PROFILE_KINDS: Final[tuple[str, ...]] = ()
_LINE: Final = 280
_TOTAL: Final = 4000
_SENTENCE = re.compile(r"(.+?[.!?])(\s|$)", re.DOTALL)


def digest(basis: ReflectionBasis) -> str:
    """The ``state_digest`` of a basis."""
    text = json.dumps(basis.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def basis_of(records: Sequence[tuple[uuid.UUID, int]], profiles: dict[str, int],
             policy: str = ENGINE_POLICY) -> ReflectionBasis:
    """The basis over ``(record_id, revision)`` pairs (sorted) and profile revisions."""
    return ReflectionBasis(
        records=[RecordRevision(record_id=r, revision=v)
                 for r, v in sorted(records, key=lambda pair: str(pair[0]))],
        profile_revisions=dict(sorted(profiles.items())), engine_policy=policy)


def endpoint_policy(model: str) -> str:
    """The engine policy identity of an OpenAI-compatible endpoint serving ``model``."""
    return f"openai-compatible/{model}"


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (all of it when it has no end mark), bounded."""
    flat = " ".join(text.split())
    found = _SENTENCE.match(flat)
    sentence = found.group(1) if found else flat
    return sentence if len(sentence) <= _LINE else sentence[:_LINE - 1] + "…"


def synthesize(subject_id: str, profiles: dict[str, str], texts: Sequence[str]) -> str:
    """The extractive synthesis of a subject's profiles and record texts (in order)."""
    lines = [f"About {subject_id}:"]
    lines += [f"{kind}: {first_sentence(text)}" for kind, text in sorted(profiles.items())
              if text.strip()]
    lines += [f"- {first_sentence(text)}" for text in texts if text.strip()]
    whole = "\n".join(lines)
    return whole if len(whole) <= _TOTAL else whole[:_TOTAL - 1] + "…"


#: Bounds on what the endpoint engine sends: per text, and in all.
PROMPT_TEXT: Final = 2000
PROMPT_TOTAL: Final = 24_000
_INSTRUCTION: Final = (
    "You write a short reflection about one subject from the notes given: what is known, "
    "what recurs, and what seems to matter to them. Use only the notes; say nothing the "
    "notes do not support. At most 200 words, plain text.")


def prompt(subject_id: str, profiles: dict[str, str],
           texts: Sequence[str]) -> list[dict[str, str]]:
    """The chat messages of the endpoint engine over a subject's profiles and record texts
    (in order), each text at most :data:`PROMPT_TEXT` characters, the notes at most
    :data:`PROMPT_TOTAL`."""
    lines = [f"Subject: {subject_id}"]
    lines += [f"Profile ({kind}): {text.strip()[:PROMPT_TEXT]}"
              for kind, text in sorted(profiles.items()) if text.strip()]
    lines += [f"Note: {' '.join(text.split())[:PROMPT_TEXT]}" for text in texts if text.strip()]
    notes = "\n".join(lines)[:PROMPT_TOTAL]
    return [{"role": "system", "content": _INSTRUCTION}, {"role": "user", "content": notes}]


def bounded(text: str) -> str:
    """A generated text cut to the reflection's bound (4,000 characters)."""
    return text if len(text) <= _TOTAL else text[:_TOTAL - 1] + "…"
