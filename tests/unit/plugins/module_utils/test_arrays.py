"""Index sets, the array phase rule and the folding of an array's tasks into one record."""

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._arrays import (
    MAX_ARRAY_TASKS,
    MAX_LISTED_FAILURES,
    array_job,
    array_phase,
    failed_indexes,
    index_text,
    parse_indexes,
)
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

SCRIPT = "#!/bin/bash\necho hi\n"


@pytest.mark.parametrize("given, indexes", [
    ("0-4", (0, 1, 2, 3, 4)),
    ("0-8:2", (0, 2, 4, 6, 8)),
    ("1,3,5-7", (1, 3, 5, 6, 7)),
    ("7", (7,)),
    (7, (7,)),
    ([5, 1, "2-3", 1], (1, 2, 3, 5)),
    (" 2 , 0 ", (0, 2)),
])
def test_index_sets_in_slurm_syntax_or_as_a_list(given, indexes):
    assert parse_indexes(given) == indexes


@pytest.mark.parametrize("given, says", [
    ("", "needs at least one index"),
    ([], "needs at least one index"),
    (True, "needs at least one index"),
    ("a-b", "'a-b' is not an index or range"),
    ("5-1", "'5-1' ends before it starts"),
    ("0-9:0", "needs a step of 1 or more"),
    ("-1", "is not an index or range"),
    ("0-%d" % MAX_ARRAY_TASKS, "more than %d tasks" % MAX_ARRAY_TASKS),
    ("0-5000000", "past the highest index"),
    ([1.5], "'1.5' is not an index"),
])
def test_what_is_no_index_set_is_refused_naming_the_field(given, says):
    with pytest.raises(SpecError) as refused:
        parse_indexes(given)
    assert refused.value.field == "array.indexes"
    assert says in str(refused.value)


@pytest.mark.parametrize("indexes, text", [
    ((0, 1, 2, 3), "0-3"),
    ((0, 2, 4, 6), "0-6:2"),
    ((1, 3), "1,3"),
    ((1, 2, 5, 6, 7, 9), "1,2,5-7,9"),
    ((13, 42, 77), "13,42,77"),
    ((), ""),
])
def test_index_text_is_canonical_and_parses_back(indexes, text):
    assert index_text(indexes) == text
    if indexes:
        assert parse_indexes(text) == indexes


@pytest.mark.parametrize("counts, phase", [
    ({"queued": 3}, "queued"),
    ({"queued": 2, "running": 1}, "running"),
    ({"queued": 2, "completed": 1}, "running"),
    ({"completed": 3}, "completed"),
    ({"completed": 2, "failed": 1}, "failed"),
    ({"running": 1, "failed": 1}, "running"),
    ({"completed": 2, "cancelled": 1}, "cancelled"),
    ({"failed": 1, "cancelled": 1}, "failed"),
])
def test_an_array_ends_when_every_task_ended_failed_if_any_failed(counts, phase):
    assert array_phase(counts) == phase


def task(phase, exit_code=None, failure_class=None, start="2026-12-04T00:00:01Z", end=None):
    return {"phase": phase, "exit_code": exit_code, "failure_class": failure_class, "start_time": start, "end_time": end,
            "signal": None}


def test_tasks_fold_into_one_record_with_counts_and_failed_indexes():
    base = {"job_id": "17", "identity": "a", "name": "a", "reason": None, "start_time": None, "end_time": None}
    tasks = dict((index, task("completed", 0, end="2026-12-04T00:00:0%dZ" % (index % 10))) for index in range(10))
    tasks[3] = task("failed", 3, "non_zero_exit", end="2026-12-04T00:00:09Z")
    tasks[7] = task("failed", 137, "out_of_memory", end="2026-12-04T00:00:08Z")
    job = array_job(base, tasks, tuple(range(10)), parallelism=4)
    assert job["phase"] == "failed" and job["terminal"] is True
    assert (job["exit_code"], job["failure_class"]) == (3, "non_zero_exit")
    assert job["end_time"] == "2026-12-04T00:00:09Z" and job["reason"] == "2 of 10 tasks failed"
    assert job["array"] == {"indexes": "0-9", "size": 10, "parallelism": 4,
                            "counts": {"queued": 0, "running": 0, "completed": 8, "failed": 2, "cancelled": 0},
                            "failed_indexes": "3,7",
                            "failures": [{"index": 3, "exit_code": 3, "failure_class": "non_zero_exit"},
                                         {"index": 7, "exit_code": 137, "failure_class": "out_of_memory"}]}
    assert failed_indexes(job["array"]) == (3, 7)
    assert base.get("array") is None


