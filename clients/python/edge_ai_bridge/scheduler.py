"""One thread for every timer of a client (deadlines, attempt timeouts, retry waits), so a
hundred calls in flight cost one thread, not a hundred ``threading.Timer`` threads.

A cancelled timer stays in the heap until it is due (at the latest its call's deadline), which
bounds the heap by the calls of the last ``timeout`` seconds."""
from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Callable, List, Tuple

log = logging.getLogger("edge_ai_bridge")


class Timer:
    """A scheduled callback; ``cancel()`` keeps it from running if it has not yet."""

    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Scheduler:
    """Runs callbacks at monotonic times on its own daemon thread, one at a time."""

    def __init__(self, name: str) -> None:
        self._heap: List[Tuple[float, int, Timer, Callable[[], None]]] = []
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def call_at(self, when: float, fn: Callable[[], None]) -> Timer:
        """Runs ``fn`` at ``when`` (``time.monotonic()`` seconds)."""
        timer = Timer()
        with self._cond:
            heapq.heappush(self._heap, (when, next(self._order), timer, fn))
            self._cond.notify()
        return timer

    def stop(self) -> None:
        """Ends the thread; timers not yet run never run. Safe to call from a callback."""
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        while True:
            job = self._next_due()
            if job is None:
                return
            try:
                job()
            except Exception:  # a bug in one callback must not stop every other timer
                log.exception("timer callback failed")

    def _next_due(self) -> Callable[[], None] | None:
        """Waits for the earliest timer not cancelled; None once stopped."""
        with self._cond:
            while not self._stopped:
                if not self._heap:
                    self._cond.wait()
                    continue
                when, _, timer, fn = self._heap[0]
                delay = when - time.monotonic()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                heapq.heappop(self._heap)
                if not timer.cancelled:
                    return fn
            return None
