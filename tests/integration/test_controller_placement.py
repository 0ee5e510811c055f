"""BridgeJobs naming a backend object, or placed among candidates, on a real kube-apiserver and real Slurm 22.05.

The controller's parts run in this process as main.py wires them (watch, queue, workers, executor,
ansible-runner), with an in-memory catalog of backend objects in place of catalog.py's watch (the
BridgeBackend kinds are another part's): what is checked here is the BridgeJob side. Covered:
spec.backendRef -> the object's URL and Secret, Completed on Slurm, status.backend; spec.placement
-> status.placement recorded (with the reasons of the candidate not taken) before the job reaches
Slurm, in the chosen partition; a job that fits nowhere -> Failed Unplaceable with nothing
submitted; a backendRef to an object not there yet -> Pending BackendNotFound, then Completed once
it appears. The token is in no status or event.
"""

import copy
import os
import sys
import threading
import uuid

import pytest

from conftest import COLLECTIONS, REPO, require_slurm
from controller_support import GROUP, PLURAL, VERSION, install_crd, release_all, slurm_backend, slurm_namespace
from test_controller_e2e import kube, wait_for  # noqa: F401 pylint: disable=unused-import

sys.path.insert(0, os.path.join(REPO, "controller"))
sys.path.insert(0, COLLECTIONS)   # the controller imports the collection its playbooks run

from bridge_controller.executor import Executor  # noqa: E402  pylint: disable=wrong-import-position
from bridge_controller.kube import KubeApi  # noqa: E402  pylint: disable=wrong-import-position
from bridge_controller.queue import WorkQueue, run_workers  # noqa: E402  pylint: disable=wrong-import-position
from bridge_controller.runner import AnsibleRunner  # noqa: E402  pylint: disable=wrong-import-position
from bridge_controller.watch import BridgeJobWatcher  # noqa: E402  pylint: disable=wrong-import-position


class Catalog:
    """catalog.py's interface over objects this test puts in (a stand-in for its watch)."""

    def __init__(self):
        self.objects, self.callbacks, self.lock = {}, [], threading.Lock()

    def backend(self, kind, namespace, name):
        with self.lock:
            return copy.deepcopy(self.objects.get((kind, "" if kind == "ClusterBridgeBackend" else namespace, name)))

    def backends(self):
        with self.lock:
            return copy.deepcopy(list(self.objects.values()))

    def namespace_labels(self, name):
        return {"kubernetes.io/metadata.name": name}

    def serves(self, name):  # pylint: disable=unused-argument
        return True  # no --namespace-selector

    def subscribe_namespaces(self, callback):
        pass  # so none starts or stops being served

    def subscribe(self, callback):
        self.callbacks.append(callback)

    def put(self, obj):
        meta = obj["metadata"]
        with self.lock:
            self.objects[(obj["kind"], meta.get("namespace", ""), meta["name"])] = copy.deepcopy(obj)
        for callback in self.callbacks:
            callback("ADDED", copy.deepcopy(obj))


def queue(name, default=False, **values):
    record = {"name": name, "state": "UP", "usable": True, "default": default, "maxTimeMinutes": None, "maxNodes": 1,
              "cpusPerNode": 1, "memoryMbPerNode": None, "gpusPerNode": 0, "gpuTypes": [], "features": [],
              "qubits": None, "pending": 0, "running": 0}
    record.update(values)
    return record


def backend_object(kind, name, namespace, spec, ready, queues=()):
    meta = dict({"name": name}, **({"namespace": namespace} if kind == "BridgeBackend" else {}))
    condition = {"type": "Ready", "status": "True" if ready else "False", "reason": "Probed" if ready else "ConnectionFailed",
                 "message": "" if ready else "Failed to reach Slurm at http://127.0.0.1:1: connection refused"}
    return {"apiVersion": "bridge.dev/v1alpha1", "kind": kind, "metadata": meta, "spec": spec,
            "status": {"conditions": [condition], "queues": list(queues)}}


