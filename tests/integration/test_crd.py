"""deploy/ against a real kube-apiserver: the BridgeJob CRD's admission rules and the controller's RBAC.

The control plane is tools/kube-control-plane.sh (etcd, kube-apiserver with RBAC, kube-controller-manager,
kube-scheduler): a deleted namespace lingers (Terminating) until it is emptied, so every run works in a
fresh one.
"""

import copy
import glob
import json
import os
import shutil
import subprocess
import time
import uuid

import pytest
import yaml
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from conftest import REPO, RUN, kube_control_plane_env, read_env_file
from controller_support import apply_object as apply, tenant_namespace

DEPLOY = os.path.join(REPO, "deploy")
SCRIPT = os.path.join(REPO, "tools", "kube-control-plane.sh")
GROUP, VERSION, PLURAL = "bridge.dev", "v1alpha1", "bridgejobs"
CRD_NAME = "bridgejobs.bridge.dev"
BACKEND_CRD_NAMES = ("bridgebackends.bridge.dev", "clusterbridgebackends.bridge.dev")
CONTROLLER_NAMESPACE = "bridge-system"
CONTROLLER_ACCOUNT = "bridge-controller"
INVALID_SAMPLES = sorted(glob.glob(os.path.join(DEPLOY, "samples", "invalid", "*.yaml")))
MUTABLE_SPEC_FIELDS = ("cancel", "pollInterval")
SAMPLES = ("slurm.yaml", "ray.yaml", "lsf.yaml", "quantum.yaml", "kubernetes.yaml")
# The samples of backend objects and of BridgeJobs that name them (docs/backends.md).
BACKEND_SAMPLES = ("backends.yaml", "placement.yaml")


def load_all(path):
    with open(path) as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc]


def manifests(path):
    """The objects of a file: its documents, with a v1 List replaced by its items."""
    found = []
    for doc in load_all(path):
        found.extend(doc["items"] if doc["kind"] == "List" else [doc])
    return found


def sample(name, kind):
    return copy.deepcopy([doc for doc in manifests(os.path.join(DEPLOY, "samples", name)) if doc["kind"] == kind][0])


def expectations(path):
    """The `# expect-field:` and `# expect-message:` header of an invalid sample."""
    found = {}
    with open(path) as handle:
        for line in handle:
            if line.startswith("# expect-"):
                key, sep, value = line[len("# expect-"):].partition(":")
                if sep:
                    found[key.strip()] = value.strip()
    return found


def crd_schema():
    crd = load_all(os.path.join(DEPLOY, "crd.yaml"))[0]
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


# ------------------------------------------------------------------ files (no apiserver needed)

def test_every_deploy_file_parses_and_kustomization_lists_the_manifests():
    yaml_files = sorted(glob.glob(os.path.join(DEPLOY, "**", "*.yaml"), recursive=True))
    assert yaml_files
    for path in yaml_files:
        # One document per file: ansible-test's yamllint refuses more (several objects go in a List).
        assert len(load_all(path)) == 1, path
        for doc in manifests(path):
            assert doc.get("apiVersion") and doc.get("kind"), path
            assert doc["kind"] in ("Kustomization", "Component") or doc.get("metadata", {}).get("name"), path
    kustomization = load_all(os.path.join(DEPLOY, "kustomization.yaml"))[0]
    top_level = sorted(os.path.basename(path) for path in glob.glob(os.path.join(DEPLOY, "*.yaml")))
    top_level.remove("kustomization.yaml")
    assert sorted(kustomization["resources"]) == top_level


def test_containerfile_copies_every_collection_directory():
    with open(os.path.join(DEPLOY, "Containerfile")) as handle:
        containerfile = handle.read()
    for directory in ("meta", "plugins", "playbooks", "roles", "docs", "controller"):
        if os.path.isdir(os.path.join(REPO, directory)):
            assert "COPY %s/ %s/" % (directory, directory) in containerfile, directory


def test_every_spec_field_but_cancel_and_poll_interval_has_an_immutability_rule():
    spec = crd_schema()["properties"]["spec"]
    guarded = set()
    for rule in spec["x-kubernetes-validations"]:
        if "oldSelf" in rule["rule"]:
            field = rule["fieldPath"].lstrip(".")
            assert "self.%s" % field in rule["rule"] and "oldSelf.%s" % field in rule["rule"], rule
            guarded.add(field)
    assert guarded == set(spec["properties"]) - set(MUTABLE_SPEC_FIELDS)


# ------------------------------------------------------------------ the control plane

def unavailable(message):
    if os.environ.get("BRIDGE_REQUIRE_SERVICES") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def kube():
    """Reuses (or starts) the control plane; returns its env file's values."""
    values = kube_control_plane_env()
    if values is not None:
        return values
    if not os.path.isfile(SCRIPT):
        unavailable("tools/kube-control-plane.sh is missing")
    status = subprocess.run([SCRIPT, "status"], capture_output=True, text=True, check=False)
    if "binaries not built" in status.stdout and shutil.which("go") is None:
        unavailable("kube-apiserver and etcd are not built and there is no Go to build them: tools/kube-control-plane.sh build")
    started = subprocess.run([SCRIPT, "start"], capture_output=True, text=True, check=False, timeout=3600)
    assert started.returncode == 0, "tools/kube-control-plane.sh start failed:\n" + started.stderr[-4000:]
    values = read_env_file(os.path.join(RUN, "kube", "env"))
    assert values, "tools/kube-control-plane.sh start wrote no env file"
    return values


@pytest.fixture(scope="module")
def admin(kube):
    return config.new_client_from_config(config_file=kube["KUBECONFIG"])


@pytest.fixture(scope="module")
def deployed(admin):
    """namespace.yaml, crd.yaml and rbac.yaml applied; the CRD established and served."""
    dynamic = DynamicClient(admin)
    for name in ("namespace.yaml", "crd.yaml", "crd-backends.yaml", "rbac.yaml"):
        for doc in manifests(os.path.join(DEPLOY, name)):
            apply(dynamic, doc)
    extensions = client.ApiextensionsV1Api(admin)
    for crd_name in (CRD_NAME,) + BACKEND_CRD_NAMES:
        deadline = time.time() + 30
        while True:
            crd = extensions.read_custom_resource_definition(crd_name)
            conditions = dict((c.type, c.status) for c in crd.status.conditions or [])
            if conditions.get("Established") == "True":
                break
            assert time.time() < deadline, "CRD %s not Established: %s" % (crd_name, conditions)
            time.sleep(0.2)
    return admin


