"""Unit tests of the bridge.hpc.lsf inventory plugin, with the LSF client stubbed and against the
LSF Application Center simulator.

Queues and hosts are PAC records shaped like the ones the simulator (tests/simulators/lsf_pac.py)
and IBM's examples show, run through the client's own normalize_queue and normalize_host, so the
plugin sees exactly what LsfClient.queues() and .hosts() return. The tests at the end drive the
real LsfClient against the simulator in-process (the lsf_pac fixture of tests/unit/conftest.py).
"""

import copy
import json
import os

import pytest
import yaml

from ansible.errors import AnsibleParserError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible.template import is_trusted_as_template

from ansible_collections.bridge.hpc.plugins.inventory import lsf as plugin_module
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.client import LsfClient
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.fit import normalize_host, normalize_queue
from ansible_collections.bridge.hpc.tests.unit.plugins.inventory.harness import (
    InventoryPluginContract,
    PluginRunner,
    cache_config,
    hostvars,
    members,
)

NAME = "bridge.hpc.lsf"
URL = "http://pac.test:8080/platform"
PASSWORD = "lsf-secret-password-0123456789"


def pac_queue(name, status="Open:Active", slots=8, run_limit="", mem_limit="", pending=0, running=0, hosts="all",
              priority=30):
    return {"queueName": name, "queueDescription": "%s jobs" % name, "priority": str(priority), "status": status,
            "maxNumJobSlots": str(slots), "numPend": str(pending), "numRun": str(running), "hosts": hosts,
            "runLimit": run_limit, "memLimit": mem_limit}


def pac_host(name, status="ok", cpus=8, memory="15.5 G", model="X86_64"):
    resources = [{"name": "hostModel", "value": model}, {"name": "hostType", "value": "LINUX64"},
                 {"name": "nCpus", "value": str(cpus)}, {"name": "maxMem", "value": memory}]
    return {"hostName": name, "hostStatus": status, "staticResources": {"staticResource": resources}}


QUEUES = [normalize_queue(q) for q in (
    pac_queue("normal", pending=3, running=4),
    pac_queue("short", slots=2, run_limit="60.0 min", mem_limit="4 G", hosts="h1 h2+2", priority=40),
    pac_queue("night", status="Open:Inact", slots=-1, run_limit="720", hosts="all ~h1"),
    pac_queue("closed", status="Closed:Inact", hosts="hgroup1"),
)]
HOSTS = [normalize_host(h) for h in (
    pac_host("h1"),
    pac_host("h2", status="closed_Full", cpus=64, memory="512G"),
    pac_host("h3", status="unavail", cpus=None, memory="-", model=None),
)]


class FakeClient(LsfClient):
    """Stands in for LsfClient's reads: records every construction, answers with normalized dicts."""

    instances = []
    queues_payload = QUEUES
    hosts_payload = HOSTS
    warnings_payload = []

    def __init__(self, url, user=None, password=None, validate_certs=True, ca_path=None, timeout=30.0, retries=3):
        self.url = url
        self.user = user
        self.password = password
        self.validate_certs = validate_certs
        self.timeout = timeout
        self.warnings = list(self.warnings_payload)
        self.closed = False
        FakeClient.instances.append(self)

    def queues(self):
        return copy.deepcopy(self.queues_payload)

    def hosts(self):
        return copy.deepcopy(self.hosts_payload)

    def close(self):
        self.closed = True


@pytest.fixture(autouse=True)
def fake_client(monkeypatch):
    FakeClient.instances = []
    for name, value in (("queues_payload", QUEUES), ("hosts_payload", HOSTS), ("warnings_payload", [])):
        monkeypatch.setattr(FakeClient, name, value)
    monkeypatch.setattr(plugin_module, "LsfClient", FakeClient)
    for var in ("LSF_PAC_URL", "LSF_USER", "LSF_PASSWORD"):
        monkeypatch.delenv(var, raising=False)
    return FakeClient


