"""bridge_controller.probe with a stub client (the collection's capacity() interface), an in-memory
catalog and Kubernetes: what status is written and when, events on Ready flips, the policy before any
request, the Secret the probe reads, and the metrics."""

import copy
import threading

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import ConnectionFailed
from bridge_controller.authority import NO_CREDENTIALS, Refused
from bridge_controller.backend_objects import ref_name
from bridge_controller.kube import Missing
from bridge_controller.policy import Policy
from bridge_controller.probe import Prober

CAPACITY = {"manager": "Slurm", "version": "25.05.1", "api_version": "v0.0.42", "queues": [
    {"name": "debug", "state": "UP", "usable": True, "default": True, "max_time_minutes": 60, "max_nodes": 2,
     "cpus_per_node": 4, "memory_mb_per_node": 7900, "gpus_per_node": 0, "gpu_types": [], "features": [],
     "qubits": None, "pending": 2, "running": 1}]}
TOKEN = "secret-token-value"


class FakeCatalog:
    def __init__(self, *objects):
        self.objects = dict((ref_name(obj), obj) for obj in objects)
        self.subscribers = []

    def backend(self, kind, namespace, name):
        for obj in self.objects.values():
            meta = obj["metadata"]
            if obj["kind"] == kind and meta["name"] == name and (kind == "ClusterBridgeBackend" or meta.get("namespace") == namespace):
                return copy.deepcopy(obj)
        return None

    def backends(self):
        return [copy.deepcopy(obj) for obj in self.objects.values()]

    def subscribe(self, callback):
        self.subscribers.append(callback)


class FakeKube:
    """Secrets, ConfigMaps, status patches (merged into the catalog's object) and events."""

    def __init__(self, catalog, secrets=None, config_maps=None):
        self.catalog = catalog
        self.secrets = secrets or {}
        self.config_maps = config_maps or {}
        self.patches, self.events, self.secret_reads = [], [], []

    def read_secret(self, namespace, name):
        self.secret_reads.append((namespace, name))
        if (namespace, name) not in self.secrets:
            raise Missing("Secret %s/%s" % (namespace, name))
        return dict(self.secrets[(namespace, name)])

    def read_config_map_key(self, namespace, name, key):
        try:
            return self.config_maps[(namespace, name)][key]
        except KeyError:
            raise Missing("ConfigMap '%s' not found in namespace '%s'" % (name, namespace))

    def patch_backend_status(self, obj, status):
        self.patches.append(copy.deepcopy(status))
        stored = self.catalog.objects[ref_name(obj)]
        merged = dict(stored.get("status") or {})
        for key, value in status.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        stored["status"] = merged

    def event(self, obj, reason, message, kind="Normal"):
        self.events.append((ref_name(obj), reason, message, kind))


class StubClient:
    def __init__(self, answer):
        self.answer = answer
        self.closed = False
        self.allow_list = None

    def capacity(self):
        if isinstance(self.answer, Exception):
            raise self.answer
        return copy.deepcopy(self.answer)

    def close(self):
        self.closed = True

    def limit_urls(self, allow_list):
        self.allow_list = allow_list


class Clients:
    """The probe's client factory: records the options each client was made with."""

    def __init__(self, answer=None):
        self.answer = CAPACITY if answer is None else answer
        self.made = []
        self.clients = []

    def __call__(self, backend_type, get):
        names = ("url", "api_version", "iam_url", "validate_certs", "ca_path", "timeout", "retries", "namespace",
                 "kubeconfig", "user", "token", "kubeconfig_content")
        self.made.append((backend_type, dict((name, get(name)) for name in names if get(name) is not None)))
        self.clients.append(StubClient(self.answer))
        return self.clients[-1]


def bridgebackend(name="slurm-a", namespace="team-a", generation=1, **spec):
    spec = dict({"type": "slurm", "url": "http://slurm.example:6820", "credentialsSecretRef": {"name": "slurm"}}, **spec)
    return {"apiVersion": "bridge.dev/v1alpha1", "kind": "BridgeBackend",
            "metadata": {"name": name, "namespace": namespace, "uid": "u-" + name, "generation": generation}, "spec": spec}