@pytest.fixture(scope="module")
def namespace(deployed):
    core = client.CoreV1Api(deployed)
    name = "bridge-crd-%s" % uuid.uuid4().hex[:8]
    tenant_namespace(deployed, name, labels={"bridge.dev/test": "crd"})
    for sample_file in SAMPLES:
        # kubernetes.yaml has none: its Job runs on the controller's own cluster.
        for secret in [doc for doc in manifests(os.path.join(DEPLOY, "samples", sample_file)) if doc["kind"] == "Secret"]:
            core.create_namespaced_secret(name, secret)
    objects = client.CustomObjectsApi(deployed)
    # The apiserver serves a new CRD's kind a moment after Established.
    deadline = time.time() + 30
    while True:
        try:
            objects.create_namespaced_custom_object(GROUP, VERSION, name, PLURAL, sample("slurm.yaml", "BridgeJob"), dry_run="All")
            break
        except ApiException as error:
            if error.status != 404 or time.time() > deadline:
                raise
            time.sleep(0.2)
    yield name
    for item in objects.list_namespaced_custom_object(GROUP, VERSION, name, PLURAL)["items"]:
        objects.delete_namespaced_custom_object(GROUP, VERSION, name, PLURAL, item["metadata"]["name"])
    # Its objects are gone already; kube-controller-manager finalizes the namespace in the background.
    core.delete_namespace(name)


@pytest.fixture()
def objects(deployed):
    return client.CustomObjectsApi(deployed)


def create(objects, namespace, body, dry_run=None):
    return objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body, dry_run=dry_run)


def rejection(call, *args, **kwargs):
    """The Status of a call that must fail; returns (HTTP status, message, fields named in causes)."""
    with pytest.raises(ApiException) as caught:
        call(*args, **kwargs)
    status = json.loads(caught.value.body)
    causes = (status.get("details") or {}).get("causes") or []
    return caught.value.status, status["message"], [cause.get("field") for cause in causes]


def fresh_job(objects, namespace, prefix, **spec):
    body = sample("slurm.yaml", "BridgeJob")
    body["metadata"]["name"] = "%s-%s" % (prefix, uuid.uuid4().hex[:6])
    body["spec"].update(spec)
    return create(objects, namespace, body)


def patch(objects, namespace, job, body):
    return objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, job["metadata"]["name"], body)


# ------------------------------------------------------------------ the CRD as served

def test_crd_is_established_with_names_and_printer_columns(deployed):
    crd = client.ApiextensionsV1Api(deployed).read_custom_resource_definition(CRD_NAME)
    assert crd.spec.names.kind == "BridgeJob"
    assert crd.spec.names.short_names == ["bj"]
    assert crd.spec.scope == "Namespaced"
    version = crd.spec.versions[0]
    assert (version.name, version.served, version.storage) == ("v1alpha1", True, True)
    assert version.subresources.status is not None
    columns = [(c.name, c.json_path) for c in version.additional_printer_columns]
    assert columns == [("Backend", ".status.backend.type"), ("Phase", ".status.phase"), ("Job ID", ".status.jobId"),
                       ("Exit Code", ".status.exitCode"), ("Age", ".metadata.creationTimestamp")]


def test_list_as_table_serves_the_printer_columns(deployed, namespace, objects):
    job = fresh_job(objects, namespace, "table")
    objects.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, job["metadata"]["name"],
                                                  {"status": {"phase": "Completed", "jobId": "42", "exitCode": 3,
                                                              "backend": {"type": "slurm"}}})
    table = deployed.call_api(
        "/apis/%s/%s/namespaces/%s/%s/%s" % (GROUP, VERSION, namespace, PLURAL, job["metadata"]["name"]), "GET",
        header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        response_type="object", auth_settings=["BearerToken"], _return_http_data_only=True)
    names = [column["name"] for column in table["columnDefinitions"]]
    assert names == ["Name", "Backend", "Phase", "Job ID", "Exit Code", "Age"]
    assert table["rows"][0]["cells"][:5] == [job["metadata"]["name"], "slurm", "Completed", "42", 3]


# ------------------------------------------------------------------ admission

@pytest.mark.parametrize("sample_file", SAMPLES)
def test_samples_are_accepted_with_defaults_filled_in(objects, namespace, sample_file):
    created = create(objects, namespace, sample(sample_file, "BridgeJob"))
    spec = created["spec"]
    assert spec["backend"]["validateCerts"] is True
    assert spec["cancel"] is False
    assert spec["pollInterval"] == 30
    assert created["metadata"]["generation"] == 1


def test_placement_sample_names_what_the_backends_sample_defines():
    backends = [doc for doc in manifests(os.path.join(DEPLOY, "samples", "backends.yaml")) if doc["kind"].endswith("BridgeBackend")]
    jobs = dict((doc["metadata"]["name"], doc["spec"]) for doc in manifests(os.path.join(DEPLOY, "samples", "placement.yaml")))
    selector = jobs["train-placed"]["placement"]["selector"]["matchLabels"]
    assert [doc["metadata"]["name"] for doc in backends
            if all(doc["metadata"].get("labels", {}).get(key) == value for key, value in selector.items())] == [
        "slurm-a", "lsf-a", "team-ray"]
    ref = jobs["hello-slurm-a"]["backendRef"]
    assert [(doc["kind"], doc["metadata"]["name"]) for doc in backends].count((ref["kind"], ref["name"])) == 1


@pytest.mark.parametrize("sample_file", BACKEND_SAMPLES)
def test_backend_and_placement_samples_are_accepted_with_defaults_filled_in(deployed, namespace, sample_file):
    """Every object of the sample, created as a dry run (a ClusterBridgeBackend's name is the whole
    apiserver's, shared with other runs): the schema and CEL rules of deploy/crd-backends.yaml and
    deploy/crd.yaml take it, with their defaults. The sample's tenant namespace becomes this run's;
    bridge-system is namespace.yaml's."""
    dynamic = DynamicClient(deployed)
    kinds = []
    for doc in manifests(os.path.join(DEPLOY, "samples", sample_file)):
        resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        if resource.namespaced:
            if doc["metadata"].get("namespace") != CONTROLLER_NAMESPACE:
                doc["metadata"]["namespace"] = namespace
                if doc["kind"] == "Secret":
                    # The namespace fixture holds lsf.yaml's Secret of the same name already.
                    doc["metadata"]["name"] = "backends-sample-" + doc["metadata"]["name"]
            created = resource.create(body=doc, namespace=doc["metadata"]["namespace"], dry_run="All").to_dict()
        else:
            created = resource.create(body=doc, dry_run="All").to_dict()
        kinds.append(doc["kind"])
        spec = created.get("spec") or {}
        if doc["kind"] in ("BridgeBackend", "ClusterBridgeBackend"):
            assert spec["validateCerts"] is True and spec["probeIntervalSeconds"] >= 5, created
            assert spec == dict(doc["spec"], validateCerts=True, probeIntervalSeconds=doc["spec"].get("probeIntervalSeconds", 60)), created
        elif doc["kind"] == "BridgeJob":
            assert (spec["cancel"], spec["pollInterval"]) == (False, 30), created
            assert "backend" not in spec and ("backendRef" in spec) != ("placement" in spec), created
            if "placement" in spec:
                assert spec["placement"]["policy"] == doc["spec"]["placement"].get("policy", "FirstFit")
    if sample_file == "backends.yaml":
        assert sorted(set(kinds)) == ["BridgeBackend", "ClusterBridgeBackend", "Secret"]
    else:
        assert kinds == ["BridgeJob", "BridgeJob"]


