"""SlurmClient's use of accounting (slurmdbd through /slurmdb): the identity lookup that does not
list the queue, the fallbacks to slurmctld, and the time window of a history query.

tests/unit/slurm_stub.py routes each request by path, so each test says which store answers what.
"""

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import NotFound, SpecError
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.accounting import query, sacct_time, window_start
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import CURRENT_READS

from slurm_stub import Stub, live_job, recorded_job


def test_a_recorded_finished_job_is_found_without_listing_the_queue():
    stub = Stub(live=[live_job(n, "other-%d" % n, "PENDING") for n in range(1, 100)],
                recorded=[recorded_job(7, "wanted")])
    client = stub.client()
    found = client.find("wanted")
    assert found["job_id"] == "7" and found["phase"] == "completed" and found["source"] == "accounting"
    assert client.lookup == "accounting"
    assert stub.paths() == ["/slurmdb/v0.0.42/jobs/"]
    params = stub.sent[0].url.params
    assert params["job_name"] == "wanted" and params["users"] == "bridge"
    # Submitted in the last year, in any state: a time window would miss held and pending jobs.
    assert params["submit_time"] == "now-31536000seconds" and "start_time" not in params


def test_the_job_name_is_searched_as_well_as_the_identity():
    stub = Stub(recorded=[recorded_job(7, "wanted", name="train")])
    client = stub.client()
    assert client.find("wanted", name="train")["job_id"] == "7"
    assert stub.sent[0].url.params["job_name"] == "train,wanted"


def test_what_accounting_lacks_is_looked_for_in_slurmctlds_list():
    """Accounting learns of a job a moment after slurmctld: while slurmctld has messages for
    slurmdbd queued, the job may be one of them."""
    stub = Stub(live=[live_job(9, "just-submitted", "PENDING")], recorded=[], dbd_queue=2)
    client = stub.client()
    assert client.find("just-submitted")["job_id"] == "9"
    assert client.lookup == "accounting+live"
    assert stub.paths() == ["/slurmdb/v0.0.42/jobs/", "/slurm/v0.0.42/diag/", "/slurm/v0.0.42/jobs/"]


def test_a_new_identity_costs_three_small_requests_once_accounting_is_current():
    """slurmctld has nothing left for slurmdbd: accounting, asked again after /diag said so, has
    every job slurmctld took, and the queue is not listed (issue 27)."""
    stub = Stub(live=[live_job(n, "other-%d" % n, "PENDING") for n in range(1, 100)], recorded=[], dbd_queue=0)
    client = stub.client()
    assert client.find("never-submitted") is None
    assert client.lookup == "accounting"
    assert stub.paths() == ["/slurmdb/v0.0.42/jobs/", "/slurm/v0.0.42/diag/", "/slurmdb/v0.0.42/jobs/"]


def test_a_job_accounting_stored_between_the_two_questions_is_found():
    stub = Stub(live=[live_job(9, "just-submitted", "PENDING")], recorded=[], dbd_queue=0)
    handle = stub.handle

    def stored_after_diag(request):
        if request.url.path.endswith("/diag/"):
            stub.recorded.append(recorded_job(9, "just-submitted", "PENDING", comment=False))
        return handle(request)

    stub.handle = stored_after_diag
    client = stub.client()
    assert client.find("just-submitted")["job_id"] == "9"
    assert client.lookup == "accounting"
    assert stub.paths() == ["/slurmdb/v0.0.42/jobs/", "/slurm/v0.0.42/diag/", "/slurmdb/v0.0.42/jobs/",
                            "/slurm/v0.0.42/job/9"]


def test_slurm_22_05_accounting_is_never_taken_as_current():
    """22.05 sends a pending job to slurmdbd on a 5-second timer, its queue empty meanwhile."""
    stub = Stub(live=[live_job(9, "just-submitted", "PENDING")], recorded=[], dbd_queue=0, version="v0.0.38")
    client = stub.client()
    assert client.find("just-submitted")["job_id"] == "9"
    assert "/slurm/v0.0.38/diag/" not in stub.paths() and client.lookup == "accounting+live"


def test_a_job_accounting_shows_unfinished_is_read_from_slurmctld():
    """Accounting has an unfinished job's comment (the identity) only once it ends."""
    stub = Stub(live=[live_job(7, "wanted", "RUNNING")], recorded=[recorded_job(7, "wanted", "PENDING", comment=False)])
    client = stub.client()
    found = client.find("wanted")
    assert found["phase"] == "running" and "source" not in found
    assert stub.paths() == ["/slurmdb/v0.0.42/jobs/", "/slurm/v0.0.42/job/7"]


def test_many_unfinished_jobs_are_read_with_one_list():
    count = CURRENT_READS + 1
    stub = Stub(live=[live_job(n, "id-%d" % n) for n in range(count)],
                recorded=[recorded_job(n, "id-%d" % n, "PENDING", comment=False) for n in range(count)], dbd_queue=0)
    found = stub.client().find_many(["id-%d" % n for n in range(count)])
    assert all(job["phase"] == "running" for job in found.values()) and len(found) == count
    assert stub.paths() == ["/slurmdb/v0.0.42/jobs/", "/slurm/v0.0.42/jobs/"]


