# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ConfigMap and Job of a job spec (pure), shown as `rendered`: a batch/v1 Job of one Pod whose
one container runs the script, mounted from the ConfigMap, with the interpreter of its #! line in
the image backend_options.kubernetes.image names. Names derive from the identity; the identity
travels as an annotation, its hash as the label the lookup selects on.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import re

from ansible_collections.bridge.hpc.plugins.module_utils._backend import interpreter
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError


DOMAIN = "bridge.dev"
IDENTITY_LABEL = DOMAIN + "/identity-hash"
IDENTITY_ANNOTATION = DOMAIN + "/identity"
NAME_ANNOTATION = DOMAIN + "/name"
MANAGED_BY = ("app.kubernetes.io/managed-by", "bridge")
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


SCRIPT_DIR = "/bridge/job"
SCRIPT_KEY = "script"
WORK_DIR = "/bridge/work"
CONTAINER = "job"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_TTL = 7 * 24 * 3600
# A user id of no account in most images: `restricted` Pod Security needs runAsNonRoot, and an
# image whose USER is root (busybox, python) fails that check unless a numeric user is given.
DEFAULT_USER = 65532


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


# An array is an Indexed Job: Kubernetes numbers its Pods 0..completions-1 in this annotation and
# in JOB_COMPLETION_INDEX. The asked index set travels as an annotation of the Job, and the Pods of
# an array carry ARRAY_LABEL, so the lookup of plain Jobs' Pods leaves them out.
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
ARRAY_ANNOTATION = DOMAIN + "/array-indexes"
ARRAY_LABEL = DOMAIN + "/array"
ARRAY_INDEX_VARIABLE = "BRIDGE_ARRAY_INDEX"
INDEXES_KEY = "indexes"
# An object's annotations hold 256 KiB in all; the index set takes a part of that at most.
MAX_ARRAY_ANNOTATION = 65536
# A sparse set's wrapper: JOB_COMPLETION_INDEX k is the k-th asked index, found in the ConfigMap's
# `indexes` (one "start end step" line per run of the set), then the script runs as it would alone.
SPARSE_WRAPPER = (
    'k=$JOB_COMPLETION_INDEX\n'
    'while read -r start end step; do\n'
    '  n=$(( (end - start) / step + 1 ))\n'
    '  if [ "$k" -lt "$n" ]; then\n'
    '    BRIDGE_ARRAY_INDEX=$((start + k * step)); export BRIDGE_ARRAY_INDEX; exec "$@"\n'
    '  fi\n'
    '  k=$((k - n))\n'
    'done < %s/%s\n'
    'echo "bridge: completion index $JOB_COMPLETION_INDEX is past the array\'s indexes" >&2\n'
    'exit 120\n')


def dense(array):
    """Whether an array's indexes are 0..size-1, Kubernetes' own numbering."""
    return array["indexes"][-1] == array["size"] - 1 and array["indexes"][0] == 0


def index_runs(text):
    """"start end step" lines of a canonical index set ("3,7,20-22" -> "3 3 1", "7 7 1", "20 22 1")."""
    lines = []
    for part in text.split(","):
        bounds, _colon, step = part.partition(":")
        start, _dash, end = bounds.partition("-")
        lines.append("%s %s %s" % (start, end or start, step or "1"))
    return "\n".join(lines) + "\n"


def identity_hash(identity):
    """The label value of an identity: labels allow 63 characters without ':', identities do not."""
    return hashlib.sha256(identity.encode("utf-8")).hexdigest()[:40]


def job_name(identity):
    """A DNS-1123 label of at most 63 characters (the Job controller labels Pods with it): the
    identity's readable part and a hash that keeps distinct identities apart."""
    readable = re.sub(r"[^a-z0-9-]+", "-", identity.lower()).strip("-")[:40].strip("-")
    return "%s-%s" % (readable or "bridge", identity_hash(identity)[:12])


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


def compile_job(spec, namespace, gpu_resource=DEFAULT_GPU_RESOURCE):
    """The ConfigMap and Job of a spec, as sent (`rendered`); pure."""
    options = _job_options(spec)
    resources = spec["resources"]
    cpus = resources["cpus_per_task"]
    identity = spec["identity"]
    name = job_name(identity)
    labels = dict(options.get("labels") or {})
    labels.update({IDENTITY_LABEL: identity_hash(identity), MANAGED_BY[0]: MANAGED_BY[1]})
    if spec["queue"]:
        labels[KUEUE_QUEUE_LABEL] = spec["queue"]
    annotations = dict(options.get("annotations") or {})
    annotations.update({IDENTITY_ANNOTATION: identity, NAME_ANNOTATION: spec["name"]})
    array = spec.get("array")
    environment = sorted(spec["environment"].items())
    command = interpreter(spec["script"]) + ["%s/%s" % (SCRIPT_DIR, SCRIPT_KEY)]
    pod_labels = dict(labels)
    if array:
        if len(array["text"]) > MAX_ARRAY_ANNOTATION:
            raise SpecError("array.indexes", "is %d characters written as ranges; a Kubernetes Job's annotations hold "
                            "%d at most: use fewer, longer runs (0-99, 0-98:2)" % (len(array["text"]), MAX_ARRAY_ANNOTATION))
        annotations[ARRAY_ANNOTATION] = array["text"]
        pod_labels[ARRAY_LABEL] = "true"
        environment = [(key, value) for key, value in environment if key != ARRAY_INDEX_VARIABLE]
        if not dense(array):
            command = ["/bin/sh", "-c", SPARSE_WRAPPER % (SCRIPT_DIR, INDEXES_KEY), "bridge-array"] + command

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
        "command": command,
        "workingDir": spec["working_directory"] or WORK_DIR,
        "env": [{"name": key, "value": value} for key, value in environment],
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
        "template": {"metadata": {"labels": pod_labels,
                                  "annotations": dict((k, v) for k, v in annotations.items() if k != ARRAY_ANNOTATION)},
                     "spec": pod},
    }
    data = {SCRIPT_KEY: spec["script"]}
    if array:
        # One Pod per index; an index that fails is not run again (backoff_limit counts per index),
        # and the others run on: the Job fails once all have ended, naming the failed ones
        # (backoffLimitPerIndex, Kubernetes 1.29+; without backoffLimit, which would end the Job at
        # its first failure).
        del job_spec["backoffLimit"]
        job_spec.update(completionMode="Indexed", completions=array["size"],
                        parallelism=array["parallelism"] or array["size"],
                        backoffLimitPerIndex=options.get("backoff_limit", 0))
        if dense(array):
            container["env"].append({"name": ARRAY_INDEX_VARIABLE, "valueFrom": {"fieldRef": {
                "fieldPath": "metadata.annotations['%s']" % COMPLETION_INDEX_ANNOTATION}}})
        else:
            data[INDEXES_KEY] = index_runs(array["text"])
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
                       "data": data},
        "job": {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": job_spec},
    }
