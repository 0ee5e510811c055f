"""A tenant may not act as the controller: the attacks of issue 21, tried through the real apiserver
against a running controller logged in with its ServiceAccount's token (deploy/rbac.yaml).

Whoever may create BridgeJobs and Secrets in tenant-a writes, as a tenant would:

* a Jinja expression (a `pipe` lookup that would create a marker file on the controller's
  machine) in every string field the CRD admits it in, on Slurm 22.05, Ray and Kubernetes Jobs,
  in backend.url (slurm) and backend.iamUrl (quantum), where the URL parser refuses it: no marker appears, and where the field
  reaches the backend, the backend holds the text unchanged (Slurm's job name, output files,
  working directory, the script it ran, inline or from a ConfigMap, and the variables it saw; Ray's
  runtime_env, metadata and the driver's output; the Kubernetes Job's env and annotations; the request paths a local HTTP listener received);
  the fields whose schema refuses braces (namespace, apiVersion, environment keys) are refused by
  the apiserver;
* a kubeconfig Secret whose user runs a command (exec), and one whose user reads a file of the
  controller's machine as its token (tokenFile) for a server the tenant listens on: both refused
  with InsecureKubeconfig before any connection; the listener gets no request;
* tenant-b's Secret and ConfigMap named from tenant-a: read in tenant-a only, so not found;
  a kubernetes BridgeJob naming tenant-b's namespace: refused (the admission policy when it is
  installed, else the controller); no Job in tenant-b;
* a backend URL outside the operator's --allowed-backend-url: Failed BackendURLNotAllowed and
  nothing sent; a URL allowed but serving an internal HTTP page: the page is in no status.
"""

import base64
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import uuid

import pytest

from conftest import COLLECTIONS, REPO, kube_node_env, quantum_env, ray_env, require_quantum, require_ray, require_slurm
from controller_support import GROUP, PLURAL, VERSION, controller_env, free_port, release_labelled, tenant_namespace
from test_controller_chaos import account  # noqa: F401 pylint: disable=unused-import
from test_controller_e2e import kube, wait_for  # noqa: F401 pylint: disable=unused-import

# Its controller did not stop within 120 s of SIGTERM once, with every core busy: a run of its last
# batch had not ended. Alone until that is understood.
pytestmark = pytest.mark.serial

RUN_LABEL = "bridge.dev/tenancy-run"
PAGE_SECRET = "INTERNAL-PAGE-7f3a9c"
# The listener's paths under which it answers 500 with JSON repeating the request's body (issue 37 item 7).
ECHO = "/echo"
ECHO_FIELDS = ("message", "error", "detail", "title", "errMsg", "errorMessage")
MARKERS_VARIABLE = "TENANCY_MARKERS"


def template(field, spaces=True):
    """A Jinja expression that, rendered by Ansible on the controller's machine, creates the marker
    file `field` (in the directory $TENANCY_MARKERS of the controller's environment). Without
    slashes, so that it fits a file name; without blanks where the schema forbids them (a URL)."""
    if spaces:
        return "{{ lookup('pipe', 'touch ${%s}%s') }}" % (MARKERS_VARIABLE, field)
    return "{{lookup('pipe','touch${IFS}${%s}%s')}}" % (MARKERS_VARIABLE, field)


def query_template(field):
    """A JMESPath raw string literal holding a template: a valid resultQuery selecting its own text."""
    return "'{{ lookup(\"pipe\", \"touch ${%s}%s\") }}'" % (MARKERS_VARIABLE, field)


