"""bridge.hpc.slurm_job_info reads Slurm's accounting (slurmdbd) on real 22.05, 24.11 and 26.05, as
`ansible localhost -m` with the cluster's env file: a finished job's history with elapsed time,
CPU time and max RSS; filters; a bad window is refused naming the field, with nothing read.
"""

import json
import time
import uuid

import pytest

from conftest import RUN, adhoc_with_env_file, require_slurm

# 48 MiB held by the batch shell for 3 s: accounting samples every second here.
SCRIPT = "#!/bin/bash\nx=$(head -c 50331648 /dev/zero | tr '\\0' a); sleep 3; echo \"${x:0:1}\"\n"


def env_file(version):
    values = require_slurm(version)
    if values.get("SLURM_ACCOUNTING") != "1":
        pytest.skip("Slurm %s runs without accounting (tools/slurm-cluster.sh start %s)" % (version, version))
    return "%s/slurm-%s/env" % (RUN, version)


def module(path, module_name, **args):
    """(result, output) of `ansible localhost -m MODULE -a ARGS`; result None when it failed."""
    done = adhoc_with_env_file(path, module_name, "-a", json.dumps(args))
    head, sep, body = done.stdout.partition(" => ")
    succeeded = done.returncode == 0 and sep and ("SUCCESS" in head or "CHANGED" in head)
    return (json.loads(body) if succeeded else None), done.stdout + done.stderr


def recorded(path, name, phases=None, timeout=60):
    """The job named `name` from accounting once its final record (with CPU time) is there."""
    deadline = time.monotonic() + timeout
    while True:
        result, output = module(path, "bridge.hpc.slurm_job_info", source="accounting", name=name, start_time="-1h",
                                **({"phases": phases} if phases else {}))
        assert result is not None, output
        jobs = result["jobs"]
        if jobs and jobs[0]["terminal"] and jobs[0]["cpu_seconds"]:
            return result
        assert time.monotonic() < deadline, "no final record of %s in accounting: %s" % (name, result)
        time.sleep(1)


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_a_finished_jobs_history(version):
    path = env_file(version)
    name = "acct-%s" % uuid.uuid4().hex[:8]
    submitted, output = module(path, "bridge.hpc.slurm_job", name=name, script=SCRIPT, stdout="/dev/null",
                               queue="debug", resources={"time_limit": 2}, wait=True, poll_interval=1)
    assert submitted is not None and submitted["phase"] == "completed", output
    job = recorded(path, name)["jobs"][0]
    assert job["job_id"] == submitted["job_id"] and job["source"] == "accounting" and job["name"] == name
    assert job["phase"] == "completed" and job["exit_code"] == 0 and job["identity"] == submitted["job"]["identity"]
    assert job["account"] == "bridge" and job["user"] == "bridge" and job["partition"] == "debug"
    assert job["elapsed_seconds"] >= 3 and job["cpu_seconds"] > 0
    assert job["max_rss_bytes"] >= 40 * 1024 * 1024, job["max_rss_bytes"]
    assert "native" not in job

    # Filters that exclude it: another phase, another account, a window that ended before it.
    for args in ({"phases": ["failed"]}, {"account": "nobody"}, {"end_time": "-1h"}):
        result, output = module(path, "bridge.hpc.slurm_job_info", source="accounting", name=name, start_time="-2h", **args)
        assert result is not None and result["jobs"] == [], (args, output)


@pytest.mark.parametrize("version", ["22.05", "26.05"])
def test_a_bad_window_is_refused_naming_the_field(version):
    path = env_file(version)
    result, output = module(path, "bridge.hpc.slurm_job_info", source="accounting", start_time="last tuesday")
    assert result is None and "start_time" in output and "-7d" in output, output
    result, output = module(path, "bridge.hpc.slurm_job_info", start_time="-1d")
    assert result is None and "only for source=accounting" in output, output
