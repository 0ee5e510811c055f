"""LsfClient against stubbed Application Center answers (httpx.MockTransport).

PAC cannot be installed here, so the answers below are written from IBM's documented formats
(external-apis.md section 2, quantum-lsf.md section B): the same records in XML (PAC's default)
and in JSON (Accept: application/json), PAC's <error><message> and JSON message errors.
"""

import json
import re

import httpx
import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._backend import (
    CAPABILITY_DOCS,
    FAILURE_CLASSES,
    JOB_KEYS,
    PHASES,
    ShapeError,
    compilable,
)
from ansible_collections.bridge.hpc.plugins.module_utils._errors import (
    AuthFailed,
    BridgeError,
    ConnectionFailed,
    MalformedResponse,
    NotFound,
    Rejected,
    SpecError,
)
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.answers import parse_answer, unwrap
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.client import NAMES_ASKED_AT_MOST, LsfClient, _jobs, token_expiry
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.compile import bsub_options, compile_job, multipart_body
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.states import normalize_job, parse_time
from fault_server import MODES, FaultServer
from test_malformed_answers import VERBS, WRONG_SHAPE

URL = "http://pac.test/platform"
PASSWORD = "s3cret-pw"
TOKEN = 'bridge"2026-12-01T14:00:00Z"c2lnbmF0dXJl"YWJj'
COOKIE = "platform_token=bridge#quote#2026-12-01T14:00:00Z#quote#c2lnbmF0dXJl#quote#YWJj"
SCRIPT = "#!/bin/bash\r\nprintf 'a\\tb' # caf\u00e9 <&> \"q\"\n\n--not-a-boundary\n  trailing  \n"


def spec(**params):
    """A normalized spec; backend_options.lsf added after normalize_spec (the backend is not in the
    registry yet, so normalize_spec would refuse the namespace)."""
    options = params.pop("lsf", None)
    params.setdefault("script", "#!/bin/bash\necho hi\n")
    params.setdefault("identity", "job-1")
    result = normalize_spec(params)
    if options is not None:
        result["backend_options"] = {"lsf": options}
    return result


def extra(request):
    return next(p["value"] for p in request["params"] if p["id"] == "EXTRA_PARAMS")


def param(request, name):
    return next((p["value"] for p in request["params"] if p["id"] == name), None)


# ---------------------------------------------------------------- compile

def test_every_field_compiles_to_its_bsub_option():
    request = compile_job(spec(
        name="sim", queue="normal", account="proj1", working_directory="/scratch/w", stdout="out.%J",
        stderr="err.%J", environment={"GREETING": "hello world", "N": 3},
        resources={"nodes": 2, "tasks_per_node": 4, "cpus_per_task": 2, "memory": "4G", "gpus": 2,
                   "gpu_type": "TeslaV100", "time_limit": "1:30:00"}))
    assert extra(request) == (
        "-Jd bridge:job-1 -q normal -n 16 -R 'rusage[mem=4096MB] span[ptile=8]' -M 4096MB "
        "-gpu num=2:gmodel=TeslaV100 -W 90 -P proj1 -cwd /scratch/w "
        "-env 'GREETING=hello world, N=3, PATH=/usr/local/bin:/usr/bin:/bin'")
    assert param(request, "JOB_NAME") == "sim"
    assert param(request, "OUTPUT_FILE") == "out.%J" and param(request, "ERROR_FILE") == "err.%J"
    assert request["app_name"] == "generic" and request["path"] == "/ws/jobs/submit"
    assert request["files"] == {"bridge_job.sh": "#!/bin/bash\necho hi\n"}
    assert request["bsub"].startswith("bsub -J sim -Jd bridge:job-1 -q normal")
    assert "$LS_SUBCWD/bridge_job.sh" in param(request, "COMMANDTORUN")


def test_a_minimal_spec_asks_for_one_slot_and_tags_the_identity():
    request = compile_job(spec())
    assert extra(request) == "-Jd bridge:job-1 -env PATH=/usr/local/bin:/usr/bin:/bin"
    assert param(request, "JOB_NAME") == "job-1" and param(request, "OUTPUT_FILE") is None


@pytest.mark.parametrize("resources, n, span", [
    ({"tasks": 4}, "4", None),
    ({"cpus_per_task": 4}, "4", "span[hosts=1]"),
    ({"tasks": 3, "cpus_per_task": 2}, "6", "span[hosts=1]"),
    ({"nodes": 1}, "1", "span[ptile=1]"),
    ({"nodes": 2, "tasks": 8}, "8", "span[ptile=4]"),
    ({"nodes": 2, "tasks": 8, "cpus_per_task": 2}, "16", "span[ptile=8]"),
    ({"tasks": 6, "tasks_per_node": 3}, "6", "span[ptile=3]"),
    ({"tasks_per_node": 3}, "3", "span[ptile=3]"),
    ({"nodes": 3, "tasks_per_node": 2, "tasks": 6}, "6", "span[ptile=2]"),
])
def test_tasks_nodes_and_cpus_are_slots_and_span(resources, n, span):
    options = dict((o, v) for o, v, _f in bsub_options(spec(resources=resources)))
    assert options["-n"] == n
    assert options.get("-R") == span


