"""A BridgeJob's spec as the collection's job spec: camelCase to snake_case, identity = CR UID.

Pure functions: the executor and the resolver derive from here what a CR asks for and where. A
BridgeJob says where it runs in one of three ways: inline (spec.backend), by naming a backend
object (spec.backendRef), or by letting the controller choose among candidates (spec.placement,
whose choice is recorded in status.placement and from then on is the job's backend object).
"""

import re

from bridge_controller import query
from bridge_controller.collection import module_utils

FIELDS = module_utils("_fields")
OUTPUT = module_utils("_output")
# camelCase -> snake_case of the job spec's fields a BridgeJob has, from the collection's field table
# (identity is the CR's UID and script may come from scriptFrom: job_params sets both).
TOP_LEVEL = dict((FIELDS.camel(field.name), field.name) for field in FIELDS.TOP_FIELDS
                 if field.crd and field.name != "script")
# Each group's (resources, array, retry, output) camelCase -> snake_case keys.
GROUP_OPTIONS = dict((group.name, dict((FIELDS.camel(FIELDS.leaf(field)), FIELDS.leaf(field))
                                       for field in FIELDS.GROUP_FIELDS[group.name])) for group in FIELDS.GROUPS)
DEFAULT_POLL_INTERVAL = 30


def key_of(obj):
    """The queue and cache key of a namespaced object: "namespace/name"."""
    metadata = obj.get("metadata") or {}
    return "%s/%s" % (metadata.get("namespace", ""), metadata.get("name", ""))


def identity_of(obj):
    """The job's Bridge identity is the CR's UID: unique, stable, and known before submitting."""
    return obj["metadata"]["uid"]


def job_params(obj, script=None):
    """The collection's job spec for a CR; `script` is the text of scriptFrom when the CR uses it."""
    spec = obj.get("spec") or {}
    params = dict((snake, spec[camel]) for camel, snake in TOP_LEVEL.items() if spec.get(camel) is not None)
    for group, options in GROUP_OPTIONS.items():
        given = spec.get(group)
        if given is not None or group == "resources":
            params[group] = dict((snake, (given or {})[camel]) for camel, snake in options.items()
                                 if (given or {}).get(camel) is not None)
    params["script"] = spec.get("script") if spec.get("script") is not None else script
    params["identity"] = identity_of(obj)
    params.setdefault("name", job_name(obj))
    # The queue placement chose is the job's when its spec names none (with one, placement only
    # looked at that queue).
    placed_queue = placement_of(obj).get("queue")
    if placed_queue and not params.get("queue"):
        params["queue"] = placed_queue
    return params


def job_name(obj):
    """A job name from the CR name: DNS-1123 names are valid job names everywhere."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", obj["metadata"]["name"])[:200]


def backend_of(obj):
    """Where the job runs: the part of the spec the runner turns into a connection."""
    backend = (obj.get("spec") or {}).get("backend") or {}
    return {
        "type": backend.get("type"),
        "url": backend.get("url"),
        "api_version": backend.get("apiVersion"),
        "iam_url": backend.get("iamUrl"),
        "validate_certs": backend.get("validateCerts", True),
        "job_namespace": backend.get("namespace"),
        "secret": (backend.get("credentialsSecretRef") or {}).get("name"),
        "ca": backend.get("caConfigMapRef"),
        "login": login_of(backend),
        "namespace": obj["metadata"].get("namespace"),
    }


def login_of(backend):
    """The login node of a Slurm backend (spec.login: host, port, user, knownHosts), as the module's
    `login` option names them; None without one. Its key is the Secret's loginPrivateKey, handed over
    apart with the credentials: what the CR says is content, never a path on the controller's machine."""
    login = backend.get("login")
    if not login:
        return None
    names = {"host": "host", "port": "port", "user": "user", "knownHosts": "known_hosts"}
    return dict((snake, login[camel]) for camel, snake in names.items() if login.get(camel) is not None)


def output_lines(obj):
    """spec.output.tailLines, or None when the CR does not ask for its job's output."""
    return ((obj.get("spec") or {}).get("output") or {}).get("tailLines")


def output_follow(obj):
    """spec.output.follow: whether the polls of the running job read its output too."""
    return bool(((obj.get("spec") or {}).get("output") or {}).get("follow"))


def output_secrets(obj):
    """The values of spec.environment whose names say they are secrets, masked in the job's output
    as a module masks those of its spec (handed over through the pipe, never an extra var)."""
    return OUTPUT.secret_values(dict((str(k), str(v)) for k, v in ((obj.get("spec") or {}).get("environment") or {}).items()))


def placement_of(obj):
    """status.placement: what placement chose and why ({} before it chose)."""
    return (obj.get("status") or {}).get("placement") or {}


def needs_placement(obj):
    """True for a BridgeJob with spec.placement whose choice is not recorded yet: a job whose
    status.placement names a backend never moves."""
    return bool((obj.get("spec") or {}).get("placement")) and not placement_of(obj).get("backend")


def backend_ref(obj):
    """{kind, name} of the backend object the job runs on (spec.backendRef, or what placement
    chose); None for an inline spec.backend and for a job not placed yet."""
    spec = obj.get("spec") or {}
    ref = spec.get("backendRef") or (placement_of(obj).get("backend") if spec.get("placement") else None)
    if not ref or not ref.get("name"):
        return None
    return {"kind": ref.get("kind") or "BridgeBackend", "name": ref["name"]}


def ref_key(ref, job_namespace):
    """(kind, namespace, name) of a backend object as the catalog finds it: a namespaced one is
    in the BridgeJob's namespace, a cluster one in none."""
    return (ref["kind"], "" if ref["kind"] == "ClusterBridgeBackend" else job_namespace, ref["name"])


def backend_key(obj):
    """CRs with the same backend key share one runner invocation and one poll request.

    A job naming a backend object is keyed by that object and its own namespace, not by the
    connection: the connection is read from the object when the batch runs (so an edited object
    moves all its jobs together), and a ClusterBridgeBackend may take each namespace's own Secret.
    """
    namespace = obj["metadata"].get("namespace")
    ref = backend_ref(obj)
    if ref is not None:
        return ("ref",) + ref_key(ref, namespace) + (namespace,)
    if needs_placement(obj):
        return ("unplaced", namespace)
    backend = backend_of(obj)
    ca = backend["ca"] or {}
    login = tuple(sorted((backend["login"] or {}).items()))
    return (backend["namespace"], backend["type"], backend["url"], backend["secret"], backend["api_version"],
            backend["iam_url"], backend["validate_certs"], ca.get("name"), ca.get("key"), backend["job_namespace"], login)


def refusal(obj):
    """Why the CR is refused before anything is submitted, for what its schema cannot check (a
    resultQuery's JMESPath); None when it is not."""
    expression = (obj.get("spec") or {}).get("resultQuery")
    return None if expression is None else query.refusal(expression)


def poll_interval(obj):
    return (obj.get("spec") or {}).get("pollInterval") or DEFAULT_POLL_INTERVAL
