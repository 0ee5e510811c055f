"""The controller as users deploy it: `kubectl apply -k deploy/` on a real node.

The image is built by tools/controller-image.sh and loaded into the node's containerd
(tools/kube-node.sh load-image); deploy/ is applied through a kustomize overlay generated in a temp
dir that sets that image and adds one arg, --selector=bridge.dev/e2e-run=<this run> (the apiserver
is shared with other test runs, whose BridgeJobs this controller must leave alone). Covered: the
Deployment becomes Available in the bridge-system namespace under the restricted Pod Security level
(no admission warning) with its ServiceAccount; a Slurm BridgeJob and a Ray BridgeJob, their
credentials in Secrets, run to Completed (the Pod reaches slurmrestd and Ray on the node's host
address, tools/kube-node.sh expose); a Kubernetes BridgeJob without a Secret runs as a Job through
the controller's ServiceAccount; `kubectl get bj` shows the printer columns; `kubectl logs` of
the controller pod and its /metrics through the apiserver's pod proxy; no token in the status, the
events or the log. Two replicas: exactly one holds the Lease bridge-controller; with no new pod
allowed in bridge-system (a ResourceQuota; cordoning the node would stop the pods of every test
running at the same time), the leader pod deleted, the standby takes the Lease and completes a
BridgeJob created after; `kubectl rollout restart` (what an image update does) completes and a new pod holds the Lease.

Needs the node to be running already (tools/kube-node.sh start: one node per machine, never started
here). The Deployment is deleted at the end; the namespace, CRD and RBAC stay (other tests use them).
"""

import contextlib
import json
import os
import subprocess
import time
import uuid

import pytest

from conftest import REPO, RUN, read_env_file, require_ray, require_slurm
from controller_support import tenant_objects
from test_controller_e2e import wait_for

# It loads the controller's image into the node and times a leader failover of its pods: alone, so that
# neither slows the other tests nor is slowed by them.
pytestmark = pytest.mark.serial

NODE_SCRIPT = os.path.join(REPO, "tools", "kube-node.sh")
IMAGE_SCRIPT = os.path.join(REPO, "tools", "controller-image.sh")
NAMESPACE, NAME, LEASE = "bridge-system", "bridge-controller", "bridge-controller"
RUN_LABEL = "bridge.dev/e2e-run"
POD_SELECTOR = "app.kubernetes.io/name=bridge,app.kubernetes.io/component=controller"
PRINTER_COLUMNS = ["NAME", "BACKEND", "PHASE", "JOB ID", "EXIT CODE", "AGE"]


def unavailable(message):
    if os.environ.get("BRIDGE_REQUIRE_SERVICES") == "1":
        pytest.fail(message)
    pytest.skip(message)


def parse_env(text):
    values = {}
    for line in text.splitlines():
        key, sep, value = line.strip().removeprefix("export ").partition("=")
        if sep and key and not key.startswith("#"):
            values[key] = value.strip("'\"")
    return values


class Cluster:
    """kubectl as the cluster's admin, and the node's facts."""

    def __init__(self, node_env, kubeconfig):
        self.node = node_env
        self.env = dict(os.environ, KUBECONFIG=kubeconfig)
        self.kubectl_path = node_env.get("KUBECTL") or "kubectl"

    def kubectl(self, *args, stdin=None, check=True, timeout=300):
        result = subprocess.run([self.kubectl_path] + list(args), input=stdin, capture_output=True, text=True,
                                env=self.env, timeout=timeout, check=False)
        if check and result.returncode != 0:
            raise AssertionError("kubectl %s: %s%s" % (" ".join(args), result.stdout[-2000:], result.stderr[-2000:]))
        return result

    def json(self, *args):
        return json.loads(self.kubectl(*(list(args) + ["-o", "json"])).stdout)

    def pods(self):
        return [pod for pod in self.json("-n", NAMESPACE, "get", "pods", "-l", POD_SELECTOR)["items"]
                if not pod["metadata"].get("deletionTimestamp")]

    def holder(self):
        result = self.kubectl("-n", NAMESPACE, "get", "lease", LEASE, "-o", "jsonpath={.spec.holderIdentity}", check=False)
        return result.stdout.strip() if result.returncode == 0 else None

    def host_url(self, url):
        """`url` on loopback, as a Pod reaches it: through the node's host address (expose PORT)."""
        rest = url.partition("://")[2]
        host_port = rest.split("/", 1)[0]
        port = host_port.rsplit(":", 1)[1]
        subprocess.run([NODE_SCRIPT, "expose", port], check=True, capture_output=True, text=True)
        return url.replace(host_port, "%s:%s" % (self.node["KUBE_NODE_HOST_ADDR"], port), 1)


