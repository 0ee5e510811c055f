"""tests/simulators/lsf_pac.py, the LSF Application Center simulator, seen with raw httpx requests.

The last tests are the independent check (issue 9 item 8): the request sequences that the IBM Bridge
Operator's LSF pod and IBM's lsf-faas lsflib.py send, as quantum-lsf.md §B describes them, written
here from that description.
"""

import os
import time
import uuid
from datetime import datetime, timezone
from xml.etree import ElementTree

import httpx
import pytest

from simulators.lsf_pac import LsfPacSimulator

USERS = {"alice": "s3cret&<x>", "bob": "hunter2"}
MINUTE = 0.4  # seconds in one LSF run-limit minute
JSON = {"Accept": "application/json"}


def start(tmp_path_factory, **options):
    options.setdefault("minute_seconds", MINUTE)
    options.setdefault("tick", 0.05)
    options.setdefault("kill_grace", 0.3)
    return LsfPacSimulator(str(tmp_path_factory.mktemp("lsf")), USERS, **options).start()


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    running = start(tmp_path_factory)
    yield running
    running.stop()


def logon_xml(user="alice", password=None):
    password = USERS[user] if password is None else password
    escaped = password.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "<User><name>%s</name><pass>%s</pass></User>" % (user, escaped)


def logon(sim, user="alice"):
    response = httpx.post(sim.url + "ws/logon", content=logon_xml(user), headers={**JSON, "Content-Type": "application/xml"})
    assert response.status_code == 200, response.text
    return {"Cookie": "platform_token=" + response.json()["token"].replace('"', "#quote#")}


def xml_escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def submit_body(params, files=(), boundary="OUTER", inner="INNER", app="generic"):
    """The nested multipart/mixed of "Submit a job (POST)": AppName, data (AppParams), attachments."""
    out = [b"--%s\r\nContent-Disposition: form-data; name=\"AppName\"\r\nContent-ID: <AppName>\r\n\r\n%s\r\n"
           % (boundary.encode(), app.encode()),
           b"--%s\r\nContent-Disposition: form-data; name=\"data\"\r\nContent-Type: multipart/mixed; boundary=%s\r\n"
           b"Content-ID: <data>\r\n\r\n" % (boundary.encode(), inner.encode())]
    all_params = dict(params)
    for name in dict(files):
        all_params["FILE_" + name] = (name + ",upload", "file")
    for pid, value in all_params.items():
        value, kind = value if isinstance(value, tuple) else (value, "")
        out.append(("--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\nContent-Type: application/xml; charset=UTF-8\r\n\r\n"
                    "<AppParam><id>%s</id><value>%s</value><type>%s</type></AppParam>\r\n"
                    % (inner, pid, pid, xml_escape(value), kind)).encode())
    out.append(b"--%s--\r\n" % inner.encode())
    for name, content in dict(files).items():
        out.append(b"--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
                   b"Content-Type: application/octet-stream\r\nContent-ID: <%s>\r\n\r\n%s\r\n"
                   % (boundary.encode(), name.encode(), name.encode(), name.encode(), content))
    out.append(b"--%s--\r\n" % boundary.encode())
    return b"".join(out)


def submit(sim, cookie, command, extra="", files=(), accept=None, **params):
    accept = JSON if accept is None else accept
    body = submit_body(dict(COMMANDTORUN=command, EXTRA_PARAMS=extra, **params), files)
    return httpx.post(sim.url + "ws/jobs/submit", content=body,
                      headers={**cookie, **accept, "Content-Type": "multipart/mixed; boundary=OUTER"})


def submitted(sim, cookie, command, extra="", **kwargs):
    response = submit(sim, cookie, command, extra, **kwargs)
    assert response.status_code == 200, response.text
    return response.json()["id"]


def job(sim, cookie, job_id):
    response = httpx.get(sim.url + "ws/jobs/%s" % job_id, headers={**cookie, **JSON})
    assert response.status_code == 200, response.text
    return response.json()["job"]


def wait_for(sim, cookie, job_id, statuses, timeout=10.0):
    deadline = time.time() + timeout
    while True:
        current = job(sim, cookie, job_id)
        if current["jobStatus"] in statuses or time.time() > deadline:
            return current
        time.sleep(0.05)


def error_message(response):
    return ElementTree.fromstring(response.content).findtext("message")


