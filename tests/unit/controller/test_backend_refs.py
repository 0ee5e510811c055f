"""BridgeJobs that name a BridgeBackend or ClusterBridgeBackend (spec.backendRef): resolution through
the catalog, batch keys, the namespaceSelector and the operator's policy, and the wait for a
backend object that is not there yet."""

from bridge_controller.executor import Executor
from bridge_controller.plan import FINALIZER
from bridge_controller.policy import Policy
from bridge_controller.resolver import Resolver
from bridge_controller.spec import backend_key

from fake_backend import FakeBackend
from fakes import FakeCatalog, FakeKube, FakeRunner, backend_object
from test_executor import RETRY_BASE, RecordingQueue, bridgejob, conditions, settle


def ref_job(name, ref_name="slurm-a", kind=None, namespace="ns", **spec):
    job = bridgejob(name, **spec)
    del job["spec"]["backend"]
    job["spec"]["backendRef"] = dict({"name": ref_name}, **({"kind": kind} if kind else {}))
    job["metadata"]["namespace"] = namespace
    return job


def setup(catalog=None, policy=None, secrets=None, config_maps=None):
    kube = FakeKube(secrets=secrets if secrets is not None else {"ns/creds": {"user": "u", "token": "tenant-token"}},
                    config_maps=config_maps)
    backend = FakeBackend(progression=("queued", "running"))
    runner = FakeRunner(backend)
    queue = RecordingQueue()
    executor = Executor(kube, kube, runner, queue, clock=lambda: 1000.0, policy=policy, catalog=catalog)
    kube.listeners.append(executor.observe)
    return kube, backend, runner, queue, executor


class Connections(FakeRunner):
    """Records the connection and credentials each runner call is handed."""

    def __init__(self, backend):
        super().__init__(backend)
        self.handed = []

    def run(self, action, connection, credentials, **kwargs):
        self.handed.append((action, dict(connection), dict(credentials)))
        return super().run(action, connection, credentials, **kwargs)


# ------------------------------------------------------------------ batch keys

def test_jobs_naming_one_backend_object_share_a_batch_key_per_namespace():
    a, b = ref_job("a"), ref_job("b")
    assert backend_key(a) == backend_key(b) == ("ref", "BridgeBackend", "ns", "slurm-a", "ns")
    assert backend_key(ref_job("c", kind="BridgeBackend")) == backend_key(a), "kind defaults to BridgeBackend"
    cluster = ref_job("d", kind="ClusterBridgeBackend")
    other = ref_job("e", kind="ClusterBridgeBackend", namespace="other")
    assert backend_key(cluster) == ("ref", "ClusterBridgeBackend", "", "slurm-a", "ns")
    assert backend_key(other) != backend_key(cluster), "each namespace may hand its own Secret"
    assert backend_key(bridgejob("f")) != backend_key(a)


def test_a_placed_job_is_keyed_by_the_backend_object_placement_chose():
    job = bridgejob("a")
    del job["spec"]["backend"]
    job["spec"]["placement"] = {"candidates": [{"kind": "ClusterBridgeBackend", "name": "slurm-b"}]}
    assert backend_key(job) == ("unplaced", "ns")
    job["status"] = {"placement": {"backend": {"kind": "ClusterBridgeBackend", "name": "slurm-b"}, "type": "slurm"}}
    assert backend_key(job) == ("ref", "ClusterBridgeBackend", "", "slurm-b", "ns")


# ------------------------------------------------------------------ resolution

