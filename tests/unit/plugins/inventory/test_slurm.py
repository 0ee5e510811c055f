"""Unit tests of the bridge.hpc.slurm inventory plugin with the Slurm client stubbed.

Partitions and nodes are slurmrestd v0.0.38 objects as the real 22.05 cluster under tools/ answers
(plus a GPU partition and two more nodes), run through the client's own normalize_* functions, so
the plugin sees exactly what SlurmClient.partitions() and .nodes() return.
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

from ansible_collections.bridge.hpc.plugins.inventory import slurm as plugin_module
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.fit import normalize_node, normalize_partition
from ansible_collections.bridge.hpc.tests.unit.plugins.inventory.harness import (
    InventoryPluginContract,
    PluginRunner,
    cache_config,
    hostvars,
    members,
)

NAME = "bridge.hpc.slurm"
TOKEN = "eyJhbGciOiJIUzI1NiJ9.secret-token-value"
FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "slurm")


def v38_partition(name, nodes, default=False, state="UP", max_time=30, default_time=10, max_nodes=-1, cpus=2):
    return {
        "flags": ["default"] if default else [], "preemption_mode": ["disabled"],
        "default_memory_per_cpu": None, "default_time_limit": default_time, "maximum_cpus_per_node": -1,
        "maximum_memory_per_node": None, "maximum_nodes_per_job": max_nodes, "max_time_limit": max_time,
        "min nodes per job": 0, "name": name, "nodes": nodes, "state": state, "total_cpus": cpus,
        "total_nodes": len(nodes.split(",")), "tres": "cpu=%d,node=1,billing=%d" % (cpus, cpus),
    }


def v38_node(name, partitions, state="idle", flags=(), cpus=2, alloc_cpus=0, memory=4000, gres="", features=""):
    return {
        "name": name, "hostname": name, "address": "127.0.0.1", "state": state, "state_flags": list(flags),
        "cpus": cpus, "alloc_cpus": alloc_cpus, "idle_cpus": cpus - alloc_cpus, "real_memory": memory,
        "alloc_memory": 0, "free_memory": 22482, "gres": gres, "gres_used": "", "features": features,
        "active_features": features, "partitions": list(partitions), "reason": "", "slurmd_version": "22.05.8",
    }


PARTITIONS = [normalize_partition(p) for p in (
    v38_partition("debug", "vm", default=True),
    v38_partition("batch", "vm", max_time=1440, default_time=60, max_nodes=1),
    v38_partition("gpu", "g1,g2", state="DOWN", max_time=4320, default_time=60, cpus=64),
)]
NODES = [normalize_node(n) for n in (
    v38_node("vm", ["debug", "batch"]),
    v38_node("g1", ["gpu"], state="mixed", cpus=32, alloc_cpus=8, memory=256000,
             gres="gpu:a100:4(S:0-1)", features="a100,ib"),
    v38_node("g2", ["gpu"], flags=["DRAIN"], cpus=32, memory=512000, gres="gpu:a100:4(S:0-1)",
             features="a100,nvme"),
)]


class FakeClient(SlurmClient):
    """Stands in for SlurmClient's reads: records every construction, answers with normalized dicts."""

    instances = []
    partitions_payload = PARTITIONS
    nodes_payload = NODES
    warnings_payload = []

    def __init__(self, url, user=None, token=None, api_version=None, validate_certs=True, ca_path=None,
                 timeout=30.0, retries=3, token_file=None, identity_key=None):
        self.url = url
        self.user = user
        self.token = token
        self.token_file = token_file
        self._api_version = api_version or "v0.0.38"
        self.cluster = None
        self.warnings = list(self.warnings_payload)
        self.closed = False
        FakeClient.instances.append(self)

    def partitions(self):
        return copy.deepcopy(self.partitions_payload)

    def nodes(self):
        return copy.deepcopy(self.nodes_payload)

    def close(self):
        self.closed = True


@pytest.fixture(autouse=True)
def fake_client(monkeypatch):
    FakeClient.instances = []
    monkeypatch.setattr(FakeClient, "partitions_payload", PARTITIONS)
    monkeypatch.setattr(FakeClient, "nodes_payload", NODES)
    monkeypatch.setattr(FakeClient, "warnings_payload", [])
    monkeypatch.setattr(plugin_module, "SlurmClient", FakeClient)
    for var in ("SLURM_URL", "SLURM_USER", "SLURM_JWT", "SLURM_JWT_FILE"):
        monkeypatch.delenv(var, raising=False)
    return FakeClient


