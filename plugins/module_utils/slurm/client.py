# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm REST (slurmrestd) client for Bridge.

Speaks every REST version in use (v0.0.36 ... v0.0.45), discovers which one the server offers and
normalizes jobs, partitions and nodes into one shape. All of slurmrestd's quirks live in this
package: errors[]/warnings[] arrays, wait-status exit codes (v0.0.38), {set, infinite, number}
numbers and list-valued states (v0.0.40+), and HTTP statuses that moved between releases.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import re
import time

from ansible_collections.bridge.hpc.plugins.module_utils._arrays import index_text
from ansible_collections.bridge.hpc.plugins.module_utils._backend import (
    Backend,
    REFUSE,
    ShapeError,
    compilable,
    items,
    manager_reason,
    select,
)
from ansible_collections.bridge.hpc.plugins.module_utils._errors import (
    AmbiguousIdentity,
    AuthFailed,
    BridgeError,
    ConnectionFailed,
    MalformedResponse,
    NotFound,
    Rejected,
    SpecError,
    Timeout,
    Unsupported,
)
from ansible_collections.bridge.hpc.plugins.module_utils._job_output import slurm_output_paths
from ansible_collections.bridge.hpc.plugins.module_utils._transport import IDEMPOTENT_METHODS, Transport
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.accounting import LOOKUP_WINDOW_DAYS, job_comment, query
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.arrays import UNKNOWN_END, ended_record, ended_task, fold
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.compile import LEGACY_VERSIONS, SRUN_OPTIONS, compile_job
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.fit import (
    check_fits,
    normalize_node,
    normalize_partition,
    queue_records,
)
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.identity import claim, identity_keys, identity_tag
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.states import (
    NEVER_STARTS as HOPELESS_DOC,
    at_path,
    ended_of,
    normalize_accounting_job,
    normalize_job,
    number,
    text,
)


MANAGER = "Slurm"
# Newest first: discovery takes the first one the server answers.
KNOWN_VERSIONS = (
    "v0.0.45", "v0.0.44", "v0.0.43", "v0.0.42", "v0.0.41",
    "v0.0.40", "v0.0.39", "v0.0.38", "v0.0.37", "v0.0.36",
)
VERSION_CHOICES = list(KNOWN_VERSIONS)
# How many arrays' task ends a client remembers (the last seen), for tasks slurmctld forgets (MinJobAge).
REMEMBERED_ARRAYS = 256
# The first REST version that serves slurm.conf (GET conf; Slurm 26.05).
CONF_SINCE = "v0.0.45"
INVALID_JOB_ID = 2017
ALREADY_DONE = 2021
ZERO_BYTES = 5005
PRIVILEGED_USERS = ("root", "slurm")
# Job names accounting can be searched by: its job_name filter is a comma-separated list.
NAME_SEARCHABLE = re.compile(r"^[^,\s]{1,200}$")
NAMES_PER_QUERY = 50
# Any name: the probe asks only whether accounting answers (over an empty window).
PROBE_NAME = "bridge-probe"
# Up to this many jobs accounting shows unfinished are read from slurmctld one by one; more, with one list.
CURRENT_READS = 20
# slurmdbd's answer to a query that matched no job (22.05 puts it in errors[] of an HTTP 200).
NOTHING_FOUND = 9003
NO_CHANGES = re.compile(r"^No job changes since")
# 24.11 without slurmdbd adds the first to every response; 24.11 and later the others to an
# accounting query that matched no job. None says anything about the request.
HARMLESS_WARNING = re.compile(r"accounting storage is disabled|^slurmdb_jobs_get\(.*\) found nothing$|^Zero jobs to dump$",
                              re.IGNORECASE)
TOKEN_HEADER = "X-SLURM-USER-TOKEN"
USER_HEADER = "X-SLURM-USER-NAME"
# `scontrol token` prints "SLURM_JWT=<jwt>"; a token file may hold that line as it is.
JWT_ASSIGNMENT = re.compile(r"^SLURM_JWT=")
# A JWT is a few hundred bytes; a file much larger than that is not a token file.
TOKEN_FILE_LIMIT = 65536


def token_of(text):
    """The JWT in a token file's text: all of it, blanks stripped, or the value of the
    SLURM_JWT=... line `scontrol token` prints. None when the text holds no token or more than one word."""
    token = JWT_ASSIGNMENT.sub("", text.strip(), count=1).strip()
    if not token or any(char.isspace() for char in token):
        return None
    return token


def token_user(token):
    """The user a Slurm JWT was issued for: its `sun` claim, which `scontrol token` writes; None for a
    token that is no JWT or names no user. The signature is not checked here: slurmctld does that.

    Slurm 22.05 refuses a token without the user header (HTTP 401), later releases take the user
    from the token; sending the token's own user suits both."""
    parts = (token or "").split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)).decode("utf-8"))
    except (ValueError, TypeError, UnicodeDecodeError):
        return None
    user = claims.get("sun") if isinstance(claims, dict) else None
    return user if isinstance(user, str) and user and not any(char.isspace() for char in user) else None


