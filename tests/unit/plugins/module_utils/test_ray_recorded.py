"""RayClient against responses recorded from a real Ray 2.60 head (tools/record_ray_fixtures.py)."""

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import AlreadyExists, AuthFailed, NotFound, Rejected
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils.ray.client import FEW_BY_ID, RayClient

from recorded import recorded, replaying_transport

VERSION = "2.60.0"
SPEC = normalize_spec({"script": "#!/bin/bash\necho hello ok\n", "identity": "fixture-ok"})


def client_replaying(*cases):
    transport, sent = replaying_transport("Ray", [recorded("ray", VERSION, case) for case in cases])
    return RayClient("http://ray.test", token="tok", transport=transport), sent


def job(case):
    return client_replaying(case)[0].get("x")


def test_version():
    assert client_replaying("version")[0].version()["ray_version"] == VERSION


def test_submit_uploads_a_missing_package_then_posts_once():
    client, sent = client_replaying("package_get_missing", "package_put", "submit_ok")
    assert client.submit(SPEC) == "fixture-ok"
    assert [r.method for r in sent] == ["GET", "PUT", "POST"]
    assert sent[2].url.path == "/api/jobs/"


def test_a_present_package_is_not_uploaded_again():
    client, sent = client_replaying("package_get_present", "submit_ok", "submit_exit3")
    client.submit(SPEC)
    client.submit(normalize_spec({"script": SPEC["script"], "identity": "fixture-exit3"}))
    assert [r.method for r in sent] == ["GET", "POST", "POST"]


def test_reused_submission_id_returns_the_existing_job():
    # Ray's error text is read once the server has answered /api/version as Ray does (asked then).
    client, sent = client_replaying("package_get_present", "submit_duplicate", "version")
    assert client.submit(SPEC) == "fixture-ok"
    assert [(r.method, r.url.path) for r in sent][1:] == [("POST", "/api/jobs/"), ("GET", "/api/version")]


@pytest.mark.parametrize("case, version_answer, error", [
    ("submit_duplicate", "version", AlreadyExists),
    ("submit_bad_field", "version", Rejected),
    ("token_missing_submit", "token_missing", AuthFailed),
])
def test_submit_errors_are_typed(case, version_answer, error):
    client = client_replaying(case, version_answer)[0]
    with pytest.raises(error):
        client.call("POST", "/api/jobs/", "submit", "job", "x", json={}, idempotent=False)


def test_duplicate_message_comes_from_inside_the_traceback():
    client = client_replaying("submit_duplicate", "version")[0]
    with pytest.raises(AlreadyExists) as err:
        client.call("POST", "/api/jobs/", "submit", "job", "fixture-ok", json={}, idempotent=False)
    assert "Job with submission_id fixture-ok already exists" in str(err.value)


def test_a_client_that_has_read_the_version_reads_error_texts_without_asking_again():
    client, sent = client_replaying("version", "delete_running")
    client.version()
    with pytest.raises(Rejected) as err:
        client.delete("fixture-sleep")
    assert "non-terminal state RUNNING" in str(err.value)
    assert len(sent) == 2


def test_delete_of_a_running_job_is_rejected():
    with pytest.raises(Rejected) as err:
        client_replaying("delete_running", "version")[0].delete("fixture-sleep")
    assert "non-terminal state RUNNING" in str(err.value)


@pytest.mark.parametrize("case", ["token_wrong", "token_missing", "token_without_bearer"])
def test_refused_tokens_are_authentication_failures_without_the_token(case):
    # The version is refused too, so the server is not known to be Ray and its text is not shown.
    with pytest.raises(AuthFailed) as err:
        client_replaying(case, case)[0].list()
    assert "authentication failed" in str(err.value) and "tok " not in str(err.value)
    assert "authentication token" not in str(err.value)


@pytest.mark.parametrize("case", ["job_unknown", "job_deleted"])
def test_unknown_jobs_are_not_found_and_find_returns_none(case):
    with pytest.raises(NotFound) as err:
        client_replaying(case, "version")[0].get("x")
    assert "does not exist" in str(err.value)
    assert client_replaying(case, "version")[0].find("nope") is None


