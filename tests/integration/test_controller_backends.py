"""The controller end to end on what test_controller_e2e.py leaves out: Ray, LSF, IBM Quantum, scriptFrom, the samples.

A real kube-apiserver, real Ray (tools/ray-cluster.sh), real Slurm 22.05 and the LSF Application
Center simulator (tools/lsf-pac.sh), one controller process for the module. Covered: Ray and LSF
BridgeJobs -> Completed with exit code 0, a failing script -> Failed with non_zero_exit and its exit
code, delete while running -> the job stopped (Ray STOPPED, LSF killed) and the CR released; on LSF,
every job submitted once and every poll one list request (the simulator's access log);
spec.scriptFrom.configMapKeyRef on Slurm -> Completed; a CR naming a ConfigMap (or key)
that is not there waits with a Submitted condition naming it, and runs once the ConfigMap is
created; deploy/samples/{slurm,ray,lsf,quantum}.yaml with the local URLs and credentials filled in run to
Completed. On IBM Quantum (tools/quantum-runtime.sh, spec.backend.iamUrl at its IAM): a sampler Bell
pair -> Completed with its counts in status.results, an estimator -> Completed with expectation
values, a paused device -> Failed rejected, delete of a Queued job -> cancelled at the service and the
CR released; every job submitted once, polls by the job list, each completed job's results read
once. No token, password or API key in any status, event, controller log or runner file.

The controller watches all namespaces but only BridgeJobs labelled with this module's run id
(--selector), so CRs of other runs sharing the apiserver are left alone; each test has its own
namespace. The LSF and Quantum simulators are this module's own (conftest.private_service, on free
ports): their access logs, which the tests count requests in, hold no other test's requests, and no
other test's job holds a device.
"""

import collections
import os
import signal
import subprocess
import sys
import uuid

import pytest

from conftest import (COLLECTIONS, REPO, private_service, ray_env, read_env_file, require_kube_node, require_lsf,
                      require_quantum, require_ray, require_slurm, slurm_env)
from controller_support import release_labelled, start_controller, tenant_namespace
from test_controller_e2e import GROUP, PLURAL, VERSION, free_port, kube, wait_for  # noqa: F401 pylint: disable=unused-import
from test_crd import manifests

RUN_LABEL = "bridge.dev/e2e-run"

# secrets: every token, password and API key handed to the controller; the simulators' fixtures add theirs.
Controller = collections.namedtuple("Controller", "api_client labels secrets")


@pytest.fixture(scope="module")
def controller(kube, tmp_path_factory):
    env, api_client = kube
    labels = {RUN_LABEL: uuid.uuid4().hex[:12]}
    secrets = [value for value in ((slurm_env("22.05") or {}).get("SLURM_JWT"), (ray_env() or {}).get("RAY_TOKEN")) if value]
    tmp_path = tmp_path_factory.mktemp("controller")
    log_path = tmp_path / "controller.log"
    with open(log_path, "w") as log:
        process = start_controller(env["KUBECONFIG"], "%s=%s" % (RUN_LABEL, labels[RUN_LABEL]), tmp_path / "runner", log,
                                   free_port())
    try:
        yield Controller(api_client, labels, secrets)
    finally:
        process.send_signal(signal.SIGTERM)
        returncode = process.wait(timeout=120)
        # Nothing may wait on a controller that is gone.
        release_labelled(api_client, "%s=%s" % (RUN_LABEL, labels[RUN_LABEL]))
    log = log_path.read_text()
    for secret in secrets:
        assert secret not in log
        assert not subprocess.run(["grep", "-rlF", secret, str(tmp_path)], capture_output=True, check=False).stdout
    assert returncode == 0, log[-4000:]


class Simulator:
    """A simulator of this module's own: its env file's values and its access log."""

    def __init__(self, env_file):
        self.env = read_env_file(env_file)
        self.access_log = os.path.join(os.path.dirname(env_file), "log", "access.log")


@pytest.fixture(scope="module")
def lsf(controller):  # pylint: disable=redefined-outer-name
    require_lsf()  # the shared one runs: the simulator's accounts exist
    with private_service("lsf-pac.sh", "lsf", {"BRIDGE_LSF_PAC_PORT": str(free_port())}) as env_file:
        simulator = Simulator(env_file)
        controller.secrets.append(simulator.env["LSF_PASSWORD"])
        yield simulator


