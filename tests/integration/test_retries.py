"""Retries by failure class (`retry`) on the real services: Slurm 22.05, 24.11 and 26.05 through
`ansible localhost -m bridge.hpc.slurm_job` with the cluster's env file, and the Kubernetes node
through the collection's lifecycle (_jobs.ensure_present) with the kubernetes client.

Covered: a real Slurm time limit (1 minute, the script sleeps longer) retried on `timeout`, its
attempt .1 completing (on 26.05); `exit 3` retried only when `non_zero_exit` is listed (each
version); a job `scontrol requeue` puts back in the queue (test_retries_requeue.py); a real OOM kill of a Pod with a 32Mi memory limit,
retried as `out_of_memory`; an Indexed Job whose index 7 fails, whose attempt .1 runs index 7
alone. A Slurm script tells its attempts apart by a marker file it leaves on the first run (each
Slurm cluster runs its jobs on one host, or in one chroot).
"""

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from conftest import COLLECTIONS, RUN, SLURM_VERSIONS, adhoc_with_env_file, require_kube_node, require_slurm

sys.path.insert(0, COLLECTIONS)

IMAGE = {"kubernetes": {"image": "localhost/bridge/busybox:latest", "image_pull_policy": "Never"}}


def second_run_succeeds(marker, first):
    """A script whose first run does `first` after leaving `marker`, and whose later runs exit 0."""
    return "#!/bin/bash\nif [ -e %s ]; then echo again; exit 0; fi\ntouch %s\n%s\n" % (marker, marker, first)


def slurm_job(version, timeout=120, **args):
    """The result of bridge.hpc.slurm_job with `args` (failed or not) on cluster `version`."""
    path = "%s/slurm-%s/env" % (RUN, version)
    done = adhoc_with_env_file(path, "bridge.hpc.slurm_job", "-a", json.dumps(args), timeout=timeout)
    head, _sep, body = done.stdout.partition(" => ")
    assert body, done.stdout + done.stderr
    result = json.loads(body)
    result["_head"] = head
    return result


def failed(result):
    """Whether the task failed (ansible prints "localhost | FAILED! => ...")."""
    return "FAILED" in result["_head"]


def slurm_client(values):
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

    return SlurmClient(values["SLURM_URL"], user=values.get("SLURM_USER"), token=values.get("SLURM_JWT"))


def marker(tag):
    return "/tmp/bridge-retry-%s-%s" % (tag, uuid.uuid4().hex[:10])


def base_args(identity, script, **extra):
    args = dict(identity=identity, script=script, stdout="/dev/null", working_directory="/tmp", queue="debug",
                poll_interval=2)
    args.update(extra)
    return args


def attempts_of(result):
    return [(a["attempt"], a["identity"], a["phase"], a["failure_class"]) for a in result["job"]["attempts"]]


# One version: a time limit is at least Slurm's minute, and how each version's job ends is what the
# exit-3 test below crosses with the versions.
@pytest.mark.parametrize("version", SLURM_VERSIONS[-1:])
def test_a_slurm_time_limit_is_retried_on_timeout_and_the_next_attempt_completes(version):
    require_slurm(version)
    identity = "retry-timeout-%s" % uuid.uuid4().hex[:8]
    args = base_args(identity, second_run_succeeds(marker("timeout"), "sleep 600"), resources={"time_limit": 1},
                     retry={"limit": 2, "classes": ["timeout"]}, wait=True, wait_timeout=420)
    started = time.monotonic()
    result = slurm_job(version, timeout=480, **args)
    took = time.monotonic() - started
    assert not failed(result), result
    assert result["phase"] == "completed" and result["identity"] == identity, result
    assert attempts_of(result) == [(0, identity, "failed", "timeout"), (1, identity + ".1", "completed", None)]
    first, second = result["job"]["attempts"]
    assert first["job_id"] != second["job_id"] and result["job_id"] == second["job_id"]
    print("Slurm %s: attempt 0 (job %s) timed out, attempt 1 (job %s) completed; %.0f s in all"
          % (version, first["job_id"], second["job_id"], took))
    # Run again: every attempt is found by its identity, nothing is submitted.
    again = slurm_job(version, **dict(args, wait=False))
    assert again["changed"] is False and again["job_id"] == second["job_id"], again


@pytest.mark.parametrize("version", SLURM_VERSIONS)
def test_exit_3_is_retried_only_when_non_zero_exit_is_listed(version):
    require_slurm(version)
    tag = uuid.uuid4().hex[:8]
    not_listed = slurm_job(version, **base_args("retry-exit-%s-a" % tag, second_run_succeeds(marker("exit-a"), "exit 3"),
                                                retry={"limit": 2}, wait=True, wait_timeout=120))
    assert failed(not_listed), not_listed
    assert not_listed["failure_class"] == "non_zero_exit" and not_listed["exit_code"] == 3, not_listed
    assert attempts_of(not_listed) == [(0, "retry-exit-%s-a" % tag, "failed", "non_zero_exit")]
    identity = "retry-exit-%s-b" % tag
    listed = slurm_job(version, **base_args(identity, second_run_succeeds(marker("exit-b"), "exit 3"),
                                            retry={"limit": 2, "classes": ["non_zero_exit"]}, wait=True, wait_timeout=120))
    assert not failed(listed) and listed["phase"] == "completed", listed
    assert attempts_of(listed) == [(0, identity, "failed", "non_zero_exit"), (1, identity + ".1", "completed", None)]
    assert listed["job"]["attempts"][0]["exit_code"] == 3