class Listener:
    """An HTTP server on 127.0.0.1 that records each request (method, path, headers) and answers
    with an HTML page holding PAGE_SECRET, as an internal web page would."""

    def __init__(self):
        self.requests = []
        listener = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                sent = self.rfile.read(length).decode("utf-8", "replace") if length else ""
                listener.requests.append((self.command, self.path, dict(self.headers)))
                status, kind, body = 200, "text/html", (
                    "<html><body>%s: the internal admin page</body></html>" % PAGE_SECRET).encode()
                if self.path.startswith(ECHO):
                    # A JSON service that repeats what it was sent (a password, an API key) in
                    # every field a manager's client reads its error message from.
                    words = "%s: %s" % (PAGE_SECRET, sent)
                    status, kind = 500, "application/json"
                    body = json.dumps(dict((field, words) for field in ECHO_FIELDS)).encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = _answer  # noqa: N815

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def paths(self):
        return [urllib.parse.unquote(path) for _method, path, _headers in self.requests]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Tenants:
    """tenant-a and tenant-b, each a fresh namespace; the calls a test makes as tenant-a."""

    def __init__(self, api_client, labels):
        from kubernetes import client

        self.client = client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.labels = labels
        suffix = uuid.uuid4().hex[:6]
        self.a, self.b = "tenant-a-%s" % suffix, "tenant-b-%s" % suffix
        for name in (self.a, self.b):
            tenant_namespace(api_client, name)

    def secret(self, namespace, name, data):
        self.core.create_namespaced_secret(namespace, self.client.V1Secret(
            metadata=self.client.V1ObjectMeta(name=name), string_data=data))

    def config_map(self, namespace, name, data):
        self.core.create_namespaced_config_map(namespace, self.client.V1ConfigMap(
            metadata=self.client.V1ObjectMeta(name=name), data=data))

    def bridgejob(self, resource_name, backend, namespace=None, **spec):
        spec.update(backend=backend, pollInterval=2)
        body = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "BridgeJob",
                "metadata": {"name": resource_name, "labels": dict(self.labels)}, "spec": spec}
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace or self.a, PLURAL, body)

    def read(self, name):
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, self.a, PLURAL, name)

    def wait(self, name, check, timeout=180):
        return wait_for(lambda: self.read(name), check, timeout=timeout)

    def wait_terminal(self, name, timeout=180):
        return self.wait(name, lambda o: phase(o) in ("Completed", "Failed", "Cancelled"), timeout=timeout)

    def delete(self):
        for name in (self.a, self.b):
            self.core.delete_namespace(name)


def phase(obj):
    return (obj.get("status") or {}).get("phase")


def condition(obj, kind):
    return dict((c["type"], c) for c in (obj.get("status") or {}).get("conditions") or []).get(kind) or {}


@pytest.fixture(scope="module")
def tenancy(kube, account, tmp_path_factory):  # pylint: disable=redefined-outer-name
    """The controller as its ServiceAccount, with an allow-list of the local services' URLs and the
    listener's; its environment names the marker directory the templates would write into."""
    env, api_client = kube
    slurm = require_slurm("22.05")
    tmp_path = tmp_path_factory.mktemp("tenancy")
    markers = tempfile.mkdtemp(prefix="tenancy-markers-")
    outside = tempfile.mkdtemp(prefix="tenancy-out-", dir="/tmp")
    os.chmod(outside, 0o777)  # the Slurm job's user writes its output here
    listener, stranger = Listener(), Listener()
    allowed = [slurm["SLURM_URL"], listener.url, env["KUBE_API"]]
    allowed += [value for value in ((ray_env() or {}).get("RAY_URL"), (quantum_env() or {}).get("QUANTUM_URL")) if value]
    labels = {RUN_LABEL: uuid.uuid4().hex[:12]}
    log_path = tmp_path / "controller.log"
    command = [sys.executable, "-m", "bridge_controller.main", "--kubeconfig", account[0],
               "--selector", "%s=%s" % (RUN_LABEL, labels[RUN_LABEL]),
               "--playbook-dir", os.path.join(REPO, "playbooks"), "--work-dir", str(tmp_path / "runner"),
               "--collections-path", COLLECTIONS, "--port", str(free_port()), "--bind-address", "127.0.0.1",
               "--batch-window", "0.3"]
    for url in allowed:
        command += ["--allowed-backend-url", url]
    process_env = controller_env(**{MARKERS_VARIABLE: markers + "/"})
    tenants = Tenants(api_client, labels)
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=process_env)

    class Context:
        pass

    ctx = Context()
    ctx.env, ctx.slurm, ctx.tenants, ctx.markers, ctx.outside = env, slurm, tenants, markers, outside
    ctx.listener, ctx.stranger, ctx.account_token = listener, stranger, account[1]
    try:
        yield ctx
    finally:
        process.send_signal(signal.SIGTERM)
        returncode = process.wait(timeout=120)
        release_labelled(api_client, "%s=%s" % (RUN_LABEL, labels[RUN_LABEL]))
        tenants.delete()
        listener.close()
        stranger.close()
        shutil.rmtree(outside, ignore_errors=True)
    log = log_path.read_text()
    assert os.listdir(markers) == [], "a template was rendered on the controller's machine"
    shutil.rmtree(markers, ignore_errors=True)
    assert ctx.account_token not in log
    assert returncode == 0, log[-4000:]


