# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ray Jobs REST API (dashboard) client for Bridge.

The job spec becomes a Ray job: the script travels as a content-addressed working_dir package
and runs under the interpreter of its #! line; the spec's resources reserve the driver's CPUs,
GPUs and memory. Ray's quirks live here: text/plain errors, HTTP 500 for both a reused
submission_id and a delete of a running job, job_id null unless the driver calls ray.init(), and
jobs that wait for resources they can never get.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import io
import json
import shlex
import zipfile

from ansible_collections.bridge.hpc.plugins.module_utils._backend import (
    TERMINAL_PHASES,
    Backend,
    ShapeError,
    decode,
    items,
    json_of,
    rfc3339,
    status_phrase,
    with_launcher,
)
from ansible_collections.bridge.hpc.plugins.module_utils._errors import (
    AlreadyExists,
    AuthFailed,
    BridgeError,
    NotFound,
    Rejected,
    SpecError,
    error_for_status,
)
from ansible_collections.bridge.hpc.plugins.module_utils._spec import one_task_only
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport

MANAGER = "Ray"
SCRIPT_NAME = "bridge_job"
# Exit status of coreutils timeout(1), which enforces the spec's time_limit around the entrypoint.
TIMEOUT_EXIT = 124
KILL_GRACE_SECONDS = 30
PHASE_BY_STATUS = {
    "PENDING": "queued",
    "RUNNING": "running",
    "SUCCEEDED": "completed",
    "FAILED": "failed",
    "STOPPED": "cancelled",
}
RUNTIME_ENV_KEYS = frozenset([
    "working_dir", "py_modules", "py_executable", "pip", "uv", "conda", "env_vars", "container",
    "image_uri", "worker_process_setup_hook", "config", "excludes", "java_jars", "nsight", "mpi",
])
OPTION_KEYS = frozenset([
    "runtime_env", "metadata", "entrypoint_resources", "entrypoint_label_selector",
    "entrypoint_num_cpus", "entrypoint_num_gpus", "entrypoint_memory",
])
# Spec fields that mean nothing to a Ray driver: refusing them beats silently ignoring them.
UNSUPPORTED = {
    "queue": "Ray has no queues; place the driver with backend_options.ray.entrypoint_resources",
    "account": "Ray has no accounts",
    "qos": "Ray has no quality of service",
    "constraints": "use backend_options.ray.entrypoint_label_selector or entrypoint_resources",
    "working_directory": "a Ray job runs in its uploaded working_dir",
    "stdout": "Ray keeps the driver log itself; read it with bridge.hpc.ray_job_info logs=true",
    "stderr": "Ray keeps the driver log itself; read it with bridge.hpc.ray_job_info logs=true",
}
# error_type values (Ray 2.60) of jobs that failed before their entrypoint ran.
ERROR_TYPES_REJECTED = ("RUNTIME_ENV_SETUP_FAILURE", "JOB_SUPERVISOR_ACTOR_START_FAILURE",
                        "JOB_SUPERVISOR_ACTOR_START_TIMEOUT", "JOB_SUPERVISOR_ACTOR_SCHEDULING_FAILED")
METADATA_IDENTITY = "bridge_identity"
METADATA_TIME_LIMIT = "bridge_time_limit_minutes"
# JobDetails does not echo the entrypoint's resource request; Bridge keeps it in the metadata to
# tell a job waiting for busy resources from one waiting for resources no node has.
METADATA_REQUEST = "bridge_entrypoint_request"
REQUEST_FIELDS = ("entrypoint_num_cpus", "entrypoint_num_gpus", "entrypoint_memory", "entrypoint_resources")


# ---------------------------------------------------------------- compiling the spec (pure)

def interpreter(script):
    """The command of the script's #! line, as argv."""
    first = script.split("\n", 1)[0][2:].strip()
    argv = shlex.split(first)
    if not argv:
        raise SpecError("script", "the #! line names no interpreter")
    return argv


