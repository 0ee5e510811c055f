import os
import stat

from bridge_controller.runner import FakeRunner, module_result, write_credentials

from fake_backend import FakeBackend


def test_credentials_file_is_private(tmp_path):
    path = write_credentials({"token": "t"}, directory=str(tmp_path))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert open(path).read() == '{"token": "t"}'


def test_module_result_is_read_from_the_bridge_task_event():
    events = [{"event": "runner_on_ok", "event_data": {"task": "Gathering", "res": {"x": 1}}},
              {"event": "runner_on_failed", "event_data": {"task": "Bridge", "res": {"failed_count": 1}}}]
    assert module_result(events) == {"failed_count": 1}
    assert module_result([]) is None


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