# -- logon and tokens ------------------------------------------------------------------------
def test_logon_answers_xml_by_default_and_json_when_asked(sim):
    xml = httpx.post(sim.url + "ws/logon", content=logon_xml(), headers={"Content-Type": "application/xml"})
    token = ElementTree.fromstring(xml.content).findtext("token")
    assert xml.status_code == 200 and xml.headers["content-type"].startswith("application/xml")
    assert token.startswith('alice"') and token.count('"') == 3
    data = httpx.post(sim.url + "ws/logon", content=logon_xml(), headers=JSON).json()
    assert set(data) == {"token", "csrftoken"} and data["token"].startswith('alice"')


def test_logon_refuses_a_wrong_password_and_an_empty_user(sim):
    wrong = httpx.post(sim.url + "ws/logon", content=logon_xml(password="nope"))
    assert wrong.status_code == 403 and "incorrect" in error_message(wrong)
    assert "nope" not in wrong.text
    empty = httpx.post(sim.url + "ws/logon", content="<User><name></name><pass>x</pass></User>", headers=JSON)
    assert empty.status_code == 400 and empty.json()["message"]


def test_missing_or_raw_quoted_token_is_403_with_pac_error_body(sim):
    none = httpx.get(sim.url + "ws/jobs/1")
    assert none.status_code == 403 and error_message(none)
    assert httpx.get(sim.url + "ws/jobs/1", headers=JSON).json()["message"]
    raw = httpx.post(sim.url + "ws/logon", content=logon_xml(), headers=JSON).json()["token"]
    quoted = httpx.get(sim.url + "ws/queues", headers={"Cookie": "platform_token=" + raw})
    assert quoted.status_code == 403 and "#quote#" in error_message(quoted)


def test_expired_token_is_403_then_a_new_logon_works(tmp_path_factory):
    short = start(tmp_path_factory, token_ttl=0.6)
    try:
        cookie = logon(short)
        assert httpx.get(short.url + "ws/queues", headers=cookie).status_code == 200
        time.sleep(0.7)
        expired = httpx.get(short.url + "ws/queues", headers={**cookie, **JSON})
        assert expired.status_code == 403 and "expired" in expired.json()["message"]
        assert httpx.get(short.url + "ws/queues", headers=logon(short)).status_code == 200
    finally:
        short.stop()


# -- submit and run --------------------------------------------------------------------------
SCRIPT = ("#!/bin/sh\ncat <<'EOF'\nquotes \"double\" 'single' $HOME `tick` \\back\\slash \\n ünïcødé ✓ 日本\nEOF\n"
          "printf 'to stderr\\n' >&2\n").encode()


def test_script_arrives_byte_exact_and_its_output_matches(sim, tmp_path):
    cookie = logon(sim)
    job_id = submitted(sim, cookie, '/bin/sh "bridge job.sh"',
                       '-q normal -o out.txt -e err.txt -cwd "%s" -Jd "bridge:ns/name-1" -J j1' % tmp_path,
                       files={"bridge job.sh": SCRIPT})
    assert isinstance(job_id, int)
    done = wait_for(sim, cookie, job_id, {"DONE", "EXIT"})
    assert (done["jobStatus"], done["exitStatus"], done["cwd"]) == ("DONE", "0", str(tmp_path))
    assert (tmp_path / "bridge job.sh").read_bytes() == SCRIPT
    assert (tmp_path / "out.txt").read_bytes() == SCRIPT.split(b"'EOF'\n")[1].split(b"EOF\n")[0]
    assert (tmp_path / "err.txt").read_bytes() == b"to stderr\n"
    assert done["description"] == "bridge:ns/name-1" and done["jobName"] == "j1"


def test_environment_and_template_parameters(sim, tmp_path):
    cookie = logon(sim)
    job_id = submitted(sim, cookie, 'echo "$GREETING $LSB_JOBID $LSB_QUEUE" > env.txt', '-env "all, GREETING=hi there" -cwd %s' % tmp_path,
                       QUEUE="short", JOB_NAME="named")
    done = wait_for(sim, cookie, job_id, {"DONE", "EXIT"})
    assert (done["jobStatus"], done["queue"], done["jobName"]) == ("DONE", "short", "named")
    assert (tmp_path / "env.txt").read_text() == "hi there %d short\n" % job_id


def test_exit_3_is_exit_with_exit_status_3(sim):
    cookie = logon(sim)
    done = wait_for(sim, cookie, submitted(sim, cookie, "exit 3"), {"DONE", "EXIT"})
    assert (done["jobStatus"], done["exitStatus"], done["exitInfo"]) == ("EXIT", "3", "")