def package(script):
    """(zip bytes, gcs URI) of a working_dir holding only the script.

    The zip is built byte-for-byte reproducibly (fixed timestamps and modes), so the same script
    always yields the same URI: the rendered request and the identity stay stable.
    """
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        entry = zipfile.ZipInfo(SCRIPT_NAME, date_time=(1980, 1, 1, 0, 0, 0))
        entry.external_attr = (0o100755 << 16)
        entry.compress_type = zipfile.ZIP_DEFLATED
        archive.writestr(entry, script.encode("utf-8"))
    content = buffer.getvalue()
    return content, "gcs://_ray_pkg_%s.zip" % hashlib.sha1(content).hexdigest()


def one_driver(resources):
    """SpecError naming the field unless the resources ask for one process on one node."""
    one_task_only(resources, "a Ray job is one driver process",
                  "ask for more inside the job (ray.remote tasks and actors)")


def compile_submit(spec):
    """The JobSubmitRequest for a spec; `rendered` in module results."""
    for field, why in UNSUPPORTED.items():
        if spec.get(field):
            raise SpecError(field, "not supported by the Ray backend: %s" % why)
    resources = spec["resources"]
    one_driver(resources)
    if resources["gpu_type"]:
        raise SpecError("resources.gpu_type", "Ray schedules GPUs by count; select a type with "
                        "backend_options.ray.entrypoint_resources (e.g. accelerator_type:A100) or a label selector")
    if resources["memory_per_cpu_mb"]:
        raise SpecError("resources.memory_per_cpu", "Ray reserves driver memory as a whole; use resources.memory")
    options = dict(spec["backend_options"].get("ray") or {})
    unknown = sorted(set(options) - OPTION_KEYS)
    if unknown:
        raise SpecError("backend_options.ray.%s" % unknown[0], "unknown Ray job field; allowed: %s" % ", ".join(sorted(OPTION_KEYS)))
    runtime_env = dict(options.pop("runtime_env", None) or {})
    bad = sorted(set(runtime_env) - RUNTIME_ENV_KEYS)
    if bad:
        raise SpecError("backend_options.ray.runtime_env.%s" % bad[0],
                        "unknown runtime_env key; allowed: %s" % ", ".join(sorted(RUNTIME_ENV_KEYS)))
    if "working_dir" in runtime_env:
        raise SpecError("backend_options.ray.runtime_env.working_dir", "is where Bridge ships the script; "
                        "use py_modules for more code")
    for key in ("entrypoint_num_cpus", "entrypoint_num_gpus", "entrypoint_memory"):
        if key in options and (not isinstance(options[key], (int, float)) or isinstance(options[key], bool) or options[key] < 0):
            raise SpecError("backend_options.ray.%s" % key, "must be a number of 0 or more, got %r" % (options[key],))
    for name, amount in (options.get("entrypoint_resources") or {}).items():
        if not isinstance(amount, (int, float)) or isinstance(amount, bool) or amount < 0:
            raise SpecError("backend_options.ray.entrypoint_resources.%s" % name, "must be a number of 0 or more, got %r" % (amount,))

    _content, uri = package(spec["script"])
    command = interpreter(spec["script"]) + [SCRIPT_NAME]
    limit = resources["time_limit_minutes"]
    if limit:
        command = ["timeout", "--signal=TERM", "--kill-after=%d" % KILL_GRACE_SECONDS, "%ds" % (limit * 60)] + command
    env_vars = dict(runtime_env.pop("env_vars", None) or {})
    env_vars.update(spec["environment"])
    runtime_env["working_dir"] = uri
    if env_vars:
        runtime_env["env_vars"] = env_vars
    metadata = dict((str(k), str(v)) for k, v in (options.pop("metadata", None) or {}).items())
    metadata[METADATA_IDENTITY] = spec["identity"]
    metadata["bridge_name"] = spec["name"]
    if limit:
        metadata[METADATA_TIME_LIMIT] = str(limit)
    request = {
        "entrypoint": " ".join(shlex.quote(part) for part in command),
        "submission_id": spec["identity"],
        "runtime_env": runtime_env,
        "metadata": metadata,
    }
    if resources["cpus_per_task"]:
        request["entrypoint_num_cpus"] = resources["cpus_per_task"]
    if resources["gpus"]:
        request["entrypoint_num_gpus"] = resources["gpus"]
    if resources["memory_mb"]:
        request["entrypoint_memory"] = resources["memory_mb"] * 1024 * 1024
    request.update(options)
    wanted = dict((k, request[k]) for k in REQUEST_FIELDS if request.get(k))
    if wanted:
        metadata[METADATA_REQUEST] = json.dumps(wanted, sort_keys=True)
    return request


