"""spec.resultQuery: checked before anything is submitted, applied to the finished job, size-limited."""

import json

import pytest

from bridge_controller.plan import FINALIZER, plan
from bridge_controller.query import RESULT_LIMIT, refusal, selected
from bridge_controller.status import desired_status

from test_core import JOB, bridgejob
from test_executor import bridgejob as executor_bridgejob
from test_executor import conditions, settle, setup

FINISHED = dict(JOB, phase="completed", exit_code=0, end_time="2026-11-30T03:00:09Z", terminal=True)
VALID = [
    "exit_code", "{exit: exit_code, took: [start_time, end_time]}", "results_summary.pubs[0].registers.*.counts",
    "jobs[?phase=='running'] | length(@)", "merge(@, `{\"a\": 1}`)", "[0:2]", "not_null(reason, native_state)",
]
# jmespath.compile refuses the first four; the calls it accepts and would fail only while searching.
INVALID = [
    ("jobs[", "Incomplete expression"), ("`{", "Bad jmespath expression"), ("", "cannot be empty"),
    ("exit_code ||", "Incomplete expression"), ("no_such(exit_code)", "Unknown function: no_such()"),
    ("length(a, b)", "Expected 1 argument for function length(), received 2"),
    ("merge()", "Expected at least 1 argument for function merge(), received 0"),
    ("sort_by(@)", "Expected 2 arguments for function sort_by(), received 1"), ("[0:2].foo(x)", "Unknown function: foo()"),
]


@pytest.mark.parametrize("expression", VALID)
def test_a_valid_expression_is_no_refusal(expression):
    assert refusal(expression) is None


@pytest.mark.parametrize("expression, jmespath_says", INVALID)
def test_an_invalid_expression_is_refused_naming_the_field_with_jmespaths_message(expression, jmespath_says):
    assert refusal(expression).startswith("spec.resultQuery: is not a valid JMESPath expression: ")
    assert jmespath_says in refusal(expression)


def test_what_is_selected_goes_into_status_result_with_its_size():
    value, condition = selected("{exit: exit_code, end: end_time}", FINISHED)
    assert value == {"exit": 0, "end": "2026-11-30T03:00:09Z"}
    size = len(json.dumps(value, separators=(",", ":")))
    assert condition == (True, "Selected", "%d bytes of JSON" % size)


def test_nothing_selected_is_no_result_and_says_so():
    assert selected("results_summary.pubs", FINISHED) == (None, (True, "NothingSelected",
                                                                 "spec.resultQuery selected nothing (null)"))


def test_a_result_over_the_limit_is_left_out_naming_its_size_and_the_limit():
    job = dict(FINISHED, reason="x" * RESULT_LIMIT)
    value, (ok, reason, message) = selected("reason", job)
    assert value is None and ok is False and reason == "TooLarge"
    assert "%d bytes" % (RESULT_LIMIT + 2) in message and "limit of 4096 bytes" in message
    at_limit = dict(FINISHED, reason="x" * (RESULT_LIMIT - 2))
    assert selected("reason", at_limit)[0] == at_limit["reason"], "4096 bytes of JSON, quotes included, fit"


def test_a_query_submitted_before_the_controller_checked_it_is_a_condition_naming_the_field():
    value, (ok, reason, message) = selected("no_such(exit_code)", FINISHED)
    assert (value, ok, reason) == (None, False, "QueryFailed")
    assert message == "spec.resultQuery: is not a valid JMESPath expression: Unknown function: no_such()"


def test_a_query_the_finished_jobs_data_does_not_fit_is_a_condition():
    value, (ok, reason, message) = selected("length(exit_code)", FINISHED)
    assert (value, ok, reason) == (None, False, "QueryFailed")
    assert message.startswith("spec.resultQuery: In function length(), invalid type")


@pytest.mark.parametrize("obj, actions", [
    (bridgejob({"resultQuery": "jobs["}, finalizers=()), ("refuse",)),
    (bridgejob({"resultQuery": "nope(exit_code)"}), ("refuse",)),
    (bridgejob({"resultQuery": "jobs[", "cancel": True}), ("refuse",)),
    (bridgejob({"resultQuery": "exit_code"}, finalizers=()), ("add_finalizer",)),
    (bridgejob({"resultQuery": "exit_code"}), ("submit",)),
    # Submitted before the controller checked resultQuery: the job runs on; the condition says why no result.
    (bridgejob({"resultQuery": "jobs["}, status={"jobId": "4", "phase": "Running"}), ("poll",)),
    (bridgejob({"resultQuery": "jobs["}, status={"phase": "Failed"}, finalizers=()), ()),
    (bridgejob({"resultQuery": "jobs["}, status={"phase": "Failed"}, finalizers=(), deleting=True), ()),
])
def test_a_bad_result_query_is_refused_before_the_finalizer_and_the_submit(obj, actions):
    assert plan(obj) == actions


