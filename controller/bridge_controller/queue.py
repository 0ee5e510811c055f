"""Work queue of object keys ("namespace/name"), shaped like client-go's rate-limited delaying queue.

Guarantees the reconcile loop builds on:

* a key is handed to at most one worker at a time: a key added while it is being processed is
  marked dirty and queued again when the worker calls `done(key)`;
* a key added several times while it waits is handed out once;
* `add_rate_limited` delays a key by a per-key exponential backoff that `forget` resets;
* `add_after` parks a key in a heap until its time comes, so one waiting worker sleeps until the
  earliest due time: no polling loop and no timer thread per key;
* at most `max_workers` keys are being processed at once, whatever the number of threads calling
  `get`.

Everything is guarded by one condition variable.
"""

import heapq
import logging
import random
import threading
import time
from collections import deque
from typing import Callable, Hashable, List, NamedTuple, Optional

LOG = logging.getLogger(__name__)


class ExponentialBackoff:
    """Per-key delay that doubles with each failure: base * 2**failures, capped, with jitter.

    Not locked on its own: the WorkQueue calls it under its lock.
    """

    def __init__(self, base: float = 0.5, cap: float = 300.0, jitter: float = 0.1, rng: Optional[random.Random] = None):
        """`jitter` is the fraction of the delay that may be taken off at random, so keys that
        failed together (a backend outage) do not all come back in the same instant; it only
        shortens the delay, so `cap` stays a true maximum."""
        self.base = base
        self.cap = cap
        self.jitter = jitter
        self._rng = rng or random.Random()
        self._failures = {}

    def when(self, key: Hashable) -> float:
        """Seconds to wait before retrying `key`, and count one more failure for it."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        # The exponent is clamped because 2.0 ** 1100 overflows a float long after the cap is hit.
        delay = min(self.cap, self.base * 2.0 ** min(failures, 64))
        return delay * (1.0 - self.jitter * self._rng.random())

    def forget(self, key: Hashable) -> None:
        """Reset `key`'s backoff (it succeeded, or it is gone)."""
        self._failures.pop(key, None)


class Depth(NamedTuple):
    """Snapshot of the queue for metrics: keys ready, keys delayed, keys being processed."""

    ready: int
    waiting: int
    processing: int


