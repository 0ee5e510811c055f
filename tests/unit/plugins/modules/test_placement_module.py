"""bridge.hpc.placement: candidates read once (or given as records), the choice and the reasons,
failures of one candidate, secrets kept out; the clients are replaced by fakes."""

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._backend import queue_record
from ansible_collections.bridge.hpc.plugins.module_utils._errors import ConnectionFailed
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS
from ansible_collections.bridge.hpc.plugins.modules import placement

from module_runner import Fail, run

pytestmark = pytest.mark.usefixtures("capture")

SCRIPT = "#!/bin/bash\ntrue\n"
SECRET = "s3cret-token"


class FakeClient(object):
    """What the module uses of a client: capacity(), warnings, transport.secrets, close()."""

    def __init__(self, capacity=None, error=None):
        self._capacity, self._error = capacity, error
        self.warnings = []
        self.calls = 0
        self.closed = False

        class Transport(object):
            secrets = [SECRET]
        self.transport = Transport()

    def capacity(self):
        self.calls += 1
        if self._error is not None:
            raise self._error
        return self._capacity

    def close(self):
        self.closed = True


def partition(name, **values):
    record = dict(state="UP", usable=True, max_time_minutes=30, max_nodes=1, cpus_per_node=2, memory_mb_per_node=4000,
                  gpus_per_node=0, pending=0, running=0)
    record.update(values)
    return queue_record(name=name, **record)


@pytest.fixture
def clients(monkeypatch):
    """{url: FakeClient} the patched from_options of every backend hands out, with the options it got."""
    made = {"by_url": {}, "options": []}

    def from_options(cls, get):
        made["options"].append(dict((name, get(name)) for name in ("url", "token", "user", "namespace")))
        return made["by_url"][get("url")]
    for backend in BACKENDS.values():
        monkeypatch.setattr(backend, "from_options", classmethod(from_options))
    return made


def slurm_capacity(*queues):
    return {"manager": "Slurm", "version": "26.05.5", "api_version": "v0.0.45", "queues": list(queues)}


def test_reads_each_candidate_once_and_places_where_the_job_fits(clients):
    small = FakeClient(slurm_capacity(partition("debug", default=True)))
    big = FakeClient(slurm_capacity(partition("gpu", gpus_per_node=4, gpu_types=["a100"])))
    clients["by_url"].update({"http://a": small, "http://b": big})
    outcome = run(placement, {"spec": {"script": SCRIPT, "resources": {"gpus": 2}}, "candidates": [
        {"name": "a", "backend": "slurm", "url": "http://a", "token": SECRET},
        {"name": "b", "backend": "slurm", "url": "http://b", "token": SECRET}]})
    assert not isinstance(outcome, Fail), outcome.result
    result = outcome.result
    assert result["changed"] is False
    assert result["placement"] == {"backend": "b", "type": "slurm", "queue": "gpu", "policy": "FirstFit", "rejected": [
        {"backend": "a", "queue": "debug",
         "reason": "resources.gpus: 2 GPUs per node requested; the nodes of 'debug' have at most 0"}],
        "found": False, "job_id": None}
    assert (small.calls, big.calls, small.closed, big.closed) == (1, 1, True, True)
    assert [c["name"] for c in result["candidates"]] == ["a", "b"]
    assert result["candidates"][0]["ready"] is True and result["candidates"][0]["version"] == "26.05.5"
    assert result["candidates"][1]["queues"][0]["gpu_types"] == ["a100"]
    assert clients["options"][0]["token"] == SECRET


def test_a_candidate_that_cannot_be_read_is_rejected_and_the_others_still_count(clients):
    clients["by_url"].update({
        "http://down": FakeClient(error=ConnectionFailed("refused", "list", "partitions", None, "Slurm", "http://down")),
        "http://up": FakeClient(slurm_capacity(partition("debug", default=True)))})
    outcome = run(placement, {"spec": {"script": SCRIPT}, "candidates": [
        {"name": "down", "backend": "slurm", "url": "http://down", "token": SECRET},
        {"name": "up", "backend": "slurm", "url": "http://up"}]}, check_mode=True)
    result = outcome.result
    assert result["placement"]["backend"] == "up"
    down = result["candidates"][0]
    assert down["ready"] is False and down["reason"] == "Failed to list partitions on Slurm at http://down: refused"
    assert result["placement"]["rejected"] == [{"backend": "down", "queue": None, "reason": "not ready: " + down["reason"]}]


def test_capacity_records_are_used_without_reading_anything(clients):
    outcome = run(placement, {"spec": {"script": SCRIPT, "resources": {"time_limit": 60}}, "policy": "LeastQueued",
                              "candidates": [{"name": "inventory", "backend": "slurm", "capacity": [
                                  {"name": "debug", "state": "UP", "usable": True, "max_time_minutes": 30},
                                  {"name": "long", "state": "UP", "usable": True, "pending": 4},
                                  {"name": "batch", "state": "UP", "usable": True, "pending": 1}]}]})
    result = outcome.result
    assert clients["options"] == []
    assert (result["placement"]["queue"], result["placement"]["policy"]) == ("batch", "LeastQueued")
    assert result["candidates"][0]["queues"][2]["cpus_per_node"] is None