RUNNER = PluginRunner(plugin_module, NAME, {"url": URL, "user": "alice", "password": PASSWORD}, "cluster.lsf.yml")
make_plugin = RUNNER.make_plugin
run = RUNNER.run


class TestLsfAsEveryPlugin(InventoryPluginContract):
    runner = RUNNER
    secret = "password"
    manager = "LSF"
    url_var = "lsf_url"
    host = "normal"
    other_url = "http://other.test:8080/platform"
    missing_url = ("needs the LSF Application Center URL: set url in the inventory file or the environment "
                   "variable LSF_PAC_URL")
    warning = "a warning of the client"
    read_call = "queues"


# ---------------------------------------------------------------- file names

@pytest.mark.parametrize("name, wanted", [
    ("cluster.lsf.yml", True), ("cluster.lsf.yaml", True), ("lsf.yml", True), ("prod_lsf.yaml", True),
    ("cluster.yml", False), ("lsf.json", False), ("lsf.yml.bak", False), ("cluster.slurm.yml", False),
])
def test_verify_file_accepts_lsf_yml_names(tmp_path, name, wanted):
    path = tmp_path / name
    path.write_text("plugin: bridge.hpc.lsf\n")
    assert make_plugin().verify_file(str(path)) is wanted


# ---------------------------------------------------------------- hosts, hostvars, groups

def test_queues_become_local_hosts_in_status_groups(tmp_path):
    inventory = run(tmp_path, {})
    assert members(inventory, "lsf_queues") == ["closed", "night", "normal", "short"]
    assert members(inventory, "lsf_queue_status_open") == ["night", "normal", "short"]
    assert members(inventory, "lsf_queue_status_closed") == ["closed"]
    assert members(inventory, "lsf_queue_status_active") == ["normal", "short"]
    assert members(inventory, "lsf_queue_status_inactive") == ["closed", "night"]
    assert "lsf_hosts" not in inventory.groups
    assert "h1" not in inventory.hosts
    normal = hostvars(inventory, "normal")
    assert normal["ansible_connection"] == "local"
    assert normal["ansible_python_interpreter"] == "{{ ansible_playbook_python }}"
    assert is_trusted_as_template(normal["ansible_python_interpreter"])


def test_queue_hostvars(tmp_path):
    inventory = run(tmp_path, {})
    short = hostvars(inventory, "short")
    wanted = {
        "lsf_url": URL,
        "lsf_queue_name": "short",
        "lsf_queue_status": "Open:Active",
        "lsf_queue_open": True,
        "lsf_queue_active": True,
        "lsf_queue_priority": 40,
        "lsf_queue_max_slots": 2,
        "lsf_queue_run_limit_minutes": 60,
        "lsf_queue_memory_limit_mb": 4096,
        "lsf_queue_pending": 0,
        "lsf_queue_running": 0,
        "lsf_queue_hosts": "h1 h2+2",
        "lsf_queue_description": "short jobs",
    }
    assert dict((k, short.get(k)) for k in wanted) == wanted
    normal = hostvars(inventory, "normal")
    assert (normal["lsf_queue_pending"], normal["lsf_queue_running"]) == (3, 4)
    # No run or memory limit is null, as is a slot limit LSF prints as -1.
    assert (normal["lsf_queue_run_limit_minutes"], normal["lsf_queue_memory_limit_mb"]) == (None, None)
    assert hostvars(inventory, "night")["lsf_queue_max_slots"] is None
    assert not any(k.startswith("lsf_host_") for k in normal)
    for variables in (short, normal):
        assert PASSWORD not in json.dumps(variables, default=str)
        assert not any("password" in key or "token" in key for key in variables)