@pytest.mark.parametrize("resources, field", [
    ({"nodes": 3, "tasks": 4}, "resources.tasks"),
    ({"nodes": 2, "tasks_per_node": 2, "tasks": 5}, "resources.tasks"),
    ({"memory_per_cpu": "1G"}, "resources.memory_per_cpu"),
])
def test_layouts_lsf_cannot_express_name_the_field(resources, field):
    with pytest.raises(SpecError) as err:
        compile_job(compilable(LsfClient, spec(resources=resources)))
    assert err.value.field == field


@pytest.mark.parametrize("params, field", [
    ({"qos": "high"}, "qos"),
    ({"constraints": "avx512"}, "constraints"),
    ({"environment": {"LIST": "a,b"}}, "environment.LIST"),
])
def test_unsupported_fields_are_refused_by_name(params, field):
    with pytest.raises(SpecError) as err:
        compile_job(compilable(LsfClient, spec(**params)))
    assert err.value.field == field


def test_escape_hatch_adds_bsub_options():
    request = compile_job(spec(lsf={"-x": True, "G": "grp", "-sla": "gold", "-r": False, "-sp": 50}))
    assert extra(request).endswith("-G grp -sla gold -sp 50 -x")


@pytest.mark.parametrize("params, option, contradicts", [
    ({"queue": "normal"}, "-q", "queue"),
    ({"resources": {"tasks": 2}}, "-n", "resources.tasks"),
    ({"resources": {"memory": "1G"}}, "-R", "resources.memory"),
    ({"resources": {"memory": "1G"}}, "-M", "resources.memory"),
    ({"resources": {"time_limit": 5}}, "W", "resources.time_limit"),
    ({}, "-J", "name"),
    ({}, "-Jd", "identity"),
    ({}, "-env", "environment"),
    ({"stdout": "o"}, "-o", "stdout"),
    ({"working_directory": "/w"}, "-cwd", "working_directory"),
])
def test_escape_hatch_contradicting_a_compiled_field_is_refused(params, option, contradicts):
    with pytest.raises(SpecError) as err:
        compile_job(spec(lsf={option: "x"}, **params))
    assert err.value.field == "backend_options.lsf.%s" % option
    assert contradicts in err.value.reason


def test_escape_hatch_fills_what_the_spec_leaves_open():
    assert "-q short" in extra(compile_job(spec(lsf={"-q": "short"})))


@pytest.mark.parametrize("options", [{"-I": True}, {"-K": True}, {"bad option": 1}, {"-x": [1]}])
def test_escape_hatch_refuses_what_breaks_bridge(options):
    with pytest.raises(SpecError) as err:
        compile_job(spec(lsf=options))
    assert err.value.field.startswith("backend_options.lsf.")


# ---------------------------------------------------------------- multipart body

def parts(body, boundary):
    """The parts of a multipart body as (headers dict, content bytes), per RFC 2046."""
    delimiter = b"--" + boundary
    assert body.rstrip(b"\r\n").endswith(delimiter + b"--")
    pieces = body.split(b"\r\n" + delimiter)
    first = pieces[0]
    assert first.startswith(delimiter + b"\r\n")
    pieces = [first[len(delimiter) + 2:]] + [p[2:] for p in pieces[1:] if not p.startswith(b"--")]
    result = []
    for piece in pieces:
        head, content = piece.split(b"\r\n\r\n", 1)
        headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n"))
        result.append((headers, content))
    return result


def test_submit_body_is_nested_multipart_with_the_script_byte_exact():
    request = compile_job(spec(script=SCRIPT, environment={"X": "<&>"}))
    content_type, body = multipart_body(request)
    outer = content_type.split("boundary=")[1].encode()
    app, data, script = parts(body, outer)
    assert app[0]["Content-Disposition"] == 'form-data; name="AppName"' and app[1] == b"generic"
    assert data[0]["Content-ID"] == "<data>"
    inner = data[0]["Content-Type"].split("boundary=")[1].encode()
    params = parts(data[1], inner)
    names = [headers["Content-Disposition"] for headers, _content in params]
    assert names == ['form-data; name="%s"' % n for n in ("COMMANDTORUN", "JOB_NAME", "EXTRA_PARAMS", "bridge_job.sh")]
    xml = dict((h["Content-Disposition"][len('form-data; name="'):-1], c.decode()) for h, c in params)
    assert "X=&lt;&amp;&gt;" in xml["EXTRA_PARAMS"]
    assert xml["bridge_job.sh"] == ("<AppParam><id>bridge_job.sh</id><value>bridge_job.sh,upload</value>"
                                    "<type>file</type></AppParam>")
    assert script[0] == {"Content-Disposition": 'form-data; name="bridge_job.sh"; filename="bridge_job.sh"',
                         "Content-Type": "application/octet-stream", "Content-ID": "<bridge_job.sh>"}
    assert script[1] == SCRIPT.encode("utf-8")


def test_the_body_of_one_spec_is_always_the_same():
    assert multipart_body(compile_job(spec())) == multipart_body(compile_job(spec()))
    assert multipart_body(compile_job(spec()))[0] != multipart_body(compile_job(spec(identity="job-2")))[0]


# ---------------------------------------------------------------- answers and states

