"""Standby playbooks: started ahead of their work, one per action and backend connection.

Starting ansible-playbook and loading the module costs ~1.4 s, far more than a submit's requests.
A standby has done that already and waits on its pipe (handoff.py), so an idle controller's
submit costs its requests only. Each holds ~150 MiB, so a few at most are kept, for the backends
used last. The pool keeps started playbooks only; `start(action, backend)` (the runner's) starts
one and returns an object with `action`, `backend`, `pipe`, `started_at`, `alive()` and `finish()`.
"""

import collections
import json
import threading
import time

from bridge_controller.handoff import write_to_pipe

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
        self._lock = threading.Lock()
        self._closed = False

    def take(self, action, backend):
        """The standby for this action and backend, now no longer in the pool; None if none is fit."""
        with self._lock:
            started = self._standby.pop(standby_key(action, backend), None)
        if started is None:
            return None
        if started.alive() and self.clock() - started.started_at < STANDBY_MAX_AGE:
            return started
        self.dismiss(started)
        return None

    def dismiss(self, started):
        # An empty document ends the module idle; the playbook then exits on its own.
        write_to_pipe(started.pipe, b"", started.alive, timeout=5.0, clock=self.clock)
        threading.Thread(target=started.finish, name="bridge-dismissed", daemon=True).start()

    def replenish(self, action, backend):
        """Start a standby for this action and backend unless there is one or the action has none."""
        key = standby_key(action, backend)
        with self._lock:
            if action not in self.actions or self._closed or key in self._standby:
                return
        started = self.start(action, backend)
        dismissed = []
        with self._lock:
            if self._closed or key in self._standby:
                dismissed.append(started)
            else:
                self._standby[key] = started
                while len(self._standby) > self.max_standby:
                    dismissed.append(self._standby.popitem(last=False)[1])
        for extra in dismissed:
            self.dismiss(extra)

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
        for _key, started in aged:
            restart = started.alive()
            self.dismiss(started)
            if restart:
                self.replenish(started.action, started.backend)

    def close(self):
        """End every standby (each exits idle); no new one starts afterwards."""
        with self._lock:
            self._closed = True
            standbys, self._standby = list(self._standby.values()), collections.OrderedDict()
        for started in standbys:
            self.dismiss(started)
            started.finish()
