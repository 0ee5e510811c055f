"""Run the collection's playbooks with ansible-runner for a batch of BridgeJobs of one backend.

`AnsibleRunner.run(action, backend, credentials, ...)` runs playbooks/bridgejob_<action>.yml once
for many CRs and returns the module's own result. The work and the credentials go through the
playbook's pipe (handoff.py); a standby playbook (standby.py) is used when one waits for this
action and backend. Test doubles that answer like the playbooks live under tests/unit/controller.

What runs at most: `max_standby` standby playbooks, plus one playbook per thread that calls run()
(the executor's batch and poll threads: RUNNING_AT_ONCE). Each is started through the launcher
(launcher.py), which dies with the controller and takes the playbook's processes with it, and
close() (at exit too) kills whatever of this runner's is left.
"""

import atexit
import hashlib
import json
import os
import shlex
import threading
import time
import uuid

from bridge_controller.backends import BACKENDS
from bridge_controller.handoff import handoff_document, hold_controller_lock, write_to_pipe
from bridge_controller.launcher import CONTROLLER_PID, write_launcher
from bridge_controller.processes import LIVE_PIPE_DIRS, kill_descendants, remove_orphans
from bridge_controller.standby import StandbyPool

# The key of a connection whose URL the operator chose (a ClusterBridgeBackend's, resolver.py): its
# playbooks get no allow-list. Never handed to the module.
OPERATOR_CHOSEN = "operator_chosen"

PLAYBOOKS = {"submit": "bridgejob_submit.yml", "poll": "bridgejob_poll.yml", "cancel": "bridgejob_cancel.yml"}
TASK_NAME = "Bridge"
# ansible-runner's event callback replaces a task's `res` with {} once its repr passes MAX_EVENT_RES
# characters (700,000 by default, which spares AWX's database). A batch's result can pass it: a poll
# at ~1,200 jobs, and a submit that finds many existing jobs when bridge.hpc.jobs is asked for their
# native records. Events only rotate on this disk, and the controller needs the whole result.
MAX_EVENT_RES = str(2 ** 62)
# Playbooks running work at once: run() is called by the executor's batch thread (submits and
# cancels) and its poll thread, one playbook each. With the standbys, a controller runs at most
# RUNNING_AT_ONCE + max_standby playbooks (docs/controller.md).
RUNNING_AT_ONCE = 2


