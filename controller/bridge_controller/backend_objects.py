"""BridgeBackend and ClusterBridgeBackend objects (deploy/crd-backends.yaml): pure functions of what
one says, for the probe (probe.py), placement and the BridgeJobs that name one.

Status is camelCase, the collection's capacity record (`capacity()` of every backend client) is
snake_case: QUEUE_FIELDS is the one mapping between them.
"""

from bridge_controller.spec import login_of

GROUP, VERSION = "bridge.dev", "v1alpha1"
API_VERSION = "%s/%s" % (GROUP, VERSION)
KINDS = ("BridgeBackend", "ClusterBridgeBackend")
NAMESPACED, CLUSTER = KINDS
PLURALS = {NAMESPACED: "bridgebackends", CLUSTER: "clusterbridgebackends"}
DEFAULT_PROBE_INTERVAL = 60
# The status holds the first MAX_QUEUES queues (the CRD's maxItems); queueCount says how many there are.
MAX_QUEUES = 64
READY = "Ready"

# A queue of the capacity record (snake_case) and of status.queues (camelCase), key by key.
QUEUE_FIELDS = (
    ("name", "name"),
    ("state", "state"),
    ("usable", "usable"),
    ("default", "default"),
    ("max_time_minutes", "maxTimeMinutes"),
    ("max_nodes", "maxNodes"),
    ("cpus_per_node", "cpusPerNode"),
    ("memory_mb_per_node", "memoryMbPerNode"),
    ("gpus_per_node", "gpusPerNode"),
    ("gpu_types", "gpuTypes"),
    ("features", "features"),
    ("qubits", "qubits"),
    ("pending", "pending"),
    ("running", "running"),
)
# What a queue of status lacks (the key is left out when the record's value is None) reads back as:
# None, but [] for the lists the record always has.
LIST_FIELDS = ("gpu_types", "features")


def kind_of(obj):
    return obj.get("kind") or NAMESPACED


def ref_name(obj):
    """How reasons, events and metrics name a backend object: "ClusterBridgeBackend/name",
    "BridgeBackend/namespace/name"."""
    meta = obj.get("metadata") or {}
    if kind_of(obj) == CLUSTER:
        return "%s/%s" % (CLUSTER, meta.get("name"))
    return "%s/%s/%s" % (NAMESPACED, meta.get("namespace"), meta.get("name"))


def probe_interval(obj):
    return (obj.get("spec") or {}).get("probeIntervalSeconds") or DEFAULT_PROBE_INTERVAL


def connection_of(obj, job_namespace):
    """Where a BridgeJob of `job_namespace` that names backend object `obj` runs: the keys of
    spec.backend_of (type, url, api_version, iam_url, validate_certs, job_namespace, secret, ca,
    login, namespace), plus secret_namespace and ca_namespace, where the Secret and the CA ConfigMap are read,
    and secret_owner.

    `namespace` is the BridgeJob's namespace (a kubernetes Job's when the object names none). A
    BridgeBackend's Secret and ConfigMap are in its own namespace. A ClusterBridgeBackend's Secret
    is the one of credentialsSecretRef.namespace, or without one the Secret of that name in the
    BridgeJob's namespace (None when there is no BridgeJob: the probe's case); its ConfigMap names
    its namespace. `job_namespace` None (the probe) makes `namespace` the object's own namespace
    (None for the cluster kind)."""
    spec = obj.get("spec") or {}
    meta = obj.get("metadata") or {}
    secret = spec.get("credentialsSecretRef") or {}
    ca = spec.get("caConfigMapRef") or {}
    cluster = kind_of(obj) == CLUSTER
    own = None if cluster else meta.get("namespace")
    return {
        "type": spec.get("type"),
        "url": spec.get("url"),
        "api_version": spec.get("apiVersion"),
        "iam_url": spec.get("iamUrl"),
        "validate_certs": spec.get("validateCerts", True),
        "job_namespace": spec.get("namespace"),
        "secret": secret.get("name"),
        "ca": {"name": ca["name"], "key": ca.get("key") or "ca.crt"} if ca.get("name") else None,
        "login": login_of(spec),
        "namespace": job_namespace or own,
        "secret_namespace": (secret.get("namespace") or job_namespace) if cluster else own,
        "ca_namespace": ca.get("namespace") if cluster else own,
        # A Secret the platform team keeps (a ClusterBridgeBackend's, namespace named), which its
        # namespaceSelector shares; any other is a tenant's, which its BridgeJobs' authors must read.
        "secret_owner": "platform" if cluster and secret.get("namespace") else "tenant",
    }


# ---------------------------------------------------------------- namespaceSelector