def test_hosts_become_hosts_with_status_and_queue_groups(tmp_path):
    inventory = run(tmp_path, {"include_hosts": True})
    assert members(inventory, "lsf_hosts") == ["h1", "h2", "h3"]
    assert members(inventory, "lsf_host_status_ok") == ["h1"]
    assert members(inventory, "lsf_host_status_closed_full") == ["h2"]
    assert members(inventory, "lsf_host_status_unavail") == ["h3"]
    assert members(inventory, "lsf_queue_normal_hosts") == ["h1", "h2", "h3"]
    assert members(inventory, "lsf_queue_short_hosts") == ["h1", "h2"]
    assert members(inventory, "lsf_queue_night_hosts") == ["h2", "h3"]
    # A host group in a queue's host list cannot be resolved from PAC's records.
    assert "lsf_queue_closed_hosts" not in inventory.groups
    h2 = hostvars(inventory, "h2")
    wanted = {
        "lsf_url": URL,
        "lsf_host_name": "h2",
        "lsf_host_status": "closed_full",
        "lsf_host_usable": True,
        "lsf_host_ncpus": 64,
        "lsf_host_max_memory_mb": 512 * 1024,
        "lsf_host_model": "X86_64",
        "lsf_host_type": "LINUX64",
        "lsf_host_queues": ["normal", "short", "night"],
    }
    assert dict((k, h2.get(k)) for k in wanted) == wanted
    h3 = hostvars(inventory, "h3")
    assert (h3["lsf_host_usable"], h3["lsf_host_ncpus"], h3["lsf_host_max_memory_mb"]) == (False, None, None)
    # LSF hosts are machines: the plugin leaves their connection alone.
    assert "ansible_connection" not in h2 and "ansible_python_interpreter" not in h2
    assert not any(k.startswith("lsf_queue_") for k in h2)


@pytest.mark.parametrize("hosts, wanted", [
    ("all", ["h1", "h2", "h3"]),
    ("others", ["h1", "h2", "h3"]),
    ("h1 h3", ["h1", "h3"]),
    ("h1+1 h2+", ["h1", "h2"]),
    ("all ~h2", ["h1", "h3"]),
    ("hgroup1 h3", ["h3"]),
    ("none", []),
    (None, []),
])
def test_queue_members_read_lsf_host_lists(hosts, wanted):
    assert plugin_module.queue_members({"hosts": hosts}, ["h1", "h2", "h3"]) == wanted


def test_queue_named_like_a_host_needs_a_prefix(tmp_path, fake_client):
    fake_client.queues_payload = [normalize_queue(pac_queue("h1"))]
    with pytest.raises(AnsibleParserError, match="queue 'h1' and LSF host 'h1' .*set host_prefix"):
        run(tmp_path, {"include_hosts": True})
    # Without hosts there is nothing to collide with.
    assert members(run(tmp_path, {}), "lsf_queues") == ["h1"]
    inventory = run(tmp_path, {"include_hosts": True, "host_prefix": "q_"})
    assert members(inventory, "lsf_queues") == ["q_h1"]
    assert members(inventory, "lsf_queue_h1_hosts") == ["h1", "h2", "h3"]


def test_host_prefix_and_no_local_connection(tmp_path):
    inventory = run(tmp_path, {"host_prefix": "c1_", "set_local_connection": False})
    assert members(inventory, "lsf_queues") == ["c1_closed", "c1_night", "c1_normal", "c1_short"]
    queue = hostvars(inventory, "c1_normal")
    assert queue["lsf_queue_name"] == "normal"
    assert "ansible_connection" not in queue


def test_group_names_are_sanitized(tmp_path, fake_client):
    fake_client.queues_payload = [normalize_queue(pac_queue("gpu-a100.big", hosts="n-1"))]
    fake_client.hosts_payload = [normalize_host(pac_host("n-1", status="closed_Adm"))]
    inventory = run(tmp_path, {"include_hosts": True})
    assert members(inventory, "lsf_queue_gpu_a100_big_hosts") == ["n-1"]
    assert members(inventory, "lsf_host_status_closed_adm") == ["n-1"]
    assert "gpu-a100.big" in inventory.hosts


