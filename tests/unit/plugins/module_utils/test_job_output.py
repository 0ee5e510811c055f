"""Slurm and LSF output paths as the managers expand them, and tails of the files.

The Slurm cases follow sbatch(1) "filename pattern" and Slurm's expand_stdio_fields (the
controller-side expansion scontrol and slurmrestd 23.02+ show): %% is "%", a number after % zero-pads
(at most 10), an unknown letter keeps its %, a backslash anywhere turns expansion off.
"""

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import Rejected, SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._job_output import (
    expand_slurm,
    first_node,
    lsf_output_paths,
    output_paths,
    read_output,
    slurm_fields,
    slurm_output_paths,
    tail,
)


def slurm_job(**fields):
    job = {"job_id": "128", "name": "train", "user": "alice", "nodes": "node[07-09]",
           "working_directory": "/home/alice/run", "stdout": "", "stderr": ""}
    job.update(fields)
    return job


FIELDS = slurm_fields(slurm_job())


@pytest.mark.parametrize("pattern, expanded", [
    ("job%j.out", "/home/alice/run/job128.out"),
    # sbatch(1): "job%4j.out" -> "job0128.out"
    ("job%4j.out", "/home/alice/run/job0128.out"),
    # %J is jobid.stepid for steps; the batch script's own output has no step id
    ("job%J.out", "/home/alice/run/job128.out"),
    ("%x-%u.log", "/home/alice/run/train-alice.log"),
    ("%N.%n.%t.%s", "/home/alice/run/node07.0.0.batch"),
    ("%2t", "/home/alice/run/00"),
    # padding is ignored for text fields
    ("%5x", "/home/alice/run/train"),
    ("100%%.out", "/home/alice/run/100%.out"),
    ("%q.out", "/home/alice/run/%q.out"),
    # at most 10 digits of padding
    ("%12j", "/home/alice/run/0000000128"),
    # a lone padding digit before a non-field letter prints the last digit only
    ("%3q", "/home/alice/run/3q"),
    ("%05j", "/home/alice/run/5j"),
    # a trailing % is dropped
    ("out%", "/home/alice/run/out"),
    ("/abs/%j/out", "/abs/128/out"),
    # without an array, %A is the job id and %a is 0
    ("%A_%a", "/home/alice/run/128_0"),
])
def test_slurm_patterns(pattern, expanded):
    assert expand_slurm(pattern, FIELDS, "/home/alice/run") == expanded


@pytest.mark.parametrize("pattern, expanded", [
    # sbatch(1): '\\' -- "Do not process any of the replacement symbols"; the backslashes go
    ("/tmp/job\\%j.out", "/tmp/job%j.out"),
    ("/tmp/%x\\_%j", "/tmp/%x_%j"),
])
def test_slurm_backslash_turns_expansion_off(pattern, expanded):
    assert expand_slurm(pattern, FIELDS, "/") == expanded


def test_array_fields_from_native_payloads_of_every_rest_version():
    old = slurm_job(job_id="131", native={"array_job_id": 128, "array_task_id": 3})
    new = slurm_job(job_id="131", native={"array_job_id": {"set": True, "number": 128},
                                          "array_task_id": {"set": True, "number": 13}})
    assert expand_slurm("%A_%a_%b_%j", slurm_fields(old), "/") == "/128_3_3_131"
    assert expand_slurm("%A_%3a_%b", slurm_fields(new), "/") == "/128_013_3"


def test_default_output_file_in_the_working_directory():
    assert slurm_output_paths(slurm_job()) == {"stdout": "/home/alice/run/slurm-128.out",
                                               "stderr": "/home/alice/run/slurm-128.out"}
    array_task = slurm_job(job_id="131", native={"array_job_id": 128, "array_task_id": 3})
    assert slurm_output_paths(array_task)["stdout"] == "/home/alice/run/slurm-128_3.out"