def test_the_three_forms_resolve_to_the_same_keys():
    kube = FakeKube()
    catalog = FakeCatalog([backend_object("slurm-a"),
                           backend_object("shared", kind="ClusterBridgeBackend",
                                          spec={"credentialsSecretRef": {"name": "site", "namespace": "bridge-system"},
                                                "caConfigMapRef": {"name": "site-ca", "namespace": "bridge-system"}})])
    resolver = Resolver(kube, catalog)
    inline = resolver.backend(bridgejob("a"))
    namespaced = resolver.backend(ref_job("b"))
    cluster = resolver.backend(ref_job("c", "shared", kind="ClusterBridgeBackend"))
    assert set(inline) == set(namespaced) == set(cluster)
    assert (inline["secret_namespace"], inline["ca_namespace"]) == ("ns", "ns")
    assert namespaced["url"] == "http://slurm-a:6820" and namespaced["secret_namespace"] == "ns"
    assert (cluster["secret"], cluster["secret_namespace"]) == ("site", "bridge-system")
    assert cluster["ca"]["name"] == "site-ca" and cluster["ca_namespace"] == "bridge-system"
    assert cluster["namespace"] == "ns", "the BridgeJob's own namespace (a kubernetes Job's default)"


def test_a_backend_ref_runs_with_the_objects_connection_and_its_secret():
    catalog = FakeCatalog([backend_object("slurm-a", spec={"caConfigMapRef": {"name": "ca"}})])
    kube, backend, runner, queue, executor = setup(catalog, config_maps={"ns/ca": {"ca.crt": "PEM"}})
    executor.runner = runner = Connections(backend)
    for name in ("a", "b"):
        kube.create(ref_job(name))
    settle(executor, queue)
    assert [(action, connection["url"], connection["ca_pem"], credentials["token"])
            for action, connection, credentials in runner.handed] == [("submit", "http://slurm-a:6820", "PEM", "tenant-token")]
    obj = kube.objects["ns/a"]
    assert obj["status"]["jobId"] and FINALIZER in obj["metadata"]["finalizers"]
    assert obj["status"]["backend"] == {"kind": "BridgeBackend", "name": "slurm-a", "type": "slurm",
                                        "url": "http://slurm-a:6820"}
    assert executor.poll_due(now=2000.0) == 1 and runner.handed[-1][0] == "poll"
    assert executor.stats["secret_reads"] == 2


def test_an_edited_backend_object_reaches_the_next_poll_when_its_url_stays():
    catalog = FakeCatalog([backend_object("slurm-a")])
    kube, backend, runner, queue, executor = setup(catalog)
    kube.create(ref_job("a"))
    settle(executor, queue)
    catalog.put(backend_object("slurm-a", spec={"apiVersion": "v0.0.40"}))
    executor.poll_due(now=2000.0)
    assert [call[:2] for call in runner.calls] == [("submit", "http://slurm-a:6820"), ("poll", "http://slurm-a:6820")]


def test_a_url_changed_after_submit_gets_no_poll_cancel_or_retry_until_it_is_set_back():
    """Issue 37 item 4: the job lives on the manager it was submitted to."""
    catalog = FakeCatalog([backend_object("slurm-a")])
    kube, backend, runner, queue, executor = setup(catalog)
    kube.create(ref_job("a"))
    settle(executor, queue)
    catalog.put(backend_object("slurm-a", spec={"url": "http://slurm-a-new:6820"}))
    executor.poll_due(now=2000.0)
    assert [call[:2] for call in runner.calls] == [("submit", "http://slurm-a:6820")]
    reachable = conditions(kube.objects["ns/a"])["BackendReachable"]
    assert reachable["status"] == "False" and reachable["reason"] == "BackendURLChanged"
    assert "http://slurm-a:6820" in reachable["message"] and "http://slurm-a-new:6820" in reachable["message"]
    assert kube.objects["ns/a"]["status"]["backend"]["url"] == "http://slurm-a:6820"
    kube.delete("ns/a")
    settle(executor, queue)
    assert [call[0] for call in runner.calls] == ["submit"], "no cancel at the new URL either"
    assert "ns/a" in [key for key, _delay in queue.later], "retried later, at the backoff's cap"
    catalog.put(backend_object("slurm-a"))   # planned again at once
    settle(executor, queue)
    assert [call[:2] for call in runner.calls][1:] == [("cancel", "http://slurm-a:6820")]