def test_second_cluster_with_same_queue_names_is_refused(tmp_path):
    inventory = run(tmp_path, {})
    path = tmp_path / "other.lsf.yml"
    path.write_text(yaml.safe_dump({"plugin": NAME, "url": "http://other.test:8080/platform"}))
    refused = "host 'normal' already comes from the LSF cluster at %s; set host_prefix" % URL
    with pytest.raises(AnsibleParserError, match=refused):
        make_plugin().parse(inventory, DataLoader(), str(path))
    path.write_text(yaml.safe_dump({"plugin": NAME, "url": "http://other.test:8080/platform", "host_prefix": "other_"}))
    make_plugin().parse(inventory, DataLoader(), str(path))
    assert "other_normal" in members(inventory, "lsf_queues") and "normal" in members(inventory, "lsf_queues")


def test_remote_strings_are_not_trusted_for_templating(tmp_path, fake_client):
    evil = pac_queue("normal")
    evil["queueDescription"] = "{{ lookup('pipe', 'id') }}"
    fake_client.queues_payload = [normalize_queue(evil)]
    inventory = run(tmp_path, {"include_hosts": True})
    normal = hostvars(inventory, "normal")
    assert not is_trusted_as_template(normal["lsf_queue_description"])
    assert not is_trusted_as_template(normal["lsf_queue_name"])
    assert not is_trusted_as_template(normal["lsf_url"])
    assert not any(is_trusted_as_template(q) for q in hostvars(inventory, "h1")["lsf_host_queues"])


# ---------------------------------------------------------------- constructed

def test_compose_groups_and_keyed_groups(tmp_path):
    inventory = run(tmp_path, {
        "include_hosts": True,
        "compose": {"run_limit_hours": "lsf_queue_run_limit_minutes // 60",
                    "free_slots": "lsf_queue_max_slots - lsf_queue_running"},
        "groups": {"limited_queues": "lsf_queue_run_limit_minutes is not none",
                   "big_hosts": "(lsf_host_max_memory_mb | default(0, true)) > 100000"},
        "keyed_groups": [{"key": "lsf_host_model | default([], true)", "prefix": "model"},
                         {"key": "lsf_queue_status | default([])", "prefix": "queue"}],
    })
    assert hostvars(inventory, "night")["run_limit_hours"] == 12
    assert hostvars(inventory, "normal")["free_slots"] == 4
    assert "run_limit_hours" not in hostvars(inventory, "h1")
    assert members(inventory, "limited_queues") == ["night", "short"]
    assert members(inventory, "big_hosts") == ["h2"]
    assert members(inventory, "model_X86_64") == ["h1", "h2"]
    assert members(inventory, "queue_Open_Active") == ["normal", "short"]
    assert members(inventory, "queue_Closed_Inact") == ["closed"]


def test_strict_keyed_group_with_empty_key_fails(tmp_path):
    # LSF hosts have no queue status: a keyed group on it needs a default, or fails when strict.
    config = {"include_hosts": True, "keyed_groups": [{"key": "lsf_queue_status", "prefix": "queue"}], "strict": True}
    with pytest.raises(AnsibleParserError, match="Could not generate group for host h1"):
        run(tmp_path, config)


def documented_examples():
    """The inventory files of EXAMPLES (the commented play is not one)."""
    return [doc for doc in yaml.safe_load_all(plugin_module.EXAMPLES) if doc]


