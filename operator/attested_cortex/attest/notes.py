"""C2SP signed notes, checkpoints and cosignatures: text in, text out, Ed25519 via PyNaCl.

Pure. The formats are C2SP's ``signed-note``, ``tlog-checkpoint`` and ``tlog-cosignature``
(the ones Go's ``golang.org/x/mod/sumdb/note``, transparency-dev and the C2SP witnesses
speak; the tests hold them to those specifications' vectors):

* a note is UTF-8 text ending in a newline, a blank line, then one line per signature,
  ``— <key name> <base64(key id (4 bytes) || signature)>``;
* a key id is the first 4 bytes of ``SHA-256(name || 0x0A || type || public key)``, type
  ``0x01`` for an Ed25519 note signature and ``0x04`` for a ``cosignature/v1``;
* a verifier key is written ``<name>+<key id, 8 hex digits>+<base64(type || public key)>``;
* a checkpoint's text is ``<origin>\\n<tree size>\\n<base64 root hash>\\n`` (no extension
  lines here), signed by the log's key whose name is the origin;
* a cosignature signs ``cosignature/v1\\ntime <unix seconds>\\n`` followed by the checkpoint
  text, and its signature field is ``timestamp (8 bytes, big-endian) || signature``.

Called by :mod:`.checkpointing` (the server's checkpoints) and by the witness and verify
commands (:mod:`attested_cortex.cli.witnessing`, :mod:`attested_cortex.cli.audit`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
from dataclasses import dataclass
from typing import Final, Literal

from nacl.signing import SigningKey

from attested_cortex.attest.signing import verify

ED25519: Final = 0x01
COSIGNATURE_V1: Final = 0x04
SigType = Literal[0x01, 0x04]
DASH: Final = "\u2014"
#: A key name: no whitespace, no ``+`` (C2SP signed-note).
_NAME = re.compile(r"^[^\s+]+$")
_SIG_LINE = re.compile(r"^\u2014 (\S+) ([A-Za-z0-9+/=]+)$")


class NoteError(ValueError):
    """A note, key or checkpoint that is malformed or does not verify; says which."""


def key_id(name: str, sig_type: int, public_key: bytes) -> bytes:
    """The 4-byte key id of a key (signed-note)."""
    if not _NAME.match(name):
        raise NoteError(f"key name {name!r} must hold no space and no '+'")
    return hashlib.sha256(name.encode() + b"\n" + bytes([sig_type]) + public_key).digest()[:4]


@dataclass(frozen=True, slots=True)
class Verifier:
    """A named public key that verifies note signatures of one type."""

    name: str
    sig_type: int
    public_key: bytes

    @property
    def key_id(self) -> bytes:
        """Its 4-byte key id."""
        return key_id(self.name, self.sig_type, self.public_key)

    def vkey(self) -> str:
        """Its verifier key text, ``name+id+base64(type||key)``."""
        raw = bytes([self.sig_type]) + self.public_key
        return f"{self.name}+{self.key_id.hex()}+{base64.b64encode(raw).decode()}"

    @classmethod
    def parse(cls, vkey: str) -> Verifier:
        """Read a verifier key; its id must match its name, type and key."""
        parts = vkey.strip().split("+", 2)
        if len(parts) != 3 or not re.fullmatch(r"[0-9a-f]{8}", parts[1]):
            raise NoteError("a verifier key is name+<8 hex digits>+<base64>")
        try:
            raw = base64.b64decode(parts[2], validate=True)
        except binascii.Error as exc:
            raise NoteError("the verifier key's key is not base64") from exc
        if len(raw) != 33 or raw[0] not in (ED25519, COSIGNATURE_V1):
            raise NoteError("only Ed25519 (0x01) and cosignature/v1 (0x04) keys are known")
        found = cls(parts[0], raw[0], raw[1:])
        if found.key_id.hex() != parts[1]:
            raise NoteError(f"the verifier key's id {parts[1]} does not match its key")
        return found


@dataclass(frozen=True, slots=True)
class Signer:
    """A named private key that signs notes (a log, type 0x01) or cosigns (a witness, 0x04)."""

    name: str
    sig_type: int
    key: SigningKey

    @property
    def verifier(self) -> Verifier:
        """Its public half."""
        return Verifier(self.name, self.sig_type, bytes(self.key.verify_key))


@dataclass(frozen=True, slots=True)
class NoteSignature:
    """One signature line of a note."""

    name: str
    key_id: bytes
    signature: bytes

    def line(self) -> str:
        """The line as the note writes it (without the newline)."""
        return f"{DASH} {self.name} {base64.b64encode(self.key_id + self.signature).decode()}"


def split(note: str) -> tuple[str, list[NoteSignature]]:
    """A note's text (ending in its newline) and its signature lines."""
    if not note.endswith("\n"):
        raise NoteError("a note ends with a newline")
    text, sep, sigs = note[:-1].rpartition("\n\n")
    if not sep:
        raise NoteError("a note's signatures follow a blank line")
    found: list[NoteSignature] = []
    for line in sigs.split("\n"):
        match = _SIG_LINE.match(line)
        if match is None:
            raise NoteError("a malformed signature line")
        try:
            raw = base64.b64decode(match[2], validate=True)
        except binascii.Error as exc:
            raise NoteError("a signature is not base64") from exc
        if len(raw) < 5:
            raise NoteError("a signature too short to hold a key id")
        found.append(NoteSignature(match[1], raw[:4], raw[4:]))
    if any(c < " " and c != "\n" for c in text):
        raise NoteError("a note's text holds a control character")
    return text + "\n", found