def test_an_unreported_task_is_queued_and_failures_listed_are_bounded():
    indexes = tuple(range(100))
    tasks = dict((index, task("failed", 1, "non_zero_exit")) for index in range(50))
    job = array_job({"job_id": "5"}, tasks, indexes)
    assert job["phase"] == "running" and job["terminal"] is False and job["end_time"] is None
    assert job["array"]["counts"]["queued"] == 50
    assert len(job["array"]["failures"]) == MAX_LISTED_FAILURES
    assert job["array"]["failed_indexes"] == "0-49"


def test_a_completed_array_exits_zero():
    job = array_job({"job_id": "5"}, {0: task("completed", 0), 1: task("completed", 0)}, (0, 1))
    assert (job["phase"], job["exit_code"], job["failure_class"]) == ("completed", 0, None)
    assert failed_indexes(job["array"]) == ()


def test_the_spec_normalizes_groups_and_names_the_bad_field():
    spec = normalize_spec({"script": SCRIPT, "array": {"indexes": [3, 1, 2], "parallelism": 2},
                           "retry": {"limit": 2, "on": ["timeout", "node_failure"]}, "output": {"tail_lines": 5}})
    assert spec["array"] == {"indexes": (1, 2, 3), "text": "1-3", "size": 3, "parallelism": 2}
    assert spec["retry"] == {"limit": 2, "classes": ("node_failure", "timeout"), "backoff_seconds": 0}
    assert spec["output"] == {"tail_lines": 5, "follow": False}
    plain = normalize_spec({"script": SCRIPT, "array": None, "retry": {"limit": 0}})
    assert (plain["array"], plain["retry"], plain["output"]) == (None, None, None)
    assert normalize_spec({"script": SCRIPT, "retry": {"limit": 1}})["retry"]["classes"] == ("node_failure", "preempted")


@pytest.mark.parametrize("params, field, says", [
    ({"array": {"parallelism": 2}}, "array.indexes", "needs indexes"),
    ({"array": {"indexes": "0-3", "size": 2}}, "array", "unknown key(s) size"),
    ({"array": {"indexes": "0-3", "parallelism": 0}}, "array.parallelism", "from 1 to"),
    ({"retry": {"classes": ["timeout"]}}, "retry.limit", "retries need a limit"),
    ({"retry": {"limit": 101}}, "retry.limit", "from 0 to 100"),
    ({"retry": {"limit": 1, "classes": ["cancelled"]}}, "retry.classes", "'cancelled' is not a failure class"),
    ({"retry": {"limit": 1, "classes": "timeout"}}, "retry.classes", "must be a list"),
    ({"retry": {"limit": 1, "backoff_seconds": -1}}, "retry.backoff_seconds", "from 0 to 86400"),
    ({"output": {}}, "output", None),
    ({"output": {"tail_lines": 0}}, "output.tail_lines", "from 1 to 1000"),
    ({"output": "all"}, "output", "must be a dictionary"),
    ({"retry": {"limit": 1}, "identity": "x" * 125}, "identity", "at most 124 characters"),
])
def test_bad_groups_are_refused_naming_the_field(params, field, says):
    if says is None:
        assert normalize_spec(dict(params, script=SCRIPT))[field] is None
        return
    with pytest.raises(SpecError) as refused:
        normalize_spec(dict(params, script=SCRIPT))
    assert refused.value.field == field
    assert says in str(refused.value)
