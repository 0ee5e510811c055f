"""SlurmClient against responses recorded from real Slurm 22.05, 24.11 and 26.05.

tests/unit/fixtures/slurm/<api version>/<case>.json were captured by tools/record_slurm_fixtures.py
from the clusters tools/slurm-cluster.sh runs; each test replays one of them through httpx's
MockTransport and checks what the client makes of it.
"""

import httpx
import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import AmbiguousIdentity, AuthFailed, NotFound, Rejected
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.compile import compile_job

from recorded import recorded as recorded_response
from recorded import replaying_transport

VERSIONS = ("v0.0.38", "v0.0.40", "v0.0.42", "v0.0.45")
RELEASE = {"v0.0.38": "22.05", "v0.0.40": "24.11", "v0.0.42": "24.11", "v0.0.45": "26.05"}
SPEC = normalize_spec({"script": "#!/bin/bash\ntrue\n", "identity": "fixture-ok"})


def recorded(version, case):
    return recorded_response("slurm", version, case)


def client_replaying(version, *cases, user="bridge"):
    """A client whose every request is answered by the next recorded response, in order."""
    transport, sent = replaying_transport("Slurm", [recorded(version, case) for case in cases])
    client = SlurmClient("http://slurm.test", user=user, token="tok", api_version=version, transport=transport)
    return client, sent


def job(version, case):
    return client_replaying(version, case)[0].get(1)


@pytest.mark.parametrize("version", VERSIONS)
def test_ping(version):
    result = client_replaying(version, "ping")[0].ping()
    assert result["reachable"] is True
    assert result["release"].startswith(RELEASE[version])


@pytest.mark.parametrize("version", VERSIONS)
def test_bad_token_is_an_authentication_failure(version):
    client = client_replaying(version, "submit_bad_token")[0]
    with pytest.raises(AuthFailed) as err:
        client.submit(SPEC)
    assert "authentication failed" in str(err.value) and "tok" not in str(err.value).replace("token", "")


def test_bad_token_on_22_05_reads_is_an_authentication_failure():
    with pytest.raises(AuthFailed):
        client_replaying("v0.0.38", "ping_bad_token")[0].ping()


@pytest.mark.parametrize("version", ("v0.0.40", "v0.0.42", "v0.0.45"))
def test_newer_ping_answers_a_bad_token_with_an_unreachable_controller(version):
    assert client_replaying(version, "ping_bad_token")[0].ping()["reachable"] is False


@pytest.mark.parametrize("version", VERSIONS)
def test_partitions_are_normalized(version):
    partitions = dict((p["name"], p) for p in client_replaying(version, "partitions")[0].partitions())
    assert sorted(partitions) == ["batch", "debug"]
    assert partitions["debug"]["max_time_minutes"] == 30 and partitions["debug"]["max_time"] == "00:30:00"
    assert partitions["batch"]["max_time_minutes"] == 1440 and partitions["batch"]["max_time"] == "1-00:00:00"
    assert partitions["batch"]["max_nodes_per_job"] == 1
    assert partitions["debug"]["max_nodes_per_job"] is None
    assert partitions["debug"]["default_time_minutes"] == 10
    assert partitions["debug"]["total_cpus"] == 2 and partitions["debug"]["total_nodes"] == 1
    assert partitions["debug"]["state"] == "UP"
    # Only v0.0.38 and v0.0.45 say which partition is the default.
    assert partitions["debug"]["default"] is (version in ("v0.0.38", "v0.0.45"))
    assert partitions["batch"]["default"] is False


@pytest.mark.parametrize("version", VERSIONS)
def test_nodes_are_normalized(version):
    nodes = client_replaying(version, "nodes")[0].nodes()
    assert len(nodes) == 1
    node = nodes[0]
    assert node["cpus"] == 2 and node["memory_mb"] == 4000 and node["gpus"] == 0
    assert node["usable"] is True
    assert sorted(node["partitions"]) == ["batch", "debug"]


@pytest.mark.parametrize("version", VERSIONS)
def test_submit_returns_the_job_id_and_sends_one_post(version):
    client, sent = client_replaying(version, "submit_ok")
    assert client.submit(SPEC) == str(recorded(version, "submit_ok")["body"]["job_id"])
    assert [r.method for r in sent] == ["POST"]