def read_token_file(path):
    """The JWT in the file at `path`; SpecError on token_file when it cannot be read or holds none.
    Messages name the file, never what it holds."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(TOKEN_FILE_LIMIT + 1)
    except (IOError, OSError) as exc:
        raise SpecError("token_file", "cannot read '%s': %s" % (path, exc.strerror or type(exc).__name__))
    if len(data) > TOKEN_FILE_LIMIT:
        raise SpecError("token_file", "'%s' is larger than %d bytes, so it holds no JWT" % (path, TOKEN_FILE_LIMIT))
    try:
        token = token_of(data.decode("utf-8"))
    except UnicodeDecodeError:
        token = None
    if token is None:
        raise SpecError("token_file", "'%s' holds no token: expected a JWT or the SLURM_JWT=... line of scontrol token"
                        % path)
    return token


# How much of the end of a job's stdout file is read over SSH: enough for the most lines an
# `output` may ask for (1000) of any sensible length; what results show is 4 KiB at most.
OUTPUT_READ_BYTES = 262144


# ---------------------------------------------------------------- the client

class SlurmClient(Backend):
    """Domain verbs over slurmrestd. Returns normalized dicts; keeps the raw object in `native`."""

    NAME = "slurm"
    TITLE = MANAGER
    NEVER_STARTS = HOPELESS_DOC
    URL_NAME = "the slurmrestd URL"
    CONNECTION = dict(
        user=dict(type="str"),
        token=dict(type="str"),
        token_file=dict(type="path"),
        api_version=dict(type="str", choices=VERSION_CHOICES),
        # The controller's key (never a tenant's), so no credential of the Secret: slurm/identity.py.
        identity_key=dict(type="str", no_log=True),
    )
    ENV = dict(url=("SLURM_URL",), user=("SLURM_USER",), token=("SLURM_JWT",), token_file=("SLURM_JWT_FILE",))
    EXCLUSIVE = (("token", "token_file"),)
    CREDENTIALS = ("user", "token")
    SECRETS = ("token",)
    CAPABILITIES = frozenset(["api_versions", "signal", "token_auth", "preflight"])

    @classmethod
    def from_options(cls, get):
        cls.require_exclusive(get)
        return cls(cls.require_url(get("url")), user=get("user"), token=get("token"), token_file=get("token_file"),
                   api_version=get("api_version"), identity_key=get("identity_key"), **cls.transport_options(get))

    def __init__(self, url, user=None, token=None, api_version=None, validate_certs=True,
                 ca_path=None, timeout=30.0, retries=3, transport=None, token_file=None, identity_key=None):
        if api_version and api_version not in KNOWN_VERSIONS:
            raise SpecError("api_version", "'%s' is not a Slurm REST version Bridge speaks; known: %s" % (
                api_version, ", ".join(KNOWN_VERSIONS)))
        if token and token_file:
            raise SpecError("token_file", "token and token_file are mutually exclusive")
        if token_file:
            token = read_token_file(token_file)
        self.token_file = token_file
        self.url = url.rstrip("/")
        self.user = user
        # Without a user, the token's own (its `sun` claim) is sent: Slurm 22.05 refuses a token
        # without the user header, and later releases take the same user from the token.
        self.user_given = bool(user)
        self.transport = transport or Transport(
            self.url, MANAGER, headers={"Accept": "application/json"}, validate_certs=validate_certs,
            ca_path=ca_path, timeout=timeout, retries=retries)
        if user:
            self.transport.set_header(USER_HEADER, user)
        self._token = None
        self._use_token(token)
        # The first makes the tags of new jobs, each verifies (slurm/identity.py).
        self.identity_keys = identity_keys(identity_key)
        for key in self.identity_keys:
            self.transport.add_secret(key)
        self._api_version = api_version
        self.warnings = []
        self.cluster = None
        # Slurm's release ("26.05.5"), from the meta of the last answer that named it.
        self.release = None
        self._topology = None
        # MaxArraySize of slurm.conf: False until read, None where slurmrestd does not serve it.
        self._max_array_size = False
        # {array job id: {index: ended task}}: the ends of array tasks this client has seen (_folded).
        self._ended_tasks = {}
        # Whether slurmrestd answers /slurmdb (slurmdbd and its plugin): None until first asked.
        self._accounting = None
        self.lookup = None

    # -- plumbing

    def _use_token(self, token):
        """Send `token` from now on; it joins the secrets every message is scrubbed of. Without a
        user given, the token's own user goes with it."""
        if token:
            self.transport.add_secret(token)
            self.transport.set_header(TOKEN_HEADER, token)
            user = None if self.user_given else token_user(token)
            if user:
                self.user = user
                self.transport.set_header(USER_HEADER, user)
        self._token = token

    def _rotated(self, refused):
        """After the token was refused (`refused`, an AuthFailed): True when token_file now holds
        another token, which every later request carries. Otherwise `refused` is raised, saying
        what the file held: the token was not rotated, so sending again would be refused again."""
        if not self.token_file:
            raise refused
        try:
            token = read_token_file(self.token_file)
        except SpecError as exc:
            note = "token_file could not be read again (%s)" % exc.reason.split(": ", 1)[-1]
        else:
            if token != self._token:
                self._use_token(token)
                return True
            note = "token_file '%s' still holds the token that was refused" % self.token_file
        raise AuthFailed("%s; %s" % (refused.reason, note), refused.verb, refused.obj, refused.ident, refused.manager,
                         refused.url, refused.status)

    def exchange(self, method, path, endpoint, verb, obj, ident, missing=REFUSE, idempotent=None, created_key=None,
                 **request):
        """The checked body of one request (None for a 304; `missing` for a 404 where it is given);
        `created_key` as in _check.

        A refused token is read again from token_file, and an idempotent request is sent once more
        when the file holds another token now. A submit is not: submit() looks its identity up first.
        """
        if idempotent is None:
            idempotent = method.upper() in IDEMPOTENT_METHODS
        rotated = False
        while True:
            response = self.send(method, path, verb, obj, ident, idempotent=idempotent, **request)
            if missing is not REFUSE and response.status_code == 404:
                return missing
            try:
                return self._check(response, verb, obj, ident, created_key)
            except AuthFailed as exc:
                if rotated:
                    raise self._refused_again(exc)
                if not idempotent:
                    raise
                rotated = self._rotated(exc)

    @staticmethod
    def _refused_again(refused):
        return AuthFailed("%s; the token read again from token_file was refused too" % refused.reason, refused.verb,
                          refused.obj, refused.ident, refused.manager, refused.url, refused.status)

    @property
    def api_version(self):
        if self._api_version is None:
            served = self.served_versions(stop_at_first=True)
            if not served:
                raise self.error(NotFound, "slurmrestd serves none of the REST versions Bridge knows (%s)" % ", ".join(
                    KNOWN_VERSIONS), "discover", "REST API")
            self._api_version = served[0]
        return self._api_version

    def served_versions(self, stop_at_first=False):
        """The REST versions the server answers, newest first (probed with GET ping, 200 vs 404).

        An answer that is not slurmrestd's ping (a proxy's page, another service's JSON) stops the
        probe with MalformedResponse: that server is not slurmrestd.
        """
        served = []
        for version in KNOWN_VERSIONS:
            path = "/slurm/%s/ping/" % version
            try:
                answered = self.call("GET", path, "discover", "REST API", version, parse=_pings, missing=False)
            except AuthFailed as exc:
                # slurmrestd refuses credentials (401) before it routes: that says nothing of this version.
                if exc.status == 401:
                    raise self._refused_at_discovery(exc)
                raise
            if answered is False:
                continue
            served.append(version)
            if stop_at_first:
                break
        return served

    def _refused_at_discovery(self, refused):
        """The AuthFailed of credentials refused while the REST versions were probed: "authentication
        refused", with what was sent, not a failure to find one version."""
        reason = refused.reason
        for prefix in ("authentication failed: ", "authentication refused: "):
            if reason.startswith(prefix):
                reason = reason[len(prefix):]
        if not self._token:
            sent = "a request without a token"
            hint = "give token (SLURM_JWT) or token_file (SLURM_JWT_FILE)"
        elif self.user:
            sent = "the token with user '%s'%s" % (self.user, "" if self.user_given else " (the token's own)")
            hint = "the token expired, was made by another cluster's key, or may not act for that user"
        else:
            sent = "the token without a user name"
            hint = ("Slurm 22.05 and older need the user with every token: set user (SLURM_USER), or use a token "
                    "of `scontrol token`, which names its user")
        return self.error(AuthFailed, "authentication refused: slurmrestd refused %s, so no REST version could be probed "
                          "(%s); %s" % (sent, reason, hint), "discover", "REST API", None, refused.status)

    @property
    def legacy(self):
        return self.api_version in LEGACY_VERSIONS

    def _path(self, suffix, store="slurm"):
        """The path of slurmctld's `suffix` (store="slurmdb": accounting's) in the REST version in use."""
        return "/%s/%s/%s" % (store, self.api_version, suffix)

    def _check(self, response, verb, obj, ident, created_key=None):
        """The body of a successful response; a typed error for Slurm's errors[] or an HTTP error.

        With `created_key`, a 2xx body that carries that key is a success whatever errors[] says:
        Slurm 22.05 answers a submit it queued but cannot run with HTTP 200, an error
        ("Requested partition configuration not available now") and the new job's id.
        """
        status = response.status_code
        if status == 304:
            return None
        endpoint = _endpoint(response)
        if status < 400:
            body = self.answer(response, endpoint, verb, obj, ident)
        else:
            # Only Slurm's own errors[] are shown: a body of another kind (slurmrestd's text/plain
            # 401 too) may be any page of the server a URL points at, so its status stands for it.
            try:
                body = response.json()
            except ValueError:
                body = {}
        if not isinstance(body, dict):
            if status < 400:
                raise self.error(MalformedResponse, "%s answered a JSON %s, not an object; is %s slurmrestd?" % (
                    endpoint, type(body).__name__, self.url), verb, obj, ident, status)
            body = {}
        warnings, errors = self.decoded(_notes, body, endpoint, verb, obj, ident)
        # 24.11 names the cluster only in meta (its partitions and nodes carry "").
        cluster = at_path(body, "meta", "slurm", "cluster")
        self.cluster = cluster if isinstance(cluster, str) and cluster else self.cluster
        release = _named_release(body)
        self.release = release or self.release
        # Slurm's words are said once the server has answered as slurmrestd: a ping, or this very
        # answer naming its Slurm release in meta, as slurmrestd's errors do.
        vouched = self.transport.vouched or release is not None
        for warning in warnings:
            note = manager_reason(_error_text(warning), None, self.transport.scrub, vouched)
            if note and note not in self.warnings and not HARMLESS_WARNING.search(note):
                self.warnings.append(note)
        errors = [e for e in errors if (_error_number(e) != 0 or _error_text(e)) and _error_number(e) != NOTHING_FOUND]
        if status < 400 and not errors:
            return body
        if status < 400 and created_key and body.get(created_key):
            for error in errors:
                self.warnings.append("Slurm accepted %s '%s' with an error: %s" % (
                    obj, body.get(created_key), manager_reason(_error_text(error), None, self.transport.scrub,
                                                               vouched) or "not repeated: the server has not shown it is slurmrestd"))
            return body
        words = "; ".join(_error_text(e) for e in errors)
        reason = manager_reason(words, status, self.transport.scrub, vouched)
        numbers = [_error_number(e) for e in errors]
        # Slurm's words classify the error even where they are not said; never a secret's words.
        lowered = self.transport.scrub(words).lower()
        if status in (401, 511) or "authentication" in lowered or "jwt" in lowered or "token" in lowered:
            raise self.error(AuthFailed, "authentication failed: the user or token was refused (%s)" % reason,
                             verb, obj, ident, status)
        if status == 500 and errors and self._api_version in LEGACY_VERSIONS + (None,) and (
                all(n == -1 for n in numbers) or ZERO_BYTES in numbers):
            # Slurm 22.05 answers a bad or expired token with a bare 500: "Unspecified error" (-1)
            # on reads, "Zero Bytes were transmitted or received" (5005) on submit; only
            # slurmctld's log says "jwt_decode failure".
            raise self.error(AuthFailed, "authentication failed: slurmctld dropped the request without a reason, which "
                             "is how Slurm 22.05 answers a bad or expired token (%s)" % reason,
                             verb, obj, ident, status)
        if INVALID_JOB_ID in numbers or (status == 404 and obj == "job"):
            raise self.error(NotFound, reason, verb, obj, ident, status)
        if status >= 500 and any(n for n in numbers if n and n > 0):
            raise self.error(Rejected, reason, verb, obj, ident, status)
        if status < 400:
            raise self.error(Rejected, reason, verb, obj, ident, status)
        raise self.status_error(status, reason, verb, obj, ident)

    # -- domain verbs

    def ping(self):
        pings, release = self.call("GET", self._path("ping/"), "ping", "controller",
                                   parse=lambda body: (_pings(body), _release(body)))
        up = [p for p in pings if str(p.get("ping") or p.get("pinged") or "").upper() == "UP" or p.get("responding") is True]
        return {
            "api_version": self.api_version,
            "release": release,
            "controllers": [{"hostname": p.get("hostname"), "mode": p.get("mode"), "up": p in up} for p in pings],
            "reachable": bool(up),
        }

    def describe(self):
        return dict(self.ping(), manager=MANAGER, url=self.url, cluster=self.cluster)

    @classmethod
    def launcher(cls, spec):
        """srun with the counts the spec gives; what it leaves out, srun takes from the job's
        allocation. cpus_per_task is passed explicitly: srun of Slurm 22.05 stopped reading the
        SLURM_CPUS_PER_TASK that sbatch sets (its release notes)."""
        resources = spec["resources"]
        return " ".join(["srun"] + [option % resources[key] for option, key in SRUN_OPTIONS if resources[key]])

    def render(self, spec):
        tag = identity_tag(self.identity_keys[0], spec["identity"]) if self.identity_keys else None
        return compile_job(compilable(self, spec), self.api_version, tag)

    def submit(self, spec):
        """Submit once; never retried blindly. If no answer arrives, look the identity up before
        giving up. If the token is refused and token_file holds another one now, look the identity
        up with that one and submit once more only when no job carries it."""
        body = self.render(spec)
        try:
            job_id = self._post_submit(spec, body)
        except (ConnectionFailed, Timeout) as exc:
            return self.found_after_lost_submit(spec, exc)
        except AuthFailed as exc:
            self._rotated(exc)
            existing = self.find(spec["identity"])
            if existing is not None:
                return existing["job_id"]
            try:
                job_id = self._post_submit(spec, body)
            except (ConnectionFailed, Timeout) as lost:
                return self.found_after_lost_submit(spec, lost)
            except AuthFailed as again:
                raise self._refused_again(again)
        if not job_id:
            raise self.error(MalformedResponse, "slurmrestd answered without a job id", "submit", "job", spec["name"])
        return job_id

    def _post_submit(self, spec, body):
        return self.call("POST", self._path("job/submit"), "submit", "job", spec["name"], json=body, idempotent=False,
                         created_key="job_id", parse=_submitted_id)

    def get(self, job_id):
        """One job by id: slurmctld's, or accounting's once slurmctld has forgotten it (MinJobAge)."""
        try:
            return self._live_job(job_id)
        except NotFound as forgotten:
            if not self.accounting_available():
                raise
            try:
                return self.recorded_job(job_id)
            except NotFound:
                raise forgotten

    def _live_job(self, job_id):
        """slurmctld's job `job_id`: for an array's id, all its tasks (one answer) folded into one job."""
        jobs = self._folded(self.call("GET", self._path("job/%s" % job_id), "get", "job", job_id, parse=_jobs))
        if not jobs:
            raise self.error(NotFound, "no such job", "get", "job", job_id)
        job = next((job for job in jobs if job["job_id"] == str(job_id)), jobs[0])
        if job["job_id"] != str(job_id) and "array" in job:
            # The id of one task ("123_4" or its own number): Bridge's job is the whole array.
            return self._live_job(job["job_id"])
        return job

    def list(self, identities=None, name=None, phases=None, update_time=None):
        """Every job slurmctld remembers (MinJobAge), narrowed by identity, name and phase (an array
        as one job, whatever its number of tasks); None when nothing changed since update_time."""
        jobs = self._queue(update_time)
        if jobs is None:
            return None
        # Each record of an array carries its comment and name: the arrays asked for are folded, no other.
        return select(self._folded(select(jobs, identities, name)), phases=phases)

    def _queue(self, update_time=None):
        """slurmctld's records of jobs and array tasks, one request; None when nothing changed
        since update_time.

        "Nothing changed" is a 304 in v0.0.38 but a 200 with no jobs and a "No job changes since"
        warning from v0.0.42 on; v0.0.40/41 refuse an epoch (422), so they get the full list.
        """
        params = {"update_time": int(update_time)} if update_time else None
        try:
            body = self.call("GET", self._path("jobs/"), "list", "jobs", params=params)
        except Rejected:
            if params is None:
                raise
            body = self.call("GET", self._path("jobs/"), "list", "jobs")
        if body is None:
            return None
        unchanged = [w for w in self.warnings if NO_CHANGES.match(w)]
        if unchanged:
            self.warnings = [w for w in self.warnings if not NO_CHANGES.match(w)]
            if params is not None and not body.get("jobs"):
                return None
        return self.decoded(_jobs, body, "GET " + self._path("jobs/"), "list", "jobs")

    def _folded(self, jobs):
        """slurmctld's records with each array's folded into one job (arrays.fold). The end of each
        task seen is remembered (ENDED_KEYS, per array), so that a task slurmctld forgets later is
        known to this client without a request (see _forgotten_tasks)."""
        for job in jobs:
            record = job.get("array_task")
            if record and record["index"] is not None and job["terminal"]:
                self._seen_of(record["array_job_id"])[record["index"]] = ended_task(job)
        return fold(jobs, self._forgotten_tasks)

    def _seen_of(self, array_job_id):
        """{index: ended_task} this client has seen of an array; the REMEMBERED_ARRAYS arrays seen last."""
        seen = self._ended_tasks.pop(array_job_id, {})
        self._ended_tasks[array_job_id] = seen
        while len(self._ended_tasks) > REMEMBERED_ARRAYS:
            del self._ended_tasks[next(iter(self._ended_tasks))]
        return seen

    def _forgotten_tasks(self, array_job_id, indexes):
        """{index: task} of the tasks of an array that slurmctld no longer shows. slurmctld forgets
        only a job that has ended (MinJobAge after its end), and keeps the array's own record, which
        holds the tasks still pending, until every other task is forgotten: a task of an array it
        still shows that it neither shows nor holds pending has ended. How: as this client saw it
        end, else from accounting (one request, only while some forgotten task's end is not known
        yet), else unknown: counted failed, with no exit code and no failure class (so no retry
        class matches it), named in the array's unknown_indexes, with a warning."""
        seen = self._seen_of(array_job_id)
        tasks = dict((index, ended_record(seen[index])) for index in indexes if index in seen)
        missing = [index for index in indexes if index not in tasks]
        if missing and self.accounting_available():
            try:
                jobs = self.call("GET", self._path("job/%s" % array_job_id, "slurmdb"), "get", "job", array_job_id,
                                 parse=self._accounting_records)
            except NotFound:
                jobs = []
            wanted = set(missing)
            for job in jobs:
                index = (job.get("array_task") or {}).get("index")
                if index in wanted and job["terminal"]:
                    # A requeued task is there once per run, the current one last.
                    seen[index] = ended_task(job)
                    tasks[index] = ended_record(seen[index])
            missing = [index for index in missing if index not in tasks]
        if missing:
            note = ("slurmctld no longer shows tasks %s of array job %s (they ended more than MinJobAge ago) and neither "
                    "Slurm accounting nor this client saw how they ended; they count as failed with an unknown outcome "
                    "(array.unknown_indexes)" % (index_text(missing), array_job_id))
            if note not in self.warnings:
                self.warnings.append(note)
            tasks.update((index, dict(UNKNOWN_END)) for index in missing)
        return tasks

    def find_many(self, identities, names=None):
        """{identity: the job carrying it}, of any age accounting keeps: the one submission of
        the credential's user whose comment names the identity (with an identity key, with its tag
        or none); AmbiguousIdentity for an identity of several (slurm/identity.py), with the
        others' answer in it.

        Accounting is searched by job name (`names`, and the identities, which are the default
        names), so a lookup costs the same with 10 or 10,000 jobs queued. Accounting holds the
        comment, where the identity is, only once a job has ended: a job it shows unfinished is
        read from slurmctld. Accounting learns of a job after slurmctld does, so what it does not
        have is looked for again: in accounting, once slurmctld says it has nothing left to send to
        slurmdbd (`_accounting_current`), which costs the same whatever the queue; else in
        slurmctld's list of every job it remembers. `lookup` says which were used.
        """
        identities = list(dict.fromkeys(identities))
        found, refused, paths, complete = {}, {}, [], False
        recorded = self._recorded(identities, names)
        if recorded is not None:
            paths.append("accounting")
            found, complete = self._verified(recorded, identities, refused)
        missing = [identity for identity in identities if identity not in found and identity not in refused]
        if missing and complete and self._accounting_current():
            # Asked after /diag: a job taken before it is in this answer.
            more, complete = self._verified(self._recorded(missing, names) or [], missing, refused)
            found.update(more)
            missing = [] if complete else [identity for identity in missing if identity not in found and identity not in refused]
        if missing:
            found.update(self._claimed(self.list(identities=missing), missing, refused))
            paths.append("live")
        self.lookup = "+".join(paths)
        return self._unless_refused(found, refused)

    def _claimed(self, jobs, identities, refused):
        """{identity: job} of `jobs` that are this user's, one submission each (slurm/identity.py);
        the identities refused join `refused`, the jobs passed over the warnings."""
        # The owner is the user the client sends (given, or the token's own). Not meta.client.user
        # of an answer: on 24.11 that names the user of the TCP connection's process (root for a
        # root curl with bridge's token), not the user the token authenticates.
        found, more, notes = claim(jobs, identities, self.user, self.identity_keys)
        for identity, (why, job_ids) in more.items():
            refused[identity] = self.error(AmbiguousIdentity, why, "look up", "identity", identity)
            refused[identity].job_ids = job_ids
        self.warnings.extend(note for note in notes if note not in self.warnings)
        return found

    @staticmethod
    def _unless_refused(found, refused):
        """`found`, or AmbiguousIdentity of the first refused identity, carrying all and `found`."""
        if not refused:
            return found
        first = refused[sorted(refused)[0]]
        first.refused, first.found = dict(refused), found
        raise first

    def _accounting_current(self):
        """Whether every job slurmctld has taken so far is in accounting now: slurmctld's queue of
        messages for slurmdbd (/diag's dbd_agent_queue_size) is empty. From 23.02 on slurmctld
        queues a job's record for slurmdbd when it takes the job, and takes it off once slurmdbd has
        stored it, so the job is in accounting by the time the queue reads empty (measured here: in
        accounting 8-30 ms after its submit on 24.11 and 26.05, before /diag could be read). 22.05
        sends a pending job's record only on a 5-second timer, while the queue reads empty (measured:
        in accounting 5.0 s after its submit, the queue empty all the while): its answer is never
        current. A slurmdbd that is down or behind keeps the queue from emptying, and so does a
        busy cluster's stream of job ends: then slurmctld's list is read, as without accounting."""
        if self.legacy or self._accounting is False:
            return False
        try:
            statistics = self.call("GET", self._path("diag/"), "get", "diag").get("statistics") or {}
        except BridgeError:
            return False
        return statistics.get("dbd_agent_queue_size") == 0

    def poll_many(self, identities):
        """{identity: job} now: slurmctld's list (one request); a job it has forgotten (MinJobAge)
        is read from accounting, where there is one."""
        refused = {}
        found = self._claimed(self.list(identities=identities), identities, refused)
        forgotten = [identity for identity in identities if identity not in found and identity not in refused]
        if forgotten:
            found.update(self._claimed(ended_of(self._recorded(forgotten, None) or [], forgotten), forgotten, refused))
        return self._unless_refused(found, refused)

    def _verified(self, recorded, identities, refused):
        """({identity: job}, complete) of accounting's jobs: ended ones by their comment, unfinished
        ones (whose comment accounting does not have yet) as slurmctld shows them, one GET each;
        with more than CURRENT_READS of those, none, and not complete (the caller's list of the
        queue finds them)."""
        ended = ended_of(recorded, identities)
        # Another user's jobs of the same name are not read: they are never this user's (claim).
        unfinished = [job for job in recorded if (not job["terminal"] or not job["identity"])
                      and (self.user is None or job.get("user") == self.user)]
        current = []
        complete = len(unfinished) <= CURRENT_READS
        if complete:
            for job in unfinished:
                try:
                    current.append(self._live_job(job["job_id"]))
                except NotFound:
                    pass  # forgotten since: accounting's record is all there is
        return self._claimed(ended + current, identities, refused), complete

    # -- accounting (slurmdbd)

    def _recorded(self, identities, names):
        """Accounting's jobs submitted in the last LOOKUP_WINDOW_DAYS under the names these
        identities' jobs may have, or None where slurmrestd serves no accounting."""
        searchable = sorted(set(name for name in list(names or []) + list(identities) if name and NAME_SEARCHABLE.match(name)))
        if self._accounting is False or not searchable:
            return None
        now = time.time()
        since = now - LOOKUP_WINDOW_DAYS * 86400
        # Only the user's own jobs can be Bridge's (claim); 22.05 takes no user filter (history),
        # so there claim alone sorts them out.
        users = [self.user] if self.user else None

        def ask():
            jobs = []
            for first in range(0, len(searchable), NAMES_PER_QUERY):
                jobs += self.history(submitted_after=since, names=searchable[first:first + NAMES_PER_QUERY], users=users,
                                     now=now, steps=False)
            return jobs

        jobs = self._first_answer(ask)
        if jobs is None:
            return None
        bare = [job["job_id"] for job in jobs if job["terminal"] and not job_comment(job["native"])
                and (self.user is None or job.get("user") == self.user)]
        if bare:
            note = ("Slurm accounting shows ended job %s without a comment; if Bridge submitted it, accounting does not "
                    "keep job comments, where Bridge keeps a job's identity: set AccountingStoreFlags=job_comment in "
                    "slurm.conf" % bare[0])
            if note not in self.warnings:
                self.warnings.append(note)
        return jobs

    def accounting_available(self):
        """Whether slurmrestd answers /slurmdb (slurmdbd and its plugin); asked once per client."""
        if self._accounting is None:
            now = time.time()
            self._first_answer(lambda: self.history(submitted_after=now, names=[PROBE_NAME], now=now, steps=False))
        return self._accounting

    def _first_answer(self, ask):
        """ask()'s answer from accounting; None when the first question finds none there: slurmrestd
        has no /slurmdb paths (404) or slurmdbd does not answer, and the client knows it from then
        on. Credentials and the connection fail as they would for slurmctld."""
        try:
            return ask()
        except (AuthFailed, ConnectionFailed, Timeout):
            raise
        except BridgeError as exc:
            if self._accounting is not None:
                raise
            self._accounting = False
            if not isinstance(exc, NotFound):
                self.warnings.append("Slurm accounting did not answer (%s); Bridge read slurmctld's queue instead"
                                     % exc.reason)
            return None

    def history(self, start=None, end=None, submitted_after=None, names=None, users=None, accounts=None, partitions=None,
                now=None, steps=True):
        """Jobs from accounting, normalized: those eligible, running or ended between the epochs
        `start` and `end` (now when None), as sacct selects them, or those submitted after
        `submitted_after` (any state, held and pending ones too). `now` is the epoch the times
        were computed from (they travel relative to it)."""
        if self.legacy:
            # 22.05's dbv0.0.38 refuses the users filter ("Unknown Query field"); callers that
            # asked for it select by user themselves.
            users = None
        params = query(start=start, end=end, submitted_after=submitted_after, names=names, users=users,
                       accounts=accounts, partitions=partitions, now=now, steps=steps)
        jobs = self.call("GET", self._path("jobs/", "slurmdb"), "list", "accounting jobs", params=params,
                         parse=self._accounting_jobs)
        self._accounting = True
        return jobs

    def recorded_job(self, job_id, whole=True):
        """One job from accounting by id, of any age (an array as one job, also by the id of one of its
        tasks, with `whole`); NotFound when accounting has none."""
        jobs = self.call("GET", self._path("job/%s" % job_id, "slurmdb"), "get", "job", job_id, parse=self._accounting_jobs)
        self._accounting = True
        # A requeued job is there once per run; the last is the current one.
        matching = [job for job in jobs if job["job_id"] == str(job_id)]
        if matching:
            return matching[-1]
        arrays = [job for job in jobs if "array" in job]
        if arrays and whole:
            # The id of one task: Bridge's job is the whole array.
            return self.recorded_job(arrays[-1]["job_id"], whole=False)
        raise self.error(NotFound, "Slurm accounting has no job %s" % job_id, "get", "job", job_id)

    def _accounting_records(self, body):
        """Accounting's records of jobs and array tasks, each normalized on its own."""
        return [normalize_accounting_job(job, self.api_version) for job in items(body, "jobs", required=True)]

    def _accounting_jobs(self, body):
        """Accounting's jobs, the records of an array folded into one job."""
        return fold(self._accounting_records(body))

    def cancel(self, job_id, signal=None):
        """Signal a job (SIGKILL unless `signal`); cancelling a finished job is a no-op."""
        if self.user and self.user not in PRIVILEGED_USERS and not self.legacy:
            # slurmctld 24.11 and 26.05 hang (every later request times out) after refusing to
            # signal another user's job over REST, so that request is never sent.
            owner = self.get(job_id)["user"]
            if owner and owner != self.user:
                raise self.error(Rejected, "the job belongs to '%s', not '%s'; Slurm refuses to cancel another user's "
                                 "job (and some slurmctld releases hang on that request), so Bridge did not send it" % (
                                     owner, self.user), "cancel", "job", job_id)
        params = {"signal": signal} if signal else None
        refusals = self.call("DELETE", self._path("job/%s" % job_id), "cancel", "job", job_id, params=params,
                             parse=_refusals)
        # v0.0.42+ report per-job failures inside status[] with HTTP 200.
        for code, message in refusals:
            if code == INVALID_JOB_ID:
                raise self.error(NotFound, message or "no such job", "cancel", "job", job_id)
            raise self.error(Rejected, message or "signal refused", "cancel", "job", job_id)

    def output_refusal(self, spec):
        if self.login is None:
            return ("slurmrestd does not serve a job's output; give the option login (an SSH login node that "
                    "sees the job's files, as the user the job runs as) to read its stdout file there")
        return None

    def read_output(self, job, tail_lines):
        """The end of the job's stdout file (Slurm's filename patterns expanded) on the login node:
        one ssh command reading at most OUTPUT_READ_BYTES."""
        if self.login is None:
            raise self.error(Unsupported, self.output_refusal({}), "read output of", "job", job["job_id"])
        path = slurm_output_paths(output_task(job))["stdout"]
        return self.login.read_end(path, OUTPUT_READ_BYTES)

    def partitions(self):
        return self.call("GET", self._path("partitions/"), "list", "partitions",
                         parse=lambda body: [normalize_partition(p) for p in items(body, "partitions", required=True)])

    def nodes(self):
        return self.call("GET", self._path("nodes/"), "list", "nodes",
                         parse=lambda body: [normalize_node(n) for n in items(body, "nodes", required=True)])

    def inventory(self):
        return {"partitions": self.partitions(), "nodes": self.nodes(), "api_version": self.api_version,
                "cluster": self.cluster}

    def capacity(self):
        """Each partition's capacity record: three requests (partitions, nodes, and slurmctld's job
        list for the pending and running counts) whatever the number of jobs, after the version
        discovery of a client's first request when api_version is not set (one ping per version
        tried, newest first).

        The list is GET jobs/: the lighter GET jobs/state/ (v0.0.40 on) names no job's partition,
        so it cannot count per partition. An array counts as slurmctld lists it: each task that
        started, and one record for the tasks still pending."""
        partitions, nodes, jobs = self.partitions(), self.nodes(), self._queue()
        return {"manager": MANAGER, "version": self.release, "api_version": self.api_version,
                "queues": queue_records(partitions, nodes, jobs)}

    def check(self, spec):
        # Partitions and nodes are read once per client: a batch of jobs is checked against one view.
        if self._topology is None:
            self._topology = (self.partitions(), self.nodes())
        check_fits(spec, *self._topology)
        if spec.get("array"):
            self._check_array(spec["array"])

    def _check_array(self, array):
        """SpecError on array.indexes when an index is not below MaxArraySize, where slurmrestd
        serves slurm.conf (GET conf, v0.0.45 on); elsewhere slurmctld refuses such a submit itself."""
        if self._max_array_size is False:
            if KNOWN_VERSIONS.index(self.api_version) > KNOWN_VERSIONS.index(CONF_SINCE):
                self._max_array_size = None
            else:
                try:
                    limit = self.call("GET", self._path("conf"), "read", "configuration", missing=None,
                                      parse=lambda body: at_path(body, "slurm_conf", "MaxArraySize"))
                except Rejected:
                    limit = None  # not for this user to read: slurmctld checks the submit itself
                self._max_array_size = number(limit)
        limit = self._max_array_size
        if limit is not None and array["indexes"][-1] >= limit:
            raise SpecError("array.indexes", "index %d is too high for %s: its MaxArraySize is %d, so indexes run from 0 "
                            "to %d" % (array["indexes"][-1], self.cluster or self.url, limit, limit - 1))


