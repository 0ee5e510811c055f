"""ansible-inventory with the bridge.hpc.slurm plugin against every real Slurm version.

The output is compared with tests/integration/golden/inventory_slurm_<version>.json after masking
what a running cluster changes on its own (node states, allocated and free CPUs and memory) and the
name of the machine the cluster runs on. Regenerate the golden files with BRIDGE_UPDATE_GOLDEN=1.
"""

import json
import os
import socket
import subprocess
import threading

import pytest
import yaml

from conftest import REPO, SLURM_VERSIONS, VENV_BIN, ansible_env, require_slurm

GOLDEN = os.path.join(REPO, "tests", "integration", "golden")
UPDATE = os.environ.get("BRIDGE_UPDATE_GOLDEN") == "1"
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
    path = os.path.join(str(directory), "x.slurm.yml")
    with open(path, "w") as handle:
        yaml.safe_dump(config, handle)
    return path


def ansible_inventory(path, values, *args):
    """Run ansible-inventory --list; the inventory goes to a file (-vvv output would mix with it)."""
    output = path + ".out.json"
    if os.path.exists(output):
        os.remove(output)
    env = ansible_env(values)
    # A plugin failure must fail the command, not leave an empty inventory behind a warning.
    env.update({"ANSIBLE_INVENTORY_UNPARSED_FAILED": "1", "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "1"})
    result = subprocess.run(
        [os.path.join(VENV_BIN, "ansible-inventory"), "-i", path, "--list", "--output", output] + list(args),
        env=env, capture_output=True, text=True, timeout=300, cwd=os.path.dirname(path), check=False)
    result.listing = ""
    if os.path.exists(output):
        with open(output) as handle:
            result.listing = handle.read()
    return result


def listed(result):
    assert result.returncode == 0, "ansible-inventory failed:\n%s\n%s" % (result.stdout[-3000:], result.stderr[-3000:])
    return json.loads(result.listing)


def everything(result):
    return result.stdout + result.stderr + result.listing


def unwrap(value):
    """ansible-inventory prints unsafe strings as {"__ansible_unsafe": ...}; compare plain values."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return dict((k, unwrap(v)) for k, v in value.items())
    if isinstance(value, list):
        return [unwrap(v) for v in value]
    return value


def rename(value, names):
    if isinstance(value, dict):
        return dict((names.get(k, k), rename(v, names)) for k, v in value.items())
    if isinstance(value, list):
        return [rename(v, names) for v in value]
    if isinstance(value, str):
        return names.get(value, value)
    return value


def stable(inventory):
    """The inventory without what changes between runs, with node names replaced by node1, node2 ..."""
    inventory = unwrap(inventory)
    meta = inventory.pop("_meta")
    hostvars = meta["hostvars"]
    for variables in hostvars.values():
        for key in VOLATILE_VARS & set(variables):
            variables[key] = VOLATILE
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


def compare_with_golden(version, inventory):
    path = os.path.join(GOLDEN, "inventory_slurm_%s.json" % version)
    text = json.dumps(inventory, indent=2, sort_keys=True) + "\n"
    if UPDATE:
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)
        return
    if not os.path.exists(path):
        pytest.fail("no golden file %s; create it with BRIDGE_UPDATE_GOLDEN=1" % path)
    with open(path) as handle:
        golden = json.load(handle)
    assert inventory == golden, "inventory differs from %s; if the change is intended, rerun with BRIDGE_UPDATE_GOLDEN=1" % path


class Forwarder:
    """A TCP relay to slurmrestd that counts connections and can be closed (port refused after)."""

    def __init__(self, target_url):
        host_port = target_url.split("://", 1)[1].split("/", 1)[0]
        host, port = host_port.rsplit(":", 1)
        self.target = (host, int(port))
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.port = self.server.getsockname()[1]
        self.connections = 0
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def _accept(self):
        while True:
            try:
                client = self.server.accept()[0]
            except OSError:
                return
            self.connections += 1
            upstream = socket.create_connection(self.target, timeout=30)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source, sink):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        # shutdown() wakes the thread blocked in accept(); close() alone would leave the port
        # listening until that accept() returns.
        try:
            self.server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.server.close()
        self.thread.join(10)

    def refused(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=5).close()
        except ConnectionRefusedError:
            return True
        return False


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
    compare_with_golden(version, stable(raw))


@pytest.mark.parametrize("version", SLURM_VERSIONS)
def test_cached_inventory_needs_no_slurm(version, tmp_path):
    """Second run: same file, slurmrestd unreachable, cache valid -> same inventory, no request."""
    values = require_slurm(version)
    cache_dir = tmp_path / "cache"
    forwarder = Forwarder(values["SLURM_URL"])
    try:
        path = write_inventory(tmp_path, values, url=forwarder.url, cache=True,
                               cache_plugin="ansible.builtin.jsonfile", cache_connection=str(cache_dir),
                               cache_timeout=3600)
        first = ansible_inventory(path, values, "-vvv")
        fresh = listed(first)
        assert forwarder.connections > 0
    finally:
        forwarder.close()
    seen = forwarder.connections
    assert forwarder.refused(), "the relay port still accepts connections"

    second = ansible_inventory(path, values)
    assert listed(second) == fresh
    assert forwarder.connections == seen

    flushed = ansible_inventory(path, values, "--flush-cache")
    assert flushed.returncode != 0, "with the cache flushed, the closed port must make the run fail"
    assert "Failed to" in flushed.stdout + flushed.stderr

    token = values["SLURM_JWT"]
    for result in (first, second, flushed):
        assert token not in everything(result), "the token leaked into ansible-inventory output"
    cached = [os.path.join(str(cache_dir), name) for name in os.listdir(str(cache_dir))]
    assert cached
    for name in cached:
        with open(name) as handle:
            assert token not in handle.read(), "the token leaked into the inventory cache"