@pytest.mark.parametrize("version", VERSIONS)
def test_compiled_body_has_the_shape_the_server_accepted(version):
    accepted = recorded(version, "submit_ok")["request"]["body"]
    ours = compile_job(SPEC, version)
    assert ("script" in ours) == ("script" in accepted)
    assert type(ours["job"]["environment"]) is type(accepted["job"]["environment"])
    assert ("script" in ours["job"]) == ("script" in accepted["job"])


@pytest.mark.parametrize("version", VERSIONS)
def test_submit_to_an_unknown_partition_is_rejected_with_slurms_reason(version):
    client = client_replaying(version, "submit_unknown_partition")[0]
    with pytest.raises(Rejected) as err:
        client.submit(SPEC)
    assert "Invalid partition name specified" in str(err.value)


@pytest.mark.parametrize("version", VERSIONS)
def test_submit_over_the_time_limit_keeps_the_job_id(version):
    client = client_replaying(version, "submit_time_over_max")[0]
    assert client.submit(SPEC) == str(recorded(version, "submit_time_over_max")["body"]["job_id"])
    if version == "v0.0.38":
        assert any("Requested partition configuration not available now" in w for w in client.warnings)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_job_that_can_never_start_is_rejected(version):
    found = job(version, "job_partition_time_limit")
    assert found["phase"] == "queued" and found["terminal"] is False
    assert found["failure_class"] == "rejected" and found["reason"] == "PartitionTimeLimit"
    assert found["identity"] == "fixture-overtime"


@pytest.mark.parametrize("version", VERSIONS)
def test_running_job(version):
    found = job(version, "job_running")
    assert found["phase"] == "running" and found["terminal"] is False
    assert found["exit_code"] is None and found["end_time"] is None
    assert found["start_time"].endswith("Z")


@pytest.mark.parametrize("version", VERSIONS)
def test_completed_job(version):
    found = job(version, "job_completed")
    assert (found["phase"], found["exit_code"], found["failure_class"]) == ("completed", 0, None)
    assert found["identity"] == "fixture-ok" and found["end_time"].endswith("Z")
    assert str(found["native"]["job_id"]) == found["job_id"]


@pytest.mark.parametrize("version", VERSIONS)
def test_exit_3(version):
    found = job(version, "job_failed_exit3")
    assert (found["phase"], found["exit_code"], found["signal"], found["failure_class"]) == (
        "failed", 3, None, "non_zero_exit")


@pytest.mark.parametrize("version", VERSIONS)
def test_cancelled_job(version):
    found = job(version, "job_cancelled")
    assert found["phase"] == "cancelled" and found["failure_class"] == "cancelled"


@pytest.mark.parametrize("version", VERSIONS)
def test_timeout_is_a_signal_15_with_failure_class_timeout(version):
    found = job(version, "job_timeout")
    assert (found["phase"], found["failure_class"], found["exit_code"], found["signal"]) == (
        "failed", "timeout", None, 15)
    assert found["native_state"] == "TIMEOUT" and found["reason"] == "TimeLimit"


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_job_is_not_found(version):
    """slurmctld does not know it, and this cluster has no accounting to ask instead."""
    client, sent = client_replaying(version, "job_unknown", "slurmdb_absent")
    with pytest.raises(NotFound):
        client.get(1)
    assert [r.url.path for r in sent] == ["/slurm/%s/job/1" % version, "/slurmdb/%s/jobs/" % version]
    assert client.accounting_available() is False and client.warnings == []


@pytest.mark.parametrize("version", VERSIONS)
def test_malformed_job_id_is_rejected(version):
    with pytest.raises(Rejected):
        job(version, "job_bad_id")


@pytest.mark.parametrize("version", ("v0.0.38",))
def test_cancel_of_a_finished_job_is_a_no_op_on_22_05(version):
    client, sent = client_replaying(version, "delete_finished")
    assert client.cancel("1") is None
    assert [(r.method, r.url.path) for r in sent] == [("DELETE", "/slurm/%s/job/1" % version)]
    assert client.warnings == []


@pytest.mark.parametrize("version", ("v0.0.40", "v0.0.42", "v0.0.45"))
def test_cancel_of_a_finished_job_is_a_no_op(version):
    client, sent = client_replaying(version, "job_completed", "delete_finished")
    assert client.cancel("1") is None
    # The owner is read first (a non-root user on 24.11+), then the signal is sent once.
    assert [r.method for r in sent] == ["GET", "DELETE"]


