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
import signal
import threading
import time
import uuid

PLAYBOOKS = {"submit": "bridgejob_submit.yml", "poll": "bridgejob_poll.yml", "cancel": "bridgejob_cancel.yml"}
TASK_NAME = "Bridge"
HANDOFF_KEYS = ("user", "token")
# Pipe dirs of this process's runners, which remove_orphans must not take for a dead process's.
LIVE_PIPE_DIRS = set()
# The module gives up waiting after its handoff_timeout (900 s): a standby this old is not used.
STANDBY_MAX_AGE = 600
# ansible-runner's event callback replaces a task's `res` with {} once its repr passes MAX_EVENT_RES
# characters (700,000 by default, which spares AWX's database). A batch's result passes it when its
# jobs already exist: a found job carries its native record (~6 KB on Slurm 24.11), so a submit that
# found over 116 (a restart after a submit whose statuses were not written) returned no result at all,
# batch after batch; a poll passes it at ~1,200 jobs. Events only rotate on this disk, and the
# controller needs the whole result.
MAX_EVENT_RES = str(2 ** 62)


class RunnerError(Exception):
    """The playbook did not produce a module result (it failed before or around the module)."""


class NotActing(RunnerError):
    """The playbook was not run, or was killed, because this replica lost or gave up the lease."""


