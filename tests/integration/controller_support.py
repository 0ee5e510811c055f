"""What the controller's integration tests and bench/controller_load.py share.

No pytest and no conftest here: the benchmark imports this as a plain module.
"""

import os
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(REPO, ".run", "collections")
sys.path.insert(0, os.path.join(REPO, "controller"))

from bridge_controller.processes import descendants  # noqa: E402,F401 pylint: disable=wrong-import-position,unused-import
GROUP, VERSION, PLURAL = "bridge.dev", "v1alpha1", "bridgejobs"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def crds():
    """The CRDs the controller serves: deploy/crd.yaml's BridgeJob and deploy/crd-backends.yaml's
    BridgeBackend and ClusterBridgeBackend (a List)."""
    import yaml

    found = []
    for name in ("crd.yaml", "crd-backends.yaml"):
        with open(os.path.join(REPO, "deploy", name)) as handle:
            doc = yaml.safe_load(handle)
        found.extend(doc["items"] if doc["kind"] == "List" else [doc])
    return found


def install_crd(api_client, attempts=100):
    """Create the CRDs (crds()), or replace the ones there with them, and wait, up to attempts tenths
    of a second each, until the apiserver serves them (Established).

    Replaced, not kept: the apiserver is shared by every work tree, and one tree's CRD prunes the
    fields another tree's adds (an older CRD would drop spec.backend.iamUrl and status.results)."""
    from kubernetes import client

    extensions = client.ApiextensionsV1Api(api_client)
    for body in crds():
        for attempt in range(5):
            try:
                extensions.create_custom_resource_definition(body)
                break
            except client.exceptions.ApiException as exc:
                if exc.status != 409:
                    raise
            current = extensions.read_custom_resource_definition(body["metadata"]["name"])
            body["metadata"]["resourceVersion"] = current.metadata.resource_version
            try:
                extensions.replace_custom_resource_definition(body["metadata"]["name"], body)
                break
            except client.exceptions.ApiException as exc:
                if exc.status != 409 or attempt == 4:
                    raise
    for body in crds():
        for _attempt in range(attempts):
            crd = extensions.read_custom_resource_definition(body["metadata"]["name"])
            if any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or [])):
                break
            time.sleep(0.1)
    install_admission(api_client)


def manifest_objects(*path):
    """The objects of a file of deploy/: its documents, a v1 List replaced by its items."""
    import yaml

    with open(os.path.join(REPO, "deploy", *path)) as handle:
        found = []
        for doc in yaml.safe_load_all(handle):
            if doc:
                found.extend(doc["items"] if doc["kind"] == "List" else [doc])
    return found


def apply_object(dynamic, doc):
    """Create `doc`, or replace what is there (retried when someone else wrote in between)."""
    import copy

    from kubernetes.client.rest import ApiException

    resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
    namespace = doc["metadata"].get("namespace")
    for attempt in range(5):
        try:
            return resource.create(body=doc, namespace=namespace)
        except ApiException as error:
            if error.status != 409:
                raise
        body = copy.deepcopy(doc)
        body["metadata"]["resourceVersion"] = resource.get(name=doc["metadata"]["name"], namespace=namespace).metadata.resourceVersion
        try:
            return resource.replace(body=body, namespace=namespace)
        except ApiException as error:
            if error.status != 409 or attempt == 4:
                raise
    raise AssertionError("unreachable")