@pytest.fixture(scope="module")
def cluster():
    if not os.path.isfile(NODE_SCRIPT):
        unavailable("tools/kube-node.sh is missing: no Kubernetes node (kubelet, containerd, scheduler, "
                    "controller-manager) to deploy the controller on")
    status = subprocess.run([NODE_SCRIPT, "status"], capture_output=True, text=True, check=False)
    if status.returncode != 0:
        unavailable("the Kubernetes node is not running (tools/kube-node.sh start; one node per machine, "
                    "never started by this test): %s" % (status.stdout + status.stderr)[-1000:])
    node_env = parse_env(subprocess.run([NODE_SCRIPT, "env"], capture_output=True, text=True, check=True).stdout)
    kube = read_env_file(os.path.join(RUN, "kube", "env"))
    if not kube:
        unavailable("kube-apiserver is not running: tools/kube-control-plane.sh start")
    return Cluster(node_env, node_env.get("KUBECONFIG") or kube["KUBECONFIG"])


@pytest.fixture(scope="module")
def deployment(cluster, tmp_path_factory):  # pylint: disable=redefined-outer-name
    """deploy/ applied with this run's image and selector; yields the run id. The Deployment goes
    afterwards."""
    started = time.monotonic()
    build = subprocess.run([IMAGE_SCRIPT, "build"], capture_output=True, text=True, check=False)
    assert build.returncode == 0, build.stderr[-3000:]
    image = build.stdout.strip().splitlines()[-1]
    load = subprocess.run([NODE_SCRIPT, "load-image", image], capture_output=True, text=True, check=False)
    assert load.returncode == 0, load.stdout[-2000:] + load.stderr[-2000:]
    run_id = uuid.uuid4().hex[:12]
    overlay = tmp_path_factory.mktemp("overlay")
    name, tag = image.rsplit(":", 1)
    (overlay / "kustomization.yaml").write_text("""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %(deploy)s
components:
  - %(deploy)s/author-mutation
images:
  - name: bridge-controller
    newName: %(name)s
    newTag: %(tag)s
patches:
  - target:
      kind: Deployment
      name: bridge-controller
    patch: |
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --selector=%(label)s=%(run)s
""" % {"deploy": os.path.relpath(os.path.join(REPO, "deploy"), str(overlay)), "name": name, "tag": tag,
       "label": RUN_LABEL, "run": run_id})
    applied = cluster.kubectl("apply", "-k", str(overlay))
    assert "PodSecurity" not in applied.stderr, applied.stderr
    try:
        cluster.kubectl("-n", NAMESPACE, "rollout", "status", "deployment/%s" % NAME, "--timeout=300s", timeout=320)
        cluster.kubectl("-n", NAMESPACE, "wait", "--for=condition=Available", "deployment/%s" % NAME, "--timeout=120s",
                        timeout=140)
        print("\nimage %s; deploy/ applied and the Deployment Available in %.1f s (build and load included)"
              % (image, time.monotonic() - started))
        yield run_id
    finally:
        logs = [cluster.kubectl("-n", NAMESPACE, "logs", pod["metadata"]["name"], check=False).stdout
                for pod in cluster.pods()]
        cluster.kubectl("-n", NAMESPACE, "delete", "deployment", NAME, "--wait=true", "--timeout=180s", check=False,
                        timeout=200)
        cluster.kubectl("-n", NAMESPACE, "delete", "lease", LEASE, "--ignore-not-found", check=False)
        for log in logs:
            for secret in secrets():
                assert secret not in log