def clusterbackend(name="site", generation=1, **spec):
    spec.setdefault("type", "slurm")
    spec.setdefault("url", "http://slurm.example:6820")
    return {"apiVersion": "bridge.dev/v1alpha1", "kind": "ClusterBridgeBackend",
            "metadata": {"name": name, "uid": "u-" + name, "generation": generation}, "spec": spec}


class Clock:
    def __init__(self):
        self.wall = 1_800_000_000.0

    def now(self):
        import time

        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.wall))


class JobAccounts:
    """authority.Authority's job_credentials (a token of the Job ServiceAccount where there is one)
    and check_probe (authors in `forbidden` may read no Secret)."""

    def __init__(self, namespaces=("team-a",), forbidden=()):
        self.namespaces = namespaces
        self.forbidden = forbidden

    def check_probe(self, obj, backend):
        if obj["metadata"]["name"] in self.forbidden:
            raise Refused("AuthorForbidden", "'bob' may not get Secret '%s'" % backend["secret"])

    def job_credentials(self, namespace):
        if namespace not in self.namespaces:
            raise Refused(NO_CREDENTIALS, "no Job ServiceAccount in namespace '%s'" % namespace)
        return {"kubeconfig": "job-token-of-%s" % namespace}


def prober(tmp_path, *objects, secrets=None, config_maps=None, policy=None, clients=None, accounts=None):
    catalog = FakeCatalog(*objects)
    kube = FakeKube(catalog, secrets if secrets is not None else {("team-a", "slurm"): {"user": "alice", "token": TOKEN}},
                    config_maps)
    clock = Clock()
    probe = Prober(catalog, kube, policy or Policy(), str(tmp_path), authorizer=accounts or JobAccounts(),
                   clients=clients or Clients(), now=clock.now, wall=lambda: clock.wall)
    return probe, catalog, kube, clock


def stored(catalog, obj):
    return catalog.objects[ref_name(obj)]


def ready(status):
    return [c for c in status["conditions"] if c["type"] == "Ready"][0]


def test_a_probe_writes_ready_version_and_queues_and_says_so_in_an_event(tmp_path):
    obj = bridgebackend()
    clients = Clients()
    probe, catalog, kube, _clock = prober(tmp_path, obj, clients=clients)
    probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a"))
    status = stored(catalog, obj)["status"]
    assert (status["manager"], status["version"], status["apiVersion"], status["queueCount"]) == ("Slurm", "25.05.1", "v0.0.42", 1)
    assert status["queues"] == [{"name": "debug", "state": "UP", "usable": True, "default": True, "maxTimeMinutes": 60,
                                 "maxNodes": 2, "cpusPerNode": 4, "memoryMbPerNode": 7900, "gpusPerNode": 0,
                                 "gpuTypes": [], "features": [], "pending": 2, "running": 1}]
    assert status["observedGeneration"] == 1 and status["lastProbeTime"] == "2027-01-15T08:00:00Z"
    condition = ready(status)
    assert (condition["status"], condition["reason"], condition["observedGeneration"]) == ("True", "Probed", 1)
    assert condition["message"] == "Slurm 25.05.1 (API v0.0.42) answered: 1 queue, 1 usable"
    assert kube.events == [("BridgeBackend/team-a/slurm-a", "BackendReady", "Probed: " + condition["message"], "Normal")]
    # The client: the object's connection, the Secret's credentials as options, a short timeout.
    assert clients.made == [("slurm", {"url": "http://slurm.example:6820", "validate_certs": True, "timeout": 10.0,
                                       "retries": 1, "user": "alice", "token": TOKEN})]
    assert TOKEN not in repr(status) + repr(kube.events)


def test_an_unchanged_answer_writes_nothing_until_last_probe_time_is_an_interval_old(tmp_path):
    obj = bridgebackend(probeIntervalSeconds=30)
    probe, catalog, kube, clock = prober(tmp_path, obj)
    probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a"))
    clock.wall += 10
    assert probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a")) is None
    assert len(kube.patches) == 1
    clock.wall += 20
    assert probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a")) == {"lastProbeTime": "2027-01-15T08:00:30Z"}
    assert len(kube.events) == 1, "no flip, no event"


