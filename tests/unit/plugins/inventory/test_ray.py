"""Unit tests of the bridge.hpc.ray inventory plugin with the Ray client stubbed.

Nodes are State API NodeStates shaped like the ones the real Ray 2.60 head under tools/ answers
(plus a GPU worker and a dead worker), run through the client's own normalize_node, so the plugin
sees exactly what RayClient.nodes() returns; usage has the shape of RayClient.node_usage().
"""

import copy
import json
import os

import httpx
import pytest
import yaml

from ansible.errors import AnsibleParserError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible.template import is_trusted_as_template

from ansible_collections.bridge.hpc.plugins.inventory import ray as plugin_module
from ansible_collections.bridge.hpc.plugins.module_utils._errors import ServerError
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
from ansible_collections.bridge.hpc.plugins.module_utils.ray.client import RayClient
from ansible_collections.bridge.hpc.plugins.module_utils.ray.fit import normalize_node
from ansible_collections.bridge.hpc.tests.unit.plugins.inventory.harness import (
    InventoryPluginContract,
    PluginRunner,
    cache_config,
    hostvars,
    members,
)

NAME = "bridge.hpc.ray"
TOKEN = "ray-secret-token-value-0123456789"
URL = "http://ray.test:8265"
FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "ray")
HEAD_ID = "a1" * 28
GPU_ID = "b2" * 28
DEAD_ID = "c3" * 28
GiB = 1024 ** 3


def node_state(node_id, ip, head=False, state="ALIVE", cpus=2.0, gpus=0.0, memory=24 * GiB, custom=None,
               labels=None, name=None, message=None):
    total = {"CPU": cpus, "memory": float(memory), "object_store_memory": 2e8, "node:%s" % ip: 1.0}
    if gpus:
        total["GPU"] = gpus
    if head:
        total["node:__internal_head__"] = 1.0
    total.update(custom or {})
    all_labels = {"ray.io/node-id": node_id}
    all_labels.update(labels or {})
    return {"node_id": node_id, "node_ip": ip, "is_head_node": head, "state": state, "state_message": message,
            "node_name": name or ip, "resources_total": total, "labels": all_labels,
            "start_time_ms": 1796006764712, "end_time_ms": 0}


NATIVE = [
    node_state(HEAD_ID, "10.0.0.1", head=True, custom={"bridge_test": 1.0}),
    node_state(GPU_ID, "10.0.0.2", cpus=32.0, gpus=4.0, memory=256 * GiB, name="gpu-1",
               custom={"accelerator_type:A100": 1.0}, labels={"ray.io/accelerator-type": "A100"}),
    node_state(DEAD_ID, "10.0.0.3", state="DEAD", message="Expected termination: received SIGTERM"),
]
NODES = [normalize_node(n) for n in NATIVE]


def pair(used, total):
    return {"used": used, "total": total}


USAGE = {
    HEAD_ID: {"CPU": pair(1.0, 2.0), "memory": pair(0.0, 24.0 * GiB), "object_store_memory": pair(586.0, 2e8),
              "bridge_test": pair(1.0, 1.0), "node:10.0.0.1": pair(0.0, 1.0), "node:__internal_head__": pair(0.0, 1.0)},
    GPU_ID: {"CPU": pair(8.5, 32.0), "GPU": pair(2.0, 4.0), "memory": pair(4.0 * GiB, 256.0 * GiB),
             "object_store_memory": pair(0.0, 2e8), "accelerator_type:A100": pair(0.0, 1.0),
             "node:10.0.0.2": pair(0.0, 1.0)},
}
RESOURCES = {"CPU": pair(9.5, 34.0), "GPU": pair(2.0, 4.0), "memory": pair(4.0 * GiB, 280.0 * GiB),
             "object_store_memory": pair(586.0, 4e8), "bridge_test": pair(1.0, 1.0),
             "accelerator_type:A100": pair(0.0, 1.0), "node:10.0.0.1": pair(0.0, 1.0)}