RUNNER = PluginRunner(plugin_module, NAME, {"url": "http://slurm.test:6820", "user": "bridge", "token": TOKEN}, "cluster.slurm.yml")
make_plugin = RUNNER.make_plugin
run = RUNNER.run


class TestSlurmAsEveryPlugin(InventoryPluginContract):
    runner = RUNNER
    manager = "Slurm"
    url_var = "slurm_url"
    host = "debug"
    other_url = "http://other.test:6820"
    missing_url = "needs the slurmrestd URL: set url in the inventory file or the environment variable SLURM_URL"
    warning = "slurmrestd: v0.0.38 is deprecated"
    read_call = "partitions"


# ---------------------------------------------------------------- file names

@pytest.mark.parametrize("name, wanted", [
    ("cluster.slurm.yml", True), ("cluster.slurm.yaml", True), ("slurm.yml", True),
    ("prod_slurm.yaml", True), ("cluster.yml", False), ("slurm.json", False), ("slurm.yml.bak", False),
])
def test_verify_file_accepts_slurm_yml_names(tmp_path, name, wanted):
    path = tmp_path / name
    path.write_text("plugin: bridge.hpc.slurm\n")
    assert make_plugin().verify_file(str(path)) is wanted


# ---------------------------------------------------------------- hosts, hostvars, groups

def test_partitions_become_local_hosts_in_partition_groups(tmp_path):
    inventory = run(tmp_path, {})
    assert members(inventory, "slurm_partitions") == ["batch", "debug", "gpu"]
    assert members(inventory, "slurm_partition_state_up") == ["batch", "debug"]
    assert members(inventory, "slurm_partition_state_down") == ["gpu"]
    assert members(inventory, "slurm_default_partition") == ["debug"]
    assert "slurm_nodes" not in inventory.groups
    assert "vm" not in inventory.hosts
    debug = hostvars(inventory, "debug")
    assert debug["ansible_connection"] == "local"
    assert debug["ansible_python_interpreter"] == "{{ ansible_playbook_python }}"
    assert is_trusted_as_template(debug["ansible_python_interpreter"])


def test_partition_hostvars_combine_partition_and_member_nodes(tmp_path):
    inventory = run(tmp_path, {})
    gpu = hostvars(inventory, "gpu")
    wanted = {
        "slurm_url": "http://slurm.test:6820",
        "slurm_api_version": "v0.0.38",
        "slurm_partition_name": "gpu",
        "slurm_partition_state": "DOWN",
        "slurm_partition_default": False,
        "slurm_partition_cpus": 64,
        "slurm_partition_nodes": 2,
        "slurm_partition_node_list": "g1,g2",
        "slurm_partition_memory_mb": 512000,
        "slurm_partition_max_time_minutes": 4320,
        "slurm_partition_max_time": "3-00:00:00",
        "slurm_partition_default_time_minutes": 60,
        "slurm_partition_default_time": "01:00:00",
        "slurm_partition_max_nodes_per_job": None,
        "slurm_partition_gpus": 8,
        "slurm_partition_gres": ["gpu:a100:4(S:0-1)"],
        "slurm_partition_features": ["a100", "ib", "nvme"],
        "slurm_partition_node_states": {"mixed": 1, "idle": 1, "drain": 1},
        # g2 is drained: its 32 idle CPUs are not free for jobs.
        "slurm_partition_free_cpus": 24,
    }
    assert dict((k, gpu[k]) for k in wanted) == wanted
    assert "slurm_cluster" not in gpu
    debug = hostvars(inventory, "debug")
    assert debug["slurm_partition_default"] is True
    assert debug["slurm_partition_max_nodes_per_job"] is None
    assert hostvars(inventory, "batch")["slurm_partition_max_nodes_per_job"] == 1