def test_ca_config_map_key_defaults_to_ca_crt(objects, namespace):
    body = sample("slurm.yaml", "BridgeJob")
    body["metadata"]["name"] = "with-ca"
    body["spec"]["backend"]["caConfigMapRef"] = {"name": "site-ca"}
    created = create(objects, namespace, body, dry_run="All")
    assert created["spec"]["backend"]["caConfigMapRef"] == {"name": "site-ca", "key": "ca.crt"}


@pytest.mark.parametrize("path", INVALID_SAMPLES, ids=[os.path.basename(p)[:-5] for p in INVALID_SAMPLES])
def test_invalid_sample_is_rejected_naming_the_field(objects, namespace, path):
    expected = expectations(path)
    if "strict" in expected:
        # A field the schema does not know is dropped, unless the client asks strict validation.
        status, message, _fields = rejection(objects.create_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL,
                                             load_all(path)[0], field_validation="Strict")
        assert status == 400 and expected["strict"] in message, message
        return
    assert expected.get("field") and expected.get("message"), "%s needs # expect-field: and # expect-message:" % path
    status, message, fields = rejection(create, objects, namespace, load_all(path)[0])
    assert status == 422, message
    assert expected["field"] in fields, message
    assert expected["field"] + ":" in message, message
    assert expected["message"] in message


# path in spec, value, None when accepted or (field, text of the message) when rejected
def nested(levels, leaf=1):
    """{"a": {"a": ... leaf}}, `levels` objects deep."""
    value = leaf
    for _level in range(levels):
        value = {"a": value}
    return value


EDGE_VALUES = [
    (("resources", "memory"), 4096, None),
    (("resources", "memory"), "1.5GiB", None),
    (("resources", "memory"), 0, ("spec.resources.memory", "greater than or equal to 1")),
    (("resources", "memory"), "0G", ("spec.resources.memory", "must be at least 1 MiB")),
    (("resources", "memoryPerCpu"), "512m", None),
    (("resources", "timeLimit"), 90, None),
    (("resources", "timeLimit"), "2-12:30", None),
    (("resources", "timeLimit"), "00:00:00", ("spec.resources.timeLimit", "must be longer than zero")),
    (("resources", "timeLimit"), "1-24", ("spec.resources.timeLimit", "'1-24' is not a time")),
    (("resources", "timeLimit"), "10:75", ("spec.resources.timeLimit", "'10:75' is not a time")),
    (("resources", "tasks"), -1, ("spec.resources.tasks", "greater than or equal to 1")),
    (("backend", "apiVersion"), "v0.0.42", None),
    (("backend", "apiVersion"), "0.0.42", ("spec.backend.apiVersion", "should match")),
    (("backend", "url"), "https://[::1]:6820/slurm", None),
    (("name",), "two words", ("spec.name", "should match")),
    (("environment",), {"DEBUG": 1}, ("spec.environment.DEBUG", "must be of type string")),
    (("environment",), {"_OK_1": "x"}, None),
    (("script",), "#!/bin/bash\n" + "#" * 262144, ("spec.script", "Too long")),
    # Its JMESPath is the controller's to check (tests/unit/controller/test_result_query.py); the schema bounds its length.
    (("resultQuery",), "{exit: exit_code, took: [start_time, end_time]}", None),
    (("resultQuery",), "jobs[", None),
    (("resultQuery",), "q" * 1025, ("spec.resultQuery", "Too long")),
    # backendOptions: free-form under each backend, but bounded (issue 37; docs/bridgejob.md).
    (("backendOptions",), {"quantum": {"pubs": [{"parameter_values": [[0.1, 0.2]], "observables": {"ZZ": 1.0}}]}}, None),
    (("backendOptions",), {"ray": {"runtime_env": {"pip": {"packages": ["numpy"]}, "env_vars": {"A": "1"}}}}, None),
    (("backendOptions",), {"slurm": {"hold": True, "time_limit": {"set": True, "number": 5}}}, None),
    (("backendOptions",), {"slurm": {"a": nested(4)}}, ("spec.backendOptions.slurm.a.a.a.a", "must have at most 0")),
    (("backendOptions",), {"ray": {"runtime_env": [[[[["deep"]]]]]}}, None),
    (("backendOptions",), {"ray": {"runtime_env": [[[[[["deep"]]]]]]}}, (
        "spec.backendOptions.ray.runtime_env[0][0][0][0][0]", "must have at most 0 items")),
    (("backendOptions",), {"lsf": {"-R": ["select[mem>1]"]}}, ("spec.backendOptions.lsf.-R", "must have at most 0 items")),
    (("backendOptions",), {"lsf": {"-%d" % i: "x" for i in range(65)}}, ("spec.backendOptions.lsf", "must have at most 64")),
    (("backendOptions",), {"lsf": {"-G": "g" * 16385}}, ("spec.backendOptions.lsf.-G", "Too long")),
    (("backendOptions",), {"quantum": {"pubs": [{}] * 1025}}, ("spec.backendOptions.quantum.pubs", "must have at most 1024")),
]


@pytest.mark.parametrize("path, value, outcome", EDGE_VALUES, ids=["%s=%s" % (".".join(e[0]), str(e[1])[:16]) for e in EDGE_VALUES])
def test_edge_values(objects, namespace, path, value, outcome):
    body = sample("slurm.yaml", "BridgeJob")
    body["metadata"]["name"] = "edge"
    target = body["spec"]
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    if path[-1] == "memoryPerCpu":
        del target["memory"]
    if outcome is None:
        create(objects, namespace, body, dry_run="All")
        return
    status, message, fields = rejection(create, objects, namespace, body, dry_run="All")
    assert status == 422
    assert outcome[0] in fields, message
    assert outcome[1] in message