def assert_no_marker(ctx):
    assert os.listdir(ctx.markers) == [], "a template was rendered on the controller's machine: %s" % os.listdir(ctx.markers)


def slurm_secret(ctx, namespace, name="slurm"):
    ctx.tenants.secret(namespace, name, {"user": ctx.slurm["SLURM_USER"], "token": ctx.slurm["SLURM_JWT"]})
    return {"type": "slurm", "url": ctx.slurm["SLURM_URL"], "credentialsSecretRef": {"name": name}}


SCRIPT = "#!/bin/bash\n# %s\ncat \"$0\"\necho \"TPL=$TPL\"\necho \"PWD=$(pwd)\"\n" % template("script")


def test_templates_in_every_slurm_field_reach_slurm_unchanged_and_are_never_rendered(tenancy):
    ctx, tenants = tenancy, tenancy.tenants
    backend = slurm_secret(ctx, tenants.a)
    working_directory = os.path.join(ctx.outside, "wd-" + template("workingDirectory"))
    os.mkdir(working_directory)
    os.chmod(working_directory, 0o777)
    stdout = os.path.join(ctx.outside, "out-" + template("stdout"))
    stderr = os.path.join(ctx.outside, "err-" + template("stderr"))
    tenants.bridgejob("slurm-fields", backend, name="{{7*7}}", script=SCRIPT, environment={"TPL": template("environment")},
                      workingDirectory=working_directory, stdout=stdout, stderr=stderr,
                      backendOptions={"slurm": {"mail_user": template("backendOptions"), "mail_type": "NONE"}},
                      resultQuery=query_template("resultQuery"))
    script_from = SCRIPT.replace(template("script"), template("scriptFrom"))
    tenants.config_map(tenants.a, "scripts", {"run.sh": script_from})
    script_from_output = os.path.join(ctx.outside, "script-from.out")
    tenants.bridgejob("slurm-script-from", backend, scriptFrom={"configMapKeyRef": {"name": "scripts", "key": "run.sh"}},
                      environment={"TPL": "plain"}, stdout=script_from_output)
    # Fields Slurm checks against what it has (no such partition, account, QOS or feature): the
    # job is refused, and nothing is rendered on the way.
    tenants.bridgejob("slurm-checked-fields", backend, script="#!/bin/bash\ntrue\n", queue=template("queue"),
                      account=template("account"), qos=template("qos"), constraints=template("constraints"))
    done = tenants.wait_terminal("slurm-fields")
    assert phase(done) == "Completed", done.get("status")
    assert done["status"]["result"] == query_template("resultQuery")[1:-1], "the literal, selected unrendered"
    sys.path.insert(0, COLLECTIONS)
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

    job = SlurmClient(ctx.slurm["SLURM_URL"], user=ctx.slurm["SLURM_USER"], token=ctx.slurm["SLURM_JWT"]).get(
        done["status"]["jobId"])
    assert job["name"] == "{{7*7}}"
    assert job["native"].get("mail_user") in (None, template("backendOptions"))
    with open(stdout) as handle:
        output = handle.read()
    assert SCRIPT in output, "Slurm ran the script byte-exact"
    assert "TPL=%s\n" % template("environment") in output and "PWD=%s\n" % working_directory in output
    assert os.path.exists(stderr)
    assert phase(tenants.wait_terminal("slurm-script-from")) == "Completed"
    with open(script_from_output) as handle:
        assert script_from in handle.read(), "the ConfigMap's script ran byte-exact"
    refused = tenants.wait_terminal("slurm-checked-fields")
    assert phase(refused) == "Failed", refused.get("status")
    assert_no_marker(ctx)


