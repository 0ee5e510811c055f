import json
import os
import threading

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._handoff import read_handoff
from bridge_controller.handoff import handoff_document, write_to_pipe
from bridge_controller.runner import module_result

from fake_backend import FakeBackend
from fakes import FakeRunner


def on(backend_type, **connection):
    return dict(connection, type=backend_type)


def test_handoff_document_carries_the_work_and_exactly_the_backends_credential_keys():
    secret = {"user": "alice", "token": "t", "ca.crt": "x", "password": "p"}
    assert handoff_document("submit", on("slurm"), secret, jobs=[{"identity": "u"}]) == {
        "user": "alice", "token": "t", "jobs": [{"identity": "u"}]}
    assert handoff_document("submit", on("ray"), secret, jobs=[]) == {"token": "t", "jobs": []}, "Ray takes no user"
    assert handoff_document("poll", on("slurm"), {}, identities=("a", "b")) == {"identities": ["a", "b"]}
    assert handoff_document("poll", on("slurm"), {"user": "alice", "token": ""}, identities=()) == {
        "user": "alice", "identities": []}, "an empty key is left out, not handed over empty"
    assert handoff_document("cancel", on("ray"), {"token": "t"}, jobs=[], wait_timeout=30) == {
        "token": "t", "jobs": [], "wait_timeout": 30}
    assert handoff_document("poll", on("lsf"), secret, identities=()) == {
        "user": "alice", "password": "p", "identities": []}, "LSF logs on with user and password"
    assert handoff_document("poll", on("quantum"), dict(secret, apiKey="k", serviceCrn="crn:v1:x", api_key="no"),
                            identities=()) == {"api_key": "k", "service_crn": "crn:v1:x", "identities": []}, (
        "the Secret's camelCase keys become the module's options; a key named like the option is not one")
    assert handoff_document("poll", on("nosuch"), secret, identities=()) == {"identities": []}, "an unknown backend gets none"


def test_handoff_document_carries_the_connection_but_its_type():
    template = "http://h/{{ lookup('pipe', 'id') }}"
    document = handoff_document("poll", on("slurm", url=template, api_version="v0.0.42", iam_url=None,
                                           validate_certs=False), {}, identities=())
    assert document == {"url": template, "api_version": "v0.0.42", "validate_certs": False, "identities": []}, (
        "the type is the playbook's extra var; unset options are left to the module's defaults")


def reader(pipe, got, timeout=10):
    thread = threading.Thread(target=lambda: got.append(read_handoff(pipe, timeout)))
    thread.start()
    return thread


def test_a_document_passes_whole_through_the_pipe(tmp_path):
    pipe = str(tmp_path / "pipe")
    os.mkfifo(pipe, 0o600)
    got = []
    # Larger than a pipe's buffer: the writer blocks until the reader drains it.
    document = {"jobs": [{"identity": "u%d" % i, "script": "x" * 1000} for i in range(200)], "token": "t"}
    thread = reader(pipe, got)
    assert write_to_pipe(pipe, json.dumps(document).encode("utf-8"), alive=lambda: True)
    thread.join()
    assert got == [document]


def test_an_empty_write_ends_the_reader_idle(tmp_path):
    pipe = str(tmp_path / "pipe")
    os.mkfifo(pipe, 0o600)
    got = []
    thread = reader(pipe, got)
    assert write_to_pipe(pipe, b"", alive=lambda: True)
    thread.join()
    assert got == [None]


def test_the_reader_gives_up_after_its_timeout(tmp_path):
    pipe = str(tmp_path / "pipe")
    os.mkfifo(pipe, 0o600)
    assert read_handoff(pipe, 0.05) is None


def test_no_reader_and_a_finished_playbook_means_nothing_was_handed_over(tmp_path):
    pipe = str(tmp_path / "pipe")
    os.mkfifo(pipe, 0o600)
    calls = []
    assert write_to_pipe(pipe, b"{}", alive=lambda: calls.append(1) or len(calls) < 3) is False
    assert len(calls) == 3


