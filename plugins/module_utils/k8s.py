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

import hashlib
import json
import os
import random
import re
import time

from ansible_collections.bridge.hpc.plugins.module_utils._backend import (
    TERMINAL_PHASES,
    Backend,
    ShapeError,
    decode,
    items,
    newest_by_identity,
    not_json,
    select,
    status_phrase,
    with_launcher,
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
    error_for_status,
)
from ansible_collections.bridge.hpc.plugins.module_utils._spec import one_task_only

try:
    import yaml
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.client.rest import ApiException
    from kubernetes.config.config_exception import ConfigException
    from urllib3.exceptions import HTTPError as Urllib3Error

    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None
except ImportError as exc:  # the modules report it with missing_required_lib
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = exc
    ApiException = ConfigException = Urllib3Error = None

MANAGER = "Kubernetes"
DOMAIN = "bridge.dev"
IDENTITY_LABEL = DOMAIN + "/identity-hash"
IDENTITY_ANNOTATION = DOMAIN + "/identity"
NAME_ANNOTATION = DOMAIN + "/name"
MANAGED_BY = ("app.kubernetes.io/managed-by", "bridge")
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE = ("kueue.x-k8s.io", "v1beta1", "localqueues")
SCRIPT_DIR = "/bridge/job"
SCRIPT_KEY = "script"
WORK_DIR = "/bridge/work"
CONTAINER = "job"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_TTL = 7 * 24 * 3600
# A user id of no account in most images: `restricted` Pod Security needs runAsNonRoot, and an
# image whose USER is root (busybox, python) fails that check unless a numeric user is given.
DEFAULT_USER = 65532
SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

# backend_options.kubernetes: key -> (type, what it is). Anything else is refused by name.
JOB_OPTIONS = {
    "image": (str, "the container image whose interpreter runs the script (required)"),
    "image_pull_policy": (str, "Always, IfNotPresent or Never"),
    "image_pull_secrets": (list, "names of Secrets for pulling the image"),
    "node_selector": (dict, "node labels the Pod must run on"),
    "tolerations": (list, "Pod tolerations, as in the Pod spec"),
    "service_account_name": (str, "the Pod's ServiceAccount"),
    "priority_class_name": (str, "the Pod's PriorityClass"),
    "labels": (dict, "more labels on the Job and its Pod"),
    "annotations": (dict, "more annotations on the Job and its Pod"),
    "backoff_limit": (int, "retries of a failed Pod (default 0: a batch step is not rerun blindly)"),
    "ttl_seconds_after_finished": (int, "seconds a finished Job is kept (default 604800, 7 days)"),
    "run_as_user": (int, "numeric user of the container (default 65532)"),
    "run_as_group": (int, "numeric group of the container (default 65532)"),
    "gpu_type_label": (str, "node label resources.gpu_type selects on (default nvidia.com/gpu.product)"),
}
UNSUPPORTED = {
    "account": "Kubernetes has no accounts to charge; use a namespace (option namespace) or Kueue's LocalQueue (queue)",
    "constraints": "use backend_options.kubernetes.node_selector",
    "stdout": "a Pod's output goes to the Pod log API (k8s_job_info logs=true), not to a file",
    "stderr": "a Pod's output goes to the Pod log API (k8s_job_info logs=true), not to a file",
}
# Scheduler messages of a Pod that waits for capacity (it may come), as opposed to one no node
# can take (selector, affinity, taints): "0/3 nodes are available: 3 Insufficient cpu."
WAITS_FOR_CAPACITY = re.compile(r"Insufficient |Too many pods|preemption may help", re.IGNORECASE)
# Container waiting reasons that never resolve by waiting.
HOPELESS_WAITING = ("InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError")
# Retried reads: 429 and the 5xx a proxy or an apiserver under load answers.
RETRIED_STATUSES = (429, 500, 502, 503, 504)


# ---------------------------------------------------------------- names and the script (pure)

def identity_hash(identity):
    """The label value of an identity: labels allow 63 characters without ':', identities do not."""
    return hashlib.sha256(identity.encode("utf-8")).hexdigest()[:40]