def _endpoint(response):
    try:
        return "%s %s" % (response.request.method, response.request.url.path)
    except RuntimeError:  # a response built by hand (unit tests) has no request
        return "the request"


def _jobs(body):
    return [normalize_job(job) for job in items(body, "jobs", required=True)]


def _pings(body):
    """The pings of a ping answer; a body without them is not slurmrestd's."""
    if not isinstance(body, dict) or not isinstance(body.get("pings"), list):
        raise ShapeError("no 'pings' list, so not a slurmrestd ping answer")
    return items(body, "pings")


def _notes(body):
    """(warnings, errors) of an answer: lists in every version."""
    notes = []
    for key in ("warnings", "errors"):
        value = body.get(key)
        if value is not None and not isinstance(value, list):
            raise ShapeError("'%s' must be a list, got %s" % (key, type(value).__name__))
        notes.append(value or [])
    return tuple(notes)


def _submitted_id(body):
    job_id = body.get("job_id")
    if job_id is None and isinstance(body.get("result"), dict):
        job_id = body["result"].get("job_id")
    if isinstance(job_id, bool) or not isinstance(job_id, (int, str)):
        raise ShapeError("job_id must be a number, got %s" % type(job_id).__name__)
    return text(job_id)


def _refusals(body):
    """(error code, message) of each signal slurmctld refused, an already finished job excepted."""
    refusals = []
    for item in items(body or {}, "status"):
        error = item.get("error") or {}
        if error.get("code") and error.get("code") != ALREADY_DONE:
            refusals.append((error.get("code"), error.get("message") or error.get("string")))
    return refusals