def test_a_bad_document_is_a_spec_error(tmp_path):
    from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError

    pipe = str(tmp_path / "pipe")
    os.mkfifo(pipe, 0o600)
    for data in (b"not json", b"[1]"):
        errors = []

        def read():
            try:
                read_handoff(pipe, 10)
            except SpecError as exc:
                errors.append(exc)

        thread = threading.Thread(target=read)
        thread.start()
        assert write_to_pipe(pipe, data, alive=lambda: True)
        thread.join()
        assert errors and errors[0].field == "handoff_pipe"


def test_module_result_is_read_from_the_bridge_task_event():
    events = [{"event": "runner_on_ok", "event_data": {"task": "Gathering", "res": {"x": 1}}},
              {"event": "runner_on_failed", "event_data": {"task": "Bridge", "res": {"failed_count": 1}}}]
    assert module_result(events) == {"failed_count": 1, "failed": True}
    assert module_result([]) is None


def test_a_result_ansible_runner_dropped_is_no_result():
    # Its callback empties `res` past MAX_EVENT_RES; taken as the module's, it named no job at all.
    assert module_result([{"event": "runner_on_ok", "event_data": {"task": "Bridge", "res": {}}}]) is None


def test_a_failed_module_result_says_so():
    # ansible-runner's runner_on_failed event leaves "failed" out of res (seen with slurmrestd down).
    res = {"msg": "Failed to list jobs: Connection refused", "error": {"kind": "connection"}, "changed": False}
    assert module_result([{"event": "runner_on_failed", "event_data": {"task": "Bridge", "res": res}}])["failed"] is True
    assert "failed" not in module_result([{"event": "runner_on_ok", "event_data": {"task": "Bridge", "res": {"jobs": {}}}}])


def test_fake_runner_speaks_like_the_playbooks():
    runner = FakeRunner(FakeBackend(progression=("running",)))
    jobs = [{"identity": "u1", "script": "#!/bin/bash\n"}, {"identity": "u2", "script": "#!/bin/bash\n"}]
    submitted = runner.run("submit", {"url": "fake://"}, {}, jobs=jobs)
    assert [r["changed"] for r in submitted["results"]] == [True, True]
    polled = runner.run("poll", {"url": "fake://"}, {}, identities=["u1", "u2", "u3"])
    assert sorted(polled["jobs"]) == ["u1", "u2"] and polled["missing"] == ["u3"]
    cancelled = runner.run("cancel", {"url": "fake://"}, {}, jobs=[{"identity": "u1"}])
    assert cancelled["results"][0]["job"]["phase"] == "cancelled"
    assert [call[0] for call in runner.calls] == ["submit", "poll", "cancel"]


def test_a_ca_bundle_becomes_a_file_the_playbook_gets_the_path_of(tmp_path):
    from bridge_controller.runner import AnsibleRunner

    runner = AnsibleRunner(str(tmp_path / "playbooks"), str(tmp_path / "work"))
    connection = runner._connection({"type": "slurm", "url": "https://s", "ca_pem": "PEM\n"})
    assert "ca_pem" not in connection and open(connection["ca_path"]).read() == "PEM\n"
    assert runner._connection({"type": "slurm", "url": "https://s", "ca_pem": "PEM\n"}) == connection
    assert runner._connection({"type": "ray", "url": "http://r"}) == {"type": "ray", "url": "http://r"}