@pytest.mark.parametrize("version", ("v0.0.38", "v0.0.42", "v0.0.45"))
def test_cancel_of_an_unknown_job_is_not_found(version):
    cases = ("delete_unknown",) if version == "v0.0.38" else ("job_unknown", "slurmdb_absent")
    with pytest.raises(NotFound):
        client_replaying(version, *cases)[0].cancel(999999)


def test_cancel_of_another_users_job_is_refused_by_22_05():
    with pytest.raises(Rejected) as err:
        client_replaying("v0.0.38", "delete_other_users_job")[0].cancel(1)
    assert "Access/permission denied" in str(err.value)


@pytest.mark.parametrize("version", ("v0.0.40", "v0.0.42", "v0.0.45"))
def test_cancel_of_another_users_job_is_never_sent_to_newer_slurm(version):
    client, sent = client_replaying(version, "job_running", user="bridgeother")
    with pytest.raises(Rejected) as err:
        client.cancel(1)
    assert "belongs to 'bridge'" in str(err.value)
    assert [r.method for r in sent] == ["GET"]


@pytest.mark.parametrize("version", ("v0.0.45",))
def test_forbidden_cancel_is_rejected_not_an_auth_failure(version):
    client = client_replaying(version, "delete_other_users_job", user="root")[0]
    with pytest.raises(Rejected):
        client.cancel(1)


# The list recorded from 23.11 (v0.0.40) holds three jobs of user bridge with the comment
# bridge:fixture-ok, the others one.
SUBMISSIONS_OF_FIXTURE_OK = {"v0.0.40": ["3", "8", "13"]}


@pytest.mark.parametrize("version", VERSIONS)
def test_find_by_identity_in_the_job_list(version):
    """Without accounting (a 404 for /slurmdb), the identity is looked for in slurmctld's list;
    several jobs carrying it are refused, naming them."""
    client = client_replaying(version, "slurmdb_absent", "jobs_list")[0]
    if version in SUBMISSIONS_OF_FIXTURE_OK:
        with pytest.raises(AmbiguousIdentity) as refused:
            client.find("fixture-ok")
        assert refused.value.job_ids == SUBMISSIONS_OF_FIXTURE_OK[version]
    else:
        found = client.find("fixture-ok")
        assert found is not None and found["identity"] == "fixture-ok"
    assert client.lookup == "live"
    assert client_replaying(version, "slurmdb_absent", "jobs_list")[0].find("never-submitted") is None


@pytest.mark.parametrize("version", ("v0.0.38", "v0.0.42", "v0.0.45"))
def test_nothing_changed_since_update_time_is_none_not_an_empty_queue(version):
    client = client_replaying(version, "jobs_not_modified")[0]
    assert client.list(update_time=1796005673) is None
    assert client.warnings == []


def test_versions_that_refuse_an_epoch_update_time_get_the_full_list():
    client, sent = client_replaying("v0.0.40", "jobs_update_time_epoch_rejected", "jobs_list")
    jobs = client.list(update_time=1796005673)
    assert [job["job_id"] for job in jobs] == [str(n) for n in range(1, 17)] and len(sent) == 2
    assert "update_time" in str(sent[0].url) and "update_time" not in str(sent[1].url)


def test_discovery_takes_the_newest_version_served():
    calls = []

    def handler(request):
        calls.append(request.url.path)
        if request.url.path.startswith("/slurm/v0.0.38/"):
            return httpx.Response(200, json=recorded("v0.0.38", "ping")["body"])
        return httpx.Response(404, text="Unable find requested URL")

    http = httpx.Client(base_url="http://slurm.test", transport=httpx.MockTransport(handler))
    client = SlurmClient("http://slurm.test", transport=Transport("http://slurm.test", "Slurm", http_client=http))
    assert client.api_version == "v0.0.38"
    assert calls[0] == "/slurm/v0.0.45/ping/" and calls[-1] == "/slurm/v0.0.38/ping/"


def test_without_a_known_default_partition_a_request_that_fits_none_is_refused():
    from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.fit import check_fits

    client = client_replaying("v0.0.42", "partitions", "nodes")[0]
    partitions, nodes = client.partitions(), client.nodes()
    assert not any(p["default"] for p in partitions)
    with pytest.raises(SpecError) as err:
        check_fits(normalize_spec({"script": "#!/bin/bash\n", "resources": {"memory": "8G"}}), partitions, nodes)
    assert err.value.field == "resources.memory"
    check_fits(normalize_spec({"script": "#!/bin/bash\n", "resources": {"time_limit": "2:00:00"}}), partitions, nodes)