def post_raw(api_client, namespace, body):
    """POST a BridgeJob given as JSON text, which the client would encode itself; (HTTP status, Status).

    Python's encoder and decoder stop near 1,000 levels; the apiserver reads JSON up to 10,000 deep."""
    url = "%s/apis/%s/%s/namespaces/%s/%s?dryRun=All" % (api_client.configuration.host, GROUP, VERSION, namespace, PLURAL)
    headers = {"Content-Type": "application/json"}
    api_client.update_params_for_auth(headers, None, ["BearerToken"])
    response = api_client.rest_client.pool_manager.request("POST", url, body=body.encode(), headers=headers)
    return response.status, response.data


def test_backend_options_nested_2000_levels_deep_are_refused_naming_the_field(deployed, namespace):
    # Issue 37: such a BridgeJob was stored, and the controller's LIST and WATCH failed on it in a
    # loop (RecursionError), for every tenant.
    job = sample("slurm.yaml", "BridgeJob")
    job["metadata"]["name"] = "deep"
    job["spec"]["backendOptions"] = {"slurm": "DEEP"}
    depth = 2000
    text = json.dumps(job).replace('"DEEP"', '{"a":' * depth + "1" + "}" * depth)
    status, data = post_raw(deployed, namespace, text)
    assert status == 422, data[:2000]
    message = json.loads(data[:200000])["message"] if len(data) < 200000 else data[:2000].decode()
    assert "spec.backendOptions.slurm.a.a.a.a: Too many: 1: must have at most 0 items" in message, message[:2000]


def test_ray_backend_takes_no_slurm_api_version(objects, namespace):
    body = sample("ray.yaml", "BridgeJob")
    body["spec"]["backend"]["apiVersion"] = "v0.0.42"
    status, message, fields = rejection(create, objects, namespace, body, dry_run="All")
    assert status == 422 and "spec.backend.apiVersion" in fields, message


@pytest.mark.parametrize("sample_file, iam_url, outcome", [
    ("quantum.yaml", "https://iam.test.cloud.ibm.com", None),
    ("quantum.yaml", "http://127.0.0.1:8290", None),
    ("quantum.yaml", "iam.cloud.ibm.com", ("spec.backend.iamUrl", "'iam.cloud.ibm.com' is not an http:// or https:// URL")),
    ("quantum.yaml", "https://" + "i" * 2048, ("spec.backend.iamUrl", "Too long")),
    ("slurm.yaml", "https://iam.cloud.ibm.com", ("spec.backend.iamUrl", "only applies to backend.type quantum")),
], ids=["quantum-https", "quantum-http", "quantum-no-scheme", "quantum-too-long", "slurm"])
def test_iam_url_is_a_url_for_quantum_only(objects, namespace, sample_file, iam_url, outcome):
    body = sample(sample_file, "BridgeJob")
    body["metadata"]["name"] = "iam-url"
    body["spec"]["backend"]["iamUrl"] = iam_url
    if outcome is None:
        assert create(objects, namespace, body, dry_run="All")["spec"]["backend"]["iamUrl"] == iam_url
        return
    status, message, fields = rejection(create, objects, namespace, body, dry_run="All")
    assert status == 422 and outcome[0] in fields, message
    assert outcome[1] in message, message


def test_status_results_hold_counts_or_expectation_values_and_stay_small(objects, namespace):
    job = fresh_job(objects, namespace, "results")
    name = job["metadata"]["name"]
    results = {"pubs": [{"registers": {"meas": {"shots": 1000, "outcomes": 2, "counts": {"00": 507, "11": 493}}}},
                        {"evs": [0.98, -0.01], "stds": [0.01, 0.02], "shape": [2]}], "truncated": False}
    written = objects.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, name,
                                                            {"status": {"phase": "Completed", "results": results}})
    assert written["status"]["results"] == results
    too_many = dict(("%05d" % n, 1) for n in range(17))
    for bad, field in (({"pubs": [{"registers": {"meas": {"counts": too_many}}}]}, "status.results.pubs[0].registers.meas.counts"),
                       ({"pubs": [{"evs": ["high"]}]}, "status.results.pubs[0].evs[0]")):
        code, message, fields = rejection(objects.patch_namespaced_custom_object_status, GROUP, VERSION, namespace, PLURAL,
                                          name, {"status": {"results": bad}})
        assert code == 422 and field in fields, message


# ------------------------------------------------------------------ updates

# merge patches of spec: each changes, adds or removes a field that is fixed once the job exists
IMMUTABLE_CHANGES = [
    ("change-script", {"script": "#!/bin/bash\necho changed\n"}, "spec.script"),
    ("script-to-script-from", {"script": None, "scriptFrom": {"configMapKeyRef": {"name": "s", "key": "k"}}}, "spec.script"),
    ("add-account", {"account": "proj"}, "spec.account"),
    ("add-queue", {"queue": "debug"}, "spec.queue"),
    ("remove-name", {"name": None}, "spec.name"),
    ("remove-environment", {"environment": None}, "spec.environment"),
    ("change-environment", {"environment": {"GREETING": "bye"}}, "spec.environment"),
    ("change-nodes", {"resources": {"nodes": 2}}, "spec.resources"),
    ("add-gpus", {"resources": {"gpus": 1}}, "spec.resources"),
    ("change-url", {"backend": {"url": "https://elsewhere.example.org"}}, "spec.backend"),
    ("turn-off-tls-checks", {"backend": {"validateCerts": False}}, "spec.backend"),
    ("add-backend-options", {"backendOptions": {"slurm": {"exclusive": "user"}}}, "spec.backendOptions"),
    ("change-result-query", {"resultQuery": "exit_code"}, "spec.resultQuery"),
    ("remove-result-query", {"resultQuery": None}, "spec.resultQuery"),
]


@pytest.mark.parametrize("name, change, field", IMMUTABLE_CHANGES, ids=[c[0] for c in IMMUTABLE_CHANGES])
def test_job_part_of_the_spec_is_immutable(objects, namespace, name, change, field):
    job = fresh_job(objects, namespace, name)
    status, message, fields = rejection(patch, objects, namespace, job, {"spec": change})
    assert status == 422, message
    assert field in fields, message
    assert "is immutable after creation" in message


def test_poll_interval_may_change_and_bumps_generation(objects, namespace):
    job = fresh_job(objects, namespace, "poll")
    updated = patch(objects, namespace, job, {"spec": {"pollInterval": 5}})
    assert updated["spec"]["pollInterval"] == 5
    assert updated["metadata"]["generation"] == job["metadata"]["generation"] + 1