def secrets():
    found = [(read_env_file(os.path.join(RUN, "slurm-22.05", "env")) or {}).get("SLURM_JWT"),
             (read_env_file(os.path.join(RUN, "ray", "env")) or {}).get("RAY_TOKEN")]
    return [value for value in found if value]


@pytest.fixture(scope="module")
def jobs(cluster, deployment):  # pylint: disable=redefined-outer-name
    """A namespace with the Secrets of Slurm 22.05 and Ray; `create(name, backend, script)` applies a
    BridgeJob of this run with kubectl."""
    slurm, ray = require_slurm("22.05"), require_ray()
    namespace = "deploy-%s" % deployment
    cluster.kubectl("create", "namespace", namespace)
    # Given to a tenant as an operator gives one: deploy/tenant/tenant.yaml with its namespace set.
    tenant = {"apiVersion": "v1", "kind": "List", "items": tenant_objects(namespace)}
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(tenant))
    backends = {"slurm": {"type": "slurm", "url": cluster.host_url(slurm["SLURM_URL"]),
                          "credentialsSecretRef": {"name": "slurm-credentials"},
                          "apiVersion": slurm["SLURM_API_VERSIONS"].split(",")[0]},
                "ray": {"type": "ray", "url": cluster.host_url(ray["RAY_URL"])},
                # No Secret: the controller's own cluster, as the namespace's Job ServiceAccount.
                "kubernetes": {"type": "kubernetes"}}
    secret_items = [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "slurm-credentials"}, "type": "Opaque",
                     "stringData": {"user": slurm["SLURM_USER"], "token": slurm["SLURM_JWT"]}}]
    if ray.get("RAY_TOKEN"):
        secret_items.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ray-credentials"},
                             "type": "Opaque", "stringData": {"token": ray["RAY_TOKEN"]}})
        backends["ray"]["credentialsSecretRef"] = {"name": "ray-credentials"}
    cluster.kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                          "items": secret_items}))

    class Jobs:
        pass

    ctx = Jobs()
    ctx.namespace = namespace

    def create(name, backend, script, **spec):
        body = {"apiVersion": "bridge.dev/v1alpha1", "kind": "BridgeJob",
                "metadata": {"name": name, "labels": {RUN_LABEL: deployment}},
                "spec": dict(spec, backend=backends[backend], script=script, pollInterval=2)}
        cluster.kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(body))

    def read(name):
        return cluster.json("-n", namespace, "get", "bridgejob", name)

    def wait_terminal(name, timeout=300):
        return wait_for(lambda: read(name),
                        lambda o: (o.get("status") or {}).get("phase") in ("Completed", "Failed", "Cancelled"),
                        timeout=timeout, interval=2)

    ctx.create, ctx.read, ctx.wait_terminal = create, read, wait_terminal
    yield ctx
    # While the controller still runs: it removes the finalizers (a finished job needs no cancel).
    deleted = cluster.kubectl("-n", namespace, "delete", "bridgejobs", "--all", "--timeout=120s", check=False, timeout=140)
    if deleted.returncode != 0:
        for item in cluster.json("-n", namespace, "get", "bridgejobs")["items"]:
            cluster.kubectl("-n", namespace, "patch", "bridgejob", item["metadata"]["name"], "--type=merge",
                            "-p", '{"metadata":{"finalizers":[]}}', check=False)
    cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def test_deployment_is_available_under_restricted_pod_security(cluster, deployment):  # pylint: disable=redefined-outer-name,unused-argument
    labels = cluster.json("get", "namespace", NAMESPACE)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    pods = cluster.pods()
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    pod = pods[0]
    assert pod["spec"]["serviceAccountName"] == "bridge-controller"
    assert pod["status"]["phase"] == "Running"
    assert dict((c["type"], c["status"]) for c in pod["status"]["conditions"])["Ready"] == "True"
    container = pod["spec"]["containers"][0]
    assert container["image"].startswith("localhost/bridge-controller:")
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # Pod Security admission enforces `restricted` on this namespace: a pod that broke it would not
    # have been created (and the apply, checked in the fixture, warned of nothing).