@pytest.fixture(scope="module")
def quantum(controller):  # pylint: disable=redefined-outer-name
    require_quantum()  # the shared one runs: its venv is installed
    with private_service("quantum-runtime.sh", "quantum", {"BRIDGE_QUANTUM_PORT": str(free_port())}) as env_file:
        simulator = Simulator(env_file)
        controller.secrets.append(simulator.env["QUANTUM_API_KEY"])
        yield simulator


class Namespace:
    """A fresh namespace and the calls a test makes in it."""

    def __init__(self, controller, prefix):
        from kubernetes import client

        self.client = client
        self.labels = controller.labels
        self.secrets = controller.secrets
        self.core = client.CoreV1Api(controller.api_client)
        self.custom = client.CustomObjectsApi(controller.api_client)
        self.name = "%s-%s" % (prefix, uuid.uuid4().hex[:8])
        tenant_namespace(controller.api_client, self.name)

    def secret(self, name, data):
        self.core.create_namespaced_secret(self.name, self.client.V1Secret(
            metadata=self.client.V1ObjectMeta(name=name), string_data=data))

    def config_map(self, name, data):
        self.core.create_namespaced_config_map(self.name, self.client.V1ConfigMap(
            metadata=self.client.V1ObjectMeta(name=name), data=data))

    def create(self, body):
        body["metadata"].setdefault("labels", {}).update(self.labels)
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, self.name, PLURAL, body)

    def bridgejob(self, name, backend, **spec):
        spec.update(backend=backend, pollInterval=2)
        return self.create({"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "BridgeJob",
                            "metadata": {"name": name}, "spec": spec})

    def read_status_job_id(self, name):
        return self.read(name)["status"]["jobId"]

    def read(self, name):
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, self.name, PLURAL, name)

    def wait_phase(self, name, phase, timeout=180):
        return wait_for(lambda: self.read(name), lambda o: phase_of(o) == phase, timeout=timeout)

    def delete_and_wait_gone(self, name, timeout=120):
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.name, PLURAL, name)

        def gone():
            try:
                self.read(name)
                return False
            except self.client.exceptions.ApiException as exc:
                return exc.status == 404

        wait_for(gone, bool, timeout=timeout)

    def assert_no_secret(self, names):
        statuses = [self.read(name).get("status") for name in names]
        events = [event.message for event in self.core.list_namespaced_event(self.name).items]
        for secret in self.secrets:
            assert secret not in repr(statuses) + repr(events)


def phase_of(obj):
    return (obj.get("status") or {}).get("phase")


def condition(obj, kind):
    return dict((c["type"], c) for c in (obj.get("status") or {}).get("conditions") or []).get(kind) or {}


def ray_client(ray):
    sys.path.insert(0, COLLECTIONS)
    from ansible_collections.bridge.hpc.plugins.module_utils.ray.client import RayClient

    return RayClient(ray["RAY_URL"], token=ray.get("RAY_TOKEN") or None)


def lsf_client(lsf):
    sys.path.insert(0, COLLECTIONS)
    from ansible_collections.bridge.hpc.plugins.module_utils.lsf.client import LsfClient

    return LsfClient(lsf["LSF_PAC_URL"], user=lsf["LSF_USER"], password=lsf["LSF_PASSWORD"])


def quantum_client(quantum):
    sys.path.insert(0, COLLECTIONS)
    from ansible_collections.bridge.hpc.plugins.module_utils.quantum.client import QuantumClient

    return QuantumClient(quantum["QUANTUM_URL"], api_key=quantum["QUANTUM_API_KEY"],
                         service_crn=quantum["QUANTUM_SERVICE_CRN"], iam_url=quantum["QUANTUM_IAM_URL"])


class AccessLog:
    """A simulator's access log ("time METHOD path status" lines) from now on."""

    def __init__(self, simulator):
        self.path = simulator.access_log
        self.start = os.path.getsize(self.path) if os.path.exists(self.path) else 0

    def requests(self):
        with open(self.path) as handle:
            handle.seek(self.start)
            return [line.split()[1:3] for line in handle if line.strip()]


