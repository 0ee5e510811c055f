"""LsfClient and the LSF PAC simulator, written apart from the same documents, speak to each other.

Not a replacement for the integration playbooks of issue 9 (modules, controller): the first check
that the client's protocol choices and the simulator's agree, end to end through real HTTP.
"""

import signal
import time

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils import _jobs
from ansible_collections.bridge.hpc.plugins.module_utils._errors import AuthFailed, SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.client import LsfClient

from simulators.lsf_pac import parse_memory_limit

TRICKY = "#!/bin/bash\necho \"hi $X\" 'q' \\\\ ünï {{ not_jinja }}\nexit 3\n"


@pytest.fixture
def client(lsf_pac):
    lsf = LsfClient(lsf_pac["url"], user=lsf_pac["user"], password=lsf_pac["password"], retries=0)
    yield lsf
    lsf.close()


def wait_running(client, job_id, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(job_id)
        if job["phase"] != "queued" or time.monotonic() > deadline:
            return job
        time.sleep(0.1)


def wait_terminal(client, job_id, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(job_id)
        if job["terminal"] or time.monotonic() > deadline:
            return job
        time.sleep(0.1)


def test_a_byte_exact_script_runs_and_its_exit_code_comes_back(client, tmp_path):
    out = tmp_path / "out-%J.txt"
    spec = normalize_spec({"script": TRICKY, "identity": "agree-1", "environment": {"X": "y"}, "stdout": str(out),
                           "queue": "normal", "resources": {"time_limit": 5, "memory": "100M"}})
    result = _jobs.ensure_present(client, spec)
    assert result["changed"] and result["job"]["identity"] == "agree-1"
    job = wait_terminal(client, result["job"]["job_id"])
    assert (job["phase"], job["failure_class"], job["exit_code"]) == ("failed", "non_zero_exit", 3)
    written = (tmp_path / ("out-%s.txt" % job["job_id"])).read_text(encoding="utf-8")
    assert written.startswith("hi y q \\ ünï {{ not_jinja }}\n")
    assert _jobs.ensure_present(client, spec)["changed"] is False


def test_an_exclusive_job_reaches_lsf_as_bsub_x(client, lsf_pac):
    spec = normalize_spec({"script": "#!/bin/bash\ntrue\n", "identity": "agree-x", "exclusive": True}, client)
    job_id = client.submit(spec)
    assert lsf_pac["simulator"].cluster.jobs[int(job_id)].options.get("-x") is True
    assert wait_terminal(client, job_id)["phase"] == "completed"


def test_cancel_finds_the_job_by_identity_and_kills_it(client):
    spec = normalize_spec({"script": "#!/bin/bash\nsleep 60\n", "identity": "agree-2"})
    _jobs.ensure_present(client, spec)
    result = _jobs.ensure_absent(client, identity="agree-2", wait=True, wait_timeout=20, poll_interval=0.1)
    assert result["changed"] and result["job"]["failure_class"] == "cancelled"
    assert _jobs.ensure_absent(client, identity="agree-2")["changed"] is False


def test_cancel_without_wait_reports_what_the_kill_leads_to(tmp_path):
    """bkill signals a running job, which LSF reads back RUN until it has ended (here a script that
    ignores SIGTERM, with a kill grace longer than the test: RUN until the test ends it): the result
    is what the kill leads to, cancelled, with LSF's state as it was read, and LSF's own record
    agrees once the job has ended (issue 26, item 7)."""
    from simulators.lsf_pac import LsfPacSimulator

    simulator = LsfPacSimulator(str(tmp_path), {"alice": "pw"}, tick=0.05, kill_grace=600).start()
    client = LsfClient(simulator.url, user="alice", password="pw", retries=0)
    try:
        check_cancel_without_wait(client, simulator)
    finally:
        client.close()
        simulator.stop()


def check_cancel_without_wait(client, simulator):
    spec = normalize_spec({"script": "#!/bin/bash\ntrap '' TERM\nsleep 60\n", "identity": "agree-kill"})
    job_id = _jobs.ensure_present(client, spec)["job"]["job_id"]
    assert wait_running(client, job_id)["phase"] == "running"
    result = _jobs.ensure_absent(client, identity="agree-kill")
    assert result["changed"] is True and result["failed"] is False
    job = result["job"]
    assert (job["phase"], job["terminal"], job["failure_class"]) == ("cancelled", True, "cancelled"), job
    assert job["native_state"] == "RUN" and "wait: true" in result["msg"], (job, result["msg"])
    # The end of the grace: LSF's SIGKILL.
    with simulator.cluster.lock:
        simulator.cluster._signal(simulator.cluster.jobs[int(job_id)], signal.SIGKILL)
    ended = wait_terminal(client, job_id, timeout=60)
    assert (ended["phase"], ended["failure_class"]) == ("cancelled", "cancelled"), ended
    assert _jobs.ensure_absent(client, identity="agree-kill")["changed"] is False


def test_the_run_limit_ends_a_job_as_a_timeout(client):
    spec = normalize_spec({"script": "#!/bin/bash\nsleep 60\n", "identity": "agree-3", "resources": {"time_limit": 1}})
    job = wait_terminal(client, client.submit(spec))
    assert (job["phase"], job["failure_class"]) == ("failed", "timeout")


def test_queues_are_checked_against_what_the_simulator_lists(client):
    with pytest.raises(SpecError) as refused:
        client.check(normalize_spec({"script": TRICKY, "queue": "nosuch"}))
    assert refused.value.field == "queue" and "normal" in refused.value.reason


def test_a_wrong_password_is_refused_without_echoing_it(lsf_pac):
    lsf = LsfClient(lsf_pac["url"], user=lsf_pac["user"], password="wr0ng-pass", retries=0)
    with pytest.raises(AuthFailed) as refused:
        lsf.describe()
    assert "wr0ng-pass" not in str(refused.value)


@pytest.mark.parametrize("text, megabytes", [("100", 100), ("100MB", 100), ("4G", 4096), ("512KB", 0), ("2gb!", 2048)])
def test_memory_limits_take_lsf_units(text, megabytes):
    assert parse_memory_limit(text) == megabytes


def test_an_array_with_index_0_runs_shifted_and_folds_into_one_record_polled_with_one_request(client, tmp_path):
    script = "#!/bin/sh\necho \"$BRIDGE_ARRAY_INDEX $LSB_JOBINDEX\" > \"%s/seen.$BRIDGE_ARRAY_INDEX\"\n" \
             "case $BRIDGE_ARRAY_INDEX in 2|4) exit 3;; esac\n" % tmp_path
    spec = normalize_spec({"script": script, "identity": "agree-array", "array": {"indexes": "0-5", "parallelism": 2}},
                          client)
    result = _jobs.ensure_present(client, spec)
    assert result["changed"]
    before = client.requests_sent
    polls = 0
    while True:
        job = client.find("agree-array")
        polls += 1
        if job["terminal"]:
            break
        time.sleep(0.1)
    assert client.requests_sent - before == polls, "one request per poll, whatever the number of elements"
    expected = (result["job"]["job_id"], "failed", 3, "non_zero_exit")
    assert (job["job_id"], job["phase"], job["exit_code"], job["failure_class"]) == expected
    assert job["array"]["failed_indexes"] == "2,4" and job["array"]["counts"]["completed"] == 4
    assert job["array"]["parallelism"] == 2 and job["array"]["indexes"] == "0-5"
    assert sorted((tmp_path / ("seen.%d" % i)).read_text() for i in range(6)) == ["%d %d\n" % (i, i + 1) for i in range(6)]
    assert client.get(job["job_id"])["array"]["failed_indexes"] == "2,4"
    assert _jobs.ensure_present(client, spec)["changed"] is False


def test_a_finished_jobs_output_comes_through_application_centers_file_download(client, tmp_path):
    """pacclient's download (GET webservice/pacclient/file/<id>, the path as the body) of the job's
    -o file: unicode, bytes that are not UTF-8, NUL and ESC, and the password masked."""
    script = ("#!/bin/bash\nprintf 'héllo ✓\\n\\xff\\xfe raw\\n\\x00nul \\x1b[31mred\\x1b[0m\\n'\n"
              "echo \"pw=$LSF_PW\"\nfor i in $(seq 1 30); do echo line $i; done\n")
    spec = normalize_spec({"script": script, "identity": "agree-out-%s" % tmp_path.name, "stdout": str(tmp_path / "o-%J.txt"),
                           "environment": {"LSF_PW": client.password}, "output": {"tail_lines": 40}}, client)
    result = _jobs.ensure_present(client, spec, wait=True, wait_timeout=20, poll_interval=0.1)
    assert result["job"]["phase"] == "completed", result
    text = result["output"]["text"]
    assert text.startswith(u"héllo ✓\n\ufffd\ufffd raw\nnul red\npw=********\nline 1\n") and text.endswith("line 30\n")
    assert client.password not in text and result["output"]["truncated"] is False


def test_a_file_that_is_not_the_jobs_downloads_as_nothing(client, tmp_path):
    spec = normalize_spec({"script": "#!/bin/bash\necho hi\n", "identity": "agree-dl-%s" % tmp_path.name,
                           "stdout": str(tmp_path / "o.txt")})
    job = wait_terminal(client, client.submit(spec))
    assert client.download(job["job_id"], str(tmp_path / "o.txt")) == b"hi\n"
    assert client.download(job["job_id"], "/etc/hostname") == b""
    assert client.download(job["job_id"], str(tmp_path / "missing.txt")) == b""