def test_a_job_that_fits_nowhere_fails_with_every_reason(clients):
    clients["by_url"]["http://a"] = FakeClient(slurm_capacity(partition("debug", default=True)))
    outcome = run(placement, {"spec": {"script": SCRIPT, "resources": {"nodes": 2}}, "candidates": [
        {"name": "a", "backend": "slurm", "url": "http://a"},
        {"name": "r", "backend": "ray", "capacity": [{"name": None, "state": "ready", "usable": True}]}]})
    assert isinstance(outcome, Fail)
    result = outcome.result
    assert result["placement"]["backend"] is None
    assert result["msg"].startswith("the job fits none of the candidates: a/debug: resources.nodes: 2 nodes requested; "
                                    "'debug' allows at most 1 per job; r: resources.nodes: not supported by the Ray backend")


def test_queues_restrict_a_candidate(clients):
    clients["by_url"]["http://a"] = FakeClient(slurm_capacity(partition("debug", default=True), partition("batch")))
    outcome = run(placement, {"spec": {"script": SCRIPT}, "candidates": [
        {"name": "a", "backend": "slurm", "url": "http://a", "queues": ["batch"]}]})
    assert outcome.result["placement"]["queue"] == "batch"


@pytest.mark.parametrize("spec, field", [
    ({"resources": {"memory": "4X"}}, "spec.resources.memory"),
    ({"resources": {"cores": 2}}, "spec"),
    ({"script": None}, "spec"),
])
def test_a_bad_spec_fails_naming_the_field_before_any_read(clients, spec, field):
    params = dict({"script": SCRIPT}, **spec)
    if params["script"] is None:
        del params["script"]
    outcome = run(placement, {"spec": params, "candidates": [{"name": "a", "backend": "slurm", "url": "http://a"}]})
    assert isinstance(outcome, Fail) and outcome.result["error"]["field"] == field
    assert clients["options"] == []


def test_a_capacity_record_with_an_unknown_key_fails_naming_it(clients):
    outcome = run(placement, {"spec": {"script": SCRIPT}, "candidates": [
        {"name": "a", "backend": "slurm", "capacity": [{"name": "debug", "cpus": 4}]}]})
    assert isinstance(outcome, Fail) and outcome.result["error"]["field"] == "candidates[0].capacity[0].cpus"


def test_secrets_are_no_log_and_never_returned(clients):
    clients["by_url"]["http://a"] = FakeClient(error=ConnectionFailed(
        "refused", "list", "partitions", None, "Slurm", "http://a"))
    options = placement.candidate_options()
    assert all(options[name].get("no_log") for name in ("token", "password", "api_key", "kubeconfig_content"))
    outcome = run(placement, {"spec": {"script": SCRIPT}, "candidates": [
        {"name": "a", "backend": "slurm", "url": "http://a", "token": SECRET}]})
    assert SECRET not in repr(outcome.result)


def test_the_candidate_options_are_every_backends_connection_options():
    options = placement.candidate_options()
    connection = set()
    for backend in BACKENDS.values():
        connection.update(backend.connection_options())
    assert set(options) == connection | {"name", "backend", "queues", "capacity"}
    documented = placement.DOCUMENTATION.split("    suboptions:\n", 1)[1].split("\n  identity:", 1)[0]
    assert sorted(line.strip()[:-1] for line in documented.splitlines()
                  if line.startswith("      ") and not line.startswith("       ")) == sorted(options)


def test_a_job_with_the_identity_already_somewhere_is_placed_there(clients):
    free = FakeClient(slurm_capacity(partition("debug", default=True)))
    busy = FakeClient(slurm_capacity(partition("batch", usable=False, state="DOWN")))
    looked_up = []

    def find(identity, name=None):
        looked_up.append(identity)
        return {"job_id": "87", "partition": "batch"} if len(looked_up) == 2 else None
    for client in (free, busy):
        client.find = find
    clients["by_url"].update({"http://free": free, "http://busy": busy})
    outcome = run(placement, {"spec": {"script": SCRIPT}, "identity": "wf.step", "candidates": [
        {"name": "free", "backend": "slurm", "url": "http://free"},
        {"name": "busy", "backend": "slurm", "url": "http://busy"}]})
    assert looked_up == ["wf.step", "wf.step"]
    assert outcome.result["placement"] == {"backend": "busy", "type": "slurm", "queue": "batch", "policy": "FirstFit",
                                           "rejected": [], "found": True, "job_id": "87"}


def test_without_a_job_carrying_the_identity_capacity_decides(clients):
    client = FakeClient(slurm_capacity(partition("debug", default=True)))
    client.find = lambda identity, name=None: None
    clients["by_url"]["http://a"] = client
    outcome = run(placement, {"spec": {"script": SCRIPT}, "identity": "wf.step", "candidates": [
        {"name": "a", "backend": "slurm", "url": "http://a"}]})
    assert outcome.result["placement"]["found"] is False and outcome.result["placement"]["queue"] == "debug"


def test_candidate_names_are_unique(clients):
    outcome = run(placement, {"spec": {"script": SCRIPT}, "candidates": [
        {"name": "a", "backend": "slurm", "capacity": []}, {"name": "a", "backend": "ray", "capacity": []}]})
    assert isinstance(outcome, Fail) and outcome.result["error"]["field"] == "candidates[1].name"
