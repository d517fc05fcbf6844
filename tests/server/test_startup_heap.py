"""``cortexctl serve`` freezes its start-up heap once it listens (serving.freeze_startup_heap).

Without it every full garbage collection re-walks modules and the application, and one landing
inside a request added tens of milliseconds to it (ADR 0006).
"""

from __future__ import annotations

import gc

from attested_cortex.server.serving import freeze_startup_heap


def test_start_up_objects_leave_the_collectors_generations() -> None:
    survivor = {"lives": "as long as the process"}
    try:
        freeze_startup_heap()
        assert gc.get_freeze_count() > 0
        tracked = {id(o) for generation in range(3) for o in gc.get_objects(generation)}
        assert id(survivor) not in tracked
    finally:
        gc.unfreeze()