XML_JOBS = """<?xml version="1.0" encoding="UTF-8"?>
<jobs total="2">
  <job><jobId>101</jobId><jobName>a</jobName><jobStatus>RUN</jobStatus><queue>normal</queue>
    <user>bridge</user><description>bridge:id-a</description><exHosts>h1</exHosts>
    <submitTimeGMT>2026-12-01 10:00:00</submitTimeGMT><startTime>2026-12-01 10:00:05</startTime>
    <cwd>/home/bridge</cwd></job>
  <job><jobId>102</jobId><jobName>b</jobName><jobStatus>EXIT</jobStatus><exitStatus>3</exitStatus>
    <description>bridge:id-b</description><submitTimeGMT>1796119200</submitTimeGMT>
    <startTime>1796119201</startTime><endTime>1796119202</endTime></job>
</jobs>"""

JSON_JOBS = {"@total": "2", "job": [
    {"jobId": 101, "jobName": "a", "jobStatus": "RUN", "queue": "normal", "user": "bridge",
     "description": "bridge:id-a", "exHosts": "h1", "submitTimeGMT": "2026-12-01 10:00:00",
     "startTime": "2026-12-01 10:00:05", "cwd": "/home/bridge"},
    {"jobId": "102", "jobName": "b", "jobStatus": "EXIT", "exitStatus": 3, "description": "bridge:id-b",
     "submitTimeGMT": 1796119200, "startTime": 1796119201, "endTime": 1796119202},
]}


@pytest.mark.parametrize("body", [XML_JOBS, json.dumps(JSON_JOBS), json.dumps({"jobs": JSON_JOBS})],
                         ids=["xml", "json", "json-with-root"])
def test_job_lists_read_alike_from_xml_and_json(body):
    jobs = _jobs(unwrap(parse_answer(body))[1])
    running, failed = jobs
    assert [set(JOB_KEYS) - set(job) for job in jobs] == [set(), set()]
    assert (running["job_id"], running["identity"], running["phase"], running["hosts"]) == ("101", "id-a", "running", "h1")
    assert running["submit_time"] == "2026-12-01T10:00:00Z" and running["start_time"] == "2026-12-01T10:00:05Z"
    assert running["end_time"] is None and running["exit_code"] is None
    assert (failed["job_id"], failed["phase"], failed["failure_class"], failed["exit_code"]) == ("102", "failed", "non_zero_exit", 3)
    assert failed["end_time"] == "2026-12-01T10:00:02Z" and failed["terminal"]


def test_one_job_is_an_object_in_json_and_an_element_in_xml():
    xml = "<jobs total=\"1\"><job><jobId>7</jobId><jobStatus>PEND</jobStatus></job></jobs>"
    for body in (xml, json.dumps({"@total": "1", "job": {"jobId": 7, "jobStatus": "PEND"}})):
        assert [job["job_id"] for job in _jobs(unwrap(parse_answer(body))[1])] == ["7"]


@pytest.mark.parametrize("status, phase, terminal", [
    ("PEND", "queued", False), ("PSUSP", "queued", False), ("WAIT", "queued", False), ("PROV", "queued", False),
    ("RUN", "running", False), ("USUSP", "running", False), ("SSUSP", "running", False),
    ("DONE", "completed", True), ("EXIT", "failed", True), ("UNKWN", "running", False), ("ZOMBI", "failed", True),
    ("PDONE", "completed", True), ("PERR", "failed", True),
    ("Pending", "queued", False), ("RUNNING", "running", False), ("Suspended", "running", False),
    ("Done", "completed", True), ("Exit", "failed", True), ("POST_DONE", "completed", True),
])
def test_every_state(status, phase, terminal):
    job = normalize_job({"jobId": "1", "jobStatus": status, "exitStatus": "0"})
    assert (job["phase"], job["terminal"]) == (phase, terminal)
    assert job["phase"] in PHASES and (job["failure_class"] is None or job["failure_class"] in FAILURE_CLASSES)


def test_suspension_is_shown():
    job = normalize_job({"jobId": "1", "jobStatus": "SSUSP"})
    assert job["suspended"] and "suspended by LSF" in job["reason"]
    assert not normalize_job({"jobId": "1", "jobStatus": "RUN"})["suspended"]


@pytest.mark.parametrize("exit_info, exit_status, failure_class, exit_code", [
    ("TERM_RUNLIMIT: job killed after reaching LSF run time limit", "140", "timeout", 140),
    ("TERM_MEMLIMIT", "137", "out_of_memory", 137),
    ("16", "137", "out_of_memory", 137),
    ("5", None, "timeout", None),
    ("TERM_OWNER: job killed by owner", "130", "cancelled", 130),
    ("TERM_ADMIN", "143", "cancelled", 143),
    ("14", "130", "cancelled", 130),
    (None, "3", "non_zero_exit", 3),
    ("TERM_CWD_NOTEXIST", "1", "non_zero_exit", 1),
    (None, "768", "non_zero_exit", 3),
])
def test_exit_reasons_classify_failures(exit_info, exit_status, failure_class, exit_code):
    job = normalize_job({"jobId": "1", "jobStatus": "EXIT", "exitInfo": exit_info, "exitStatus": exit_status})
    assert (job["failure_class"], job["exit_code"]) == (failure_class, exit_code)
    assert job["phase"] == ("cancelled" if failure_class == "cancelled" else "failed")