def test_names_are_searched_fifty_at_a_time():
    identities = ["id-%03d" % n for n in range(120)]
    stub = Stub(recorded=[recorded_job(n, identity) for n, identity in enumerate(identities)])
    found = stub.client().find_many(identities)
    assert len(found) == 120 and stub.paths() == ["/slurmdb/v0.0.42/jobs/"] * 3


def test_without_accounting_the_lookup_lists_slurmctlds_jobs():
    stub = Stub(live=[live_job(3, "wanted", "COMPLETED")], recorded=None)
    client = stub.client()
    assert client.find("wanted")["job_id"] == "3" and client.lookup == "live"
    assert client.find("wanted")["job_id"] == "3"
    # Asked once per client: the second lookup goes to slurmctld alone.
    assert stub.paths() == ["/slurmdb/v0.0.42/jobs/", "/slurm/v0.0.42/jobs/", "/slurm/v0.0.42/jobs/"]
    assert client.warnings == []


def test_accounting_without_job_comments_is_a_warning_and_the_lookup_still_works():
    stub = Stub(live=[live_job(3, "wanted", "COMPLETED")], recorded=[recorded_job(3, "wanted", comment=False)])
    client = stub.client()
    assert client.find("wanted")["job_id"] == "3" and client.lookup == "accounting"
    assert any("AccountingStoreFlags=job_comment" in w for w in client.warnings)
    assert stub.paths() == ["/slurmdb/v0.0.42/jobs/", "/slurm/v0.0.42/job/3"]


def test_a_job_slurmctld_forgot_is_read_from_accounting():
    stub = Stub(live=[], recorded=[recorded_job(41, "old")])
    job = stub.client().get("41")
    assert job["job_id"] == "41" and job["phase"] == "completed" and job["elapsed_seconds"] == 10
    assert stub.paths() == ["/slurm/v0.0.42/job/41", "/slurmdb/v0.0.42/jobs/", "/slurmdb/v0.0.42/job/41"]


def test_a_job_neither_knows_is_not_found():
    with pytest.raises(NotFound):
        Stub(live=[], recorded=[]).client().get("41")


def test_a_poll_reads_slurmctld_and_asks_accounting_only_for_what_it_forgot():
    stub = Stub(live=[live_job(1, "a")], recorded=[recorded_job(1, "a", "PENDING"), recorded_job(2, "b")])
    found = stub.client().poll_many(["a", "b"])
    assert found["a"]["phase"] == "running" and found["b"]["phase"] == "completed"
    assert stub.paths() == ["/slurm/v0.0.42/jobs/", "/slurmdb/v0.0.42/jobs/"]
    assert stub.sent[1].url.params["job_name"] == "b"


def test_accounting_fields():
    stub = Stub(live=[], recorded=[recorded_job(41, "old")])
    job = stub.client().get("41")
    assert job["cpu_seconds"] == 1.25 and job["max_rss_bytes"] == 65011712 and job["account"] == "bridge"
    assert job["time_limit_minutes"] == 5 and job["end_time"] == "2026-11-30T00:53:31Z"


def test_a_failed_job_of_the_legacy_accounting_api_has_no_exit_code_rather_than_a_false_zero():
    failed = recorded_job(5, "f", "FAILED")
    failed["state"]["current"] = "FAILED"
    failed["exit_code"] = {"status": "SUCCESS", "return_code": 0, "signal": {"signal_id": 0, "name": ""}}
    job = Stub(live=[], recorded=[failed], version="v0.0.38").client().get("5")
    assert job["phase"] == "failed" and job["exit_code"] is None and job["failure_class"] == "non_zero_exit"


@pytest.mark.parametrize("value, expected", [
    ("-2h", 1796000000 - 7200), ("-7d", 1796000000 - 7 * 86400), ("1795000000", 1795000000), (1795000000, 1795000000),
    ("2026-12-01T00:00:00Z", 1796083200), ("2026-12-01T01:00:00+01:00", 1796083200), ("2026-12-01T00:00:00", 1796083200),
])
def test_window_start(value, expected):
    assert window_start(value, "start_time", now=1796000000) == expected


@pytest.mark.parametrize("value", ["yesterday", "-3y", "2026-13-01", "1 day"])
def test_a_time_that_is_none_of_the_forms_names_the_field(value):
    with pytest.raises(SpecError) as err:
        window_start(value, "end_time", now=1796000000)
    assert "end_time" in str(err.value) and "-7d" in str(err.value)


def test_times_are_relative_to_the_servers_clock_and_a_window_has_an_end():
    """22.05 and v0.0.40/41 refuse epochs; 22.05 finds nothing in a window without an end."""
    assert sacct_time(1796000000 - 90, now=1796000000) == "now-90seconds"
    assert sacct_time(1796000000 + 5, now=1796000000) == "now+5seconds"
    params = query(start=0, names=["b", "a"], users=["alice"])
    assert params["job_name"] == "a,b" and params["users"] == "alice" and params["end_time"] == "now"
    assert params["start_time"].startswith("now-") and params["start_time"].endswith("seconds")
    assert set(query(submitted_after=0)) == {"submit_time"}


def test_nothing_found_is_an_empty_answer_not_an_error():
    """22.05 answers a query that matches nothing with HTTP 200 and error 9003 "Nothing found"."""
    stub = Stub(live=[], recorded=[], version="v0.0.38")
    stub.nothing_found = True
    client = stub.client()
    assert client.history(start=0) == [] and client.accounting_available() is True
