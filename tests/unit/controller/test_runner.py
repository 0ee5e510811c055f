import os
import stat

from bridge_controller.runner import FakeRunner, module_result, remove_stale_credentials, write_credentials

from fake_backend import FakeBackend


def test_credentials_file_is_private(tmp_path):
    path = write_credentials({"token": "t"}, directory=str(tmp_path))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert open(path).read() == '{"token": "t"}'


def test_credentials_left_by_a_killed_controller_are_removed_at_start(tmp_path):
    # A SIGKILLed controller never reaches the unlink: its file (token inside) stays on tmpfs.
    mine = write_credentials({"token": "t"}, directory=str(tmp_path))
    assert os.path.basename(mine).startswith("bridge-cred-%d-" % os.getpid())
    dead = tmp_path / "bridge-cred-999999999-abc"       # no such pid
    alive = tmp_path / ("bridge-cred-%d-abc" % os.getppid())   # a live writer keeps its file
    other = tmp_path / "bridge-cred-abc"                 # not ours to judge
    for path in (dead, alive, other):
        path.write_text("{}")
    removed = remove_stale_credentials(str(tmp_path))
    assert sorted(removed) == sorted([dead.name, os.path.basename(mine)])
    assert alive.exists() and other.exists() and not dead.exists() and not os.path.exists(mine)


def test_module_result_is_read_from_the_bridge_task_event():
    events = [{"event": "runner_on_ok", "event_data": {"task": "Gathering", "res": {"x": 1}}},
              {"event": "runner_on_failed", "event_data": {"task": "Bridge", "res": {"failed_count": 1}}}]
    assert module_result(events) == {"failed_count": 1, "failed": True}
    assert module_result([]) is None


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
