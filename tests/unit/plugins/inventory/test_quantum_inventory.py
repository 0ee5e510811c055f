"""Unit tests of the bridge.hpc.quantum inventory plugin, with the IBM Quantum client's reads stubbed
and against the in-memory stub of IAM and the Qiskit Runtime API (tests/unit/quantum_stub.py).

Devices, statuses and configurations are answers shaped like the simulator's and IBM's documented
ones (tests/unit/fixtures/quantum), run through the client's own normalize_device, normalize_status
and normalize_configuration, and merged by the real QuantumClient.inventory (device_details), so the plugin
sees exactly what the client returns. The tests at the end drive the whole client against the stub.
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

from ansible_collections.bridge.hpc.plugins.inventory import quantum as plugin_module
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.client import QuantumClient
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.fit import (
    calibration_medians,
    normalize_configuration,
    normalize_device,
    normalize_status,
)
from ansible_collections.bridge.hpc.tests.unit.plugins.inventory.harness import (
    InventoryPluginContract,
    PluginRunner,
    cache_config,
    hostvars,
    members,
)
from ansible_collections.bridge.hpc.tests.unit.quantum_stub import API_KEY as STUB_API_KEY
from ansible_collections.bridge.hpc.tests.unit.quantum_stub import CRN as STUB_CRN
from ansible_collections.bridge.hpc.tests.unit.quantum_stub import IAM_URL as STUB_IAM_URL
from ansible_collections.bridge.hpc.tests.unit.quantum_stub import URL as STUB_URL
from ansible_collections.bridge.hpc.tests.unit.quantum_stub import StubRuntime

NAME = "bridge.hpc.quantum"
URL = "https://quantum.test/api/v1"
CRN = "crn:v1:bluemix:public:quantum-computing:us-east:a/0123456789abcdef:01234567-89ab-cdef::"
API_KEY = "ibm-api-key-secret-0123456789"


def listed(name, status="online", reason="", qubits=156, queue=0, family="Heron", revision="r2"):
    item = {"name": name, "status": {"name": status, "reason": reason}, "qubits": qubits, "queue_length": queue}
    if family:
        item["processor_type"] = {"family": family, "revision": revision}
    return item


def status(operational=True, queue=0, version="1.2.3"):
    return {"state": operational, "status": "active" if operational else "maintenance", "length_queue": queue,
            "backend_version": version}


def configuration(name, qubits, gates=("cz", "id", "rz", "sx", "x"), simulator=False, processor=None):
    native = {"backend_name": name, "backend_version": "1.2.3", "n_qubits": qubits, "basis_gates": list(gates),
              "simulator": simulator, "max_shots": 100000}
    if processor:
        native["processor_type"] = processor
    return native


def nduv(name, value, unit=""):
    return {"date": "2026-12-01T08:00:00+00:00", "name": name, "unit": unit, "value": value}


def properties(readout, t1, t2, two_qubit, t_unit="us"):
    """BackendProperties: per qubit readout_error, T1 and T2; a cz gate error per pair of qubits
    (and a one-qubit sx gate, whose error no median takes)."""
    qubits = [[nduv("T1", a, t_unit), nduv("T2", b, t_unit), nduv("readout_error", r), nduv("frequency", 4.9, "GHz")]
              for r, a, b in zip(readout, t1, t2)]
    gates = [{"qubits": [0], "gate": "sx", "name": "sx0", "parameters": [nduv("gate_error", 0.5)]}]
    gates += [{"qubits": [i, i + 1], "gate": "cz", "name": "cz%d_%d" % (i, i + 1),
               "parameters": [nduv("gate_error", e), nduv("gate_length", 68, "ns")]} for i, e in enumerate(two_qubit)]
    return {"backend_name": "x", "qubits": qubits, "gates": gates, "general": []}


DEVICES = {
    "ibm_kingston": (listed("ibm_kingston", queue=3), status(queue=3), configuration("ibm_kingston", 156),
                     properties([0.01, 0.03, 0.02], [200.0, 300.0, 100.0], [80.0, 120.0, 100.0], [0.002, 0.004])),
    "ibm_brisbane": (listed("ibm_brisbane", "paused", "calibration", 127, family="Eagle", revision="r3"),
                     status(operational=False), configuration("ibm_brisbane", 127, ("ecr", "id", "rz", "sx", "x")),
                     properties([0.05], [0.0002], [0.0001], [0.01, 0.03, 0.02], t_unit="s")),
    # A simulator, listed without a processor type: its configuration names none, its properties are {}.
    "ibm_sim": (listed("ibm_sim", qubits=32, family=None), status(queue=None), configuration("ibm_sim", 32, simulator=True),
                {}),
}


class FakeClient(QuantumClient):
    """Stands in for QuantumClient's reads: records every construction, answers the per-device reads
    with normalized dicts; inventory and device_details (what merges them) are the real ones."""

    instances = []
    devices_payload = DEVICES
    warnings_payload = []

    def __init__(self, url, api_key=None, service_crn=None, iam_url=None, api_version=None, validate_certs=True,
                 ca_path=None, timeout=30.0, retries=3):
        self.url = url
        self.api_key = api_key
        self.service_crn = service_crn
        self.iam_url = iam_url
        self.validate_certs = validate_certs
        self.timeout = timeout
        self.warnings = list(self.warnings_payload)
        self.closed = False
        FakeClient.instances.append(self)

    def devices(self):
        return [normalize_device(copy.deepcopy(answers[0])) for answers in self.devices_payload.values()]

    def device_status(self, name):
        return normalize_status(name, copy.deepcopy(self.devices_payload[name][1]))

    def configuration(self, name):
        return normalize_configuration(name, copy.deepcopy(self.devices_payload[name][2]))

    def properties(self, name):
        return copy.deepcopy(self.devices_payload[name][3])

    def close(self):
        self.closed = True


@pytest.fixture(autouse=True)
def fake_client(monkeypatch):
    FakeClient.instances = []
    for name, value in (("devices_payload", DEVICES), ("warnings_payload", [])):
        monkeypatch.setattr(FakeClient, name, value)
    monkeypatch.setattr(plugin_module, "QuantumClient", FakeClient)
    for variables in QuantumClient.ENV.values():
        for var in variables:
            monkeypatch.delenv(var, raising=False)
    return FakeClient


RUNNER = PluginRunner(plugin_module, NAME, {"url": URL, "service_crn": CRN, "api_key": API_KEY}, "instance.quantum.yml")
make_plugin = RUNNER.make_plugin
run = RUNNER.run


class TestQuantumAsEveryPlugin(InventoryPluginContract):
    runner = RUNNER
    secret = "api_key"
    manager = "IBM Quantum"
    url_var = "quantum_url"
    host = "ibm_kingston"
    other_url = "https://eu-de.quantum.test/api/v1"
    missing_url = (r"needs the Qiskit Runtime API URL \(https://quantum.cloud.ibm.com/api/v1\): set url in the "
                   "inventory file or the environment variable QUANTUM_URL")
    warning = "a warning of the client"
    read_call = "devices"


# ---------------------------------------------------------------- file names

@pytest.mark.parametrize("name, wanted", [
    ("instance.quantum.yml", True), ("instance.quantum.yaml", True), ("quantum.yml", True), ("ibm_quantum.yaml", True),
    ("instance.yml", False), ("quantum.json", False), ("quantum.yml.bak", False), ("cluster.lsf.yml", False),
])
def test_verify_file_accepts_quantum_yml_names(tmp_path, name, wanted):
    path = tmp_path / name
    path.write_text("plugin: bridge.hpc.quantum\n")
    assert make_plugin().verify_file(str(path)) is wanted


# ---------------------------------------------------------------- hosts, hostvars, groups

def test_devices_become_local_hosts_in_status_and_processor_groups(tmp_path):
    inventory = run(tmp_path, {})
    assert members(inventory, "quantum_devices") == ["ibm_brisbane", "ibm_kingston", "ibm_sim"]
    assert members(inventory, "quantum_device_status_online") == ["ibm_kingston", "ibm_sim"]
    assert members(inventory, "quantum_device_status_paused") == ["ibm_brisbane"]
    assert members(inventory, "quantum_device_status_operational") == ["ibm_kingston", "ibm_sim"]
    assert members(inventory, "quantum_device_status_not_operational") == ["ibm_brisbane"]
    assert members(inventory, "quantum_processor_heron") == ["ibm_kingston"]
    assert members(inventory, "quantum_processor_eagle") == ["ibm_brisbane"]
    assert sorted(g for g in inventory.groups if g.startswith("quantum_processor_")) == [
        "quantum_processor_eagle", "quantum_processor_heron"]
    kingston = hostvars(inventory, "ibm_kingston")
    assert kingston["ansible_connection"] == "local"
    assert kingston["ansible_python_interpreter"] == "{{ ansible_playbook_python }}"
    assert is_trusted_as_template(kingston["ansible_python_interpreter"])


def test_device_hostvars(tmp_path):
    inventory = run(tmp_path, {})
    kingston = hostvars(inventory, "ibm_kingston")
    wanted = {
        "quantum_url": URL,
        "quantum_device_name": "ibm_kingston",
        "quantum_device_status": "online",
        "quantum_device_status_reason": None,
        "quantum_device_status_message": "active",
        "quantum_device_operational": True,
        "quantum_device_qubits": 156,
        "quantum_device_processor_type": "Heron r2",
        "quantum_device_processor_family": "Heron",
        "quantum_device_processor_revision": "r2",
        "quantum_device_basis_gates": ["cz", "id", "rz", "sx", "x"],
        "quantum_device_pending_jobs": 3,
        "quantum_device_version": "1.2.3",
        "quantum_device_simulator": False,
        "quantum_device_max_shots": 100000,
        "quantum_device_median_readout_error": 0.02,
        "quantum_device_median_t1_us": 200.0,
        "quantum_device_median_t2_us": 100.0,
        "quantum_device_median_two_qubit_error": 0.003,
    }
    assert dict((k, kingston.get(k)) for k in wanted) == wanted
    brisbane = hostvars(inventory, "ibm_brisbane")
    assert (brisbane["quantum_device_operational"], brisbane["quantum_device_status_message"],
            brisbane["quantum_device_status_reason"]) == (False, "maintenance", "calibration")
    # T1 and T2 given in seconds are microseconds in hostvars.
    assert (brisbane["quantum_device_median_t1_us"], brisbane["quantum_device_median_t2_us"]) == (200.0, 100.0)
    assert brisbane["quantum_device_median_two_qubit_error"] == 0.02
    for variables in (kingston, brisbane):
        assert API_KEY not in json.dumps(variables, default=str)
        assert not any("api_key" in key or "token" in key for key in variables)


def test_device_without_properties_or_processor_type(tmp_path):
    sim = hostvars(run(tmp_path, {}), "ibm_sim")
    assert sim["quantum_device_simulator"] is True
    # The status has no queue length: the list's is taken.
    assert sim["quantum_device_pending_jobs"] == 0
    for key in ("processor_type", "processor_family", "processor_revision", "median_readout_error", "median_t1_us",
                "median_t2_us", "median_two_qubit_error"):
        assert sim["quantum_device_%s" % key] is None, key


def test_processor_type_of_the_configuration_where_the_list_has_none(tmp_path, fake_client):
    devices = dict(DEVICES)
    devices["ibm_sim"] = (DEVICES["ibm_sim"][0], DEVICES["ibm_sim"][1],
                          configuration("ibm_sim", 32, processor={"family": "Falcon", "revision": 4, "segment": "T"}),
                          {})
    fake_client.devices_payload = devices
    inventory = run(tmp_path, {})
    sim = hostvars(inventory, "ibm_sim")
    assert (sim["quantum_device_processor_type"], sim["quantum_device_processor_family"],
            sim["quantum_device_processor_revision"]) == ("Falcon 4", "Falcon", "4")
    assert members(inventory, "quantum_processor_falcon") == ["ibm_sim"]


@pytest.mark.parametrize("native, wanted", [
    ({}, (None, None, None, None)),
    ({"qubits": [], "gates": [], "general": []}, (None, None, None, None)),
    (properties([0.1, 0.3], [10.0, 30.0], [1.0, 2.0], [0.5]), (0.2, 20.0, 1.5, 0.5)),
    (properties([0.1], [10.0], [20.0], [], t_unit="ms"), (0.1, 10000.0, 20000.0, None)),
    # Values that are no numbers, and units nobody knows, are left out.
    ({"qubits": [[nduv("readout_error", None), nduv("T1", True, "us"), nduv("T2", 5.0, "parsec")]],
      "gates": [{"qubits": [0, 1], "parameters": [nduv("gate_error", "high")]}]}, (None, None, None, None)),
])
def test_calibration_medians(native, wanted):
    medians = calibration_medians(native)
    got = (medians["median_readout_error"], medians["median_t1_us"], medians["median_t2_us"],
           medians["median_two_qubit_error"])
    assert [value is None for value in got] == [value is None for value in wanted]
    assert [value for value in got if value is not None] == pytest.approx([value for value in wanted if value is not None])


def test_host_prefix_and_no_local_connection(tmp_path):
    inventory = run(tmp_path, {"host_prefix": "eu_", "set_local_connection": False})
    assert members(inventory, "quantum_devices") == ["eu_ibm_brisbane", "eu_ibm_kingston", "eu_ibm_sim"]
    device = hostvars(inventory, "eu_ibm_kingston")
    assert device["quantum_device_name"] == "ibm_kingston"
    assert "ansible_connection" not in device


def test_group_names_are_sanitized(tmp_path, fake_client):
    fake_client.devices_payload = {"ibm-new.one": (listed("ibm-new.one", "under-test", family="Nighthawk-X"),
                                                   status(), configuration("ibm-new.one", 120), {})}
    inventory = run(tmp_path, {})
    assert members(inventory, "quantum_device_status_under_test") == ["ibm-new.one"]
    assert members(inventory, "quantum_processor_nighthawk_x") == ["ibm-new.one"]
    assert "ibm-new.one" in inventory.hosts


def test_second_instance_with_same_device_names_is_refused(tmp_path):
    inventory = run(tmp_path, {})
    path = tmp_path / "other.quantum.yml"
    other = "https://eu-de.quantum.test/api/v1"
    path.write_text(yaml.safe_dump({"plugin": NAME, "url": other, "api_key": API_KEY, "service_crn": CRN}))
    refused = "host 'ibm_kingston' already comes from the IBM Quantum cluster at %s; set host_prefix" % URL
    with pytest.raises(AnsibleParserError, match=refused):
        make_plugin().parse(inventory, DataLoader(), str(path))
    path.write_text(yaml.safe_dump({"plugin": NAME, "url": other, "api_key": API_KEY, "service_crn": CRN,
                                    "host_prefix": "eu_"}))
    make_plugin().parse(inventory, DataLoader(), str(path))
    assert "eu_ibm_kingston" in members(inventory, "quantum_devices")
    assert "ibm_kingston" in members(inventory, "quantum_devices")


def test_remote_strings_are_not_trusted_for_templating(tmp_path, fake_client):
    evil = listed("ibm_kingston", reason="{{ lookup('pipe', 'id') }}")
    fake_client.devices_payload = {"ibm_kingston": (evil,) + DEVICES["ibm_kingston"][1:]}
    kingston = hostvars(run(tmp_path, {}), "ibm_kingston")
    for key in ("quantum_device_status_reason", "quantum_device_name", "quantum_url", "quantum_device_processor_family"):
        assert not is_trusted_as_template(kingston[key]), key
    assert not any(is_trusted_as_template(gate) for gate in kingston["quantum_device_basis_gates"])


# ---------------------------------------------------------------- constructed

def test_compose_groups_and_keyed_groups(tmp_path):
    inventory = run(tmp_path, {
        "compose": {"t1_ms": "quantum_device_median_t1_us / 1000", "free": "quantum_device_pending_jobs == 0"},
        "groups": {"cz_devices": "'cz' in quantum_device_basis_gates", "wide": "quantum_device_qubits > 100"},
        "keyed_groups": [{"key": "quantum_device_processor_revision | default([], true)", "prefix": "revision"},
                         {"key": "quantum_device_status_message", "prefix": "message"}],
    })
    assert hostvars(inventory, "ibm_kingston")["t1_ms"] == 0.2
    assert hostvars(inventory, "ibm_brisbane")["free"] is True
    assert members(inventory, "cz_devices") == ["ibm_kingston", "ibm_sim"]
    assert members(inventory, "wide") == ["ibm_brisbane", "ibm_kingston"]
    assert members(inventory, "revision_r2") == ["ibm_kingston"]
    assert members(inventory, "message_maintenance") == ["ibm_brisbane"]


def test_strict_keyed_group_with_empty_key_fails(tmp_path):
    # The simulator has no processor family: a keyed group on it needs a default, or fails when strict.
    config = {"keyed_groups": [{"key": "quantum_device_processor_family", "prefix": "family"}], "strict": True}
    with pytest.raises(AnsibleParserError, match="key resulted empty for quantum_device_processor_family in host ibm_sim"):
        run(tmp_path, config)


def documented_examples():
    """The inventory files of EXAMPLES (the commented play is not one)."""
    return [doc for doc in yaml.safe_load_all(plugin_module.EXAMPLES) if doc]


@pytest.mark.parametrize("index", range(len(documented_examples())))
def test_examples_build_the_inventory_they_describe(tmp_path, monkeypatch, index):
    config = documented_examples()[index]
    # The first example reads its connection from the environment; the API key file and the cache
    # directory are the user's; the rest is as documented.
    monkeypatch.setenv("QUANTUM_URL", URL)
    monkeypatch.setenv("QUANTUM_SERVICE_CRN", CRN)
    monkeypatch.setenv("QUANTUM_API_KEY", API_KEY)
    if "api_key" in config:
        config["api_key"] = API_KEY
    config.update(**(cache_config(tmp_path) if config.get("cache") else {}))
    path = tmp_path / "example.quantum.yml"
    path.write_text(yaml.safe_dump(config))
    inventory = InventoryData()
    plugin = make_plugin()
    plugin.parse(inventory, DataLoader(), str(path))
    assert members(inventory, "quantum_devices") == ["ibm_brisbane", "ibm_kingston", "ibm_sim"]
    if config.get("groups"):
        assert members(inventory, "large_devices") == ["ibm_brisbane", "ibm_kingston"]
        assert members(inventory, "idle_devices") == ["ibm_sim"]
        assert members(inventory, "low_readout_error") == ["ibm_kingston"]
        assert sorted(g for g in inventory.groups if g.startswith("processor_type_")) == [
            "processor_type_Eagle_r3", "processor_type_Heron_r2"]
        assert hostvars(inventory, "ibm_kingston")["median_t1_ms"] == 0.2
        assert hostvars(inventory, "ibm_sim")["median_t1_ms"] is None
    # The play's pattern: devices that run jobs now.
    assert members(inventory, "quantum_device_status_operational") == ["ibm_kingston", "ibm_sim"]
    client = FakeClient.instances[-1]
    wanted = (config.get("url", URL), config.get("service_crn", CRN), API_KEY)
    assert (client.url, client.service_crn, client.api_key) == wanted


# ---------------------------------------------------------------- connection options

def test_connection_options_and_env_fallbacks(tmp_path, monkeypatch, fake_client):
    monkeypatch.setenv("QUANTUM_URL", "https://env.test/api/v1")
    monkeypatch.setenv("QUANTUM_IAM_URL", "https://iam.env.test")
    monkeypatch.setenv("QUANTUM_API_KEY", "envkey")
    monkeypatch.setenv("QUANTUM_SERVICE_CRN", "crn:env")
    path = tmp_path / "env.quantum.yml"
    path.write_text("plugin: bridge.hpc.quantum\ntimeout: 7\nvalidate_certs: false\n")
    inventory = InventoryData()
    make_plugin().parse(inventory, DataLoader(), str(path))
    client = fake_client.instances[-1]
    assert (client.url, client.iam_url, client.api_key, client.service_crn, client.timeout, client.validate_certs) == (
        "https://env.test/api/v1", "https://iam.env.test", "envkey", "crn:env", 7.0, False)
    assert client.closed
    assert hostvars(inventory, "ibm_kingston")["quantum_url"] == "https://env.test/api/v1"


# ---------------------------------------------------------------- cache

def test_cache_hit_makes_no_client_call_and_rebuilds_groups(tmp_path, fake_client):
    run(tmp_path, cache_config(tmp_path))
    assert len(fake_client.instances) == 1
    inventory = run(tmp_path, cache_config(tmp_path, groups={"busy": "quantum_device_pending_jobs > 0"},
                                           host_prefix="us_"))
    assert len(fake_client.instances) == 1
    # Groups and prefix come from this run's configuration, the data from the cache.
    assert members(inventory, "busy") == ["us_ibm_kingston"]
    assert members(inventory, "quantum_processor_heron") == ["us_ibm_kingston"]
    assert hostvars(inventory, "us_ibm_kingston")["quantum_device_median_t1_us"] == 200.0


def test_cache_for_another_service_crn_is_not_used(tmp_path, fake_client):
    run(tmp_path, cache_config(tmp_path))
    run(tmp_path, cache_config(tmp_path, service_crn=CRN.replace("01234567", "76543210")))
    assert len(fake_client.instances) == 2


def test_cache_holds_no_api_key_no_native_payload_and_no_properties(tmp_path):
    run(tmp_path, cache_config(tmp_path))
    files = os.listdir(str(tmp_path / "cache"))
    assert len(files) == 1
    text = (tmp_path / "cache" / files[0]).read_text()
    assert API_KEY not in text and "native" not in text and "gate_error" not in text
    payload = json.loads(text)
    # ansible-core 2.19's jsonfile cache wraps the value in a tagged envelope.
    if "__payload__" in payload:
        payload = json.loads(payload["__payload__"])
    assert payload["source"] == {"url": URL, "service_crn": CRN}
    assert [d["name"] for d in payload["devices"]] == ["ibm_kingston", "ibm_brisbane", "ibm_sim"]


def test_flush_cache_reads_ibm_quantum_again_and_refreshes_the_cache(tmp_path, fake_client):
    run(tmp_path, cache_config(tmp_path))
    fake_client.devices_payload = {"ibm_kingston": DEVICES["ibm_kingston"]}
    inventory = run(tmp_path, cache_config(tmp_path), cache=False)
    assert len(fake_client.instances) == 2
    assert members(inventory, "quantum_devices") == ["ibm_kingston"]
    inventory = run(tmp_path, cache_config(tmp_path))
    assert len(fake_client.instances) == 2
    assert members(inventory, "quantum_devices") == ["ibm_kingston"]


# ---------------------------------------------------------------- the real client against the stub service

@pytest.fixture
def stub(monkeypatch):
    """The real QuantumClient with its network pointed at the stub; the runner's config at the stub."""
    runtime = StubRuntime()

    class StubbedClient(QuantumClient):
        def __init__(self, *args, **kwargs):
            super(StubbedClient, self).__init__(*args, **kwargs)
            runtime.attach(self)

    monkeypatch.setattr(plugin_module, "QuantumClient", StubbedClient)
    runtime.config = {"url": STUB_URL, "iam_url": STUB_IAM_URL, "api_key": STUB_API_KEY, "service_crn": STUB_CRN,
                      "retries": 0}
    return runtime


