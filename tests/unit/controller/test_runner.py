import json
import os
import threading

from ansible_collections.bridge.hpc.plugins.module_utils._handoff import read_handoff
from bridge_controller.runner import FakeRunner, handoff_document, module_result, write_to_pipe

from fake_backend import FakeBackend


def test_handoff_document_carries_the_work_and_only_the_credentials():
    credentials = {"user": "alice", "token": "t", "ca.crt": "x", "empty": ""}
    assert handoff_document("submit", credentials, jobs=[{"identity": "u"}]) == {
        "user": "alice", "token": "t", "jobs": [{"identity": "u"}]}
    assert handoff_document("poll", {}, identities=("a", "b")) == {"identities": ["a", "b"]}
    assert handoff_document("cancel", {"token": "t"}, jobs=[], wait_timeout=30) == {"token": "t", "jobs": [], "wait_timeout": 30}


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


def test_only_dead_controllers_pipes_and_processes_are_removed(tmp_path):
    import subprocess
    import time

    from bridge_controller.runner import LIVE_PIPE_DIRS, remove_orphans, with_environment

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

    def alive(self):
        return self.living

    def finish(self):
        return None


def stub_runner(tmp_path, monkeypatch, **kwargs):
    from bridge_controller.runner import AnsibleRunner

    now, started = [0.0], []
    runner = AnsibleRunner(str(tmp_path / "playbooks"), str(tmp_path / "work"), clock=lambda: now[0], **kwargs)

    def start(action, backend):
        started.append(StubStarted(action, backend, str(tmp_path / "gone" / backend["url"][-1]), now[0]))
        return started[-1]

    monkeypatch.setattr(runner, "_start", start)
    return runner, now, started


def standby_urls(runner):
    return [json.loads(key[1])["url"] for key in runner._standby]


def test_standbys_are_kept_for_the_backends_used_last(tmp_path, monkeypatch):
    runner, _now, started = stub_runner(tmp_path, monkeypatch, max_standby=2)
    for url in ("http://a", "http://b", "http://a", "http://c"):
        runner.prepare({"type": "slurm", "url": url})
    assert len(started) == 3 and standby_urls(runner) == ["http://b", "http://c"]


def test_refresh_replaces_aged_standbys_and_leaves_ended_ones_to_the_next_batch(tmp_path, monkeypatch):
    from bridge_controller.runner import STANDBY_MAX_AGE

    runner, now, started = stub_runner(tmp_path, monkeypatch)
    runner.prepare({"type": "slurm", "url": "http://a"})
    runner.prepare({"type": "slurm", "url": "http://b"})
    started[0].living = False          # ended on its own: restarting it each tick would loop
    runner.refresh()
    assert len(started) == 2 and standby_urls(runner) == ["http://b"]
    now[0] = STANDBY_MAX_AGE           # b is about to give up waiting: replaced
    runner.refresh()
    assert len(started) == 3 and standby_urls(runner) == ["http://b"] and started[2].started_at == STANDBY_MAX_AGE
