"""The bridge.hpc.kubernetes inventory plugin with the real client and `kubernetes` library against
the apiserver stub (k8s_stub.py): nodes and Kueue LocalQueues as hosts, groups, compose, the cache
(without the kubeconfig), and a kubeconfig that is never echoed."""

import json
import os

import pytest

from ansible.errors import AnsibleParserError

from ansible_collections.bridge.hpc.plugins.inventory import kubernetes as plugin_module
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.client import K8sClient
from ansible_collections.bridge.hpc.tests.unit.plugins.inventory.harness import PluginRunner, cache_config, hostvars, members

from k8s_stub import ApiServerStub, node

NAME = "bridge.hpc.kubernetes"
RUNNER = PluginRunner(plugin_module, NAME, {"namespace": "research"}, "cluster.kubernetes.yml")
KUBECONFIG = "apiVersion: v1\nkind: Config\nusers:\n- {name: u, user: {token: s3cret-t0ken}}\n"


@pytest.fixture
def stub(monkeypatch):
    server = ApiServerStub(namespaces=("research",), kueue=True, nodes=[
        node("node-1", cpu="4", memory="8026164Ki", labels={"topology.kubernetes.io/zone": "a"}),
        node("gpu-1", cpu="64", memory="256Gi", gpus=8)])
    server.nodes[1]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    server.local_queues[("research", "team-a")] = {
        "metadata": {"name": "team-a", "namespace": "research"}, "spec": {"clusterQueue": "cluster-a"},
        "status": {"pendingWorkloads": 2, "admittedWorkloads": 1}}
    server.cluster_queue = {"metadata": {"name": "cluster-a"}, "spec": {"resourceGroups": [{
        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "32"},
                                                      {"name": "memory", "nominalQuota": "128Gi"},
                                                      {"name": "nvidia.com/gpu", "nominalQuota": "4"}]},
                    {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": "500m"}]}]}]}}
    route = server.route

    def with_cluster_queues(method, path, query, body):
        if path == "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/cluster-a":
            from k8s_stub import Response
            return Response(200, server.cluster_queue)
        return route(method, path, query, body)

    server.route = with_cluster_queues
    server.clients = []

    def from_options(cls, get):
        server.clients.append(dict((name, get(name)) for name in ("kubeconfig", "context", "namespace", "kubeconfig_content")))
        return server.client(get("namespace"))

    monkeypatch.setattr(K8sClient, "from_options", classmethod(from_options))
    return server


def test_nodes_become_hosts_with_allocatable_resources(tmp_path, stub):
    inventory = RUNNER.run(tmp_path, {"keyed_groups": [{"key": "k8s_node_labels['topology.kubernetes.io/zone'] | default('none')",
                                                        "prefix": "zone"}],
                                      "groups": {"gpu_nodes": "k8s_node_gpus > 0"}})
    assert members(inventory, "k8s_nodes") == ["gpu-1", "node-1"]
    assert members(inventory, "k8s_node_ready") == ["node-1"] and members(inventory, "k8s_node_not_ready") == ["gpu-1"]
    assert members(inventory, "gpu_nodes") == ["gpu-1"] and members(inventory, "zone_a") == ["node-1"]
    node_vars = hostvars(inventory, "node-1")
    assert (node_vars["k8s_node_cpus"], node_vars["k8s_node_memory_mb"], node_vars["k8s_node_gpus"]) == (4.0, 7838, 0)
    assert node_vars["k8s_server"] == "https://apiserver.test:6443" and node_vars["k8s_namespace"] == "research"
    assert "ansible_connection" not in node_vars


def test_kueue_local_queues_become_local_hosts_with_their_quota(tmp_path, stub):
    inventory = RUNNER.run(tmp_path, {"hosts": "queues", "host_prefix": "q_"})
    assert members(inventory, "k8s_queues") == ["q_team-a"]
    queue = hostvars(inventory, "q_team-a")
    assert (queue["k8s_queue_cluster_queue"], queue["k8s_queue_pending"], queue["k8s_queue_admitted"]) == ("cluster-a", 2, 1)
    assert (queue["k8s_queue_cpus"], queue["k8s_queue_memory_mb"], queue["k8s_queue_gpus"]) == (32.5, 131072, 4)
    assert queue["ansible_connection"] == "local"


def test_the_cache_holds_records_but_no_kubeconfig(tmp_path, stub):
    config = cache_config(tmp_path, kubeconfig_content=KUBECONFIG)
    RUNNER.run(tmp_path, config)
    inventory = RUNNER.run(tmp_path, config)
    assert len(stub.clients) == 1 and members(inventory, "k8s_nodes") == ["gpu-1", "node-1"]
    assert stub.clients[0]["kubeconfig_content"] == KUBECONFIG
    cached = "".join(open(os.path.join(str(tmp_path / "cache"), name)).read() for name in os.listdir(str(tmp_path / "cache")))
    assert "s3cret" not in cached and "native" not in json.loads(cached)
    RUNNER.run(tmp_path, cache_config(tmp_path, kubeconfig_content=KUBECONFIG, context="other"))
    assert len(stub.clients) == 2


def test_a_bad_kubeconfig_is_a_parser_error_without_its_content(tmp_path):
    with pytest.raises(AnsibleParserError) as failed:
        RUNNER.run(tmp_path, {"kubeconfig_content": "users: [{user: {token: s3cret-t0ken}}]\n  bad: ["})
    assert "bridge.hpc.kubernetes: Failed to connect to cluster on Kubernetes" in str(failed.value)
    assert "s3cret" not in str(failed.value)


@pytest.mark.parametrize("name, wanted", [("a.kubernetes.yml", True), ("a.k8s.yaml", True), ("a.lsf.yml", False)])
def test_verify_file_accepts_kubernetes_yml_names(tmp_path, name, wanted):
    path = tmp_path / name
    path.write_text("plugin: %s\n" % NAME)
    assert RUNNER.make_plugin().verify_file(str(path)) is wanted


def test_bridge_capacity_of_the_cluster_on_nodes_and_of_each_local_queue(tmp_path, stub):
    inventory = RUNNER.run(tmp_path, {})
    cluster = hostvars(inventory, "node-1")["bridge_capacity"]
    assert cluster == hostvars(inventory, "gpu-1")["bridge_capacity"]
    # gpu-1 is not ready: the record is node-1's.
    assert (cluster["name"], cluster["usable"], cluster["cpus_per_node"], cluster["gpus_per_node"]) == (None, True, 4, 0)
    assert (cluster["pending"], cluster["running"]) == (None, None)
    inventory = RUNNER.run(tmp_path, {"hosts": "queues"})
    queue = hostvars(inventory, "team-a")["bridge_capacity"]
    assert (queue["name"], queue["usable"], queue["pending"], queue["running"], queue["cpus_per_node"]) == (
        "team-a", True, 2, 1, None)