def slurm_backend(namespace, slurm):
    namespace.secret("slurm", {"user": slurm["SLURM_USER"], "token": slurm["SLURM_JWT"]})
    return {"type": "slurm", "url": slurm["SLURM_URL"], "credentialsSecretRef": {"name": "slurm"},
            "apiVersion": slurm["SLURM_API_VERSIONS"].split(",")[0]}


def test_ray_bridgejobs_complete_fail_and_are_stopped_on_delete(controller):
    ray = require_ray()
    namespace = Namespace(controller, "e2e-ray")
    backend = {"type": "ray", "url": ray["RAY_URL"]}
    if ray.get("RAY_TOKEN"):
        namespace.secret("ray", {"token": ray["RAY_TOKEN"]})
        backend["credentialsSecretRef"] = {"name": "ray"}
    for name, script in (("ok", "#!/bin/bash\necho fine\n"), ("exit3", "#!/bin/bash\nexit 3\n"),
                         ("sleeper", "#!/bin/bash\nsleep 300\n")):
        namespace.bridgejob(name, backend, script=script)

    done = namespace.wait_phase("ok", "Completed")
    assert done["status"]["exitCode"] == 0 and done["status"]["jobId"]
    assert done["status"]["nativeState"] == "SUCCEEDED"
    failed = namespace.wait_phase("exit3", "Failed")
    # Ray reports the entrypoint's exit code as driver_exit_code, so it is known here as on Slurm.
    assert failed["status"]["failureClass"] == "non_zero_exit" and failed["status"]["exitCode"] == 3
    assert failed["status"]["nativeState"] == "FAILED"
    job_id = namespace.wait_phase("sleeper", "Running")["status"]["jobId"]

    namespace.delete_and_wait_gone("sleeper")
    job = ray_client(ray).get(job_id)
    assert job["phase"] == "cancelled" and job["native_state"] == "STOPPED", job["native_state"]
    namespace.assert_no_secret(("ok", "exit3"))


def test_lsf_bridgejobs_complete_fail_are_killed_on_delete_submit_once_and_poll_by_list(controller, lsf):  # pylint: disable=redefined-outer-name
    access = AccessLog(lsf)
    lsf = lsf.env
    namespace = Namespace(controller, "e2e-lsf")
    namespace.secret("lsf", {"user": lsf["LSF_USER"], "password": lsf["LSF_PASSWORD"]})
    backend = {"type": "lsf", "url": lsf["LSF_PAC_URL"], "credentialsSecretRef": {"name": "lsf"}}
    for name, script in (("ok", "#!/bin/bash\necho \"fine in $LSB_QUEUE\"\n"), ("exit3", "#!/bin/bash\nexit 3\n"),
                         ("sleeper", "#!/bin/bash\nsleep 300\n")):
        namespace.bridgejob(name, backend, script=script, queue="normal")

    done = namespace.wait_phase("ok", "Completed")
    assert done["status"]["exitCode"] == 0 and done["status"]["jobId"]
    assert done["status"]["nativeState"] == "DONE"
    failed = namespace.wait_phase("exit3", "Failed")
    assert failed["status"]["failureClass"] == "non_zero_exit" and failed["status"]["exitCode"] == 3
    assert failed["status"]["nativeState"] == "EXIT"
    job_id = namespace.wait_phase("sleeper", "Running")["status"]["jobId"]
    namespace.delete_and_wait_gone("sleeper")
    requests = access.requests()

    job = lsf_client(lsf).get(job_id)
    assert job["phase"] == "cancelled" and job["reason"].startswith("TERM_OWNER"), job
    # Never submitted twice; polled with the list of the user's jobs, never job by job.
    assert requests.count(["POST", "/platform/ws/jobs/submit"]) == 3, requests
    assert not [path for method, path in requests if method == "GET" and path.startswith("/platform/ws/jobs/")
                and path.rsplit("/", 1)[1].isdigit()], requests
    assert ["GET", "/platform/ws/jobs/fullinfo"] in requests
    assert requests.count(["POST", "/platform/ws/jobs/kill"]) == 1
    namespace.assert_no_secret(("ok", "exit3"))