def _error_text(item):
    """The text of an entry of Slurm's errors[] or warnings[]: its strings; of an entry of another
    shape nothing, since it is not Slurm's."""
    if not isinstance(item, dict):
        return ""
    seen = []
    for part in (item.get("description"), item.get("error"), item.get("warning")):
        if isinstance(part, str) and part and part not in seen:
            seen.append(part)
    return ": ".join(seen)


def _error_number(item):
    if not isinstance(item, dict):
        return None
    value = item.get("error_number", item.get("error_code", item.get("errno")))
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _named_release(body):
    """The release an answer's meta names, or None: it only labels capacity(), so a meta of
    another shape is no error."""
    try:
        release = _release(body)
    except (AttributeError, TypeError):
        return None
    return release if isinstance(release, str) and release else None


def _release(body):
    meta = body.get("meta") or {}
    slurm = meta.get("slurm") or meta.get("Slurm") or {}
    if slurm.get("release"):
        return slurm["release"]
    version = slurm.get("version") or {}
    if version:
        return "%s.%s.%s" % (version.get("major"), version.get("minor"), version.get("micro"))
    return None


def output_task(job):
    """The job whose output file an array's output is: its first failed task, else its first task,
    as a task record (array_job_id, array_task_id) so that %A, %a and the default slurm-%A_%a.out
    expand to that task's file. A %j in an array's stdout is a task's own job id, which the folded
    record does not hold: such a path names the array's id."""
    array = job.get("array")
    if not array:
        return job
    failures = array.get("failures") or []
    index = failures[0]["index"] if failures else int(array["indexes"].split(",")[0].split("-")[0])
    native = dict(job.get("native") or {}, array_job_id=job["job_id"], array_task_id=index)
    return dict(job, native=native)
