# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""IBM Spectrum LSF client for Bridge, over LSF Application Center (PAC) RESTful web services.

`url` is the Application Center's context root, e.g. http://pac:8080/platform; every call goes to
<url>/ws/... . PAC's quirks live in this package: a logon that trades user and password for a
token whose double quotes travel as the literal `#quote#` in a `platform_token` cookie, XML
answers unless JSON is asked for (and XML errors even then), JSON that mirrors the XML with one
record as an object and several as a list, jobs submitted through the `generic` application
template as a nested multipart/mixed body, and short (PEND) or long (Pending) state names.

Protocol facts and their sources: docs/lsf.md and the shared external-apis.md section 2.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import json
import re
import time
from xml.sax.saxutils import escape

try:
    from urllib.parse import quote
except ImportError:  # Python 2, where ansible-test's compile test still looks
    from urllib import quote

from ansible_collections.bridge.hpc.plugins.module_utils._backend import (
    Backend,
    ShapeError,
    compilable,
    newest_by_identity,
    select,
)
from ansible_collections.bridge.hpc.plugins.module_utils._errors import (
    AuthFailed,
    ConnectionFailed,
    NotFound,
    Rejected,
    ServerError,
    SpecError,
    Timeout,
    Unsupported,
)
from ansible_collections.bridge.hpc.plugins.module_utils._job_output import lsf_output_paths
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.answers import (
    error_text,
    parse_answer,
    records,
    text_of,
    unwrap,
)
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.compile import compile_job, job_slots, multipart_body
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.fit import check_fits, normalize_host, normalize_queue, queue_records
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.states import NEVER_STARTS as HOPELESS_DOC, element_of, fold_arrays, normalize_job


MANAGER = "LSF"
# The scheme and host of a URL, before the Application Center's context root.
CONTEXT_ROOT = re.compile(r"^[a-z]+://[^/]*", re.IGNORECASE)
QUOTE = "#quote#"
# What pacclient accepts from its file download: the file's bytes, or an XML message.
DOWNLOAD_ACCEPT = "text/plain,application/xml,text/xml,application/octet-stream"
COOKIE = "platform_token"
# The lookup before a submit asks for the jobs of each name they may carry, a request each. Up to
# this many names: a spec's own, with its aliases and a dozen retry attempts, whatever the queue; a
# jobs batch of more shares one list of the user's jobs (docs/lsf.md, "Identity lookup").
NAMES_ASKED_AT_MOST = 16


