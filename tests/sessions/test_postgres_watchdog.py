"""The PostgreSQL stores' timeout watchdog (one thread shutting the sockets of calls whose
deadline passed): a disarmed alarm never fires, a due one does, and the alarms of calls that
ended long before their deadline do not pile up in it. No server needed."""

from __future__ import annotations

import threading
import time

from aniki.sessions.postgres._drive import _STALE_LEAST, _Watchdog


def test_disarmed_alarms_do_not_pile_up() -> None:
    watchdog = _Watchdog()
    later = time.monotonic() + 3600
    for _ in range(20):  # 20 calls in flight, then 5,000 calls that each end at once
        watchdog.arm(later, lambda: None)
    for n in range(5_000):
        assert not watchdog.disarm(watchdog.arm(later + n, lambda: None))
    assert len(watchdog._heap) <= 2 * _STALE_LEAST + 20  # it held 5,020 before


def test_due_alarms_fire_and_disarmed_ones_never_do() -> None:
    watchdog = _Watchdog()
    fired: list[int] = []
    done = threading.Event()
    soon = time.monotonic() + 0.2
    kept = []
    for n in range(3 * _STALE_LEAST):
        entry = watchdog.arm(soon + n * 1e-6, lambda n=n: fired.append(n))
        if n % 50 == 0:
            kept.append((n, entry))
        else:
            watchdog.disarm(entry)  # the heap is rebuilt at least once meanwhile
    watchdog.arm(soon + 0.1, done.set)
    assert done.wait(5)
    assert fired == [n for n, _ in kept]
    assert all(watchdog.disarm(entry) for _, entry in kept)  # each says it had fired