def test_stub_devices(tmp_path, stub):
    inventory = run(tmp_path, stub.config)
    assert members(inventory, "quantum_devices") == ["ibm_kingston", "ibm_paused", "ibm_small"]
    assert members(inventory, "quantum_device_status_not_operational") == ["ibm_paused"]
    assert members(inventory, "quantum_device_status_paused") == ["ibm_paused"]
    assert members(inventory, "quantum_processor_heron") == ["ibm_kingston", "ibm_paused", "ibm_small"]
    small = hostvars(inventory, "ibm_small")
    assert (small["quantum_device_qubits"], small["quantum_device_processor_revision"],
            small["quantum_device_median_t1_us"]) == (2, "r2", None)
    # One token, the list, and status, configuration and properties of each device.
    assert stub.tokens_issued == 1
    assert len(stub.api_requests()) == 1 + 3 * 3
    everything = json.dumps([hostvars(inventory, h) for h in inventory.hosts], default=str)
    assert STUB_API_KEY not in everything and "Bearer" not in everything


def test_stub_cache_holds_no_api_key(tmp_path, stub):
    run(tmp_path, dict(stub.config, **cache_config(tmp_path)))
    cache_dir = tmp_path / "cache"
    text = "".join((cache_dir / name).read_text() for name in os.listdir(str(cache_dir)))
    assert "ibm_kingston" in text
    assert STUB_API_KEY not in text and "access_token" not in text


