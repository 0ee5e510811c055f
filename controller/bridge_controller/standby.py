"""Standby playbooks: started ahead of their work, one per action and backend connection.

Starting ansible-playbook and loading the module costs ~1.4 s, far more than a submit's requests.
A standby has done that already and waits on its pipe (handoff.py), so an idle controller's
submit costs its requests only. Each holds ~150 MiB, so a few at most are kept, for the backends
used last. The pool keeps started playbooks only; `start(action, backend)` (the runner's) starts
one and returns an object with `action`, `backend`, `pipe`, `started_at`, `alive()`, `dismiss()`
and `finish()`.

`max_standby` holds at every moment: a slot is taken, under the lock, before a playbook is started
for it, and a standby let go holds its slot until it is gone, so that twenty new backends at once
never run more than two standbys. And a standby let go is killed (`dismiss()`), never asked to
end: an empty write to a playbook still starting under load went unread, and it then waited out
its handoff_timeout (900 s) with ~150 MiB.
"""

import collections
import json
import threading
import time


# The module gives up waiting after its handoff_timeout (900 s): a standby this old is not used.
STANDBY_MAX_AGE = 600


def standby_key(action, backend):
    """Standbys are kept per action and backend connection."""
    return action, json.dumps(backend, sort_keys=True)


class StandbyPool:
    def __init__(self, start, actions=("submit",), max_standby=2, clock=time.monotonic):
        self.start = start
        self.actions = tuple(actions)
        self.max_standby = max_standby
        self.clock = clock
        self._standby = collections.OrderedDict()   # standby_key -> started, least recently used first
        self._starting = set()                      # standby_keys whose playbook is being started
        self._leaving = 0                           # standbys out of the pool, being killed
        self._lock = threading.Lock()
        self._closed = False

    def count(self):
        """Standby playbooks now, those being started or killed included; never more than max_standby."""
        with self._lock:
            return len(self._standby) + len(self._starting) + self._leaving

    def take(self, action, backend):
        """The standby for this action and backend, now no longer in the pool; None if none is fit."""
        with self._lock:
            started = self._standby.pop(standby_key(action, backend), None)
            fit = started is not None and started.alive() and self.clock() - started.started_at < STANDBY_MAX_AGE
            if started is not None and not fit:
                self._leaving += 1
        if started is None or fit:
            return started
        self._let_go([started])
        return None

    def _let_go(self, standbys):
        """Dismiss standbys taken out of the pool, each counted in _leaving until it is gone."""
        for started in standbys:
            try:
                self.dismiss(started)
            finally:
                with self._lock:
                    self._leaving -= 1

    @staticmethod
    def dismiss(started):
        """Kill a standby that is not used and wait until it is gone (a second at most: one that
        ansible-runner had not spawned yet is killed by its cancel callback), so that the one
        started in its place never runs beside it."""
        started.dismiss()
        started.finish()

    def replenish(self, action, backend):
        """Start a standby for this action and backend unless there is one or the action has none.

        When every slot is taken, the standby of the backend used longest ago makes room; when
        every slot is a playbook still being started, none starts (the batch starts its own).
        """
        key = standby_key(action, backend)
        evicted = None
        with self._lock:
            if action not in self.actions or self._closed or key in self._standby or key in self._starting:
                return
            if len(self._standby) + len(self._starting) + self._leaving >= self.max_standby:
                if not self._standby:
                    return
                evicted = self._standby.popitem(last=False)[1]
            self._starting.add(key)
        try:
            if evicted is not None:
                self.dismiss(evicted)   # its slot is ours: it stays taken until that one is gone
            started = self.start(action, backend)
        except BaseException:
            with self._lock:
                self._starting.discard(key)
            raise
        with self._lock:
            self._starting.discard(key)
            kept = not self._closed
            if kept:
                self._standby[key] = started
        if not kept:
            self.dismiss(started)

    def prepare(self, backend):
        """Have standbys ready for a backend before its first batch (a new CR's backend)."""
        for action in self.actions:
            self.replenish(action, backend)

    def refresh(self):
        """Replace standbys about to give up waiting, so that idle stays warm; drop ended ones.

        A standby that ended on its own (a broken playbook, say) is not restarted here, which
        would restart it every tick: the next batch starts its playbook and tries a standby again.
        """
        with self._lock:
            aged = [(key, started) for key, started in self._standby.items()
                    if not started.alive() or self.clock() - started.started_at >= STANDBY_MAX_AGE]
            for key, _started in aged:
                del self._standby[key]
            self._leaving += len(aged)
        restart = [started for _key, started in aged if started.alive()]
        self._let_go([started for _key, started in aged])
        for started in restart:
            self.replenish(started.action, started.backend)

    def close(self):
        """Kill every standby and wait for each; no new one starts afterwards."""
        with self._lock:
            self._closed = True
            standbys, self._standby = list(self._standby.values()), collections.OrderedDict()
            self._leaving += len(standbys)
        self._let_go(standbys)