# ---------------------------------------------------------------- normalizing (pure)

def normalize_job(native):
    if not isinstance(native, dict):
        raise ShapeError("a job must be a JSON object, got %s" % type(native).__name__)
    status = _string(native.get("status") or "", "status").upper()
    phase = PHASE_BY_STATUS.get(status, "queued")
    terminal = phase in TERMINAL_PHASES
    metadata = native.get("metadata") or {}
    exit_code = native.get("driver_exit_code")
    failure_class = None
    if phase == "cancelled":
        failure_class = "cancelled"
    elif phase == "failed":
        if exit_code == TIMEOUT_EXIT and metadata.get(METADATA_TIME_LIMIT):
            failure_class = "timeout"
        elif native.get("error_type") in ERROR_TYPES_REJECTED:
            failure_class = "rejected"
        else:
            failure_class = "non_zero_exit"
    # Ray's message of a failed job carries up to 20,000 characters of log; the first line says why.
    message = (native.get("message") or "").strip().split("\n", 1)[0] or None
    return {
        "job_id": _string(native.get("submission_id") or native.get("job_id"), "submission_id"),
        "ray_job_id": native.get("job_id"),
        "name": metadata.get("bridge_name") or native.get("submission_id"),
        "identity": metadata.get(METADATA_IDENTITY),
        "phase": phase,
        "terminal": terminal,
        "native_state": status or None,
        "reason": message,
        "error_type": native.get("error_type"),
        "exit_code": exit_code if terminal else None,
        "signal": None,
        "failure_class": failure_class,
        # Ray sets start_time when it accepts the submission, so it is the submit time as well.
        "submit_time": rfc3339((native.get("start_time") or 0) / 1000.0),
        "start_time": rfc3339((native.get("start_time") or 0) / 1000.0),
        "end_time": rfc3339((native.get("end_time") or 0) / 1000.0) if terminal else None,
        "partition": None,
        "nodes": (native.get("driver_info") or {}).get("node_ip_address"),
        "entrypoint": native.get("entrypoint"),
        "native": native,
    }


def normalize_node(native):
    """A NodeState of /api/v0/nodes, with used amounts from /api/cluster_status when known."""
    total = dict(native.get("resources_total") or {})
    custom = dict((k, v) for k, v in total.items()
                  if k not in ("CPU", "GPU", "memory", "object_store_memory") and not k.startswith("node:"))
    labels = native.get("labels") or {}
    return {
        "node_id": native.get("node_id"),
        "name": native.get("node_name") or native.get("node_ip"),
        "ip": native.get("node_ip"),
        "head": bool(native.get("is_head_node")),
        "state": (native.get("state") or "").lower(),
        "cpus": total.get("CPU", 0),
        "gpus": total.get("GPU", 0),
        "gpu_type": labels.get("ray.io/accelerator-type") or next(
            (k.split(":", 1)[1] for k in custom if k.startswith("accelerator_type:")), None),
        "memory_bytes": int(total.get("memory", 0)),
        "object_store_memory_bytes": int(total.get("object_store_memory", 0)),
        "custom_resources": custom,
        "labels": labels,
        "native": native,
    }


# ---------------------------------------------------------------- the client