@pytest.mark.parametrize("index", range(len(documented_examples())))
def test_examples_build_the_inventory_they_describe(tmp_path, index):
    config = documented_examples()[index]
    # The vault lookup and the cache directory are the user's; the rest is as documented.
    config.update(password=PASSWORD, **(cache_config(tmp_path) if config.get("cache") else {}))
    inventory = run(tmp_path, config)
    assert members(inventory, "lsf_queues") == ["closed", "night", "normal", "short"]
    if config.get("include_hosts"):
        assert members(inventory, "unlimited_queues") == ["closed", "normal"]
        assert members(inventory, "busy_queues") == ["normal"]
        assert members(inventory, "usable_hosts") == ["h1", "h2"]
        assert [g for g in inventory.groups if g.startswith("model_")] == ["model_X86_64"]
        assert members(inventory, "model_X86_64") == ["h1", "h2"]
        assert hostvars(inventory, "night")["run_limit_hours"] == 12
        assert hostvars(inventory, "normal")["run_limit_hours"] is None
        assert hostvars(inventory, "h1")["run_limit_hours"] is None
    # The play's pattern: queues that accept and dispatch jobs.
    open_queues = set(members(inventory, "lsf_queue_status_open"))
    assert sorted(open_queues & set(members(inventory, "lsf_queue_status_active"))) == ["normal", "short"]


# ---------------------------------------------------------------- connection options

def test_connection_options_and_env_fallbacks(tmp_path, monkeypatch, fake_client):
    monkeypatch.setenv("LSF_PAC_URL", "http://env.test:8080/platform")
    monkeypatch.setenv("LSF_USER", "envuser")
    monkeypatch.setenv("LSF_PASSWORD", "envpassword")
    path = tmp_path / "env.lsf.yml"
    path.write_text("plugin: bridge.hpc.lsf\ntimeout: 7\nvalidate_certs: false\n")
    inventory = InventoryData()
    make_plugin().parse(inventory, DataLoader(), str(path))
    client = fake_client.instances[-1]
    assert (client.url, client.user, client.password, client.timeout, client.validate_certs) == (
        "http://env.test:8080/platform", "envuser", "envpassword", 7.0, False)
    assert client.closed
    assert hostvars(inventory, "normal")["lsf_url"] == "http://env.test:8080/platform"


# ---------------------------------------------------------------- cache

def test_cache_hit_makes_no_client_call_and_rebuilds_groups(tmp_path, fake_client):
    run(tmp_path, cache_config(tmp_path))
    assert len(fake_client.instances) == 1
    inventory = run(tmp_path, cache_config(tmp_path, groups={"busy": "lsf_queue_pending > 0"}, host_prefix="c1_",
                                           include_hosts=True))
    assert len(fake_client.instances) == 1
    # Groups, prefix and include_hosts come from this run's configuration, the data from the cache.
    assert members(inventory, "busy") == ["c1_normal"]
    assert members(inventory, "lsf_queue_short_hosts") == ["h1", "h2"]
    assert hostvars(inventory, "h2")["lsf_host_ncpus"] == 64


def test_cache_for_another_user_is_not_used(tmp_path, fake_client):
    run(tmp_path, cache_config(tmp_path))
    run(tmp_path, cache_config(tmp_path, user="bob"))
    assert len(fake_client.instances) == 2


def test_cache_holds_no_password_and_no_native_payload(tmp_path):
    run(tmp_path, cache_config(tmp_path))
    files = os.listdir(str(tmp_path / "cache"))
    assert len(files) == 1
    text = (tmp_path / "cache" / files[0]).read_text()
    assert PASSWORD not in text and "native" not in text
    payload = json.loads(text)
    # ansible-core 2.19's jsonfile cache wraps the value in a tagged envelope.
    if "__payload__" in payload:
        payload = json.loads(payload["__payload__"])
    assert payload["source"] == {"url": URL, "user": "alice"}
    assert [q["name"] for q in payload["queues"]] == ["normal", "short", "night", "closed"]
    assert [h["name"] for h in payload["hosts"]] == ["h1", "h2", "h3"]


def test_flush_cache_reads_lsf_again_and_refreshes_the_cache(tmp_path, fake_client):
    run(tmp_path, cache_config(tmp_path))
    fake_client.queues_payload = QUEUES[:1]
    inventory = run(tmp_path, cache_config(tmp_path), cache=False)
    assert len(fake_client.instances) == 2
    assert members(inventory, "lsf_queues") == ["normal"]
    inventory = run(tmp_path, cache_config(tmp_path))
    assert len(fake_client.instances) == 2
    assert members(inventory, "lsf_queues") == ["normal"]


