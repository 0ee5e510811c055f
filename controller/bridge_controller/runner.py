"""Run the collection's playbooks for a batch of BridgeJobs of one backend.

`Runner` is the interface reconcile's executor uses: submit, poll and cancel, each for many CRs of
one backend at once, each returning the module's own result. `AnsibleRunner` runs
playbooks/bridgejob_*.yml with ansible-runner; `FakeRunner` answers from memory for loop tests.

Credentials never reach extra vars or the environment (ansible-runner writes both to disk, the
environment even into artifacts/<ident>/command): they go into a 0600 JSON file on tmpfs whose
path alone is passed, and the file is removed as soon as the playbook ends.
"""

import json
import os
import signal
import tempfile
import uuid

PLAYBOOKS = {"submit": "bridgejob_submit.yml", "poll": "bridgejob_poll.yml", "cancel": "bridgejob_cancel.yml"}
TASK_NAME = "Bridge"
SHM = "/dev/shm"


class RunnerError(Exception):
    """The playbook did not produce a module result (it failed before or around the module)."""


class NotActing(RunnerError):
    """The playbook was not run, or was killed, because this replica lost or gave up the lease."""


def credentials_dir(directory=SHM):
    return directory if os.path.isdir(directory) else tempfile.gettempdir()


def write_credentials(credentials, directory=SHM):
    """A 0600 file holding the credentials, in memory-backed storage where the machine has it.

    Its name carries the writer's pid, so that files left by a killed controller can be told apart.
    """
    fd, path = tempfile.mkstemp(prefix="bridge-cred-%d-" % os.getpid(), dir=credentials_dir(directory))
    with os.fdopen(fd, "w") as handle:
        json.dump(credentials or {}, handle)
    return path


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


def remove_stale_credentials(directory=SHM):
    """Remove credential files of writers that are gone (a SIGKILL skips the `finally` that unlinks).

    Called at start, before this process wrote any: a file with our own pid is stale too (in a
    container the restarted controller often gets the dead one's pid). Files of live processes stay.
    """
    directory = credentials_dir(directory)
    removed = []
    for name in os.listdir(directory):
        parts = name.split("-")
        if not name.startswith("bridge-cred-") or len(parts) < 4 or not parts[2].isdigit():
            continue
        pid = int(parts[2])
        if pid != os.getpid() and os.path.exists("/proc/%d" % pid):
            continue
        try:
            os.unlink(os.path.join(directory, name))
            removed.append(name)
        except OSError:
            pass  # another user's, or gone already
    return removed


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


def kill_descendants(pid=None, rounds=5):
    """SIGKILL every process below `pid` (this one by default); returns how many.

    ansible-runner's own cancel kills the playbook's process group only, and Ansible's workers
    call setsid(): the module that submits jobs would outlive the playbook and go on submitting.
    A few rounds catch processes forked while the first ones were being killed.
    """
    if not os.path.isdir("/proc"):
        return 0
    killed = 0
    for _round in range(rounds):
        victims = descendants(os.getpid() if pid is None else pid)
        if not victims:
            break
        for victim in victims:
            try:
                os.kill(victim, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


class AnsibleRunner:
    """One ansible-runner invocation per batch; each gets its own ident, old artifacts rotate out."""

    def __init__(self, playbook_dir, work_dir, collections_path=None, rotate_artifacts=50, python=None):
        self.playbook_dir = playbook_dir
        self.work_dir = work_dir
        self.collections_path = collections_path
        self.rotate_artifacts = rotate_artifacts
        self.python = python
        # With leader election, main.py sets this to the elector's gate: a playbook does not start,
        # and a running one is killed, once this replica may no longer act.
        self.may_act = None
        os.makedirs(work_dir, exist_ok=True)
        remove_stale_credentials()

    def run(self, action, backend, credentials, jobs=None, identities=None, wait_timeout=120):
        import ansible_runner  # the controller needs it; unit tests of the pure parts do not

        if self.may_act is not None and not self.may_act():
            raise NotActing("%s playbook not started: this replica is not the leader" % action)
        extravars = {"backend": backend}
        if action == "poll":
            extravars["identities"] = list(identities)
        else:
            extravars["jobs"] = list(jobs)
            extravars["wait_timeout"] = wait_timeout
        path = write_credentials(credentials)
        envvars = {"BRIDGE_CREDENTIALS": path, "ANSIBLE_LOCALHOST_WARNING": "0",
                   "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0"}
        if self.collections_path:
            envvars["ANSIBLE_COLLECTIONS_PATH"] = self.collections_path
        if self.python:
            envvars["ANSIBLE_PYTHON_INTERPRETER"] = self.python
        gate = {}
        if self.may_act is not None:
            self._ask_often()
            gate = {"cancel_callback": self._cancelled}
        try:
            result = ansible_runner.run(
                private_data_dir=self.work_dir, project_dir=self.playbook_dir, playbook=PLAYBOOKS[action],
                inventory="localhost ansible_connection=local", extravars=extravars, envvars=envvars,
                ident="%s-%s" % (action, uuid.uuid4().hex[:12]), rotate_artifacts=self.rotate_artifacts,
                suppress_env_files=True, quiet=True, **gate)
        finally:
            os.unlink(path)
        if result.status == "canceled":
            raise NotActing("%s playbook killed: this replica is no longer the leader" % action)
        res = module_result(result.events)
        if res is None:
            raise RunnerError("%s playbook ended %s (rc %s) without a module result" % (action, result.status, result.rc))
        return res

    def _ask_often(self):
        # ansible-runner calls cancel_callback every pexpect_timeout seconds (5 by default); half a
        # second keeps stopping well inside the lease's safety margin. Through env/settings because
        # ansible-runner 2.4 drops a `settings` argument when that file is missing.
        path = os.path.join(self.work_dir, "env", "settings")
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as handle:
                json.dump({"pexpect_timeout": 0.5}, handle)

    def _cancelled(self):
        if self.may_act():
            return False
        # The controller's only children are its playbooks (one batch at a time), so the whole
        # tree below it is this playbook, Ansible's detached workers and their modules included.
        kill_descendants()
        return True


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
