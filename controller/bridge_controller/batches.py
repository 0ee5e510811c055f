"""CR keys grouped into batches per backend: submits and cancels as they come, polls on a schedule.

Workers never wait for a backend. A submit or cancel joins the batch of its backend key and
action; the batch thread wakes when work arrives, gathers for the batch window and takes every
batch at once, each to run as one runner invocation (one module run for all its CRs). What
arrives while a batch runs forms the next one, so a burst needs few invocations and a lone CR
waits only the window. Polling is per backend, not per CR: every tracked job of a backend is
read with one runner call, hence one list request, per poll interval, whatever the number of CRs.
A CR whose work is in a batch is "in flight" and is not planned again until `finish`, which says
whether it changed meanwhile.
"""

import collections
import threading
import time


class Batches:
    def __init__(self, max_batch=500, window=0.05, clock=time.monotonic):
        self.max_batch = max_batch
        self.window = window
        self.clock = clock
        self._pending = collections.defaultdict(list)    # (action, backend key) -> [CR key]
        self._in_flight = set()
        self._changed = set()                            # in flight keys that changed meanwhile
        self._tracked = collections.defaultdict(set)     # backend key -> CR keys being polled
        self._interval = {}                              # CR key -> its poll interval (seconds)
        self._next_poll = {}                             # backend key -> monotonic time
        self._work_ready = threading.Event()             # set when a submit or cancel batch has work
        self._lock = threading.Lock()

    def changed_in_flight(self, key):
        """True if `key` is in flight, which `finish` will then report: its CR changed meanwhile."""
        with self._lock:
            if key in self._in_flight:
                self._changed.add(key)
                return True
            return False

    def add(self, action, group, key):
        """Put a submit or cancel of CR `key` into its backend's next batch."""
        with self._lock:
            self._in_flight.add(key)
            self._pending[(action, group)].append(key)
        self._work_ready.set()

    def hold(self, key):
        """Put CR `key` in flight without a batch: its status is being written in line (a placement,
        a wait for its backend object), and the watch event of that write is `finish`'s to report."""
        with self._lock:
            self._in_flight.add(key)

    def track(self, group, key, interval):
        """Poll CR `key` with the other jobs of its backend, at least every `interval` seconds."""
        with self._lock:
            self._tracked[group].add(key)
            self._interval[key] = interval
            self._next_poll.setdefault(group, self.clock() + interval)

    def untrack(self, key):
        with self._lock:
            for keys in self._tracked.values():
                keys.discard(key)
            self._interval.pop(key, None)

    def finish(self, keys):
        """The batch of `keys` is over: they may be planned again. Returns those that changed while
        in flight (`changed_in_flight`)."""
        with self._lock:
            self._in_flight.difference_update(keys)
            changed = self._changed.intersection(keys)
            self._changed.difference_update(keys)
        return changed

    def wake(self):
        """End a `gather` early (shutting down)."""
        self._work_ready.set()

    def gather(self, timeout, stopping):
        """Wait up to `timeout` for a submit or cancel, then the batch window (cut short by `stopping`)
        so that the first arrival's company joins its batch; returns every batch, as `take` does."""
        if self._work_ready.wait(timeout):
            stopping.wait(self.window)
        self._work_ready.clear()
        return self.take()

    def take(self):
        """[(action, backend key, CR keys)] of every pending batch, at most `max_batch` keys each."""
        with self._lock:
            pending = list(self._pending.items())
            self._pending.clear()
        return [(action, group, keys[start:start + self.max_batch])
                for (action, group), keys in pending for start in range(0, len(keys), self.max_batch)]

    def due_polls(self, now=None):
        """[(backend key, CR keys)] of every backend whose poll interval has passed, now in flight;
        its next poll is due after the shortest interval of its CRs."""
        now = self.clock() if now is None else now
        with self._lock:
            due = [(group, sorted(keys)) for group, keys in self._tracked.items()
                   if keys and self._next_poll.get(group, now) <= now]
            for group, keys in due:
                self._next_poll[group] = now + min(self._interval[key] for key in keys)
                self._in_flight.update(keys)
        return due

    def seconds_to_next_poll(self, now=None):
        """Seconds until a backend's poll is due; None when no job is tracked."""
        now = self.clock() if now is None else now
        with self._lock:
            due = [self._next_poll.get(group, now) for group, keys in self._tracked.items() if keys]
        return max(0.0, min(due) - now) if due else None
