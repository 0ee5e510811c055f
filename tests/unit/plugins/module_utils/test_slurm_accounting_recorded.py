"""SlurmClient against accounting answers recorded from real slurmdbd (tests/unit/fixtures/slurm/
<api version>/slurmdb_*.json, by tools/record_slurm_fixtures.py --accounting): the same normalized
job from every version, and what only accounting knows (elapsed, CPU time, max RSS)."""

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import NotFound
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

from recorded import recorded, replaying_transport

VERSIONS = ("v0.0.38", "v0.0.40", "v0.0.42", "v0.0.45")


def client_replaying(version, *cases):
    transport, sent = replaying_transport("Slurm", [recorded("slurm", version, case) for case in cases])
    return SlurmClient("http://slurm.test", user="bridge", token="tok", api_version=version, transport=transport), sent


def recorded_job(version, case):
    fixture = recorded("slurm", version, case)
    job_id = fixture["request"]["path"].rstrip("/").rsplit("/", 1)[1]
    return client_replaying(version, case)[0].recorded_job(job_id)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_completed_job(version):
    job = recorded_job(version, "slurmdb_job_completed")
    assert job["phase"] == "completed" and job["terminal"] and job["exit_code"] == 0 and job["failure_class"] is None
    assert job["identity"] == "fixture-acct-ok" and job["name"] == "fixture-acct-ok" and job["source"] == "accounting"
    assert job["user"] == "bridge" and job["account"] == "bridge" and job["partition"] == "debug"
    assert job["elapsed_seconds"] >= 2 and job["submit_time"] and job["start_time"] and job["end_time"]
    assert job["time_limit_minutes"] == 5


@pytest.mark.parametrize("version", VERSIONS)
def test_a_failed_job(version):
    job = recorded_job(version, "slurmdb_job_failed_exit3")
    assert job["phase"] == "failed" and job["failure_class"] == "non_zero_exit"
    # 22.05's accounting reports exit 0 for every exit: no code rather than a false one.
    assert job["exit_code"] == (None if version == "v0.0.38" else 3)


@pytest.mark.parametrize("version", VERSIONS)
def test_max_rss_and_cpu_time_come_from_the_steps(version):
    job = recorded_job(version, "slurmdb_job_max_rss")
    assert job["phase"] == "completed"
    assert job["max_rss_bytes"] >= 40 * 1024 * 1024, job["max_rss_bytes"]
    assert job["cpu_seconds"] > 0


@pytest.mark.parametrize("version", VERSIONS)
def test_a_held_job_is_there_without_its_comment(version):
    """Accounting stores the comment, where the identity is, only in the final record."""
    job = recorded_job(version, "slurmdb_job_held")
    assert job["phase"] == "queued" and not job["terminal"] and job["identity"] is None


@pytest.mark.parametrize("version", VERSIONS)
def test_a_cancelled_job(version):
    job = recorded_job(version, "slurmdb_job_cancelled")
    assert job["phase"] == "cancelled" and job["failure_class"] == "cancelled"


@pytest.mark.parametrize("version", ("v0.0.38", "v0.0.42", "v0.0.45"))
def test_a_timed_out_job(version):
    job = recorded_job(version, "slurmdb_job_timeout")
    assert job["phase"] == "failed" and job["failure_class"] == "timeout"


@pytest.mark.parametrize("version", VERSIONS)
def test_jobs_by_name_submitted_in_any_state(version):
    client, sent = client_replaying(version, "slurmdb_jobs_by_name")
    jobs = client.history(submitted_after=0, names=["x"])
    phases = dict((job["name"], job["phase"]) for job in jobs)
    assert phases.get("fixture-acct-held") == "queued" and phases.get("fixture-acct-ok") == "completed", phases


@pytest.mark.parametrize("version", VERSIONS)
def test_an_unknown_job_is_not_found(version):
    with pytest.raises(NotFound):
        client_replaying(version, "slurmdb_job_unknown")[0].recorded_job("999999")


@pytest.mark.parametrize("version", VERSIONS)
def test_no_job_is_an_empty_answer(version):
    client = client_replaying(version, "slurmdb_jobs_empty")[0]
    assert client.accounting_available() is True and client.warnings == []