def v42_partition(name, cluster):
    """A partition as slurmrestd v0.0.42 (Slurm 24.11) sends it, trimmed to what normalization reads."""
    unset = {"set": False, "infinite": False, "number": 0}
    return {
        "name": name, "cluster": cluster, "nodes": {"allowed_allocation": "", "configured": "vm", "total": 1},
        "cpus": {"task_binding": 0, "total": 2}, "partition": {"state": ["UP"]},
        "tres": {"billing_weights": "", "configured": "cpu=2,mem=4000M,node=1,billing=2"},
        "defaults": {"memory_per_cpu": 0, "partition_memory_per_cpu": unset,
                     "time": {"set": True, "infinite": False, "number": 10}},
        "maximums": {"nodes": {"set": False, "infinite": True, "number": 0},
                     "partition_memory_per_node": {"set": True, "infinite": False, "number": 0},
                     "time": {"set": True, "infinite": False, "number": 30}},
        "minimums": {"nodes": 0},
    }


@pytest.mark.parametrize("cluster, wanted", [("c2411", "c2411"), ("", None)])
def test_cluster_name_when_slurm_reports_it(tmp_path, fake_client, cluster, wanted):
    fake_client.partitions_payload = [normalize_partition(v42_partition("debug", cluster))]
    fake_client.nodes_payload = [normalize_node(v38_node("vm", ["debug"]))]
    inventory = run(tmp_path, {"api_version": "v0.0.42"})
    debug = hostvars(inventory, "debug")
    assert debug.get("slurm_cluster") == wanted
    assert debug["slurm_partition_max_time_minutes"] == 30
    assert debug["slurm_partition_max_nodes_per_job"] is None


def test_remote_strings_are_not_trusted_for_templating(tmp_path, fake_client):
    evil = normalize_partition(v38_partition("debug", "vm", default=True))
    evil["tres"] = "{{ lookup('pipe', 'id') }}"
    fake_client.partitions_payload = [evil]
    inventory = run(tmp_path, {})
    debug = hostvars(inventory, "debug")
    assert not is_trusted_as_template(debug["slurm_partition_tres"])
    assert not is_trusted_as_template(debug["slurm_partition_name"])
    assert not any(is_trusted_as_template(f) for f in hostvars(inventory, "debug")["slurm_partition_features"])


def test_nodes_become_hosts_with_state_and_partition_groups(tmp_path):
    inventory = run(tmp_path, {"include_nodes": True})
    assert members(inventory, "slurm_nodes") == ["g1", "g2", "vm"]
    assert members(inventory, "slurm_node_state_idle") == ["g2", "vm"]
    assert members(inventory, "slurm_node_state_drain") == ["g2"]
    assert members(inventory, "slurm_node_state_mixed") == ["g1"]
    assert members(inventory, "slurm_partition_gpu_nodes") == ["g1", "g2"]
    assert members(inventory, "slurm_partition_debug_nodes") == ["vm"]
    g1 = hostvars(inventory, "g1")
    assert g1["slurm_node_gpus"] == 4 and g1["slurm_node_free_cpus"] == 24
    assert g1["slurm_node_features"] == ["a100", "ib"] and g1["slurm_node_usable"] is True
    assert hostvars(inventory, "g2")["slurm_node_usable"] is False
    # Nodes are machines: the plugin leaves their connection alone.
    assert "ansible_connection" not in g1 and "ansible_python_interpreter" not in g1
    assert not any(k.startswith("slurm_partition_") for k in g1)


def test_partition_group_names_are_sanitized(tmp_path, fake_client):
    fake_client.partitions_payload = [normalize_partition(v38_partition("gpu-a100.big", "n-1"))]
    fake_client.nodes_payload = [normalize_node(v38_node("n-1", ["gpu-a100.big"]))]
    inventory = run(tmp_path, {"include_nodes": True})
    assert members(inventory, "slurm_partition_gpu_a100_big_nodes") == ["n-1"]
    assert "gpu-a100.big" in inventory.hosts


def test_host_prefix_and_no_local_connection(tmp_path):
    inventory = run(tmp_path, {"host_prefix": "c1_", "set_local_connection": False})
    assert members(inventory, "slurm_partitions") == ["c1_batch", "c1_debug", "c1_gpu"]
    c1_debug = hostvars(inventory, "c1_debug")
    assert c1_debug["slurm_partition_name"] == "debug"
    assert "ansible_connection" not in c1_debug