def sign(text: str, signer: Signer) -> str:
    """The note of ``text`` (ending in a newline) signed by ``signer`` (type 0x01)."""
    if not text.endswith("\n"):
        raise NoteError("a note's text ends with a newline")
    signature = signer.key.sign(text.encode()).signature
    line = NoteSignature(signer.name, signer.verifier.key_id, signature).line()
    return f"{text}\n{line}\n"


def verified(note: str, verifier: Verifier) -> str:
    """The note's text, when ``verifier`` signed it; raise :class:`NoteError` otherwise."""
    text, sigs = split(note)
    for sig in sigs:
        if sig.name == verifier.name and sig.key_id == verifier.key_id:
            if verify(verifier.public_key, text.encode(), sig.signature):
                return text
            raise NoteError(f"the signature of {verifier.name} does not verify")
    raise NoteError(f"the note carries no signature of {verifier.name} "
                    f"(key {verifier.key_id.hex()})")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A tlog-checkpoint's text: the log's origin, a tree size and its root hash."""

    origin: str
    size: int
    root: bytes

    def text(self) -> str:
        """The checkpoint body the log signs."""
        return f"{self.origin}\n{self.size}\n{base64.b64encode(self.root).decode()}\n"

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """Read a checkpoint body (extension lines are allowed and ignored)."""
        lines = text.split("\n")
        if len(lines) < 4 or lines[-1] != "" or "" in lines[:-1]:
            raise NoteError("a checkpoint is origin, size and root, one a line")
        origin, size, root = lines[:3]
        if not origin or not re.fullmatch(r"0|[1-9][0-9]{0,19}", size):
            raise NoteError("a checkpoint's size is a decimal without leading zeros")
        try:
            digest = base64.b64decode(root, validate=True)
        except binascii.Error as exc:
            raise NoteError("a checkpoint's root hash is not base64") from exc
        if len(digest) != 32:
            raise NoteError("a checkpoint's root hash is 32 bytes")
        return cls(origin, int(size), digest)


def open_checkpoint(note: str, log: Verifier) -> Checkpoint:
    """The checkpoint of a note signed by ``log``, whose name must be the origin."""
    checkpoint = Checkpoint.parse(verified(note, log))
    if checkpoint.origin != log.name:
        raise NoteError(f"the checkpoint's origin {checkpoint.origin!r} is not the log "
                        f"key's name {log.name!r}")
    return checkpoint


def cosignature_message(text: str, timestamp: int) -> bytes:
    """What a ``cosignature/v1`` signs: the header lines, then the checkpoint text."""
    return f"cosignature/v1\ntime {timestamp}\n{text}".encode()


def cosign(note: str, witness: Signer, timestamp: int) -> NoteSignature:
    """The witness's cosignature line of the checkpoint ``note`` at ``timestamp`` (seconds)."""
    text, _ = split(note)
    signature = witness.key.sign(cosignature_message(text, timestamp)).signature
    return NoteSignature(witness.name, witness.verifier.key_id,
                         struct.pack(">Q", timestamp) + signature)


def verify_cosignature(note: str, witness: Verifier) -> int:
    """The timestamp of ``witness``'s valid cosignature on ``note``; NoteError otherwise."""
    text, sigs = split(note)
    for sig in sigs:
        if sig.name != witness.name or sig.key_id != witness.key_id:
            continue
        if len(sig.signature) != 72:
            raise NoteError("a cosignature is a timestamp and a 64-byte signature")
        (timestamp,) = struct.unpack(">Q", sig.signature[:8])
        if verify(witness.public_key, cosignature_message(text, timestamp),
                  sig.signature[8:]):
            return int(timestamp)
        raise NoteError(f"the cosignature of {witness.name} does not verify")
    raise NoteError(f"the note carries no cosignature of {witness.name}")


def with_signatures(note: str, lines: list[NoteSignature]) -> str:
    """The note with more signature lines appended."""
    return note + "".join(f"{line.line()}\n" for line in lines)
