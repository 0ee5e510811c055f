"""results.py: what a module's result means for each CR, by failure class (pure)."""

import pytest

from bridge_controller import results
from bridge_controller.results import DONE, PERMANENT, REFUSED, TEMPORARY


def error(kind, type_, temporary=None):
    found = {"kind": kind, "type": type_, "reason": "why", "message": "Failed to submit job: why"}
    if temporary is not None:
        found["temporary"] = temporary
    return found


def failed_item(err):
    return {"identity": "u1", "failed": True, "changed": False, "error": err, "msg": err["message"]}


@pytest.mark.parametrize("err, kind", [
    # What module_utils/_errors.py says, by type.
    (error("connection", "ConnectionFailed", True), TEMPORARY),
    (error("timeout", "Timeout", True), TEMPORARY),
    (error("server", "ServerError", True), TEMPORARY),             # 5xx, 429
    (error("server", "ServerError", False), PERMANENT),            # an unexpected 3xx or 4xx
    (error("auth", "AuthFailed", False), PERMANENT),
    (error("malformed_response", "MalformedResponse", False), PERMANENT),
    (error("rejected", "Rejected", False), REFUSED),
    (error("invalid_spec", "SpecError", False), REFUSED),
    (error("unsupported", "Unsupported", False), REFUSED),
    (error("not_found", "NotFound", False), REFUSED),
    (error("already_exists", "AlreadyExists", False), REFUSED),
    # Modules older than `temporary`: today's refusals stay final, anything else is retried.
    (error("rejected", "Rejected"), REFUSED),
    (error("invalid_spec", "SpecError"), REFUSED),
    (error("auth", "AuthFailed"), TEMPORARY),
    (error("server", "ServerError"), TEMPORARY),
    ({"message": "something nobody classified"}, TEMPORARY),
])
def test_an_item_error_is_classed_by_its_temporary_flag_then_its_kind(err, kind):
    outcome = results.batch_outcomes("submit", ["u1"], {"results": [failed_item(err)]})["u1"]
    assert outcome.kind == kind
    if kind == REFUSED:
        assert outcome.observed["job"] == {"phase": "failed", "failure_class": "rejected", "reason": "why"}
        assert outcome.observed["reachable"] is True
    else:
        assert outcome.observed["reachable"] is False and outcome.observed["backend_error"] is err
        assert "job" not in outcome.observed, "the last known job state stays"


@pytest.mark.parametrize("result, kind, reason", [
    ({"failed": True, "msg": "Failed to list jobs: refused",
      "error": {"type": "ConnectionFailed", "kind": "connection", "temporary": True}}, TEMPORARY, "ConnectionFailed"),
    ({"failed": True, "msg": "Failed to list jobs: HTTP 401",
      "error": {"type": "AuthFailed", "kind": "auth", "temporary": False}}, PERMANENT, "AuthFailed"),
    ({"failed": True, "msg": "Failed to list jobs: not slurmrestd",
      "error": {"type": "MalformedResponse", "kind": "malformed_response", "temporary": False}}, PERMANENT, "MalformedResponse"),
    ({"failed": True, "msg": "the module crashed"}, TEMPORARY, "SubmitFailed"),
])
def test_a_module_that_failed_as_a_whole_fails_every_cr_of_its_batch_alike(result, kind, reason):
    outcomes = results.batch_outcomes("submit", ["u1", "u2"], result)
    assert outcomes["u1"] == outcomes["u2"] and outcomes["u1"].kind == kind
    assert outcomes["u1"].observed["backend_error"]["type"] == reason
    assert outcomes["u1"].observed["backend_error"]["message"] == result["msg"]
    polled = results.poll_outcomes(["u1"], result)["u1"]
    assert polled.kind == kind and polled.observed["backend_error"]["type"] == (
        "PollFailed" if reason == "SubmitFailed" else reason)


def test_items_succeed_one_by_one_and_an_unanswered_one_is_temporary():
    job = {"job_id": "7", "phase": "queued", "reason": "Priority"}
    outcomes = results.batch_outcomes("submit", ["u1", "u2"], {"results": [{"identity": "u1", "changed": True, "job": job}]})
    assert outcomes["u1"].kind == DONE
    assert outcomes["u1"].observed == {"job": job, "reachable": True, "submitted": True, "message": "Priority"}
    assert outcomes["u2"].kind == TEMPORARY and outcomes["u2"].observed["backend_error"]["type"] == "NoResult"


def test_a_cancel_of_a_job_never_submitted_is_cancelled():
    outcome = results.batch_outcomes("cancel", ["u1"], {"results": [{"identity": "u1", "changed": False, "job": None}]})["u1"]
    assert outcome.kind == DONE and outcome.observed["job"]["phase"] == "cancelled"
    assert outcome.observed["submitted"] is False and outcome.observed["message"] is None


def test_a_poll_reads_each_job_or_says_the_backend_forgot_it():
    job = {"job_id": "7", "phase": "running"}
    outcomes = results.poll_outcomes(["u1", "u2"], {"jobs": {"u1": job}, "missing": ["u2"]})
    assert outcomes["u1"] == results.Outcome({"job": job, "reachable": True}, DONE)
    assert outcomes["u2"].kind == DONE and outcomes["u2"].observed["message"] == "the backend no longer knows this job"


def test_a_runner_failure_is_temporary_and_named_by_its_type():
    outcome = results.unreachable(results.runner_error(ConnectionError("connection refused")))
    assert outcome.kind == TEMPORARY
    assert outcome.observed["backend_error"]["type"] == "ConnectionError"


def test_the_collections_own_errors_fall_into_the_classes():
    from ansible_collections.bridge.hpc.plugins.module_utils import _errors

    def kind_of(exc):
        return results.item_outcome("submit", failed_item(exc.to_dict())).kind

    assert kind_of(_errors.ConnectionFailed("refused")) == TEMPORARY
    assert kind_of(_errors.Timeout("slow")) == TEMPORARY
    assert kind_of(_errors.ServerError("busy", status=503)) == TEMPORARY
    assert kind_of(_errors.ServerError("slow down", status=429)) == TEMPORARY
    assert kind_of(_errors.ServerError("teapot", status=418)) == PERMANENT
    assert kind_of(_errors.AuthFailed("expired token", status=401)) == PERMANENT
    assert kind_of(_errors.MalformedResponse("HTML from a proxy")) == PERMANENT
    assert kind_of(_errors.SpecError("resources.time_limit", "not a time")) == REFUSED
    assert kind_of(_errors.Unsupported("no GPUs by type")) == REFUSED
    assert kind_of(_errors.Rejected("partition down", status=400)) == REFUSED
    assert kind_of(_errors.NotFound("no such job", status=404)) == REFUSED
    assert kind_of(_errors.AlreadyExists("taken", status=409)) == REFUSED