# ---------------------------------------------------------------- against the PAC simulator

@pytest.fixture
def simulated(lsf_pac, monkeypatch):
    """The real LsfClient, and the runner's config pointing at the simulator."""
    monkeypatch.setattr(plugin_module, "LsfClient", LsfClient)
    return {"url": lsf_pac["url"], "user": lsf_pac["user"], "password": lsf_pac["password"], "retries": 0}


def test_simulator_queues_and_hosts(tmp_path, lsf_pac, simulated):
    inventory = run(tmp_path, dict(simulated, include_hosts=True))
    assert members(inventory, "lsf_queues") == ["closed", "inactive", "normal", "short"]
    assert members(inventory, "lsf_queue_status_closed") == ["closed"]
    assert members(inventory, "lsf_queue_status_inactive") == ["closed", "inactive"]
    short = hostvars(inventory, "short")
    assert (short["lsf_queue_run_limit_minutes"], short["lsf_queue_memory_limit_mb"], short["lsf_queue_max_slots"]) == (
        1, 256, 2)
    assert short["lsf_url"] == lsf_pac["url"]
    host = lsf_pac["simulator"].cluster.host
    assert members(inventory, "lsf_hosts") == [host]
    assert members(inventory, "lsf_host_status_ok") == [host]
    assert members(inventory, "lsf_queue_normal_hosts") == [host]
    variables = hostvars(inventory, host)
    assert variables["lsf_host_ncpus"] == 4 and variables["lsf_host_max_memory_mb"] > 0
    assert variables["lsf_host_queues"] == ["normal", "short", "inactive", "closed"]
    everything = json.dumps([hostvars(inventory, h) for h in inventory.hosts], default=str)
    assert lsf_pac["password"] not in everything and "platform_token" not in everything


def test_simulator_cache_holds_no_password(tmp_path, lsf_pac, simulated):
    run(tmp_path, dict(simulated, **cache_config(tmp_path)))
    cache_dir = tmp_path / "cache"
    text = "".join((cache_dir / name).read_text() for name in os.listdir(str(cache_dir)))
    assert "normal" in text
    assert lsf_pac["password"] not in text and lsf_pac["user"] + '"' not in text


def test_wrong_password_is_a_clear_error_without_the_password(tmp_path, lsf_pac, simulated):
    wrong = "wr0ng&<pw>-9876"
    with pytest.raises(AnsibleParserError) as err:
        run(tmp_path, dict(simulated, password=wrong))
    message = str(err.value)
    assert message.startswith("bridge.hpc.lsf: Failed to log on user '%s' on LSF at %s: authentication failed" % (
        lsf_pac["user"], lsf_pac["url"].rstrip("/")))
    assert "(HTTP 403)" in message
    assert wrong not in message and lsf_pac["password"] not in message


def test_missing_password_is_a_clear_error(tmp_path, simulated):
    with pytest.raises(AnsibleParserError, match="bridge.hpc.lsf: password is required: Application Center at .* "
                                                 "takes a user name and password"):
        run(tmp_path, dict(simulated, password=None))


def test_simulator_queues_have_their_capacity_record(tmp_path, lsf_pac, simulated):
    inventory = run(tmp_path, simulated)
    short = hostvars(inventory, "short")["bridge_capacity"]
    assert (short["name"], short["state"], short["usable"], short["max_time_minutes"], short["memory_mb_per_node"],
            short["cpus_per_node"], short["pending"], short["running"]) == ("short", "Open:Active", True, 1, 256, 2, 0, 0)
    assert hostvars(inventory, "normal")["bridge_capacity"]["default"] is True
    assert hostvars(inventory, "closed")["bridge_capacity"]["usable"] is False
