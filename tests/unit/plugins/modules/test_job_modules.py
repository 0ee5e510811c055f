"""Module units: the client is replaced by the in-memory fake; the lifecycle itself is real."""

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import AuthFailed
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient
from ansible_collections.bridge.hpc.plugins.modules import job, jobs, slurm_cluster_info, slurm_job, slurm_job_info

from fake_backend import FakeBackend
from slurm_stub import Stub, recorded_job
from module_runner import Fail, run

SCRIPT = "#!/bin/bash\necho hi\n"
CONNECTION = {"url": "http://slurm.test:6820", "user": "alice", "token": "s3cret-token"}


# Every test here catches the module's exit.
pytestmark = pytest.mark.usefixtures("capture")


@pytest.fixture
def backend(monkeypatch):
    fake = FakeBackend()
    monkeypatch.setattr(SlurmClient, "from_options", classmethod(lambda cls, get: fake))
    return fake


def test_present_then_present_again_is_unchanged(backend):
    first = run(slurm_job, dict(CONNECTION, script=SCRIPT, identity="a1"))
    second = run(slurm_job, dict(CONNECTION, script=SCRIPT, identity="a1"))
    assert not isinstance(first, Fail)
    assert first.result["changed"] is True and second.result["changed"] is False
    assert first.result["job_id"] == second.result["job_id"]
    assert len(backend.submits) == 1


def test_check_mode_submits_nothing_and_shows_a_diff(backend):
    outcome = run(slurm_job, dict(CONNECTION, script=SCRIPT, identity="a2"), check_mode=True, diff=True)
    assert outcome.result["changed"] is True and backend.submits == []
    assert outcome.result["diff"]["before"] == {"state": "absent"}
    assert "s3cret-token" not in repr(outcome.result)


def test_bad_spec_fails_naming_the_field_before_any_call(backend):
    outcome = run(slurm_job, dict(CONNECTION, script=SCRIPT, resources={"time_limit": "2:75"}))
    assert isinstance(outcome, Fail)
    assert outcome.result["error"]["field"] == "resources.time_limit"
    assert backend.submits == [] and backend.preflights == 0


def test_unknown_resource_key_is_refused_by_the_argspec(backend):
    outcome = run(slurm_job, dict(CONNECTION, script=SCRIPT, resources={"cores": 2}))
    assert isinstance(outcome, Fail) and "cores" in outcome.result["msg"]


def test_absent_needs_something_to_find_the_job_by(backend):
    outcome = run(slurm_job, dict(CONNECTION, state="absent"))
    assert isinstance(outcome, Fail) and outcome.result["error"]["field"] == "job_id"


def test_script_file_reaching_the_module_means_the_action_plugin_was_bypassed(backend):
    outcome = run(slurm_job, dict(CONNECTION, script_file="x.sh"))
    assert isinstance(outcome, Fail) and "action plugin" in outcome.result["msg"]


def test_bridge_errors_become_one_typed_failure_without_the_token(monkeypatch):
    def refuse(cls, get):
        raise AuthFailed("authentication failed", "discover", "REST API", None, "Slurm", get("url"), 401)

    monkeypatch.setattr(SlurmClient, "from_options", classmethod(refuse))
    outcome = run(slurm_job_info, dict(CONNECTION, job_id="1"))
    assert isinstance(outcome, Fail)
    assert outcome.result["error"]["type"] == "AuthFailed"
    assert "s3cret-token" not in repr(outcome.result)


def test_backend_neutral_module_uses_the_same_lifecycle(backend):
    outcome = run(job, dict(CONNECTION, backend="slurm", script=SCRIPT, identity="n1", wait=True, poll_interval=0.01))
    assert outcome.result["phase"] == "completed" and outcome.result["changed"] is True


def test_job_info_filters(backend):
    for job_id, phase in (("1", "running"), ("2", "completed")):
        backend.jobs[job_id] = backend._job(job_id, "identity-%s" % job_id, phase, user="alice")
    outcome = run(slurm_job_info, dict(CONNECTION, phases=["running"]))
    assert [j["job_id"] for j in outcome.result["jobs"]] == ["1"]
    assert "native" not in outcome.result["jobs"][0]
    outcome = run(slurm_job_info, dict(CONNECTION, job_user="bob"))
    assert outcome.result["jobs"] == []


