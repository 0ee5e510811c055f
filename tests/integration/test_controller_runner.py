"""The controller's AnsibleRunner against real Slurm: batch submit, one-request poll, cancel.

Also proves the credentials never reach the runner's directory (inputs, artifacts, events).
"""

import os
import subprocess
import sys
import uuid

from conftest import REPO, RUN, require_slurm

sys.path.insert(0, os.path.join(REPO, "controller"))

from bridge_controller.runner import AnsibleRunner  # noqa: E402  pylint: disable=wrong-import-position


def test_batch_submit_poll_cancel_through_ansible_runner(tmp_path, monkeypatch):
    values = require_slurm("22.05")
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    runner = AnsibleRunner(os.path.join(REPO, "playbooks"), str(tmp_path / "runner"),
                           collections_path=os.path.join(RUN, "collections"), python=sys.executable)
    backend = {"type": "slurm", "url": values["SLURM_URL"], "api_version": values["SLURM_API_VERSIONS"].split(",")[0]}
    credentials = {"user": values["SLURM_USER"], "token": values["SLURM_JWT"]}
    run = uuid.uuid4().hex[:8]
    jobs = [{"identity": "cr-%s-%d" % (run, i), "name": "cr-%d" % i, "script": "#!/bin/bash\nsleep 300\n"}
            for i in range(3)]
    jobs.append({"identity": "cr-%s-bad" % run, "script": "#!/bin/bash\n", "queue": "nope"})

    submitted = runner.run("submit", backend, credentials, jobs=jobs)
    assert [r["failed"] for r in submitted["results"]] == [False, False, False, True]
    assert "'nope' is not a partition" in submitted["results"][3]["msg"]
    again = runner.run("submit", backend, credentials, jobs=jobs[:3])
    assert not any(r["changed"] for r in again["results"])

    identities = [job["identity"] for job in jobs]
    polled = runner.run("poll", backend, credentials, identities=identities)
    assert sorted(polled["jobs"]) == sorted(identities[:3]) and polled["missing"] == identities[3:]
    assert polled["requests"] == 1

    cancelled = runner.run("cancel", backend, credentials, jobs=[{"identity": i} for i in identities[:3]])
    assert [r["job"]["phase"] for r in cancelled["results"]] == ["cancelled"] * 3

    leaks = subprocess.run(["grep", "-rl", values["SLURM_JWT"], str(tmp_path)], capture_output=True, text=True, check=False)
    assert leaks.stdout == "", "the token reached the runner directory: %s" % leaks.stdout
    runner.close()
    assert not os.listdir(runner.pipe_dir), "every pipe is removed once its playbook ended"