def test_already_expanded_paths_of_newer_slurm_stay():
    job = slurm_job(stdout="/tmp/fixture-ok-13.out", stderr="/tmp/fixture-ok-13.out")
    assert slurm_output_paths(job) == {"stdout": "/tmp/fixture-ok-13.out", "stderr": "/tmp/fixture-ok-13.out"}


@pytest.mark.parametrize("nodes, first", [("vm", "vm"), ("n[01-04,07],m1", "n01"), ("a,b", "a"), ("", ""),
                                          (None, "")])
def test_first_node(nodes, first):
    assert first_node(nodes) == first


def test_lsf_patterns_and_defaults():
    job = {"job_id": "77", "working_directory": "/home/bob", "stdout": "out-%J-%I.txt"}
    assert lsf_output_paths(job) == {"stdout": "/home/bob/out-77-0.txt", "stderr": "/home/bob/out-77-0.txt"}
    element = {"job_id": "77[5]", "working_directory": "/home/bob", "stdout": "/o/%J.%I",
               "native": {"errfile": "e.%J"}}
    assert lsf_output_paths(element) == {"stdout": "/o/77.5", "stderr": "/home/bob/e.77"}
    assert lsf_output_paths({"job_id": "78", "working_directory": "/h"}) == {"stdout": None, "stderr": None}


def test_lsf_job_id_must_be_an_lsf_id():
    with pytest.raises(SpecError) as caught:
        lsf_output_paths({"job_id": "abc"})
    assert caught.value.field == "job.job_id"


def test_path_prefix_and_bad_job():
    assert output_paths("slurm", slurm_job(), "/chroots/trixie/")["stdout"] == "/chroots/trixie/home/alice/run/slurm-128.out"
    with pytest.raises(SpecError) as caught:
        output_paths("slurm", {"name": "x"})
    assert caught.value.field == "job"


def test_tail_lines_bytes_and_missing_files(tmp_path):
    path = tmp_path / "out"
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(1, 101)))
    whole = tail(str(path))
    assert whole["size"] == path.stat().st_size and not whole["truncated"] and whole["text"].startswith("line 1\n")
    last = tail(str(path), tail_lines=2)
    assert last["text"] == "line 99\nline 100\n" and last["truncated"]
    assert tail(str(path), tail_bytes=9)["text"] == "line 100\n"
    assert tail(str(path), tail_bytes=9, tail_lines=5)["text"] == "line 100\n"
    assert tail(str(path), tail_lines=0)["text"] == ""
    assert tail(str(tmp_path / "not-yet")) == {"path": str(tmp_path / "not-yet"), "exists": False, "size": 0,
                                                "text": "", "truncated": False}


def test_tail_never_starts_inside_a_character_and_replaces_bad_bytes(tmp_path):
    path = tmp_path / "out"
    path.write_bytes(u"caf\u00e9!".encode("utf-8") + b"\xff\n")
    assert tail(str(path), tail_bytes=4)["text"] == u"!\ufffd\n"
    assert tail(str(path))["text"] == u"caf\u00e9!\ufffd\n"


def test_unreadable_output_is_an_error_naming_the_path(tmp_path, monkeypatch):
    path = tmp_path / "secret"
    path.write_text("x")

    def denied(*_args, **_kwargs):
        raise IOError(13, "Permission denied", str(path))

    monkeypatch.setattr("builtins.open", denied)
    with pytest.raises(Rejected) as caught:
        tail(str(path))
    assert str(path) in str(caught.value) and "permission denied" in str(caught.value)


def test_read_output_shares_one_file(tmp_path):
    (tmp_path / "slurm-128.out").write_text("hello\n")
    result = read_output("slurm", slurm_job(working_directory=str(tmp_path)))
    assert result["stdout_file"]["text"] == "hello\n"
    assert result["stderr_file"]["same_as_stdout"] and result["stderr_file"]["text"] == "hello\n"
    with pytest.raises(SpecError) as caught:
        read_output("slurm", slurm_job(), tail_lines=-1)
    assert caught.value.field == "tail_lines"