def test_unknown_hosts_are_node_failures():
    assert normalize_job({"jobId": "1", "jobStatus": "UNKWN"})["failure_class"] == "node_failure"
    assert normalize_job({"jobId": "1", "jobStatus": "ZOMBI"})["failure_class"] == "node_failure"


def test_a_done_job_exits_zero():
    job = normalize_job({"jobId": "1", "jobStatus": "DONE"})
    assert (job["exit_code"], job["failure_class"]) == (0, None)


@pytest.mark.parametrize("reason, failure_class", [
    ("The queue is closed", "rejected"),
    ("No suitable hosts for the job", "rejected"),
    ("The dependency condition is invalid or never satisfied", "rejected"),
    ("The job is waiting for its dependency condition(s) to be satisfied", None),
    ("The queue is inactivated by the administrator", None),
    ("New job is waiting for scheduling", None),
    ("Not enough job slot(s)", None),
])
def test_pending_reasons_that_never_clear_are_rejected(reason, failure_class):
    job = normalize_job({"jobId": "1", "jobStatus": "PEND", "pendReason": reason})
    assert (job["failure_class"], job["reason"]) == (failure_class, reason)


@pytest.mark.parametrize("value, expected", [
    ("1796119200", "2026-12-01T10:00:00Z"), (1796119200000, "2026-12-01T10:00:00Z"),
    ("2026-12-01T10:00:00Z", "2026-12-01T10:00:00Z"), ("2026/12/01 10:00:00", "2026-12-01T10:00:00Z"),
    ("Tue Dec  1 10:00:00 2026", "2026-12-01T10:00:00Z"), ("Dec 1 10:00:00 2026", "2026-12-01T10:00:00Z"),
    ("-", None), ("", None), (None, None), ("soon", None),
])
def test_times_are_rfc3339(value, expected):
    assert parse_time(value) == expected


@pytest.mark.parametrize("native", [[], "x", {"jobStatus": "RUN"}])
def test_a_job_without_an_id_is_a_shape_error(native):
    with pytest.raises(ShapeError):
        normalize_job(native)


def test_xml_with_a_doctype_is_refused():
    with pytest.raises(ValueError):
        parse_answer('<!DOCTYPE x [<!ENTITY e "boom">]><jobs><job><jobId>&e;</jobId></job></jobs>')


# ---------------------------------------------------------------- the client over stubbed HTTP

class Pac(object):
    """A stub Application Center: routes (method, path) to answers; records what was sent."""

    def __init__(self, routes):
        self.routes = dict((key, list(value) if isinstance(value, list) else [value]) for key, value in routes.items())
        self.sent = []

    def __call__(self, request):
        self.sent.append(request)
        answers = self.routes.get((request.method, request.url.path))
        if not answers:
            return httpx.Response(404, text="")
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if callable(answer):
            answer = answer(request)
        status, body = answer
        if isinstance(body, (dict, list)):
            return httpx.Response(status, json=body)
        return httpx.Response(status, text=body, headers={"content-type": "application/xml"})

    def paths(self):
        return ["%s %s" % (r.method, r.url.path[len("/platform"):]) for r in self.sent]


LOGON_JSON = (200, {"token": TOKEN, "csrftoken": "c"})
LOGON_XML = (200, "<User><token>%s</token></User>" % TOKEN.replace('"', "&quot;"))
XML_ERROR = "<error><message>%s</message></error>"


def client_for(routes, clock=lambda: 0.0, user="bridge"):
    pac = Pac(routes)
    http = httpx.Client(base_url=URL, transport=httpx.MockTransport(pac), headers={"Accept": "application/json"})
    transport = Transport(URL, "LSF", secrets=[PASSWORD], http_client=http, sleep=lambda s: None)
    return LsfClient(URL, user=user, password=PASSWORD, transport=transport, clock=clock), pac


def route(path, answer, method="GET"):
    return {("POST", "/platform/ws/logon"): LOGON_JSON, (method, "/platform" + path): answer}


def test_declarations():
    assert LsfClient.NAME == "lsf" and LsfClient.TITLE == "LSF"
    assert LsfClient.CAPABILITIES <= set(CAPABILITY_DOCS) and "logs" not in LsfClient.CAPABILITIES
    assert LsfClient.connection_options()["password"]["no_log"]
    client = LsfClient.from_options({"url": URL + "/", "user": "u", "password": "p"}.get)
    assert client.url == URL
    client.close()


@pytest.mark.parametrize("logon", [LOGON_JSON, LOGON_XML], ids=["json", "xml"])
def test_logon_sends_xml_credentials_and_the_quoted_token_as_cookie(logon):
    client, pac = client_for({("POST", "/platform/ws/logon"): logon,
                              ("GET", "/platform/ws/jobs/101"): (200, XML_JOBS)})
    assert client.get("101")["job_id"] == "101"
    logon_request, get_request = pac.sent
    assert logon_request.headers["content-type"] == "application/xml"
    assert logon_request.headers["accept"] == "application/json"
    assert logon_request.content == b"<User><name>bridge</name><pass>s3cret-pw</pass></User>"
    assert get_request.headers["cookie"] == COOKIE


def test_logon_escapes_xml_in_credentials():
    client, pac = client_for(route("/ws/jobs/1", (200, XML_JOBS)), user="a<b")
    client.password = "p&w"
    client.get("1")
    assert b"<name>a&lt;b</name><pass>p&amp;w</pass>" in pac.sent[0].content