# A Bell pair in the ISA of the simulator's fake Falcon devices (basis cx, id, rz, sx, x): H on $0 is
# rz sx rz. Without measurements for the estimator, whose observables measure.
BELL_STATE = "OPENQASM 3.0;\ninclude \"stdgates.inc\";\nrz(pi/2) $0;\nsx $0;\nrz(pi/2) $0;\ncx $0, $1;\n"
BELL = BELL_STATE.replace("include \"stdgates.inc\";\n", "include \"stdgates.inc\";\nbit[2] c;\n") + \
    "c[0] = measure $0;\nc[1] = measure $1;\n"


def test_quantum_bridgejobs_complete_with_results_fail_are_cancelled_on_delete_submit_once_and_poll_by_list(
        controller, quantum):  # pylint: disable=redefined-outer-name
    access = AccessLog(quantum)
    quantum = quantum.env
    namespace = Namespace(controller, "e2e-quantum")
    namespace.secret("quantum", {"apiKey": quantum["QUANTUM_API_KEY"], "serviceCrn": quantum["QUANTUM_SERVICE_CRN"]})
    backend = {"type": "quantum", "url": quantum["QUANTUM_URL"], "iamUrl": quantum["QUANTUM_IAM_URL"],
               "credentialsSecretRef": {"name": "quantum"}}
    namespace.bridgejob("bell", backend, script=BELL, queue="ibm_manila", backendOptions={"quantum": {"shots": 1000}})
    namespace.bridgejob("zz", backend, script=BELL_STATE, queue="ibm_manila", backendOptions={"quantum": {
        "primitive": "estimator", "precision": 0.05, "pubs": [{"observables": {"ZZ": 1.0}}, {"observables": ["IZ", "XX"]}]}})
    # ibm_lima is paused: the check before submitting refuses it, naming the device.
    namespace.bridgejob("paused", backend, script=BELL, queue="ibm_lima")
    # One job at a time per device: 16 x 100000 shots hold ibm_nairobi about 80 s, and a job behind
    # them stays Queued.
    namespace.bridgejob("blocker", backend, script=BELL, queue="ibm_nairobi",
                        backendOptions={"quantum": {"pubs": [{"shots": 100000}] * 16}})
    blocker_id = namespace.wait_phase("blocker", "Running")["status"]["jobId"]
    namespace.bridgejob("waiting", backend, script=BELL, queue="ibm_nairobi")
    waiting_id = namespace.wait_phase("waiting", "Queued")["status"]["jobId"]
    assert waiting_id, "a Queued CR has its job id from the submit"

    done = namespace.wait_phase("bell", "Completed")
    assert done["status"]["jobId"] and done["status"]["nativeState"] == "Completed"
    meas = done["status"]["results"]["pubs"][0]["registers"]["c"]
    assert meas["shots"] == 1000 and sum(meas["counts"].values()) == 1000 and meas["outcomes"] <= 4
    # A Bell pair: 00 and 11, up to the fake device's noise.
    assert meas["counts"].get("00", 0) + meas["counts"].get("11", 0) > 800, meas
    assert done["status"]["results"]["truncated"] is False
    estimated = namespace.wait_phase("zz", "Completed")["status"]["results"]["pubs"]
    assert len(estimated) == 2 and estimated[0]["evs"][0] > 0.5 and len(estimated[1]["evs"]) == 2, estimated
    assert estimated[1]["shape"] == [2] and all(std >= 0 for std in estimated[1]["stds"])
    refused = namespace.wait_phase("paused", "Failed")
    assert refused["status"]["failureClass"] == "rejected" and "not operational" in refused["status"]["message"], refused["status"]

    namespace.delete_and_wait_gone("waiting")
    namespace.delete_and_wait_gone("blocker")
    requests = access.requests()
    client = quantum_client(quantum)
    assert client.get(waiting_id)["phase"] == "cancelled"
    assert client.get(blocker_id)["phase"] == "cancelled"

    # Never submitted twice (the paused device's job not at all); polled with the instance's job
    # list by tag, never job by job; each completed job's results read once.
    assert requests.count(["POST", "/api/v1/jobs"]) == 4, requests
    assert not [path for method, path in requests if method == "GET" and path.startswith("/api/v1/jobs/")
                and path.count("/") == 4], requests
    assert ["GET", "/api/v1/jobs"] in requests
    results = [path for method, path in requests if method == "GET" and path.endswith("/results")]
    assert sorted(results) == sorted("/api/v1/jobs/%s/results" % namespace.read_status_job_id(name)
                                     for name in ("bell", "zz")), requests
    assert ["POST", "/api/v1/jobs/%s/cancel" % waiting_id] in requests
    namespace.assert_no_secret(("bell", "zz", "paused"))


