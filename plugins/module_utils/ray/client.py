# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ray Jobs REST API (dashboard) client for Bridge.

Ray's quirks live in this package: text/plain errors, HTTP 500 for both a reused submission_id
and a delete of a running job, job_id null unless the driver calls ray.init(), and jobs that
wait for resources they can never get.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.bridge.hpc.plugins.module_utils._backend import (
    Backend,
    ShapeError,
    compilable,
    items,
)
from ansible_collections.bridge.hpc.plugins.module_utils._errors import (
    AlreadyExists,
    AuthFailed,
    BridgeError,
    NotFound,
    Rejected,
    ServerError,
    SpecError,
)
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
from ansible_collections.bridge.hpc.plugins.module_utils.ray.compile import (
    METADATA_REQUEST,
    compile_job,
    package,
)
from ansible_collections.bridge.hpc.plugins.module_utils.ray.fit import (
    check_fits,
    normalize_node,
    queue_records,
    used_and_total,
)
from ansible_collections.bridge.hpc.plugins.module_utils.ray.states import normalize_job, string_field


MANAGER = "Ray"
# Up to this many identities are read by id, a request each, rather than from the list of every
# job the cluster keeps, which grows with its history: an identity with its 0.1.0 alias and a few
# retry attempts.
FEW_BY_ID = 4