def selector_text(selector):
    """A LabelSelector as kubectl writes one: "team=a,env in (dev,prod),!legacy"."""
    parts = ["%s=%s" % item for item in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        if operator == "In":
            parts.append("%s in (%s)" % (key, ",".join(values)))
        elif operator == "NotIn":
            parts.append("%s notin (%s)" % (key, ",".join(values)))
        elif operator == "Exists":
            parts.append(key)
        else:
            parts.append("!%s" % key)
    return ",".join(parts) or "(every namespace)"


def _mismatch(selector, labels):
    """The first requirement of `selector` that `labels` does not meet, as text; None when all are met."""
    for key, value in sorted((selector.get("matchLabels") or {}).items()):
        if labels.get(key) != value:
            return "%s=%s" % (key, value)
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        present = key in labels
        met = {"In": present and labels[key] in values, "NotIn": not present or labels[key] not in values,
               "Exists": present, "DoesNotExist": not present}.get(operator, False)
        if not met:
            return selector_text({"matchExpressions": [expression]})
    return None


def admits(obj, namespace_labels, namespace=None):
    """None when BridgeJobs of a namespace with labels `namespace_labels` may use backend object
    `obj`, else why not (naming the backend and its selector). A BridgeBackend serves its own
    namespace (a BridgeJob names one there), a ClusterBridgeBackend the namespaces its
    namespaceSelector matches (every namespace without one). `namespace_labels` None means the
    namespace is not known (yet): a selector then admits nothing. `namespace` only names it."""
    if kind_of(obj) != CLUSTER:
        return None
    selector = (obj.get("spec") or {}).get("namespaceSelector")
    if selector is None:
        return None
    which = "namespace '%s'" % namespace if namespace else "the namespace"
    if namespace_labels is None:
        return "%s admits only namespaces whose labels match its namespaceSelector (%s), and the labels of %s " \
            "are not known" % (ref_name(obj), selector_text(selector), which)
    missed = _mismatch(selector, namespace_labels)
    if missed is None:
        return None
    return "%s admits only namespaces whose labels match its namespaceSelector (%s); %s does not meet %s" % (
        ref_name(obj), selector_text(selector), which, missed)


# ---------------------------------------------------------------- status

def ready_condition(obj):
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == READY:
            return condition
    return None


def ready_of(obj):
    """True or False as the probe of the object's current spec found it; None when it was not
    probed (yet), was not probed since its spec changed, or could not be (Ready Unknown)."""
    condition = ready_condition(obj)
    if condition is None:
        return None
    generation = (obj.get("metadata") or {}).get("generation")
    if generation is not None and (obj.get("status") or {}).get("observedGeneration") != generation:
        return None
    return {"True": True, "False": False}.get(condition.get("status"))


def queue_status(record):
    """A capacity record's queue as status.queues holds it: camelCase, unknown values left out."""
    return dict((camel, record[snake]) for snake, camel in QUEUE_FIELDS if record.get(snake) is not None)


def queue_record(status):
    """A queue of status.queues as the collection's capacity record: snake_case, every key present."""
    return dict((snake, status.get(camel, [] if snake in LIST_FIELDS else None)) for snake, camel in QUEUE_FIELDS)


def capacity_status(capacity):
    """The status fields of a capacity record (manager, version, apiVersion, queueCount, queues)."""
    queues = capacity.get("queues") or []
    return {
        "manager": capacity.get("manager"),
        "version": capacity.get("version"),
        "apiVersion": capacity.get("api_version"),
        "queueCount": len(queues),
        "queues": [queue_status(queue) for queue in queues[:MAX_QUEUES]],
    }


def capacity_of(obj):
    """The capacity record of the object's last successful probe ({} when none)."""
    status = obj.get("status") or {}
    if "queues" not in status and "manager" not in status:
        return {}
    return {"manager": status.get("manager"), "version": status.get("version"), "api_version": status.get("apiVersion"),
            "queues": [queue_record(queue) for queue in status.get("queues") or []]}


def candidate_of(obj):
    """The `candidates` entry of the collection's _placement.place for backend object `obj`."""
    condition = ready_condition(obj) or {}
    ready = ready_of(obj)
    reason = None
    if ready is not True:
        # "ConnectionFailed: Failed to ...": the Ready condition's reason and message, as placement's
        # rejections repeat them.
        reason = ": ".join(filter(None, (condition.get("reason"), condition.get("message")))) or "not probed yet"
    return {"name": ref_name(obj), "type": (obj.get("spec") or {}).get("type"), "ready": ready, "reason": reason,
            "queues": capacity_of(obj).get("queues") or [], "allowed_queues": None}