class LsfClient(Backend):
    """Domain verbs over LSF Application Center's RESTful web services."""

    NAME = "lsf"
    TITLE = MANAGER
    NEVER_STARTS = HOPELESS_DOC
    URL_NAME = "the LSF Application Center URL"
    CONNECTION = dict(user=dict(type="str"), password=dict(type="str"))
    ENV = dict(url=("LSF_PAC_URL",), user=("LSF_USER",), password=("LSF_PASSWORD",))
    CREDENTIALS = ("user", "password")
    SECRETS = ("password",)
    CAPABILITIES = frozenset(["preflight"])

    @classmethod
    def from_options(cls, get):
        return cls(cls.require_url(get("url")), user=get("user"), password=get("password"),
                   **cls.transport_options(get))

    def __init__(self, url, user=None, password=None, validate_certs=True, ca_path=None, timeout=30.0, retries=3,
                 transport=None, clock=time.time):
        self.url = url.rstrip("/")
        self.user = user
        self.password = password
        self.transport = transport or Transport(
            self.url, MANAGER, headers={"Accept": "application/json"}, secrets=[password],
            validate_certs=validate_certs, ca_path=ca_path, timeout=timeout, retries=retries)
        if password and password not in self.transport.secrets:
            self.transport.secrets.append(password)
        self.clock = clock
        self.warnings = []
        self._cookie = None
        self._expires = None
        self._queues = None
        self._hosts = None

    # -- plumbing

    def logon(self):
        """Trade user and password for a token: POST /ws/logon, XML body, JSON or XML answer."""
        if not self.user or not self.password:
            missing = " and ".join(name for name, value in (("user", self.user), ("password", self.password))
                                   if not value)
            raise self.error(AuthFailed, "%s required: Application Center at %s takes a user name and password" % (
                missing + (" are" if " and " in missing else " is"), self.url))
        body = "<User><name>%s</name><pass>%s</pass></User>" % (escape(self.user), escape(self.password))
        response = self.transport.request("POST", "/ws/logon", content=body.encode("utf-8"),
                                          headers={"Content-Type": "application/xml"}, idempotent=True,
                                          verb="log on", obj="user", ident=self.user)
        if response.status_code in (400, 401, 403):
            raise self.error(AuthFailed, "authentication failed: %s" % self._reason(response), "log on", "user",
                             self.user, response.status_code)
        if response.status_code >= 400:
            self.refuse(response, "log on", "user", self.user)
        endpoint = self.endpoint("POST", "/ws/logon")
        token = self.decoded(_token, self.answer(response, endpoint, "log on", "user", self.user), endpoint, "log on",
                             "user", self.user)
        # Only Application Center trades a user and password for a token: its later answers are PAC's.
        self.transport.vouched = True
        # The token is user"expiry"signature...; PAC wants every " as the literal #quote#.
        self.transport.secrets.extend([token, token.replace('"', QUOTE)])
        self._cookie = "%s=%s" % (COOKIE, token.replace('"', QUOTE))
        self._expires = token_expiry(token)
        return token

    def endpoint(self, method, path):
        """The request as sent, under the context root: "GET /platform/ws/jobs/101"."""
        return "%s %s%s" % (method, CONTEXT_ROOT.sub("", self.url), path)

    def credentials(self):
        """The session's cookie; logs on first, and again once its token has expired."""
        if self._cookie is None or (self._expires and self.clock() >= self._expires):
            self.logon()
        return {"Cookie": self._cookie}

    def renew(self, response):
        """PAC refuses an expired or revoked token with 401 or 403: log on again."""
        if response.status_code in (401, 403):
            self._cookie = None
            return True
        return False

    def answer(self, response, endpoint, verb, obj, ident):
        """The body of a successful answer, XML or JSON, as parse_answer reads it."""
        answer = self.decoded(parse_answer, response.text, endpoint, verb, obj, ident)
        root, value = unwrap(answer)
        if root in ("error", "errMsg"):
            # PAC may answer a refusal with 200 and an XML error body.
            raise self.error(Rejected, self.reason(error_text(answer), None) or "refused with an error answer",
                             verb, obj, ident, response.status_code)
        return value

    def _reason(self, response):
        """PAC's message in an error answer (<error>, legacy <errMsg>, or a JSON object) as
        manager_reason lets it be said: only once the server has answered a logon as PAC."""
        try:
            answer = parse_answer(response.text)
        except ValueError:
            answer = None
        root, value = unwrap(answer)
        message = None
        if root in ("error", "errMsg") or (root is None and isinstance(value, dict)):
            message = error_text(answer)
        return self.reason(message, response.status_code)

    def refuse(self, response, verb, obj, ident):
        status = response.status_code
        reason = self._reason(response)
        if status in (401, 403) and re.search(r"token|log ?on|login|authenticat|session", reason, re.IGNORECASE):
            raise self.error(AuthFailed, "authentication failed: %s" % reason, verb, obj, ident, status)
        raise self.status_error(status, reason, verb, obj, ident)

    # -- domain verbs

    def describe(self):
        """Logs on: only Application Center answers a logon with a token."""
        self.logon()
        return {"manager": MANAGER, "url": self.url, "version": None, "api_version": None, "user": self.user}

    @classmethod
    def launcher(cls, spec):
        """blaunch for more than one task; nothing for one, which the job script itself is.

        Without host names blaunch starts one task per job slot on the allocated hosts, and a task
        of cpus_per_task CPUs holds that many slots (job_slots), so that count cannot launch one task
        per slot."""
        resources = spec["resources"]
        slots, _span = job_slots(resources)
        cpus = resources["cpus_per_task"] or 1
        if not slots or slots == cpus:
            return ""
        if cpus > 1:
            raise SpecError("resources.cpus_per_task", "$(LAUNCHER) is blaunch, which starts one task per job slot, "
                            "and LSF gives a task of %d CPUs %d slots; launch several multi-CPU tasks yourself "
                            "(mpirun, or blaunch -z with a host list), or ask for 1 CPU per task" % (cpus, cpus))
        return "blaunch"

    def render(self, spec):
        return compile_job(compilable(self, spec))

    def submit(self, spec):
        """POST the job once through the generic template; never retried. If no answer arrives,
        look the identity up before giving up."""
        content_type, body = multipart_body(self.render(spec))
        try:
            return self.call("POST", "/ws/jobs/submit", "submit", "job", spec["name"], parse=_submitted_id,
                             content=body, headers={"Content-Type": content_type}, idempotent=False)
        except (ConnectionFailed, Timeout) as lost:
            return self.found_after_lost_submit(spec, lost)

    def get(self, job_id):
        """One job; an array (its id without an index) as one record of all its elements, an element
        ("1234[3]") as itself."""
        jobs = self.call("GET", "/ws/jobs/%s" % job_id, "get", "job", job_id, parse=_jobs)
        if element_of(job_id) is None:
            jobs = fold_arrays(jobs)
        if not jobs:
            raise self.error(NotFound, "no such job", "get", "job", job_id)
        return jobs[0]

    def list(self, identities=None, name=None, phases=None):
        """The caller's jobs, finished ones within LSF's CLEAN_PERIOD included, in detail (the
        description carries the identity); PAC answers 404 when there are none. An array's elements are
        folded into one record of the array: one request, whatever the number of elements."""
        jobs = fold_arrays(self.call("GET", "/ws/jobs/fullinfo", "list", "jobs", parse=_jobs, missing=[]))
        return select(jobs, identities, name, phases)

    def find_many(self, identities, names=None):
        """{identity: newest job carrying it}, of the jobs LSF keeps (finished ones within CLEAN_PERIOD).

        With `names` (the lookup before a submit), only the jobs that may carry an identity are read:
        those of each name, and of each identity (the name a job defaults to), by name (GET
        /ws/jobs?jobname=, one request a name, 404 when none has it), then the ones found in detail by
        id (POST /ws/jobs/getfullinfo), since only the detail has the description that carries the
        identity. So the lookup sends and reads as much with 10 as with 10,000 jobs queued. Without
        names (a poll, a cancel, a lookup by identity alone, which cannot know what name a job was
        given), or with more than NAMES_ASKED_AT_MOST of them, the user's jobs are read in one list.
        """
        identities = list(dict.fromkeys(identities))
        searched = list(dict.fromkeys([name for name in names or () if name] + identities))
        if names is None or len(searched) > NAMES_ASKED_AT_MOST:
            return newest_by_identity(self.list(identities=identities), self.warnings)
        ids = []
        for name in searched:
            # The user's jobs of any state by default, recently finished ones included (IBM: "Get
            # basic job information (GET)"); basic records, which carry no description.
            for job in self.call("GET", "/ws/jobs", "find", "jobs named", name, params={"jobname": name}, parse=_jobs,
                                 missing=[]):
                element = element_of(job["job_id"])
                ids.append(element[0] if element else job["job_id"])
        if not ids:
            return {}
        ids = ",".join(dict.fromkeys(ids))
        # By an array's id, every element (as GET /ws/jobs/<id> answers for get).
        jobs = self.call("POST", "/ws/jobs/getfullinfo", "find", "jobs", ids, parse=_jobs, missing=[],
                         content=("ids=%s" % ids).encode(), idempotent=True,
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
        return newest_by_identity(select(fold_arrays(jobs), identities), self.warnings)

    def cancel(self, job_id):
        """Kill a job: POST /ws/jobs/kill (form ids=); where that endpoint is not served (404, 405
        or 501 without a "no such job" message), bkill through POST /ws/userCmd. A finished job
        stays as it is."""
        try:
            try:
                message = self.call("POST", "/ws/jobs/kill", "cancel", "job", job_id, parse=_message,
                                    content=("ids=%s" % job_id).encode(), idempotent=True,
                                    headers={"Content-Type": "application/x-www-form-urlencoded"})
            except (NotFound, ServerError) as exc:
                if exc.status not in (404, 405, 501) or _BKILL_NO_JOB.search(exc.reason):
                    raise
                command = "<UserCmd><cmd>bkill %s</cmd></UserCmd>" % escape(job_id)
                message = self.call("POST", "/ws/userCmd", "cancel", "job", job_id, parse=_message,
                                    content=command.encode(), headers={"Content-Type": "application/xml"},
                                    idempotent=True)
        except (Rejected, ServerError) as exc:
            # Some refusals of a kill only say the job has finished, which is what cancel wants.
            if _BKILL_FINISHED.search(exc.reason):
                return
            raise
        if message and _BKILL_NO_JOB.search(message):
            raise self.error(NotFound, self.reason(message, None) or "no such job", "cancel", "job", job_id)

    def download(self, job_id, path):
        """The bytes of a file of a job, as `pacclient download` fetches them: GET
        /webservice/pacclient/file/<job id> with the file's path as a text/plain body (pacclient.py's
        downloadFile). PAC answers an empty body for a file that does not exist or that the user may
        not read (pacclient then says "you have no permission or the specified file does not exist"),
        as for an empty file: all three are b"". An <errMsg> answer is the refusal it says."""
        content_type, data = self.call(
            "GET", "/webservice/pacclient/file/%s" % quote(str(job_id), safe="[]"), "download", "file", path,
            content=path.encode("utf-8"), headers={"Content-Type": "text/plain", "Accept": DOWNLOAD_ACCEPT},
            read=lambda response: (response.headers.get("content-type") or "", response.content))
        if "xml" in content_type.lower():
            try:
                answer = parse_answer(data.decode("utf-8", "replace"))
                root, _value = unwrap(answer)
            except ValueError:
                root = None
            if root in ("errMsg", "error"):
                raise self.error(Rejected, self.reason(error_text(answer), None) or "refused with an error answer",
                                 "download", "file", path)
        return data

    def output_refusal(self, spec):
        if not spec.get("stdout"):
            return ("LSF keeps a job's output only in its stdout file (bsub -o) and mails it otherwise; set stdout "
                    "so that Application Center can serve the file")
        return None

    def read_output(self, job, tail_lines):
        """The job's stdout file (%J and %I expanded, relative to its cwd) through Application
        Center's file download: one request, the whole file."""
        path = lsf_output_paths(job)["stdout"]
        if not path:
            raise self.error(Unsupported, "the job has no stdout file (bsub -o), so LSF mailed its output",
                             "read output of", "job", job["job_id"])
        return self.download(job["job_id"], path), False

    def queues(self):
        return self.call("GET", "/ws/queues", "list", "queues",
                         parse=lambda body: [normalize_queue(q) for q in records(body, "queue", "queues")])

    def hosts(self):
        return self.call("GET", "/ws/hosts", "list", "hosts",
                         parse=lambda body: [normalize_host(h) for h in records(body, "host", "hosts")])

    def inventory(self):
        return {"queues": self.queues(), "hosts": self.hosts()}

    def capacity(self):
        """Each queue's capacity record: two requests (queues, with their pending and running
        counts, and hosts), after a logon when the session has no valid token. A site that does
        not let its users list hosts gets records without the hosts' sizes."""
        queues = self.queues()
        try:
            hosts = self.hosts()
        except (NotFound, Rejected):
            hosts = []
        return {"manager": MANAGER, "version": None, "api_version": None, "queues": queue_records(queues, hosts)}

    def check(self, spec):
        # Queues and hosts are read once per client: a batch of jobs is checked against one view.
        if self._queues is None:
            self._queues = self.queues()
        if self._hosts is None:
            try:
                self._hosts = self.hosts()
            except (NotFound, Rejected):
                # A site may not let users list hosts; the queues still say enough to check.
                self._hosts = []
        check_fits(spec, self._queues, self._hosts)


# bkill's (and PAC's) words for a job id LSF does not know; "Not Found" alone is the HTTP reason
# phrase of an endpoint that is not there.
_BKILL_NO_JOB = re.compile(r"no matching job|job <?\d+(\[\d+\])?>?:? (is )?not found|no such job", re.IGNORECASE)
_BKILL_FINISHED = re.compile(r"already finished", re.IGNORECASE)


def token_expiry(token):
    """Epoch of the expiry a token carries between its first two double quotes, or None."""
    match = re.match(r'^[^"]*"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"', token)
    if not match:
        return None
    return calendar.timegm(time.strptime(match.group(1), "%Y-%m-%dT%H:%M:%SZ"))


def _token(body):
    if not isinstance(body, dict) or not isinstance(body.get("token"), str) or not body["token"]:
        raise ShapeError("no 'token' string, so not Application Center's logon answer")
    return body["token"]


def _submitted_id(body):
    """The new job's id: JSON {"id": 1234}, XML <Job><id>1234</id></Job>, or a bare <id>."""
    if isinstance(body, dict):
        job_id = body.get("id", body.get("jobId"))
        if job_id is None and error_text(body):
            raise ShapeError("no job id but a message")
    else:
        job_id = body
    text = text_of(job_id)
    if text is None or not re.match(r"^\d+(\[\d+\])?$", text):
        raise ShapeError("the job id must be a number")
    return text


def _jobs(body):
    return [normalize_job(job) for job in records(body, "job", "jobs")]


def _message(body):
    """The text of an action's answer: <cmdMsg>, <actionMsg>, a JSON message, or nothing."""
    if body is None or isinstance(body, str):
        return body
    if not isinstance(body, dict):
        raise ShapeError("expected an object or a text, got %s" % type(body).__name__)
    for key in ("cmdMsg", "actionMsg", "message", "msg"):
        if isinstance(body.get(key), str):
            return body[key]
    return json.dumps(body, sort_keys=True)[:500]