def test_slurm_and_ray_bridgejobs_complete(cluster, jobs):  # pylint: disable=redefined-outer-name
    started = time.monotonic()
    jobs.create("hello-slurm", "slurm", "#!/bin/bash\necho hello from slurm\n")
    jobs.create("hello-ray", "ray", "#!/bin/bash\necho hello from ray\n")
    for name, backend in (("hello-slurm", "slurm"), ("hello-ray", "ray")):
        done = jobs.wait_terminal(name)
        status = done["status"]
        assert status["phase"] == "Completed" and status["exitCode"] == 0 and status["jobId"], (backend, status)
        for secret in secrets():
            assert secret not in json.dumps(status)
    print("\nSlurm and Ray BridgeJobs Completed %.1f s after their apply" % (time.monotonic() - started))
    table = cluster.kubectl("-n", jobs.namespace, "get", "bj").stdout.splitlines()
    assert table[0].split() == " ".join(PRINTER_COLUMNS).split(), table
    rows = dict((line.split()[0], line.split()) for line in table[1:])
    assert rows["hello-slurm"][1:3] == ["slurm", "Completed"] and rows["hello-ray"][1:3] == ["ray", "Completed"], table
    events = cluster.kubectl("-n", jobs.namespace, "get", "events").stdout
    for secret in secrets():
        assert secret not in events


