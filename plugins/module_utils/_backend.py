# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The backend contract: what every resource manager client is and does. Internal to this collection.

A backend is a class that says what it is (its name, connection options and their environment
variables, the credential keys it needs, its capabilities) and implements the verbs every backend
has. Modules, inventory plugins and the BridgeJob controller talk to this contract only; the one
registry of backends is `_registry.BACKENDS`. Modelled on community.hashi_vault's auth methods: a
base class whose verbs raise until a backend implements them.

Normalized jobs have the keys of JOB_KEYS; job ids are strings everywhere (Slurm's integers,
Ray's submission ids and the string ids of other managers alike).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import re
from http.client import responses as STATUS_PHRASES

from ansible_collections.bridge.hpc.plugins.module_utils._errors import (
    MalformedResponse,
    SpecError,
    Unsupported,
    error_for_status,
)
from ansible_collections.bridge.hpc.plugins.module_utils._output import clean, tail
from ansible_collections.bridge.hpc.plugins.module_utils._spec import refuse_unsupported, require_program
from ansible_collections.bridge.hpc.plugins.module_utils._urls import parse_url

# Every normalized job has at least these keys; backends may add their own (partition, nodes, ...).
JOB_KEYS = ("job_id", "name", "identity", "phase", "terminal", "native_state", "reason", "exit_code",
            "signal", "failure_class", "submit_time", "start_time", "end_time", "native")
PHASES = ("queued", "running", "completed", "failed", "cancelled")
TERMINAL_PHASES = ("completed", "failed", "cancelled")
FAILURE_CLASSES = ("timeout", "out_of_memory", "node_failure", "cancelled", "non_zero_exit", "rejected", "preempted")

# One place a job can be sent, as capacity() and the inventory plugins' bridge_capacity give it (a
# Slurm partition, an LSF queue, a Kueue LocalQueue, an IBM Quantum device; the whole cluster, named
# None, where the manager has no queue to choose). Every key is present; None is unknown or unlimited.
QUEUE_KEYS = ("name", "state", "usable", "default", "max_time_minutes", "max_nodes", "cpus_per_node",
              "memory_mb_per_node", "gpus_per_node", "gpu_types", "features", "qubits", "pending", "running")

# What a backend may declare it can do, beyond the verbs every backend has. Which job spec fields
# a backend honours is not a capability: the field table (_fields.py) says it, field by field.
CAPABILITY_DOCS = {
    "api_versions": "speaks several versions of its manager's API and discovers which one is served",
    "signal": "cancels with a chosen signal",
    "logs": "returns a job's output through its API (the logs verb)",
    "token_auth": "authenticates with a bearer token (JWT or API token)",
    "preflight": "checks a spec against the live service before submitting (the check verb)",
}

# Where a job script's parallel command starts: each backend replaces it with the launcher of the
# spec's tasks and nodes (Backend.launcher), in render(), so `rendered` shows what is submitted.
LAUNCHER_TOKEN = "$(LAUNCHER)"
# A launcher of nothing takes the blanks after the token with it: "$(LAUNCHER) ./a.out" -> "./a.out".
_NO_LAUNCHER = re.compile(re.escape(LAUNCHER_TOKEN) + r"[ \t]*")

# What `missing` of Backend.call is when a 404 is an error like any other.
REFUSE = object()

# The options every backend's connection has; a backend adds its own in CONNECTION.
COMMON_CONNECTION = dict(
    url=dict(type="str"),
    validate_certs=dict(type="bool", default=True),
    ca_path=dict(type="path"),
    timeout=dict(type="float", default=30.0),
    retries=dict(type="int", default=3),
)


# What a parser of an answer raises when the answer has another shape than the API's.
SHAPE_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError)

