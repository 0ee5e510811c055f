"""The identity lookup before a submit on real Slurm 22.05, 24.11 and 26.05 with accounting (issue 27).

Exactly once: a job submitted a moment before (as by an earlier attempt that died after its POST) is
found by a lookup made at once, before slurmdbd may have it, by a fresh client each time, as each
module run has. Bounded: on 24.11 and 26.05 a lookup for an identity no job carries does not list
slurmctld's queue once slurmctld has nothing left to send to slurmdbd; it asks accounting, /diag and
accounting again. 22.05 sends pending jobs to slurmdbd on a timer, so there the queue is listed.
(slurmdbd stopped: test_slurm_cluster_script.py, in its sandbox.)
"""

import json
import sys
import uuid

import httpx
import pytest

from conftest import COLLECTIONS, SLURM_VERSIONS, require_slurm

sys.path.insert(0, COLLECTIONS)

ROUNDS = 10


def client_of(values):
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

    return SlurmClient(values["SLURM_URL"], user=values.get("SLURM_USER"), token=values.get("SLURM_JWT"))


def held_spec(identity):
    from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

    return normalize_spec({"script": "#!/bin/bash\ntrue\n", "identity": identity, "queue": "debug",
                           "working_directory": "/tmp", "stdout": "/dev/null",
                           "resources": {"time_limit": 1}, "backend_options": {"slurm": {"hold": True}}})


def raw_submit(values, version, spec):
    """The POST an earlier attempt made: the job Bridge would submit, its answer not read by Bridge."""
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.compile import compile_job

    headers = {"X-SLURM-USER-NAME": values["SLURM_USER"], "X-SLURM-USER-TOKEN": values["SLURM_JWT"],
               "Content-Type": "application/json"}
    answer = httpx.post("%s/slurm/%s/job/submit" % (values["SLURM_URL"], version), headers=headers, timeout=30,
                        content=json.dumps(compile_job(spec, version)))
    answer.raise_for_status()
    return str(answer.json()["job_id"])


@pytest.mark.parametrize("version", SLURM_VERSIONS)
def test_a_job_submitted_a_moment_before_is_found_at_once(version):
    values = require_slurm(version)
    client = client_of(values)
    api = client.api_version
    paths, submitted = [], []
    try:
        for _round in range(ROUNDS):
            spec = held_spec("lookup-%s" % uuid.uuid4().hex[:10])
            job_id = raw_submit(values, api, spec)
            submitted.append(job_id)
            fresh = client_of(values)
            found = fresh.find(spec["identity"], name=spec["name"])
            assert found is not None and found["job_id"] == job_id, (
                "job %s was not found by a lookup right after its submit (lookup %s)" % (job_id, fresh.lookup))
            paths.append(fresh.lookup)
    finally:
        for job_id in submitted:
            client.cancel(job_id)
    print("Slurm %s lookups right after a submit: %s" % (version, ", ".join(paths)))


@pytest.mark.parametrize("version", SLURM_VERSIONS)
def test_a_new_identity_is_looked_up_without_listing_the_queue(version):
    values = require_slurm(version)
    ways = []
    for _round in range(5):
        fresh = client_of(values)
        fresh.api_version  # pylint: disable=pointless-statement  # the version probe, before counting
        before = fresh.requests_sent
        assert fresh.find("never-%s" % uuid.uuid4().hex[:10]) is None
        ways.append((fresh.lookup, fresh.requests_sent - before))
    print("Slurm %s lookups of a new identity (way, requests): %s" % (version, ways))
    if version == "22.05":
        assert all(way == "accounting+live" for way, _requests in ways), ways
    else:
        # Other tests' jobs end meanwhile: while slurmctld has their records queued for slurmdbd, the
        # queue is listed; it is empty most of the time.
        bounded = [requests for way, requests in ways if way == "accounting"]
        assert bounded, "every lookup listed the queue: %s" % ways
        assert all(requests == 3 for requests in bounded), ways
