"""BridgeBackend and ClusterBridgeBackend objects read as the controller uses them: pure functions.

(Stand-in of the "backends" part of issue 24, to the interface of design-24.md section 5; that
part's file replaces this one.)
"""

KINDS = ("BridgeBackend", "ClusterBridgeBackend")
CLUSTER_KIND = "ClusterBridgeBackend"


def ref_name(obj):
    """"Kind/name", or "BridgeBackend/namespace/name" for the namespaced kind."""
    meta = obj.get("metadata") or {}
    if obj.get("kind") == CLUSTER_KIND:
        return "%s/%s" % (CLUSTER_KIND, meta.get("name"))
    return "%s/%s/%s" % (obj.get("kind") or "BridgeBackend", meta.get("namespace"), meta.get("name"))


def connection_of(backend_obj, job_namespace):
    """The keys spec.backend_of returns for a BridgeJob of `job_namespace` that runs on `backend_obj`,
    plus where its Secret and CA ConfigMap are read."""
    spec = backend_obj.get("spec") or {}
    cluster = backend_obj.get("kind") == CLUSTER_KIND
    own = (backend_obj.get("metadata") or {}).get("namespace")
    secret_ref = spec.get("credentialsSecretRef") or {}
    ca_ref = spec.get("caConfigMapRef")
    return {
        "type": spec.get("type"),
        "url": spec.get("url"),
        "api_version": spec.get("apiVersion"),
        "iam_url": spec.get("iamUrl"),
        "validate_certs": spec.get("validateCerts", True),
        "job_namespace": spec.get("namespace"),
        "secret": secret_ref.get("name"),
        "ca": {"name": ca_ref["name"], "key": ca_ref.get("key") or "ca.crt"} if ca_ref else None,
        "namespace": job_namespace,
        "secret_namespace": (secret_ref.get("namespace") or job_namespace) if cluster else own,
        "ca_namespace": (ca_ref or {}).get("namespace") if cluster else own,
    }


def _matches(selector, labels):
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def admits(backend_obj, namespace_labels):
    """None when BridgeJobs of a namespace with `namespace_labels` may use `backend_obj`, else why not."""
    selector = (backend_obj.get("spec") or {}).get("namespaceSelector")
    if backend_obj.get("kind") != CLUSTER_KIND or selector is None:
        return None
    if namespace_labels is not None and _matches(selector, namespace_labels):
        return None
    return "%s does not admit this namespace: its namespaceSelector is %s" % (ref_name(backend_obj), selector)


QUEUE_KEYS = (("name", "name"), ("state", "state"), ("usable", "usable"), ("default", "default"),
              ("max_time_minutes", "maxTimeMinutes"), ("max_nodes", "maxNodes"), ("cpus_per_node", "cpusPerNode"),
              ("memory_mb_per_node", "memoryMbPerNode"), ("gpus_per_node", "gpusPerNode"), ("gpu_types", "gpuTypes"),
              ("features", "features"), ("qubits", "qubits"), ("pending", "pending"), ("running", "running"))


def ready_of(backend_obj):
    """The Ready condition: True, False, or None (never probed, or Unknown)."""
    for condition in (backend_obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return {"True": True, "False": False}.get(condition.get("status"))
    return None


def candidate_of(backend_obj):
    """The `candidates` entry of _placement.place for `backend_obj`."""
    status = backend_obj.get("status") or {}
    reason = None
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") != "True":
            reason = "%s: %s" % (condition.get("reason"), condition.get("message") or "")
    queues = []
    for queue in status.get("queues") or []:
        record = dict((snake, queue.get(camel)) for snake, camel in QUEUE_KEYS)
        record["gpu_types"] = record["gpu_types"] or []
        record["features"] = record["features"] or []
        queues.append(record)
    return {"name": ref_name(backend_obj), "type": (backend_obj.get("spec") or {}).get("type"),
            "ready": ready_of(backend_obj), "reason": reason, "queues": queues, "allowed_queues": None}