def test_templates_in_every_ray_field_reach_ray_unchanged_and_are_never_rendered(tenancy):
    ctx, tenants = tenancy, tenancy.tenants
    ray = require_ray()
    backend = {"type": "ray", "url": ray["RAY_URL"]}
    if ray.get("RAY_TOKEN"):
        tenants.secret(tenants.a, "ray", {"token": ray["RAY_TOKEN"]})
        backend["credentialsSecretRef"] = {"name": "ray"}
    script = "#!/usr/bin/env python3\n# %s\nimport os\nprint('TPL=' + os.environ['TPL'])\n" % template("script")
    tenants.bridgejob("ray-fields", backend, name="{{7*7}}", script=script, environment={"TPL": template("environment")},
                      backendOptions={"ray": {"metadata": {"note": template("backendOptions")}}},
                      resultQuery=query_template("resultQuery"))
    done = tenants.wait_terminal("ray-fields")
    assert phase(done) == "Completed", done.get("status")
    assert done["status"]["result"] == query_template("resultQuery")[1:-1]
    sys.path.insert(0, COLLECTIONS)
    from ansible_collections.bridge.hpc.plugins.module_utils.ray.client import RayClient

    client = RayClient(ray["RAY_URL"], token=ray.get("RAY_TOKEN") or None)
    job = client.get(done["status"]["jobId"])
    assert job["native"]["runtime_env"]["env_vars"]["TPL"] == template("environment")
    assert job["native"]["metadata"]["note"] == template("backendOptions")
    # Ray itself expands ${VARIABLE} in runtime_env's env_vars (from the worker's environment, where
    # it is unset); the Jinja expression around it reached the driver as text.
    expanded = template("environment").replace("${%s}" % MARKERS_VARIABLE, "")
    assert "TPL=%s\n" % expanded in client.logs(done["status"]["jobId"])
    assert_no_marker(ctx)


def test_templates_in_every_kubernetes_field_reach_the_job_unchanged_and_are_never_rendered(tenancy):
    ctx, tenants = tenancy, tenancy.tenants
    if kube_node_env() is None:
        pytest.skip("no Kubernetes node runs here: tools/kube-node.sh start")
    script = "#!/bin/sh\n# %s\necho \"TPL=$TPL\"\n" % template("script")
    options = {"kubernetes": {"image": "localhost/bridge/busybox:latest", "image_pull_policy": "Never",
                              "annotations": {"bridge-test/note": template("backendOptions")}}}
    tenants.bridgejob("k8s-fields", {"type": "kubernetes", "namespace": tenants.a}, name="{{7*7}}", script=script,
                      environment={"TPL": template("environment")}, backendOptions=options,
                      resources={"memory": "32M"}, resultQuery=query_template("resultQuery"))
    done = tenants.wait_terminal("k8s-fields")
    assert phase(done) == "Completed", done.get("status")
    assert done["status"]["result"] == query_template("resultQuery")[1:-1]
    job = tenants.batch.read_namespaced_job(done["status"]["jobId"], tenants.a)
    container = job.spec.template.spec.containers[0]
    assert {e.name: e.value for e in container.env or []}["TPL"] == template("environment")
    assert job.metadata.annotations["bridge-test/note"] == template("backendOptions")
    assert job.metadata.annotations["bridge.dev/name"] == "{{7*7}}"
    assert_no_marker(ctx)


