"""ansible-inventory with the bridge.hpc.kubernetes plugin against the real cluster of
tools/kube-control-plane.sh with its node.

The output is compared with tests/integration/golden/inventory_kubernetes.json after masking what
the machine decides (allocatable CPUs and memory, the node's name and its labels of the host,
the apiserver's address) and naming nodes node1, node2 ... Regenerate the golden file with
BRIDGE_UPDATE_GOLDEN=1. The kubeconfig's content (with a sentinel token in it) never shows.
"""

import os
import subprocess

import yaml

from conftest import (
    REPO,
    VENV_BIN,
    ansible_env,
    ansible_inventory,
    compare_with_golden,
    everything,
    listed,
    mask_capacity,
    rename,
    require_kube_node,
    unwrap,
    write_inventory_file,
)

GOLDEN = os.path.join(REPO, "tests", "integration", "golden", "inventory_kubernetes.json")
VOLATILE = "<volatile>"
VOLATILE_VARS = frozenset(["k8s_server", "k8s_node_cpus", "k8s_node_memory_mb", "k8s_node_labels"])
CONFIG = {
    "plugin": "bridge.hpc.kubernetes",
    "strict": True,
    "compose": {"k8s_cpus_whole": "k8s_node_cpus | int"},
    "groups": {"can_run_a_small_job": "k8s_node_ready and k8s_node_cpus >= 1 and k8s_node_memory_mb >= 64"},
    "keyed_groups": [{"key": "k8s_node_labels['kubernetes.io/os']", "prefix": "os"}],
}


def stable(inventory):
    inventory = unwrap(inventory)
    hostvars = inventory.pop("_meta")["hostvars"]
    names = dict((host, "node%d" % index)
                 for index, host in enumerate(sorted(inventory.get("k8s_nodes", {}).get("hosts", [])), 1))
    for variables in hostvars.values():
        for key in VOLATILE_VARS & set(variables):
            variables[key] = VOLATILE
        mask_capacity(variables, ("cpus_per_node", "memory_mb_per_node"))
        if "k8s_cpus_whole" in variables:
            variables["k8s_cpus_whole"] = VOLATILE
    groups = dict((name, dict((k, sorted(v)) for k, v in group.items())) for name, group in inventory.items())
    return rename({"hostvars": hostvars, "groups": groups}, names)


def test_inventory_matches_golden_and_never_shows_the_kubeconfig(tmp_path):
    values = require_kube_node()
    with open(values["KUBECONFIG"]) as handle:
        kubeconfig = yaml.safe_load(handle)
    sentinel = "bridge-k8s-inventory-sentinel"
    # The admin kubeconfig as content, with a sentinel where a token would be (the client
    # certificate authenticates; the apiserver ignores a token it was not asked to check).
    kubeconfig["users"][0]["user"]["username"] = sentinel
    path = write_inventory_file(tmp_path, "x.kubernetes.yml", dict(CONFIG, kubeconfig_content=yaml.safe_dump(kubeconfig)))
    result = ansible_inventory(path, {"K8S_AUTH_KUBECONFIG": ""}, "-vvv")
    raw = listed(result)
    assert sentinel not in everything(result)
    assert values["KUBE_NODE_NAME"] in raw["k8s_nodes"]["hosts"]
    variables = raw["_meta"]["hostvars"][values["KUBE_NODE_NAME"]]
    assert set(variables["k8s_node_name"]) == {"__ansible_unsafe"}
    plain = unwrap(variables)
    assert plain["k8s_node_cpus"] >= 1 and plain["k8s_node_memory_mb"] >= 256 and plain["k8s_node_ready"]
    assert "ansible_connection" not in plain
    compare_with_golden(GOLDEN, stable(raw))


def test_ansible_doc_renders():
    result = subprocess.run([os.path.join(VENV_BIN, "ansible-doc"), "-t", "inventory", "bridge.hpc.kubernetes"],
                            env=ansible_env(), capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "k8s_node_ready" in result.stdout and "kubeconfig_content" in result.stdout