def install_admission(api_client, attempts=600):
    """deploy/admission-policy.yaml and deploy/author-mutation/ applied (they stay: the other tests
    create BridgeJobs as the admin, whom they let through), and waited for, up to attempts tenths
    of a second, until a BridgeJob created now gets its author (the apiserver loads a new policy a
    moment after it is written)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException
    from kubernetes.dynamic import DynamicClient

    dynamic = DynamicClient(api_client)
    for doc in manifest_objects("admission-policy.yaml") + manifest_objects("author-mutation", "author-policy.yaml"):
        apply_object(dynamic, doc)
    probe = [doc for doc in manifest_objects("samples", "slurm.yaml") if doc["kind"] == "BridgeJob"][0]
    probe["metadata"] = {"name": "author-probe"}
    custom = client.CustomObjectsApi(api_client)
    for _attempt in range(attempts):
        try:
            created = custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, probe, dry_run="All")
            if (created["metadata"].get("annotations") or {}).get("bridge.dev/author"):
                return
        except ApiException as error:
            # 503: a CRD replaced a moment ago is not served again yet; the others: the policies are not loaded yet.
            if error.status not in (403, 404, 422, 503):
                raise
        time.sleep(0.1)
    raise AssertionError("the author-mutation policy did not record an author")


def tenant_namespace(api_client, name, labels=None):
    """Namespace `name` as an operator gives it to a tenant: deploy/tenant/tenant.yaml applied in it
    (the controller's RoleBinding there, and the Job ServiceAccount bridge-runner)."""
    from kubernetes import client
    from kubernetes.dynamic import DynamicClient

    client.CoreV1Api(api_client).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)))
    dynamic = DynamicClient(api_client)
    tenant = tenant_objects(name)
    # The ClusterRoles tenant.yaml binds (deploy/rbac.yaml): a test may run before any that applies it.
    roles = set(doc["roleRef"]["name"] for doc in tenant if "roleRef" in doc)
    for doc in manifest_objects("rbac.yaml"):
        if doc["kind"] == "ClusterRole" and doc["metadata"]["name"] in roles:
            apply_object(dynamic, doc)
    for doc in tenant:
        apply_object(dynamic, doc)


def tenant_objects(namespace):
    """deploy/tenant/tenant.yaml's objects with `namespace` set where an operator sets it."""
    found = manifest_objects("tenant", "tenant.yaml")
    for doc in found:
        doc["metadata"]["namespace"] = namespace
        for subject in doc.get("subjects") or []:
            if subject["name"] == "bridge-runner":
                subject["namespace"] = namespace
    return found


def slurm_namespace(core, name, slurm):
    """A tenant's namespace (tenant_namespace) with the Secret `slurm` holding the user and token of
    the cluster whose env file values are `slurm`."""
    from kubernetes import client

    tenant_namespace(core.api_client, name)
    core.create_namespaced_secret(name, client.V1Secret(
        metadata=client.V1ObjectMeta(name="slurm"), string_data={"user": slurm["SLURM_USER"], "token": slurm["SLURM_JWT"]}))


def slurm_backend(slurm):
    """spec.backend of a BridgeJob for that cluster, speaking its newest REST version."""
    return {"type": "slurm", "url": slurm["SLURM_URL"], "credentialsSecretRef": {"name": "slurm"},
            "apiVersion": slurm["SLURM_API_VERSIONS"].split(",")[0]}


def controller_env(**extra):
    """The environment of a controller process of this venv: its package, and this checkout's
    collection where it imports bridge.hpc from (the image names the installed one so)."""
    return dict(os.environ, PYTHONPATH=os.path.join(REPO, "controller"), ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
                PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"], **extra)


def start_controller(kubeconfig, selector, work_dir, log, port):
    """The controller as a process of this venv, on the BridgeJobs labelled `selector`, its runner
    dirs under `work_dir`, its output to the open file `log`; batches after 0.3 s."""
    env = controller_env()
    return subprocess.Popen(
        [sys.executable, "-m", "bridge_controller.main", "--kubeconfig", kubeconfig, "--selector", selector,
         "--playbook-dir", os.path.join(REPO, "playbooks"), "--work-dir", str(work_dir),
         "--collections-path", COLLECTIONS, "--port", str(port), "--bind-address", "127.0.0.1", "--batch-window", "0.3"],
        stdout=log, stderr=subprocess.STDOUT, env=env)


def release_labelled(api_client, selector):
    """Drop the finalizer of every BridgeJob with labels `selector`, in any namespace: a deleted
    namespace waits for its BridgeJobs' finalizers, which only a controller removes."""
    from kubernetes import client

    custom = client.CustomObjectsApi(api_client)
    for item in custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, label_selector=selector)["items"]:
        try:
            custom.patch_namespaced_custom_object(GROUP, VERSION, item["metadata"]["namespace"], PLURAL,
                                                  item["metadata"]["name"], {"metadata": {"finalizers": []}})
        except client.exceptions.ApiException:
            pass  # gone already


def release_all(custom, namespace, delete=False):
    """Clean-up after a test: drop the finalizer of every BridgeJob in `namespace` (no cancel), and
    delete them too when asked; returns how many there were."""
    from kubernetes import client

    items = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]
    for item in items:
        name = item["metadata"]["name"]
        try:
            if item["metadata"].get("finalizers"):
                custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, {"metadata": {"finalizers": []}})
            if delete:
                custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except client.exceptions.ApiException:
            pass  # gone already
    return len(items)
