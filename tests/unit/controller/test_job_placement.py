"""spec.placement: the plan's `place`, the candidates from the catalog, the recorded choice, and the
exactly-once order (the submit only from the watch event that brings status.placement)."""

import pytest

from bridge_controller import placement
from bridge_controller.executor import PLACEMENT_RETRY, Executor
from bridge_controller.plan import FINALIZER, plan
from bridge_controller.spec import job_params

from fake_backend import FakeBackend
from fakes import FakeCatalog, FakeKube, FakeRunner, backend_object, queue_record
from test_executor import LaggingWatch, RecordingQueue, bridgejob, conditions, settle


def placed_job(name, candidates=None, selector=None, policy=None, **spec):
    job = bridgejob(name, **spec)
    del job["spec"]["backend"]
    body = {"candidates": candidates} if candidates is not None else {"selector": selector or {}}
    if policy:
        body["policy"] = policy
    job["spec"]["placement"] = body
    return job


def candidate(name, kind="BridgeBackend", queues=None):
    return dict({"kind": kind, "name": name}, **({"queues": queues} if queues else {}))


def setup(catalog, watch=False):
    kube = FakeKube(secrets={"ns/creds": {"user": "u", "token": "t"}})
    backend = FakeBackend(progression=("queued", "running"))
    queue = RecordingQueue()
    cache = LaggingWatch(kube) if watch else kube
    executor = Executor(kube, cache, FakeRunner(backend), queue, clock=lambda: 1000.0, catalog=catalog)
    if watch:
        cache.executor = executor
    else:
        kube.listeners.append(executor.observe)
    return kube, backend, queue, executor, cache


def small_and_gpu():
    return FakeCatalog([
        backend_object("small", queues=[queue_record("debug", default=True, gpusPerNode=0, maxTimeMinutes=30)]),
        backend_object("gpu", kind="ClusterBridgeBackend",
                       queues=[queue_record("gpu", default=True, gpusPerNode=4, gpuTypes=["a100"]),
                               queue_record("long", gpusPerNode=0, maxTimeMinutes=10080, pending=0)]),
    ])


# ------------------------------------------------------------------ the plan

@pytest.mark.parametrize("status, spec, actions", [
    ({}, {}, ("place",)),
    ({}, {"cancel": True}, ("cancel_unplaced",)),
    ({"placement": {"policy": "FirstFit", "rejected": []}, "phase": "Failed"}, {}, ()),
    ({"placement": {"backend": {"kind": "BridgeBackend", "name": "small"}, "type": "slurm"}}, {}, ("add_finalizer",)),
])
def test_place_comes_before_anything_else_and_only_once(status, spec, actions):
    job = placed_job("a", [candidate("small")], **spec)
    job["metadata"]["finalizers"] = []
    job["status"] = status
    assert plan(job) == actions


def test_a_placed_job_goes_on_as_one_that_names_its_backend():
    job = placed_job("a", [candidate("small")])
    job["metadata"]["finalizers"] = [FINALIZER]
    job["status"] = {"placement": {"backend": {"kind": "BridgeBackend", "name": "small"}, "type": "slurm", "queue": "debug"}}
    assert plan(job) == ("submit",)
    assert job_params(job)["queue"] == "debug", "the chosen queue is the job's when its spec names none"
    job["spec"]["queue"] = "other"
    assert job_params(job)["queue"] == "other"


# ------------------------------------------------------------------ candidates and the decision

def no_refusal(_found):
    return None


def test_first_fit_takes_the_first_candidate_that_fits_with_the_reasons_of_the_others():
    job = placed_job("a", [candidate("small"), candidate("gpu", "ClusterBridgeBackend")], resources={"gpus": 2})
    decision = placement.decide(job, small_and_gpu(), job_params(job, None), no_refusal, now="2026-12-03T18:00:00Z")
    assert decision.placement["backend"] == {"kind": "ClusterBridgeBackend", "name": "gpu"}
    assert (decision.placement["type"], decision.placement["queue"], decision.placement["policy"]) == ("slurm", "gpu", "FirstFit")
    assert decision.placement["placedTime"] == "2026-12-03T18:00:00Z"
    small = [r for r in decision.placement["rejected"] if r["backend"] == "BridgeBackend/small"]
    assert [r["queue"] for r in small] == ["debug"] and "resources.gpus" in small[0]["reason"]
    assert decision.placed == (True, "Placed", "FirstFit chose ClusterBridgeBackend/gpu queue gpu")