def test_one_logon_serves_many_calls():
    client, pac = client_for(route("/ws/jobs/101", (200, XML_JOBS)))
    client.get("101")
    client.get("101")
    assert pac.paths() == ["POST /ws/logon", "GET /ws/jobs/101", "GET /ws/jobs/101"]


def test_a_refused_token_logs_on_again_once():
    client, pac = client_for(route("/ws/jobs/101", [(403, XML_ERROR % "Token expired"), (200, XML_JOBS)]))
    assert client.get("101")["job_id"] == "101"
    assert pac.paths() == ["POST /ws/logon", "GET /ws/jobs/101", "POST /ws/logon", "GET /ws/jobs/101"]


def test_a_token_refused_twice_is_an_auth_failure_without_secrets():
    client, pac = client_for(route("/ws/jobs/101", (403, XML_ERROR % ("Token %s is expired" % TOKEN))))
    with pytest.raises(AuthFailed) as err:
        client.get("101")
    assert pac.paths().count("POST /ws/logon") == 2
    assert_no_secret(err.value)


def test_an_expired_token_is_renewed_before_the_call():
    now = [0.0]
    client, pac = client_for(route("/ws/jobs/101", (200, XML_JOBS)), clock=lambda: now[0])
    client.get("101")
    now[0] = token_expiry(TOKEN) + 1
    client.get("101")
    assert pac.paths().count("POST /ws/logon") == 2


@pytest.mark.parametrize("answer", [(403, XML_ERROR % "Invalid user name or password: s3cret-pw"),
                                    (400, {"message": "The user name is empty"})])
def test_a_refused_logon_is_auth_failed_without_the_password(answer):
    client, _pac = client_for({("POST", "/platform/ws/logon"): answer})
    with pytest.raises(AuthFailed) as err:
        client.describe()
    assert_no_secret(err.value)
    assert "authentication failed" in str(err.value)


def test_no_password_fails_before_any_request():
    client, pac = client_for({})
    client.password = None
    with pytest.raises(AuthFailed) as err:
        client.get("1")
    assert pac.sent == []
    assert str(err.value).startswith("password is required: Application Center at ")
    client.user = None
    with pytest.raises(AuthFailed) as err:
        client.get("1")
    assert str(err.value).startswith("user and password are required")


def assert_no_secret(error):
    for text in (str(error), error.reason, json.dumps(error.to_dict())):
        for secret in (PASSWORD, TOKEN, TOKEN.replace('"', "#quote#"), "c2lnbmF0dXJl"):
            assert secret not in text


@pytest.mark.parametrize("answer", [(200, {"id": 1234}), (200, {"id": "1234"}), (200, "<Job><id>1234</id></Job>"),
                                    (200, "<id>1234</id>")], ids=["json-int", "json-str", "xml", "xml-bare"])
def test_submit_posts_the_multipart_body_once_and_returns_the_id(answer):
    client, pac = client_for(route("/ws/jobs/submit", answer, "POST"))
    the_spec = spec(script=SCRIPT)
    assert client.submit(the_spec) == "1234"
    request = pac.sent[-1]
    content_type, body = multipart_body(compile_job(the_spec))
    assert request.headers["content-type"] == content_type and request.content == body
    assert request.headers["cookie"] == COOKIE
    assert pac.paths() == ["POST /ws/logon", "POST /ws/jobs/submit"]


@pytest.mark.parametrize("answer, error", [
    ((500, XML_ERROR % "Queue does not exist: nosuch"), Rejected),
    ((400, {"message": "Bad multipart body"}), Rejected),
    ((200, XML_ERROR % "Application generic is not published"), Rejected),
    ((200, {"message": "Job submission failed"}), MalformedResponse),
    ((200, {"id": "abc"}), MalformedResponse),
])
def test_submit_refusals_are_typed(answer, error):
    client, pac = client_for(route("/ws/jobs/submit", answer, "POST"))
    with pytest.raises(BridgeError) as err:
        client.submit(spec())
    assert isinstance(err.value, error) or (error is Rejected and err.value.status == 500)
    assert pac.paths().count("POST /ws/jobs/submit") == 1


def test_submit_5xx_message_is_kept():
    client, _pac = client_for(route("/ws/jobs/submit", (500, XML_ERROR % "Queue does not exist: nosuch"), "POST"))
    with pytest.raises(BridgeError) as err:
        client.submit(spec())
    assert "Queue does not exist: nosuch" in str(err.value) and "(HTTP 500)" in str(err.value)


def test_a_lost_submit_answer_finds_the_job_by_identity():
    def lost(request):
        raise httpx.ReadError("connection reset", request=request)
    listing = {"@total": "1", "job": {"jobId": 55, "jobStatus": "PEND", "description": "bridge:job-1"}}
    routes = route("/ws/jobs/submit", lost, "POST")
    routes[("GET", "/platform/ws/jobs/fullinfo")] = (200, listing)
    client, pac = client_for(routes)
    assert client.submit(spec()) == "55"
    assert pac.paths().count("POST /ws/jobs/submit") == 1