class RayClient(Backend):
    """Domain verbs over the Ray dashboard's Jobs API."""

    NAME = "ray"
    TITLE = MANAGER
    # What cancel_rejected acts on: get() checks a queued driver against the alive nodes.
    NEVER_STARTS = "no alive node of the cluster could ever host the driver (its entrypoint resources, CPUs, GPUs, memory)"
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

    def refuse(self, response, verb, obj, ident):
        """The typed error of an error answer, from Ray's text/plain (often traceback) body."""
        status = response.status_code
        text = self._ray_error_text(response, asked_version=obj == "version")
        # 500 means both "submission_id already exists" and "cannot delete a running job"; the
        # telling line sits inside a (nested) traceback, often not the last one.
        for marker, error_type in (("already exists", AlreadyExists), ("non-terminal state", Rejected)):
            line = _line_with(text, marker)
            if line:
                raise self.error(error_type, self.reason(line, status), verb, obj, ident, status)
        reason = self.reason(_last_line(text), status)
        if status in (401, 403):
            raise self.error(AuthFailed, "authentication failed: the token was refused (%s)" % reason,
                             verb, obj, ident, status)
        raise self.status_error(status, reason, verb, obj, ident)

    @property
    def api_version(self):
        return self.version()["version"]

    def version(self):
        """{"version": the Jobs API's, "ray_version": ...}: what tells a Ray dashboard from anything else."""
        if self._version is None:
            self._version = self.call("GET", "/api/version", "read", "version", parse=_version)
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
        return ""

    def render(self, spec):
        return compile_job(compilable(self, spec))

    def upload_package(self, script):
        """PUT the script's working_dir package unless Ray has it; idempotent (content-addressed)."""
        content, uri = package(script)
        if uri in self._packages:
            return uri
        path = "/api/packages/gcs/%s" % uri[len("gcs://"):]
        present = self.transport.request("GET", path, verb="read", obj="package", ident=uri)
        if present.status_code != 200:
            response = self.transport.request("PUT", path, content=content, verb="upload", obj="package", ident=uri)
            if response.status_code >= 400:
                self.refuse(response, "upload", "package", uri)
        # The URI names the content, so once Ray has it, it has it for this client's lifetime.
        self._packages.add(uri)
        return uri

    def submit(self, spec):
        """Upload the script, then POST the job once. A reused submission_id finds the existing job."""
        spec = compilable(self, spec)
        request = compile_job(spec)
        self.upload_package(spec["script"])
        try:
            return self.call("POST", "/api/jobs/", "submit", "job", spec["identity"], json=request, idempotent=False,
                             parse=lambda body: string_field(body["submission_id"], "submission_id"))
        except AlreadyExists:
            return spec["identity"]

    def get(self, job_id):
        job = self.call("GET", "/api/jobs/%s" % job_id, "get", "job", job_id, parse=normalize_job)
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
        jobs = self.call("GET", "/api/jobs/", "list", "jobs", parse=_jobs)
        wanted = None if identities is None else set(identities)
        return [job for job in jobs
                if (wanted is None or job["job_id"] in wanted)
                and (name is None or job["name"] == name)
                and (not phases or job["phase"] in phases)]

    def find_many(self, identities, names=None):
        """{identity: job} for those identities that have a job. The submission id is the identity,
        and Ray refuses to reuse one: there is never more than one.

        The lookup before a submit (an identity and the one Bridge 0.1.0 derived, or a spec's retry
        attempts) reads up to FEW_BY_ID jobs by id, so it costs the same however many jobs the
        cluster keeps; more (a jobs batch) come from one list of every job (poll_many).
        """
        wanted = list(dict.fromkeys(identities))
        if len(wanted) > FEW_BY_ID:
            return self.poll_many(wanted)
        return dict((identity, job) for identity, job in ((i, self.find(i)) for i in wanted) if job is not None)

    def poll_many(self, identities):
        """{identity: job} now, from one list request whatever the number of jobs: the controller's
        poll is one request per backend."""
        return dict((job["job_id"], job) for job in self.list(identities=identities))

    def cancel(self, job_id):
        """Stop a job: SIGTERM, then SIGKILL after Ray's grace period. A finished job stays as it is."""
        self.call("POST", "/api/jobs/%s/stop" % job_id, "cancel", "job", job_id, idempotent=True,
                  parse=lambda body: _boolean(body["stopped"], "stopped"))

    def delete(self, job_id):
        return self.call("DELETE", "/api/jobs/%s" % job_id, "delete", "job", job_id,
                         parse=lambda body: body.get("deleted", False))

    def logs(self, job_id, tail_lines=None):
        text = self.call("GET", "/api/jobs/%s/logs" % job_id, "read logs of", "job", job_id,
                         parse=lambda body: string_field(body["logs"], "logs"))
        if tail_lines:
            lines = text.splitlines(True)
            text = "".join(lines[-tail_lines:])
        return text

    def read_output(self, job, tail_lines):
        """The end of a job's driver log: the Jobs API's GET /api/jobs/<id>/logs, one request.
        That endpoint decodes the log as UTF-8 and answers HTTP 500 (UnicodeDecodeError) when the
        driver wrote bytes that are not; then the log file's bytes come from the State API (GET
        /api/v0/logs/file on the driver's node, its last lines), a second request."""
        try:
            return self.logs(job["job_id"], tail_lines=tail_lines + 1), False
        except ServerError as exc:
            node = (job.get("native") or {}).get("driver_node_id")
            if exc.status != 500 or "decode" not in exc.reason.lower() or not node:
                raise
        params = {"node_id": node, "filename": "job-driver-%s.log" % job["job_id"], "lines": tail_lines + 1}
        data = self.call("GET", "/api/v0/logs/file", "read logs of", "job", job["job_id"], params=params,
                         read=lambda response: response.content)
        if data.startswith(b"A file is not found at"):
            # Ray 2.60 answers a missing file with 200 and this text (naming its own path).
            raise self.error(NotFound, "Ray keeps no driver log of this job", "read logs of", "job", job["job_id"])
        return data, False

    def nodes(self):
        return self.call("GET", "/api/v0/nodes", "list", "nodes", params={"detail": "true", "limit": 10000},
                         parse=_nodes)

    def alive_nodes(self):
        return [n for n in self.nodes() if n["state"] == "alive"]

    def _load_metrics(self):
        """The autoscaler's load report: GET /api/cluster_status, data.clusterStatus.loadMetricsReport."""
        return self.call("GET", "/api/cluster_status", "read", "cluster status", parse=_load_metrics)

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

    def capacity(self):
        """The cluster's one capacity record (Ray has no queues): three requests (the version, the
        nodes, and the job list for the pending and running counts) whatever the number of jobs;
        the version is read once per client."""
        version = self.version()
        nodes, jobs = self.nodes(), self.list()
        return {"manager": MANAGER, "version": version["ray_version"], "api_version": version["version"],
                "queues": queue_records(nodes, jobs)}

    def check(self, spec):
        # The nodes are read once per client: a batch of jobs is checked against one view.
        if self._alive is None:
            self._alive = self.alive_nodes()
        check_fits(compile_job(spec), self._alive)


def _boolean(value, field):
    if not isinstance(value, bool):
        raise ShapeError("'%s' must be true or false, got %s" % (field, type(value).__name__))
    return value


def _version(body):
    """The dashboard's /api/version answer; anything without a Ray version is another service."""
    if not isinstance(body, dict) or not isinstance(body.get("ray_version"), str):
        raise ShapeError("no 'ray_version' string, so not a Ray dashboard's version answer")
    string_field(body.get("version"), "version")
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


def _line_with(text, marker):
    return next((line.strip()[:500] for line in (text or "").splitlines() if marker in line), None)


def _last_line(text):
    """Ray answers errors as text, often a Python traceback: its last line is the message."""
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip() not in ("", ".")]
    return lines[-1][:500] if lines else ""