def test_a_cluster_backend_reads_one_shared_secret_or_each_namespaces_own():
    shared = backend_object("shared", kind="ClusterBridgeBackend",
                            spec={"credentialsSecretRef": {"name": "site", "namespace": "bridge-system"}})
    own = backend_object("own", kind="ClusterBridgeBackend", spec={"credentialsSecretRef": {"name": "creds"}})
    secrets = {"bridge-system/site": {"user": "svc", "token": "site-token"}, "ns/creds": {"user": "u", "token": "tenant-token"},
               "other/creds": {"user": "v", "token": "other-token"}}
    kube, backend, runner, queue, executor = setup(FakeCatalog([shared, own]), secrets=secrets)
    executor.runner = runner = Connections(backend)
    kube.create(ref_job("a", "shared", kind="ClusterBridgeBackend"))
    kube.create(ref_job("b", "own", kind="ClusterBridgeBackend"))
    kube.create(ref_job("c", "own", kind="ClusterBridgeBackend", namespace="other"))
    settle(executor, queue)
    tokens = sorted(credentials["token"] for _action, _connection, credentials in runner.handed)
    assert tokens == ["other-token", "site-token", "tenant-token"], "one runner call per (backend, namespace)"
    assert "site-token" not in repr(kube.objects) + repr(kube.events)


def test_the_kubeconfig_check_applies_to_a_backend_objects_secret_too():
    kubeconfig = "apiVersion: v1\nusers:\n- name: u\n  user:\n    exec: {command: /bin/sh}\n"
    catalog = FakeCatalog([backend_object("k8s", spec={"type": "kubernetes", "url": None,
                                                       "credentialsSecretRef": {"name": "kc"}})])
    kube, backend, runner, queue, executor = setup(catalog, secrets={"ns/kc": {"kubeconfig": kubeconfig}})
    kube.create(ref_job("a", "k8s"))
    settle(executor, queue)
    assert not runner.calls and conditions(kube.objects["ns/a"])["BackendReachable"]["reason"] == "InsecureKubeconfig"


# ------------------------------------------------------------------ waiting for the object

def test_a_missing_backend_object_waits_with_backoff_and_is_submitted_when_it_appears():
    catalog = FakeCatalog()
    kube, backend, runner, queue, executor = setup(catalog)
    kube.create(ref_job("a"))
    settle(executor, queue)
    obj = kube.objects["ns/a"]
    submitted = conditions(obj)["Submitted"]
    assert obj["status"]["phase"] == "Pending" and submitted["status"] == "False"
    assert submitted["reason"] == "BackendNotFound" and "BridgeBackend 'slurm-a' in namespace 'ns'" in submitted["message"]
    assert ("ns/a", RETRY_BASE) in queue.later and not runner.calls
    queue.keys.append("ns/a")                 # its retry comes due: still missing, a longer wait, never Failed
    settle(executor, queue)
    assert [delay for key, delay in queue.later if key == "ns/a"] == [RETRY_BASE, RETRY_BASE * 2]
    assert kube.objects["ns/a"]["status"]["phase"] == "Pending"
    catalog.put(backend_object("other"))      # another object plans nothing
    assert not queue.keys
    catalog.put(backend_object("slurm-a"))
    assert queue.keys == ["ns/a"], "planned at once when its object appears"
    settle(executor, queue)
    assert kube.objects["ns/a"]["status"]["jobId"] and len(backend.submits) == 1
    assert conditions(kube.objects["ns/a"])["Submitted"]["reason"] == "Submitted"


def test_without_a_catalog_a_backend_ref_waits():
    kube, backend, runner, queue, executor = setup(None)
    kube.create(ref_job("a"))
    settle(executor, queue)
    assert conditions(kube.objects["ns/a"])["Submitted"]["reason"] == "BackendNotFound" and not runner.calls


def test_a_backend_object_gone_after_the_submit_makes_the_poll_wait_not_fail():
    catalog = FakeCatalog([backend_object("slurm-a")])
    kube, backend, runner, queue, executor = setup(catalog)
    kube.create(ref_job("a"))
    settle(executor, queue)
    catalog.remove(backend_object("slurm-a"))
    executor.poll_due(now=2000.0)
    obj = kube.objects["ns/a"]
    assert obj["status"]["phase"] == "Queued" and conditions(obj)["BackendReachable"]["reason"] == "BackendNotFound"