def test_a_lost_submit_answer_without_a_job_says_so():
    def lost(request):
        raise httpx.ReadError("connection reset", request=request)
    client, _pac = client_for(route("/ws/jobs/submit", lost, "POST"))
    with pytest.raises(ConnectionFailed) as err:
        client.submit(spec())
    assert "was not retried" in str(err.value)


def test_find_many_reads_descriptions_and_keeps_the_newest():
    listing = {"@total": "3", "job": [
        {"jobId": 1, "jobStatus": "DONE", "description": "bridge:a", "submitTimeGMT": "2026-12-01 09:00:00"},
        {"jobId": 2, "jobStatus": "RUN", "description": "bridge:a", "submitTimeGMT": "2026-12-01 10:00:00"},
        {"jobId": 3, "jobStatus": "RUN", "description": "someone else's"},
    ]}
    client, pac = client_for(route("/ws/jobs/fullinfo", (200, listing)))
    found = client.find_many(["a", "b"])
    assert list(found) == ["a"] and found["a"]["job_id"] == "2"
    assert client.warnings and "several jobs carry identity 'a'" in client.warnings[0]
    assert pac.paths() == ["POST /ws/logon", "GET /ws/jobs/fullinfo"]


XML_BASIC = """<?xml version="1.0" encoding="UTF-8"?>
<pseudoJobs total="2">
  <pseudoJob><id>7[1]</id><jobId>7[1]</jobId><jobName>train[1]</jobName><jobStatus>RUN</jobStatus></pseudoJob>
  <pseudoJob><id>7[2]</id><jobId>7[2]</jobId><jobName>train[2]</jobName><jobStatus>PEND</jobStatus></pseudoJob>
</pseudoJobs>"""
XML_ARRAY = """<jobs total="2">
  <job><jobId>7[1]</jobId><jobName>train[1]</jobName><jobStatus>RUN</jobStatus><description>bridge:id-t array=0-1</description></job>
  <job><jobId>7[2]</jobId><jobName>train[2]</jobName><jobStatus>PEND</jobStatus><description>bridge:id-t array=0-1</description></job>
</jobs>"""


def test_the_lookup_before_a_submit_asks_by_name_then_reads_the_jobs_found_by_id():
    """GET ws/jobs?jobname= for each name and identity (basic records, 404 for none), then one POST
    ws/jobs/getfullinfo of the ids found, an array once by its id."""
    routes = route("/ws/jobs", [(200, XML_BASIC), (404, XML_ERROR % "No matching job found.")])
    routes[("POST", "/platform/ws/jobs/getfullinfo")] = (200, XML_ARRAY)
    client, pac = client_for(routes)
    found = client.find_many(["id-t", "id-old"], names=["train", "train"])
    assert list(found) == ["id-t"] and found["id-t"]["job_id"] == "7" and found["id-t"]["array"]["indexes"] == "0,1"
    asked = [(r.method, r.url.path[len("/platform"):], dict(r.url.params), r.content.decode()) for r in pac.sent[1:]]
    assert asked == [("GET", "/ws/jobs", {"jobname": "train"}, ""), ("GET", "/ws/jobs", {"jobname": "id-t"}, ""),
                     ("GET", "/ws/jobs", {"jobname": "id-old"}, ""), ("POST", "/ws/jobs/getfullinfo", {}, "ids=7")]
    assert pac.sent[-1].headers["content-type"] == "application/x-www-form-urlencoded"


def test_a_new_identity_costs_one_request_a_name_and_reads_no_detail():
    client, pac = client_for(route("/ws/jobs", (404, XML_ERROR % "No matching job found.")))
    assert client.find("id-new", name="id-new") is None
    assert pac.paths() == ["POST /ws/logon", "GET /ws/jobs"]


@pytest.mark.parametrize("names", [None, ["n-%d" % i for i in range(NAMES_ASKED_AT_MOST + 1)]],
                         ids=["no-names", "too-many-names"])
def test_without_names_or_past_the_limit_the_lookup_is_one_list(names):
    client, pac = client_for(route("/ws/jobs/fullinfo", (200, XML_JOBS)))
    found = client.find_many(["id-a", "id-z"], names=names)
    assert list(found) == ["id-a"]
    assert pac.paths() == ["POST /ws/logon", "GET /ws/jobs/fullinfo"]


def test_no_jobs_is_a_404_and_an_empty_list():
    client, _pac = client_for(route("/ws/jobs/fullinfo", (404, XML_ERROR % "No matching job found")))
    assert client.find("a") is None and client.list() == []


def test_list_narrows_by_name_and_phase():
    client, _pac = client_for(route("/ws/jobs/fullinfo", (200, XML_JOBS)))
    assert [j["job_id"] for j in client.list(name="b")] == ["102"]
    assert [j["job_id"] for j in client.list(phases=["running"])] == ["101"]


def test_an_unknown_job_is_not_found():
    client, _pac = client_for(route("/ws/jobs/9", (404, XML_ERROR % "Job &lt;9&gt; is not found")))
    with pytest.raises(NotFound):
        client.get("9")


def test_kill_uses_the_form_endpoint():
    client, pac = client_for(route("/ws/jobs/kill", (200, {"message": "Job <7> is being terminated"}), "POST"))
    client.cancel("7")
    request = pac.sent[-1]
    assert request.content == b"ids=7" and request.headers["content-type"] == "application/x-www-form-urlencoded"