def test_templates_in_the_url_and_iam_url_are_refused_as_urls_and_never_rendered(tenancy):
    """Braces are outside RFC 3986: the one URL parser (_urls.py) refuses them before anything is
    sent, and the template is never rendered."""
    ctx, tenants = tenancy, tenancy.tenants
    backend = slurm_secret(ctx, tenants.a, "slurm-url")
    backend["url"] = "%s/%s" % (ctx.listener.url, template("url", spaces=False))
    tenants.bridgejob("url-template", backend, script="#!/bin/bash\ntrue\n")
    quantum = require_quantum()
    tenants.secret(tenants.a, "quantum", {"apiKey": quantum["QUANTUM_API_KEY"], "serviceCrn": quantum["QUANTUM_SERVICE_CRN"]})
    tenants.bridgejob("iam-template", {"type": "quantum", "url": quantum["QUANTUM_URL"],
                                       "iamUrl": "%s/%s" % (ctx.listener.url, template("iamUrl", spaces=False)),
                                       "credentialsSecretRef": {"name": "quantum"}},
                      script="OPENQASM 3.0;\nqubit[1] q;\nbit[1] c;\nc[0] = measure q[0];\n", queue="ibm_manila")
    for name, field in (("url-template", "url"), ("iam-template", "iamUrl")):
        refused = tenants.wait(name, lambda o: phase(o) == "Failed")
        assert condition(refused, "Failed")["reason"] == "BackendURLNotAllowed"
        assert condition(refused, "Failed")["message"].startswith("spec.backend.%s: '{'" % field), condition(refused, "Failed")
        assert not any("lookup" in path for path in ctx.listener.paths()), ctx.listener.paths()
    assert_no_marker(ctx)


def test_schema_fields_refuse_templates_at_admission(tenancy):
    tenants = tenancy.tenants
    for backend, spec in (({"type": "kubernetes", "namespace": template("namespace")}, {}),
                          ({"type": "slurm", "url": "http://127.0.0.1:1", "apiVersion": template("apiVersion"),
                            "credentialsSecretRef": {"name": "slurm"}}, {}),
                          ({"type": "kubernetes"}, {"environment": {template("key"): "x"}})):
        with pytest.raises(tenants.client.exceptions.ApiException) as refused:
            tenants.bridgejob("schema-%s" % uuid.uuid4().hex[:6], backend, script="#!/bin/sh\n", **spec)
        assert refused.value.status == 422


def kubeconfig(server, user):
    import yaml

    return yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                           "clusters": [{"name": "k", "cluster": {"server": server}}],
                           "users": [{"name": "u", "user": user}],
                           "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u", "namespace": "default"}}]})


def test_a_tenants_kubeconfig_neither_runs_commands_nor_reads_the_controllers_files(tenancy):
    ctx, tenants = tenancy, tenancy.tenants
    controller_file = os.path.join(ctx.outside, "controller-token")
    with open(controller_file, "w") as handle:
        handle.write("CONTROLLER-FILE-d41d8c")
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sh",
                          "args": ["-c", "touch ${%s}exec" % MARKERS_VARIABLE], "interactiveMode": "Never"}}
    for name, user, field in (("kc-exec", exec_user, "users[0].user.exec"),
                              ("kc-token-file", {"tokenFile": controller_file}, "users[0].user.tokenFile")):
        tenants.secret(tenants.a, name, {"kubeconfig": kubeconfig(ctx.listener.url, user)})
        tenants.bridgejob(name, {"type": "kubernetes", "credentialsSecretRef": {"name": name}}, script="#!/bin/sh\ntrue\n",
                          backendOptions={"kubernetes": {"image": "localhost/bridge/busybox:latest"}})
    before = len(ctx.listener.requests)
    for name, _user, field in (("kc-exec", None, "users[0].user.exec"), ("kc-token-file", None, "users[0].user.tokenFile")):
        refused = tenants.wait(name, lambda o: condition(o, "BackendReachable").get("reason") == "InsecureKubeconfig")
        assert condition(refused, "BackendReachable")["message"].startswith(field + " in the Secret's kubeconfig")
        assert phase(refused) == "Pending" and "jobId" not in refused["status"]
    assert len(ctx.listener.requests) == before, "nothing was sent to the kubeconfig's server"
    assert not any("CONTROLLER-FILE" in repr(headers) for _m, _p, headers in ctx.listener.requests)
    assert_no_marker(ctx)


