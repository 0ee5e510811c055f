"""The job spec's `exclusive` on real Slurm 22.05, 24.11 and 26.05, through `ansible localhost -m
bridge.hpc.slurm_job` with the cluster's env file: each REST version gets the request its parser
takes for sbatch --exclusive and the job runs; where the REST API reports a job's sharing, a held
exclusive job says none (whole nodes) and one without the field does not.

The test partitions are OverSubscribe=FORCE:4, which overrides a job's own sharing once it is
scheduled, hence the held jobs; Slurm 22.05's REST API (v0.0.38) reports the partition's sharing
only, so there the test holds to what slurmrestd accepted and ran.
"""

import json
import sys
import uuid

import pytest

from conftest import COLLECTIONS, RUN, adhoc_with_env_file, require_slurm

sys.path.insert(0, COLLECTIONS)

# Per version: the request the newest REST version it serves gets, and a version whose job answer
# reports the job's own sharing (None: none does). v0.0.45 reports `shared` no more.
EXPECTED = {
    "22.05": ({"exclusive": "exclusive"}, None),
    "24.11": ({"shared": ["none"]}, "v0.0.42"),
    "26.05": ({"shared": ["none"]}, "v0.0.44"),
}


def run_job(version, **spec):
    path = "%s/slurm-%s/env" % (RUN, version)
    args = dict(name="excl-%s" % uuid.uuid4().hex[:8], script="#!/bin/bash\ntrue\n", stdout="/dev/null", queue="debug",
                resources={"time_limit": 1}, poll_interval=1)
    args.update(spec)
    done = adhoc_with_env_file(path, "bridge.hpc.slurm_job", "-a", json.dumps(args))
    head, _sep, body = done.stdout.partition(" => ")
    assert done.returncode == 0 and "CHANGED" in head, done.stdout + done.stderr
    return json.loads(body)


def held_sharing(values, api_version, version, **spec):
    """What the REST API at `api_version` says of the sharing of a held job of `spec`; the job is cancelled."""
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

    held = run_job(version, backend_options={"slurm": {"hold": True}}, **spec)
    reader = SlurmClient(values["SLURM_URL"], user=values.get("SLURM_USER"), token=values.get("SLURM_JWT"),
                         api_version=api_version)
    try:
        return reader.get(held["job_id"])["native"].get("shared")
    finally:
        reader.cancel(held["job_id"])
        reader.close()


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_an_exclusive_job_asks_slurm_for_whole_nodes(version):
    values = require_slurm(version)
    request, readable_at = EXPECTED[version]
    exclusive = run_job(version, exclusive=True, wait=True)
    assert exclusive["phase"] == "completed", exclusive
    job = exclusive["rendered"]["job"]
    assert dict((key, job.get(key)) for key in request) == request, job
    if readable_at is not None:
        assert held_sharing(values, readable_at, version, exclusive=True) == ["none"]
        assert held_sharing(values, readable_at, version) != ["none"]