def test_a_failed_probe_flips_ready_with_the_error_type_keeps_what_was_seen_and_warns(tmp_path):
    obj = bridgebackend()
    clients = Clients()
    probe, catalog, kube, clock = prober(tmp_path, obj, clients=clients)
    probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a"))
    clients.answer = ConnectionFailed("connection refused", "read", "capacity", None, "Slurm", "http://slurm.example:6820")
    clock.wall += 1
    probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a"))
    status = stored(catalog, obj)["status"]
    condition = ready(status)
    assert (condition["status"], condition["reason"]) == ("False", "ConnectionFailed")
    assert "connection refused" in condition["message"]
    assert condition["lastTransitionTime"] == "2027-01-15T08:00:01Z"
    assert status["version"] == "25.05.1" and status["queueCount"] == 1, "the last answer stays, for the same spec"
    assert kube.events[-1][1:] == ("BackendNotReady", "ConnectionFailed: " + condition["message"], "Warning")
    # Failing again: nothing new to say.
    clock.wall += 1
    assert probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a")) is None
    # Back: Ready again, with an event.
    clients.answer = CAPACITY
    probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a"))
    assert kube.events[-1][1] == "BackendReady" and len(kube.events) == 3


def test_a_failure_after_a_spec_change_drops_what_the_old_spec_found(tmp_path):
    obj = bridgebackend()
    clients = Clients()
    probe, catalog, kube, _clock = prober(tmp_path, obj, clients=clients)
    probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a"))
    catalog.objects[ref_name(obj)]["metadata"]["generation"] = 2
    clients.answer = ConnectionFailed("refused", "read", "capacity", None, "Slurm", "http://other:6820")
    patch = probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a"))
    assert patch["version"] is None and patch["queues"] is None and patch["observedGeneration"] == 2
    assert "version" not in stored(catalog, obj)["status"]


def test_the_policy_refuses_a_bridgebackend_before_any_request_but_not_a_cluster_backend(tmp_path):
    policy = Policy(["http://allowed.example:6820"])
    local = bridgebackend()
    site = clusterbackend(credentialsSecretRef={"name": "slurm", "namespace": "bridge-system"})
    clients = Clients()
    secrets = {("team-a", "slurm"): {"user": "a", "token": "t"}, ("bridge-system", "slurm"): {"user": "s", "token": "t"}}
    probe, catalog, kube, _clock = prober(tmp_path, local, site, policy=policy, clients=clients, secrets=secrets)
    probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a"))
    condition = ready(stored(catalog, local)["status"])
    assert (condition["status"], condition["reason"]) == ("False", "BackendURLNotAllowed")
    assert condition["message"].startswith("spec.url: http://slurm.example:6820 is not among the backend URLs")
    assert clients.made == [] and kube.secret_reads == [], "nothing was read or sent"
    probe.probe(catalog.backend("ClusterBridgeBackend", None, "site"))
    assert ready(stored(catalog, site)["status"])["status"] == "True"
    assert kube.secret_reads == [("bridge-system", "slurm")]


def test_a_tenants_kubernetes_backend_without_a_secret_stays_in_its_namespace(tmp_path):
    obj = bridgebackend(type="kubernetes")
    obj["spec"] = {"type": "kubernetes", "namespace": "kube-system"}
    clients = Clients()
    probe, catalog, _kube, _clock = prober(tmp_path, obj, clients=clients)
    probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a"))
    assert ready(stored(catalog, obj)["status"])["reason"] == "NamespaceNotAllowed"
    assert clients.made == []


def test_kubernetes_without_a_secret_is_probed_as_the_namespaces_job_service_account_never_as_the_controller(tmp_path):
    obj = bridgebackend(type="kubernetes")
    del obj["spec"]["url"], obj["spec"]["credentialsSecretRef"]
    clients = Clients(dict(CAPACITY, manager="Kubernetes", version="v1.34.1", api_version="batch/v1"))
    probe, catalog, _kube, _clock = prober(tmp_path, obj, clients=clients)
    probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a"))
    assert clients.made == [("kubernetes", {"validate_certs": True, "timeout": 10.0, "retries": 1, "namespace": "team-a",
                                            "kubeconfig_content": "job-token-of-team-a"})]
    # Without that ServiceAccount: refused, nothing sent.
    clients = Clients()
    probe, catalog, _kube, _clock = prober(tmp_path, obj, clients=clients, accounts=JobAccounts(()))
    probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a"))
    assert ready(stored(catalog, obj)["status"])["reason"] == NO_CREDENTIALS
    assert clients.made == []