def test_tenant_a_reaches_nothing_of_tenant_b(tenancy):
    ctx, tenants = tenancy, tenancy.tenants
    slurm_secret(ctx, tenants.b, "slurm-b")
    tenants.config_map(tenants.b, "scripts-b", {"run.sh": "#!/bin/bash\necho from b\n"})
    tenants.bridgejob("secret-of-b", {"type": "slurm", "url": ctx.slurm["SLURM_URL"], "credentialsSecretRef": {"name": "slurm-b"}},
                      script="#!/bin/bash\ntrue\n")
    slurm_secret(ctx, tenants.a, "slurm-own")
    tenants.bridgejob("script-of-b", {"type": "slurm", "url": ctx.slurm["SLURM_URL"], "credentialsSecretRef": {"name": "slurm-own"}},
                      scriptFrom={"configMapKeyRef": {"name": "scripts-b", "key": "run.sh"}})
    try:
        tenants.bridgejob("job-in-b", {"type": "kubernetes", "namespace": tenants.b}, script="#!/bin/sh\ntrue\n",
                          backendOptions={"kubernetes": {"image": "localhost/bridge/busybox:latest"}})
    except tenants.client.exceptions.ApiException as exc:
        # The admission policy (deploy/admission-policy.yaml) refuses it before it is stored.
        assert exc.status in (400, 403, 422) and "namespace" in exc.body, exc.body
    else:
        refused = tenants.wait("job-in-b", lambda o: phase(o) == "Failed")
        assert condition(refused, "Failed")["reason"] == "NamespaceNotAllowed"
        assert not refused["metadata"].get("finalizers"), "refused before any side effect"
    unreachable = tenants.wait("secret-of-b", lambda o: condition(o, "BackendReachable").get("status") == "False")
    assert "jobId" not in unreachable["status"]
    waiting = tenants.wait("script-of-b", lambda o: condition(o, "Submitted").get("reason") == "ScriptNotFound")
    assert tenants.a in condition(waiting, "Submitted")["message"] and "jobId" not in waiting["status"]
    assert tenants.batch.list_namespaced_job(tenants.b).items == []
    assert tenants.core.list_namespaced_config_map(tenants.b, label_selector="app.kubernetes.io/managed-by=bridge").items == []


def test_urls_outside_the_allow_list_get_nothing_and_internal_pages_stay_out_of_statuses(tenancy):
    ctx, tenants = tenancy, tenancy.tenants
    backend = slurm_secret(ctx, tenants.a, "slurm-elsewhere")
    tenants.bridgejob("not-allowed", dict(backend, url=ctx.stranger.url), script="#!/bin/bash\ntrue\n")
    tenants.bridgejob("internal-page", dict(backend, url=ctx.listener.url), script="#!/bin/bash\ntrue\n")
    refused = tenants.wait("not-allowed", lambda o: phase(o) == "Failed")
    assert condition(refused, "Failed")["reason"] == "BackendURLNotAllowed"
    assert condition(refused, "Failed")["message"].startswith("spec.backend.url: %s is not among" % ctx.stranger.url)
    assert ctx.stranger.requests == [], "nothing is sent to a URL outside the list"
    page = tenants.wait("internal-page", lambda o: condition(o, "BackendReachable").get("status") == "False" or phase(o) == "Failed")
    assert PAGE_SECRET not in repr(page["status"])
    events = tenants.core.list_namespaced_event(tenants.a).items
    assert PAGE_SECRET not in repr([event.message for event in events])