def test_least_queued_takes_the_fitting_queue_with_the_fewest_pending():
    catalog = FakeCatalog([backend_object("busy", queues=[queue_record("q", default=True, pending=40)]),
                           backend_object("calm", queues=[queue_record("q", default=True, pending=2)])])
    job = placed_job("a", [candidate("busy"), candidate("calm")], policy="LeastQueued")
    decision = placement.decide(job, catalog, job_params(job, None), no_refusal)
    assert decision.placement["backend"]["name"] == "calm" and decision.placement["policy"] == "LeastQueued"


def test_candidate_queues_restrict_where_a_candidate_may_place():
    job = placed_job("a", [candidate("gpu", "ClusterBridgeBackend", queues=["long"])])
    decision = placement.decide(job, small_and_gpu(), job_params(job, None), no_refusal)
    assert decision.placement["queue"] == "long"


def test_a_selector_finds_the_namespaces_own_backends_first_then_the_cluster_ones_that_admit_it():
    labels = {"site": "hpc"}
    catalog = FakeCatalog([
        backend_object("zeta", labels=labels, queues=["q"]),
        backend_object("alpha", kind="ClusterBridgeBackend", labels=labels, queues=["q"]),
        backend_object("beta", labels=labels, queues=["q"]),
        backend_object("theirs", namespace="other", labels=labels, queues=["q"]),
        backend_object("unlabelled", queues=["q"]),
        backend_object("closed", kind="ClusterBridgeBackend", labels=labels, queues=["q"],
                       spec={"namespaceSelector": {"matchLabels": {"team": "b"}}}),
    ], namespaces={"ns": {"team": "a"}})
    job = placed_job("a", selector={"matchLabels": labels})

    def refusal(found):
        return ("NamespaceNotAllowed", "no") if found["metadata"]["name"] == "closed" else None

    entries, refs, waits = placement.candidates(job, catalog, refusal)
    assert [entry["name"] for entry in entries] == ["BridgeBackend/beta", "BridgeBackend/zeta", "ClusterBridgeBackend/alpha"]
    assert refs["ClusterBridgeBackend/alpha"] == {"kind": "ClusterBridgeBackend", "name": "alpha"} and not waits
    expressions = {"matchExpressions": [{"key": "site", "operator": "In", "values": ["hpc"]},
                                        {"key": "retired", "operator": "DoesNotExist"}]}
    assert placement.selects(expressions, labels) and not placement.selects(expressions, dict(labels, retired="1"))


def test_an_explicit_candidate_the_namespace_may_not_use_is_rejected_with_why():
    job = placed_job("a", [candidate("small"), candidate("gpu", "ClusterBridgeBackend")])

    def refusal(found):
        return ("NamespaceNotAllowed", "namespace 'ns' may not use it") if found["kind"] == "ClusterBridgeBackend" else None

    decision = placement.decide(job, small_and_gpu(), job_params(job, None), refusal)
    assert decision.placement["backend"]["name"] == "small"
    job = placed_job("b", [candidate("gpu", "ClusterBridgeBackend")])
    decision = placement.decide(job, small_and_gpu(), job_params(job, None), refusal)
    assert decision.placed[1] == "Unplaceable" and "may not use it" in decision.message


# ------------------------------------------------------------------ the executor