def test_kubernetes_bridgejobs_run_on_the_controllers_own_cluster(controller):
    """backend.type kubernetes without a Secret: Jobs in the BridgeJob's namespace (which enforces
    the `restricted` Pod Security level), created once each, through the controller's kubeconfig."""
    require_kube_node()
    from kubernetes import client

    namespace = Namespace(controller, "e2e-k8s")
    namespace.core.patch_namespace(namespace.name, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    batch = client.BatchV1Api(controller.api_client)
    options = {"kubernetes": {"image": "localhost/bridge/busybox:latest", "image_pull_policy": "Never"}}
    for name, script in (("ok", "#!/bin/sh\necho \"fine in $(pwd)\"\n"), ("exit3", "#!/bin/sh\nexit 3\n"),
                         ("sleeper", "#!/bin/sh\nsleep 300\n")):
        # No CPU request: the node has 2 CPUs, shared with other tests.
        namespace.bridgejob(name, {"type": "kubernetes"}, script=script, backendOptions=options,
                            resources={"memory": "32M"})
    job = manifests(os.path.join(REPO, "deploy", "samples", "kubernetes.yaml"))[0]
    # The node pulls nothing: the sample's busybox is the one it has.
    job["spec"]["backendOptions"] = options
    job["spec"]["resources"].pop("cpusPerTask")
    namespace.create(job)

    done = namespace.wait_phase("ok", "Completed")
    assert done["status"]["exitCode"] == 0 and done["status"]["nativeState"] == "Complete"
    failed = namespace.wait_phase("exit3", "Failed")
    assert failed["status"]["failureClass"] == "non_zero_exit" and failed["status"]["exitCode"] == 3
    assert namespace.wait_phase(job["metadata"]["name"], "Completed")["status"]["exitCode"] == 0
    job_id = namespace.wait_phase("sleeper", "Running")["status"]["jobId"]
    jobs = batch.list_namespaced_job(namespace.name, label_selector="app.kubernetes.io/managed-by=bridge").items
    assert sorted(j.metadata.name for j in jobs) == sorted(namespace.read_status_job_id(name) for name in (
        "ok", "exit3", "sleeper", job["metadata"]["name"])), "one Job per BridgeJob, in its namespace"

    namespace.delete_and_wait_gone("sleeper")

    def deleted():
        try:
            return batch.read_namespaced_job(job_id, namespace.name).metadata.deletion_timestamp is not None
        except client.exceptions.ApiException as exc:
            return exc.status == 404

    wait_for(deleted, bool, timeout=60)


def test_slurm_script_from_config_map_and_one_that_is_not_there_yet(controller):
    slurm = require_slurm("22.05")
    namespace = Namespace(controller, "e2e-cm")
    backend = slurm_backend(namespace, slurm)
    namespace.config_map("scripts", {"run.sh": "#!/bin/bash\necho from a config map\n"})
    namespace.bridgejob("from-cm", backend, scriptFrom={"configMapKeyRef": {"name": "scripts", "key": "run.sh"}})
    namespace.bridgejob("late", backend, scriptFrom={"configMapKeyRef": {"name": "late-scripts", "key": "run.sh"}})
    namespace.bridgejob("no-key", backend, scriptFrom={"configMapKeyRef": {"name": "scripts", "key": "absent.sh"}})

    done = namespace.wait_phase("from-cm", "Completed")
    assert done["status"]["exitCode"] == 0 and done["status"]["jobId"]
    for name, words in (("late", ("ConfigMap 'late-scripts' not found", namespace.name)),
                        ("no-key", ("ConfigMap 'scripts'", "has no key 'absent.sh'"))):
        waiting = wait_for(lambda name=name: namespace.read(name),
                           lambda o: condition(o, "Submitted").get("reason") == "ScriptNotFound")
        submitted = condition(waiting, "Submitted")
        assert submitted["status"] == "False" and all(word in submitted["message"] for word in words), submitted
        assert phase_of(waiting) == "Pending" and not waiting["status"].get("jobId")
        # The backend is fine and was not asked about this CR.
        assert condition(waiting, "BackendReachable").get("status") != "False"

    # Never submitted: deleting it cancels nothing and releases it.
    namespace.delete_and_wait_gone("no-key")
    # Applied after its CR, as `kubectl apply -f dir/` may do: a retry (2 s doubling) finds it.
    namespace.config_map("late-scripts", {"run.sh": "#!/bin/bash\nexit 0\n"})
    late = namespace.wait_phase("late", "Completed")
    assert late["status"]["exitCode"] == 0 and condition(late, "Submitted")["status"] == "True"
    namespace.assert_no_secret(("from-cm", "late"))


def sample(name):
    """A sample's Secret and BridgeJob as the files have them."""
    found = dict((doc["kind"], doc) for doc in manifests(os.path.join(REPO, "deploy", "samples", name)))
    return found["Secret"], found["BridgeJob"]


def test_the_samples_run_with_the_local_urls_and_credentials(controller, lsf, quantum):  # pylint: disable=redefined-outer-name
    slurm, ray, lsf, quantum = require_slurm("22.05"), require_ray(), lsf.env, quantum.env
    namespace = Namespace(controller, "e2e-samples")

    secret, job = sample("slurm.yaml")
    secret["stringData"].update(user=slurm["SLURM_USER"], token=slurm["SLURM_JWT"])
    job["spec"]["backend"]["url"] = slurm["SLURM_URL"]
    namespace.core.create_namespaced_secret(namespace.name, secret)
    namespace.create(job)

    secret, job = sample("ray.yaml")
    job["spec"]["backend"]["url"] = ray["RAY_URL"]
    # The local head runs without token authentication and ignores the sample's placeholder token;
    # a head with it gets its real token.
    if ray.get("RAY_TOKEN"):
        secret["stringData"]["token"] = ray["RAY_TOKEN"]
    namespace.core.create_namespaced_secret(namespace.name, secret)
    namespace.create(job)

    secret, job = sample("lsf.yaml")
    secret["stringData"].update(user=lsf["LSF_USER"], password=lsf["LSF_PASSWORD"])
    job["spec"]["backend"]["url"] = lsf["LSF_PAC_URL"]
    namespace.core.create_namespaced_secret(namespace.name, secret)
    namespace.create(job)

    secret, job = sample("quantum.yaml")
    secret["stringData"].update(apiKey=quantum["QUANTUM_API_KEY"], serviceCrn=quantum["QUANTUM_SERVICE_CRN"])
    job["spec"]["backend"].update(url=quantum["QUANTUM_URL"], iamUrl=quantum["QUANTUM_IAM_URL"])
    # The sample's circuit is in the ISA of a Heron device (cz); the simulator's fake devices are
    # Falcons (cx), so the local run takes the same Bell pair in their ISA.
    job["spec"].update(queue="ibm_manila", script=BELL)
    namespace.core.create_namespaced_secret(namespace.name, secret)
    namespace.create(job)

    names = [sample(name)[1]["metadata"]["name"] for name in ("slurm.yaml", "ray.yaml", "lsf.yaml", "quantum.yaml")]
    for name in names:
        done = wait_for(lambda name=name: namespace.read(name), lambda o: phase_of(o) in ("Completed", "Failed"))
        assert phase_of(done) == "Completed", done.get("status")
        if name == "bell-quantum":
            # A primitive run has no exit code; its counts are its outcome.
            assert sum(done["status"]["results"]["pubs"][0]["registers"]["c"]["counts"].values()) == 1000
        else:
            assert done["status"]["exitCode"] == 0
    namespace.assert_no_secret(names)
