"""ansible-inventory with the bridge.hpc.ray plugin against the real Ray head of tools/ray-cluster.sh.

The output is compared with tests/integration/golden/inventory_ray.json after masking what a
running cluster changes on its own (used amounts, which other tests' jobs move), what the machine
decides (memory, IP address, node id, the dashboard's port) and renaming nodes to node1, node2 ...
Regenerate the golden file with BRIDGE_UPDATE_GOLDEN=1.
"""

import os
import subprocess

from conftest import (
    REPO,
    VENV_BIN,
    ansible_env,
    ansible_inventory,
    check_cached_inventory_needs_no_backend,
    compare_with_golden,
    everything,
    listed,
    mask_capacity,
    rename,
    require_ray,
    unwrap,
    write_inventory_file,
)

GOLDEN = os.path.join(REPO, "tests", "integration", "golden", "inventory_ray.json")
VOLATILE = "<volatile>"
# A head without token auth ignores the Authorization header: this one must still never show up.
SENTINEL_TOKEN = "bridge-ray-inventory-sentinel-token"
VOLATILE_VARS = frozenset([
    "ansible_host", "ray_url", "ray_node_ip", "ray_node_memory_bytes", "ray_node_memory_mb",
    "ray_node_cpus_used", "ray_node_gpus_used", "ray_node_memory_used_bytes",
    "ray_node_object_store_memory_used_bytes",
])
RESOURCE_VARS = ("ray_node_resources", "ray_cluster_resources")

CONFIG = {
    "plugin": "bridge.hpc.ray",
    "strict": True,
    "compose": {"ray_role": "'head' if ray_node_head else 'worker'"},
    "groups": {"bridge_test_nodes": "'bridge_test' in ray_node_custom_resources"},
    "keyed_groups": [{"key": "ray_role", "prefix": "role"},
                     {"key": "ray_node_gpu_type", "prefix": "gpu", "default_value": "none"}],
}


def token_of(values):
    return values.get("RAY_TOKEN") or SENTINEL_TOKEN


def write_inventory(directory, values, **overrides):
    """An x.ray.yml for this head; the token stays in the environment (RAY_AUTH_TOKEN)."""
    config = dict(CONFIG, url=values["RAY_URL"])
    config.update(overrides)
    return write_inventory_file(directory, "x.ray.yml", config)


def run_inventory(path, values, *args):
    return ansible_inventory(path, {"RAY_AUTH_TOKEN": token_of(values), "RAY_ADDRESS": ""}, *args)


def stable(inventory):
    """The inventory without what changes between runs and machines, nodes named node1, node2 ..."""
    inventory = unwrap(inventory)
    hostvars = inventory.pop("_meta")["hostvars"]
    names = {}
    for index, host in enumerate(sorted(inventory.get("ray_nodes", {}).get("hosts", [])), 1):
        names[host] = "node%d" % index
        names[hostvars[host]["ray_node_id"]] = "<node id %d>" % index
    for variables in hostvars.values():
        for key in VOLATILE_VARS & set(variables):
            variables[key] = VOLATILE
        mask_capacity(variables, ("memory_mb_per_node",))
        for key in RESOURCE_VARS:
            for name, amount in (variables.get(key) or {}).items():
                amount["used"] = VOLATILE
                if name == "memory":
                    amount["total"] = VOLATILE
    groups = dict((name, dict((k, sorted(v)) for k, v in group.items())) for name, group in inventory.items())
    return rename({"hostvars": hostvars, "groups": groups}, names)


def test_inventory_matches_golden(tmp_path):
    values = require_ray()
    result = run_inventory(write_inventory(tmp_path, values), values, "-vvv")
    raw = listed(result)
    assert token_of(values) not in everything(result)
    head = raw["ray_head"]["hosts"]
    assert len(head) == 1
    variables = raw["_meta"]["hostvars"][head[0]]
    # Remote strings reach Ansible marked unsafe.
    assert set(variables["ray_node_name"]) == {"__ansible_unsafe"}
    plain = unwrap(variables)
    assert plain["ray_url"] == values["RAY_URL"]
    assert plain["ray_version"] == values["RAY_VERSION"]
    assert plain["ansible_host"] == plain["ray_node_ip"]
    # Used amounts are known once the autoscaler has reported, and never more than the total.
    for name, amount in plain["ray_cluster_resources"].items():
        assert amount["used"] is None or 0 <= amount["used"] <= amount["total"], name
    assert plain["ray_node_memory_mb"] == plain["ray_node_memory_bytes"] // (1024 * 1024)
    compare_with_golden(GOLDEN, stable(raw))


def test_cached_inventory_needs_no_ray(tmp_path):
    values = require_ray()
    check_cached_inventory_needs_no_backend(
        tmp_path, values["RAY_URL"], token_of(values),
        lambda directory, **overrides: write_inventory(directory, values, **overrides),
        lambda path, *args: run_inventory(path, values, *args))


def test_ansible_doc_renders():
    result = subprocess.run([os.path.join(VENV_BIN, "ansible-doc"), "-t", "inventory", "bridge.hpc.ray"],
                            env=ansible_env(), capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "include_dead" in result.stdout and "ray_node_state_dead" in result.stdout