def test_a_server_echoing_the_credentials_in_json_errors_reaches_no_status(tenancy):
    """Issue 37 item 7: LSF repeated any JSON {"message"}, IBM Quantum's IAM any {"message"},
    {"error"}, {"detail"} or {"title"}, and a password echoed XML-escaped or an API key echoed
    URL-encoded was not scrubbed. A URL that answers so now reads nothing back into the status."""
    ctx, tenants = tenancy, tenancy.tenants
    password, api_key = "p&ss<w>rd-37", "api/key+37Zx=="
    tenants.secret(tenants.a, "lsf-echo", {"user": "bridge", "password": password})
    tenants.secret(tenants.a, "quantum-echo", {"apiKey": api_key, "serviceCrn": "crn:v1:x"})
    tenants.bridgejob("lsf-echo", {"type": "lsf", "url": ctx.listener.url + ECHO + "/platform",
                                   "credentialsSecretRef": {"name": "lsf-echo"}}, script="#!/bin/bash\ntrue\n")
    tenants.bridgejob("quantum-echo", {"type": "quantum", "url": ctx.listener.url + ECHO + "/api/v1",
                                       "iamUrl": ctx.listener.url + ECHO + "/iam",
                                       "credentialsSecretRef": {"name": "quantum-echo"}},
                      script="OPENQASM 3.0;\nqubit[1] q;\nbit[1] c;\nc[0] = measure q[0];\n", queue="ibm_manila")
    forms = []
    for secret in (password, api_key):
        forms += [secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret),
                  secret.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"),
                  base64.b64encode(secret.encode()).decode()]
    for name in ("lsf-echo", "quantum-echo"):
        refused = tenants.wait(name, lambda o: condition(o, "BackendReachable").get("status") == "False" or phase(o) == "Failed")
        status = json.dumps(refused.get("status"))
        assert PAGE_SECRET not in status and not [form for form in forms if form in status], status
    assert any(path.startswith(ECHO) for path in ctx.listener.paths())


def test_urls_two_parsers_read_differently_are_refused_and_the_other_host_gets_nothing(tenancy):
    """Issue 37 item 3: urllib.parse reads the backslash server as the allowed listener, urllib3 as
    the stranger's port. One parser (_urls.py) decides for the policy and for the clients."""
    ctx, tenants = tenancy, tenancy.tenants
    allowed, elsewhere = urllib.parse.urlsplit(ctx.listener.url).port, urllib.parse.urlsplit(ctx.stranger.url).port
    server = "http://127.0.0.1:%d\\@127.0.0.1:%d/ok" % (elsewhere, allowed)
    tenants.secret(tenants.a, "kc-backslash", {"kubeconfig": kubeconfig(server, {"token": "tenant-token-9d2e"})})
    tenants.bridgejob("kc-backslash", {"type": "kubernetes", "credentialsSecretRef": {"name": "kc-backslash"}},
                      script="#!/bin/sh\ntrue\n", backendOptions={"kubernetes": {"image": "localhost/bridge/busybox:latest"}})
    backend = slurm_secret(ctx, tenants.a, "slurm-variants")
    variants = ["http://127.1:%d/" % elsewhere, "http://127.0.0.1:%d@127.0.0.1:%d/" % (allowed, elsewhere),
                "http://0x7f.0.0.1:%d/" % elsewhere, "http://2130706433:%d/" % elsewhere,
                "http://127.0.0.1:%d/%%2e%%2e/" % allowed, "http://127.0.0.1.:%d/" % elsewhere]
    stored = []
    for index, url in enumerate(variants):
        try:
            tenants.bridgejob("url-variant-%d" % index, dict(backend, url=url), script="#!/bin/bash\ntrue\n")
            stored.append(("url-variant-%d" % index, url))
        except tenants.client.exceptions.ApiException as exc:
            assert exc.status == 422, exc.body   # the CRD's URL rule refused it: stored nowhere, sent nowhere
    refused = tenants.wait("kc-backslash", lambda o: condition(o, "BackendReachable").get("reason") == "BackendURLNotAllowed")
    assert "backslash" in condition(refused, "BackendReachable")["message"] and "jobId" not in refused["status"]
    for name, url in stored:
        failed = tenants.wait(name, lambda o: phase(o) == "Failed")
        assert condition(failed, "Failed")["reason"] == "BackendURLNotAllowed", (url, failed["status"])
        assert condition(failed, "Failed")["message"].startswith("spec.backend.url"), condition(failed, "Failed")
    assert ctx.stranger.requests == [], "nothing reached the port urllib3 would have connected to"
    assert not any("tenant-token-9d2e" in repr(headers) for _m, _p, headers in ctx.listener.requests)