def scontrol(values, version, *args):
    root = values.get("SLURM_ROOT") or ""
    conf = ("/var/lib/bridge-slurm/etc/slurm.conf" if root else
            os.path.join(RUN, "slurm-%s" % version, "slurm", "etc", "slurm.conf"))
    return subprocess.run(["chroot", root or "/", "env", "SLURM_CONF=%s" % conf, "scontrol"] + list(args),
                          capture_output=True, text=True, timeout=30, check=False)


def test_an_oom_kill_on_the_kubernetes_node_is_retried_as_out_of_memory():
    node = require_kube_node()
    from kubernetes import client as k8s
    from kubernetes import config

    from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_present
    from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
    from ansible_collections.bridge.hpc.plugins.module_utils.k8s.client import K8sClient

    from conftest import kube_namespace

    namespace = kube_namespace(node, "retry-oom")
    core = k8s.CoreV1Api(config.new_client_from_config(node["KUBECONFIG"]))
    try:
        client = K8sClient.from_options({"kubeconfig": node["KUBECONFIG"], "namespace": namespace}.get)
        # dd's one 64 MiB buffer, filled from /dev/zero, passes the container's 32 MiB limit.
        spec = normalize_spec({"script": "#!/bin/sh\nexec dd if=/dev/zero of=/dev/null bs=64M count=1\n",
                               "identity": "oom-%s" % uuid.uuid4().hex[:8], "backend_options": IMAGE,
                               "resources": {"memory": "32M", "cpus_per_task": 1},
                               "retry": {"limit": 1, "classes": ["out_of_memory"]}}, client)
        result = ensure_present(client, spec, wait=True, wait_timeout=300, poll_interval=2)
        attempts = result["job"]["attempts"]
        assert [(a["attempt"], a["identity"], a["failure_class"]) for a in attempts] == [
            (0, spec["identity"], "out_of_memory"), (1, spec["identity"] + ".1", "out_of_memory")], result
        assert result["failed"] is True and "out_of_memory" in result["msg"], result
        assert "OOMKilled" in (result["job"]["reason"] or ""), result["job"]
        print("Kubernetes: %s" % result["msg"])
    finally:
        core.delete_namespace(namespace)


def test_an_indexed_job_runs_only_its_failed_index_again():
    from kubernetes import client as k8s
    from kubernetes import config

    from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_present

    from conftest import kube_namespace
    from test_k8s_arrays import SCRIPT, backend, logs_by_index, spec

    node = require_kube_node()
    namespace = kube_namespace(node, "retry-array")
    api = config.new_client_from_config(node["KUBECONFIG"])
    try:
        client = backend(node, namespace)
        identity = "sweep-%s" % uuid.uuid4().hex[:6]
        job_spec = spec(client, node, identity, script=SCRIPT, array={"indexes": "3,7,20-22", "parallelism": 2},
                        retry={"limit": 1, "classes": ["non_zero_exit"]})
        result = ensure_present(client, job_spec, wait=True, wait_timeout=300, poll_interval=2)
        job = result["job"]
        assert [(a["attempt"], a["identity"], a["phase"]) for a in job["attempts"]] == [
            (0, identity, "failed"), (1, identity + ".1", "failed")], result
        # Attempt 1 is an array of index 7 alone, which sees its own index again; the job's array
        # record covers all five indexes, each as the attempt that ran it last left it.
        assert [(a["indexes"], a["failed_indexes"]) for a in job["attempts"]] == [("3,7,20-22", "7"), ("7", "7")]
        array = job["array"]
        assert (array["indexes"], array["size"], array["failed_indexes"], array["retried_indexes"]) == ("3,7,20-22", 5, "7", "7")
        assert array["counts"] == {"queued": 0, "running": 0, "completed": 4, "failed": 1, "cancelled": 0}
        assert [(f["index"], f["attempt"]) for f in array["failures"]] == [(7, 1)]
        assert result["failed"] is True and "exit code 7" in result["msg"], result["msg"]
        logs = logs_by_index(api, namespace, job["job_id"])
        assert list(logs.values()) == ["index 7 completion 0\n"], logs
        print("Kubernetes array: %s" % result["msg"])
    finally:
        k8s.CoreV1Api(api).delete_namespace(namespace)