def test_the_choice_is_written_then_the_job_is_submitted_there_with_the_chosen_queue():
    kube, backend, queue, executor, _cache = setup(small_and_gpu())
    kube.create(placed_job("a", [candidate("small"), candidate("gpu", "ClusterBridgeBackend")], resources={"gpus": 1}))
    settle(executor, queue)
    obj = kube.objects["ns/a"]
    status = obj["status"]
    assert status["placement"]["backend"] == {"kind": "ClusterBridgeBackend", "name": "gpu"}
    assert conditions(obj)["Placed"]["status"] == "True" and conditions(obj)["Placed"]["reason"] == "Placed"
    assert status["backend"] == {"kind": "ClusterBridgeBackend", "name": "gpu", "type": "slurm", "url": "http://gpu:6820"}
    assert status["jobId"] and FINALIZER in obj["metadata"]["finalizers"]
    assert [call[:2] for call in executor.runner.calls] == [("submit", "http://gpu:6820")]
    assert backend.submits[0]["queue"] == "gpu"
    assert executor.stats["placements"] == 1 and executor.stats["placement_seconds"] >= 0
    assert "placement_seconds" in executor.stats


def test_nothing_is_submitted_before_the_recorded_choice_is_in_the_cache_and_it_is_made_once():
    kube, backend, queue, executor, watch = setup(small_and_gpu(), watch=True)
    kube.create(placed_job("a", [candidate("small")]))
    watch.deliver()
    settle(executor, queue)
    stored = kube.objects["ns/a"]
    assert stored["status"]["placement"]["backend"]["name"] == "small" and "placement" not in watch.get("ns/a").get("status", {})
    first_choice = stored["status"]["placement"]
    queue.keys.append("ns/a")                # planned again from the stale cache (a resync, a retry)
    settle(executor, queue)
    assert not executor.runner.calls and not backend.jobs, "no identity is looked up before the choice is recorded"
    assert kube.objects["ns/a"]["status"]["placement"] == first_choice, "the recorded choice is never replaced"
    assert executor.stats["placements"] == 1
    assert not queue.keys, "its own write's event, not a loop, plans it next"
    for _step in ("placed", "finalizer", "submitted"):
        watch.deliver()
        settle(executor, queue)
    assert [call[:2] for call in executor.runner.calls] == [("submit", "http://small:6820")]
    assert len(backend.submits) == 1 and kube.objects["ns/a"]["status"]["jobId"]


def test_a_placed_job_never_moves_when_the_candidates_change():
    catalog = small_and_gpu()
    kube, backend, queue, executor, _cache = setup(catalog)
    kube.create(placed_job("a", [candidate("small"), candidate("gpu", "ClusterBridgeBackend")]))
    settle(executor, queue)
    assert kube.objects["ns/a"]["status"]["placement"]["backend"]["name"] == "small"
    catalog.put(backend_object("small", ready=False))
    settle(executor, queue)
    executor.poll_due(now=2000.0)
    assert kube.objects["ns/a"]["status"]["placement"]["backend"]["name"] == "small"
    assert {call[1] for call in executor.runner.calls} == {"http://small:6820"}
    assert executor.stats["placements"] == 1


def test_a_job_that_fits_nowhere_fails_as_rejected_with_every_reason():
    catalog = small_and_gpu()
    catalog.put(backend_object("down", ready=False))
    kube, backend, queue, executor, _cache = setup(catalog)
    kube.create(placed_job("a", [candidate("small"), candidate("down"), candidate("gpu", "ClusterBridgeBackend")],
                           resources={"gpus": 8}))
    settle(executor, queue)
    obj = kube.objects["ns/a"]
    status, failed = obj["status"], conditions(obj)["Failed"]
    assert status["phase"] == "Failed" and status["failureClass"] == "rejected"
    assert failed["reason"] == "Unplaceable" and conditions(obj)["Placed"]["reason"] == "Unplaceable"
    for words in ("BridgeBackend/small queue debug", "BridgeBackend/down", "connection refused", "ClusterBridgeBackend/gpu queue gpu"):
        assert words in failed["message"]
    assert "backend" not in status["placement"] and len(status["placement"]["rejected"]) == 4
    assert not obj["metadata"]["finalizers"] and not executor.runner.calls
    assert executor.stats["placements_unplaceable"] == 1 and not queue.later