# ------------------------------------------------------------------ what a namespace may use

def test_a_cluster_backend_whose_selector_does_not_admit_the_namespace_is_refused():
    restricted = backend_object("gpu", kind="ClusterBridgeBackend",
                                spec={"namespaceSelector": {"matchLabels": {"bridge.dev/gpu": "yes"}}})
    catalog = FakeCatalog([restricted], namespaces={"ns": {"team": "a"}, "gpu-team": {"bridge.dev/gpu": "yes"}})
    kube, backend, runner, queue, executor = setup(catalog, secrets={"ns/creds": {"token": "t"}, "gpu-team/creds": {"token": "t"}})
    kube.create(ref_job("a", "gpu", kind="ClusterBridgeBackend"))
    kube.create(ref_job("b", "gpu", kind="ClusterBridgeBackend", namespace="gpu-team"))
    settle(executor, queue)
    refused = kube.objects["ns/a"]
    failed = conditions(refused)["Failed"]
    assert refused["status"]["phase"] == "Failed" and refused["status"]["failureClass"] == "rejected"
    assert failed["reason"] == "NamespaceNotAllowed"
    assert "ClusterBridgeBackend 'gpu'" in failed["message"] and "bridge.dev/gpu" in failed["message"]
    assert not refused["metadata"]["finalizers"], "refused before any side effect"
    assert kube.objects["gpu-team/b"]["status"]["jobId"] and len(backend.submits) == 1


def test_a_namespace_whose_labels_are_not_known_yet_waits_rather_than_fails():
    restricted = backend_object("gpu", kind="ClusterBridgeBackend", spec={"namespaceSelector": {"matchLabels": {"x": "y"}}})
    kube, backend, runner, queue, executor = setup(FakeCatalog([restricted]))
    kube.create(ref_job("a", "gpu", kind="ClusterBridgeBackend"))
    settle(executor, queue)
    obj = kube.objects["ns/a"]
    assert obj["status"]["phase"] == "Pending" and conditions(obj)["Submitted"]["reason"] == "NamespaceNotFound"
    assert not runner.calls


def test_the_operators_policy_applies_to_a_tenants_bridge_backend_but_not_to_a_cluster_backend():
    policy = Policy(allowed_urls=["https://hpc.example.org"])
    catalog = FakeCatalog([backend_object("elsewhere", spec={"url": "https://evil.example.org"}),
                           backend_object("site", kind="ClusterBridgeBackend", spec={"url": "https://other.example.org"})])
    kube, backend, runner, queue, executor = setup(catalog, policy=policy)
    kube.create(ref_job("a", "elsewhere"))
    kube.create(ref_job("b", "site", kind="ClusterBridgeBackend"))
    settle(executor, queue)
    refused = kube.objects["ns/a"]
    failed = conditions(refused)["Failed"]
    assert refused["status"]["phase"] == "Failed" and failed["reason"] == "BackendURLNotAllowed"
    assert "BridgeBackend 'elsewhere'" in failed["message"] and "spec.url" in failed["message"]
    assert kube.objects["ns/b"]["status"]["jobId"], "the platform team's object is not the tenant's to restrict"


def test_a_tenants_kubernetes_bridge_backend_without_a_secret_keeps_to_its_namespace():
    catalog = FakeCatalog([backend_object("k8s", spec={"type": "kubernetes", "url": None, "credentialsSecretRef": None,
                                                       "namespace": "kube-system"})])
    kube, backend, runner, queue, executor = setup(catalog)
    kube.create(ref_job("a", "k8s"))
    settle(executor, queue)
    assert conditions(kube.objects["ns/a"])["Failed"]["reason"] == "NamespaceNotAllowed" and not runner.calls


def test_inline_jobs_record_their_backend_type_in_status():
    kube, backend, runner, queue, executor = setup(FakeCatalog())
    kube.create(bridgejob("a"))
    settle(executor, queue)
    assert kube.objects["ns/a"]["status"]["backend"] == {"type": "slurm", "url": "http://slurm:6820"}