def test_cluster_info_reads_what_gather_names(monkeypatch):
    class Cluster(FakeBackend):
        api_version = "v0.0.42"

        def served_versions(self):
            return ["v0.0.42", "v0.0.41"]

        def ping(self):
            return {"reachable": True}

        def partitions(self):
            return [{"name": "debug", "native": {}}]

        def nodes(self):
            raise AssertionError("nodes were not asked for")

    monkeypatch.setattr(SlurmClient, "from_options", classmethod(lambda cls, get: Cluster()))
    outcome = run(slurm_cluster_info, dict(CONNECTION, gather=["versions", "partitions"]))
    assert outcome.result["api_versions"] == ["v0.0.42", "v0.0.41"]
    assert outcome.result["partitions"] == [{"name": "debug"}]
    assert "nodes" not in outcome.result and "ping" not in outcome.result


def test_batch_results_leave_native_records_out_unless_asked(backend):
    # Whole records of many found jobs made ansible-runner drop the controller's result (MAX_EVENT_RES).
    items = [{"identity": "batch-%d" % n, "script": SCRIPT} for n in range(3)]
    run(jobs, dict(CONNECTION, backend="slurm", jobs=items))
    again = run(jobs, dict(CONNECTION, backend="slurm", jobs=items)).result
    assert [r["changed"] for r in again["results"]] == [False] * 3
    assert all("native" not in r["job"] and r["job"]["job_id"] for r in again["results"])
    asked = run(jobs, dict(CONNECTION, backend="slurm", jobs=items, include_native=True)).result
    assert all(r["job"]["native"] == {"id": r["job"]["job_id"]} for r in asked["results"])


def stub_cluster(monkeypatch, **stores):
    stub = Stub(**stores)
    monkeypatch.setattr(SlurmClient, "from_options", classmethod(lambda cls, get: stub.client(user=get("user"))))
    return stub


def test_job_info_reads_history_from_accounting_with_the_filters_on_the_server(monkeypatch):
    stub = stub_cluster(monkeypatch, live=[], recorded=[recorded_job(5, "a", "FAILED"), recorded_job(6, "b", "COMPLETED")])
    outcome = run(slurm_job_info, dict(CONNECTION, source="accounting", start_time="-7d", end_time="-1h",
                                       job_user="bridge", account="bridge", phases=["failed"]))
    assert [j["job_id"] for j in outcome.result["jobs"]] == ["5"]
    assert outcome.result["jobs"][0]["elapsed_seconds"] == 10 and outcome.result["jobs"][0]["source"] == "accounting"
    params = stub.sent[-1].url.params
    assert params["users"] == "bridge" and params["account"] == "bridge" and "state" not in params
    assert (params["start_time"], params["end_time"]) == ("now-604800seconds", "now-3600seconds")


def test_job_info_of_an_identity_says_how_it_was_looked_up(monkeypatch):
    stub_cluster(monkeypatch, live=[], recorded=[recorded_job(5, "a")])
    # The stub's jobs are bridge's: only the credential's user's job is an identity's.
    outcome = run(slurm_job_info, dict(CONNECTION, user="bridge", identity="a"))
    assert outcome.result["job"]["job_id"] == "5" and outcome.result["lookup"] == "accounting"


@pytest.mark.parametrize("args, field", [
    ({"start_time": "-1d"}, "start_time"),
    ({"source": "accounting", "start_time": "last week"}, "start_time"),
    ({"source": "accounting", "start_time": "-1h", "end_time": "-2h"}, "end_time"),
])
def test_job_info_refuses_a_bad_window_naming_the_field(monkeypatch, args, field):
    stub = stub_cluster(monkeypatch, live=[], recorded=[])
    outcome = run(slurm_job_info, dict(CONNECTION, **args))
    assert isinstance(outcome, Fail) and field in outcome.result["msg"]
    assert not [r for r in stub.sent if "slurmdb/v0.0.42/jobs" in r.url.path and "job_name" not in r.url.params]


def test_job_info_from_accounting_where_there_is_none_says_so(monkeypatch):
    stub_cluster(monkeypatch, live=[], recorded=None)
    outcome = run(slurm_job_info, dict(CONNECTION, source="accounting"))
    assert isinstance(outcome, Fail) and "serves no Slurm accounting" in outcome.result["msg"]