def test_a_kubernetes_secret_without_a_kubeconfig_lends_nothing(tmp_path):
    obj = bridgebackend(type="kubernetes")
    del obj["spec"]["url"]
    clients = Clients()
    probe, catalog, _kube, _clock = prober(tmp_path, obj, clients=clients, secrets={("team-a", "slurm"): {"note": "x"}})
    probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a"))
    condition = ready(stored(catalog, obj)["status"])
    assert (condition["status"], condition["reason"]) == ("False", NO_CREDENTIALS)
    assert clients.made == []


def test_a_missing_secret_is_secret_not_found_and_nothing_is_sent(tmp_path):
    obj = bridgebackend()
    clients = Clients()
    probe, catalog, kube, _clock = prober(tmp_path, obj, clients=clients, secrets={})
    probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a"))
    condition = ready(stored(catalog, obj)["status"])
    assert (condition["status"], condition["reason"]) == ("False", "SecretNotFound")
    assert condition["message"] == "Secret 'slurm' not found in namespace 'team-a'"
    assert clients.made == []
    assert kube.events[0][1] == "BackendNotReady"


def test_a_cluster_backend_with_each_tenants_secret_is_probed_with_the_probe_secret_or_not_at_all(tmp_path):
    without = clusterbackend("per-tenant", credentialsSecretRef={"name": "slurm"})
    with_probe = clusterbackend("with-probe", credentialsSecretRef={"name": "slurm"},
                                probeCredentialsSecretRef={"name": "probe", "namespace": "bridge-system"})
    clients = Clients()
    probe, catalog, kube, _clock = prober(tmp_path, without, with_probe, clients=clients,
                                          secrets={("bridge-system", "probe"): {"user": "probe", "token": "p"}})
    probe.probe(catalog.backend("ClusterBridgeBackend", None, "per-tenant"))
    condition = ready(stored(catalog, without)["status"])
    assert (condition["status"], condition["reason"]) == ("Unknown", "NoProbeCredentials")
    assert clients.made == []
    probe.probe(catalog.backend("ClusterBridgeBackend", None, "with-probe"))
    assert ready(stored(catalog, with_probe)["status"])["status"] == "True"
    assert clients.made[0][1]["user"] == "probe"


def test_a_ca_config_map_becomes_the_clients_ca_file(tmp_path):
    obj = clusterbackend(url="https://slurm.example:6820", caConfigMapRef={"name": "ca", "namespace": "bridge-system", "key": "ca.crt"})
    clients = Clients()
    probe, catalog, _kube, _clock = prober(tmp_path, obj, clients=clients,
                                           config_maps={("bridge-system", "ca"): {"ca.crt": "PEM"}})
    probe.probe(catalog.backend("ClusterBridgeBackend", None, "site"))
    path = clients.made[0][1]["ca_path"]
    assert path.startswith(str(tmp_path)) and open(path).read() == "PEM"
    missing = clusterbackend("other", caConfigMapRef={"name": "nope", "namespace": "bridge-system", "key": "ca.crt"})
    catalog.objects[ref_name(missing)] = missing
    probe.probe(catalog.backend("ClusterBridgeBackend", None, "other"))
    assert ready(stored(catalog, missing)["status"])["reason"] == "CAConfigMapNotFound"


def test_nothing_is_written_once_this_replica_may_not_act(tmp_path):
    obj = bridgebackend()
    probe, catalog, kube, _clock = prober(tmp_path, obj)
    probe.may_act = lambda: False
    assert probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a")) is None
    assert kube.patches == [] and kube.events == []