def test_run_limit_kills_with_term_runlimit(sim):
    cookie = logon(sim)
    job_id = submitted(sim, cookie, "sleep 30", "-W 1")
    assert wait_for(sim, cookie, job_id, {"RUN"})["runLimit"] == "1"
    done = wait_for(sim, cookie, job_id, {"DONE", "EXIT"})
    assert (done["jobStatus"], done["exitInfo"]) == ("EXIT", "TERM_RUNLIMIT")


def test_queue_runlimit_applies_and_caps_the_job(sim):
    cookie = logon(sim)
    over = submit(sim, cookie, "true", "-q short -W 5")
    assert over.status_code == 400 and "hard limit" in over.json()["message"]
    job_id = submitted(sim, cookie, "sleep 30", "-q short")
    assert wait_for(sim, cookie, job_id, {"DONE", "EXIT"})["exitInfo"] == "TERM_RUNLIMIT"


def test_memory_limit_kills_with_term_memlimit(sim):
    cookie = logon(sim)
    hog = "python3 -c 'import time; b = bytearray(80 << 20); time.sleep(30)'"
    done = wait_for(sim, cookie, submitted(sim, cookie, hog, "-M 20"), {"DONE", "EXIT"})
    assert (done["jobStatus"], done["exitInfo"]) == ("EXIT", "TERM_MEMLIMIT") and int(done["mem"]) > 20


def test_kill_gives_term_owner_and_a_second_kill_is_refused(sim):
    cookie = logon(sim)
    job_id = submitted(sim, cookie, "sleep 30")
    wait_for(sim, cookie, job_id, {"RUN"})
    killed = httpx.post(sim.url + "ws/jobs/kill", data={"ids": str(job_id)}, headers=cookie)
    assert killed.status_code == 200 and "is being terminated" in killed.text
    done = wait_for(sim, cookie, job_id, {"DONE", "EXIT"})
    assert (done["jobStatus"], done["exitInfo"]) == ("EXIT", "TERM_OWNER")
    again = httpx.post(sim.url + "ws/jobs/kill", data={"ids": str(job_id)}, headers={**cookie, **JSON})
    assert again.status_code == 400 and "already finished" in again.json()["message"]


def test_slots_queue_job_slot_limit_keeps_the_next_job_pending_until_slots_free(sim):
    cookie = logon(sim)
    first = submitted(sim, cookie, "sleep 30", "-n 4")
    wait_for(sim, cookie, first, {"RUN"})
    second = submitted(sim, cookie, "true", "-n 2")
    time.sleep(0.2)
    pending = job(sim, cookie, second)
    assert (pending["jobStatus"], pending["pendReason"]) == ("PEND", "The queue has reached its job slot limit")
    normal = httpx.get(sim.url + "ws/queues?names=normal", headers={**cookie, **JSON}).json()["queue"]
    assert (normal["numRun"], normal["numPend"]) == ("4", "2")
    httpx.post(sim.url + "ws/jobs/kill", data={"ids": str(first)}, headers=cookie)
    assert wait_for(sim, cookie, second, {"DONE"})["jobStatus"] == "DONE"


def test_inactive_queue_keeps_the_job_pending_with_a_reason(sim):
    cookie = logon(sim)
    job_id = submitted(sim, cookie, "true", "-q inactive")
    time.sleep(0.3)
    pending = job(sim, cookie, job_id)
    assert (pending["jobStatus"], pending["pendReason"]) == ("PEND", "The queue is inactivated by the administrator")
    httpx.post(sim.url + "ws/jobs/kill", data={"ids": str(job_id)}, headers=cookie)
    assert job(sim, cookie, job_id)["exitInfo"] == "TERM_OWNER"


def pend_reason(sim, cookie, job_id, timeout=10.0):
    """The job's pending reason once the scheduler has given one."""
    deadline = time.time() + timeout
    while True:
        reason = job(sim, cookie, job_id)["pendReason"]
        if reason or time.time() > deadline:
            return reason
        time.sleep(0.05)


def test_dependency_waits_runs_and_is_never_satisfied_after_the_wrong_end(sim, tmp_path):
    cookie = logon(sim)
    go = tmp_path / "go"
    # The first job ends (exit 3) only when the test says so, however slow the machine is.
    first = submitted(sim, cookie, "while [ ! -e %s ]; do sleep 0.05; done; exit 3" % go)
    waits_done = submitted(sim, cookie, "true", "-w 'done(%s)'" % first)
    waits_exit = submitted(sim, cookie, "true", "-w 'exit(%s) && started(%s)'" % (first, first))
    assert pend_reason(sim, cookie, waits_done) == "The job is waiting for its dependency condition(s) to be satisfied"
    go.touch()
    assert wait_for(sim, cookie, waits_exit, {"DONE"})["jobStatus"] == "DONE"
    never = wait_for(sim, cookie, waits_done, set(), timeout=0.3)
    assert (never["jobStatus"], never["pendReason"]) == ("PEND", "The dependency condition is invalid or never satisfied")
    httpx.post(sim.url + "ws/jobs/kill", data={"ids": str(waits_done)}, headers=cookie)
    unknown = submit(sim, cookie, "true", "-w 'done(987654)'")
    assert unknown.status_code == 400 and "No matching job found" in unknown.json()["message"]
    assert submit(sim, cookie, "true", "-w 'done(%s) || done(1)'" % first).status_code == 400