def test_no_playbook_finds_the_controllers_own_kubernetes_credentials(tmp_path, monkeypatch):
    """The controller's environment loses its Kubernetes variables and tells the clients to refuse
    the in-cluster fallback; a playbook gets only what the runner sets."""
    import sys
    import types

    from bridge_controller.main import refuse_ambient_credentials
    from bridge_controller.runner import AnsibleRunner

    environ = {"KUBECONFIG": "/etc/bridge/kubeconfig", "K8S_AUTH_KUBECONFIG": "/k", "K8S_AUTH_API_KEY": "t", "HOME": "/h"}
    refuse_ambient_credentials(environ)
    assert environ == {"HOME": "/h", "BRIDGE_AMBIENT_CREDENTIALS": "refuse"}
    started = []
    fake = types.SimpleNamespace(run_async=lambda **kwargs: started.append(kwargs) or (None, None))
    monkeypatch.setitem(sys.modules, "ansible_runner", fake)
    runner = AnsibleRunner(str(tmp_path / "playbooks"), str(tmp_path / "work"), standby=())
    runner._start("poll", {"type": "kubernetes", "namespace": "team-a"})
    runner.close()
    assert not [name for name in started[0]["envvars"] if name.startswith("K8S_AUTH_") or name == "KUBECONFIG"]
    assert started[0]["extravars"] == {"backend": {"type": "kubernetes"}}, (
        "the type is the one extra var: the namespace, as all a BridgeJob's author wrote, goes through the pipe")


def test_no_playbook_starts_for_a_backend_type_the_controller_does_not_know(tmp_path, monkeypatch):
    import sys
    import types

    from bridge_controller.runner import AnsibleRunner, RunnerError

    started = []
    monkeypatch.setitem(sys.modules, "ansible_runner", types.SimpleNamespace(run_async=lambda **kwargs: started.append(kwargs)))
    runner = AnsibleRunner(str(tmp_path / "playbooks"), str(tmp_path / "work"), standby=())
    with pytest.raises(RunnerError, match="no playbook for backend type"):
        runner._start("poll", {"type": "{{ lookup('pipe', 'id') }}"})
    runner.close()
    assert not started


def test_only_dead_controllers_pipes_and_processes_are_removed(tmp_path):
    import subprocess
    import time

    from bridge_controller.processes import LIVE_PIPE_DIRS, remove_orphans, with_environment

    handoff = tmp_path / "handoff"
    dead, other, stale_mine, live_mine = (handoff / name for name in (
        "999999999-aaaa", "%d-bbbb" % os.getppid(), "%d-cccc" % os.getpid(), "%d-dddd" % os.getpid()))
    for directory in (dead, other, stale_mine, live_mine):
        directory.mkdir(parents=True)
    LIVE_PIPE_DIRS.add(str(live_mine))
    # A standby module left by the dead controller: detached (not our child), like Ansible's workers.
    env = dict(os.environ, BRIDGE_HANDOFF=str(dead / "submit-1"))
    subprocess.run(["setsid", "-f", "sleep", "61.%d" % os.getpid()], env=env, check=True)
    marker = "BRIDGE_HANDOFF=%s/" % dead

    def orphans():
        return with_environment([int(p) for p in os.listdir("/proc") if p.isdigit()], marker)

    deadline = time.monotonic() + 5
    while not orphans() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert orphans()
    assert remove_orphans(str(handoff)) >= 1
    assert sorted(p.name for p in handoff.iterdir()) == sorted([other.name, live_mine.name])
    deadline = time.monotonic() + 5
    while orphans() and time.monotonic() < deadline:
        time.sleep(0.01)   # SIGKILL delivered; /proc/<pid>/environ goes once it is reaped
    assert not orphans()
    LIVE_PIPE_DIRS.discard(str(live_mine))


class StubStarted:
    """Stands in for a started playbook: no process, a pipe that is not there."""

    def __init__(self, action, backend, pipe, started_at):
        self.action, self.backend, self.pipe, self.started_at, self.living = action, backend, pipe, started_at, True
        self.finished = self.dismissed = False

    def alive(self):
        return self.living

    def dismiss(self):
        self.dismissed, self.living = True, False

    def finish(self):
        self.finished = True


def stub_pool(tmp_path, **kwargs):
    from bridge_controller.standby import StandbyPool

    now, started = [0.0], []

    def start(action, backend):
        started.append(StubStarted(action, backend, str(tmp_path / "gone" / backend["url"][-1]), now[0]))
        return started[-1]

    return StandbyPool(start, clock=lambda: now[0], **kwargs), now, started