def test_a_backend_url_edited_after_submit_gets_no_poll_and_the_job_says_why(tenancy):
    """Issue 37 item 4: the job is pinned to the URL it was submitted to (status.backend.url)."""
    ctx, tenants = tenancy, tenancy.tenants
    backend = slurm_secret(ctx, tenants.a, "slurm-pinned")
    body = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "BridgeBackend",
            "metadata": {"name": "pinned", "labels": dict(tenants.labels)}, "spec": dict(backend, probeIntervalSeconds=3600)}
    tenants.custom.create_namespaced_custom_object(GROUP, VERSION, tenants.a, "bridgebackends", body)
    job = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "BridgeJob",
           "metadata": {"name": "pinned-job", "labels": dict(tenants.labels)},
           "spec": {"backendRef": {"name": "pinned"}, "script": "#!/bin/bash\nsleep 300\n", "pollInterval": 2}}
    tenants.custom.create_namespaced_custom_object(GROUP, VERSION, tenants.a, PLURAL, job)
    submitted = tenants.wait("pinned-job", lambda o: (o.get("status") or {}).get("jobId"))
    assert submitted["status"]["backend"]["url"] == ctx.slurm["SLURM_URL"]
    for target in (ctx.stranger, ctx.listener):   # outside the allow-list, then inside it
        before = len(target.requests)
        tenants.custom.patch_namespaced_custom_object(GROUP, VERSION, tenants.a, "bridgebackends", "pinned",
                                                      {"spec": {"url": target.url}})
        moved = tenants.wait("pinned-job", lambda o, url=target.url: url in condition(o, "BackendReachable").get("message", ""))
        reachable = condition(moved, "BackendReachable")
        assert reachable["status"] == "False" and reachable["reason"] == "BackendURLChanged"
        assert ctx.slurm["SLURM_URL"] in reachable["message"]
        assert not any("/job" in path for path in target.paths()[before:]), "no poll at the new URL"
    assert ctx.stranger.requests == []
    # Set back, the job is reached again: its deletion cancels it where it runs.
    tenants.custom.patch_namespaced_custom_object(GROUP, VERSION, tenants.a, "bridgebackends", "pinned",
                                                  {"spec": {"url": ctx.slurm["SLURM_URL"]}})
    tenants.custom.delete_namespaced_custom_object(GROUP, VERSION, tenants.a, PLURAL, "pinned-job")
    wait_for(lambda: [o for o in tenants.custom.list_namespaced_custom_object(GROUP, VERSION, tenants.a, PLURAL)["items"]
                      if o["metadata"]["name"] == "pinned-job"], lambda found: not found, timeout=240)