def test_cancel_goes_from_false_to_true_and_never_back(objects, namespace):
    job = fresh_job(objects, namespace, "cancel")
    assert job["spec"]["cancel"] is False
    cancelled = patch(objects, namespace, job, {"spec": {"cancel": True}})
    assert cancelled["spec"]["cancel"] is True
    status, message, fields = rejection(patch, objects, namespace, job, {"spec": {"cancel": False}})
    assert status == 422 and "spec.cancel" in fields, message
    assert "cannot go back from true to false" in message
    # Removing the field defaults it to false: also refused.
    status, message, fields = rejection(patch, objects, namespace, job, {"spec": {"cancel": None}})
    assert status == 422 and "spec.cancel" in fields, message
    # Unchanged true is fine (a no-op update must not trip the rule).
    assert patch(objects, namespace, job, {"spec": {"cancel": True, "pollInterval": 60}})["spec"]["cancel"] is True


# ------------------------------------------------------------------ status subresource

def test_status_subresource_is_separate_from_spec(objects, namespace):
    job = fresh_job(objects, namespace, "status")
    name = job["metadata"]["name"]
    generation = job["metadata"]["generation"]
    status = {
        "phase": "Running", "identity": job["metadata"]["uid"], "jobId": "42", "nativeState": "RUNNING",
        "reason": "None", "submitTime": "2026-11-30T02:01:43Z", "startTime": "2026-11-30T02:01:45Z",
        "rendered": {"job": {"name": "hello", "tasks": 1}, "script": "#!/bin/bash\n"}, "observedGeneration": generation,
        "message": "", "conditions": [{"type": "Submitted", "status": "True", "reason": "Submitted", "message": "Slurm job 42",
                                       "lastTransitionTime": "2026-11-30T02:01:43Z", "observedGeneration": generation}],
    }
    written = objects.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, name, {"status": status})
    assert written["status"] == status
    assert written["metadata"]["generation"] == generation

    # The main resource ignores status; the status subresource ignores spec.
    after = patch(objects, namespace, job, {"status": {"phase": "Failed"}, "spec": {"pollInterval": 10}})
    assert after["status"]["phase"] == "Running"
    both = {"spec": {"pollInterval": 99}, "status": {"phase": "Completed"}}
    after = objects.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, name, both)
    assert after["spec"]["pollInterval"] == 10 and after["status"]["phase"] == "Completed"

    # A full status as docs/bridgejob.md shows it, nulls included, through an update (PUT).
    current = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    current["status"].update({"exitCode": None, "failureClass": None, "endTime": None, "phase": "Running"})
    replaced = objects.replace_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, name, current)
    assert replaced["status"]["phase"] == "Running"
    for key in ("exitCode", "failureClass", "endTime"):
        assert key in replaced["status"] and replaced["status"][key] is None, key


@pytest.mark.parametrize("result", [{"exit": 0, "took": ["2026-11-30T02:01:45Z", None]}, ["41", "42"], "completed", 3.5, True],
                         ids=["object", "list", "string", "number", "bool"])
def test_status_result_holds_whatever_the_result_query_selected(objects, namespace, result):
    job = fresh_job(objects, namespace, "result")
    written = objects.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, job["metadata"]["name"],
                                                            {"status": {"phase": "Completed", "result": result}})
    assert written["status"]["result"] == result


@pytest.mark.parametrize("status, field", [
    ({"phase": "Done"}, "status.phase"),
    ({"failureClass": "bad_luck"}, "status.failureClass"),
    ({"submitTime": "yesterday"}, "status.submitTime"),
    ({"conditions": [{"type": "Running", "status": "Maybe", "reason": "X", "message": "",
                      "lastTransitionTime": "2026-11-30T02:01:43Z"}]}, "status.conditions[0].status"),
], ids=["phase", "failureClass", "submitTime", "condition-status"])
def test_status_is_validated_too(objects, namespace, status, field):
    job = fresh_job(objects, namespace, "bad-status")
    code, message, fields = rejection(objects.patch_namespaced_custom_object_status, GROUP, VERSION, namespace, PLURAL,
                                      job["metadata"]["name"], {"status": status})
    assert code == 422 and field in fields, message


# ------------------------------------------------------------------ backendRef and placement (issue 24)

def where_to_run(**where):
    """The slurm sample with spec.backend replaced by `where` (backendRef=..., placement=...)."""
    body = sample("slurm.yaml", "BridgeJob")
    body["metadata"]["name"] = "where-%s" % uuid.uuid4().hex[:6]
    del body["spec"]["backend"]
    body["spec"].update(where)
    return body


SELECTOR = {"matchLabels": {"site": "hpc"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}, {"key": "retired", "operator": "DoesNotExist"}]}


def test_a_backend_ref_defaults_its_kind_and_a_placement_its_policy_and_candidate_kinds(objects, namespace):
    created = create(objects, namespace, where_to_run(backendRef={"name": "slurm-a"}), dry_run="All")
    assert created["spec"]["backendRef"] == {"kind": "BridgeBackend", "name": "slurm-a"}
    candidates = [{"name": "slurm-a"}, {"kind": "ClusterBridgeBackend", "name": "slurm-a", "queues": ["debug", "gpu"]}]
    created = create(objects, namespace, where_to_run(placement={"candidates": candidates}), dry_run="All")
    assert created["spec"]["placement"]["policy"] == "FirstFit"
    assert [c["kind"] for c in created["spec"]["placement"]["candidates"]] == ["BridgeBackend", "ClusterBridgeBackend"]
    created = create(objects, namespace, where_to_run(placement={"selector": SELECTOR, "policy": "LeastQueued"}), dry_run="All")
    assert created["spec"]["placement"]["selector"] == SELECTOR


def test_a_script_without_an_interpreter_line_is_the_backend_objects_to_judge(objects, namespace):
    # The schema cannot know the type of a referenced backend (a quantum one takes a circuit).
    body = where_to_run(backendRef={"kind": "ClusterBridgeBackend", "name": "ibm"})
    body["spec"]["script"] = "OPENQASM 3.0;\nqubit[1] q;\n"
    create(objects, namespace, body, dry_run="All")


