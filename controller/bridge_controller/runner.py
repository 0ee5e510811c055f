"""Run the collection's playbooks for a batch of BridgeJobs of one backend.

`Runner` is the interface reconcile's executor uses: submit, poll and cancel, each for many CRs of
one backend at once, each returning the module's own result. `AnsibleRunner` runs
playbooks/bridgejob_*.yml with ansible-runner; `FakeRunner` answers from memory for loop tests.

The work and the credentials reach the module through a named pipe (module_utils/_handoff.py),
never through extra vars or the environment: ansible-runner writes both to disk, the environment
even into artifacts/<ident>/command. The pipe also lets a playbook start before its work exists.
A standby per backend and action (submit, by default) waits with ansible-playbook and the module
already loaded, so an idle controller's submit costs its requests, not the ~1.4 s start.
"""

import collections
import errno
import fcntl
import hashlib
import json
import os
import shutil
import threading
import time
import uuid

PLAYBOOKS = {"submit": "bridgejob_submit.yml", "poll": "bridgejob_poll.yml", "cancel": "bridgejob_cancel.yml"}
TASK_NAME = "Bridge"
HANDOFF_KEYS = ("user", "token")
# The module gives up waiting after its handoff_timeout (900 s): a standby this old is not used.
STANDBY_MAX_AGE = 600


class RunnerError(Exception):
    """The playbook did not produce a module result (it failed before or around the module)."""


def module_result(events):
    """The result of the playbook's one module task, from ansible-runner's events."""
    for event in events:
        data = event.get("event_data") or {}
        if event.get("event") in ("runner_on_ok", "runner_on_failed") and data.get("task") == TASK_NAME:
            res = dict(data.get("res") or {})
            if event["event"] == "runner_on_failed":
                res["failed"] = True  # the event's res does not carry it: the event's name does
            return res
    return None


def handoff_document(action, credentials, jobs=None, identities=None, wait_timeout=120):
    """What the module of `action` reads from its pipe: its work and the credentials."""
    document = dict((key, value) for key, value in (credentials or {}).items() if key in HANDOFF_KEYS and value)
    if action == "poll":
        document["identities"] = list(identities)
    else:
        document["jobs"] = list(jobs)
    if action == "cancel":
        document["wait_timeout"] = int(wait_timeout)
    return document


def write_to_pipe(pipe, data, alive, timeout=120.0, clock=time.monotonic):
    """Write `data` to the reader of the named pipe `pipe`, waiting for one while `alive()` says so.

    False when no reader came (the playbook ended first, or in `timeout`) or the reader went away
    before taking everything: then it acted on nothing, since the module only acts on a whole
    document.
    """
    deadline = clock() + timeout
    while True:
        try:
            fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return False  # the pipe was removed: nobody can read it any more
            if exc.errno != errno.ENXIO:
                raise
        if not alive() or clock() > deadline:
            return False
        time.sleep(0.01)
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BrokenPipeError:
        return False
    finally:
        os.close(fd)
    return True


class Started:
    """One playbook run: started, waiting on its pipe for work or doing it."""

    def __init__(self, pipe, thread, runner, started_at):
        self.pipe, self.thread, self.runner, self.started_at = pipe, thread, runner, started_at

    def alive(self):
        return self.thread.is_alive()

    def finish(self):
        self.thread.join()
        try:
            os.unlink(self.pipe)
        except OSError:
            pass
        return self.runner