# Whoever may create a BridgeJob chooses its backend URL and reads the errors in its status, so a
# URL pointing at an internal service must not read that service's answers back to them: messages
# about an answer say what it was (a media type, a size, a missing field), never what it said.
# A media type as servers write it ("text/html"); any other Content-Type value is not repeated.
_MEDIA_TYPE = re.compile(r"^[\w.+-]{1,64}/[\w.+-]{1,64}$")
# What a message repeats of a manager's own words at most (manager_reason).
REASON_LENGTH = 500
# A field name as our parsers write them; a KeyError of anything else names no key.
_FIELD_NAME = re.compile(r"^[A-Za-z_@][\w@.-]{0,63}$")


def queue_record(**values):
    """A capacity record of one queue with every key of QUEUE_KEYS: None where `values` has none,
    except usable and default (False) and gpu_types and features ([])."""
    unknown = sorted(set(values) - set(QUEUE_KEYS))
    if unknown:
        raise KeyError(unknown[0])
    record = dict((key, None) for key in QUEUE_KEYS)
    record.update(usable=False, default=False, gpu_types=[], features=[])
    record.update(values)
    return record


def count_phases(jobs, queue_of):
    """{queue name: {"pending": n, "running": n}} of normalized jobs; queue_of(job) gives the names
    of the queues a job waits or runs in ([None] on a manager without queues)."""
    counts = {}
    for job in jobs:
        key = {"queued": "pending", "running": "running"}.get(job.get("phase"))
        if key is None:
            continue
        for name in queue_of(job):
            counts.setdefault(name, {"pending": 0, "running": 0})[key] += 1
    return counts


class ShapeError(ValueError):
    """An answer of another shape than the API's, said in our own words: its message names fields
    and types, never a value taken from the answer, so decode shows it (other exceptions of a
    parser are named by their type only, as int('x')'s ValueError quotes the answer)."""


def answer_summary(content_type, content):
    """An answer for a message, by its media type and size only: "text/html (1,234 bytes)"."""
    if not (content or b"").strip():
        return "an empty body"
    kind = (content_type or "").split(";")[0].strip().lower()
    if not _MEDIA_TYPE.match(kind):
        kind = "an unnamed content type" if kind else "no content type"
    return "%s (%s bytes)" % (kind, "{:,}".format(len(content)))


def not_json(content_type, content):
    """What came instead of JSON, for a message: "text/html (1,234 bytes) that is not JSON"."""
    summary = answer_summary(content_type, content)
    return summary if summary == "an empty body" else summary + " that is not JSON"


def status_phrase(status):
    """The standard text of an HTTP status ("Not Found"), for an error answer whose body is not the
    manager's: the reason phrase on a status line is the server's to choose, like its body."""
    return STATUS_PHRASES.get(status) or "no reason given"


def manager_reason(words, status, scrub, vouched):
    """The reason a message gives for an error answer: the one answer policy of every client.

    The manager's own words (`words`, the text its client read from its API's error format) are
    said only when the server has shown that it is that API (`vouched`: it answered this client
    with what only that API sends, Transport.vouched, or the error answer itself carries such a
    mark), and then scrubbed (`scrub`, the client's: every secret in every encoding), on one line
    without control characters, and at most REASON_LENGTH characters. Otherwise the standard
    phrase of `status` stands for them, or None without a status (a warning is then left out):
    the body of any other server may be any page of a URL that a tenant chose.
    """
    if vouched and isinstance(words, str):
        # Scrubbed again once cleaned: a secret echoed with a control character inside is whole now.
        text = scrub(" ".join(clean(scrub(words)).split()))
        if text:
            return text[:REASON_LENGTH]
    return None if status is None else status_phrase(status)


def json_of(response, endpoint, manager, url, verb, obj, ident=None):
    """The JSON of a response, or MalformedResponse saying what came instead (an HTML page of a
    proxy, an empty or truncated body) by its content type and size."""
    try:
        return response.json()
    except ValueError:
        what = not_json(response.headers.get("content-type"), response.content)
        raise MalformedResponse("%s answered %s; is %s the %s API?" % (endpoint, what, url, manager),
                                verb, obj, ident, manager, url, response.status_code)