def test_the_result_is_selected_once_the_job_is_finished():
    running = desired_status({}, 1, job=dict(JOB, job_id="7"), now="T1", result_query="exit_code")
    assert "result" not in running and "ResultSelected" not in [c["type"] for c in running["conditions"]]
    done = desired_status(running, 1, job=dict(FINISHED, job_id="7"), now="T2", result_query="{exit: exit_code}")
    assert done["result"] == {"exit": 0}
    assert [c for c in done["conditions"] if c["type"] == "ResultSelected"][0]["status"] == "True"
    assert "result" not in desired_status(running, 1, job=dict(FINISHED, job_id="7"), now="T2")


def test_a_job_refused_before_it_was_submitted_has_no_result_to_select():
    refused = {"phase": "failed", "failure_class": "rejected", "reason": "spec.resultQuery: ..."}
    status = desired_status({}, 1, job=refused, now="T1", result_query="jobs[")
    assert status["phase"] == "Failed" and "result" not in status
    assert "ResultSelected" not in [c["type"] for c in status["conditions"]]


def test_an_overtaken_observation_selects_nothing_anew():
    final = {"phase": "Completed", "jobId": "7", "result": {"exit": 0}}
    status = desired_status(final, 1, job=dict(JOB, job_id="7", phase="running"), now="T1", result_query="phase")
    assert status["result"] == {"exit": 0}


def test_a_bad_result_query_fails_the_cr_with_the_reason_and_submits_nothing():
    kube, backend, runner, queue, executor = setup()
    kube.create(executor_bridgejob("a", resultQuery="jobs[?phase=='done'"))
    settle(executor, queue)
    obj = kube.objects["ns/a"]
    assert runner.calls == [] and backend.submits == [], "nothing submitted, no backend asked"
    assert FINALIZER not in (obj["metadata"].get("finalizers") or []), "no side effect to clean up"
    status = obj["status"]
    assert status["phase"] == "Failed" and status["failureClass"] == "rejected"
    assert status["reason"].startswith("spec.resultQuery: is not a valid JMESPath expression: ")
    assert "Incomplete expression" in status["reason"] and status["message"] == status["reason"]
    assert conditions(obj)["Failed"]["message"] == status["reason"]
    assert "BackendReachable" not in conditions(obj), "the backend was not asked"
    assert [(event[1], event[3]) for event in kube.events] == [("Failed", "Warning")]
    assert "spec.resultQuery" in kube.events[0][2]
    assert executor.stats["refusals"] == 1 and "ns/a" in queue.forgotten
    settle(executor, queue)
    assert executor.stats["refusals"] == 1, "refused once: a Failed CR is planned to nothing"


def finish(kube, executor, queue, **spec):
    kube.create(executor_bridgejob("a", **spec))
    settle(executor, queue)
    for now in (2000.0, 3000.0):
        executor.poll_due(now=now)
    return kube.objects["ns/a"]


def test_a_finished_cr_gets_what_its_result_query_selects():
    kube, backend, runner, queue, executor = setup()
    obj = finish(kube, executor, queue, resultQuery="{job: job_id, exit: exit_code, partition: partition}")
    assert obj["status"]["phase"] == "Completed"
    assert obj["status"]["result"] == {"job": obj["status"]["jobId"], "exit": 0, "partition": "debug"}
    assert conditions(obj)["ResultSelected"]["status"] == "True"
    assert "secret-token" not in repr(kube.objects) + repr(kube.events)


def test_an_oversize_result_is_left_out_with_a_condition_naming_its_size_and_the_limit():
    kube, backend, runner, queue, executor = setup()
    backend.final = {"reason": "y" * 5000}
    obj = finish(kube, executor, queue, resultQuery="reason")
    assert obj["status"]["phase"] == "Completed" and "result" not in obj["status"]
    condition = conditions(obj)["ResultSelected"]
    assert (condition["status"], condition["reason"]) == ("False", "TooLarge")
    assert "5002 bytes" in condition["message"] and "limit of 4096 bytes" in condition["message"]