def test_partition_named_like_a_node_needs_a_prefix(tmp_path, fake_client):
    fake_client.partitions_payload = [normalize_partition(v38_partition("vm", "vm"))]
    fake_client.nodes_payload = [normalize_node(v38_node("vm", ["vm"]))]
    with pytest.raises(AnsibleParserError, match="partition 'vm' and node 'vm' .*set host_prefix"):
        run(tmp_path, {"include_nodes": True})
    inventory = run(tmp_path, {"include_nodes": True, "host_prefix": "p_"})
    assert members(inventory, "slurm_partitions") == ["p_vm"]
    assert members(inventory, "slurm_partition_vm_nodes") == ["vm"]


def test_second_cluster_with_same_partition_names_is_refused(tmp_path):
    inventory = run(tmp_path, {})
    path = tmp_path / "other.slurm.yml"
    path.write_text(yaml.safe_dump({"plugin": NAME, "url": "http://other.test:6820"}))
    plugin = make_plugin()
    with pytest.raises(AnsibleParserError, match="host 'debug' already comes from the Slurm cluster at http://slurm.test:6820"):
        plugin.parse(inventory, DataLoader(), str(path))


# ---------------------------------------------------------------- constructed

def test_compose_groups_and_keyed_groups(tmp_path):
    inventory = run(tmp_path, {
        "include_nodes": True,
        "compose": {"walltime_hours": "slurm_partition_max_time_minutes // 60"},
        "groups": {"gpu_partitions": "slurm_partition_gpus | default(0) > 0",
                   "long_partitions": "slurm_partition_max_time_minutes | default(0) >= 1440"},
        "keyed_groups": [{"key": "slurm_partition_features | default([])", "prefix": "feature"},
                         {"key": "slurm_node_state | default('')", "prefix": "node"}],
    })
    assert hostvars(inventory, "batch")["walltime_hours"] == 24
    assert "walltime_hours" not in hostvars(inventory, "vm")
    assert members(inventory, "gpu_partitions") == ["gpu"]
    assert members(inventory, "long_partitions") == ["batch", "gpu"]
    assert members(inventory, "feature_nvme") == ["gpu"]
    assert members(inventory, "node_mixed") == ["g1"]


def test_strict_keyed_group_with_empty_key_fails(tmp_path):
    config = {"keyed_groups": [{"key": "slurm_partition_reason_that_does_not_exist"}], "strict": True}
    with pytest.raises(AnsibleParserError, match="Could not generate group for host"):
        run(tmp_path, config)


# ---------------------------------------------------------------- overrides and extra features

def test_overrides_and_extra_features_apply_before_compose(tmp_path):
    seen = []
    inventory = run(tmp_path, {
        "partition_overrides": {"debug": {"slurm_partition_gpus": 2, "site_rack": "r12"}},
        "extra_features": {"debug": ["scratch"], "gpu": ["nvlink", "a100"]},
        "groups": {"gpu_partitions": "slurm_partition_gpus > 0"},
        "keyed_groups": [{"key": "slurm_partition_features", "prefix": "feature"}],
    }, seen_warnings=seen)
    debug = hostvars(inventory, "debug")
    assert debug["slurm_partition_gpus"] == 2 and debug["site_rack"] == "r12"
    assert debug["slurm_partition_features"] == ["scratch"]
    assert hostvars(inventory, "gpu")["slurm_partition_features"] == ["a100", "ib", "nvlink", "nvme"]
    assert members(inventory, "gpu_partitions") == ["debug", "gpu"]
    assert members(inventory, "feature_scratch") == ["debug"]
    assert members(inventory, "feature_nvlink") == ["gpu"]
    assert seen == []


def test_override_can_replace_features(tmp_path):
    inventory = run(tmp_path, {"partition_overrides": {"gpu": {"slurm_partition_features": ["h100"]}},
                               "extra_features": {"gpu": ["nvlink"]}})
    assert hostvars(inventory, "gpu")["slurm_partition_features"] == ["h100"]


def test_builtin_groups_follow_overrides(tmp_path):
    # Slurm 24.11's REST API reports no default partition: the inventory file can name it.
    inventory = run(tmp_path, {"partition_overrides": {"debug": {"slurm_partition_default": False},
                                                       "batch": {"slurm_partition_default": True},
                                                       "gpu": {"slurm_partition_state": "UP"}}})
    assert members(inventory, "slurm_default_partition") == ["batch"]
    assert members(inventory, "slurm_partition_state_up") == ["batch", "debug", "gpu"]
    assert "slurm_partition_state_down" not in inventory.groups