def ca_file(directory, pem):
    """The path of a file in `directory` holding the CA bundle `pem` (public), named by its hash:
    written once, and whole (the batch, poll and probe threads may write one at once)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, hashlib.sha256(pem.encode("utf-8")).hexdigest()[:32] + ".pem")
    if not os.path.exists(path):
        partial = "%s.%s" % (path, uuid.uuid4().hex)
        with open(partial, "w") as handle:
            handle.write(pem)
        os.replace(partial, path)
    return path


class RunnerError(Exception):
    """The playbook did not produce a module result (it failed before or around the module)."""


class NotActing(RunnerError):
    """The playbook was not run, or was killed, because this replica lost or gave up the lease."""


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


def handoff_marker(pipe):
    """The environment entry every process of the playbook waiting on `pipe` carries."""
    return "BRIDGE_HANDOFF=" + pipe


class Started:
    """One playbook run: started, waiting on its pipe for work or doing it."""

    def __init__(self, action, backend, pipe, started_at):
        self.action, self.backend, self.pipe, self.started_at = action, backend, pipe, started_at
        self.thread = self.runner = None
        self.abandoned = False   # set when its work could not be handed over: it is killed

    def alive(self):
        return self.thread.is_alive()

    def dismiss(self):
        """Kill it, whatever it is doing: its processes now, and through the cancel callback a
        playbook ansible-runner has not spawned yet (it checks every pexpect_timeout)."""
        self.abandoned = True
        kill_descendants(marker=handoff_marker(self.pipe))

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
                 standby=("submit",), max_standby=2, clock=time.monotonic, allow_list=None, identity_key=None):
        self.playbook_dir = playbook_dir
        self.work_dir = work_dir
        self.collections_path = collections_path
        self.rotate_artifacts = rotate_artifacts
        self.python = python
        # The operator's --allowed-backend-url (policy.AllowList), which the modules check every
        # request against, but for a ClusterBridgeBackend's connection (OPERATOR_CHOSEN); None: any URL.
        self.allow_list = allow_list
        self.identity_key = identity_key
        self.clock = clock
        handoff_dir = os.path.join(os.path.abspath(work_dir), "handoff")
        remove_orphans(handoff_dir)
        self.pipe_dir = os.path.join(handoff_dir, "%d-%s" % (os.getpid(), uuid.uuid4().hex[:8]))
        os.makedirs(self.pipe_dir, mode=0o700)
        LIVE_PIPE_DIRS.add(self.pipe_dir)
        self._controller_lock = hold_controller_lock(self.pipe_dir)
        self.launcher = write_launcher(work_dir)
        for action in PLAYBOOKS:
            self._ask_often(os.path.join(work_dir, action))
        self.ansible_config = os.environ.get("ANSIBLE_CONFIG") or self._write_ansible_config()
        # A standby holds ansible-playbook and the module in memory (~150 MiB): a few at most,
        # for the backends used last.
        self.standby = StandbyPool(self._start, actions=standby, max_standby=max_standby, clock=clock)
        # ansible-runner writes an action's inputs (inventory/hosts, behind a lock file it removes)
        # when a run starts: two starts at once in one private data dir failed with
        # FileNotFoundError on '.artifact_write_lock', as 20 new backends at once did.
        self._run_async_lock = threading.Lock()
        # An exit that does not pass close() (an exception in main) still takes the children along.
        atexit.register(self.close)
        # With leader election, main.py sets this to the elector's gate: a playbook does not start,
        # and a running one (a standby too) is killed, once this replica may no longer act.
        self.may_act = None

    def _connection(self, backend):
        """The module's connection options: a CA bundle given as text becomes a file (it is public)."""
        backend = dict(backend)
        backend.pop(OPERATOR_CHOSEN, None)
        pem = backend.pop("ca_pem", None)
        if pem:
            backend["ca_path"] = ca_file(os.path.join(self.work_dir, "ca"), pem)
        return backend

    def _start(self, action, backend):
        import ansible_runner  # the controller needs it; unit tests of the pure parts do not

        if backend.get("type") not in BACKENDS:
            raise RunnerError("no playbook for backend type %r" % (backend.get("type"),))
        pipe = os.path.join(self.pipe_dir, "%s-%s" % (action, uuid.uuid4().hex[:12]))
        os.mkfifo(pipe, 0o600)
        envvars = {"BRIDGE_HANDOFF": pipe, CONTROLLER_PID: str(os.getpid()), "ANSIBLE_CONFIG": self.ansible_config, "ANSIBLE_LOCALHOST_WARNING": "0",
                   "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0", "MAX_EVENT_RES": MAX_EVENT_RES}
        if self.collections_path:
            envvars["ANSIBLE_COLLECTIONS_PATH"] = self.collections_path
        if self.python:
            envvars["ANSIBLE_PYTHON_INTERPRETER"] = self.python
        if self.allow_list is not None and not backend.get(OPERATOR_CHOSEN):
            envvars.update(self.allow_list.environment())
        started = Started(action, backend, pipe, self.clock())
        try:
            with self._run_async_lock:
                started.thread, started.runner = ansible_runner.run_async(
                    private_data_dir=os.path.join(self.work_dir, action), project_dir=self.playbook_dir,
                    # ansible-runner names no playbook to a `binary` of its own: the launcher gets it first.
                    binary=self.launcher, cmdline=shlex.quote(os.path.join(os.path.abspath(self.playbook_dir), PLAYBOOKS[action])),
                    playbook=PLAYBOOKS[action], inventory="localhost ansible_connection=local",
                    # The one extra var: the type, checked to be one of the backends' names above. The
                    # rest of the connection goes through the pipe, where nothing is a template.
                    extravars={"backend": {"type": backend["type"]}}, envvars=envvars, ident="%s-%s" % (action, uuid.uuid4().hex[:12]),
                    rotate_artifacts=self.rotate_artifacts, suppress_env_files=True, quiet=True,
                    cancel_callback=lambda: self._cancelled(started))
        except BaseException:
            os.unlink(pipe)   # no playbook will ever read it
            raise
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
            kill_descendants(marker=handoff_marker(started.pipe))
            return True
        if self.may_act is None or self.may_act():
            return False
        # The controller's only children are its playbooks, so the whole tree below it is theirs,
        # Ansible's detached workers and their modules included.
        kill_descendants()
        return True

    def run(self, action, backend, credentials, jobs=None, identities=None, wait_timeout=120, output_lines=None,
            output_secrets=None, output_follow=None):
        if self.may_act is not None and not self.may_act():
            raise NotActing("%s playbook not started: this replica is not the leader" % action)
        document = handoff_document(action, self._connection(backend), credentials, jobs, identities, wait_timeout,
                                    output_lines, output_secrets, output_follow, self.identity_key)
        data = json.dumps(document).encode("utf-8")
        started = self.standby.take(action, backend)
        if started is not None and not write_to_pipe(started.pipe, data, started.alive, clock=self.clock):
            self.standby.dismiss(started)   # it never took the work: it must not wait on
            started = None
        if started is None:
            started = self._start(action, backend)
            if not write_to_pipe(started.pipe, data, started.alive, clock=self.clock):
                started.abandoned = True
                runner = started.finish()
                if self.may_act is not None and not self.may_act():
                    raise NotActing("%s playbook killed: this replica is no longer the leader" % action)
                raise RunnerError("%s playbook ended %s (rc %s) before it took its work" % (action, runner.status, runner.rc))
        self.standby.replenish(action, backend)
        runner = started.finish()
        if runner.status == "canceled":
            raise NotActing("%s playbook killed: this replica is no longer the leader" % action)
        res = module_result(runner.events)
        if res is None:
            raise RunnerError("%s playbook ended %s (rc %s) without a module result" % (action, runner.status, runner.rc))
        return res

    def prepare(self, backend):
        """Have standbys ready for a backend before its first batch (a new CR's backend)."""
        self.standby.prepare(backend)

    def refresh(self):
        """Keep the standbys warm (standby.py's refresh)."""
        self.standby.refresh()

    def close(self):
        """Kill every standby and whatever else of this runner's is left (main.py calls this once
        the batch and poll threads finished their playbooks), and let go of the controller's lock."""
        self.standby.close()
        kill_descendants(marker=handoff_marker(self.pipe_dir + os.sep))
        if self._controller_lock is not None:
            os.close(self._controller_lock)
            self._controller_lock = None