WHERE_REJECTED = [
    ("ref-and-placement", {"backendRef": {"name": "a"}, "placement": {"candidates": [{"name": "a"}]}},
     "spec.placement", "spec.backendRef and spec.placement are exclusive"),
    ("ref-kind", {"backendRef": {"kind": "Backend", "name": "a"}}, "spec.backendRef.kind", "Unsupported value"),
    ("ref-without-name", {"backendRef": {"kind": "BridgeBackend"}}, "spec.backendRef.name", "Required value"),
    ("placement-empty", {"placement": {}}, "spec.placement.candidates", "give exactly one of"),
    ("no-candidates", {"placement": {"candidates": []}}, "spec.placement.candidates", "at least 1"),
    ("too-many-candidates", {"placement": {"candidates": [{"name": "b%d" % n} for n in range(17)]}},
     "spec.placement.candidates", "must have at most 16 items"),
    ("duplicate-candidate", {"placement": {"candidates": [{"name": "a"}, {"kind": "BridgeBackend", "name": "a"}]}},
     "spec.placement.candidates[1]", "Duplicate value"),
    ("policy", {"placement": {"selector": {}, "policy": "Random"}}, "spec.placement.policy", "Unsupported value"),
    ("in-without-values", {"placement": {"selector": {"matchExpressions": [{"key": "site", "operator": "In"}]}}},
     "spec.placement.selector.matchExpressions[0].values", "In and NotIn need values"),
    ("exists-with-values", {"placement": {"selector": {"matchExpressions": [{"key": "site", "operator": "Exists",
                                                                             "values": ["x"]}]}}},
     "spec.placement.selector.matchExpressions[0].values", "Exists and DoesNotExist take none"),
]


@pytest.mark.parametrize("name, where, field, text", WHERE_REJECTED, ids=[w[0] for w in WHERE_REJECTED])
def test_where_to_run_is_checked_naming_the_field(objects, namespace, name, where, field, text):
    status, message, fields = rejection(create, objects, namespace, where_to_run(**where), dry_run="All")
    assert status == 422 and field in fields, message
    assert text in message, message


WHERE_CHANGES = [
    ("ref-name", {"backendRef": {"name": "slurm-a"}}, {"backendRef": {"name": "slurm-b"}}, "spec.backendRef"),
    ("ref-kind", {"backendRef": {"name": "slurm-a"}}, {"backendRef": {"kind": "ClusterBridgeBackend"}}, "spec.backendRef"),
    ("ref-to-backend", {"backendRef": {"name": "slurm-a"}},
     {"backendRef": None, "backend": {"type": "ray", "url": "http://ray:8265"}}, "spec.backend"),
    ("placement-policy", {"placement": {"selector": {}}}, {"placement": {"policy": "LeastQueued"}}, "spec.placement"),
    ("placement-candidates", {"placement": {"candidates": [{"name": "a"}]}},
     {"placement": {"candidates": [{"name": "a"}, {"name": "b"}]}}, "spec.placement"),
    ("placement-to-ref", {"placement": {"selector": {}}}, {"placement": None, "backendRef": {"name": "a"}}, "spec.placement"),
]


@pytest.mark.parametrize("name, where, change, field", WHERE_CHANGES, ids=[c[0] for c in WHERE_CHANGES])
def test_where_to_run_is_immutable(objects, namespace, name, where, change, field):
    job = create(objects, namespace, where_to_run(**where))
    status, message, fields = rejection(patch, objects, namespace, job, {"spec": change})
    assert status == 422 and field in fields, message
    assert "is immutable after creation" in message or "exclusive" in message, message
    assert patch(objects, namespace, job, {"spec": {"pollInterval": 7}})["spec"]["pollInterval"] == 7


def test_status_placement_and_backend_are_stored_and_bounded(objects, namespace):
    job = create(objects, namespace, where_to_run(placement={"selector": {}}))
    name = job["metadata"]["name"]
    placement = {"backend": {"kind": "ClusterBridgeBackend", "name": "slurm-a"}, "type": "slurm", "queue": "debug",
                 "policy": "FirstFit", "placedTime": "2026-12-03T18:00:00Z",
                 "rejected": [{"backend": "BridgeBackend/small", "queue": "debug",
                               "reason": "resources.gpus: 2 GPUs per node requested; the nodes of 'debug' have at most 0"},
                              {"backend": "ClusterBridgeBackend/down", "reason": "ConnectionFailed: connection refused"}]}
    backend = {"kind": "ClusterBridgeBackend", "name": "slurm-a", "type": "slurm"}
    condition = {"type": "Placed", "status": "True", "reason": "Placed", "message": "FirstFit chose ClusterBridgeBackend/slurm-a",
                 "lastTransitionTime": "2026-12-03T18:00:00Z"}
    written = objects.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, name, {"status": {"placement": placement, "backend": backend, "conditions": [condition]}})
    assert written["status"]["placement"] == placement and written["status"]["backend"] == backend
    too_many = dict(placement, rejected=[{"backend": "BridgeBackend/b%d" % n, "reason": "no"} for n in range(51)])
    too_long = dict(placement, rejected=[{"backend": "BridgeBackend/b", "reason": "x" * 301}])
    for bad, field in ((too_many, "status.placement.rejected"), (too_long, "status.placement.rejected[0].reason")):
        code, message, fields = rejection(objects.patch_namespaced_custom_object_status, GROUP, VERSION, namespace, PLURAL,
                                          name, {"status": {"placement": bad}})
        assert code == 422 and field in fields, message


# ------------------------------------------------------------------ RBAC of the controller's ServiceAccount

@pytest.fixture(scope="module")
def controller(kube, deployed):
    """An API client that authenticates as system:serviceaccount:bridge-system:bridge-controller."""
    return login(kube, deployed, CONTROLLER_NAMESPACE, CONTROLLER_ACCOUNT)


def login(kube, admin_client, namespace, account):  # pylint: disable=redefined-outer-name
    """An API client that authenticates with a fresh token of the ServiceAccount."""
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600))
    token = client.CoreV1Api(admin_client).create_namespaced_service_account_token(account, namespace, request).status.token
    configuration = client.Configuration()
    configuration.host = kube["KUBE_API"]
    configuration.ssl_ca_cert = kube["KUBE_CA_FILE"]
    configuration.api_key = {"authorization": token}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    return client.ApiClient(configuration)


def forbidden(call, *args, **kwargs):
    with pytest.raises(ApiException) as caught:
        call(*args, **kwargs)
    body = caught.value.body
    if isinstance(body, bytes):
        body = body.decode("utf-8")
    assert caught.value.status == 403, body
    assert "system:serviceaccount:%s:%s" % (CONTROLLER_NAMESPACE, CONTROLLER_ACCOUNT) in body


