"""ansible-inventory with the bridge.hpc.lsf plugin against the LSF Application Center simulator of
tools/lsf-pac.sh (not a real Application Center: docs/lsf.md).

The output is compared with tests/integration/golden/inventory_lsf.json after masking what the
simulator changes on its own (pending and running slots, which other tests' jobs move), what the
machine decides (its memory, the simulator's port) and renaming the simulator's one host, named
after the machine, to host1. Regenerate the golden file with BRIDGE_UPDATE_GOLDEN=1.
"""

import os
import subprocess
import urllib.parse

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
    require_lsf,
    unwrap,
    write_inventory_file,
)

GOLDEN = os.path.join(REPO, "tests", "integration", "golden", "inventory_lsf.json")
VOLATILE = "<volatile>"
VOLATILE_VARS = frozenset(["lsf_url", "lsf_queue_pending", "lsf_queue_running", "lsf_host_max_memory_mb"])

CONFIG = {
    "plugin": "bridge.hpc.lsf",
    "include_hosts": True,
    "strict": True,
    # Under strict an undefined variable fails even in a condition: LSF hosts have no queue variables.
    "compose": {"run_limit_seconds":
                "lsf_queue_run_limit_minutes * 60 if lsf_queue_run_limit_minutes | default(none) else none"},
    "groups": {"limited_queues": "lsf_queue_name is defined and lsf_queue_run_limit_minutes is not none",
               "takes_jobs": "lsf_queue_open | default(false) and lsf_queue_active | default(false)"},
    "keyed_groups": [{"key": "lsf_queue_status | default([])", "prefix": "queue"},
                     {"key": "lsf_host_model | default([], true)", "prefix": "model"}],
}


def write_inventory(directory, values, **overrides):
    """An x.lsf.yml for this simulator; the password stays in the environment (LSF_PASSWORD)."""
    config = dict(CONFIG, url=values["LSF_PAC_URL"], user=values["LSF_USER"])
    config.update(overrides)
    return write_inventory_file(directory, "x.lsf.yml", config)


def run_inventory(path, values, *args):
    return ansible_inventory(path, {"LSF_PASSWORD": values["LSF_PASSWORD"], "LSF_PAC_URL": "", "LSF_USER": ""}, *args)


def stable(inventory):
    """The inventory without what changes between runs and machines, the LSF host named host1."""
    inventory = unwrap(inventory)
    hostvars = inventory.pop("_meta")["hostvars"]
    names = dict((host, "host%d" % index)
                 for index, host in enumerate(sorted(inventory.get("lsf_hosts", {}).get("hosts", [])), 1))
    for variables in hostvars.values():
        for key in VOLATILE_VARS & set(variables):
            variables[key] = VOLATILE
        mask_capacity(variables, ("pending", "running", "memory_mb_per_node"))
    groups = dict((name, dict((k, sorted(v)) for k, v in group.items())) for name, group in inventory.items())
    return rename({"hostvars": hostvars, "groups": groups}, names)


def test_inventory_matches_golden(tmp_path):
    values = require_lsf()
    result = run_inventory(write_inventory(tmp_path, values), values, "-vvv")
    raw = listed(result)
    assert values["LSF_PASSWORD"] not in everything(result)
    assert sorted(raw["lsf_queues"]["hosts"]) == sorted(values["LSF_QUEUES"].split(","))
    variables = raw["_meta"]["hostvars"]["normal"]
    # Remote strings reach Ansible marked unsafe; the interpreter template stays a template.
    assert set(variables["lsf_queue_name"]) == {"__ansible_unsafe"}
    assert variables["ansible_python_interpreter"] == "{{ ansible_playbook_python }}"
    assert unwrap(variables["lsf_url"]) == values["LSF_PAC_URL"]
    for host in raw["lsf_hosts"]["hosts"]:
        assert unwrap(raw["_meta"]["hostvars"][host]["lsf_host_max_memory_mb"]) > 0
    compare_with_golden(GOLDEN, stable(raw))


def test_cached_inventory_needs_no_lsf(tmp_path):
    values = require_lsf()
    # The relay serves the simulator's port; Application Center's context root stays the same.
    context_root = urllib.parse.urlsplit(values["LSF_PAC_URL"]).path
    check_cached_inventory_needs_no_backend(
        tmp_path, values["LSF_PAC_URL"], values["LSF_PASSWORD"],
        lambda directory, url, **overrides: write_inventory(directory, values, url=url + context_root, **overrides),
        lambda path, *args: run_inventory(path, values, *args))


def test_wrong_password_fails_without_echoing_it(tmp_path):
    values = require_lsf()
    wrong = "bridge-lsf-inventory-wrong-password"
    result = run_inventory(write_inventory(tmp_path, values), dict(values, LSF_PASSWORD=wrong), "-vvv")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "bridge.hpc.lsf: Failed to log on user '%s' on LSF at" % values["LSF_USER"] in output
    assert "authentication failed" in output and "(HTTP 403)" in output
    assert wrong not in everything(result)


def test_ansible_doc_renders():
    result = subprocess.run([os.path.join(VENV_BIN, "ansible-doc"), "-t", "inventory", "bridge.hpc.lsf"],
                            env=ansible_env(), capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "include_hosts" in result.stdout and "lsf_queue_status_open" in result.stdout