@pytest.mark.parametrize("missing", [(404, ""), (405, ""), (501, "<html>no</html>")])
def test_kill_falls_back_to_bkill_through_user_cmd(missing):
    routes = route("/ws/jobs/kill", missing, "POST")
    routes[("POST", "/platform/ws/userCmd")] = (200, "<cmdMsg>Job &lt;7&gt; is being terminated</cmdMsg>")
    client, pac = client_for(routes)
    client.cancel("7")
    assert pac.paths() == ["POST /ws/logon", "POST /ws/jobs/kill", "POST /ws/userCmd"]
    assert pac.sent[-1].content == b"<UserCmd><cmd>bkill 7</cmd></UserCmd>"
    assert pac.sent[-1].headers["content-type"] == "application/xml"


def test_bkill_of_a_finished_job_is_fine_and_of_an_unknown_one_not_found():
    routes = route("/ws/jobs/kill", (404, ""), "POST")
    routes[("POST", "/platform/ws/userCmd")] = [(200, {"cmdMsg": "Job <7>: Job has already finished"}),
                                                (200, {"cmdMsg": "Job <8>: No matching job found"})]
    client, _pac = client_for(routes)
    client.cancel("7")
    with pytest.raises(NotFound):
        client.cancel("8")


@pytest.mark.parametrize("refusal", [(500, XML_ERROR % "Job &lt;7&gt;: Job has already finished"),
                                     (400, {"message": "Job <7>: Job has already finished"})])
def test_kill_of_a_finished_job_is_no_error(refusal):
    client, pac = client_for(route("/ws/jobs/kill", refusal, "POST"))
    client.cancel("7")
    assert "POST /ws/userCmd" not in pac.paths()


def test_kill_of_an_unknown_job_does_not_fall_back():
    client, pac = client_for(route("/ws/jobs/kill", (404, XML_ERROR % "Job &lt;8&gt;: No matching job found"), "POST"))
    with pytest.raises(NotFound):
        client.cancel("8")
    assert "POST /ws/userCmd" not in pac.paths()


XML_QUEUES = """<queues total="3">
  <queue><queueName>normal</queueName><status>Open:Active</status><priority>30</priority>
    <maxNumJobSlots>8</maxNumJobSlots><runLimit>60</runLimit><memLimit>4 G</memLimit>
    <numPend>1</numPend><numRun>2</numRun><hosts>all</hosts></queue>
  <queue><queueName>long</queueName><status>Open:Active</status><runLimit>1440.0 min</runLimit></queue>
  <queue><queueName>closed</queueName><status>Closed:Inact</status></queue>
</queues>"""


def test_queues_and_hosts():
    routes = route("/ws/queues", (200, XML_QUEUES))
    routes[("GET", "/platform/ws/hosts")] = (200, {"@total": "2", "host": [
        {"hostName": "h1", "hostStatus": "ok", "maxCpus": "8", "maxMem": "15.5 G",
         "staticResources": {"staticResource": [{"name": "hostModel", "value": "X86_64"}]}},
        {"hostName": "h2", "hostStatus": "unavail"}]})
    client, _pac = client_for(routes)
    inventory = client.inventory()
    normal, long_queue, closed = inventory["queues"]
    assert (normal["max_slots"], normal["run_limit_minutes"], normal["memory_limit_mb"]) == (8, 60, 4096)
    assert (normal["pending"], normal["running"], normal["open"], normal["active"]) == (1, 2, True, True)
    assert long_queue["run_limit_minutes"] == 1440 and not closed["open"] and not closed["active"]
    host, down = inventory["hosts"]
    assert (host["name"], host["ncpus"], host["max_memory_mb"], host["model"], host["usable"]) == (
        "h1", 8, 15872, "X86_64", True)
    assert (down["status"], down["usable"], down["ncpus"]) == ("unavail", False, None)


@pytest.mark.parametrize("params, field", [
    ({"queue": "nosuch"}, "queue"),
    ({"queue": "closed"}, "queue"),
    ({"queue": "normal", "resources": {"time_limit": 61}}, "resources.time_limit"),
    ({"queue": "normal", "resources": {"tasks": 4, "cpus_per_task": 3}}, "resources.tasks"),
    ({"queue": "normal", "resources": {"memory": "5G"}}, "resources.memory"),
    ({"resources": {"time_limit": 2000}}, "resources.time_limit"),
])
def test_check_refuses_what_the_queue_never_runs(params, field):
    client, _pac = client_for(route("/ws/queues", (200, XML_QUEUES)))
    with pytest.raises(SpecError) as err:
        client.check(spec(**params))
    assert err.value.field == field


def test_check_reads_the_queues_once_and_passes_what_fits():
    client, pac = client_for(route("/ws/queues", (200, XML_QUEUES)))
    client.check(spec(queue="normal", resources={"time_limit": 60, "tasks": 8, "memory": "4G"}))
    client.check(spec(resources={"time_limit": 600}))
    client.check(spec(lsf={"-q": "long"}, resources={"time_limit": 600}))
    # The hosts are read once too; this PAC does not serve them (404), so only the queues count.
    assert pac.paths() == ["POST /ws/logon", "GET /ws/queues", "GET /ws/hosts"]


