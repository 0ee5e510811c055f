"""The identity lookup before an LSF submit reads only the jobs that may carry the identity, however
many jobs the user has (issue 27, item 2): counted as the job records the PAC SIMULATOR serves and
the requests LsfClient sends, never timed (bench/lsf_submit.py times it).
"""

import collections

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils import _jobs
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.client import NAMES_ASKED_AT_MOST, LsfClient

from simulators.lsf_pac import LsfPacSimulator

USER, PASSWORD = "alice", "pw"


class Served(object):
    """The job records the simulator puts in its answers, basic and detailed, counted."""

    def __init__(self, cluster):
        self.counts = collections.Counter()
        for kind in ("job_basic", "job_detail"):
            setattr(cluster, kind, self.counting(kind, getattr(cluster, kind)))

    def counting(self, kind, view):
        def counted(job):
            self.counts[kind] += 1
            return view(job)
        return counted

    def read(self, action):
        """(action's result, {"job_basic": n, "job_detail": n} of the records served meanwhile)."""
        self.counts.clear()
        result = action()
        return result, dict(self.counts)


def fill(cluster, count):
    """`count` jobs of the user, as the simulator's own submit makes them: queued in the inactive
    queue (they never start), every other one killed there (finished, EXIT, kept for CLEAN_PERIOD).
    Each has a Bridge identity of its own, so a lookup that read them all would find them."""
    for i in range(count):
        extra = "-q inactive -J fill-%05d -Jd bridge:fill-%05d" % (i, i)
        job = cluster.submit(USER, "generic", {"COMMANDTORUN": {"value": "true", "type": ""},
                                               "EXTRA_PARAMS": {"value": extra, "type": ""}}, {})
        if i % 2:
            cluster.kill(USER, job.id)


@pytest.fixture(params=[0, 2000], ids=["empty", "2000-jobs"])
def busy(request, tmp_path):
    """A simulator holding 0 or 2,000 jobs of the user, half queued and half finished; a logged-on
    client; the records it serves counted."""
    simulator = LsfPacSimulator(str(tmp_path), {USER: PASSWORD}, tick=0.05).start()
    fill(simulator.cluster, request.param)
    client = LsfClient(simulator.url, user=USER, password=PASSWORD, retries=0)
    client.logon()
    yield request.param, simulator, client, Served(simulator.cluster)
    client.close()
    simulator.stop()


def spec_for(identity, **fields):
    return normalize_spec(dict({"script": "#!/bin/bash\nsleep 30\n", "identity": identity, "queue": "inactive"},
                               **fields))


def requests_and_records(client, served, action):
    before = client.requests_sent
    result, records = served.read(action)
    return result, client.requests_sent - before, records


def test_a_new_and_an_existing_identity_read_only_their_own_jobs(busy):
    size, _simulator, client, served = busy
    spec = spec_for("look-new")
    found, requests, records = requests_and_records(client, served, lambda: _jobs.find_existing(client, spec))
    print("%d jobs: a new identity: %d requests, records read %s" % (size, requests, records))
    assert found is None and records == {}
    assert requests == 1, "one GET ws/jobs?jobname= of the identity, its default name (404)"

    assert _jobs.ensure_present(client, spec)["changed"] is True
    result, requests, records = requests_and_records(client, served, lambda: _jobs.ensure_present(client, spec))
    print("%d jobs: the existing identity: %d requests, records read %s" % (size, requests, records))
    assert result["changed"] is False and result["job"]["identity"] == "look-new"
    assert records == {"job_basic": 1, "job_detail": 1}, "the job's basic record by name, then its detail by id"
    assert requests == 2

    _everything, requests, records = requests_and_records(client, served, lambda: client.find_many(["look-new"]))
    assert requests == 1 and records == {"job_detail": size + 1}, "a poll without names reads the user's whole list"


def test_a_derived_identity_asks_for_its_name_and_its_0_1_0_alias(busy):
    """A spec without `identity` is looked up under its identity and the one Bridge 0.1.0 derived;
    a spec with a name under that name too."""
    size, _simulator, client, served = busy
    spec = normalize_spec({"script": "#!/bin/bash\nsleep 30\n", "name": "train", "queue": "inactive"})
    identities, names = _jobs.lookup_keys(spec)
    assert len(identities) == 2 and set(names) == {"train"}
    found, requests, records = requests_and_records(client, served, lambda: _jobs.find_existing(client, spec))
    assert found is None and records == {} and requests == 3, "train, the identity and the alias: one GET each"
    _jobs.ensure_present(client, spec)
    found, requests, records = requests_and_records(client, served, lambda: _jobs.find_existing(client, spec))
    print("%d jobs: a named job found with %d requests, records read %s" % (size, requests, records))
    assert found["identity"] == spec["identity"] and records == {"job_basic": 1, "job_detail": 1} and requests == 4


def test_an_array_is_found_by_its_name_and_read_once_by_its_id(busy):
    size, _simulator, client, served = busy
    spec = spec_for("look-array", array={"indexes": "0-4"})
    _jobs.ensure_present(client, spec)
    result, requests, records = requests_and_records(client, served, lambda: _jobs.ensure_present(client, spec))
    assert result["changed"] is False and result["job"]["array"]["counts"]["queued"] == 5
    assert records == {"job_basic": 5, "job_detail": 5} and requests == 2, "its elements, by name then by the array's id"


def test_a_job_submitted_just_before_is_found_by_the_next_lookup(lsf_pac):
    """mbatchd answers queries from memory: what bsub (here PAC's submit) accepted is listed by the
    next query, and so found by the next lookup; the simulator adds the job before it answers."""
    client = LsfClient(lsf_pac["url"], user=lsf_pac["user"], password=lsf_pac["password"], retries=0)
    try:
        spec = spec_for("look-just-submitted")
        job_id = client.submit(spec)
        assert _jobs.find_existing(client, spec)["job_id"] == job_id
        client.cancel(job_id)
    finally:
        client.close()


def test_a_batch_past_the_name_limit_reads_one_list(lsf_pac):
    """The jobs batch of many specs: one list of the user's jobs, not one request a name."""
    client = LsfClient(lsf_pac["url"], user=lsf_pac["user"], password=lsf_pac["password"], retries=0)
    try:
        specs = [spec_for("look-batch-%02d" % i) for i in range(NAMES_ASKED_AT_MOST + 1)]
        client.logon()
        before = client.requests_sent
        existing = client.find_many([s["identity"] for s in specs], names=[s["name"] for s in specs])
        assert existing == {} and client.requests_sent - before == 1
        few = specs[:NAMES_ASKED_AT_MOST]
        before = client.requests_sent
        client.find_many([s["identity"] for s in few], names=[s["name"] for s in few])
        assert client.requests_sent - before == NAMES_ASKED_AT_MOST
    finally:
        client.close()