def test_unknown_partition_in_overrides_warns_with_known_partitions(tmp_path):
    seen = []
    inventory = run(tmp_path, {"partition_overrides": {"gpus": {"x": 1}},
                               "extra_features": {"nosuch": ["a"]}}, seen_warnings=seen)
    assert seen == [
        "bridge.hpc.slurm: partition_overrides names partition(s) gpus that the cluster does not have; "
        "its partitions: debug, batch, gpu",
        "bridge.hpc.slurm: extra_features names partition(s) nosuch that the cluster does not have; "
        "its partitions: debug, batch, gpu",
    ]
    assert "gpus" not in inventory.hosts


def test_unknown_partition_in_overrides_fails_when_strict(tmp_path):
    with pytest.raises(AnsibleParserError, match="names partition\\(s\\) gpus .* its partitions: debug, batch, gpu"):
        run(tmp_path, {"partition_overrides": {"gpus": {"x": 1}}, "strict": True})


@pytest.mark.parametrize("config, message", [
    ({"partition_overrides": {"gpu": ["a100"]}}, "partition_overrides.gpu must be a dict, got list"),
    ({"extra_features": {"gpu": "a100"}}, "extra_features.gpu must be a list, got str"),
])
def test_per_partition_options_are_type_checked(tmp_path, config, message):
    with pytest.raises(AnsibleParserError, match=message):
        run(tmp_path, config)


# ---------------------------------------------------------------- connection options

def test_connection_options_and_env_fallbacks(tmp_path, monkeypatch, fake_client):
    monkeypatch.setenv("SLURM_URL", "http://env.test:6820")
    monkeypatch.setenv("SLURM_USER", "envuser")
    monkeypatch.setenv("SLURM_JWT", "envtoken")
    path = tmp_path / "env.slurm.yml"
    path.write_text("plugin: bridge.hpc.slurm\napi_version: v0.0.38\ntimeout: 7\n")
    inventory = InventoryData()
    make_plugin().parse(inventory, DataLoader(), str(path))
    client = fake_client.instances[-1]
    assert (client.url, client.user, client.token, client.api_version) == (
        "http://env.test:6820", "envuser", "envtoken", "v0.0.38")
    assert client.closed
    assert hostvars(inventory, "debug")["slurm_url"] == "http://env.test:6820"


@pytest.mark.parametrize("in_file, environment, expected", [
    ("token_file: /run/jwt\n", {"SLURM_JWT": "envtoken"}, (None, "/run/jwt")),
    ("token: filetoken\n", {"SLURM_JWT_FILE": "/run/env-jwt"}, ("filetoken", None)),
    ("", {"SLURM_JWT_FILE": "/run/env-jwt"}, (None, "/run/env-jwt")),
    ("", {"SLURM_JWT": "envtoken"}, ("envtoken", None)),
], ids=["file option over SLURM_JWT", "token over SLURM_JWT_FILE", "SLURM_JWT_FILE", "SLURM_JWT"])
def test_token_or_token_file_set_in_the_file_wins_over_the_others_variable(
        tmp_path, monkeypatch, fake_client, in_file, environment, expected):
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value)
    path = tmp_path / "jwt.slurm.yml"
    path.write_text("plugin: bridge.hpc.slurm\nurl: http://slurm.test:6820\napi_version: v0.0.38\n" + in_file)
    make_plugin().parse(InventoryData(), DataLoader(), str(path))
    client = fake_client.instances[-1]
    assert (client.token, client.token_file) == expected


def test_slurm_jwt_and_slurm_jwt_file_both_set_is_a_parser_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JWT", "envtoken")
    monkeypatch.setenv("SLURM_JWT_FILE", "/run/env-jwt")
    path = tmp_path / "env.slurm.yml"
    path.write_text("plugin: bridge.hpc.slurm\nurl: http://slurm.test:6820\n")
    with pytest.raises(AnsibleParserError, match="SLURM_JWT and SLURM_JWT_FILE") as err:
        make_plugin().parse(InventoryData(), DataLoader(), str(path))
    assert "envtoken" not in str(err.value)