def test_kubernetes_bridgejob_runs_as_the_namespaces_job_service_account(cluster, jobs):  # pylint: disable=redefined-outer-name
    """backend.type kubernetes with no kubeconfig Secret: the controller Pod's playbook authenticates
    with a token of the namespace's bridge-runner (deploy/tenant/tenant.yaml), never with the Pod's
    own ServiceAccount, and runs the Job in the BridgeJob's namespace for its author (the admin)."""
    options = {"kubernetes": {"image": cluster.node["KUBE_BUSYBOX_IMAGE"], "image_pull_policy": "Never"}}
    jobs.create("hello-kubernetes", "kubernetes", "#!/bin/sh\necho hello from a pod\n", backendOptions=options)
    status = jobs.wait_terminal("hello-kubernetes")["status"]
    assert status["phase"] == "Completed" and status["exitCode"] == 0, status
    job = cluster.json("-n", jobs.namespace, "get", "job", status["jobId"])
    assert job["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "bridge", job["metadata"]
    assert cluster.kubectl("-n", jobs.namespace, "logs", "job/%s" % status["jobId"]).stdout == "hello from a pod\n"


def test_logs_and_metrics_of_the_controller_pod(cluster, jobs):  # pylint: disable=redefined-outer-name,unused-argument
    pod = cluster.pods()[0]["metadata"]["name"]
    log = cluster.kubectl("-n", NAMESPACE, "logs", pod).stdout
    assert " acting (selector " in log, log[-2000:]
    metrics = cluster.kubectl("get", "--raw", "/api/v1/namespaces/%s/pods/%s:8080/proxy/metrics" % (NAMESPACE, pod)).stdout
    assert "bridge_queue_depth " in metrics and "bridge_tracked_jobs" in metrics, metrics[:2000]


@contextlib.contextmanager
def no_new_pods(cluster):
    """While held, bridge-system admits no new pod: a ResourceQuota of one pod there, where the
    Deployment's two run (a quota refuses creations beyond it and leaves the pods there alone).
    Afterwards the quota is deleted and the ReplicaSet nudged: it retries a refused creation with a
    backoff that grows to minutes."""
    quota = "bridge-no-new-pods"
    cluster.kubectl("-n", NAMESPACE, "create", "quota", quota, "--hard=pods=1")
    try:
        # Admission refuses creations beyond a quota once the quota controller has counted it.
        wait_for(lambda: (cluster.json("-n", NAMESPACE, "get", "resourcequota", quota).get("status") or {}).get("used") or {},
                 lambda used: "pods" in used, timeout=60, interval=0.5)
        yield
    finally:
        cluster.kubectl("-n", NAMESPACE, "delete", "resourcequota", quota, "--ignore-not-found")
        for replica_set in cluster.json("-n", NAMESPACE, "get", "replicasets", "-l", POD_SELECTOR)["items"]:
            cluster.kubectl("-n", NAMESPACE, "annotate", "--overwrite", "replicaset", replica_set["metadata"]["name"],
                            "bridge.dev/test-nudge=%s" % uuid.uuid4().hex[:8], check=False)


def test_two_replicas_one_leader_and_the_other_takes_over(cluster, jobs):  # pylint: disable=redefined-outer-name
    cluster.kubectl("-n", NAMESPACE, "scale", "deployment", NAME, "--replicas=2")
    # Both replicas count as available, the standby too: the rollout of the scale completes.
    cluster.kubectl("-n", NAMESPACE, "rollout", "status", "deployment/%s" % NAME, "--timeout=120s", timeout=140)
    pods = wait_for(cluster.pods, lambda pods: len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods), timeout=240)
    names = sorted(p["metadata"]["name"] for p in pods)
    leader = wait_for(cluster.holder, lambda holder: holder in names, timeout=120)
    time.sleep(5)  # a second leader would have shown itself by now (the Lease is renewed every few seconds)
    acting = [name for name in names if " acting (selector " in cluster.kubectl("-n", NAMESPACE, "logs", name).stdout]
    assert acting == [leader], (acting, leader)
    (other,) = [name for name in names if name != leader]
    # No replacement pod: the Lease can only pass to the standby, which is what the second replica is
    # for (with a replacement, it often starts and tries before the standby's next retry,
    # --retry-period 5 s).
    with no_new_pods(cluster):
        deleted = time.monotonic()
        cluster.kubectl("-n", NAMESPACE, "delete", "pod", leader, "--wait=false")
        holders = []

        def holder():
            holders.append((round(time.monotonic() - deleted, 1), cluster.holder()))
            return holders[-1][1]

        try:
            wait_for(holder, lambda holder: holder and holder != leader, timeout=180, interval=0.5)
        except AssertionError:
            print(cluster.kubectl("-n", NAMESPACE, "logs", leader, check=False).stdout[-3000:])
            raise AssertionError("the Lease stayed with the deleted leader %s: %s" % (leader, holders))
        successor = holders[-1][1]
        assert successor == other, "the Lease went to %s, not to the standby %s" % (successor, other)
        print("\nthe standby %s took the Lease %.1f s after the leader pod's delete" % (other, holders[-1][0]))
        jobs.create("after-failover", "slurm", "#!/bin/bash\necho after the failover\n")
        status = jobs.wait_terminal("after-failover")["status"]
        assert status["phase"] == "Completed" and status["exitCode"] == 0, status
    # Two replicas again, exactly one of them acting: the successor.
    pods = wait_for(cluster.pods, lambda pods: len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods),
                    timeout=240)
    acting = [p["metadata"]["name"] for p in pods
              if " acting (selector " in cluster.kubectl("-n", NAMESPACE, "logs", p["metadata"]["name"]).stdout]
    assert acting == [successor] and cluster.holder() == successor, (acting, cluster.holder())


def test_rollout_restart_hands_the_lease_to_a_new_pod(cluster, jobs):  # pylint: disable=redefined-outer-name
    """What an image update does: every pod replaced, one at a time, and the Lease ends up with a new one."""
    before = set(p["metadata"]["name"] for p in cluster.pods())
    started = time.monotonic()
    cluster.kubectl("-n", NAMESPACE, "rollout", "restart", "deployment/%s" % NAME)
    cluster.kubectl("-n", NAMESPACE, "rollout", "status", "deployment/%s" % NAME, "--timeout=300s", timeout=320)
    after = set(p["metadata"]["name"] for p in wait_for(cluster.pods, lambda pods: len(pods) == 2, timeout=180))
    assert not before & after, (before, after)
    wait_for(cluster.holder, lambda holder: holder in after, timeout=180, interval=0.5)
    print("\nrollout restart: done and the Lease with a new pod %.1f s after it began" % (time.monotonic() - started))
    jobs.create("after-rollout", "ray", "#!/bin/bash\necho after the rollout\n")
    status = jobs.wait_terminal("after-rollout")["status"]
    assert status["phase"] == "Completed" and status["exitCode"] == 0, status
