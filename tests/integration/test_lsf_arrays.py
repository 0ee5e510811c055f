"""A job array on the LSF Application Center SIMULATOR of tools/lsf-pac.sh (not a real Application
Center: docs/lsf.md): ten indexes 0-9 that LSF runs as elements 1-10, three at a time, of which
indexes 3 and 7 exit with their own index; the array ends failed naming them, and every poll is one
request, whatever the number of elements.
"""

import sys
import time
import uuid

from conftest import COLLECTIONS, require_lsf

sys.path.insert(0, COLLECTIONS)

SCRIPT = """#!/bin/sh
echo "index $BRIDGE_ARRAY_INDEX element $LSB_JOBINDEX"
case "$BRIDGE_ARRAY_INDEX" in 3|7) exit "$BRIDGE_ARRAY_INDEX";; esac
"""
WAIT = 120


def client():
    from ansible_collections.bridge.hpc.plugins.module_utils.lsf.client import LsfClient

    values = require_lsf()
    return LsfClient(values["LSF_PAC_URL"], user=values["LSF_USER"], password=values["LSF_PASSWORD"], retries=0)


def test_an_array_with_failing_elements_ends_failed_naming_them_with_one_request_per_poll():
    from ansible_collections.bridge.hpc.plugins.module_utils import _jobs
    from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

    lsf = client()
    identity = "array-%s" % uuid.uuid4().hex[:8]
    spec = normalize_spec({"script": SCRIPT, "identity": identity, "name": "sweep",
                           "array": {"indexes": "0-9", "parallelism": 3}}, lsf)
    assert _jobs.ensure_present(lsf, spec, check_mode=True)["changed"]
    result = _jobs.ensure_present(lsf, spec)
    assert result["changed"] and result["rendered"]["bsub"].startswith("bsub -J 'sweep[1-10]%3' ")
    polls, before = 0, lsf.requests_sent
    deadline = time.monotonic() + WAIT
    seen_running = set()
    while True:
        job = lsf.poll_many([identity])[identity]
        polls += 1
        seen_running.add(job["array"]["counts"]["running"])
        if job["terminal"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert lsf.requests_sent - before == polls
    assert max(seen_running) <= 3, "the running-element limit holds"
    assert (job["phase"], job["exit_code"], job["failure_class"]) == ("failed", 3, "non_zero_exit")
    assert job["array"]["failed_indexes"] == "3,7"
    assert job["array"]["failures"] == [{"index": 3, "exit_code": 3, "failure_class": "non_zero_exit"},
                                        {"index": 7, "exit_code": 7, "failure_class": "non_zero_exit"}]
    assert job["array"]["counts"] == {"queued": 0, "running": 0, "completed": 8, "failed": 2, "cancelled": 0}
    again = _jobs.ensure_present(lsf, spec)
    assert again["changed"] is False and again["job"]["job_id"] == job["job_id"]
    lsf.close()


def test_an_array_is_cancelled_whole():
    from ansible_collections.bridge.hpc.plugins.module_utils import _jobs
    from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

    lsf = client()
    identity = "array-%s" % uuid.uuid4().hex[:8]
    spec = normalize_spec({"script": "#!/bin/sh\nsleep 60\n", "identity": identity, "array": {"indexes": "1-4", "parallelism": 1}},
                          lsf)
    _jobs.ensure_present(lsf, spec)
    result = _jobs.ensure_absent(lsf, identity=identity, wait=True, wait_timeout=WAIT, poll_interval=0.5)
    assert result["changed"] and result["job"]["phase"] == "cancelled"
    assert result["job"]["array"]["counts"]["cancelled"] == 4
    lsf.close()


def test_an_array_runs_its_failed_elements_again_alone():
    """Indexes 0-9, of which 3 and 7 exit 3 the first time (a marker per index): attempt 1 is an
    array of elements 3 and 7 alone (no index 0, so no shift), and the job completes."""
    from ansible_collections.bridge.hpc.plugins.module_utils import _jobs
    from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

    lsf = client()
    identity = "array-retry-%s" % uuid.uuid4().hex[:8]
    markers = "/tmp/bridge-lsf-array-retry-%s" % uuid.uuid4().hex[:10]
    script = ("#!/bin/sh\ncase \"$BRIDGE_ARRAY_INDEX\" in 3|7) mkdir -p %s\n"
              "  [ -e %s/$BRIDGE_ARRAY_INDEX ] || { touch %s/$BRIDGE_ARRAY_INDEX; exit 3; } ;;\nesac\n") % ((markers,) * 3)
    spec = normalize_spec({"script": script, "identity": identity, "name": "sweep", "array": {"indexes": "0-9", "parallelism": 3},
                           "retry": {"limit": 1, "classes": ["non_zero_exit"]}}, lsf)
    try:
        first = _jobs.ensure_present(lsf, spec)
        assert first["changed"] and first["rendered"]["bsub"].startswith("bsub -J 'sweep[1-10]%3' ")
        job = poll_identity(lsf, identity)
        assert (job["phase"], job["array"]["failed_indexes"]) == ("failed", "3,7"), job
        second = _jobs.ensure_present(lsf, spec)
        assert second["changed"] and second["rendered"]["bsub"].startswith("bsub -J 'sweep[3,7]%3' "), second["rendered"]
        retried = poll_identity(lsf, identity + ".1")
        assert (retried["phase"], retried["array"]["indexes"]) == ("completed", "3,7"), retried
        final = _jobs.ensure_present(lsf, spec, wait=True, wait_timeout=WAIT, poll_interval=0.5)
        assert final["changed"] is False and final["failed"] is False and final["job"]["phase"] == "completed", final
        job = final["job"]
        assert [(a["attempt"], a["phase"], a["indexes"], a["failed_indexes"]) for a in job["attempts"]] == [
            (0, "failed", "0-9", "3,7"), (1, "completed", "3,7", "")]
        assert job["array"]["counts"] == {"queued": 0, "running": 0, "completed": 10, "failed": 0, "cancelled": 0}
        assert (job["array"]["indexes"], job["array"]["retried_indexes"]) == ("0-9", "3,7")
        assert _jobs.ensure_present(lsf, spec)["changed"] is False
    finally:
        lsf.close()


def poll_identity(lsf, identity):
    """The job of `identity` once it ended, every poll one request."""
    deadline = time.monotonic() + WAIT
    while True:
        before = lsf.requests_sent
        job = lsf.poll_many([identity])[identity]
        assert lsf.requests_sent - before == 1
        if job["terminal"]:
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.2)