def test_refusals_unknown_queue_closed_queue_bad_multipart_other_app(sim):
    cookie = logon(sim)
    unknown = submit(sim, cookie, "true", "-q nosuch")
    assert unknown.status_code == 400 and "No such queue" in unknown.json()["message"]
    closed = submit(sim, cookie, "true", "-q closed", accept={})
    assert closed.status_code == 400 and "closed" in error_message(closed)
    assert submit(sim, cookie, "true", "-bogus").status_code == 400
    headers = {**cookie, **JSON, "Content-Type": "multipart/mixed; boundary=OUTER"}
    body = submit_body({"COMMANDTORUN": "true"})
    for bad, ctype in ((body[:-12], None), (b"garbage", None), (body, "multipart/mixed"),
                       (body, "application/xml"), (body.replace(b"generic", b"FLUENT"), None),
                       (submit_body({"COMMANDTORUN": "true", "F": ("missing.sh,upload", "file")}), None)):
        response = httpx.post(sim.url + "ws/jobs/submit", content=bad, headers={**headers, **({"Content-Type": ctype} if ctype else {})})
        assert response.status_code == 400 and response.json()["message"], (bad[:40], ctype)
    chunked = httpx.post(sim.url + "ws/jobs/submit", content=iter([body]), headers=headers)
    assert chunked.status_code == 411 and chunked.json()["message"]


# -- queries ---------------------------------------------------------------------------------
def test_query_by_id_list_and_by_attributes(sim):
    alice, bob = logon(sim), logon(sim, "bob")
    first = submitted(sim, alice, "true", "-J findme")
    second = submitted(sim, alice, "true", "-J findme")
    wait_for(sim, alice, second, {"DONE"})
    both = httpx.get(sim.url + "ws/jobs/%d,%d" % (first, second), headers={**alice, **JSON}).json()
    assert both["@total"] == "2" and [j["jobId"] for j in both["job"]] == [str(first), str(second)]
    xml = ElementTree.fromstring(httpx.get(sim.url + "ws/jobs?jobname=findme&status=DONE", headers=alice).content)
    assert xml.tag == "pseudoJobs" and {e.findtext("jobId") for e in xml} == {str(first), str(second)}
    full = httpx.get(sim.url + "ws/jobs/fullinfo?jobname=findme", headers={**alice, **JSON}).json()
    assert {j["description"] for j in full["job"]} == {""}
    assert httpx.get(sim.url + "ws/jobs?jobname=findme", headers=bob).status_code == 404
    assert httpx.get(sim.url + "ws/jobs/%d" % first, headers=bob).status_code == 403
    assert httpx.get(sim.url + "ws/jobs?username=all", headers=bob).status_code == 403
    assert httpx.get(sim.url + "ws/jobs/999999", headers=alice).status_code == 404
    assert httpx.get(sim.url + "ws/jobs/0", headers=alice).status_code == 400


def test_jobname_takes_the_wildcard_anywhere_and_basic_records_carry_no_description(sim):
    """IBM: "Get basic job information (GET)": jobname may hold * anywhere; basic info is <pseudoJob>
    (id, jobId, jobStatus, ...), the description only in the detail."""
    alice = logon(sim)
    run = uuid.uuid4().hex[:6]
    ids = {name: submitted(sim, alice, "true", "-J %s -Jd bridge:%s" % (name, name))
           for name in ("wa-%s-x1" % run, "wa-%s-x2" % run, "wb-%s-x1" % run)}

    def named(pattern):
        response = httpx.get(sim.url + "ws/jobs", params={"jobname": pattern}, headers={**alice, **JSON})
        if response.status_code == 404:
            return set()
        records = response.json()["pseudoJob"]
        records = records if isinstance(records, list) else [records]
        assert all("description" not in record for record in records)
        return {int(record["jobId"]) for record in records}

    assert named("wa-%s-x1" % run) == {ids["wa-%s-x1" % run]}
    assert named("wa-%s-*" % run) == {ids["wa-%s-x1" % run], ids["wa-%s-x2" % run]}
    assert named("w*-%s-x1" % run) == {ids["wa-%s-x1" % run], ids["wb-%s-x1" % run]}
    assert named("wa-%s-x" % run) == set(), "without * a name matches only itself (404)"
    assert named("wa-%s.x1" % run) == set(), "only * is a wildcard"
    full = httpx.post(sim.url + "ws/jobs/getfullinfo", content="ids=%d" % ids["wb-%s-x1" % run],
                      headers={**alice, **JSON, "Content-Type": "application/x-www-form-urlencoded"}).json()
    assert full["job"]["description"] == "bridge:wb-%s-x1" % run


