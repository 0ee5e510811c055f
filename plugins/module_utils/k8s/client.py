# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes Jobs as a Bridge backend, through the `kubernetes` Python client.

A job is a batch/v1 Job of one Pod (restartPolicy Never, backoffLimit 0 unless asked) whose one
container runs the script from a ConfigMap with the interpreter of the script's #! line, in the
image backend_options.kubernetes.image names. The ConfigMap is owned by the Job, so deleting the
Job (cancel, or ttlSecondsAfterFinished) removes both. Names are derived from the identity, so a
create that races with another finds AlreadyExists and the Job that is there; the identity itself
(up to 128 characters, ':' allowed) travels as an annotation, with a hash of it as the label the
lookup selects on.

Authentication is the client's own: a kubeconfig file (kubeconfig, context), a kubeconfig's
content (kubeconfig_content, the BridgeJob Secret's `kubeconfig` key), or the in-cluster
ServiceAccount when neither is given. docs/kubernetes.md describes the mapping.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import time

from ansible_collections.bridge.hpc.plugins.module_utils._arrays import parse_indexes
from ansible_collections.bridge.hpc.plugins.module_utils._backend import (
    Backend,
    ShapeError,
    compilable,
    items,
    manager_reason,
    newest_by_identity,
    not_json,
    select,
)
from ansible_collections.bridge.hpc.plugins.module_utils._errors import (
    AlreadyExists,
    AuthFailed,
    ConnectionFailed,
    MalformedResponse,
    NotFound,
    Rejected,
    SpecError,
    Timeout,
    Unsupported,
)
from ansible_collections.bridge.hpc.plugins.module_utils._output import scrub as scrub_secrets
from ansible_collections.bridge.hpc.plugins.module_utils._transport import RetryPolicy
from ansible_collections.bridge.hpc.plugins.module_utils._urls import AllowList, require_sendable
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.compile import (
    ARRAY_ANNOTATION,
    ARRAY_LABEL,
    DEFAULT_GPU_RESOURCE,
    IDENTITY_LABEL,
    MANAGED_BY,
    CONTAINER,
    compile_job,
    identity_hash,
)
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.fit import (
    check_fits,
    nominal_quota,
    normalize_local_queue,
    normalize_node,
    queue_records,
)
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.states import NEVER_STARTS as HOPELESS_DOC, newest_pod, normalize_job


# The kubernetes package is imported by the first client made, not with this file: the backend
# registry imports every backend's client, and importing kubernetes costs every module run of every
# backend about a fifth of a second of CPU (measured with python -X importtime).
yaml = k8s_client = k8s_config = ApiException = ConfigException = Urllib3Error = None


def import_kubernetes():
    """Import the kubernetes client (and PyYAML) once; Unsupported when it is not installed."""
    global yaml, k8s_client, k8s_config, ApiException, ConfigException, Urllib3Error  # pylint: disable=global-statement
    if k8s_client is not None:
        return
    try:
        import yaml as yaml_module
        from kubernetes import client as client_module
        from kubernetes import config as config_module
        from kubernetes.client.rest import ApiException as api_exception
        from kubernetes.config.config_exception import ConfigException as config_exception
        from urllib3.exceptions import HTTPError as urllib3_error
    except ImportError as exc:
        raise Unsupported("the Python library 'kubernetes' is required (pip install kubernetes): %s" % exc,
                          "connect to", "cluster", None, MANAGER)
    yaml, k8s_config, ApiException, ConfigException, Urllib3Error = (
        yaml_module, config_module, api_exception, config_exception, urllib3_error)
    k8s_client = client_module


MANAGER = "Kubernetes"


KUEUE = ("kueue.x-k8s.io", "v1beta1", "localqueues")
# The first Kubernetes release whose Jobs take backoffLimitPerIndex by default.
MIN_ARRAY_VERSION = (1, 29)


SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
# Set to "refuse" by the Bridge controller for everything it runs for a BridgeJob: no credential may
# come from the environment or the in-cluster ServiceAccount, which are the controller's own.
AMBIENT_CREDENTIALS = "BRIDGE_AMBIENT_CREDENTIALS"
# The label an Indexed Job's Pods carry with their completion index (Kubernetes 1.28 and later).
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


class K8sClient(Backend):
    """Kubernetes Jobs in one namespace, through the `kubernetes` Python client."""

    NAME = "kubernetes"
    TITLE = MANAGER
    NEVER_STARTS = HOPELESS_DOC
    # No URL is needed: the kubeconfig or the in-cluster ServiceAccount says where the apiserver is.
    URL_NAME = None
    CONNECTION = dict(
        kubeconfig=dict(type="path"),
        context=dict(type="str"),
        kubeconfig_content=dict(type="str"),
        namespace=dict(type="str"),
        gpu_resource=dict(type="str", default=DEFAULT_GPU_RESOURCE),
        # A bearer token for the apiserver, as kubernetes.core's api_key (AWX's own Kubernetes
        # credential injects it with the host). Not one of CREDENTIALS: a BridgeJob's Secret holds a
        # whole kubeconfig, which the controller checks before it loads it.
        api_key=dict(type="str", no_log=True),
    )
    # The variables kubernetes.core reads (K8S_AUTH_*), and KUBECONFIG after K8S_AUTH_KUBECONFIG, as
    # kubectl reads it (a list of files separated by ":" is merged as kubectl merges it).
    # K8S_AUTH_VERIFY_SSL is not read: verification is turned off by validate_certs alone.
    ENV = dict(kubeconfig=("K8S_AUTH_KUBECONFIG", "KUBECONFIG"), context=("K8S_AUTH_CONTEXT",), url=("K8S_AUTH_HOST",),
               api_key=("K8S_AUTH_API_KEY",), ca_path=("K8S_AUTH_SSL_CA_CERT",))
    CREDENTIALS = ("kubeconfig_content",)
    SECRETS = ("kubeconfig_content",)
    SECRET_KEYS = {"kubeconfig_content": "kubeconfig"}
    CAPABILITIES = frozenset(["logs", "preflight"])

    @classmethod
    def from_options(cls, get):
        import_kubernetes()
        content = get("kubeconfig_content")

        ambient = not refuses_ambient_credentials()

        def read(name):
            # The backend-neutral modules (job, jobs, job_info: the controller's playbooks) have no
            # environment fallbacks, since `url` means another variable for each backend; these
            # variables are Kubernetes' alone (kubernetes.core's and kubectl's), so they are read
            # here for every caller. A kubeconfig handed over as content is complete: the apiserver,
            # token and CA variables do not apply to it.
            value = get(name)
            if ambient and value in (None, "") and (name in ("kubeconfig", "context") or not content):
                value = next((os.environ[var] for var in cls.ENV.get(name, ()) if os.environ.get(var)), None)
            return value

        url = read("url")
        if url:
            cls.require_url(url)
        options = cls.transport_options(read)
        return cls(kubeconfig=read("kubeconfig"), context=read("context"), kubeconfig_content=content,
                   namespace=get("namespace"), url=url, api_key=read("api_key"),
                   gpu_resource=get("gpu_resource") or DEFAULT_GPU_RESOURCE, **options)

    def __init__(self, kubeconfig=None, context=None, kubeconfig_content=None, namespace=None, url=None,
                 gpu_resource=DEFAULT_GPU_RESOURCE, validate_certs=True, ca_path=None, timeout=30.0, retries=3,
                 api_client=None, sleep=time.sleep, api_key=None):
        import_kubernetes()
        self.gpu_resource = gpu_resource
        self.timeout = timeout
        self.retry = RetryPolicy(retries, sleep=sleep)
        self.warnings = []
        self.sent = 0
        self._nodes = None
        self._secrets = []
        if api_client is None:
            api_client, context_namespace = self._connect(kubeconfig, context, kubeconfig_content, url,
                                                          validate_certs, ca_path, api_key)
        else:
            context_namespace = None
        self.api_client = api_client
        self.allow_list = AllowList.from_environ()
        self._check_each_request(api_client)
        self.url = url or api_client.configuration.host
        self.namespace = namespace or context_namespace or "default"
        self.core = k8s_client.CoreV1Api(api_client)
        self.batch = k8s_client.BatchV1Api(api_client)
        self.custom = k8s_client.CustomObjectsApi(api_client)

    # -- connection

    def _connect(self, kubeconfig, context, content, url, validate_certs, ca_path, api_key=None):
        """(ApiClient, the context's namespace) from a kubeconfig's content, a kubeconfig file (or
        several, separated by ":" as in KUBECONFIG, merged as kubectl merges them), the apiserver's
        URL with a bearer token (api_key), or the in-cluster ServiceAccount, in that order; `url`,
        `api_key` and `ca_path` override what a kubeconfig says, as with kubernetes.core. Nothing of
        a kubeconfig or the token reaches a message."""
        configuration = k8s_client.Configuration()
        namespace = None
        if api_key:
            self._secrets.append(api_key)
        try:
            if content or kubeconfig:
                paths = [os.path.expanduser(p) for p in (kubeconfig or "").split(os.pathsep) if p]
                # Relative paths in a kubeconfig are taken from the (first) file's directory.
                base = os.path.dirname(os.path.abspath(paths[0] if paths else "."))
                if content:
                    source = "the kubeconfig given as kubeconfig_content"
                    document = self._parse_kubeconfig(content, source)
                else:
                    source = "kubeconfig %s" % kubeconfig
                    documents = []
                    for path in paths:
                        with open(path) as handle:
                            documents.append(self._parse_kubeconfig(handle.read(), "kubeconfig %s" % path))
                    document = _merged(documents)
                loader = k8s_config.kube_config.KubeConfigLoader(
                    config_dict=document, active_context=context, config_base_path=base)
                loader.load_and_set(configuration)
                namespace = ((loader.current_context or {}).get("context") or {}).get("namespace")
            elif url and api_key:
                source = "url and api_key"
                configuration.host = url
            elif refuses_ambient_credentials():
                raise AuthFailed("no kubeconfig, kubeconfig_content or url with api_key was given, and the Bridge controller "
                                 "lends no credentials of its own (%s=refuse): a BridgeJob's kubernetes backend needs a "
                                 "credentialsSecretRef Secret with a kubeconfig, or the operator's Job ServiceAccount"
                                 % AMBIENT_CREDENTIALS, "connect to", "cluster", None, MANAGER, url)
            else:
                source = "the in-cluster ServiceAccount (no kubeconfig, kubeconfig_content or url with api_key given)"
                k8s_config.load_incluster_config(client_configuration=configuration)
                if os.path.exists(SA_NAMESPACE):
                    with open(SA_NAMESPACE) as handle:
                        namespace = handle.read().strip() or None
        except (ConfigException, IOError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise AuthFailed("cannot configure a client from %s: %s" % (source, self.scrub(type(exc).__name__ + ": " + str(exc))),
                             "connect to", "cluster", None, MANAGER, url)
        if url:
            configuration.host = url.rstrip("/")
            hook = configuration.refresh_api_key_hook
            if hook is not None:
                # A kubeconfig's token refresh hook copies its server into host again before every
                # request; `url` overrides the server only when it is set again after the hook.
                def refresh(config):
                    hook(config)
                    config.host = url.rstrip("/")

                configuration.refresh_api_key_hook = refresh
        if api_key:
            configuration.api_key = {"authorization": "Bearer %s" % api_key}
            configuration.api_key_prefix = {}
            # A kubeconfig's token or the ServiceAccount's would be set again before every request.
            configuration.refresh_api_key_hook = None
        if not validate_certs:
            configuration.verify_ssl = False
        if ca_path:
            configuration.ssl_ca_cert = ca_path
        configuration.retries = False  # reads are retried by _call's RetryPolicy; creates never
        return k8s_client.ApiClient(configuration), namespace

    def _check_each_request(self, api_client):
        """Have every request's URL, and the proxy it would go through, read by _urls.parse_url and
        checked against the allow-list right before it is sent. At ApiClient.request, which gets
        the URL the pool manager is given: the kubeconfig's token refresh hook sets
        configuration.host again before every request, so the host known beforehand may not be the
        one used."""
        send = api_client.request

        def checked(method, url, *args, **kwargs):
            require_sendable(url, self.allow_list, MANAGER, method.lower(), "request")
            proxy = getattr(api_client.rest_client.pool_manager, "proxy", None)
            if proxy is not None:
                require_sendable(str(proxy), self.allow_list, MANAGER, method.lower(), "request through proxy")
            return send(method, url, *args, **kwargs)

        api_client.request = checked

    def _parse_kubeconfig(self, text, source):
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = " (line %d)" % (mark.line + 1) if mark is not None else ""
            raise AuthFailed("%s is not YAML%s" % (source, where), "connect to", "cluster", None, MANAGER)
        if not isinstance(document, dict):
            raise AuthFailed("%s is not a kubeconfig (a YAML mapping with clusters, users and contexts)" % source,
                             "connect to", "cluster", None, MANAGER)
        # Every string of the users section is a credential or names one: never in a message.
        self._secrets.extend(_strings(document.get("users")))
        self._secrets.append(text)
        return document

    def scrub(self, text):
        """`text` without the kubeconfig's credentials, in any encoding (_output.scrub)."""
        return scrub_secrets(text, self._secrets)

    # -- plumbing

    @property
    def api_version(self):
        return "batch/v1"

    @property
    def requests_sent(self):
        return self.sent

    def close(self):
        self.api_client.close()

    def limit_urls(self, allow_list):
        self.allow_list = allow_list

    def _call(self, verb, obj, ident, function, *args, **kwargs):
        """One API call; its JSON answer as plain data, through `parse` when given (an answer of
        another shape is MalformedResponse naming the call). Sent as every Bridge client sends: the
        transport's RetryPolicy sends a read (idempotent=True) again, a write never."""
        idempotent = kwargs.pop("idempotent", True)
        parse = kwargs.pop("parse", None) or _object
        raw = kwargs.pop("raw", False)
        endpoint = function.__name__

        def attempt():
            self.sent += 1
            try:
                response = function(*args, _preload_content=False, _request_timeout=self.timeout, **kwargs)
            except ApiException as exc:
                # The client raises error answers; RetryPolicy reads their status like a response's.
                return exc, exc.status, (exc.headers or {}).get("Retry-After") if exc.headers else None
            except (Urllib3Error, OSError) as exc:
                kind = Timeout if "timed out" in str(exc).lower() else ConnectionFailed
                raise self.error(kind, "%s: %s" % (type(exc).__name__, self.scrub(str(exc))[:300]), verb, obj, ident)
            return response, response.status, None

        response = self.retry.send(attempt, idempotent)
        if isinstance(response, ApiException):
            raise self._error(response, verb, obj, ident)
        if raw:
            return (response.data or b"").decode("utf-8", "replace")
        try:
            body = _json(response)
        except ShapeError as exc:
            raise self.error(MalformedResponse, "%s answered %s; is %s the Kubernetes API?" % (endpoint, exc, self.url),
                             verb, obj, ident, response.status)
        return self.decoded(parse, body, endpoint, verb, obj, ident)

    def _error(self, exc, verb, obj, ident):
        status = exc.status or None
        try:
            body = json.loads(exc.body) if exc.body else {}
        except (ValueError, TypeError):
            body = None
        # The apiserver answers errors with a Status, which vouches for it (manager_reason).
        status_object = isinstance(body, dict) and body.get("kind") == "Status"
        message = manager_reason(body.get("message") if status_object else None, status, self.scrub, status_object)
        if status in (401,):
            return self.error(AuthFailed, "authentication failed: %s" % message, verb, obj, ident, status)
        if status == 403:
            return self.error(Rejected, "forbidden: %s" % message, verb, obj, ident, status)
        return self.status_error(status, message, verb, obj, ident)

    # -- domain verbs

    def describe(self):
        version = self._call("read", "version", None, k8s_client.VersionApi(self.api_client).get_code,
                             parse=_git_version)
        return {"manager": MANAGER, "url": self.url, "version": version, "api_version": "batch/v1",
                "namespace": self.namespace}

    @classmethod
    def launcher(cls, spec):
        """Nothing for the one task a Job's Pod runs (the field table refuses more)."""
        return ""

    def render(self, spec):
        return compile_job(compilable(self, spec), self.namespace, self.gpu_resource)

    def check(self, spec):
        rendered = self.render(spec)
        if spec.get("array"):
            self._check_indexed_jobs()
        try:
            self._call("get", "namespace", self.namespace, self.core.read_namespace, self.namespace)
        except NotFound:
            raise SpecError("namespace", "namespace '%s' does not exist on the cluster at %s" % (self.namespace, self.url))
        except Rejected:
            pass  # a namespaced user may not read namespaces; the create will tell
        if spec["queue"]:
            try:
                self._call("get", "LocalQueue", spec["queue"], self.custom.get_namespaced_custom_object,
                           KUEUE[0], KUEUE[1], self.namespace, KUEUE[2], spec["queue"])
            except NotFound as exc:
                if "the server could not find the requested resource" in exc.reason:
                    raise SpecError("queue", "Kueue is not installed on the cluster at %s (no LocalQueue API); "
                                    "leave queue unset" % self.url)
                raise SpecError("queue", "Kueue LocalQueue '%s' does not exist in namespace '%s'" % (
                    spec["queue"], self.namespace))
        if self._nodes is None:
            try:
                self._nodes = self.nodes()
            except Rejected:
                self._nodes = []  # listing nodes is a cluster-scope right many users lack
        check_fits(rendered, [n for n in self._nodes if n["schedulable"]], self.gpu_resource)

    def _check_indexed_jobs(self):
        """An array needs backoffLimitPerIndex (Kubernetes 1.29, beta and on by default; GA in 1.33): an
        older apiserver drops the field, and its Job would run failed Pods again and end after six failures
        in all (backoffLimit's default)."""
        version = self.describe()["version"]
        match = re.match(r"^v?(\d+)\.(\d+)", version or "")
        if match and (int(match.group(1)), int(match.group(2))) < MIN_ARRAY_VERSION:
            raise SpecError("array.indexes", "arrays need Kubernetes %d.%d or later (Indexed Jobs with backoffLimitPerIndex); "
                            "the cluster at %s runs %s" % (MIN_ARRAY_VERSION + (self.url, version)))

    def submit(self, spec):
        """The ConfigMap, then the one Job create (never retried; AlreadyExists means a racing
        submit won, and its Job is the answer), then the ConfigMap's owner set to the Job."""
        rendered = self.render(spec)
        config_map, job = rendered["config_map"], rendered["job"]
        name = job["metadata"]["name"]
        try:
            self._call("create", "ConfigMap", name, self.core.create_namespaced_config_map, self.namespace, config_map,
                       idempotent=False)
        except AlreadyExists:
            # A racing submit's (it owns a Job then: leave its script alone) or one left by a submit
            # that stopped before creating its Job (no owner: it takes this script).
            existing = self._call("get", "ConfigMap", name, self.core.read_namespaced_config_map, name, self.namespace)
            if not (existing.get("metadata") or {}).get("ownerReferences"):
                self._call("update", "ConfigMap", name, self.core.patch_namespaced_config_map, name, self.namespace,
                           {"data": config_map["data"]})
        try:
            created = self._call("create", "Job", name, self.batch.create_namespaced_job, self.namespace, job,
                                 idempotent=False)
        except AlreadyExists:
            created = self._call("get", "Job", name, self.batch.read_namespaced_job, name, self.namespace)
            if self.decoded(normalize_job, created, "read_namespaced_job", "get", "job")["identity"] != spec["identity"]:
                raise self.error(AlreadyExists, "a Job named '%s' that Bridge did not make for identity '%s' is in the way" % (
                    name, spec["identity"]), "submit", "job", name, 409)
            return name
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": name, "blockOwnerDeletion": False,
                 "uid": self.decoded(lambda body: body["metadata"]["uid"], created, "create_namespaced_job",
                                     "create", "Job", name)}
        self._call("update", "ConfigMap", name, self.core.patch_namespaced_config_map, name, self.namespace,
                   {"metadata": {"ownerReferences": [owner]}})
        return name

    def _pods(self, selector):
        return self._call("list", "pods", None, self.core.list_namespaced_pod, self.namespace, label_selector=selector,
                          parse=_items)

    def _with_pods(self, jobs, selector):
        """Normalized jobs, with the Pods of those that are no array: one list, which leaves arrays'
        Pods out (ARRAY_LABEL). An array is read from its Job's status alone, and once it has ended
        with failed indexes, from the Pods of its indexes too (one more list for all such arrays),
        for their exit codes: never a Pod list per poll of a running array."""
        pods = self._pods("%s,!%s" % (selector, ARRAY_LABEL)) if any(not _array(job) for job in jobs) else []
        ended = sorted(job["metadata"]["name"] for job in jobs if _array(job) and _ended_with_failures(job))
        if ended:
            pods += self._pods("job-name in (%s)" % ",".join(ended))
        by_job = {}
        for pod in pods:
            for owner in (pod["metadata"].get("ownerReferences") or []):
                by_job.setdefault(owner.get("uid"), []).append(pod)
        return self.decoded(lambda natives: [normalize_job(job, by_job.get(job["metadata"].get("uid"), ())) for job in natives],
                            jobs, "list_namespaced_job", "read", "jobs")

    def get(self, job_id):
        job = self._call("get", "job", job_id, self.batch.read_namespaced_job, job_id, self.namespace)
        return self._with_pods([job], "job-name=%s" % job_id)[0]

    def list(self, identities=None, name=None, phases=None):
        selector = "%s=%s" % MANAGED_BY
        if identities is not None:
            if not identities:
                return []
            selector = "%s in (%s)" % (IDENTITY_LABEL, ",".join(sorted(set(identity_hash(i) for i in identities))))
        jobs = self._call("list", "jobs", None, self.batch.list_namespaced_job, self.namespace,
                          label_selector=selector, parse=_items)
        return select(self._with_pods(jobs, selector), identities, name, phases)

    def find_many(self, identities, names=None):
        return newest_by_identity(self.list(identities=identities), self.warnings)

    def cancel(self, job_id):
        """Delete the Job, its Pods first (foreground propagation): the container is stopped, and the
        Job, then gone, takes its ConfigMap with it."""
        try:
            self._call("delete", "job", job_id, self.batch.delete_namespaced_job, job_id, self.namespace,
                       body={"propagationPolicy": "Foreground"}, parse=_deleted)
        except NotFound:
            raise self.error(NotFound, "no such job", "cancel", "job", job_id, 404)

    def logs(self, job_id, tail_lines=None, index=None):
        """The output of the job's newest Pod (of completion index `index` of an Indexed Job); empty
        while no container has started."""
        selector = "job-name=%s" % job_id
        if index is not None:
            selector += ",%s=%d" % (COMPLETION_INDEX_LABEL, index)
        pod = self.decoded(newest_pod, self._pods(selector), "list_namespaced_pod", "read logs of", "job", job_id)
        if pod is None:
            return ""
        return self._pod_log(job_id, pod["metadata"]["name"], tail_lines)

    def read_output(self, job, tail_lines):
        """The log of a job's Pod, one request when the job as read names its Pod; for an
        Indexed Job, of the Pod of its first failed index (job["array"]["failed_indexes"])."""
        array = job.get("array") or {}
        failed = (array.get("failed_indexes") or "").split(",")[0].split("-")[0].strip()
        if failed.isdigit():
            # The Pod's completion index is the failed index's place in the asked set (the same
            # number for a dense 0..n-1 array).
            asked = parse_indexes(array["indexes"]) if array.get("indexes") else ()
            index = asked.index(int(failed)) if int(failed) in asked else int(failed)
            return self.logs(job["job_id"], tail_lines=tail_lines + 1, index=index), False
        if job.get("pod"):
            return self._pod_log(job["job_id"], job["pod"], tail_lines + 1), False
        return self.logs(job["job_id"], tail_lines=tail_lines + 1), False

    def output_secrets(self):
        return list(self._secrets)

    def _pod_log(self, job_id, pod_name, tail_lines):
        kwargs = {"container": CONTAINER}
        if tail_lines:
            kwargs["tail_lines"] = tail_lines
        try:
            return self._call("read logs of", "job", job_id, self.core.read_namespaced_pod_log, pod_name,
                              self.namespace, raw=True, **kwargs)
        except Rejected as exc:
            if exc.status == 400:
                return ""  # the apiserver's "container "job" ... is waiting to start"
            raise

    def nodes(self):
        return self._call("list", "nodes", None, self.core.list_node,
                          parse=lambda body: [normalize_node(node, self.gpu_resource) for node in _items(body)])

    def local_queues(self, quotas=False):
        """Kueue LocalQueues of the namespace ([] where Kueue is not installed); with `quotas`, each
        with its ClusterQueue's nominal quota (None where that cannot be read)."""
        try:
            body = self._call("list", "LocalQueues", None, self.custom.list_namespaced_custom_object,
                              KUEUE[0], KUEUE[1], self.namespace, KUEUE[2])
        except NotFound:
            return []
        queues = self.decoded(lambda b: [normalize_local_queue(q) for q in _items(b)], body,
                              "list_namespaced_custom_object", "list", "LocalQueues")
        for queue in queues if quotas else ():
            try:
                cluster_queue = self._call("get", "ClusterQueue", queue["cluster_queue"],
                                           self.custom.get_cluster_custom_object, KUEUE[0], KUEUE[1], "clusterqueues",
                                           queue["cluster_queue"])
            except (NotFound, Rejected):
                continue
            queue.update(self.decoded(lambda b: nominal_quota(b, self.gpu_resource), cluster_queue,
                                      "get_cluster_custom_object", "get", "ClusterQueue", queue["cluster_queue"]))
        return queues

    def inventory(self):
        return {"nodes": self.nodes(), "queues": self.local_queues()}

    def capacity(self):
        """A record per Kueue LocalQueue of the namespace (their status counts pending and admitted
        workloads), else one of the whole cluster whose counts are its Jobs' Pods by phase: three
        requests (the version, the nodes, the LocalQueues), and a fourth (the Pods of Jobs in the
        namespace, one list) where the namespace has no LocalQueue. Nodes are a cluster-scope read
        a namespaced user may lack; the records' sizes are unknown then. LocalQueues the user may
        not read count as none."""
        version = self.describe()["version"]
        try:
            nodes = self.nodes()
        except Rejected:
            nodes = []
        try:
            queues = self.local_queues()
        except Rejected:
            queues = []  # a user who may not read Kueue's objects: the namespace as one queue
        phases = None
        if not queues:
            # Every Job's Pods carry job-name (batch.kubernetes.io/job-name too, since 1.27).
            pods = self._call("list", "pods", None, self.core.list_namespaced_pod, self.namespace,
                              label_selector="job-name", parse=_items)
            phases = self.decoded(_phases, pods, "list_namespaced_pod", "list", "pods")
        return {"manager": MANAGER, "version": version, "api_version": self.api_version,
                "queues": queue_records(nodes, queues, phases)}


def _phases(pods):
    """{phase: count} of Pods."""
    counts = {}
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        counts[phase] = counts.get(phase, 0) + 1
    return counts


def _deleted(body):
    """A delete answers with the Job (still there, being deleted) or a Status of success."""
    if _object(body).get("kind") not in ("Job", "Status") or not isinstance(body.get("metadata"), dict):
        raise ShapeError("expected the Job or a Status, got another kind")
    return body


def _git_version(body):
    version = _object(body)["gitVersion"]
    if not isinstance(version, str):
        raise ShapeError("gitVersion must be a string")
    return version


def _json(response):
    """The JSON of an answer; ShapeError saying what came instead, by its content type and size."""
    data = response.data or b""
    try:
        return json.loads(data.decode("utf-8", "replace"))
    except ValueError:
        raise ShapeError(not_json(response.headers.get("content-type"), data))


def _object(body):
    if not isinstance(body, dict):
        raise ShapeError("expected a JSON object, got %s" % type(body).__name__)
    return body


def _items(body):
    return items(body, "items", required=True)


def _strings(value):
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return [value] if isinstance(value, str) else []


def _array(job):
    """Whether a Job (as the apiserver answers it) is an array Bridge made (compile.ARRAY_ANNOTATION)."""
    meta = job.get("metadata") if isinstance(job, dict) else None
    return isinstance(meta, dict) and isinstance(meta.get("name"), str) and ARRAY_ANNOTATION in (meta.get("annotations") or {})


def _ended_with_failures(job):
    """Whether an array's Job has ended (Complete, Failed, or FailureTarget: the Job controller's verdict
    before its last Pods are gone) with failed indexes."""
    status = job.get("status") or {}
    if not isinstance(status, dict) or not status.get("failedIndexes"):
        return False
    return any(isinstance(c, dict) and c.get("type") in ("Complete", "Failed", "FailureTarget") and c.get("status") == "True"
               for c in (status.get("conditions") or []))


def refuses_ambient_credentials():
    """Whether the Bridge controller ran this: then no credential comes from the environment."""
    return os.environ.get(AMBIENT_CREDENTIALS) == "refuse"


def _merged(documents):
    """Kubeconfig files merged as kubectl merges the list in KUBECONFIG: the first file to set a
    value wins; clusters, users and contexts are merged by name, the first of a name winning."""
    if len(documents) == 1:
        return documents[0]
    merged = {}
    for document in documents:
        for key, value in document.items():
            if key in ("clusters", "users", "contexts"):
                have = merged.setdefault(key, [])
                names = set(item.get("name") for item in have)
                have.extend(item for item in (value or []) if isinstance(item, dict) and item.get("name") not in names)
            elif merged.get(key) in (None, ""):
                merged[key] = value
    return merged
