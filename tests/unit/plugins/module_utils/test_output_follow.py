"""output.follow: a running job's output is read by each read that finds it running (one request
each, `running: true`), never without follow; the read at its end is the one a finished job gets."""

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import ConnectionFailed, NotFound, SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_present, read_output
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils.ray.client import RayClient
from ansible_collections.bridge.hpc.plugins.modules import job_info

from module_runner import run
from recorded import recorded, replaying_transport
from test_output import NO_SLEEP, OutputBackend

RUNS = ("queued", "running", "running", "completed")


def spec_with(**output):
    return normalize_spec({"script": "#!/bin/bash\necho hi\n", "name": "f", "output": dict({"tail_lines": 2}, **output)})


def test_follow_is_a_bool_off_by_default_and_needs_tail_lines():
    assert spec_with()["output"] == {"tail_lines": 2, "follow": False}
    assert spec_with(follow=True)["output"] == {"tail_lines": 2, "follow": True}
    with pytest.raises(SpecError) as refused:
        normalize_spec({"script": "#!/bin/bash\ntrue\n", "output": {"follow": True}})
    assert refused.value.field == "output.tail_lines"
    with pytest.raises(SpecError) as refused:
        spec_with(follow="sometimes")
    assert refused.value.field == "output.follow"


@pytest.mark.parametrize("follow, reads", [(True, 3), (False, 1)])
def test_each_run_that_finds_the_job_running_reads_it_with_follow_only(follow, reads):
    backend = OutputBackend(progression=RUNS)
    spec = spec_with(follow=follow)
    outputs = [ensure_present(backend, spec).get("output") for _run in range(3)]
    assert len(backend.reads) == reads
    final = {"text": u"two\nthree\n", "lines": 2, "truncated": True}
    if follow:
        assert outputs == [dict(final, running=True), dict(final, running=True), final]
    else:
        assert outputs == [None, None, final]


def test_a_wait_reads_once_at_the_end_even_with_follow():
    """The polls of a wait return nothing to anyone: only the read of the end is made."""
    backend = OutputBackend(progression=RUNS)
    result = ensure_present(backend, spec_with(follow=True), wait=True, poll_interval=0.01, **NO_SLEEP)
    assert result["job"]["phase"] == "completed" and "running" not in result["output"]
    assert len(backend.reads) == 1


def test_a_queued_job_is_not_read_even_with_follow():
    backend = OutputBackend(progression=("queued",))
    assert "output" not in ensure_present(backend, spec_with(follow=True)) and backend.reads == []


def test_output_not_written_yet_is_no_error_while_the_job_runs_but_a_failed_read_is():
    backend = OutputBackend()
    running = {"job_id": "7", "phase": "running", "terminal": False}
    finished = dict(running, phase="completed", terminal=True)

    def absent(job, tail_lines):
        raise NotFound("No such file or directory", "read", "job output", "/x", "Fake", "fake://")

    def unreachable(job, tail_lines):
        raise ConnectionFailed("connection refused", "read", "job output", "/x", "Fake", "fake://")

    backend.read_output = absent
    assert read_output(backend, running, spec_with(follow=True)) == {}
    assert "No such file" in read_output(backend, finished, spec_with(follow=True))["output_error"]
    backend.read_output = unreachable
    assert "connection refused" in read_output(backend, running, spec_with(follow=True))["output_error"]


def test_a_running_attempt_of_a_retried_job_is_followed():
    backend = OutputBackend(progression=RUNS)
    spec = normalize_spec({"script": "#!/bin/bash\necho hi\n", "name": "f", "retry": {"limit": 1},
                           "output": {"tail_lines": 2, "follow": True}})
    result = ensure_present(backend, spec)
    assert result["job"]["phase"] == "running" and result["output"]["running"] is True


# ---------------------------------------------------------------- job_info over recorded Ray answers


def ray_answers(job_case, logs_case=None):
    """The list request's answer holding the recorded job, then its recorded logs."""
    answers = [{"status": 200, "body": [recorded("ray", "2.60.0", job_case)["body"]]}]
    return answers + ([recorded("ray", "2.60.0", logs_case)] if logs_case else [])


def poll(monkeypatch, answers, identity, **options):
    transport, sent = replaying_transport("Ray", answers)
    client = RayClient("http://ray.test", token="tok", transport=transport)
    monkeypatch.setattr(RayClient, "from_options", classmethod(lambda cls, get: client))
    outcome = run(job_info, dict(backend="ray", url="http://ray.test", identities=[identity],
                                 output_lines={identity: 5}, **options))
    return outcome.result, [request.url.path for request in sent]


@pytest.mark.usefixtures("capture")
def test_job_info_reads_a_running_jobs_output_only_for_the_identities_that_follow(monkeypatch):
    result, paths = poll(monkeypatch, ray_answers("job_running"), "fixture-sleep")
    assert paths == ["/api/jobs/"] and result["requests"] == 1
    assert "output" not in result["jobs"]["fixture-sleep"]
    result, paths = poll(monkeypatch, ray_answers("job_running", "logs_running"), "fixture-sleep",
                         output_follow=["fixture-sleep"])
    assert paths == ["/api/jobs/", "/api/jobs/fixture-sleep/logs"] and result["requests"] == 2
    output = result["jobs"]["fixture-sleep"]["output"]
    assert output["running"] is True and output["text"].endswith("Running entrypoint for job fixture-sleep: sleep 300\n")


@pytest.mark.usefixtures("capture")
@pytest.mark.parametrize("follow", [[], ["fixture-ok"]])
def test_job_info_reads_a_finished_jobs_output_with_one_request_either_way(monkeypatch, follow):
    result, paths = poll(monkeypatch, ray_answers("job_succeeded", "logs_succeeded"), "fixture-ok", output_follow=follow)
    assert paths == ["/api/jobs/", "/api/jobs/fixture-ok/logs"] and result["requests"] == 2
    output = result["jobs"]["fixture-ok"]["output"]
    assert "running" not in output and output["text"].endswith("42\n")