def decode(parse, body, endpoint, manager, url, verb, obj, ident=None):
    """parse(body), where an answer of another shape becomes MalformedResponse naming the endpoint."""
    try:
        return parse(body)
    except SHAPE_ERRORS as exc:
        raise MalformedResponse("%s answered with an unexpected shape (%s); is %s the %s API?" % (
            endpoint, shape_reason(exc, body), url, manager), verb, obj, ident, manager, url)


def shape_reason(exc, body):
    """What a parser's exception says that is ours: a ShapeError's message, the key a KeyError
    misses, else only the exception's type.

    A missing key is named when it is a field name that occurs nowhere in the answer: a key our
    code wrote, not one a lookup took from the answer (STATES[answer["state"]])."""
    if isinstance(exc, ShapeError):
        return str(exc)
    key = exc.args[0] if isinstance(exc, KeyError) and len(exc.args) == 1 else None
    if isinstance(key, str) and _FIELD_NAME.match(key):
        text = _answer_text(body)
        if text is not None and key.lower() not in text.lower():
            return "no '%s'" % key
    return type(exc).__name__


def _answer_text(body):
    """The answer as text, to search; None when it cannot be rendered (then nothing is named)."""
    if hasattr(body, "status_code"):
        body = body.text  # a parser that takes the whole response (Quantum's _no_body)
    if isinstance(body, bytes):
        return body.decode("utf-8", "replace")
    if isinstance(body, str):
        return body
    try:
        return json.dumps(body, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return None


def items(body, key, required=False):
    """body[key] as a list: [] when null (or absent, unless `required`), ShapeError when it is
    anything else."""
    if not isinstance(body, dict):
        raise ShapeError("expected a JSON object, got %s" % type(body).__name__)
    if required and key not in body:
        raise ShapeError("no '%s' in the answer" % key)
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ShapeError("'%s' must be a list of objects, got %s" % (key, type(value).__name__))
    return value


class Backend(object):
    """The contract. Subclasses set the class attributes and implement the verbs.

    Verbs that talk to the service raise a typed BridgeError (never a TypeError or KeyError of a
    malformed answer); `temporary` on the error says whether trying again may help.
    """

    NAME = None             # registry key and backend_options namespace: "slurm"
    TITLE = None            # the manager as messages name it: "Slurm"
    # What the backend reports of a job it accepted that can never start, which cancel_rejected
    # cancels (doc text, Ansible markup); None when it reports no such job.
    NEVER_STARTS = None
    # What `url` points at, for messages ("the slurmrestd URL"); None for a backend reached
    # without one, for which the CRD then does not require url.
    URL_NAME = "URL"
    CONNECTION = {}         # connection options of this backend beyond COMMON_CONNECTION
    ENV = {}                # option -> environment variables it falls back to, first wins
    # Groups of connection options of which one at most may be set, such as a token and the file
    # that holds it. One given explicitly wins over the environment variables of the others, which
    # the argument spec cannot express (it applies fallbacks before checking exclusions): these
    # options fall back to their environment in with_environment() instead.
    EXCLUSIVE = ()
    # Connection options the controller reads from a BridgeJob's Secret and hands to the module
    # through the pipe (never a file): the secrets and the identities they act for.
    CREDENTIALS = ()
    SECRETS = ()            # those of CREDENTIALS that are secret (no_log)
    # The key of a credential in a BridgeJob's Secret, where it is not the option's own name
    # (Kubernetes Secrets are camelCase by convention: api_key -> apiKey).
    SECRET_KEYS = {}
    CAPABILITIES = frozenset()
    # What a job's script is: "program", an executable whose first line is #! (what batch managers
    # run). A backend that runs something else names it here and checks it in check_script.
    SCRIPT = "program"

    # ---------------------------------------------------------------- construction

    @classmethod
    def connection_options(cls, env_fallback=None):
        """The Ansible argument spec of this backend's connection.

        `env_fallback` is ansible.module_utils.basic.env_fallback (modules) or None (plugins and
        the controller, which read the environment their own way).
        """
        options = dict((name, dict(spec)) for name, spec in COMMON_CONNECTION.items())
        options.update((name, dict(spec)) for name, spec in cls.CONNECTION.items())
        for name in cls.SECRETS:
            options[name]["no_log"] = True
        if env_fallback is not None:
            exclusive = cls.exclusive_names()
            for name, variables in cls.ENV.items():
                if name not in exclusive:
                    options[name]["fallback"] = (env_fallback, list(variables))
        return options

    @classmethod
    def exclusive_names(cls):
        return frozenset(name for group in cls.EXCLUSIVE for name in group)

    @classmethod
    def with_environment(cls, get, environ):
        """`get` with the environment fallback of the EXCLUSIVE options: an option of a group that
        none of its options is given for reads its variables (ENV, first wins). Variables of two
        options of one group are a SpecError, since neither is more explicit than the other."""
        found = {}
        for group in cls.EXCLUSIVE:
            if any(get(name) not in (None, "") for name in group):
                continue
            named = []
            for name in group:
                variable = next((v for v in cls.ENV.get(name, ()) if environ.get(v)), None)
                if variable:
                    named.append((name, variable))
            if len(named) > 1:
                raise SpecError(named[-1][0], "the environment variables %s are all set, and %s are mutually exclusive; "
                                "unset all but one or set one of the options" % (
                                    " and ".join(v for _n, v in named), " and ".join(n for n, _v in named)))
            found.update((name, environ[variable]) for name, variable in named)
        return lambda name: found[name] if name in found else get(name)

    @classmethod
    def require_exclusive(cls, get):
        """SpecError when two options of an EXCLUSIVE group are set."""
        for group in cls.EXCLUSIVE:
            given = [name for name in group if get(name) not in (None, "")]
            if len(given) > 1:
                raise SpecError(given[-1], "%s are mutually exclusive" % " and ".join(given))

    @classmethod
    def from_options(cls, get):
        """A client from options; `get(name)` reads a module param or a plugin option (None when
        unset)."""
        raise NotImplementedError

    @classmethod
    def transport_options(cls, get):
        """The common connection options, defaults filled in where `get` has none."""
        options = {}
        for name in ("validate_certs", "ca_path", "timeout", "retries"):
            value = get(name)
            options[name] = COMMON_CONNECTION[name].get("default") if value is None else value
        return options

    @classmethod
    def secret_keys(cls):
        """The keys of CREDENTIALS in a BridgeJob's Secret, in the same order."""
        return tuple(cls.SECRET_KEYS.get(name, name) for name in cls.CREDENTIALS)

    @classmethod
    def check_script(cls, script, backend_options):
        """Refuse, with a SpecError naming the field, a script this backend cannot run; pure.
        `backend_options` is the spec's, for a backend whose jobs may carry their input there."""
        require_program(script)

    @classmethod
    def require_url(cls, url):
        if not url:
            sources = ["option url"] + ["environment %s" % name for name in cls.ENV.get("url", ())]
            raise SpecError("url", "%s is required (%s)" % (cls.URL_NAME, " or ".join(sources)))
        parse_url(url, "url")
        return url

    # ---------------------------------------------------------------- what every backend does

    warnings = ()
    # The file this client reads its token from and reads again when the token is refused (a
    # token that expires and is rotated there); None for a client whose credentials are fixed.
    token_file = None

    @property
    def api_version(self):
        """The API version in use, where the manager has versions; else None."""
        return None

    @property
    def requests_sent(self):
        """HTTP requests this client has sent."""
        return self.transport.requests_sent

    def limit_urls(self, allow_list):
        """Check every later request against the _urls.AllowList `allow_list` (the controller's
        probe of a tenant's BridgeBackend, in its own process, where no environment hands it over)."""
        self.transport.allow_list = allow_list

    def describe(self):
        """The service: {"manager", "version", "api_version", "url", ...}; raises when the URL is
        not this manager's API (MalformedResponse naming what answered instead)."""
        raise NotImplementedError

    def render(self, spec):
        """The native submit request of a normalized spec, shown to users as `rendered`; compiled
        from with_launcher(self, spec). Pure except for what it must ask the service (Slurm's REST
        version)."""
        raise NotImplementedError

    @classmethod
    def launcher(cls, spec):
        """The command that starts the spec's tasks on its nodes, which replaces $(LAUNCHER) in the
        script ("" when the command runs as it is); SpecError naming the resource field when this
        backend cannot start that many. Pure; called by with_launcher only for a script with the token."""
        raise NotImplementedError

    def check(self, spec):
        """Refuse, with a SpecError naming the field, a spec the live service could never run."""
        raise NotImplementedError

    def submit(self, spec):
        """Send the submit exactly once (never retried); returns the new job's id as a string."""
        raise NotImplementedError

    # How the last lookup found jobs, for a backend with more than one way (Slurm: "accounting",
    # "live" or "accounting+live"); results show it.
    lookup = None

    def find_many(self, identities, names=None):
        """{identity: newest job carrying it} for those that have a job, of any age the manager
        keeps, with as few requests as it allows: the lookup before a submit. `names` are the job
        names those jobs were submitted with, a hint for a manager that can search by name."""
        raise NotImplementedError

    def find(self, identity, name=None):
        """The newest job carrying `identity`, or None; `name` as in find_many."""
        return self.find_many([identity], names=[name] if name else None).get(identity)

    def poll_many(self, identities):
        """{identity: job} now, for jobs known to exist: a poll. A manager whose lookup reads a
        slower store (Slurm's accounting) reads its current one here."""
        return self.find_many(identities)

    def get(self, job_id):
        """One job by id; NotFound when the manager does not know it."""
        raise NotImplementedError

    def list(self, identities=None, name=None, phases=None):
        """Jobs the manager knows, narrowed by identity, name and phase."""
        raise NotImplementedError

    def cancel(self, job_id):
        """Stop a queued or running job; a finished one is left as it is."""
        raise NotImplementedError

    def results_summary(self, job):
        """A small summary of a finished job's results for a BridgeJob's status (one request at
        most), or None where the manager keeps no results of its own."""
        return None

    def logs(self, job_id, tail_lines=None):
        """The job's output, where the manager keeps it (capability "logs")."""
        raise Unsupported("%s does not serve job output through its API" % self.TITLE, "read logs of", "job",
                          job_id, self.TITLE, getattr(self, "url", None))

    # The login node (_login.LoginNode) a backend whose manager does not serve job output reads it
    # through; set from a module's `login` option.
    login = None

    def output_refusal(self, spec):
        """Why this backend cannot read the output a spec asks for (spec["output"]), as a reason that
        says what would make it possible; None when it can. Pure: checked before a submit."""
        if "logs" in self.CAPABILITIES:
            return None
        return "%s does not serve a job's output" % self.TITLE

    def read_output(self, job, tail_lines):
        """(data, partial) of a job's output (a running job's as far as it is written): bytes or text, at
        least its last `tail_lines` lines where the backend can choose, and `partial` when data is only
        the end of it. One request.
        By default the logs verb, asked for one line more, so that tail() sees whether any was left out."""
        return self.logs(job["job_id"], tail_lines=tail_lines + 1), False

    def output_secrets(self):
        """The secrets this client knows (its token, password, session token), masked in job output."""
        secrets = list(getattr(getattr(self, "transport", None), "secrets", None) or ())
        return secrets + (self.login.secrets() if self.login is not None else [])

    def job_output(self, job, tail_lines, secrets=()):
        """{"text", "lines", "truncated"}: the end of a job's output as results and status
        show it (_output.tail), scrubbed of `secrets` and of the client's own."""
        data, partial = self.read_output(job, tail_lines)
        return tail(data, tail_lines, secrets=list(secrets) + self.output_secrets(), partial=partial)

    def inventory(self):
        """What the inventory plugin makes hosts of: {"kind": records}, normalized, with "native"."""
        raise NotImplementedError

    def capacity(self):
        """Where a job can go now: {"manager", "version", "api_version", "queues": [record of
        QUEUE_KEYS per queue]}, read with a fixed number of requests whatever the number of jobs
        (each backend says how many), built by its fit.queue_records from what inventory() reads
        plus the pending and running counts, read the cheapest way the manager allows."""
        raise NotImplementedError

    def close(self):
        self.transport.close()

    # ---------------------------------------------------------------- the call and its errors

    def error(self, kind, reason, verb=None, obj=None, ident=None, status=None):
        """A `kind` of BridgeError about this client's manager at its URL."""
        return kind(reason, verb, obj, ident, self.TITLE, self.url, status)

    def reason(self, words, status):
        """manager_reason of an answer of this client's server, with its transport's scrubber."""
        return manager_reason(words, status, self.transport.scrub, self.transport.vouched)

    def status_error(self, status, reason, verb, obj, ident=None):
        """The error an HTTP status means where the manager's answer says nothing better."""
        return self.error(error_for_status(status), reason, verb, obj, ident, status)

    def decoded(self, parse, body, endpoint, verb, obj, ident=None):
        """parse(body), where an answer of another shape is MalformedResponse naming the endpoint."""
        return decode(parse, body, endpoint, self.TITLE, self.url, verb, obj, ident)

    def call(self, method, path, verb, obj, ident=None, parse=None, missing=REFUSE, **request):
        """One request of a verb and the manager's answer to it, through `parse` when given.

        exchange() sends it (the transport's RetryPolicy sends an idempotent one again) and checks
        the answer. `missing` is what a 404 returns where it means "none" rather than an error.
        `request` goes to exchange(): read (a function of the response that gives its body; by
        default its JSON), json, params, content, headers, idempotent.
        """
        endpoint = self.endpoint(method, path)
        body = self.exchange(method, path, endpoint, verb, obj, ident, missing=missing, **request)
        if parse is None or body is missing:
            return body
        parsed = self.decoded(parse, body, endpoint, verb, obj, ident)
        # An answer of the shape this endpoint's parser requires: the server is the manager's API.
        self.transport.vouched = True
        return parsed

    def endpoint(self, method, path):
        """The request as messages name it: "GET /jobs"."""
        return "%s %s" % (method, path)

    def exchange(self, method, path, endpoint, verb, obj, ident, missing=REFUSE, **request):
        """The body of a successful answer (request's read(response), else its JSON); refuse()
        raises the typed error of any other but a 404 that `missing` stands for."""
        read = request.pop("read", None)
        response = self.send(method, path, verb, obj, ident, **request)
        if missing is not REFUSE and response.status_code == 404:
            return missing
        if response.status_code >= 400:
            self.refuse(response, verb, obj, ident)
        if read is not None:
            return self.decoded(read, response, endpoint, verb, obj, ident)
        return self.answer(response, endpoint, verb, obj, ident)

    def send(self, method, path, verb, obj, ident, headers=None, **request):
        """The response to one request, with the headers of credentials() on it; sent once more
        when renew() says the manager refused those and new ones are to be had. A request whose
        credentials were refused was not carried out, so sending it again duplicates nothing, not
        even a submit."""
        for attempt in (1, 2):
            sent = dict(self.credentials(), **(headers or {}))
            response = self.transport.request(method, path, headers=sent or None, verb=verb, obj=obj, ident=ident,
                                              **request)
            if attempt == 2 or not self.renew(response):
                return response
        raise AssertionError("unreachable: the second attempt returns")

    def credentials(self):
        """The headers that carry this client's credentials on a request; none where the transport
        sends them with every request (a fixed token)."""
        return {}

    def renew(self, response):
        """Whether `response` refused the credentials, which are forgotten then, so that
        credentials() gets new ones (a session expired, a token was revoked)."""
        return False

    def refuse(self, response, verb, obj, ident):
        """Raise the typed error of an error answer; each manager says why in its own way."""
        status = response.status_code
        raise self.status_error(status, status_phrase(status), verb, obj, ident)

    def answer(self, response, endpoint, verb, obj, ident):
        """The body of a successful answer: its JSON."""
        return json_of(response, endpoint, self.TITLE, self.url, verb, obj, ident)

    def found_after_lost_submit(self, spec, lost):
        """The id of the job that a submit whose answer was lost (`lost`: ConnectionFailed,
        Timeout, a gateway's 5xx) created, looked up by its identity; else `lost`, saying that no
        such job exists now. A submit is never sent again blindly."""
        existing = self.find(spec["identity"])
        if existing is not None:
            return existing["job_id"]
        raise type(lost)(lost.reason + "; the submission may not have reached %s and was not retried "
                         "(no job with identity '%s' exists now)" % (self.TITLE, spec["identity"]),
                         lost.verb, lost.obj, lost.ident, lost.manager, lost.url, lost.status)


def interpreter(script):
    """[interpreter, its one optional argument] of a script's #! line as the kernel reads it: the
    argument is the rest of the line, blanks and all ("#!/bin/sh -e -u" passes "-e -u" as one).
    Backends that start the interpreter themselves (Kubernetes, Ray) start it so, and a script
    runs as it would where the manager executes it (Slurm, LSF)."""
    line = script.split("\n", 1)[0][2:].strip()
    if not line:
        raise SpecError("script", "the #! line names no interpreter")
    return line.split(None, 1)


def compilable(backend, spec):
    """The spec as `backend` compiles it, the first thing every render() does: a field the backend
    refuses is refused, naming it, with the field table's reason (_spec.refuse_unsupported), and
    each $(LAUNCHER) is replaced (with_launcher)."""
    refuse_unsupported(spec, backend)
    return with_launcher(backend, spec)


def with_launcher(backend, spec):
    """The spec with each exact $(LAUNCHER) of its script replaced by backend.launcher(spec); the
    spec itself when the script has none. The first thing every render() does.

    Only the exact token is replaced ($LAUNCHER, ${LAUNCHER} and $(LAUNCHER_X) are the script's own);
    there is no escape, since in a shell script $(LAUNCHER) could only run a command named LAUNCHER.
    The identity was derived from the user's script before, so it does not change.
    """
    script = spec.get("script")
    if not script or LAUNCHER_TOKEN not in script:
        return spec
    command = backend.launcher(spec)
    if command:
        script = script.replace(LAUNCHER_TOKEN, command)
    else:
        script = _NO_LAUNCHER.sub("", script)
    return dict(spec, script=script)


def rfc3339(epoch_seconds):
    """RFC 3339 UTC time of an epoch in seconds; None for 0 or None (not happened yet)."""
    if not epoch_seconds:
        return None
    moment = datetime.datetime.fromtimestamp(epoch_seconds, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def natural_key(job_id):
    """Sort key of a job id: numbers by value (Slurm's "9" < "10"), then any string."""
    text = "%s" % (job_id,)
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text) if part]


def newer(job, other):
    """Whether `job` was submitted after `other`: by submit time, then by id."""
    mine, theirs = job.get("submit_time") or "", other.get("submit_time") or ""
    if mine != theirs and mine and theirs:
        return mine > theirs
    return natural_key(job.get("job_id")) > natural_key(other.get("job_id"))


def select(jobs, identities=None, name=None, phases=None):
    """The jobs carrying one of `identities`, named `name`, in one of `phases` (None: any)."""
    wanted = None if identities is None else set(identities)
    return [job for job in jobs
            if (wanted is None or job["identity"] in wanted)
            and (name is None or job["name"] == name)
            and (not phases or job["phase"] in phases)]


def newest_by_identity(jobs, warnings=None):
    """{identity: job} of jobs carrying a Bridge identity; where several do, the newest wins.

    A duplicate is a warning, since Bridge itself never submits one identity twice.
    """
    found = {}
    for job in jobs:
        identity = job.get("identity")
        if not identity:
            continue
        if identity in found and warnings is not None:
            warnings.append("several jobs carry identity '%s' (%s, %s); using the newest" % (
                identity, found[identity]["job_id"], job["job_id"]))
        if identity not in found or newer(job, found[identity]):
            found[identity] = job
    return found
