"""The status writer against the real kube-apiserver of tools/kube-control-plane.sh.

The fix of a phase that went back (Running read back as Queued) rests on one apiserver fact: a
merge patch of the status subresource that names a resourceVersion is refused with 409 when the
object has changed since. Checked here, and that the writer then writes its observation over the
stored status, not over the stale one it was given.
"""

import collections
import os
import sys

import kubernetes
import pytest

from conftest import REPO
from test_controller_watch import GROUP, PLURAL, VERSION, Cluster, kube, namespace  # noqa: F401 pylint: disable=unused-import

sys.path.insert(0, os.path.join(REPO, "controller"))

from bridge_controller.kube import Conflict, KubeApi  # noqa: E402  pylint: disable=wrong-import-position
from bridge_controller.writer import Writer  # noqa: E402  pylint: disable=wrong-import-position

RUNNING = {"job_id": 7, "phase": "running", "native_state": "RUNNING"}


def test_a_status_from_a_stale_bridgejob_is_refused_then_written_over_the_stored_one(kube, namespace):  # noqa: F811 pylint: disable=redefined-outer-name
    admin = kube[1]
    Cluster(admin, namespace).create("stale")
    api = KubeApi(admin)
    stats = collections.Counter()
    writer = Writer(api, lambda: True, lambda name, amount=1: stats.update({name: amount}))
    created = kubernetes.client.CustomObjectsApi(admin).get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "stale")
    stale = writer.status(created, job=dict(RUNNING, phase="queued", native_state="PENDING"), reachable=True, submitted=True)
    writer.status(stale, job=RUNNING, reachable=True)
    assert api.read(stale)["status"]["phase"] == "Running"

    with pytest.raises(Conflict):
        api.patch_status(stale, {"phase": "Queued"})
    written = writer.status(stale, reachable=False, backend_error={"type": "ConnectionFailed", "message": "Connection refused"})
    stored = api.read(stale)
    reachable = [c for c in stored["status"]["conditions"] if c["type"] == "BackendReachable"][0]
    assert stored["status"]["phase"] == "Running" and reachable["status"] == "False"
    assert written["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert stats["status_conflicts"] == 1