def test_new_objects_and_generations_are_due_at_once_status_writes_are_not(tmp_path):
    obj = bridgebackend()
    probe, catalog, kube, _clock = prober(tmp_path, obj)
    assert catalog.subscribers == [probe.observe]
    probe.observe("ADDED", obj)
    stopping = threading.Event()
    runner = threading.Thread(target=probe.run, args=(stopping,))
    runner.start()
    try:
        for _attempt in range(3000):
            if kube.patches and not probe._running:
                break
            threading.Event().wait(0.01)
        assert len(kube.patches) == 1
        due = probe._due[ref_name(obj)][4]
        # A status write (same generation) changes nothing; a new generation is due at once.
        probe.observe("MODIFIED", stored(catalog, obj))
        assert probe._due[ref_name(obj)][4] == due
        changed = copy.deepcopy(stored(catalog, obj))
        changed["metadata"]["generation"] = 2
        catalog.objects[ref_name(obj)]["metadata"]["generation"] = 2
        probe.observe("MODIFIED", changed)
        for _attempt in range(3000):
            if len(kube.patches) == 2:
                break
            threading.Event().wait(0.01)
        assert kube.patches[1]["observedGeneration"] == 2
        probe.observe("DELETED", changed)
        assert ref_name(obj) not in probe._due
    finally:
        stopping.set()
        runner.join(30)
    assert not runner.is_alive()


def test_metrics_per_backend(tmp_path):
    good, bad = bridgebackend(), clusterbackend("down", url="http://down.example:1")
    clients = Clients()
    probe, catalog, _kube, _clock = prober(tmp_path, good, bad, clients=clients)
    probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a"))
    clients.answer = ConnectionFailed("refused", "read", "capacity", None, "Slurm", "http://down.example:1")
    probe.probe(catalog.backend("ClusterBridgeBackend", None, "down"))
    lines = probe.metrics_lines()
    local = 'kind="BridgeBackend",namespace="team-a",name="slurm-a",type="slurm"'
    site = 'kind="ClusterBridgeBackend",namespace="",name="down",type="slurm"'
    assert "bridge_backend_ready{%s} 1" % local in lines
    assert "bridge_backend_ready{%s} 0" % site in lines
    assert 'bridge_backend_probes_total{%s,result="ok"} 1' % local in lines
    assert 'bridge_backend_probes_total{%s,result="failed"} 1' % site in lines
    assert 'bridge_backend_queue_pending{%s,queue="debug"} 2' % local in lines
    assert any(line.startswith("bridge_backend_probe_seconds{%s} " % local) for line in lines)


@pytest.mark.parametrize("value, escaped", [('a"b', 'a\\"b'), ("a\\b", "a\\\\b"), ("a\nb", "a\\nb")])
def test_label_values_are_escaped(value, escaped):
    from bridge_controller.probe import _escape

    assert _escape(value) == escaped


def test_a_tenants_backend_is_probed_under_the_allow_list_and_the_platform_teams_is_not(tmp_path):
    """Every request the probe's client sends is checked (issue 37): the list is set on the client
    of a BridgeBackend; a ClusterBridgeBackend's URL is the operator's own choice."""
    policy = Policy(["http://slurm.example:6820"])
    clients = Clients()
    probe, catalog, _kube, _clock = prober(tmp_path, bridgebackend(), clusterbackend(), policy=policy, clients=clients,
                                           secrets={("team-a", "slurm"): {"user": "u", "token": "t"}})
    probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a"))
    probe.probe(catalog.backend("ClusterBridgeBackend", None, "site"))
    assert [client.allow_list for client in clients.clients] == [policy.allow_list, None]


def test_a_tenants_backend_is_probed_with_its_secret_only_while_its_author_may_read_it(tmp_path):
    obj = bridgebackend()
    clients = Clients()
    probe, catalog, kube, _clock = prober(tmp_path, obj, clients=clients, accounts=JobAccounts(forbidden=("slurm-a",)))
    probe.probe(catalog.backend("BridgeBackend", "team-a", "slurm-a"))
    condition = ready(stored(catalog, obj)["status"])
    assert (condition["status"], condition["reason"]) == ("False", "AuthorForbidden")
    assert clients.made == [] and kube.secret_reads == [], "the Secret was neither read nor sent"