def test_controller_can_watch_and_update_bridgejobs(controller, objects, namespace):
    job = fresh_job(objects, namespace, "rbac")
    name = job["metadata"]["name"]
    mine = client.CustomObjectsApi(controller)
    listed = mine.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    assert name in [item["metadata"]["name"] for item in listed["items"]]
    seen = [event["object"]["metadata"]["name"] for event in watch.Watch().stream(
        mine.list_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, timeout_seconds=1)]
    assert name in seen
    assert mine.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)["metadata"]["uid"] == job["metadata"]["uid"]
    finalized = mine.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, {"metadata": {"finalizers": ["bridge.dev/cancel"]}})
    assert finalized["metadata"]["finalizers"] == ["bridge.dev/cancel"]
    mine.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, {"metadata": {"finalizers": None}})
    written = mine.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, name, {"status": {"phase": "Queued", "jobId": "7"}})
    assert written["status"]["jobId"] == "7"
    assert mine.get_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, name)["status"]["phase"] == "Queued"


def test_controller_reads_named_secrets_and_config_maps_only(controller, deployed, namespace):
    client.CoreV1Api(deployed).create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="scripts"), data={"hello.sh": "#!/bin/bash\n"}))
    core = client.CoreV1Api(controller)
    assert core.read_namespaced_secret("slurm-credentials", namespace).data["user"]
    assert core.read_namespaced_config_map("scripts", namespace).data["hello.sh"] == "#!/bin/bash\n"
    forbidden(core.list_namespaced_secret, namespace)
    forbidden(core.list_secret_for_all_namespaces)
    forbidden(core.list_namespaced_secret, namespace, watch=True, timeout_seconds=1, _preload_content=False)
    forbidden(core.list_namespaced_config_map, namespace)
    forbidden(core.patch_namespaced_secret, "slurm-credentials", namespace, {"stringData": {"token": "x"}})


def test_controller_records_events(controller, namespace, objects):
    job = fresh_job(objects, namespace, "events")
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name=job["metadata"]["name"] + "."),
        involved_object=client.V1ObjectReference(api_version="%s/%s" % (GROUP, VERSION), kind="BridgeJob", name=job["metadata"]["name"],
                                                 namespace=namespace, uid=job["metadata"]["uid"]),
        reason="Submitted", message="Slurm job 42", type="Normal", count=1,
        source=client.V1EventSource(component="bridge-controller"))
    core = client.CoreV1Api(controller)
    created = core.create_namespaced_event(namespace, event)
    core.patch_namespaced_event(created.metadata.name, namespace, {"count": 2})
    forbidden(core.list_namespaced_event, namespace)


def test_controller_holds_its_lease_only_in_its_namespace(controller, deployed, namespace):
    coordination = client.CoordinationV1Api(controller)
    name = "bridge-controller-test-%s" % uuid.uuid4().hex[:6]
    lease = client.V1Lease(metadata=client.V1ObjectMeta(name=name), spec=client.V1LeaseSpec(holder_identity="pod-a", lease_duration_seconds=15))
    try:
        coordination.create_namespaced_lease(CONTROLLER_NAMESPACE, lease)
        current = coordination.read_namespaced_lease(name, CONTROLLER_NAMESPACE)
        current.spec.holder_identity = "pod-b"
        assert coordination.replace_namespaced_lease(name, CONTROLLER_NAMESPACE, current).spec.holder_identity == "pod-b"
        forbidden(coordination.delete_namespaced_lease, name, CONTROLLER_NAMESPACE)
        forbidden(coordination.create_namespaced_lease, namespace, lease)
        forbidden(coordination.list_namespaced_lease, CONTROLLER_NAMESPACE)
    finally:
        client.CoordinationV1Api(deployed).delete_namespaced_lease(name, CONTROLLER_NAMESPACE)


def test_the_controller_creates_no_job_and_reads_no_pod_itself(controller, namespace):
    """backend.type kubernetes without a Secret runs as the namespace's Job ServiceAccount, whose
    token is all the controller may get there (of that account alone), never as the controller."""
    batch, core = client.BatchV1Api(controller), client.CoreV1Api(controller)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "nope"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "job", "image": "localhost/bridge/busybox:latest"}]}}}}
    forbidden(batch.create_namespaced_job, namespace, job)
    forbidden(batch.list_namespaced_job, namespace)
    forbidden(core.list_namespaced_pod, namespace)
    forbidden(core.create_namespaced_config_map, namespace, {"metadata": {"name": "nope"}})
    forbidden(core.list_node)
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600))
    assert core.create_namespaced_service_account_token("bridge-runner", namespace, request).status.token
    forbidden(core.create_namespaced_service_account_token, "default", namespace, request)
    forbidden(core.create_namespaced_service_account_token, "bridge-controller", CONTROLLER_NAMESPACE, request)