def job_name(identity):
    """A DNS-1123 label of at most 63 characters (the Job controller labels Pods with it): the
    identity's readable part and a hash that keeps distinct identities apart."""
    readable = re.sub(r"[^a-z0-9-]+", "-", identity.lower()).strip("-")[:40].strip("-")
    return "%s-%s" % (readable or "bridge", identity_hash(identity)[:12])


def interpreter(script):
    """[interpreter, optional argument] of a #! line, as the kernel reads it: one optional
    argument, the rest of the line."""
    line = script.split("\n", 1)[0][2:].strip()
    if not line:
        raise SpecError("script", "the #! line names no interpreter")
    parts = line.split(None, 1)
    return parts


def _job_options(spec):
    options = spec["backend_options"].get("kubernetes") or {}
    if not isinstance(options, dict):
        raise SpecError("backend_options.kubernetes", "must be a dictionary")
    for key, value in options.items():
        if key not in JOB_OPTIONS:
            raise SpecError("backend_options.kubernetes.%s" % key, "unknown; allowed: %s" % ", ".join(sorted(JOB_OPTIONS)))
        kind = JOB_OPTIONS[key][0]
        if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            raise SpecError("backend_options.kubernetes.%s" % key, "must be a %s: %s" % (
                {str: "string", list: "list", dict: "dictionary", int: "whole number"}[kind], JOB_OPTIONS[key][1]))
    if not options.get("image"):
        raise SpecError("backend_options.kubernetes.image", "is required: the container image whose interpreter "
                        "runs the script, for example docker.io/library/python:3.12-slim")
    for key in ("labels", "annotations", "node_selector"):
        for name, value in (options.get(key) or {}).items():
            if not isinstance(value, str):
                raise SpecError("backend_options.kubernetes.%s.%s" % (key, name), "must be a string")
            if key != "node_selector" and str(name).startswith(DOMAIN + "/"):
                raise SpecError("backend_options.kubernetes.%s.%s" % (key, name), "%s/ keys are Bridge's own" % DOMAIN)
    for key in ("backoff_limit", "ttl_seconds_after_finished"):
        if options.get(key) is not None and options[key] < 0:
            raise SpecError("backend_options.kubernetes.%s" % key, "must be 0 or more")
    return options


def one_task(resources):
    """SpecError naming the field unless the resources ask for one task on one node."""
    one_task_only(resources, "a Kubernetes Job of Bridge runs one Pod with one container",
                  "give cpus_per_task for more CPUs")