def test_token_file_is_read_again_when_slurm_refuses_its_token(tmp_path, monkeypatch):
    jwt = tmp_path / "jwt"
    jwt.write_text("SLURM_JWT=old-token\n")
    seen = []

    def handler(request):
        token = request.headers.get("x-slurm-user-token")
        seen.append(token)
        if token != "new-token":
            jwt.write_text("new-token\n")   # rotated meanwhile
            return httpx.Response(401, json={"errors": [{"error": "Authentication failure"}]})
        case = "partitions" if request.url.path.endswith("/partitions/") else "nodes"
        with open(os.path.join(FIXTURES, "v0.0.38", case + ".json")) as handle:
            return httpx.Response(200, json=json.load(handle)["body"])

    monkeypatch.setattr(plugin_module, "SlurmClient", real_client_answering(handler))
    inventory = run(tmp_path, {"api_version": "v0.0.38", "token": None, "token_file": str(jwt)})
    assert "debug" in inventory.hosts
    assert seen[:2] == ["old-token", "new-token"] and set(seen[2:]) == {"new-token"}


def real_client_answering(handler):
    """SlurmClient itself, its HTTP answered by handler: shows what the plugin makes of real errors."""
    class Answered(SlurmClient):
        def __init__(self, url, user=None, token=None, api_version=None, validate_certs=True, ca_path=None, timeout=30.0,
                     retries=3, token_file=None, identity_key=None):
            http = httpx.Client(base_url=url, transport=httpx.MockTransport(handler))
            transport = Transport(url, "Slurm", http_client=http, retries=retries, sleep=lambda s: None)
            super(Answered, self).__init__(url, user=user, token=token, api_version=api_version, transport=transport,
                                           token_file=token_file)
    return Answered


def test_auth_failure_is_a_parser_error_without_the_token(tmp_path, monkeypatch):
    def handler(request):
        assert request.url.path == "/slurm/v0.0.38/partitions/"
        # slurmrestd's meta names its release, so its words are said (scrubbed).
        return httpx.Response(401, json={"meta": {"Slurm": {"release": "22.05.8"}},
                                         "errors": [{"error": "token %s expired" % TOKEN}]})

    monkeypatch.setattr(plugin_module, "SlurmClient", real_client_answering(handler))
    with pytest.raises(AnsibleParserError) as err:
        run(tmp_path, {"api_version": "v0.0.38"})
    message = str(err.value)
    assert message.startswith("bridge.hpc.slurm: Failed to list partitions on Slurm at http://slurm.test:6820: "
                              "authentication failed")
    assert "(HTTP 401)" in message
    assert TOKEN not in message and "********" in message


def test_real_client_discovers_version_and_reads_partitions(tmp_path, monkeypatch):
    bodies = {
        "/slurm/v0.0.38/partitions/": {"partitions": [p["native"] for p in PARTITIONS], "errors": []},
        "/slurm/v0.0.38/nodes/": {"nodes": [n["native"] for n in NODES], "errors": []},
        "/slurm/v0.0.38/ping/": {"pings": [], "errors": []},
    }

    def handler(request):
        assert request.headers["X-SLURM-USER-TOKEN"] == TOKEN
        if request.url.path in bodies:
            return httpx.Response(200, json=bodies[request.url.path])
        return httpx.Response(404)

    monkeypatch.setattr(plugin_module, "SlurmClient", real_client_answering(handler))
    inventory = run(tmp_path, {"include_nodes": True})
    assert hostvars(inventory, "gpu")["slurm_api_version"] == "v0.0.38"
    assert members(inventory, "slurm_partition_gpu_nodes") == ["g1", "g2"]


# ---------------------------------------------------------------- cache

def test_cache_hit_makes_no_client_call_and_rebuilds_groups(tmp_path, fake_client):
    run(tmp_path, cache_config(tmp_path))
    assert len(fake_client.instances) == 1
    inventory = run(tmp_path, cache_config(tmp_path, groups={"long": "slurm_partition_max_time_minutes >= 1440"},
                                           host_prefix="c1_"))
    assert len(fake_client.instances) == 1
    # Groups and constructed options come from this run's configuration, the data from the cache.
    assert members(inventory, "long") == ["c1_batch", "c1_gpu"]
    assert hostvars(inventory, "c1_gpu")["slurm_partition_free_cpus"] == 24


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
    assert payload["source"] == {"url": "http://slurm.test:6820", "user": "bridge", "api_version": None}
    assert [p["name"] for p in payload["partitions"]] == ["debug", "batch", "gpu"]