class WorkQueue:
    """Deduplicating, rate-limited, delaying queue of keys for a bounded pool of workers."""

    def __init__(self, max_workers: int = 4, rate_limiter: Optional[ExponentialBackoff] = None,
                 clock: Callable[[], float] = time.monotonic):
        """`clock` returns monotonic seconds; tests pass a fake one and call `get(timeout=0)`."""
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1, not %r" % (max_workers,))
        self.max_workers = max_workers
        self.rate_limiter = rate_limiter or ExponentialBackoff()
        self._clock = clock
        self._cond = threading.Condition()
        self._ready = deque()      # keys in hand-out order; each appears at most once
        self._dirty = set()        # keys that need processing: in _ready, or re-queued on done()
        self._processing = set()   # keys handed to a worker and not yet done()
        self._waiting = []         # heap of (due time, sequence, key) for add_after
        self._due = {}             # key -> its earliest due time in _waiting (later entries are stale)
        self._sequence = 0         # keeps heap order FIFO among equal due times, never compares keys
        self._shutting_down = False

    def add(self, key: Hashable) -> None:
        """Queue `key` for processing now (a no-op if it is already queued or after shutdown)."""
        with self._cond:
            self._add_locked(key)

    def add_after(self, key: Hashable, delay: float) -> None:
        """Queue `key` after `delay` seconds; of several pending delays for one key the earliest wins."""
        with self._cond:
            self._add_after_locked(key, delay)

    def add_rate_limited(self, key: Hashable) -> None:
        """Queue `key` after its backoff delay, which grows with each call until `forget(key)`."""
        with self._cond:
            if not self._shutting_down:
                self._add_after_locked(key, self.rate_limiter.when(key))

    def forget(self, key: Hashable) -> None:
        """Reset `key`'s backoff; call it when the key was processed successfully."""
        with self._cond:
            self.rate_limiter.forget(key)

    def get(self, timeout: Optional[float] = None) -> Optional[Hashable]:
        """Block until a key is ready and a worker slot is free; return the key, now being processed.

        Returns None once the queue is shut down, or when `timeout` seconds pass without a key.
        """
        with self._cond:
            deadline = None if timeout is None else self._clock() + timeout
            while True:
                if self._shutting_down:
                    return None
                now = self._clock()
                self._promote_due_locked(now)
                if self._ready and len(self._processing) < self.max_workers:
                    key = self._ready.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                wake_at = deadline
                if self._waiting and (wake_at is None or self._waiting[0][0] < wake_at):
                    wake_at = self._waiting[0][0]
                if deadline is not None and now >= deadline:
                    return None
                self._cond.wait(None if wake_at is None else max(0.0, wake_at - now))

    def done(self, key: Hashable) -> None:
        """Mark `key` processed; if it was added again meanwhile, queue it now."""
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty and not self._shutting_down:
                self._ready.append(key)
            self._cond.notify_all()

    def shutdown(self, drain: bool = True, timeout: Optional[float] = None) -> bool:
        """Stop handing out keys: `get` returns None, adds are ignored, queued and delayed keys dropped.

        Dropping them loses nothing: the state lives in the apiserver and the next process relists
        it. With `drain`, wait up to `timeout` seconds for the keys being processed to be done, so
        a running playbook finishes; returns False if some were still being processed.
        """
        with self._cond:
            self._shutting_down = True
            self._ready.clear()
            self._dirty.clear()
            self._waiting.clear()
            self._due.clear()
            self._cond.notify_all()
            if not drain:
                return not self._processing
            return self._cond.wait_for(lambda: not self._processing, timeout)

    def depth(self) -> Depth:
        """Keys ready, delayed and being processed, for the queue-depth gauges."""
        with self._cond:
            return Depth(len(self._ready), len(self._due), len(self._processing))

    def _add_locked(self, key: Hashable) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        # A key being processed stays out of _ready; done() queues it, so no second worker gets it.
        if key not in self._processing:
            self._ready.append(key)
            self._cond.notify_all()

    def _add_after_locked(self, key: Hashable, delay: float) -> None:
        if self._shutting_down:
            return
        if delay <= 0:
            self._add_locked(key)
            return
        due = self._clock() + delay
        if key in self._due and self._due[key] <= due:
            return
        self._due[key] = due
        self._sequence += 1
        heapq.heappush(self._waiting, (due, self._sequence, key))
        # A worker may be sleeping until a later due time: make it recompute.
        self._cond.notify_all()

    def _promote_due_locked(self, now: float) -> None:
        while self._waiting and self._waiting[0][0] <= now:
            due, _seq, key = heapq.heappop(self._waiting)
            if self._due.get(key) != due:
                continue  # superseded by an earlier add_after for the same key
            del self._due[key]
            self._add_locked(key)


def run_workers(queue: WorkQueue, handler: Callable[[Hashable], None], n: Optional[int] = None,
                name: str = "bridge-worker") -> List[threading.Thread]:
    """Start `n` (default `queue.max_workers`) threads that process keys until the queue shuts down.

    An exception from `handler(key)` is logged and the key retried with backoff; either way
    `done(key)` is called. Returning does not forget the key's backoff: the handler's work may go
    on elsewhere (the executor's batches), so the handler calls `queue.forget(key)` once it is
    really done. The threads are daemons: a graceful stop is `queue.shutdown(drain=True)`
    followed by joining them.
    """
    def work():
        while True:
            key = queue.get()
            if key is None:
                return
            try:
                handler(key)
            except Exception:
                LOG.exception("reconcile of %s failed; retrying with backoff", key)
                queue.add_rate_limited(key)
            finally:
                queue.done(key)

    threads = []
    for index in range(queue.max_workers if n is None else n):
        thread = threading.Thread(target=work, name="%s-%d" % (name, index), daemon=True)
        thread.start()
        threads.append(thread)
    return threads
