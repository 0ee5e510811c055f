"""bridge.hpc.last_json: the data a job hands to later steps, found in what it printed."""

from ansible_collections.bridge.hpc.plugins.filter.last_json import last_json


def test_the_last_json_object_line_wins_over_what_the_manager_prints_after_it():
    log = ("2026-12-01 20:36:46,839\tINFO job_manager.py:581 -- Runtime env is setting up.\n"
           '{"x": 1}\n{"theta": 0.5, "n": [1, 2]}\nRunning entrypoint for job wf.sim: /bin/bash bridge_job\n')
    assert last_json(log) == {"theta": 0.5, "n": [1, 2]}


def test_lines_that_only_look_like_json_are_passed_over():
    assert last_json('{"a": 1}\n{not json}\n  {"b": 2}  \n[1, 2]\n') == {"b": 2}


def test_no_json_gives_the_default():
    assert last_json("hello\n") == {}
    assert last_json("", default=None) == {}
    assert last_json(None, {"none": True}) == {"none": True}