def test_status_placement_is_bounded():
    queues = [queue_record("q%02d" % n + "x" * 300, gpusPerNode=0) for n in range(60)]
    catalog = FakeCatalog([backend_object("wide", queues=queues, spec={"url": "http://wide:6820"})])
    kube, backend, queue, executor, _cache = setup(catalog)
    kube.create(placed_job("a", [candidate("wide")], resources={"gpus": 1}))
    settle(executor, queue)
    placed = kube.objects["ns/a"]["status"]["placement"]
    assert len(placed["rejected"]) == placement.MAX_REJECTED
    assert all(len(item["reason"]) <= placement.MAX_REASON for item in placed["rejected"])
    assert len(kube.objects["ns/a"]["status"]["reason"]) <= placement.MAX_MESSAGE


def test_candidates_never_probed_are_waited_for_and_a_probe_plans_the_job_at_once():
    catalog = FakeCatalog([backend_object("fresh", ready=None)])
    kube, backend, queue, executor, _cache = setup(catalog)
    kube.create(placed_job("a", [candidate("fresh")]))
    settle(executor, queue)
    obj = kube.objects["ns/a"]
    placed = conditions(obj)["Placed"]
    assert (placed["status"], placed["reason"]) == ("False", "WaitingForProbe") and "BridgeBackend/fresh" in placed["message"]
    assert obj["status"]["phase"] == "Pending" and "placement" not in obj["status"]
    assert queue.later == [("ns/a", PLACEMENT_RETRY)] and executor.stats["placements_waiting"] == 1
    catalog.put(backend_object("fresh", queues=["q"]))
    assert queue.keys == ["ns/a"]
    settle(executor, queue)
    assert kube.objects["ns/a"]["status"]["placement"]["backend"]["name"] == "fresh"
    assert kube.objects["ns/a"]["status"]["jobId"]


def test_a_candidate_not_in_the_catalog_and_an_empty_selector_wait_rather_than_fail():
    kube, backend, queue, executor, _cache = setup(FakeCatalog())
    kube.create(placed_job("a", [candidate("later")]))
    kube.create(placed_job("b", selector={"matchLabels": {"site": "none"}}))
    settle(executor, queue)
    assert "BridgeBackend/later not found" in conditions(kube.objects["ns/a"])["Placed"]["message"]
    assert "selector" in conditions(kube.objects["ns/b"])["Placed"]["message"]
    assert {obj["status"]["phase"] for obj in kube.objects.values()} == {"Pending"}


def test_a_job_cancelled_before_placement_is_cancelled_without_a_backend():
    kube, backend, queue, executor, _cache = setup(FakeCatalog([backend_object("fresh", ready=None)]))
    kube.create(placed_job("a", [candidate("fresh")], cancel=True))
    settle(executor, queue)
    assert kube.objects["ns/a"]["status"]["phase"] == "Cancelled" and not executor.runner.calls


def test_a_script_from_a_config_map_is_read_before_placing_and_waited_for():
    kube, backend, queue, executor, _cache = setup(small_and_gpu())
    job = placed_job("a", [candidate("small")], scriptFrom={"configMapKeyRef": {"name": "scripts", "key": "run.sh"}})
    del job["spec"]["script"]
    kube.create(job)
    settle(executor, queue)
    obj = kube.objects["ns/a"]
    assert conditions(obj)["Submitted"]["reason"] == "ScriptNotFound" and "placement" not in obj["status"]
    kube.config_maps["ns/scripts"] = {"run.sh": "#!/bin/bash\necho placed\n"}
    queue.keys.append("ns/a")
    settle(executor, queue)
    assert kube.objects["ns/a"]["status"]["placement"]["backend"]["name"] == "small"
    assert [spec["script"] for spec in backend.submits] == ["#!/bin/bash\necho placed\n"]