def test_wrong_api_key_is_a_clear_error_without_the_key(tmp_path, stub):
    wrong = "wr0ng-k3y&<x>-9876"
    with pytest.raises(AnsibleParserError) as err:
        run(tmp_path, dict(stub.config, api_key=wrong))
    message = str(err.value)
    assert message.startswith("bridge.hpc.quantum: Failed to authenticate with API key on IBM Cloud IAM at %s: "
                              "IBM Cloud IAM refused the API key" % STUB_IAM_URL)
    assert "(HTTP 400)" in message
    assert wrong not in message and STUB_API_KEY not in message


def test_missing_api_key_is_a_clear_error(tmp_path, stub):
    with pytest.raises(AnsibleParserError, match=r"bridge.hpc.quantum: .*api_key \(or QUANTUM_API_KEY\) is required"):
        run(tmp_path, dict(stub.config, api_key=None))


def test_stub_devices_have_their_capacity_record(tmp_path, stub):
    inventory = run(tmp_path, stub.config)
    small = hostvars(inventory, "ibm_small")["bridge_capacity"]
    assert (small["name"], small["state"], small["usable"], small["qubits"], small["pending"]) == (
        "ibm_small", "online", True, 2, 0)
    assert hostvars(inventory, "ibm_paused")["bridge_capacity"]["usable"] is False