class FakeClient(RayClient):
    """Stands in for RayClient: records every construction, answers with normalized dicts."""

    instances = []
    nodes_payload = NODES
    usage_payload = USAGE
    resources_payload = RESOURCES
    warnings_payload = []

    def __init__(self, url, token=None, validate_certs=True, ca_path=None, timeout=30.0, retries=3):
        self.url = url
        self.token = token
        self.validate_certs = validate_certs
        self.timeout = timeout
        self.warnings = list(self.warnings_payload)
        self.closed = False
        FakeClient.instances.append(self)

    def version(self):
        return {"version": "4", "ray_version": "2.60.0", "session_name": "session_x"}

    def nodes(self):
        return copy.deepcopy(self.nodes_payload)

    def node_usage(self, nodes=None):
        return copy.deepcopy(self.usage_payload)

    def resources(self):
        return copy.deepcopy(self.resources_payload)

    def close(self):
        self.closed = True


@pytest.fixture(autouse=True)
def fake_client(monkeypatch):
    FakeClient.instances = []
    for name, value in (("nodes_payload", NODES), ("usage_payload", USAGE), ("resources_payload", RESOURCES),
                        ("warnings_payload", [])):
        monkeypatch.setattr(FakeClient, name, value)
    monkeypatch.setattr(plugin_module, "RayClient", FakeClient)
    for var in ("RAY_ADDRESS", "RAY_AUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    return FakeClient


RUNNER = PluginRunner(plugin_module, NAME, {"url": URL, "token": TOKEN}, "cluster.ray.yml")
make_plugin = RUNNER.make_plugin
run = RUNNER.run


class TestRayAsEveryPlugin(InventoryPluginContract):
    runner = RUNNER
    manager = "Ray"
    url_var = "ray_url"
    host = "10.0.0.1"
    other_url = "http://other.test:8265"
    missing_url = "needs the Ray dashboard URL: set url in the inventory file or the environment variable RAY_ADDRESS"
    warning = "the State API truncated the node list"
    read_call = "nodes"


# ---------------------------------------------------------------- file names

@pytest.mark.parametrize("name, wanted", [
    ("cluster.ray.yml", True), ("cluster.ray.yaml", True), ("ray.yml", True), ("prod_ray.yaml", True),
    ("cluster.yml", False), ("ray.json", False), ("ray.yml.bak", False), ("cluster.slurm.yml", False),
])
def test_verify_file_accepts_ray_yml_names(tmp_path, name, wanted):
    path = tmp_path / name
    path.write_text("plugin: bridge.hpc.ray\n")
    assert make_plugin().verify_file(str(path)) is wanted


# ---------------------------------------------------------------- hosts, hostvars, groups

def test_alive_nodes_become_hosts_in_role_groups(tmp_path):
    inventory = run(tmp_path, {})
    assert members(inventory, "ray_nodes") == ["10.0.0.1", "gpu-1"]
    assert members(inventory, "ray_head") == ["10.0.0.1"]
    assert members(inventory, "ray_workers") == ["gpu-1"]
    assert members(inventory, "ray_gpu_nodes") == ["gpu-1"]
    assert members(inventory, "ray_node_state_alive") == ["10.0.0.1", "gpu-1"]
    assert "ray_node_state_dead" not in inventory.groups
    assert "10.0.0.3" not in inventory.hosts


def test_node_hostvars(tmp_path):
    inventory = run(tmp_path, {})
    gpu = hostvars(inventory, "gpu-1")
    wanted = {
        "ansible_host": "10.0.0.2",
        "ray_url": URL,
        "ray_version": "2.60.0",
        "ray_node_id": GPU_ID,
        "ray_node_name": "gpu-1",
        "ray_node_ip": "10.0.0.2",
        "ray_node_head": False,
        "ray_node_state": "alive",
        "ray_node_state_message": None,
        "ray_node_cpus": 32,
        "ray_node_gpus": 4,
        "ray_node_gpu_type": "A100",
        "ray_node_memory_bytes": 256 * GiB,
        "ray_node_memory_mb": 256 * 1024,
        "ray_node_object_store_memory_bytes": 200000000,
        "ray_node_custom_resources": {"accelerator_type:A100": 1},
        "ray_node_labels": {"ray.io/node-id": GPU_ID, "ray.io/accelerator-type": "A100"},
        "ray_node_cpus_used": 8.5,
        "ray_node_gpus_used": 2,
        "ray_node_memory_used_bytes": 4 * GiB,
        "ray_node_object_store_memory_used_bytes": 0,
        "ray_node_resources": {"CPU": pair(8.5, 32), "GPU": pair(2, 4), "memory": pair(4 * GiB, 256 * GiB),
                               "object_store_memory": pair(0, 200000000), "accelerator_type:A100": pair(0, 1)},
    }
    assert dict((k, gpu.get(k)) for k in wanted) == wanted
    # Whole amounts are ints, so templates print 32 rather than 32.0.
    assert isinstance(gpu["ray_node_cpus"], int) and isinstance(gpu["ray_node_resources"]["GPU"]["used"], int)
    # Nodes are machines: the plugin leaves their connection alone.
    assert "ansible_connection" not in gpu and "ansible_python_interpreter" not in gpu
    head = hostvars(inventory, "10.0.0.1")
    assert head["ray_node_head"] is True and head["ray_node_gpus"] == 0 and head["ray_node_gpus_used"] == 0
    assert head["ray_node_gpu_type"] is None
    assert head["ray_node_resources"]["bridge_test"] == pair(1, 1)
    # Ray's per-node marker resources (node:<ip>) are noise, not resources to schedule on.
    assert not any(name.startswith("node:") for name in head["ray_node_resources"])
    assert head["ray_cluster_resources"] == {
        "CPU": pair(9.5, 34), "GPU": pair(2, 4), "memory": pair(4 * GiB, 280 * GiB),
        "object_store_memory": pair(586, 400000000), "bridge_test": pair(1, 1), "accelerator_type:A100": pair(0, 1)}
    assert gpu["ray_cluster_resources"] == head["ray_cluster_resources"]
    assert not any("token" in key for key in gpu)


def test_usage_unknown_before_the_autoscaler_reports(tmp_path, fake_client):
    # A head's first seconds: /api/cluster_status answers, with empty usage and usageByNode.
    fake_client.usage_payload = {}
    fake_client.resources_payload = {}
    inventory = run(tmp_path, {})
    gpu = hostvars(inventory, "gpu-1")
    assert (gpu["ray_node_cpus_used"], gpu["ray_node_gpus_used"], gpu["ray_node_memory_used_bytes"]) == (None, None, None)
    assert gpu["ray_node_resources"]["CPU"] == pair(None, 32)
    head = hostvars(inventory, "10.0.0.1")
    # Of what a node has none, none is used, known or not.
    assert head["ray_node_gpus_used"] == 0 and "GPU" not in head["ray_node_resources"]
    # Cluster totals are the alive nodes' sums; the dead node counts for nothing.
    assert head["ray_cluster_resources"]["CPU"] == pair(None, 34)
    assert head["ray_cluster_resources"]["GPU"] == pair(None, 4)


def test_cluster_status_failure_leaves_usage_unknown_with_a_warning(tmp_path, fake_client, monkeypatch):
    def broken(self, nodes=None):
        raise ServerError("Failed to get cluster status", "read", "cluster status", None, "Ray", URL, 500)

    monkeypatch.setattr(fake_client, "node_usage", broken)
    seen = []
    inventory = run(tmp_path, {}, seen_warnings=seen)
    assert seen == ["bridge.hpc.ray: used amounts are unknown: Failed to read cluster status on Ray at %s: "
                    "Failed to get cluster status (HTTP 500)" % URL]
    assert hostvars(inventory, "gpu-1")["ray_node_cpus_used"] is None
    assert hostvars(inventory, "gpu-1")["ray_cluster_resources"]["CPU"] == pair(None, 34)


def test_include_dead_adds_dead_nodes_outside_the_role_groups(tmp_path):
    inventory = run(tmp_path, {"include_dead": True})
    assert members(inventory, "ray_nodes") == ["10.0.0.1", "10.0.0.3", "gpu-1"]
    assert members(inventory, "ray_node_state_dead") == ["10.0.0.3"]
    assert members(inventory, "ray_node_state_alive") == ["10.0.0.1", "gpu-1"]
    assert members(inventory, "ray_workers") == ["gpu-1"]
    dead = hostvars(inventory, "10.0.0.3")
    assert dead["ray_node_state"] == "dead"
    assert dead["ray_node_state_message"] == "Expected termination: received SIGTERM"
    assert dead["ray_node_cpus_used"] is None


def test_dead_node_replaced_on_the_same_address_gets_its_id_appended(tmp_path, fake_client):
    # A head restarted on the same IP: Ray lists the old head as DEAD under the same node_name.
    old_id = "0f" * 28
    fake_client.nodes_payload = NODES + [normalize_node(node_state(old_id, "10.0.0.1", head=True, state="DEAD"))]
    inventory = run(tmp_path, {"include_dead": True})
    assert members(inventory, "ray_head") == ["10.0.0.1"]
    assert hostvars(inventory, "10.0.0.1")["ray_node_id"] == HEAD_ID
    old = "10.0.0.1_" + old_id[:12]
    assert members(inventory, "ray_node_state_dead") == sorted(["10.0.0.3", old])
    assert hostvars(inventory, old)["ray_node_name"] == "10.0.0.1"
    # Without include_dead the alive node alone has the name, with nothing appended.
    assert members(run(tmp_path, {}), "ray_nodes") == ["10.0.0.1", "gpu-1"]


def test_remote_strings_are_not_trusted_for_templating(tmp_path, fake_client):
    evil = node_state(HEAD_ID, "10.0.0.1", head=True, labels={"team": "{{ lookup('pipe', 'id') }}"})
    fake_client.nodes_payload = [normalize_node(evil)]
    inventory = run(tmp_path, {})
    head = hostvars(inventory, "10.0.0.1")
    assert not is_trusted_as_template(head["ray_node_labels"]["team"])
    assert not is_trusted_as_template(head["ray_node_name"])
    assert not is_trusted_as_template(head["ansible_host"])
    assert not is_trusted_as_template(head["ray_url"])


def test_state_group_names_are_sanitized_and_prefix_applies(tmp_path):
    inventory = run(tmp_path, {"host_prefix": "r1-"})
    assert members(inventory, "ray_nodes") == ["r1-10.0.0.1", "r1-gpu-1"]
    assert hostvars(inventory, "r1-gpu-1")["ray_node_name"] == "gpu-1"


def test_set_local_connection_replaces_ansible_host(tmp_path):
    inventory = run(tmp_path, {"set_local_connection": True})
    head = hostvars(inventory, "10.0.0.1")
    assert head["ansible_connection"] == "local"
    assert head["ansible_python_interpreter"] == "{{ ansible_playbook_python }}"
    assert is_trusted_as_template(head["ansible_python_interpreter"])
    assert "ansible_host" not in head


def test_second_cluster_with_same_node_names_is_refused(tmp_path):
    inventory = run(tmp_path, {})
    path = tmp_path / "other.ray.yml"
    path.write_text(yaml.safe_dump({"plugin": NAME, "url": "http://other.test:8265"}))
    with pytest.raises(AnsibleParserError, match="host '10.0.0.1' already comes from the Ray cluster at %s; set host_prefix" % URL):
        make_plugin().parse(inventory, DataLoader(), str(path))
    # With a prefix the two clusters live side by side.
    path.write_text(yaml.safe_dump({"plugin": NAME, "url": "http://other.test:8265", "host_prefix": "other_"}))
    make_plugin().parse(inventory, DataLoader(), str(path))
    assert members(inventory, "ray_head") == ["10.0.0.1", "other_10.0.0.1"]


# ---------------------------------------------------------------- constructed

def test_compose_groups_and_keyed_groups(tmp_path):
    inventory = run(tmp_path, {
        "compose": {"free_gpus": "ray_node_gpus - (ray_node_gpus_used | default(0, true))",
                    "ansible_host": "'ray-' ~ ray_node_ip"},
        "groups": {"gpus_free": "ray_node_gpus > (ray_node_gpus_used | default(0, true))",
                   "big_memory": "ray_node_memory_mb >= 100000"},
        "keyed_groups": [{"key": "ray_node_gpu_type", "prefix": "gpu", "default_value": "none"},
                         {"key": "ray_node_custom_resources", "prefix": "resource"}],
    })
    assert hostvars(inventory, "gpu-1")["free_gpus"] == 2
    assert hostvars(inventory, "10.0.0.1")["free_gpus"] == 0
    assert hostvars(inventory, "10.0.0.1")["ansible_host"] == "ray-10.0.0.1"
    assert members(inventory, "gpus_free") == ["gpu-1"]
    assert members(inventory, "big_memory") == ["gpu-1"]
    assert members(inventory, "gpu_A100") == ["gpu-1"]
    assert members(inventory, "gpu_none") == ["10.0.0.1"]
    assert members(inventory, "resource_bridge_test_1") == ["10.0.0.1"]


def test_strict_keyed_group_with_empty_key_fails(tmp_path):
    # The head has no GPU type: a keyed group on it needs default_value, or fails when strict.
    config = {"keyed_groups": [{"key": "ray_node_gpu_type", "prefix": "gpu"}], "strict": True}
    with pytest.raises(AnsibleParserError, match="key resulted empty for ray_node_gpu_type in host 10.0.0.1"):
        run(tmp_path, config)


# ---------------------------------------------------------------- connection options

def test_connection_options_and_env_fallbacks(tmp_path, monkeypatch, fake_client):
    monkeypatch.setenv("RAY_ADDRESS", "http://env.test:8265")
    monkeypatch.setenv("RAY_AUTH_TOKEN", "envtoken")
    path = tmp_path / "env.ray.yml"
    path.write_text("plugin: bridge.hpc.ray\ntimeout: 7\nvalidate_certs: false\n")
    inventory = InventoryData()
    make_plugin().parse(inventory, DataLoader(), str(path))
    client = fake_client.instances[-1]
    assert (client.url, client.token, client.timeout, client.validate_certs) == ("http://env.test:8265", "envtoken", 7.0, False)
    assert client.closed
    assert hostvars(inventory, "gpu-1")["ray_url"] == "http://env.test:8265"


def real_client_answering(handler):
    """RayClient itself, its HTTP answered by handler: shows what the plugin makes of real answers."""
    class Answered(RayClient):
        def __init__(self, url, token=None, validate_certs=True, ca_path=None, timeout=30.0, retries=3):
            headers = {"Authorization": "Bearer %s" % token} if token else {}
            http = httpx.Client(base_url=url, headers=headers, transport=httpx.MockTransport(handler))
            transport = Transport(url, "Ray", secrets=[token], http_client=http, retries=retries, sleep=lambda s: None)
            super(Answered, self).__init__(url, token=token, transport=transport)
    return Answered


def test_auth_failure_is_a_parser_error_without_the_token(tmp_path, monkeypatch):
    def handler(request):
        assert request.url.path == "/api/version"
        return httpx.Response(401, text="Unauthorized: token %s is not valid" % TOKEN)

    monkeypatch.setattr(plugin_module, "RayClient", real_client_answering(handler))
    with pytest.raises(AnsibleParserError) as err:
        run(tmp_path, {})
    message = str(err.value)
    assert message.startswith("bridge.hpc.ray: Failed to read version on Ray at %s: authentication failed" % URL)
    assert "(HTTP 401)" in message
    # A refused version leaves the server unknown as Ray: its text, and the token in it, are not shown.
    assert TOKEN not in message and "is not valid" not in message


# ---------------------------------------------------------------- recorded responses

def recorded_versions():
    """Ray versions with recorded version.json, nodes.json and a cluster status under tests/unit/fixtures/ray."""
    if not os.path.isdir(FIXTURES):
        return []
    needed = ("version.json", "nodes.json", "cluster_status_infeasible.json")
    return sorted(v for v in os.listdir(FIXTURES) if all(os.path.exists(os.path.join(FIXTURES, v, f)) for f in needed))


def recorded(version, name):
    with open(os.path.join(FIXTURES, version, name)) as handle:
        return json.load(handle)


@pytest.mark.parametrize("version", recorded_versions() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no recorded version.json/nodes.json/cluster_status_infeasible.json under tests/unit/fixtures/ray"))])
def test_recorded_responses_through_the_real_client(tmp_path, monkeypatch, version):
    """Real answers of a Ray head, through RayClient: what ansible-inventory would show."""
    answers = {"/api/version": recorded(version, "version.json"), "/api/v0/nodes": recorded(version, "nodes.json"),
               "/api/cluster_status": recorded(version, "cluster_status_infeasible.json")}
    seen = []

    def handler(request):
        seen.append(request.url.path)
        assert request.headers["Authorization"] == "Bearer %s" % TOKEN
        answer = answers[request.url.path]
        return httpx.Response(answer["status"], json=answer["body"])

    monkeypatch.setattr(plugin_module, "RayClient", real_client_answering(handler))
    inventory = run(tmp_path, {})
    natives = answers["/api/v0/nodes"]["body"]["data"]["result"]["result"]
    alive = [n for n in natives if n["state"] == "ALIVE"]
    assert members(inventory, "ray_nodes") == sorted(n["node_name"] for n in alive)
    assert members(inventory, "ray_head") == sorted(n["node_name"] for n in alive if n["is_head_node"])
    usage = answers["/api/cluster_status"]["body"]["data"]["clusterStatus"]["loadMetricsReport"]["usageByNode"]
    # The recordings come from one head session: the load report names the listed nodes.
    assert not usage or any(n["node_id"] in usage for n in alive)
    for native in alive:
        variables = hostvars(inventory, native["node_name"])
        assert variables["ray_version"] == answers["/api/version"]["body"]["ray_version"]
        assert variables["ray_node_cpus"] == native["resources_total"]["CPU"]
        assert variables["ray_node_memory_bytes"] == native["resources_total"]["memory"]
        # Resources come back under Ray's names, not the dashboard's camelCase (bridgeTest).
        names = set(variables["ray_node_custom_resources"]) | {"CPU", "memory", "object_store_memory"}
        if variables["ray_node_gpus"]:
            names.add("GPU")
        assert set(variables["ray_node_resources"]) == names
        assert set(variables["ray_cluster_resources"]) >= names
        if native["node_id"] in usage:
            assert variables["ray_node_cpus_used"] == usage[native["node_id"]]["CPU"][0]
            assert all(amount["used"] is not None for amount in variables["ray_node_resources"].values())
    assert "/api/cluster_status" in seen


# ---------------------------------------------------------------- cache

def test_cache_hit_makes_no_client_call_and_rebuilds_groups(tmp_path, fake_client):
    run(tmp_path, cache_config(tmp_path))
    assert len(fake_client.instances) == 1
    inventory = run(tmp_path, cache_config(tmp_path, groups={"busy": "ray_node_cpus_used > 1"}, host_prefix="r1_",
                                           include_dead=True))
    assert len(fake_client.instances) == 1
    # Groups, prefix and include_dead come from this run's configuration, the data from the cache.
    assert members(inventory, "busy") == ["r1_gpu-1"]
    assert members(inventory, "ray_node_state_dead") == ["r1_10.0.0.3"]
    assert hostvars(inventory, "r1_gpu-1")["ray_node_gpus_used"] == 2


def test_cache_holds_no_token_and_no_native_payload(tmp_path):
    run(tmp_path, cache_config(tmp_path))
    files = os.listdir(str(tmp_path / "cache"))
    assert len(files) == 1
    text = (tmp_path / "cache" / files[0]).read_text()
    assert TOKEN not in text and "native" not in text
    payload = json.loads(text)
    # ansible-core 2.19's jsonfile cache wraps the value in a tagged envelope.
    if "__payload__" in payload:
        payload = json.loads(payload["__payload__"])
    assert payload["source"] == {"url": URL}
    assert [n["node_id"] for n in payload["nodes"]] == [HEAD_ID, GPU_ID, DEAD_ID]


def test_flush_cache_reads_ray_again_and_refreshes_the_cache(tmp_path, fake_client):
    run(tmp_path, cache_config(tmp_path))
    fake_client.nodes_payload = NODES[:1]
    inventory = run(tmp_path, cache_config(tmp_path), cache=False)
    assert len(fake_client.instances) == 2
    assert members(inventory, "ray_nodes") == ["10.0.0.1"]
    inventory = run(tmp_path, cache_config(tmp_path))
    assert len(fake_client.instances) == 2
    assert members(inventory, "ray_nodes") == ["10.0.0.1"]


def test_every_node_has_the_clusters_capacity_record(tmp_path):
    inventory = run(tmp_path, {})
    cluster = hostvars(inventory, "gpu-1")["bridge_capacity"]
    assert cluster == hostvars(inventory, "10.0.0.1")["bridge_capacity"]
    assert (cluster["name"], cluster["usable"], cluster["max_nodes"], cluster["cpus_per_node"], cluster["gpus_per_node"],
            cluster["memory_mb_per_node"], cluster["gpu_types"]) == (None, True, 1, 32, 4, 256 * 1024, ["A100"])