# Tasks 13, 42 and 77 exit 3 the first time they run (a marker per index in a directory of the
# test's own), 0 after; every task checks it got its index (else exit 9).
ARRAY_SCRIPT = """#!/bin/bash
[ "$BRIDGE_ARRAY_INDEX" = "$SLURM_ARRAY_TASK_ID" ] || exit 9
case $BRIDGE_ARRAY_INDEX in
13|42|77) mkdir -p %(dir)s
  if [ ! -e %(dir)s/$BRIDGE_ARRAY_INDEX ]; then touch %(dir)s/$BRIDGE_ARRAY_INDEX; exit 3; fi ;;
esac
exit 0
"""
ARRAY_TIMEOUT = 600


def poll_array(client, job_id, timeout=ARRAY_TIMEOUT):
    """Poll an array with client.get until it ends, each poll one request; (job, polls)."""
    polls, deadline = 0, time.monotonic() + timeout
    while True:
        sent = client.requests_sent
        job = client.get(job_id)
        assert client.requests_sent - sent == 1, "a poll of array %s took %d requests" % (job_id, client.requests_sent - sent)
        polls += 1
        if job["terminal"]:
            return job, polls
        assert job["phase"] in ("queued", "running"), job
        assert job["array"]["counts"]["running"] <= 8, job["array"]
        assert time.monotonic() < deadline, "array %s still %s: %s" % (job_id, job["phase"], job["array"]["counts"])
        time.sleep(1)


@pytest.mark.parametrize("version", SLURM_VERSIONS)
def test_a_100_task_slurm_array_runs_its_three_failed_tasks_again_alone(version):
    values = require_slurm(version)
    identity = "retry-array-%s" % uuid.uuid4().hex[:8]
    script = ARRAY_SCRIPT % {"dir": marker("array")}
    args = dict(identity=identity, script=script, stdout="/dev/null", working_directory="/tmp", queue="debug",
                poll_interval=2, resources={"time_limit": 1, "memory": "64M"}, array={"indexes": "0-99", "parallelism": 8},
                retry={"limit": 1, "classes": ["non_zero_exit"]})
    client = slurm_client(values)
    try:
        client.api_version
        client.accounting_available()
        started = time.monotonic()
        first = slurm_job(version, **args)
        assert not failed(first) and first["changed"] is True, first
        assert first["rendered"]["job"]["array"] == "0-99%8"
        failed_job, polls_0 = poll_array(client, first["job_id"])
        took_0 = time.monotonic() - started
        assert failed_job["phase"] == "failed" and failed_job["array"]["failed_indexes"] == "13,42,77", failed_job["array"]
        assert failed_job["array"]["counts"]["completed"] == 97

        # Run again: attempt 1 is one array of the three failed indexes, under identity.1.
        started = time.monotonic()
        second = slurm_job(version, **args)
        assert not failed(second) and second["changed"] is True, second
        rendered = second["rendered"]["job"]
        assert rendered["array"] == "13,42,77%8" and rendered["comment"] == "bridge:%s.1 array=13,42,77" % identity, rendered
        retried_id = second["job_id"]
        assert retried_id != first["job_id"]
        retried, polls_1 = poll_array(client, retried_id)
        took_1 = time.monotonic() - started
        assert retried["identity"] == identity + ".1" and retried["phase"] == "completed", retried
        assert retried["array"]["indexes"] == "13,42,77" and retried["array"]["size"] == 3
        assert retried["array"]["counts"] == {"queued": 0, "running": 0, "completed": 3, "failed": 0, "cancelled": 0}
        sent = client.requests_sent
        listed = client.poll_many([identity + ".1"])
        assert client.requests_sent - sent == 1 and listed[identity + ".1"]["job_id"] == retried_id, listed

        # The task waits for nothing more: the job completed, every index counted once.
        final = slurm_job(version, **dict(args, wait=True, wait_timeout=120))
        assert not failed(final) and final["changed"] is False and final["phase"] == "completed", final
        job = final["job"]
        assert job["job_id"] == retried_id and final["identity"] == identity
        assert [(a["attempt"], a["identity"], a["phase"], a["failure_class"], a["indexes"], a["failed_indexes"])
                for a in job["attempts"]] == [(0, identity, "failed", "non_zero_exit", "0-99", "13,42,77"),
                                              (1, identity + ".1", "completed", None, "13,42,77", "")], job["attempts"]
        # This run's lookup reads the ended attempt 0 from accounting, which on Slurm 22.05 has no
        # exit code of an exit (docs/slurm.md, "Exit codes in accounting"); 24.11 and 26.05 give 3.
        assert job["attempts"][0]["exit_code"] == (None if version == "22.05" else 3)
        array = job["array"]
        assert (array["indexes"], array["size"], array["failed_indexes"], array["retried_indexes"]) == ("0-99", 100, "", "13,42,77")
        assert array["counts"] == {"queued": 0, "running": 0, "completed": 100, "failed": 0, "cancelled": 0}
        again = slurm_job(version, **args)
        assert again["changed"] is False and again["job_id"] == retried_id, again
        figures = (version, first["job_id"], took_0, polls_0, retried_id, took_1, polls_1)
        print("Slurm %s: 100-task array %s failed 13,42,77 after %.1f s (%d polls); attempt 1 (array %s, 13,42,77) "
              "completed after %.1f s (%d polls); 1 request per poll" % figures)
    finally:
        client.close()
