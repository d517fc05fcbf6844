"""Ed25519 signatures checked in bulk: ed25519-zebra, in worker processes once the work is big.

Called by :func:`~attested_cortex.attest.verifying.check_batch`, so by the chain walks of
``cortexctl audit verify`` (the restore's verification Job), ``GET /v1/audit/verify`` and the
bundle import. One write's signature is still checked by :func:`.signing.verify` (libsodium).

Why (issue 24, docs/adr/0077): a chain walk checks one Ed25519 signature per event, and
libsodium's verify costs about 57-69 us of CPU here, so even with both cores verifying
(PyNaCl releases the GIL) the walk topped out at 18,883 events/s on an idle machine against
the 20,000/s goal. ed25519-zebra (the Zcash Foundation's Rust implementation, through the
``py-ed25519-zebra-bindings`` wheel) verifies in about 41 us but holds the GIL, so threads
do not add up; two worker processes do (42,500 signatures/s, pickling included).

What zebra accepts (ADR 0077): the ZIP-215 rules, which accept every signature libsodium
accepts and, in addition, signatures whose R or public key is a non-canonical encoding or
carries a small-order component. Only the holder of the private key can make such a
signature for a new message, so a forged or altered event still fails; the server checks
every agent signature with libsodium when it is written, so stored signatures are strict.

Small work (fewer than ``min_parallel`` signatures) is checked in the calling thread: no
process is started for a short chain, e.g. a server's ``GET /v1/audit/verify`` of a new
cortex. Where no process can be started (no ``/dev/shm``, a sandbox), the checks run in the
calling thread as well: slower, never wrong.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from types import TracebackType

import ed25519_zebra

#: (signature, message, public key): one check.
Triple = tuple[bytes, bytes, bytes]

_KEY_BYTES, _SIGNATURE_BYTES = 32, 64
_MIN_PARALLEL = 2000


def first_invalid(triples: Sequence[Triple]) -> int | None:
    """The offset of the first triple whose signature does not verify; None if all do.
    Runs in a worker process (module level, so that it pickles by name)."""
    verify = ed25519_zebra.ed_verify
    for offset, (signature, message, key) in enumerate(triples):
        if len(signature) != _SIGNATURE_BYTES or len(key) != _KEY_BYTES:
            return offset
        try:
            if not verify(signature, message, key):
                return offset
        except ValueError:  # a key that is not a point: no signature verifies under it
            return offset
    return None


class Pending:
    """Checks submitted and not yet collected: the slices' futures, or the triples to check
    in the calling thread when :meth:`result` is asked."""

    def __init__(self, triples: Sequence[Triple],
                 futures: list[tuple[int, int, Future[int | None]]]) -> None:
        self._triples = triples
        self._futures = futures

    def result(self) -> int | None:
        """The offset of the first invalid triple of the whole submission; None if all verify."""
        if not self._futures:
            return first_invalid(self._triples)
        found = []
        for start, end, future in self._futures:
            try:
                bad = future.result()
            except BrokenProcessPool:  # a worker died (killed, out of memory): check here
                bad = first_invalid(self._triples[start:end])
            if bad is not None:
                found.append(start + bad)
        return min(found, default=None)


class BulkVerifier:
    """Checks lists of triples on ``workers`` processes (started on first need, stopped on
    :meth:`close`); use it as a context manager around one verification pass."""

    def __init__(self, workers: int | None = None, *, min_parallel: int = _MIN_PARALLEL) -> None:
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        self.min_parallel = min_parallel
        self._pool: ProcessPoolExecutor | None = None
        self._unavailable = self.workers < 2

    def submit(self, triples: Sequence[Triple]) -> Pending:
        """Start checking ``triples``; the answer is :meth:`Pending.result`."""
        pool = self._started() if len(triples) >= self.min_parallel else None
        if pool is None:
            return Pending(triples, [])
        size = -(-len(triples) // self.workers)
        try:
            return Pending(triples, [
                (start, start + size,
                 pool.submit(first_invalid, list(triples[start:start + size])))
                for start in range(0, len(triples), size)])
        except BrokenProcessPool:  # a worker died since the last batch: go on in this thread
            self.close()
            self._unavailable = True
            return Pending(triples, [])

    def _started(self) -> ProcessPoolExecutor | None:
        if self._pool is None and not self._unavailable:
            try:
                # spawn, never fork: the server calling this runs threads and an event loop.
                self._pool = ProcessPoolExecutor(
                    max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"))
            except (OSError, ImportError, NotImplementedError):
                self._unavailable = True
        return self._pool

    def close(self) -> None:
        """Stop the worker processes, if any were started."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> BulkVerifier:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