def test_the_job_service_account_runs_kubernetes_jobs_it_cannot_change(kube, deployed, namespace):
    """backend.type kubernetes without a Secret: the Job ServiceAccount (deploy/tenant/tenant.yaml)
    creates, reads, lists and deletes Jobs and their script's ConfigMap, reads Pods and their logs,
    and no more."""
    runner = login(kube, deployed, namespace, "bridge-runner")
    batch, core = client.BatchV1Api(runner), client.CoreV1Api(runner)
    name = "rbac-%s" % uuid.uuid4().hex[:6]
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={"script": "#!/bin/sh\n"}))
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {"suspend": True, "template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "job", "image": "localhost/bridge/busybox:latest"}]}}}}
    created = batch.create_namespaced_job(namespace, job)
    core.patch_namespaced_config_map(name, namespace, {"metadata": {"ownerReferences": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": created.metadata.uid}]}})
    assert batch.read_namespaced_job(name, namespace).metadata.uid == created.metadata.uid
    assert name in [item.metadata.name for item in batch.list_namespaced_job(namespace).items]
    core.list_namespaced_pod(namespace, label_selector="job-name=%s" % name)
    core.read_namespace(namespace)
    with pytest.raises(ApiException):
        core.list_node()  # the preflight skips what it may not read
    with pytest.raises(ApiException):
        core.read_namespaced_secret("slurm-credentials", namespace)
    forbidden_as = "system:serviceaccount:%s:bridge-runner" % namespace
    with pytest.raises(ApiException) as caught:
        batch.patch_namespaced_job(name, namespace, {"spec": {"suspend": False}})
    assert caught.value.status == 403 and forbidden_as in str(caught.value.body)
    for call, args in ((core.delete_namespaced_config_map, (name, namespace)),
                       (core.create_namespaced_pod, (namespace, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                                                 "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))):
        with pytest.raises(ApiException) as caught:
            call(*args)
        assert caught.value.status == 403, caught.value.body
    batch.delete_namespaced_job(name, namespace, propagation_policy="Background")


def test_controller_cannot_do_what_it_does_not_need(controller, objects, namespace):
    job = fresh_job(objects, namespace, "forbidden")
    mine = client.CustomObjectsApi(controller)
    forbidden(mine.delete_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, job["metadata"]["name"])
    forbidden(mine.create_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, sample("ray.yaml", "BridgeJob"))
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="nope"), spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]))
    forbidden(client.CoreV1Api(controller).create_namespaced_pod, namespace, pod)
    # Namespaces are listed and watched (their labels, for namespaceSelector), never changed.
    forbidden(client.CoreV1Api(controller).patch_namespace, namespace, {"metadata": {"labels": {"x": "y"}}})
    forbidden(client.CoreV1Api(controller).create_namespace, {"metadata": {"name": "bridge-nope-%s" % uuid.uuid4().hex[:6]}})
    forbidden(client.RbacAuthorizationV1Api(controller).list_cluster_role)


def test_controller_watches_backend_objects_and_writes_only_their_status(controller, deployed, namespace):
    """The catalog lists and watches both kinds of backend object and the namespaces' labels; the
    probe patches /status; the spec is the tenants' and the platform team's."""
    admin, mine = client.CustomObjectsApi(deployed), client.CustomObjectsApi(controller)
    name = "rbac-%s" % uuid.uuid4().hex[:6]
    spec = {"type": "ray", "url": "http://ray.example.org:8265"}
    admin.create_namespaced_custom_object(GROUP, VERSION, namespace, "bridgebackends",
                                          {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "BridgeBackend",
                                           "metadata": {"name": name}, "spec": spec})
    admin.create_cluster_custom_object(GROUP, VERSION, "clusterbridgebackends",
                                       {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "ClusterBridgeBackend",
                                        "metadata": {"name": name}, "spec": spec})
    try:
        listed = mine.list_cluster_custom_object(GROUP, VERSION, "bridgebackends")
        assert name in [item["metadata"]["name"] for item in listed["items"]]
        assert name in [item["metadata"]["name"] for item in mine.list_cluster_custom_object(GROUP, VERSION, "clusterbridgebackends")["items"]]
        seen = [event["object"]["metadata"]["name"] for event in watch.Watch().stream(
            mine.list_cluster_custom_object, GROUP, VERSION, "clusterbridgebackends", timeout_seconds=1)]
        assert name in seen
        status = {"status": {"version": "2.40.0", "queueCount": 1}}
        assert mine.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, "bridgebackends", name, status)["status"]["version"] == "2.40.0"
        assert mine.patch_cluster_custom_object_status(GROUP, VERSION, "clusterbridgebackends", name, status)["status"]["queueCount"] == 1
        forbidden(mine.patch_namespaced_custom_object, GROUP, VERSION, namespace, "bridgebackends", name, {"spec": {"url": "http://x:1"}})
        forbidden(mine.patch_cluster_custom_object, GROUP, VERSION, "clusterbridgebackends", name, {"spec": {"url": "http://x:1"}})
        forbidden(mine.delete_cluster_custom_object, GROUP, VERSION, "clusterbridgebackends", name)
        forbidden(mine.create_namespaced_custom_object, GROUP, VERSION, namespace, "bridgebackends",
                  {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "BridgeBackend", "metadata": {"name": name + "x"}, "spec": spec})
        core = client.CoreV1Api(controller)
        assert namespace in [item.metadata.name for item in core.list_namespace().items]
        assert namespace in [event["object"].metadata.name for event in watch.Watch().stream(core.list_namespace, timeout_seconds=1)]
    finally:
        admin.delete_namespaced_custom_object(GROUP, VERSION, namespace, "bridgebackends", name)
        admin.delete_cluster_custom_object(GROUP, VERSION, "clusterbridgebackends", name)


def test_controller_reads_the_cluster_backends_secret_only_in_its_namespace(controller, deployed, namespace):
    """A ClusterBridgeBackend's shared Secret and CA ConfigMap live in bridge-system: read by name
    there, neither listed there nor read in a namespace of no tenant's (kube-system)."""
    admin, core = client.CoreV1Api(deployed), client.CoreV1Api(controller)
    name = "bridge-rbac-%s" % uuid.uuid4().hex[:6]
    meta = client.V1ObjectMeta(name=name)
    admin.create_namespaced_secret(CONTROLLER_NAMESPACE, client.V1Secret(metadata=meta, string_data={"token": "t"}))
    admin.create_namespaced_config_map(CONTROLLER_NAMESPACE, client.V1ConfigMap(metadata=meta, data={"ca.crt": "pem"}))
    try:
        assert core.read_namespaced_secret(name, CONTROLLER_NAMESPACE).data["token"]
        assert core.read_namespaced_config_map(name, CONTROLLER_NAMESPACE).data["ca.crt"] == "pem"
        forbidden(core.list_namespaced_secret, CONTROLLER_NAMESPACE)
        forbidden(core.patch_namespaced_secret, name, CONTROLLER_NAMESPACE, {"stringData": {"token": "x"}})
        forbidden(core.delete_namespaced_config_map, name, CONTROLLER_NAMESPACE)
    finally:
        admin.delete_namespaced_secret(name, CONTROLLER_NAMESPACE)
        admin.delete_namespaced_config_map(name, CONTROLLER_NAMESPACE)


def test_deployment_passes_server_side_dry_run_and_restricted_pod_security(deployed):
    """deployment.yaml is only dry-run here (admission is what this test checks): the apiserver must accept it,
    and its pod must pass the namespace's Pod Security level (enforced on pods, not Deployments)."""
    dynamic = DynamicClient(deployed)
    deployment = manifests(os.path.join(DEPLOY, "deployment.yaml"))[0]
    try:
        dynamic.resources.get(api_version="apps/v1", kind="Deployment").create(body=deployment, namespace=CONTROLLER_NAMESPACE, dry_run="All")
    except ApiException as error:
        assert error.status == 409, error.body
    namespace_labels = manifests(os.path.join(DEPLOY, "namespace.yaml"))[0]["metadata"]["labels"]
    assert namespace_labels["pod-security.kubernetes.io/enforce"] == "restricted"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": dict(deployment["spec"]["template"]["metadata"], name="bridge-controller-dry-run"),
           "spec": deployment["spec"]["template"]["spec"]}
    dynamic.resources.get(api_version="v1", kind="Pod").create(body=pod, namespace=CONTROLLER_NAMESPACE, dry_run="All")