def descendants(pid):
    """Every live process below `pid`, parents before children."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(0), []):
            found.append(child)
            todo.append(child)
    return found


def with_environment(pids, marker):
    """Those of `pids` with an environment entry that starts with `marker` ("KEY=value...")."""
    wanted = marker.encode("utf-8")
    found = []
    for pid in pids:
        try:
            with open("/proc/%d/environ" % pid, "rb") as handle:
                if any(entry.startswith(wanted) for entry in handle.read().split(b"\0")):
                    found.append(pid)
        except OSError:
            continue
    return found


def remove_orphans(handoff_dir):
    """SIGKILL what dead controllers with this work dir left running, and remove their pipes.

    Each runner keeps its pipes in handoff/<pid>-<random>. Ansible's workers call setsid(), so a
    SIGKILLed controller's modules are not hung up with it: a standby would wait out its
    handoff_timeout (900 s) holding ~150 MiB. In a container they die with it; elsewhere (a
    restarted process, the tests) they are found here by the pipe path in their environment.
    Another live controller's dirs are left alone (two may share a work dir), and so are this
    process's own runners'. A dir with our pid that is not one of them is stale: in a container
    the restarted controller often gets the dead one's pid.
    """
    if not os.path.isdir(handoff_dir):
        return 0

    def stale(name):
        owner = name.split("-")[0]
        if not owner.isdigit():
            return True
        if int(owner) == os.getpid():
            return os.path.join(handoff_dir, name) not in LIVE_PIPE_DIRS
        return not os.path.exists("/proc/%s" % owner)

    stale = [name for name in os.listdir(handoff_dir) if stale(name)]
    killed = 0
    if stale and os.path.isdir("/proc"):
        mine = set(descendants(os.getpid()))
        pids = [int(entry) for entry in os.listdir("/proc") if entry.isdigit() and int(entry) not in mine]
        for name in stale:
            for pid in with_environment(pids, "BRIDGE_HANDOFF=%s/" % os.path.join(handoff_dir, name)):
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except OSError:
                    pass
    for name in stale:
        # Pipes never hold data, only a path for a reader.
        shutil.rmtree(os.path.join(handoff_dir, name), ignore_errors=True)
    return killed


def kill_descendants(pid=None, marker=None, rounds=5):
    """SIGKILL every process below `pid` (this one by default), or those whose environment holds
    `marker`; returns how many.

    ansible-runner's own cancel kills the playbook's process group only, and Ansible's workers
    call setsid(): the module that submits jobs would outlive the playbook and go on submitting.
    A few rounds catch processes forked while the first ones were being killed.
    """
    if not os.path.isdir("/proc"):
        return 0
    killed = 0
    for _round in range(rounds):
        victims = descendants(os.getpid() if pid is None else pid)
        if marker is not None:
            victims = with_environment(victims, marker)
        if not victims:
            break
        for victim in victims:
            try:
                os.kill(victim, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


def module_result(events):
    """The result of the playbook's one module task, from ansible-runner's events."""
    for event in events:
        data = event.get("event_data") or {}
        if event.get("event") in ("runner_on_ok", "runner_on_failed") and data.get("task") == TASK_NAME:
            res = dict(data.get("res") or {})
            if not res:
                return None  # a module always says something: ansible-runner dropped it (MAX_EVENT_RES)
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


def standby_key(action, backend):
    """Standbys are kept per action and backend connection."""
    return action, json.dumps(backend, sort_keys=True)


class Started:
    """One playbook run: started, waiting on its pipe for work or doing it."""

    def __init__(self, action, backend, pipe, started_at):
        self.action, self.backend, self.pipe, self.started_at = action, backend, pipe, started_at
        self.thread = self.runner = None
        self.abandoned = False   # set when its work could not be handed over: it is killed

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
        handoff_dir = os.path.join(os.path.abspath(work_dir), "handoff")
        remove_orphans(handoff_dir)
        self.pipe_dir = os.path.join(handoff_dir, "%d-%s" % (os.getpid(), uuid.uuid4().hex[:8]))
        os.makedirs(self.pipe_dir, mode=0o700)
        LIVE_PIPE_DIRS.add(self.pipe_dir)
        for action in PLAYBOOKS:
            self._ask_often(os.path.join(work_dir, action))
        self.ansible_config = os.environ.get("ANSIBLE_CONFIG") or self._write_ansible_config()
        self._standby = collections.OrderedDict()   # (action, backend) -> Started, least recently used first
        self._lock = threading.Lock()
        self._closed = False
        # With leader election, main.py sets this to the elector's gate: a playbook does not start,
        # and a running one (a standby too) is killed, once this replica may no longer act.
        self.may_act = None

    def _connection(self, backend):
        """The playbooks' `backend` extra var: a CA bundle given as text becomes a file (it is public)."""
        backend = dict(backend)
        pem = backend.pop("ca_pem", None)
        if pem:
            directory = os.path.join(self.work_dir, "ca")
            os.makedirs(directory, exist_ok=True)
            path = os.path.join(directory, hashlib.sha256(pem.encode("utf-8")).hexdigest()[:32] + ".pem")
            if not os.path.exists(path):
                partial = "%s.%s" % (path, uuid.uuid4().hex)   # the batch and poll threads may both write it
                with open(partial, "w") as handle:
                    handle.write(pem)
                os.replace(partial, path)
            backend["ca_path"] = path
        return backend

    def _start(self, action, backend):
        import ansible_runner  # the controller needs it; unit tests of the pure parts do not

        pipe = os.path.join(self.pipe_dir, "%s-%s" % (action, uuid.uuid4().hex[:12]))
        os.mkfifo(pipe, 0o600)
        envvars = {"BRIDGE_HANDOFF": pipe, "ANSIBLE_CONFIG": self.ansible_config, "ANSIBLE_LOCALHOST_WARNING": "0",
                   "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0", "MAX_EVENT_RES": MAX_EVENT_RES}
        if self.collections_path:
            envvars["ANSIBLE_COLLECTIONS_PATH"] = self.collections_path
        if self.python:
            envvars["ANSIBLE_PYTHON_INTERPRETER"] = self.python
        started = Started(action, backend, pipe, self.clock())
        started.thread, started.runner = ansible_runner.run_async(
            private_data_dir=os.path.join(self.work_dir, action), project_dir=self.playbook_dir,
            playbook=PLAYBOOKS[action], inventory="localhost ansible_connection=local",
            extravars={"backend": self._connection(backend)}, envvars=envvars, ident="%s-%s" % (action, uuid.uuid4().hex[:12]),
            rotate_artifacts=self.rotate_artifacts, suppress_env_files=True, quiet=True,
            cancel_callback=lambda: self._cancelled(started))
        return started

    def _write_ansible_config(self):
        # ansible-playbook's main loop polls its workers every internal_poll_interval, 0.001 s by
        # default: a standby waiting for its work then burns 3.5 % of a core (0.3 % at 0.05 s),
        # and a one-task playbook gains nothing from the faster poll. A user's ANSIBLE_CONFIG wins.
        path = os.path.join(os.path.abspath(self.work_dir), "ansible.cfg")
        with open(path, "w") as handle:
            handle.write("# Written by bridge-controller (runner.py).\n[defaults]\ninternal_poll_interval = 0.05\n")
        return path

    @staticmethod
    def _ask_often(private_data_dir):
        # ansible-runner calls cancel_callback every pexpect_timeout seconds (5 by default); half a
        # second keeps stopping well inside the lease's safety margin. Through env/settings because
        # ansible-runner 2.4 drops a `settings` argument when that file is missing.
        path = os.path.join(private_data_dir, "env", "settings")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            json.dump({"pexpect_timeout": 0.5}, handle)

    def _cancelled(self, started):
        if started.abandoned:
            kill_descendants(marker="BRIDGE_HANDOFF=" + started.pipe)
            return True
        if self.may_act is None or self.may_act():
            return False
        # The controller's only children are its playbooks, so the whole tree below it is theirs,
        # Ansible's detached workers and their modules included.
        kill_descendants()
        return True

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
        if self.may_act is not None and not self.may_act():
            raise NotActing("%s playbook not started: this replica is not the leader" % action)
        data = json.dumps(handoff_document(action, credentials, jobs, identities, wait_timeout)).encode("utf-8")
        key = standby_key(action, backend)
        started = self._take_standby(key)
        if started is None or not write_to_pipe(started.pipe, data, started.alive, clock=self.clock):
            started = self._start(action, backend)
            if not write_to_pipe(started.pipe, data, started.alive, clock=self.clock):
                started.abandoned = True
                runner = started.finish()
                if self.may_act is not None and not self.may_act():
                    raise NotActing("%s playbook killed: this replica is no longer the leader" % action)
                raise RunnerError("%s playbook ended %s (rc %s) before it took its work" % (action, runner.status, runner.rc))
        if action in self.standby_actions:
            self._keep_standby(action, backend)
        runner = started.finish()
        if runner.status == "canceled":
            raise NotActing("%s playbook killed: this replica is no longer the leader" % action)
        res = module_result(runner.events)
        if res is None:
            raise RunnerError("%s playbook ended %s (rc %s) without a module result" % (action, runner.status, runner.rc))
        return res

    def _keep_standby(self, action, backend):
        key = standby_key(action, backend)
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
            self._keep_standby(action, backend)

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
            self._dismiss(started)
            if restart:
                self._keep_standby(started.action, started.backend)

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