def test_queues_and_hosts(sim):
    cookie = {**logon(sim), **JSON}
    queues = httpx.get(sim.url + "ws/queues", headers=cookie).json()["queue"]
    by_name = {q["queueName"]: q for q in queues}
    assert by_name["short"]["runLimit"] == "1" and by_name["short"]["memLimit"] == "256"
    assert by_name["closed"]["status"] == "Closed:Inact" and by_name["normal"]["isDefault"] == "true"
    active = httpx.get(sim.url + "ws/queues?status=openactive", headers=cookie).json()["queue"]
    assert {q["queueName"] for q in active} == {"normal", "short"}
    assert httpx.get(sim.url + "ws/queues?names=nosuch", headers=cookie).status_code == 404
    host = httpx.get(sim.url + "ws/hosts", headers=cookie).json()["host"]
    assert host["hostStatus"] == "ok" and {"nCpus", "maxMem"} <= {r["name"] for r in host["staticResources"]["staticResource"]}


def test_clean_period_forgets_finished_jobs(tmp_path_factory):
    short = start(tmp_path_factory, clean_period=1.0)
    try:
        cookie = logon(short)
        job_id = submitted(short, cookie, "true")
        assert wait_for(short, cookie, job_id, {"DONE"})["jobStatus"] == "DONE"
        time.sleep(1.1)
        assert httpx.get(short.url + "ws/jobs/%d" % job_id, headers=cookie).status_code == 404
    finally:
        short.stop()


