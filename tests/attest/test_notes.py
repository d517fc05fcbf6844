"""C2SP signed notes (attest/notes.py) against the vectors of the signed-note specification
and of Go's golang.org/x/mod/sumdb/note; checkpoints and cosignatures round trip."""

from __future__ import annotations

import base64

import pytest
from nacl.signing import SigningKey

from attested_cortex.attest import notes

SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
SPEC_NOTE = ("This is an example message.\n\n\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1Y"
             "Eq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n")
GO_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = ("If you think cryptography is the answer to your problem,\n"
           "then you don't know what your problem is.\n")
GO_NOTE = (GO_TEXT + "\n\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FF"
           "YC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n")


def test_the_specifications_vectors() -> None:
    assert notes.verified(SPEC_NOTE, notes.Verifier.parse(SPEC_VKEY)) == \
        "This is an example message.\n"
    seed = base64.b64decode(GO_SKEY.split("+", 4)[4])[1:]
    signer = notes.Signer("PeterNeumann", notes.ED25519, SigningKey(seed))
    assert signer.verifier.vkey() == GO_VKEY
    assert notes.sign(GO_TEXT, signer) == GO_NOTE
    with pytest.raises(notes.NoteError, match="does not verify"):
        notes.verified(GO_NOTE.replace("problem,", "problems,"), signer.verifier)
    with pytest.raises(notes.NoteError, match="does not match"):
        notes.Verifier.parse(GO_VKEY.replace("c74f20a3", "c74f20a4"))


def test_a_checkpoint_and_its_cosignature() -> None:
    log = notes.Signer("cortex.example/audit", notes.ED25519, SigningKey.generate())
    witness = notes.Signer("witness.example", notes.COSIGNATURE_V1, SigningKey.generate())
    checkpoint = notes.Checkpoint("cortex.example/audit", 7, bytes(range(32)))
    note = notes.sign(checkpoint.text(), log)
    assert notes.open_checkpoint(note, log.verifier) == checkpoint
    line = notes.cosign(note, witness, 1_727_964_367)
    cosigned = notes.with_signatures(note, [line])
    assert notes.verify_cosignature(cosigned, witness.verifier) == 1_727_964_367
    assert notes.open_checkpoint(cosigned, log.verifier) == checkpoint
    other = notes.Signer("other.example/audit", notes.ED25519, log.key)
    with pytest.raises(notes.NoteError, match="origin"):
        notes.open_checkpoint(notes.sign(checkpoint.text(), other), other.verifier)
    for bad in ("o\n07\nAAAA\n", "o\n7\n", "o\n7\nAAAA\n"):
        with pytest.raises(notes.NoteError):
            notes.Checkpoint.parse(bad)