HOSTS = {"@total": "3", "host": [
    {"hostName": "big", "hostStatus": "unavail", "maxCpus": "16", "maxMem": "64 G"},
    {"hostName": "small", "hostStatus": "ok", "maxCpus": "8", "maxJobs": "4", "maxMem": "8 G"},
    {"hostName": "nosize", "hostStatus": "ok"}]}


def hosts_client(queue_hosts="all"):
    queues = {"@total": "1", "queue": {"queueName": "q", "status": "Open:Active", "hosts": queue_hosts}}
    routes = route("/ws/queues", (200, queues))
    routes[("GET", "/platform/ws/hosts")] = (200, HOSTS)
    return client_for(routes)[0]


@pytest.mark.parametrize("resources, field, words", [
    ({"tasks": 2, "cpus_per_task": 17}, "resources.cpus_per_task", "34 slots on one host, but the largest host has 16"),
    ({"nodes": 2, "tasks_per_node": 17}, "resources.tasks_per_node", "17 slots on one host"),
    ({"tasks": 21}, "resources.tasks", "21 slots (tasks x cpus_per_task), but all hosts together have 20"),
    ({"memory": "65G"}, "resources.memory", "66560 MB per host, but the largest host has 65536 MB"),
])
def test_check_refuses_a_shape_no_host_can_hold_even_a_host_that_is_down(resources, field, words):
    with pytest.raises(SpecError) as err:
        hosts_client().check(spec(resources=resources))
    assert err.value.field == field and words in str(err.value)


def test_check_passes_what_the_largest_host_holds_and_uses_the_queues_hosts():
    client = hosts_client()
    client.check(spec(resources={"tasks": 2, "cpus_per_task": 8, "memory": "64G"}))
    client.check(spec(resources={"tasks": 20}))
    # A queue that names its hosts dispatches only there: "small" has 4 job slots (MXJ).
    with pytest.raises(SpecError) as err:
        hosts_client("small").check(spec(resources={"tasks": 1, "cpus_per_task": 5}))
    assert "the largest host has 4" in str(err.value)
    # Host groups PAC does not expand: every host counts.
    hosts_client("hgroup1").check(spec(resources={"tasks": 1, "cpus_per_task": 16}))


def test_describe_logs_on():
    client, _pac = client_for({("POST", "/platform/ws/logon"): LOGON_XML})
    assert client.describe()["manager"] == "LSF"


@pytest.mark.parametrize("answer", [
    (200, "<!DOCTYPE html><html><body>Sign in</body></html>"),
    (200, {"jobs": "notalist"}),
    (200, ""),
    (200, "not json at all"),
    (200, "<jobs><job><jobId>1</jobId>"),
    (200, [1, 2]),
    (200, {"job": [{"jobStatus": "RUN"}]}),
])
@pytest.mark.parametrize("verb", ["get", "list", "submit", "queues", "hosts", "describe"])
def test_malformed_answers_are_malformed_response(answer, verb):
    routes = dict((key, answer) for key in [("GET", "/platform/ws/jobs/1"), ("GET", "/platform/ws/jobs/fullinfo"),
                                            ("POST", "/platform/ws/jobs/submit"), ("GET", "/platform/ws/queues"),
                                            ("GET", "/platform/ws/hosts")])
    routes[("POST", "/platform/ws/logon")] = answer if verb == "describe" else LOGON_JSON
    client, _pac = client_for(routes)
    calls = {"get": lambda: client.get("1"), "list": client.list, "submit": lambda: client.submit(spec()),
             "queues": client.queues, "hosts": client.hosts, "describe": client.describe}
    with pytest.raises(MalformedResponse) as err:
        calls[verb]()
    assert_no_secret(err.value)


@pytest.mark.parametrize("body", ['<jobs total="0"/>', "<jobs/>", {"@total": "0"}])
def test_an_empty_list_is_no_jobs(body):
    client, _pac = client_for(route("/ws/jobs/fullinfo", (200, body)))
    assert client.list() == []


def test_secrets_are_scrubbed_from_error_pages():
    page = "<error><message>bad request from bridge with %s and %s</message></error>" % (
        PASSWORD, COOKIE)
    client, _pac = client_for(route("/ws/jobs/1", (500, page)))
    with pytest.raises(BridgeError) as err:
        client.get("1")
    assert_no_secret(err.value)
    assert re.search(r"\*{8}", str(err.value))


@pytest.mark.parametrize("fault", MODES)
def test_every_verb_against_a_fault_server_is_a_typed_error_without_secrets(fault):
    """test_malformed_answers' matrix for LSF, which is not in the registry yet."""
    with FaultServer(mode=fault, delay=1.5) as server:
        options = {"url": server.url, "timeout": 1.0, "retries": 0, "user": "bridge", "password": PASSWORD}
        client = LsfClient.from_options(options.get)
        try:
            for verb, call in sorted(VERBS.items()):
                if verb == "logs":
                    continue
                try:
                    outcome = call(client)
                except BridgeError as exc:
                    assert_no_secret(exc)
                    if verb == "describe" and fault in WRONG_SHAPE:
                        assert isinstance(exc, MalformedResponse), "%s: %s" % (type(exc).__name__, exc)
                else:
                    assert verb == "render", "%s returned %.300r from a %s answer" % (verb, outcome, fault)
        finally:
            client.close()