def test_shutdown_kills_running_jobs(tmp_path_factory, tmp_path):
    own = start(tmp_path_factory)
    cookie = logon(own)
    job_id = submitted(own, cookie, "echo $$ > pid; exec sleep 60", "-cwd %s" % tmp_path)
    wait_for(own, cookie, job_id, {"RUN"})
    own.stop()
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# -- independent check: the IBM Bridge Operator's LSF pod (quantum-lsf.md §B2) ----------------
def test_bridge_operator_lsf_pod_sequence(sim):
    ac = sim.url  # the pod's resourceURL ends with /platform/
    login = httpx.post(ac + "ws/logon", content="<User><name>bob</name> <pass>hunter2</pass> </User>",
                       headers={"Accept": "application/json", "Content-Type": "application/xml"})
    token = login.json()["token"].replace('"', "#quote#")
    # The pod reads the token's time between the first two #quote#.
    datetime.strptime(token.split("#quote#")[1], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    cookie = {"Cookie": "platform_token=" + token}
    # Hand-built multipart/mixed: AppName generic, AppParams (Content-Transfer-Encoding and
    # Accept-Language headers, CRLF after each AppParam), the file AppParam written with the OUTER
    # boundary (which leaves the inner part unclosed), the file part named "script" without a
    # filename, and no CRLF after the final delimiter.
    outer, inner = str(uuid.uuid4()), str(uuid.uuid4())
    params = {"JOB_NAME": "bridge-pod-job", "QUEUE": "normal", "OUTPUT_FILE": "pod.out", "ERROR_FILE": "pod.err",
              "RUNLIMITMINUTE": "5",
              "COMMANDTORUN": "chmod 755 `pwd`/script;sed -i -e 's/\\r$//' `pwd`/script;`pwd`/script"}
    head = "Content-Type: application/xml; charset=UTF-8\r\nContent-Transfer-Encoding: 8bit\r\nAccept-Language: en\r\n\r\n"
    body = "--%s\r\nContent-Disposition: form-data; name=\"AppName\"\r\nContent-ID: <AppName>\r\n\r\ngeneric\r\n" % outer
    body += ("--%s\r\nContent-Disposition: form-data; name=\"data\"\r\nContent-ID: <data>\r\nAccept-Language: en-us\r\n"
             "Content-Type: multipart/mixed; boundary=%s\r\n\r\n" % (outer, inner))
    for name, value in params.items():
        body += "--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n%s<AppParam><id>%s</id><value>%s</value><type></type></AppParam>\r\n" % (
            inner, name, head, name, value)
    body += ("--%s\r\nContent-Disposition: form-data; name=\"script\"\r\n%s"
             "<AppParam><id>script</id><value>script,upload</value><type>file</type></AppParam>\r\n" % (outer, head))
    body += "--%s--\r\n" % inner
    body += ("--%s\r\nContent-Disposition: form-data; name=\"script\"\r\nContent-Type: application/octet-stream\r\n"
             "Content-ID: <script>\r\nContent-Transfer-Encoding: 8bit\r\n\r\n#!/bin/sh\r\necho pod says hi\r\n\r\n--%s--" % (outer, outer))
    submitted_job = httpx.post(ac + "ws/jobs/submit", content=body.encode(),
                               headers={**cookie, "Accept": "application/json", "Content-Type": "multipart/mixed; boundary=" + outer})
    assert submitted_job.status_code == 200, submitted_job.text
    job_id = submitted_job.json()["id"]
    assert isinstance(job_id, int) and job_id > 0  # the pod unmarshals {"id": <int>}
    deadline = time.time() + 10
    while True:
        info = httpx.get(ac + "ws/jobs/%d" % job_id, headers={**cookie, "Accept": "application/json"}).json()
        if info["job"]["jobStatus"] in ("DONE", "EXIT") or time.time() > deadline:
            break
        time.sleep(0.05)
    assert info["@total"] == "1" and info["job"]["jobStatus"] == "DONE"
    assert info["job"]["startTime"] and info["job"]["endTime"] and info["job"]["cwd"]
    with open(info["job"]["cwd"] + "/pod.out") as out:
        assert out.read() == "pod says hi\n"
    # Kill: POST ws/userCmd with <UserCmd><cmd>bkill ID</cmd></UserCmd>.
    sleeper = submitted(sim, cookie, "sleep 30")
    wait_for(sim, cookie, sleeper, {"RUN"})
    killed = httpx.post(ac + "ws/userCmd", content="<UserCmd><cmd>bkill %d</cmd></UserCmd>" % sleeper,
                        headers={**cookie, "Accept": "application/json", "Content-Type": "application/xml"})
    assert killed.status_code == 200 and "is being terminated" in killed.json()["cmdMsg"]
    assert wait_for(sim, cookie, sleeper, {"EXIT"})["exitInfo"] == "TERM_OWNER"


# -- independent check: IBM lsf-faas lsflib.py, legacy pacclient API (quantum-lsf.md §B1) -------
def test_lsf_faas_lsflib_sequence(sim, tmp_path):
    ac = sim.url
    accept = "text/plain,application/xml,text/xml,multipart/mixed"
    # Logon: GET .../webservice/pacclient/logon/ with an XML body (password XML-escaped), an empty
    # platform_token cookie; the reply's <token>.
    logon_reply = httpx.request("GET", ac + "webservice/pacclient/logon/",
                                content="<User><name>alice</name> <pass>s3cret&amp;&lt;x&gt;</pass> </User>",
                                headers={"Content-Type": "application/xml", "Cookie": "platform_token=",
                                         "Accept": accept, "Accept-Language": "en-us"})
    token = ElementTree.fromstring(logon_reply.content).find("token").text
    cookie = "platform_token=" + token.replace('"', "#quote#")
    bad = httpx.request("GET", ac + "webservice/pacclient/logon/", content="<User><name>alice</name> <pass>x</pass> </User>",
                        headers={"Content-Type": "application/xml", "Accept": accept})
    assert bad.status_code == 200 and ElementTree.fromstring(bad.content).tag == "errMsg"
    # Submit: POST .../submitapp, boundaries _lsf_faas_boundary / _lsf_faas_file_boundary, lines
    # joined with CRLF, the uploaded file with Content-Transfer-Encoding binary.
    script = b"print('faas ran \\u2713')\n"
    lines = [b"--_lsf_faas_boundary", b'Content-Disposition: form-data; name="AppName"', b"Content-ID: <AppName>", b"", b"generic",
             b"--_lsf_faas_boundary", b'Content-Disposition: form-data; name="data"',
             b"Content-Type: multipart/mixed; boundary=_lsf_faas_file_boundary", b"Accept-Language: en-us", b"Content-ID: <data>", b""]
    for pid, value, kind in (("COMMANDTORUN", "python3 lsf_faas.py", ""), ("ERROR_FILE", "./lsf.errput", ""),
                             ("OUTPUT_FILE", "./lsf.output", ""), ("INPUT_FILE", "lsf_faas.py", "file")):
        lines += [b"--_lsf_faas_file_boundary", b'Content-Disposition: form-data; name="%s"' % pid.encode(),
                  b"Content-Type: application/xml; charset=UTF-8", b"Content-Transfer-Encoding: 8bit", b"Accept-Language: en-us", b"",
                  b"<AppParam><id>%s</id><value>%s</value><type>%s</type></AppParam>" % (
                      pid.encode(), (value + (",upload" if kind else "")).encode(), kind.encode())]
    lines += [b"--_lsf_faas_file_boundary--", b"",
              b"--_lsf_faas_boundary", b'Content-Disposition: form-data; name="lsf_faas.py"; filename="lsf_faas.py"',
              b"Content-Type: application/octet-stream", b"Content-Transfer-Encoding: binary", b"Accept-Language: en-us",
              b"Content-ID: <lsf_faas.py>", b"", script, b"--_lsf_faas_boundary--", b""]
    body = b"\r\n".join(lines)
    reply = httpx.post(ac + "webservice/pacclient/submitapp", content=body,
                       headers={"Content-Type": "multipart/mixed; boundary=_lsf_faas_boundary", "Accept": "text/xml,application/xml;",
                                "Cookie": cookie, "Accept-Language": "en-us"})
    assert reply.status_code == 200 and "errMsg" not in reply.text, reply.text
    job_id = ElementTree.fromstring(reply.content).iter("id").__next__().text
    # Status: GET .../pacclient/jobs?id=N -> <Jobs><Job><status>Done|Exit|...</status>.
    deadline = time.time() + 10
    while True:
        jobs = ElementTree.fromstring(httpx.get(ac + "webservice/pacclient/jobs?id=" + job_id,
                                                headers={"Cookie": cookie, "Accept": accept}).content)
        status = jobs.find("Job").findtext("status")
        if status in ("Done", "Exit") or time.time() > deadline:
            break
        time.sleep(0.05)
    assert status == "Done"
    cwd = job(sim, {"Cookie": cookie}, job_id)["cwd"]
    with open(cwd + "/lsf.output", encoding="utf-8") as out:
        assert out.read() == "faas ran \u2713\n"
    with open(cwd + "/lsf_faas.py", "rb") as uploaded:
        assert uploaded.read() == script
    none = ElementTree.fromstring(httpx.get(ac + "webservice/pacclient/jobs?id=999999", headers={"Cookie": cookie}).content)
    assert none.findtext("note")
    # Kill: GET .../pacclient/jobOperation/kill/{id} -> <actionMsg>, then <errMsg> once finished.
    sleeper = str(submitted(sim, {"Cookie": cookie}, "sleep 30"))
    action = httpx.get(ac + "webservice/pacclient/jobOperation/kill/" + sleeper, headers={"Cookie": cookie, "Accept": "application/xml"})
    assert ElementTree.fromstring(action.content).tag == "actionMsg"
    wait_for(sim, {"Cookie": cookie}, sleeper, {"EXIT"})
    again = httpx.get(ac + "webservice/pacclient/jobOperation/kill/" + sleeper, headers={"Cookie": cookie})
    assert ElementTree.fromstring(again.content).tag == "errMsg"
    # Logout: GET .../pacclient/logout/ -> "ok"; the token no longer works.
    assert httpx.get(ac + "webservice/pacclient/logout/", headers={"Cookie": cookie}).text == "ok"
    assert httpx.get(ac + "webservice/pacclient/jobs", headers={"Cookie": cookie}).status_code == 403


# -- job arrays (LSF admin guide "Job arrays", bsub -J) ---------------------------------------
def test_an_array_runs_one_element_per_index_with_lsb_jobindex_and_percent_i(sim, tmp_path):
    cookie = logon(sim)
    array_id = submitted(sim, cookie, 'echo "$LSB_JOBINDEX $LSB_JOBNAME" > "idx.$LSB_JOBINDEX"; exit $((LSB_JOBINDEX == 3))',
                         '-J "sweep[1-5:2,8]%%2" -o "out.%%J.%%I" -cwd "%s"' % tmp_path)
    elements = wait_all(sim, cookie, array_id, 4)
    assert [e["jobId"] for e in elements] == ["%d[%d]" % (array_id, i) for i in (1, 3, 5, 8)]
    assert [e["jobName"] for e in elements] == ["sweep[%d]" % i for i in (1, 3, 5, 8)]
    assert [e["jobStatus"] for e in elements] == ["DONE", "EXIT", "DONE", "DONE"]
    assert (tmp_path / "idx.8").read_text() == "8 sweep[8]\n"
    assert (tmp_path / ("out.%d.3" % array_id)).exists()
    one = httpx.get(sim.url + "ws/jobs/%d%%5B3%%5D" % array_id, headers={**cookie, **JSON}).json()
    assert one["job"]["jobId"] == "%d[3]" % array_id and one["job"]["exitStatus"] == "1"


def test_a_plain_job_sees_lsb_jobindex_0(sim, tmp_path):
    cookie = logon(sim)
    job_id = submitted(sim, cookie, 'echo "[$LSB_JOBINDEX]" > idx', '-cwd "%s"' % tmp_path)
    wait_for(sim, cookie, job_id, {"DONE"})
    assert (tmp_path / "idx").read_text() == "[0]\n"


def test_the_running_element_limit_holds_elements_back_with_its_reason(sim):
    cookie = logon(sim)
    array_id = submitted(sim, cookie, "sleep 30", '-J "held[1-3]%1"')
    elements = wait_running(sim, cookie, array_id, 1)
    waiting = [e for e in elements if e["jobStatus"] == "PEND"]
    assert len(waiting) == 2 and {e["pendReason"] for e in waiting} == {"The job array has reached its running element limit"}
    message = httpx.post(sim.url + "ws/jobs/kill", content=b"ids=%d" % array_id,
                         headers={**cookie, **JSON, "Content-Type": "application/x-www-form-urlencoded"}).json()
    assert "Operation is in progress" in message["actionMsg"]
    ended = wait_all(sim, cookie, array_id, 3)
    assert {e["exitInfo"] for e in ended} == {"TERM_OWNER"}


def test_one_element_is_killed_by_its_id(sim):
    cookie = logon(sim)
    array_id = submitted(sim, cookie, "sleep 30", '-J "one[1-2]"')
    wait_running(sim, cookie, array_id, 2)
    killed = httpx.post(sim.url + "ws/userCmd", content=b"<UserCmd><cmd>bkill %d[2]</cmd></UserCmd>" % array_id,
                        headers={**cookie, **JSON, "Content-Type": "application/xml"}).json()
    assert killed["cmdMsg"] == "Job <%d[2]> is being terminated" % array_id
    second = wait_for(sim, cookie, "%d%%5B2%%5D" % array_id, {"EXIT"})
    assert second["exitInfo"] == "TERM_OWNER"
    first = job(sim, cookie, "%d%%5B1%%5D" % array_id)
    assert first["jobStatus"] == "RUN"
    httpx.post(sim.url + "ws/jobs/kill", content=b"ids=%d" % array_id,
               headers={**cookie, "Content-Type": "application/x-www-form-urlencoded"})


@pytest.mark.parametrize("spec, message", [
    ("bad[0-3]", "Bad job array index list"),
    ("bad[3-1]", "Bad job array index list"),
    ("bad[1-x]", "Bad job array index list"),
    ("bad[1-1001]", "MAX_JOB_ARRAY_SIZE (1000)"),
    ("bad[1-3]%0", "running element limit"),
    ("bad[1-3", "Bad job name"),
    ("b" * 251 + "[1-3]", "255"),
])
def test_array_specifications_lsf_refuses(sim, spec, message):
    response = submit(sim, logon(sim), "true", "-J '%s'" % spec)
    assert response.status_code == 400 and message in response.json()["message"]


def test_max_job_array_size_is_the_largest_index(tmp_path_factory):
    small = start(tmp_path_factory, max_job_array_size=10)
    try:
        cookie = logon(small)
        assert submit(small, cookie, "true", '-J "a[9-11]"').status_code == 400
        assert submit(small, cookie, "true", '-J "a[10]"').status_code == 200
    finally:
        small.stop()


def wait_all(sim, cookie, array_id, count, timeout=20.0):
    """The array's elements once all have ended."""
    deadline = time.time() + timeout
    while True:
        elements = all_elements(sim, cookie, array_id)
        if (len(elements) == count and all(e["jobStatus"] in ("DONE", "EXIT") for e in elements)) or time.time() > deadline:
            return elements
        time.sleep(0.05)


def wait_running(sim, cookie, array_id, running, timeout=10.0):
    deadline = time.time() + timeout
    while True:
        elements = all_elements(sim, cookie, array_id)
        if sum(e["jobStatus"] == "RUN" for e in elements) >= running or time.time() > deadline:
            return elements
        time.sleep(0.05)


def all_elements(sim, cookie, array_id):
    found = job(sim, cookie, array_id)
    return found if isinstance(found, list) else [found]