@pytest.fixture()
def site(kube, tmp_path):  # noqa: F811 pylint: disable=redefined-outer-name
    """A namespace with the Slurm Secret, the catalog, and the controller's parts running on it."""
    env, api_client = kube
    slurm = require_slurm("22.05")
    from kubernetes import client

    core, custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
    install_crd(api_client)   # again: the apiserver is shared, and another tree may have put its CRD back since
    namespace = "placement-%s" % uuid.uuid4().hex[:8]
    slurm_namespace(core, namespace, slurm)
    catalog = Catalog()
    work = WorkQueue(max_workers=4)
    runner = AnsibleRunner(os.path.join(REPO, "playbooks"), str(tmp_path / "runner"), collections_path=COLLECTIONS,
                           python=sys.executable, standby=())

    def observe(kind, obj):
        executor.observe(kind, obj)

    watcher = BridgeJobWatcher(custom, observe, namespace=namespace)
    executor = Executor(KubeApi(api_client), watcher, runner, work, batch_window=0.3, catalog=catalog)
    stopping = threading.Event()
    threads = [threading.Thread(target=watcher.run, daemon=True),
               threading.Thread(target=executor.run_batches, args=(stopping,), daemon=True),
               threading.Thread(target=executor.run_polls, args=(stopping,), daemon=True)]
    for thread in threads:
        thread.start()
    threads.extend(run_workers(work, executor.reconcile))
    try:
        yield slurm, namespace, catalog, custom, core, executor
    finally:
        stopping.set()
        executor.batches.wake()
        watcher.stop()
        work.shutdown(drain=False)
        threads[1].join(timeout=120)
        runner.close()
        release_all(custom, namespace, delete=True)
        core.delete_namespace(namespace)


def test_backend_refs_and_placement_run_on_the_chosen_slurm(site):  # pylint: disable=redefined-outer-name
    slurm, namespace, catalog, custom, core, executor = site
    spec = dict((key, value) for key, value in slurm_backend(slurm).items() if key != "type")
    spec["type"] = "slurm"
    catalog.put(backend_object("BridgeBackend", "slurm-a", namespace, spec, True,
                               [queue("debug", default=True), queue("batch")]))
    catalog.put(backend_object("ClusterBridgeBackend", "down", None, dict(spec, url="http://127.0.0.1:1"), False))

    def create(name, **where):
        body = {"apiVersion": "bridge.dev/v1alpha1", "kind": "BridgeJob", "metadata": {"name": name},
                "spec": dict(where, script="#!/bin/bash\necho %s\n" % name, pollInterval=2)}
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

    def read(name):
        return custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)

    def phase(wanted):
        return lambda obj: (obj.get("status") or {}).get("phase") == wanted

    create("by-ref", backendRef={"name": "slurm-a"})
    create("placed", placement={"candidates": [{"kind": "ClusterBridgeBackend", "name": "down"},
                                               {"name": "slurm-a", "queues": ["batch"]}]})
    create("too-big", placement={"candidates": [{"name": "slurm-a"}]}, resources={"gpus": 1})
    create("waits", backendRef={"name": "later"})

    by_ref = wait_for(lambda: read("by-ref"), phase("Completed"))
    assert by_ref["status"]["exitCode"] == 0
    # With the URL its job was submitted to, which later calls are pinned to.
    assert by_ref["status"]["backend"] == {"kind": "BridgeBackend", "name": "slurm-a", "type": "slurm",
                                           "url": slurm["SLURM_URL"]}

    placed = wait_for(lambda: read("placed"), phase("Completed"))
    placement = placed["status"]["placement"]
    assert placement["backend"] == {"kind": "BridgeBackend", "name": "slurm-a"} and placement["queue"] == "batch"
    assert [item["backend"] for item in placement["rejected"]] == ["ClusterBridgeBackend/down"]
    assert "connection refused" in placement["rejected"][0]["reason"]
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

    slurm_client = SlurmClient(slurm["SLURM_URL"], user=slurm["SLURM_USER"], token=slurm["SLURM_JWT"])
    assert slurm_client.get(placed["status"]["jobId"])["partition"] == "batch", "the chosen queue is the job's"

    too_big = wait_for(lambda: read("too-big"), phase("Failed"))
    failed = dict((c["type"], c) for c in too_big["status"]["conditions"])["Failed"]
    assert too_big["status"]["failureClass"] == "rejected" and failed["reason"] == "Unplaceable"
    assert "resources.gpus" in failed["message"] and "jobId" not in too_big["status"]
    assert not too_big["metadata"].get("finalizers"), "nothing was sent anywhere"

    waiting = wait_for(lambda: read("waits"), lambda obj: dict(
        (c["type"], c["reason"]) for c in (obj.get("status") or {}).get("conditions") or []).get("Submitted") == "BackendNotFound")
    assert waiting["status"]["phase"] == "Pending"
    catalog.put(backend_object("BridgeBackend", "later", namespace, spec, True, [queue("debug", default=True)]))
    assert wait_for(lambda: read("waits"), phase("Completed"))["status"]["exitCode"] == 0

    assert executor.stats["placements"] == 1 and executor.stats["placements_unplaceable"] == 1
    events = [event.message for event in core.list_namespaced_event(namespace).items]
    statuses = [read(name)["status"] for name in ("by-ref", "placed", "too-big", "waits")]
    assert slurm["SLURM_JWT"] not in repr(statuses) + repr(events)