def slurm(url):
    return {"type": "slurm", "url": url}


def test_standbys_are_kept_for_the_backends_used_last(tmp_path):
    pool, _now, started = stub_pool(tmp_path, max_standby=2)
    for url in ("http://a", "http://b", "http://a", "http://c"):
        pool.prepare(slurm(url))
    assert [s.backend["url"] for s in started] == ["http://a", "http://b", "http://c"]
    assert pool.take("submit", slurm("http://a")) is None, "the least recently used was dismissed"
    assert pool.take("submit", slurm("http://b")) is started[1] and pool.take("submit", slurm("http://c")) is started[2]
    assert pool.take("submit", slurm("http://b")) is None, "a standby is taken once"


def test_only_standby_actions_get_a_standby(tmp_path):
    pool, _now, started = stub_pool(tmp_path, actions=("submit",))
    pool.replenish("poll", slurm("http://a"))
    assert not started
    pool.replenish("submit", slurm("http://a"))
    pool.replenish("submit", slurm("http://a"))
    assert len(started) == 1, "one per action and backend"


def test_refresh_replaces_aged_standbys_and_leaves_ended_ones_to_the_next_batch(tmp_path):
    from bridge_controller.standby import STANDBY_MAX_AGE

    pool, now, started = stub_pool(tmp_path)
    pool.prepare(slurm("http://a"))
    pool.prepare(slurm("http://b"))
    started[0].living = False          # ended on its own: restarting it each tick would loop
    pool.refresh()
    assert len(started) == 2 and pool.take("submit", slurm("http://a")) is None
    now[0] = STANDBY_MAX_AGE           # b is about to give up waiting: replaced
    pool.refresh()
    assert len(started) == 3 and started[2].started_at == STANDBY_MAX_AGE and started[2].backend == slurm("http://b")
    assert pool.take("submit", slurm("http://b")) is started[2]


def test_an_aged_standby_is_not_used_and_close_ends_the_rest(tmp_path):
    from bridge_controller.standby import STANDBY_MAX_AGE

    pool, now, started = stub_pool(tmp_path)
    pool.prepare(slurm("http://a"))
    pool.prepare(slurm("http://b"))
    now[0] = STANDBY_MAX_AGE
    assert pool.take("submit", slurm("http://a")) is None
    pool.close()
    assert started[1].finished
    pool.prepare(slurm("http://c"))
    assert len(started) == 2, "no standby starts once closed"


def test_the_allow_list_reaches_the_playbooks_in_their_environment(tmp_path, monkeypatch):
    """The modules check every request against it (_urls.py); tenants cannot set a playbook's environment."""
    import sys
    import types

    from bridge_controller.policy import Policy
    from bridge_controller.runner import OPERATOR_CHOSEN, AnsibleRunner

    started = []
    fake = types.SimpleNamespace(run_async=lambda **kwargs: started.append(kwargs) or (None, None))
    monkeypatch.setitem(sys.modules, "ansible_runner", fake)
    policy = Policy(["http://slurm:6820", "https://ray.example/ray"])
    runner = AnsibleRunner(str(tmp_path / "playbooks"), str(tmp_path / "work"), standby=(), allow_list=policy.allow_list)
    runner._start("poll", {"type": "slurm", "url": "http://slurm:6820"})
    runner._start("poll", {"type": "slurm", "url": "http://site:6820", OPERATOR_CHOSEN: True})
    runner.close()
    assert started[0]["envvars"]["BRIDGE_ALLOWED_URLS"] == "http://slurm:6820 https://ray.example/ray"
    assert "BRIDGE_ALLOWED_URLS" not in started[1]["envvars"], "a ClusterBridgeBackend's URL is the operator's"
    assert OPERATOR_CHOSEN not in runner._connection({"type": "slurm", "url": "http://site:6820", OPERATOR_CHOSEN: True})