class RayClient(Backend):
    """Domain verbs over the Ray dashboard's Jobs API."""

    NAME = "ray"
    TITLE = MANAGER
    URL_NAME = "the Ray dashboard URL"
    CONNECTION = dict(token=dict(type="str"))
    ENV = dict(url=("RAY_ADDRESS",), token=("RAY_AUTH_TOKEN",))
    CREDENTIALS = ("token",)
    SECRETS = ("token",)
    CAPABILITIES = frozenset(["logs", "token_auth", "preflight"])

    @classmethod
    def from_options(cls, get):
        return cls(cls.require_url(get("url")), token=get("token"), **cls.transport_options(get))

    def __init__(self, url, token=None, validate_certs=True, ca_path=None, timeout=30.0, retries=3, transport=None):
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = "Bearer %s" % token
        self.url = url.rstrip("/")
        self.transport = transport or Transport(
            self.url, MANAGER, headers=headers, secrets=[token], validate_certs=validate_certs,
            ca_path=ca_path, timeout=timeout, retries=retries)
        self.warnings = []
        self._version = None
        self._packages = set()
        self._alive = None

    def _call(self, method, path, verb, obj, ident=None, json=None, params=None, idempotent=None, parse=None):
        """One request; `parse(body)` of its JSON answer, where another shape is MalformedResponse."""
        response = self.transport.request(method, path, params=params, json=json, idempotent=idempotent,
                                          verb=verb, obj=obj, ident=ident)
        self._check(response, verb, obj, ident)
        endpoint = "%s %s" % (method, path)
        body = json_of(response, endpoint, MANAGER, self.url, verb, obj, ident)
        return decode(parse, body, endpoint, MANAGER, self.url, verb, obj, ident) if parse else body

    def _check(self, response, verb, obj, ident):
        """Nothing for a 2xx answer; else a typed error from Ray's text/plain (often traceback) body."""
        status = response.status_code
        if status < 400:
            return
        text = self._ray_error_text(response, asked_version=obj == "version")
        # 500 means both "submission_id already exists" and "cannot delete a running job"; the
        # telling line sits inside a (nested) traceback, often not the last one.
        for marker, error_type in (("already exists", AlreadyExists), ("non-terminal state", Rejected)):
            line = _line_with(text, marker)
            if line:
                raise error_type(self.transport.scrub(line), verb, obj, ident, MANAGER, self.url, status)
        reason = self.transport.scrub(_last_line(text) or status_phrase(status))
        if status in (401, 403):
            raise AuthFailed("authentication failed: the token was refused (%s)" % reason,
                             verb, obj, ident, MANAGER, self.url, status)
        raise error_for_status(status)(reason, verb, obj, ident, MANAGER, self.url, status)

    @property
    def api_version(self):
        return self.version()["version"]

    def version(self):
        """{"version": the Jobs API's, "ray_version": ...}: what tells a Ray dashboard from anything else."""
        if self._version is None:
            self._version = self._call("GET", "/api/version", "read", "version", parse=_version)
        return self._version

    def _ray_error_text(self, response, asked_version):
        """The body of an error answer when it is Ray's, else "".

        The dashboard answers every error as text/plain (aiohttp's Response(text=...) in
        dashboard/modules/job, often a traceback), which any other server may send too; and the
        URL may be a tenant's, pointing at an internal page that must not be read back into their
        status. So the text is Ray's only from a server that has also answered GET /api/version
        as a Ray dashboard, which a client that has not read its version asks on such an error (not
        on the version's own); of any other server, or one that refuses the version too (a wrong
        token), only the HTTP status is said.
        """
        kind = (response.headers.get("content-type") or "").lower()
        if not kind.startswith("text/plain"):
            return ""
        if self._version is None and not asked_version:
            try:
                self.version()
            except BridgeError:
                return ""
        return response.text if self._version is not None else ""

    def describe(self):
        version = self.version()
        return {"manager": MANAGER, "url": self.url, "version": version["ray_version"],
                "api_version": version["version"]}

    @classmethod
    def launcher(cls, spec):
        """Nothing: the entrypoint runs the script's command as the job's one driver process."""
        one_driver(spec["resources"])
        return ""

    def render(self, spec):
        return compile_submit(with_launcher(self, spec))

    def upload_package(self, script):
        """PUT the script's working_dir package unless Ray has it; idempotent (content-addressed)."""
        content, uri = package(script)
        if uri in self._packages:
            return uri
        path = "/api/packages/gcs/%s" % uri[len("gcs://"):]
        present = self.transport.request("GET", path, verb="read", obj="package", ident=uri)
        if present.status_code != 200:
            response = self.transport.request("PUT", path, content=content, verb="upload", obj="package", ident=uri)
            self._check(response, "upload", "package", uri)
        # The URI names the content, so once Ray has it, it has it for this client's lifetime.
        self._packages.add(uri)
        return uri

    def submit(self, spec):
        """Upload the script, then POST the job once. A reused submission_id finds the existing job."""
        spec = with_launcher(self, spec)
        request = compile_submit(spec)
        self.upload_package(spec["script"])
        try:
            return self._call("POST", "/api/jobs/", "submit", "job", spec["identity"], json=request, idempotent=False,
                              parse=lambda body: _string(body["submission_id"], "submission_id"))
        except AlreadyExists:
            return spec["identity"]

    def get(self, job_id):
        job = self._call("GET", "/api/jobs/%s" % job_id, "get", "job", job_id, parse=normalize_job)
        request = (job["native"].get("metadata") or {}).get(METADATA_REQUEST)
        if job["phase"] == "queued" and request:
            # Ray keeps such a job PENDING for RAY_JOB_START_TIMEOUT_SECONDS (900 s) and then
            # fails it; tell the caller now when no alive node could ever host the driver.
            try:
                check_fits(json.loads(request), self.alive_nodes())
            except SpecError as exc:
                job["failure_class"] = "rejected"
                job["reason"] = exc.reason
            except ValueError:
                pass  # metadata edited by hand: the job is only not checked
        return job

    def find(self, identity, name=None):
        try:
            return self.get(identity)
        except NotFound:
            return None

    def list(self, identities=None, name=None, phases=None):
        jobs = self._call("GET", "/api/jobs/", "list", "jobs", parse=_jobs)
        wanted = None if identities is None else set(identities)
        return [job for job in jobs
                if (wanted is None or job["job_id"] in wanted)
                and (name is None or job["name"] == name)
                and (not phases or job["phase"] in phases)]

    def find_many(self, identities, names=None):
        """{identity: job} for those identities that have a job, from one list request.

        The submission id is the identity, and Ray refuses to reuse one: there is never more than one.
        """
        return dict((job["job_id"], job) for job in self.list(identities=identities))

    def cancel(self, job_id):
        """Stop a job: SIGTERM, then SIGKILL after Ray's grace period. A finished job stays as it is."""
        self._call("POST", "/api/jobs/%s/stop" % job_id, "cancel", "job", job_id, idempotent=True,
                   parse=lambda body: _boolean(body["stopped"], "stopped"))

    def delete(self, job_id):
        return self._call("DELETE", "/api/jobs/%s" % job_id, "delete", "job", job_id,
                          parse=lambda body: body.get("deleted", False))

    def logs(self, job_id, tail_lines=None):
        text = self._call("GET", "/api/jobs/%s/logs" % job_id, "read logs of", "job", job_id,
                          parse=lambda body: _string(body["logs"], "logs"))
        if tail_lines:
            lines = text.splitlines(True)
            text = "".join(lines[-tail_lines:])
        return text

    def nodes(self):
        return self._call("GET", "/api/v0/nodes", "list", "nodes", params={"detail": "true", "limit": 10000},
                          parse=_nodes)

    def alive_nodes(self):
        return [n for n in self.nodes() if n["state"] == "alive"]

    def _load_metrics(self):
        """The autoscaler's load report: GET /api/cluster_status, data.clusterStatus.loadMetricsReport."""
        return self._call("GET", "/api/cluster_status", "read", "cluster status", parse=_load_metrics)

    def resources(self):
        """Cluster-wide {resource: {used, total}} from the autoscaler's load report."""
        return used_and_total(self._load_metrics().get("usage"), self.nodes())

    def node_usage(self, nodes=None):
        """{node_id: {resource: {used, total}}} from the same report: GET /api/cluster_status,
        data.clusterStatus.loadMetricsReport.usageByNode (Ray 2.60: keyed by hex node id).

        Like the cluster-wide usage it is empty until the autoscaler's monitor has reported once,
        a few seconds after the head starts; a node without an entry has unknown usage. Pass the
        nodes() just read to spare reading them again for the resource names.
        """
        by_node = self._load_metrics().get("usageByNode") or {}
        nodes = self.nodes() if nodes is None else nodes
        return dict((node_id, used_and_total(pairs, nodes)) for node_id, pairs in by_node.items()
                    if isinstance(pairs, dict))

    def inventory(self):
        """Version, nodes and their usage; unknown usage (the report is not there yet) is a warning."""
        version = self.version()["ray_version"]
        nodes = self.nodes()
        try:
            usage, resources = self.node_usage(nodes), self.resources()
        except BridgeError as exc:
            self.warnings.append("used amounts are unknown: %s" % exc)
            usage, resources = {}, {}
        return {"version": version, "nodes": nodes, "usage": usage, "resources": resources}

    def check(self, spec):
        # The nodes are read once per client: a batch of jobs is checked against one view.
        if self._alive is None:
            self._alive = self.alive_nodes()
        check_fits(compile_submit(spec), self._alive)


