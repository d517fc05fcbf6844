"""The bulk verifier (ADR 0077): ed25519-zebra in worker processes. It must accept what
libsodium accepts, refuse a changed message, a signature by another key, a non-canonical S
and malformed input, name the first bad one by position across its slices, and keep
answering in the calling thread when its workers are killed. Real keys, real processes."""

from __future__ import annotations

import os
import signal

import pytest

from attested_cortex.attest.bulkverify import BulkVerifier, first_invalid
from attested_cortex.attest.keys import generate_key
from attested_cortex.attest.signing import sign, verify
from attested_cortex.types import AgentId

KEY = generate_key(AgentId("k8s:t/agent"))
PUBLIC = KEY.public.public_key
# The order of the Ed25519 group (RFC 8032 section 5.1): S must be below it.
L = 2**252 + 27742317777372353535851937790883648493


def triples(count: int) -> list[tuple[bytes, bytes, bytes]]:
    messages = [f"event {n}".encode() * (1 + n % 7) for n in range(count)]
    return [(sign(KEY, m), m, PUBLIC) for m in messages]


def test_signatures_libsodium_accepts_are_accepted() -> None:
    good = triples(300)
    assert all(verify(k, m, s) for s, m, k in good)
    assert first_invalid(good) is None


def test_the_first_bad_one_is_named_by_position() -> None:
    checks = triples(50)
    other = generate_key(AgentId("k8s:t/other"))
    checks[31] = (checks[31][0], b"changed", PUBLIC)
    checks[40] = (sign(other, checks[40][1]), checks[40][1], PUBLIC)
    assert first_invalid(checks) == 31
    assert first_invalid(checks[32:]) == 8


def test_a_non_canonical_s_is_refused_as_libsodium_refuses_it() -> None:
    signature, message, key = triples(1)[0]
    s = int.from_bytes(signature[32:], "little") + L  # the same scalar, not reduced
    malleated = signature[:32] + s.to_bytes(32, "little")
    assert not verify(key, message, malleated)
    assert first_invalid([(malleated, message, key)]) == 0


@pytest.mark.parametrize("bad", [
    (b"\x00" * 63, b"m", PUBLIC),           # short signature
    (b"\x00" * 64, b"m", PUBLIC[:31]),      # short key
    (b"\x00" * 64, b"m", b"\xff" * 32),     # a key that is not a point
])
def test_malformed_input_is_invalid_not_an_error(bad: tuple[bytes, bytes, bytes]) -> None:
    assert first_invalid([*triples(2), bad]) == 2


@pytest.mark.spawns
def test_slices_on_worker_processes_agree_with_one_thread() -> None:
    checks = triples(90)
    checks[70] = (checks[70][0], b"changed", PUBLIC)
    checks[20] = (checks[20][0], b"changed too", PUBLIC)
    with BulkVerifier(3, min_parallel=1) as verifier:
        assert verifier.submit(checks).result() == 20
        assert verifier.submit(checks[21:]).result() == 49
        assert verifier.submit(checks[:20]).result() is None


@pytest.mark.spawns
def test_killed_workers_leave_the_answer_to_the_calling_thread() -> None:
    checks = triples(40)
    checks[33] = (checks[33][0], b"changed", PUBLIC)
    with BulkVerifier(2, min_parallel=1) as verifier:
        assert verifier.submit(checks).result() == 33  # the workers are up
        pool = verifier._pool
        assert pool is not None
        for pid in list(pool._processes):
            os.kill(pid, signal.SIGKILL)
        pending = verifier.submit(checks)  # broken now or at result(): the same answer
        assert pending.result() == 33
        assert verifier.submit(checks[:30]).result() is None