def test_flush_cache_reads_slurm_again_and_refreshes_the_cache(tmp_path, fake_client):
    run(tmp_path, cache_config(tmp_path))
    fake_client.partitions_payload = PARTITIONS[:1]
    inventory = run(tmp_path, cache_config(tmp_path), cache=False)
    assert len(fake_client.instances) == 2
    assert members(inventory, "slurm_partitions") == ["debug"]
    inventory = run(tmp_path, cache_config(tmp_path))
    assert len(fake_client.instances) == 2
    assert members(inventory, "slurm_partitions") == ["debug"]


# ---------------------------------------------------------------- recorded responses

def recorded_versions():
    """REST versions with recorded partitions.json and nodes.json under tests/unit/fixtures/slurm."""
    if not os.path.isdir(FIXTURES):
        return []
    return sorted(v for v in os.listdir(FIXTURES)
                  if all(os.path.exists(os.path.join(FIXTURES, v, f)) for f in ("partitions.json", "nodes.json")))


def recorded_body(version, name):
    with open(os.path.join(FIXTURES, version, name)) as handle:
        return json.load(handle)["body"]


@pytest.mark.parametrize("version", recorded_versions() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no recorded partitions.json/nodes.json under tests/unit/fixtures/slurm"))])
def test_recorded_responses_build_the_inventory(tmp_path, fake_client, version):
    """Real responses of every recorded REST version, through the client's normalization."""
    partitions = [normalize_partition(p) for p in recorded_body(version, "partitions.json")["partitions"]]
    nodes = [normalize_node(n) for n in recorded_body(version, "nodes.json")["nodes"]]
    fake_client.partitions_payload = partitions
    fake_client.nodes_payload = nodes
    inventory = run(tmp_path, {"include_nodes": True, "api_version": version})
    assert members(inventory, "slurm_partitions") == sorted(p["name"] for p in partitions)
    assert members(inventory, "slurm_nodes") == sorted(n["name"] for n in nodes)
    defaults = sorted(p["name"] for p in partitions if p["default"])
    assert sorted(h.name for h in inventory.groups[plugin_module.DEFAULT_PARTITION_GROUP].get_hosts()) == defaults
    for partition in partitions:
        variables = hostvars(inventory, partition["name"])
        assert variables["slurm_api_version"] == version
        assert variables["slurm_partition_cpus"] == partition["total_cpus"]
        assert variables["slurm_partition_max_time_minutes"] == partition["max_time_minutes"]
        sizes = [n["memory_mb"] for n in nodes if partition["name"] in n["partitions"]]
        assert variables["slurm_partition_memory_mb"] == max(sizes)
        assert sum(variables["slurm_partition_node_states"].values()) >= variables["slurm_partition_nodes"]
    for node in nodes:
        assert partition_groups_of(inventory, node["name"]) == sorted(node["partitions"])


def partition_groups_of(inventory, host):
    names = [g.name for g in inventory.get_host(host).get_groups()]
    return sorted(n[len("slurm_partition_"):-len("_nodes")] for n in names
                  if n.startswith("slurm_partition_") and n.endswith("_nodes"))


def test_partitions_have_their_capacity_record(tmp_path):
    inventory = run(tmp_path, {})
    gpu = hostvars(inventory, "gpu")["bridge_capacity"]
    # g2 is drained: only g1 counts.
    assert (gpu["name"], gpu["state"], gpu["usable"], gpu["max_time_minutes"], gpu["max_nodes"], gpu["cpus_per_node"],
            gpu["memory_mb_per_node"], gpu["gpus_per_node"], gpu["gpu_types"], gpu["features"]) == (
        "gpu", "DOWN", False, 4320, 1, 32, 256000, 4, ["a100"], ["a100", "ib"])
    debug = hostvars(inventory, "debug")["bridge_capacity"]
    assert debug["usable"] and debug["default"] and (debug["pending"], debug["running"]) == (None, None)