def _boolean(value, field):
    if not isinstance(value, bool):
        raise ShapeError("'%s' must be true or false, got %s" % (field, type(value).__name__))
    return value


def _string(value, field):
    if not isinstance(value, str):
        raise ShapeError("'%s' must be a string, got %s" % (field, type(value).__name__))
    return value


def _version(body):
    """The dashboard's /api/version answer; anything without a Ray version is another service."""
    if not isinstance(body, dict) or not isinstance(body.get("ray_version"), str):
        raise ShapeError("no 'ray_version' string, so not a Ray dashboard's version answer")
    _string(body.get("version"), "version")
    return body


def _jobs(body):
    if not isinstance(body, list):
        raise ShapeError("the job list must be a JSON list, got %s" % type(body).__name__)
    return [normalize_job(job) for job in body]


def _nodes(body):
    return [normalize_node(node) for node in items(body["data"]["result"], "result")]


def _load_metrics(body):
    report = (((body or {}).get("data") or {}).get("clusterStatus") or {}).get("loadMetricsReport") or {}
    if not isinstance(report, dict):
        raise ShapeError("loadMetricsReport must be an object")
    return report


def check_fits(request, nodes):
    """Refuse a driver no alive node can ever host: Ray would leave it PENDING for 15 minutes."""
    if not nodes:
        return
    wanted = {"CPU": request.get("entrypoint_num_cpus"), "GPU": request.get("entrypoint_num_gpus"),
              "memory": request.get("entrypoint_memory")}
    wanted.update(request.get("entrypoint_resources") or {})
    fields = {"CPU": "resources.cpus_per_task", "GPU": "resources.gpus", "memory": "resources.memory"}
    for node in nodes:
        totals = dict(node["custom_resources"], CPU=node["cpus"], GPU=node["gpus"], memory=node["memory_bytes"])
        if all(not amount or totals.get(name, 0) >= amount for name, amount in wanted.items()):
            return
    for name, amount in wanted.items():
        if not amount:
            continue
        best = max(dict(n["custom_resources"], CPU=n["cpus"], GPU=n["gpus"], memory=n["memory_bytes"]).get(name, 0)
                   for n in nodes)
        if best < amount:
            field = fields.get(name, "backend_options.ray.entrypoint_resources.%s" % name)
            raise SpecError(field, "%s %s requested but the largest alive Ray node has %s" % (amount, name, best))
    raise SpecError("resources", "no single alive Ray node has all of %s" % ", ".join(
        "%s=%s" % (k, v) for k, v in sorted(wanted.items()) if v))


def used_and_total(usage, nodes):
    """{resource: {used, total}} of a load report's {name: [used, total]}.

    The dashboard camelCases every key of this report, custom resource names included
    (bridge_test -> bridgeTest); the nodes' totals give the real names back.
    """
    names = {}
    for node in nodes:
        for name in node["native"].get("resources_total") or {}:
            names[camel_case(name)] = name
    names.update(objectStoreMemory="object_store_memory")
    return dict((names.get(key, key), {"used": pair[0], "total": pair[1]})
                for key, pair in (usage or {}).items() if isinstance(pair, list) and len(pair) == 2)


def camel_case(name):
    """The dashboard's key conversion (to_camel_case): parts after the first go through str.title()."""
    parts = name.split("_")
    return parts[0] + "".join(part.title() for part in parts[1:])


def _line_with(text, marker):
    return next((line.strip()[:500] for line in (text or "").splitlines() if marker in line), None)


def _last_line(text):
    """Ray answers errors as text, often a Python traceback: its last line is the message."""
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip() not in ("", ".")]
    return lines[-1][:500] if lines else ""