class AnsibleRunner:
    """ansible-runner invocations, one per batch, each with its own ident; old artifacts rotate out.

    Each action has its own private data dir, so that rotating one action's artifacts never
    removes those of a standby of another that is still running.
    """

    def __init__(self, playbook_dir, work_dir, collections_path=None, rotate_artifacts=50, python=None,
                 standby=("submit",), max_standby=2, clock=time.monotonic):
        self.playbook_dir = playbook_dir
        self.work_dir = work_dir
        self.collections_path = collections_path
        self.rotate_artifacts = rotate_artifacts
        self.python = python
        self.standby_actions = tuple(standby)
        # A standby holds ansible-playbook and the module in memory (~150 MiB): a few at most,
        # for the backends used last.
        self.max_standby = max_standby
        self.clock = clock
        self.pipe_dir = os.path.join(work_dir, "handoff")
        # Pipes left by an earlier process: they never hold data, only a path for a reader.
        shutil.rmtree(self.pipe_dir, ignore_errors=True)
        os.makedirs(self.pipe_dir, mode=0o700)
        for action in PLAYBOOKS:
            os.makedirs(os.path.join(work_dir, action), exist_ok=True)
        self._standby = collections.OrderedDict()   # (action, backend) -> Started, least recently used first
        self._lock = threading.Lock()
        self._closed = False

    def _connection(self, backend):
        """The playbooks' `backend` extra var: a CA bundle given as text becomes a file (it is public)."""
        backend = dict(backend)
        pem = backend.pop("ca_pem", None)
        if pem:
            directory = os.path.join(self.work_dir, "ca")
            os.makedirs(directory, exist_ok=True)
            path = os.path.join(directory, hashlib.sha256(pem.encode("utf-8")).hexdigest()[:32] + ".pem")
            if not os.path.exists(path):
                with open(path + ".tmp", "w") as handle:
                    handle.write(pem)
                os.replace(path + ".tmp", path)
            backend["ca_path"] = path
        return backend

    def _start(self, action, backend):
        import ansible_runner  # the controller needs it; unit tests of the pure parts do not

        pipe = os.path.join(self.pipe_dir, "%s-%s" % (action, uuid.uuid4().hex[:12]))
        os.mkfifo(pipe, 0o600)
        envvars = {"BRIDGE_HANDOFF": pipe, "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0"}
        if self.collections_path:
            envvars["ANSIBLE_COLLECTIONS_PATH"] = self.collections_path
        if self.python:
            envvars["ANSIBLE_PYTHON_INTERPRETER"] = self.python
        thread, runner = ansible_runner.run_async(
            private_data_dir=os.path.join(self.work_dir, action), project_dir=self.playbook_dir,
            playbook=PLAYBOOKS[action], inventory="localhost ansible_connection=local",
            extravars={"backend": self._connection(backend)}, envvars=envvars, ident="%s-%s" % (action, uuid.uuid4().hex[:12]),
            rotate_artifacts=self.rotate_artifacts, suppress_env_files=True, quiet=True)
        return Started(pipe, thread, runner, self.clock())

    def _take_standby(self, key):
        with self._lock:
            started = self._standby.pop(key, None)
        if started is None:
            return None
        if started.alive() and self.clock() - started.started_at < STANDBY_MAX_AGE:
            return started
        self._dismiss(started)
        return None

    def _dismiss(self, started):
        # An empty document ends the module idle; the playbook then exits on its own.
        write_to_pipe(started.pipe, b"", started.alive, timeout=5.0, clock=self.clock)
        threading.Thread(target=started.finish, name="bridge-dismissed", daemon=True).start()

    def run(self, action, backend, credentials, jobs=None, identities=None, wait_timeout=120):
        data = json.dumps(handoff_document(action, credentials, jobs, identities, wait_timeout)).encode("utf-8")
        key = (action, json.dumps(backend, sort_keys=True))
        started = self._take_standby(key)
        if started is None or not write_to_pipe(started.pipe, data, started.alive, clock=self.clock):
            started = self._start(action, backend)
            if not write_to_pipe(started.pipe, data, started.alive, clock=self.clock):
                runner = started.finish()
                raise RunnerError("%s playbook ended %s (rc %s) before it took its work" % (action, runner.status, runner.rc))
        if action in self.standby_actions:
            self._keep_standby(key, action, backend)
        runner = started.finish()
        res = module_result(runner.events)
        if res is None:
            raise RunnerError("%s playbook ended %s (rc %s) without a module result" % (action, runner.status, runner.rc))
        return res

    def _keep_standby(self, key, action, backend):
        with self._lock:
            if self._closed or key in self._standby:
                return
        started = self._start(action, backend)
        dismissed = []
        with self._lock:
            if self._closed or key in self._standby:
                dismissed.append(started)
            else:
                self._standby[key] = started
                while len(self._standby) > self.max_standby:
                    dismissed.append(self._standby.popitem(last=False)[1])
        for extra in dismissed:
            self._dismiss(extra)

    def prepare(self, backend):
        """Have standbys ready for a backend before its first batch (a new CR's backend)."""
        for action in self.standby_actions:
            self._keep_standby((action, json.dumps(backend, sort_keys=True)), action, backend)

    def refresh(self):
        """Replace standbys that ended or are about to give up waiting, so that idle stays warm."""
        with self._lock:
            stale = [(key, started) for key, started in self._standby.items()
                     if not started.alive() or self.clock() - started.started_at >= STANDBY_MAX_AGE]
            for key, _started in stale:
                del self._standby[key]
        for key, started in stale:
            self._dismiss(started)
            self._keep_standby(key, key[0], json.loads(key[1]))

    def close(self):
        """End every standby (each exits idle); a run in progress is not touched."""
        with self._lock:
            self._closed = True
            standbys, self._standby = list(self._standby.values()), {}
        for started in standbys:
            self._dismiss(started)
            started.finish()


class FakeRunner:
    """Answers like the playbooks would, from an in-memory backend; records every call."""

    def __init__(self, backend):
        self.backend = backend
        self.calls = []

    def run(self, action, backend, credentials, jobs=None, identities=None, wait_timeout=120):
        self.calls.append((action, backend.get("url"), len(jobs or identities or ())))
        from ansible_collections.bridge.hpc.plugins.module_utils import _jobs
        from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
        from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

        if action == "submit":
            # Like bridge.hpc.jobs: each item is validated on its own.
            specs, refused = [], {}
            for job in jobs:
                try:
                    specs.append(normalize_spec(job))
                except SpecError as exc:
                    refused[job["identity"]] = {"identity": job["identity"], "changed": False, "failed": True,
                                                "error": exc.to_dict(), "msg": str(exc)}
            done = dict((r["identity"], r) for r in _jobs.ensure_many_present(self.backend, specs))
            done.update(refused)
            return {"results": [done[job["identity"]] for job in jobs]}
        if action == "poll":
            found, missing = _jobs.read_many(self.backend, identities)
            return {"jobs": found, "missing": missing, "requests": 1}
        return {"results": _jobs.ensure_many_absent(self.backend, [job["identity"] for job in jobs], wait=True,
                                                    wait_timeout=wait_timeout, poll_interval=0.01)}