def compile_k8s(spec, namespace, gpu_resource=DEFAULT_GPU_RESOURCE):
    """The ConfigMap and Job of a spec, as sent (`rendered`); pure."""
    for field, why in sorted(UNSUPPORTED.items()):
        if spec.get(field):
            raise SpecError(field, "not supported by the Kubernetes backend: %s" % why)
    options = _job_options(spec)
    resources = spec["resources"]
    one_task(resources)
    cpus = resources["cpus_per_task"]
    identity = spec["identity"]
    name = job_name(identity)
    labels = dict(options.get("labels") or {})
    labels.update({IDENTITY_LABEL: identity_hash(identity), MANAGED_BY[0]: MANAGED_BY[1]})
    if spec["queue"]:
        labels[KUEUE_QUEUE_LABEL] = spec["queue"]
    annotations = dict(options.get("annotations") or {})
    annotations.update({IDENTITY_ANNOTATION: identity, NAME_ANNOTATION: spec["name"]})

    limits = {}
    if cpus:
        limits["cpu"] = str(cpus)
    memory = resources["memory_mb"]
    if resources["memory_per_cpu_mb"]:
        memory = resources["memory_per_cpu_mb"] * (cpus or 1)
    if memory:
        limits["memory"] = "%dMi" % memory
    if resources["gpus"]:
        limits[gpu_resource] = str(resources["gpus"])
    container = {
        "name": CONTAINER,
        "image": options["image"],
        "command": interpreter(spec["script"]) + ["%s/%s" % (SCRIPT_DIR, SCRIPT_KEY)],
        "workingDir": spec["working_directory"] or WORK_DIR,
        "env": [{"name": key, "value": value} for key, value in sorted(spec["environment"].items())],
        "volumeMounts": [{"name": "script", "mountPath": SCRIPT_DIR, "readOnly": True},
                         {"name": "work", "mountPath": WORK_DIR}],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                            "runAsNonRoot": True},
    }
    if options.get("image_pull_policy"):
        container["imagePullPolicy"] = options["image_pull_policy"]
    if limits:
        # Requests equal limits (Guaranteed QoS where everything is given): what a batch job
        # reserves is what it may use, as Slurm's cgroups do.
        container["resources"] = {"requests": dict(limits), "limits": dict(limits)}
    pod = {
        "restartPolicy": "Never",
        "securityContext": {"runAsNonRoot": True,
                            "runAsUser": options.get("run_as_user", DEFAULT_USER),
                            "runAsGroup": options.get("run_as_group", DEFAULT_USER),
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [{"name": "script", "configMap": {"name": name, "defaultMode": 0o555}},
                    {"name": "work", "emptyDir": {}}],
    }
    node_selector = dict(options.get("node_selector") or {})
    if resources["gpu_type"]:
        node_selector[options.get("gpu_type_label") or "nvidia.com/gpu.product"] = resources["gpu_type"]
    if node_selector:
        pod["nodeSelector"] = node_selector
    if spec["qos"]:
        pod["priorityClassName"] = spec["qos"]
    for key, field in (("priority_class_name", "priorityClassName"), ("service_account_name", "serviceAccountName"),
                       ("tolerations", "tolerations")):
        if options.get(key):
            if field in pod:
                raise SpecError("backend_options.kubernetes.%s" % key, "contradicts qos, which Bridge compiles to %s" % field)
            pod[field] = options[key]
    if options.get("image_pull_secrets"):
        pod["imagePullSecrets"] = [{"name": secret} for secret in options["image_pull_secrets"]]
    if not options.get("service_account_name"):
        # The job's script needs no API access unless a ServiceAccount is asked for.
        pod["automountServiceAccountToken"] = False
    job_spec = {
        "backoffLimit": options.get("backoff_limit", 0),
        "ttlSecondsAfterFinished": options.get("ttl_seconds_after_finished", DEFAULT_TTL),
        "template": {"metadata": {"labels": dict(labels), "annotations": dict(annotations)}, "spec": pod},
    }
    if resources["time_limit_minutes"]:
        job_spec["activeDeadlineSeconds"] = resources["time_limit_minutes"] * 60
    if spec["queue"]:
        # Kueue admits a Job by unsuspending it; created suspended, it never starts unadmitted.
        job_spec["suspend"] = True
    meta = {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations}
    return {
        "namespace": namespace,
        "config_map": {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": namespace,
                                    "labels": {IDENTITY_LABEL: labels[IDENTITY_LABEL], MANAGED_BY[0]: MANAGED_BY[1]},
                                    "annotations": {IDENTITY_ANNOTATION: identity}},
                       "data": {SCRIPT_KEY: spec["script"]}},
        "job": {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": job_spec},
    }


# ---------------------------------------------------------------- reading Jobs and Pods (pure)

def _condition(obj, kind):
    for condition in ((obj.get("status") or {}).get("conditions") or []):
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


def _terminated(pod):
    for status in ((pod.get("status") or {}).get("containerStatuses") or []):
        state = status.get("state") or {}
        last = status.get("lastState") or {}
        if state.get("terminated") or last.get("terminated"):
            return state.get("terminated") or last.get("terminated")
    return None


def _container_state(pod, key):
    for status in ((pod.get("status") or {}).get("containerStatuses") or []):
        if (status.get("state") or {}).get(key):
            return status["state"][key]
    return None


def _pending_reason(pod):
    """(reason, hopeless) of a Pod that has not started."""
    waiting = _container_state(pod, "waiting")
    if waiting and waiting.get("reason") not in (None, "ContainerCreating", "PodInitializing"):
        text = ("%s: %s" % (waiting["reason"], waiting.get("message") or "")).rstrip(": ")
        return text, waiting["reason"] in HOPELESS_WAITING
    scheduled = next((c for c in ((pod.get("status") or {}).get("conditions") or [])
                      if c.get("type") == "PodScheduled"), None)
    if scheduled and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        message = scheduled.get("message") or "Unschedulable"
        return "Unschedulable: %s" % message, not WAITS_FOR_CAPACITY.search(message)
    return None, False


def _without_managed_fields(obj):
    """An object without metadata.managedFields: half its size, and nothing a job's reader needs."""
    if not obj or "managedFields" not in (obj.get("metadata") or {}):
        return obj
    return dict(obj, metadata=dict((k, v) for k, v in obj["metadata"].items() if k != "managedFields"))


def newest_pod(pods):
    if not all(isinstance(pod, dict) and isinstance(pod.get("metadata"), dict) for pod in pods):
        raise ShapeError("a Pod must be an object with metadata")
    return max(pods, key=lambda pod: ((pod.get("metadata") or {}).get("creationTimestamp") or "",
                                      (pod.get("metadata") or {}).get("name") or "")) if pods else None


def normalize_job(native, pods=()):
    """A Job and its Pods as Bridge's job dict."""
    if not isinstance(native, dict):
        raise ShapeError("a Job must be an object, got %s" % type(native).__name__)
    meta = native["metadata"]
    status = native.get("status") or {}
    spec = native.get("spec") or {}
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    identity = annotations.get(IDENTITY_ANNOTATION)
    if identity is not None and labels.get(IDENTITY_LABEL) != identity_hash(identity):
        identity = None  # an annotation some other hand set: not a job Bridge made for this identity
    pod = newest_pod(list(pods))
    terminated = _terminated(pod) if pod else None
    complete, failed = _condition(native, "Complete"), _condition(native, "Failed") or _condition(native, "FailureTarget")
    phase, reason, failure_class, exit_code, signal = "queued", None, None, None, None
    native_state = "Pending"
    if meta.get("deletionTimestamp"):
        phase, native_state, failure_class, reason = "cancelled", "Deleting", "cancelled", "deleted"
    elif complete:
        phase, native_state, exit_code = "completed", "Complete", 0
    elif failed:
        phase, native_state = "failed", "Failed"
        reason = "%s: %s" % (failed.get("reason"), failed.get("message") or "")
        if terminated:
            exit_code = terminated.get("exitCode")
        if failed.get("reason") == "DeadlineExceeded":
            failure_class = "timeout"
        elif terminated and terminated.get("reason") == "OOMKilled":
            failure_class, signal = "out_of_memory", 9
            reason = "OOMKilled: the container passed its memory limit"
        elif pod and (pod.get("status") or {}).get("reason") in ("Evicted", "NodeLost", "Terminated", "UnexpectedAdmissionError"):
            failure_class = "node_failure"
            reason = "%s: %s" % (pod["status"]["reason"], pod["status"].get("message") or "")
        elif exit_code:
            failure_class = "non_zero_exit"
        else:
            failure_class = "non_zero_exit"
    elif spec.get("suspend"):
        native_state, reason = "Suspended", "suspended (waiting for admission by Kueue's queue %s)" % (
            labels.get(KUEUE_QUEUE_LABEL) or "none")
    elif pod and _container_state(pod, "running"):
        phase, native_state = "running", "Running"
    elif pod:
        reason, hopeless = _pending_reason(pod)
        if hopeless:
            failure_class = "rejected"
    start = None
    if pod and phase != "queued":
        running = _container_state(pod, "running")
        start = (running or terminated or {}).get("startedAt") or status.get("startTime")
    end = None
    if phase in TERMINAL_PHASES:
        end = status.get("completionTime") or (failed or {}).get("lastTransitionTime") or meta.get("deletionTimestamp")
    return {
        "job_id": meta["name"],
        "name": annotations.get(NAME_ANNOTATION) or meta["name"],
        "identity": identity,
        "phase": phase,
        "terminal": phase in TERMINAL_PHASES,
        "native_state": native_state,
        "reason": reason,
        "exit_code": exit_code,
        "signal": signal,
        "failure_class": failure_class,
        "submit_time": meta.get("creationTimestamp"),
        "start_time": start,
        "end_time": end,
        "namespace": meta.get("namespace"),
        "partition": labels.get(KUEUE_QUEUE_LABEL),
        "nodes": ((pod or {}).get("spec") or {}).get("nodeName"),
        "pod": ((pod or {}).get("metadata") or {}).get("name"),
        "native": {"job": _without_managed_fields(native), "pod": _without_managed_fields(pod)},
    }


# ---------------------------------------------------------------- capacity (pure)

def normalize_local_queue(native):
    status = native.get("status") or {}
    return {"name": native["metadata"]["name"], "namespace": native["metadata"].get("namespace"),
            "cluster_queue": (native.get("spec") or {}).get("clusterQueue"),
            "pending": status.get("pendingWorkloads"), "admitted": status.get("admittedWorkloads"),
            "cpus": None, "memory_mb": None, "gpus": None, "native": native}


def nominal_quota(cluster_queue, gpu_resource=DEFAULT_GPU_RESOURCE):
    """{cpus, memory_mb, gpus} of a ClusterQueue: its nominal quotas summed over flavors."""
    totals = {"cpu": 0.0, "memory": 0.0, gpu_resource: 0.0}
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for resource in flavor.get("resources") or []:
                name, quota = resource.get("name"), resource.get("nominalQuota")
                if name == "memory":
                    totals[name] += mebibytes_of(quota)
                elif name in totals:
                    totals[name] += cpus_of(quota)
    return {"cpus": totals["cpu"], "memory_mb": int(totals["memory"]), "gpus": int(totals[gpu_resource])}


CPU_UNITS = {"m": 0.001, "": 1.0}
MEMORY_SUFFIXES = {"": 1.0 / 1048576, "Ki": 1.0 / 1024, "Mi": 1.0, "Gi": 1024.0, "Ti": 1048576.0,
                   "k": 1000.0 / 1048576, "M": 1e6 / 1048576, "G": 1e9 / 1048576, "T": 1e12 / 1048576}


def cpus_of(quantity):
    match = re.match(r"^(\d+(?:\.\d+)?)(m?)$", str(quantity or "0"))
    return float(match.group(1)) * CPU_UNITS[match.group(2)] if match else 0.0


def mebibytes_of(quantity):
    match = re.match(r"^(\d+(?:\.\d+)?)([KMGT]i?|k)?$", str(quantity or "0"))
    return float(match.group(1)) * MEMORY_SUFFIXES[match.group(2) or ""] if match else 0.0


def normalize_node(native, gpu_resource=DEFAULT_GPU_RESOURCE):
    status = native.get("status") or {}
    allocatable = status.get("allocatable") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    spec = native.get("spec") or {}
    return {
        "name": native["metadata"]["name"],
        "ready": ready,
        "schedulable": not spec.get("unschedulable"),
        "cpus": cpus_of(allocatable.get("cpu")),
        "memory_mb": int(mebibytes_of(allocatable.get("memory"))),
        "gpus": int(cpus_of(allocatable.get(gpu_resource))),
        "labels": (native["metadata"].get("labels") or {}),
        "taints": [t.get("key") for t in spec.get("taints") or []],
        "native": native,
    }


def check_fits(rendered, nodes, gpu_resource=DEFAULT_GPU_RESOURCE):
    """SpecError naming the field when no node could ever hold the Pod's requests (its allocatable,
    not what is free now: a busy cluster frees up)."""
    if not nodes:
        return
    limits = (rendered["job"]["spec"]["template"]["spec"]["containers"][0].get("resources") or {}).get("limits") or {}
    selector = rendered["job"]["spec"]["template"]["spec"].get("nodeSelector") or {}
    candidates = [n for n in nodes if all(n["labels"].get(k) == v for k, v in selector.items())]
    if not candidates:
        raise SpecError("backend_options.kubernetes.node_selector", "no node carries the labels %s" % json.dumps(
            selector, sort_keys=True))
    for key, field, have, unit in (("cpu", "resources.cpus_per_task", "cpus", "CPUs"),
                                   ("memory", "resources.memory", "memory_mb", "MiB"),
                                   (gpu_resource, "resources.gpus", "gpus", gpu_resource)):
        if key not in limits:
            continue
        wanted = mebibytes_of(limits[key]) if key == "memory" else cpus_of(limits[key])
        if not any(node[have] >= wanted for node in candidates):
            raise SpecError(field, "%s %s requested, but the largest node has %g allocatable (%s)" % (
                limits[key], unit, max(node[have] for node in candidates),
                ", ".join("%s: %g" % (node["name"], node[have]) for node in candidates[:5])))
    fits = [n for n in candidates if all(
        n[have] >= (mebibytes_of(limits[key]) if key == "memory" else cpus_of(limits[key]))
        for key, have in (("cpu", "cpus"), ("memory", "memory_mb"), (gpu_resource, "gpus")) if key in limits)]
    if not fits:
        raise SpecError("resources", "no single node has %s allocatable at once" % json.dumps(limits, sort_keys=True))


# ---------------------------------------------------------------- the client

class K8sClient(Backend):
    """Kubernetes Jobs in one namespace, through the `kubernetes` Python client."""

    NAME = "kubernetes"
    TITLE = MANAGER
    # No URL is needed: the kubeconfig or the in-cluster ServiceAccount says where the apiserver is.
    URL_NAME = None
    CONNECTION = dict(
        kubeconfig=dict(type="path"),
        context=dict(type="str"),
        kubeconfig_content=dict(type="str"),
        namespace=dict(type="str"),
        gpu_resource=dict(type="str", default=DEFAULT_GPU_RESOURCE),
    )
    ENV = dict(kubeconfig=("K8S_AUTH_KUBECONFIG",), context=("K8S_AUTH_CONTEXT",))
    CREDENTIALS = ("kubeconfig_content",)
    SECRETS = ("kubeconfig_content",)
    SECRET_KEYS = {"kubeconfig_content": "kubeconfig"}
    CAPABILITIES = frozenset(["queues", "gpu_type", "memory_per_cpu", "logs", "preflight"])

    @classmethod
    def from_options(cls, get):
        if not HAS_KUBERNETES:
            raise Unsupported("the Python library 'kubernetes' is required (pip install kubernetes): %s"
                              % KUBERNETES_IMPORT_ERROR, "connect to", "cluster", None, MANAGER)
        url = get("url")
        if url:
            cls.require_url(url)
        options = cls.transport_options(get)
        # The backend-neutral modules (job, jobs, job_info: the controller's playbooks) have no
        # environment fallbacks, since `url` means another variable for each backend; these two
        # options are Kubernetes' alone, so their variables are read here for every caller.
        kubeconfig, context = [get(name) or next((os.environ[var] for var in cls.ENV[name] if os.environ.get(var)), None)
                               for name in ("kubeconfig", "context")]
        return cls(kubeconfig=kubeconfig, context=context, kubeconfig_content=get("kubeconfig_content"),
                   namespace=get("namespace"), url=url, gpu_resource=get("gpu_resource") or DEFAULT_GPU_RESOURCE,
                   **options)

    def __init__(self, kubeconfig=None, context=None, kubeconfig_content=None, namespace=None, url=None,
                 gpu_resource=DEFAULT_GPU_RESOURCE, validate_certs=True, ca_path=None, timeout=30.0, retries=3,
                 api_client=None, sleep=time.sleep):
        self.gpu_resource = gpu_resource
        self.timeout = timeout
        self.retries = retries
        self.sleep = sleep
        self.warnings = []
        self.sent = 0
        self._nodes = None
        self._secrets = []
        if api_client is None:
            api_client, context_namespace = self._connect(kubeconfig, context, kubeconfig_content, url,
                                                          validate_certs, ca_path)
        else:
            context_namespace = None
        self.api_client = api_client
        self.url = url or api_client.configuration.host
        self.namespace = namespace or context_namespace or "default"
        self.core = k8s_client.CoreV1Api(api_client)
        self.batch = k8s_client.BatchV1Api(api_client)
        self.custom = k8s_client.CustomObjectsApi(api_client)

    # -- connection

    def _connect(self, kubeconfig, context, content, url, validate_certs, ca_path):
        """(ApiClient, the context's namespace) from a kubeconfig's content, a kubeconfig file, or
        the in-cluster ServiceAccount, in that order. Nothing of the kubeconfig reaches a message."""
        configuration = k8s_client.Configuration()
        namespace = None
        try:
            if content or kubeconfig:
                if content:
                    source = "the kubeconfig given as kubeconfig_content"
                    document = self._parse_kubeconfig(content, source)
                else:
                    source = "kubeconfig %s" % kubeconfig
                    with open(os.path.expanduser(kubeconfig)) as handle:
                        document = self._parse_kubeconfig(handle.read(), source)
                loader = k8s_config.kube_config.KubeConfigLoader(
                    config_dict=document, active_context=context,
                    config_base_path=os.path.dirname(os.path.abspath(os.path.expanduser(kubeconfig or "."))))
                loader.load_and_set(configuration)
                namespace = ((loader.current_context or {}).get("context") or {}).get("namespace")
            else:
                source = "the in-cluster ServiceAccount (no kubeconfig or kubeconfig_content given)"
                k8s_config.load_incluster_config(client_configuration=configuration)
                if os.path.exists(SA_NAMESPACE):
                    with open(SA_NAMESPACE) as handle:
                        namespace = handle.read().strip() or None
        except (ConfigException, IOError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise AuthFailed("cannot configure a client from %s: %s" % (source, self.scrub(type(exc).__name__ + ": " + str(exc))),
                             "connect to", "cluster", None, MANAGER, url)
        if url:
            configuration.host = url.rstrip("/")
        if not validate_certs:
            configuration.verify_ssl = False
        if ca_path:
            configuration.ssl_ca_cert = ca_path
        configuration.retries = False  # reads are retried here, with backoff; creates never
        return k8s_client.ApiClient(configuration), namespace

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
        for secret in sorted((s for s in self._secrets if s and len(s) >= 4), key=len, reverse=True):
            text = text.replace(secret, "***")
        return text

    # -- plumbing

    @property
    def api_version(self):
        return "batch/v1"

    @property
    def requests_sent(self):
        return self.sent

    def close(self):
        self.api_client.close()

    def _call(self, verb, obj, ident, function, *args, **kwargs):
        """One API call; its JSON answer as plain data, through `parse` when given (an answer of
        another shape is MalformedResponse naming the call). Reads (idempotent=True) are retried
        on connection errors, 429 and 5xx with jittered backoff honoring Retry-After; writes never."""
        idempotent = kwargs.pop("idempotent", True)
        parse = kwargs.pop("parse", None) or _object
        raw = kwargs.pop("raw", False)
        endpoint = function.__name__
        attempt = 0
        while True:
            attempt += 1
            self.sent += 1
            try:
                response = function(*args, _preload_content=False, _request_timeout=self.timeout, **kwargs)
                if raw:
                    return (response.data or b"").decode("utf-8", "replace")
                body = _json(response)
            except ApiException as exc:
                error = self._error(exc, verb, obj, ident)
                retry_after = (exc.headers or {}).get("Retry-After") if exc.headers else None
            except (Urllib3Error, OSError) as exc:
                kind = Timeout if "timed out" in str(exc).lower() else ConnectionFailed
                error = kind("%s: %s" % (type(exc).__name__, self.scrub(str(exc))[:300]),
                             verb, obj, ident, MANAGER, self.url)
                retry_after = None
            except ShapeError as exc:
                raise MalformedResponse("%s answered %s; is %s the Kubernetes API?" % (endpoint, exc, self.url),
                                        verb, obj, ident, MANAGER, self.url, response.status)
            else:
                return decode(parse, body, endpoint, MANAGER, self.url, verb, obj, ident)
            if not idempotent or not error.temporary or attempt > self.retries:
                raise error
            delay = min(2.0 ** (attempt - 1) * 0.5, 10.0) * (0.5 + random.random())
            if retry_after and str(retry_after).isdigit():
                delay = max(delay, float(retry_after))
            self.sleep(delay)

    def _error(self, exc, verb, obj, ident):
        status = exc.status or None
        try:
            body = json.loads(exc.body) if exc.body else {}
        except (ValueError, TypeError):
            body = None
        # The apiserver answers errors with a Status; of another body (any page of the server a
        # URL points at) only the HTTP status is said, as its status line is that server's too.
        message = body.get("message") if isinstance(body, dict) and body.get("kind") == "Status" else None
        if not isinstance(message, str) or not message:
            message = status_phrase(status)
        message = self.scrub(message)[:500]
        if status in (401,):
            return AuthFailed("authentication failed: %s" % message, verb, obj, ident, MANAGER, self.url, status)
        if status == 403:
            return Rejected("forbidden: %s" % message, verb, obj, ident, MANAGER, self.url, status)
        return error_for_status(status)(message, verb, obj, ident, MANAGER, self.url, status)

    # -- domain verbs

    def describe(self):
        version = self._call("read", "version", None, k8s_client.VersionApi(self.api_client).get_code,
                             parse=_git_version)
        return {"manager": MANAGER, "url": self.url, "version": version, "api_version": "batch/v1",
                "namespace": self.namespace}

    @classmethod
    def launcher(cls, spec):
        """Nothing for the one task a Job's Pod runs; more tasks or nodes are refused naming the field."""
        one_task(spec["resources"])
        return ""

    def render(self, spec):
        return compile_k8s(with_launcher(self, spec), self.namespace, self.gpu_resource)

    def check(self, spec):
        rendered = self.render(spec)
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
            if normalize_job_or_malformed(created, self.url)["identity"] != spec["identity"]:
                raise AlreadyExists("a Job named '%s' that Bridge did not make for identity '%s' is in the way" % (
                    name, spec["identity"]), "submit", "job", name, MANAGER, self.url, 409)
            return name
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": name, "blockOwnerDeletion": False,
                 "uid": decode(lambda body: body["metadata"]["uid"], created, "create_namespaced_job", MANAGER, self.url,
                               "create", "Job", name)}
        self._call("update", "ConfigMap", name, self.core.patch_namespaced_config_map, name, self.namespace,
                   {"metadata": {"ownerReferences": [owner]}})
        return name

    def _pods(self, selector):
        return self._call("list", "pods", None, self.core.list_namespaced_pod, self.namespace, label_selector=selector,
                          parse=_items)

    def _with_pods(self, jobs, selector):
        pods = self._pods(selector) if jobs else []
        by_job = {}
        for pod in pods:
            for owner in (pod["metadata"].get("ownerReferences") or []):
                by_job.setdefault(owner.get("uid"), []).append(pod)
        return decode(lambda natives: [normalize_job(job, by_job.get(job["metadata"].get("uid"), ())) for job in natives],
                      jobs, "list_namespaced_job", MANAGER, self.url, "read", "jobs")

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
            raise NotFound("no such job", "cancel", "job", job_id, MANAGER, self.url, 404)

    def logs(self, job_id, tail_lines=None):
        """The output of the job's newest Pod; empty while no container has started."""
        pod = decode(newest_pod, self._pods("job-name=%s" % job_id), "list_namespaced_pod", MANAGER, self.url,
                     "read logs of", "job", job_id)
        if pod is None:
            return ""
        kwargs = {"container": CONTAINER}
        if tail_lines:
            kwargs["tail_lines"] = tail_lines
        try:
            return self._call("read logs of", "job", job_id, self.core.read_namespaced_pod_log, pod["metadata"]["name"],
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
        queues = decode(lambda b: [normalize_local_queue(q) for q in _items(b)], body, "list_namespaced_custom_object",
                        MANAGER, self.url, "list", "LocalQueues")
        for queue in queues if quotas else ():
            try:
                cluster_queue = self._call("get", "ClusterQueue", queue["cluster_queue"],
                                           self.custom.get_cluster_custom_object, KUEUE[0], KUEUE[1], "clusterqueues",
                                           queue["cluster_queue"])
            except (NotFound, Rejected):
                continue
            queue.update(decode(lambda b: nominal_quota(b, self.gpu_resource), cluster_queue, "get_cluster_custom_object",
                                MANAGER, self.url, "get", "ClusterQueue", queue["cluster_queue"]))
        return queues

    def inventory(self):
        return {"nodes": self.nodes(), "queues": self.local_queues()}


def normalize_job_or_malformed(native, url):
    return decode(normalize_job, native, "read_namespaced_job", MANAGER, url, "get", "job")


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
