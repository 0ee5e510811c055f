"""ansible-inventory with the bridge.hpc.slurm plugin against every real Slurm version.

The output is compared with tests/integration/golden/inventory_slurm_<version>.json after masking
what a running cluster changes on its own (node states, allocated and free CPUs and memory) and the
name of the machine the cluster runs on. Regenerate the golden files with BRIDGE_UPDATE_GOLDEN=1.
"""

import os

import pytest

from conftest import (
    REPO,
    SLURM_VERSIONS,
    ansible_inventory,
    check_cached_inventory_needs_no_backend,
    compare_with_golden,
    everything,
    listed,
    mask_capacity,
    rename,
    require_slurm,
    unwrap,
    write_inventory_file,
)

GOLDEN = os.path.join(REPO, "tests", "integration", "golden")
VOLATILE = "<volatile>"
VOLATILE_VARS = frozenset([
    "slurm_partition_free_cpus", "slurm_partition_node_states",
    "slurm_node_state", "slurm_node_states", "slurm_node_usable", "slurm_node_reason",
    "slurm_node_alloc_cpus", "slurm_node_free_cpus", "slurm_node_alloc_memory_mb", "slurm_node_free_memory_mb",
])
VOLATILE_GROUP_PREFIXES = ("slurm_node_state_",)

CONFIG = {
    "plugin": "bridge.hpc.slurm",
    "include_nodes": True,
    "strict": True,
    "compose": {"walltime_hours": "(slurm_partition_max_time_minutes | default(0)) // 60"},
    "groups": {"long_partitions": "slurm_partition_max_time_minutes | default(0) >= 1440"},
    "keyed_groups": [{"key": "[slurm_partition_state] if slurm_partition_state is defined else []", "prefix": "partition_state"},
                     {"key": "slurm_node_partitions | default([])", "prefix": "node_in"}],
    "extra_features": {"debug": ["bridge_test"]},
}


def write_inventory(directory, values, **overrides):
    """An x.slurm.yml for this cluster; the token stays in the environment (SLURM_JWT)."""
    config = dict(CONFIG, url=values["SLURM_URL"], user=values["SLURM_USER"])
    config.update(overrides)
    return write_inventory_file(directory, "x.slurm.yml", config)


def stable(inventory):
    """The inventory without what changes between runs, with node names replaced by node1, node2 ..."""
    inventory = unwrap(inventory)
    meta = inventory.pop("_meta")
    hostvars = meta["hostvars"]
    for variables in hostvars.values():
        for key in VOLATILE_VARS & set(variables):
            variables[key] = VOLATILE
        # What the usable nodes give, which a drained node changes.
        mask_capacity(variables, ("usable", "max_nodes", "cpus_per_node", "memory_mb_per_node", "gpus_per_node",
                                  "gpu_types", "features"))
    groups = {}
    for name, group in inventory.items():
        if name.startswith(VOLATILE_GROUP_PREFIXES):
            continue
        group = dict(group)
        for key in ("hosts", "children"):
            if key in group:
                group[key] = sorted(g for g in group[key] if not g.startswith(VOLATILE_GROUP_PREFIXES))
        groups[name] = group
    nodes = sorted(inventory.get("slurm_nodes", {}).get("hosts", []))
    names = dict((node, "node%d" % index) for index, node in enumerate(nodes, 1))
    return rename({"hostvars": hostvars, "groups": groups}, names)


@pytest.mark.parametrize("version", SLURM_VERSIONS)
def test_inventory_matches_golden(version, tmp_path):
    values = require_slurm(version)
    result = ansible_inventory(write_inventory(tmp_path, values), values)
    raw = listed(result)
    assert values["SLURM_JWT"] not in everything(result)
    # Remote strings reach Ansible marked unsafe; the interpreter template stays a template.
    partition = raw["slurm_partitions"]["hosts"][0]
    assert set(raw["_meta"]["hostvars"][partition]["slurm_partition_name"]) == {"__ansible_unsafe"}
    assert raw["_meta"]["hostvars"][partition]["ansible_python_interpreter"] == "{{ ansible_playbook_python }}"
    expected_partitions = values.get("SLURM_PARTITIONS")
    if expected_partitions:
        assert sorted(raw["slurm_partitions"]["hosts"]) == sorted(expected_partitions.split(","))
    compare_with_golden(os.path.join(GOLDEN, "inventory_slurm_%s.json" % version), stable(raw))


@pytest.mark.parametrize("version", SLURM_VERSIONS)
def test_cached_inventory_needs_no_slurm(version, tmp_path):
    values = require_slurm(version)
    check_cached_inventory_needs_no_backend(
        tmp_path, values["SLURM_URL"], values["SLURM_JWT"],
        lambda directory, **overrides: write_inventory(directory, values, **overrides),
        lambda path, *args: ansible_inventory(path, values, *args))