def test_a_few_identities_are_read_by_id_more_and_polls_from_one_list():
    """The lookup before a submit (an identity and its 0.1.0 alias) costs the same however many jobs
    Ray keeps; a batch past FEW_BY_ID and the controller's poll read the list once."""
    client, sent = client_replaying("job_succeeded", "job_unknown", "version")
    assert list(client.find_many(["fixture-ok", "nope"], names=["a", "a"])) == ["fixture-ok"]
    assert [r.url.path for r in sent] == ["/api/jobs/fixture-ok", "/api/jobs/nope", "/api/version"]
    many = ["fixture-ok", "fixture-gpu"] + ["nope-%d" % i for i in range(FEW_BY_ID)]
    for ask in (lambda client: client.find_many(many), lambda client: client.poll_many(many[:2])):
        client, sent = client_replaying("jobs_list")
        assert sorted(ask(client)) == ["fixture-gpu", "fixture-ok"]
        assert [r.url.path for r in sent] == ["/api/jobs/"]


@pytest.mark.parametrize("case, phase, exit_code, failure_class", [
    ("job_pending_or_running", None, None, None),
    ("job_running", "running", None, None),
    ("job_succeeded", "completed", 0, None),
    ("job_failed_exit3", "failed", 3, "non_zero_exit"),
    ("job_stopped", "cancelled", None, "cancelled"),
    ("job_negative_cpus", "failed", None, "rejected"),
    ("job_working_dir_missing", "failed", None, "rejected"),
    ("job_failed_start_timeout", "failed", None, "rejected"),
    ("job_working_dir_succeeded", "completed", 0, None),
])
def test_recorded_jobs_normalize(case, phase, exit_code, failure_class):
    found = job(case)
    if phase is None:
        assert found["phase"] in ("queued", "running")
    else:
        assert (found["phase"], found["exit_code"], found["failure_class"]) == (phase, exit_code, failure_class)
    assert found["job_id"] == recorded("ray", VERSION, case)["body"]["submission_id"]
    assert found["reason"] is None or "\n" not in found["reason"]


def test_ray_job_id_is_kept_apart_from_the_submission_id():
    found = job("job_ray_driver_succeeded")
    assert found["job_id"] == "fixture-driver" and found["ray_job_id"] == "02000000"


def test_a_pending_bridge_job_that_no_node_can_host_is_rejected():
    pending = recorded("ray", VERSION, "job_pending_impossible_gpu")
    metadata = {"bridge_identity": "fixture-gpu", "bridge_entrypoint_request": '{"entrypoint_num_gpus": 1}'}
    pending["body"] = dict(pending["body"], metadata=metadata)
    transport = replaying_transport("Ray", [pending, recorded("ray", VERSION, "nodes_detail")])[0]
    found = RayClient("http://ray.test", transport=transport).get("fixture-gpu")
    assert found["phase"] == "queued" and found["failure_class"] == "rejected"
    assert "GPU" in found["reason"]


def test_logs_are_tail_limited():
    full = client_replaying("logs_succeeded")[0].logs("fixture-ok")
    assert "hello ok" in full
    tail = client_replaying("logs_succeeded")[0].logs("fixture-ok", tail_lines=1)
    assert tail == full.splitlines(True)[-1]


def test_stop_of_a_finished_job_is_fine_and_of_an_unknown_one_not_found():
    client_replaying("stop_finished")[0].cancel("fixture-ok")
    with pytest.raises(NotFound):
        client_replaying("stop_unknown", "version")[0].cancel("nope")


def test_nodes_and_resources_use_the_real_resource_names():
    nodes = client_replaying("nodes_detail")[0].nodes()
    assert len(nodes) == 1 and nodes[0]["head"] and nodes[0]["state"] == "alive"
    assert nodes[0]["cpus"] == 2 and nodes[0]["gpus"] == 0
    assert nodes[0]["custom_resources"] == {"bridge_test": 1.0}
    resources = client_replaying("cluster_status_idle", "nodes_detail")[0].resources()
    assert resources["bridge_test"]["total"] == 1 and resources["CPU"]["total"] == 2
    assert "object_store_memory" in resources and "bridgeTest" not in resources
