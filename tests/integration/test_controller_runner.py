"""The controller's AnsibleRunner against real Slurm: batch submit, one-request poll, cancel.

Also proves the credentials never reach the runner's directory (inputs, artifacts, events), and
that the same playbooks run by hand take any backend's credentials as one `credentials` variable
(IBM Quantum with its iam_url, LSF).
"""

import json
import os
import subprocess
import sys
import time
import uuid

from conftest import COLLECTIONS, REPO, require_lsf, require_quantum, require_slurm

sys.path.insert(0, os.path.join(REPO, "controller"))

from bridge_controller.handoff import CONTROLLER_LOCK  # noqa: E402  pylint: disable=wrong-import-position
from bridge_controller.runner import AnsibleRunner, module_result  # noqa: E402  pylint: disable=wrong-import-position


def test_batch_submit_poll_cancel_through_ansible_runner(tmp_path, monkeypatch):
    values = require_slurm("22.05")
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    runner = AnsibleRunner(os.path.join(REPO, "playbooks"), str(tmp_path / "runner"),
                           collections_path=COLLECTIONS, python=sys.executable)
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
    # One list; with accounting one query more, for the identity slurmctld does not know (it may
    # have forgotten a job that ended more than MinJobAge ago).
    assert polled["requests"] == (2 if values.get("SLURM_ACCOUNTING") == "1" else 1), polled["requests"]

    cancelled = runner.run("cancel", backend, credentials, jobs=[{"identity": i} for i in identities[:3]])
    assert [r["job"]["phase"] for r in cancelled["results"]] == ["cancelled"] * 3

    leaks = subprocess.run(["grep", "-rl", values["SLURM_JWT"], str(tmp_path)], capture_output=True, text=True, check=False)
    assert leaks.stdout == "", "the token reached the runner directory: %s" % leaks.stdout
    runner.close()
    assert os.listdir(runner.pipe_dir) == [CONTROLLER_LOCK], "every pipe is removed once its playbook ended"


def by_hand(tmp_path, action, extra_vars, secret):
    """The result of the one task of playbooks/bridgejob_<action>.yml run by ansible-runner with the
    extra vars a user passes by hand (no BRIDGE_HANDOFF), the output checked for `secret`."""
    import ansible_runner

    envvars = {"ANSIBLE_COLLECTIONS_PATH": COLLECTIONS, "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
               "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0"}
    # Emptied, so that only `credentials` can set them (a module option falls back to these).
    envvars.update(dict.fromkeys(("QUANTUM_API_KEY", "QUANTUM_SERVICE_CRN", "LSF_USER", "LSF_PASSWORD"), ""))
    private_data_dir = tmp_path / uuid.uuid4().hex[:8]
    private_data_dir.mkdir()
    runner = ansible_runner.run(private_data_dir=str(private_data_dir), project_dir=os.path.join(REPO, "playbooks"),
                                playbook="bridgejob_%s.yml" % action, inventory="localhost ansible_connection=local",
                                extravars=extra_vars, envvars=envvars, quiet=True)
    output = runner.stdout.read()
    assert secret not in output
    result = module_result(runner.events)
    assert runner.rc == 0 and result is not None, output[-4000:]
    assert secret not in json.dumps(result)
    return result


def test_the_playbooks_by_hand_take_a_quantum_backends_credentials_and_iam_url(tmp_path):
    quantum = require_quantum()
    identity = "by-hand-%s" % uuid.uuid4().hex[:8]
    connection = {"backend": {"type": "quantum", "url": quantum["QUANTUM_URL"], "iam_url": quantum["QUANTUM_IAM_URL"]},
                  "credentials": {"api_key": quantum["QUANTUM_API_KEY"], "service_crn": quantum["QUANTUM_SERVICE_CRN"]}}
    bell = ("OPENQASM 3.0;\ninclude \"stdgates.inc\";\nbit[2] c;\nrz(pi/2) $0;\nsx $0;\nrz(pi/2) $0;\ncx $0, $1;\n"
            "c[0] = measure $0;\nc[1] = measure $1;\n")
    job = {"identity": identity, "script": bell, "queue": "ibm_manila", "backend_options": {"quantum": {"shots": 200}}}
    submitted = by_hand(tmp_path, "submit", dict(connection, jobs=[job]), quantum["QUANTUM_API_KEY"])
    assert submitted["results"][0]["changed"] is True and submitted["failed_count"] == 0, submitted
    deadline = time.monotonic() + 120
    while True:
        polled = by_hand(tmp_path, "poll", dict(connection, identities=[identity]), quantum["QUANTUM_API_KEY"])
        found = polled["jobs"][identity]
        if found["terminal"] or time.monotonic() > deadline:
            break
    assert found["phase"] == "completed", found
    assert sum(found["results_summary"]["pubs"][0]["registers"]["c"]["counts"].values()) == 200
    cancelled = by_hand(tmp_path, "cancel", dict(connection, jobs=[{"identity": identity}]), quantum["QUANTUM_API_KEY"])
    assert cancelled["results"][0]["changed"] is False, cancelled


def test_the_playbooks_by_hand_take_an_lsf_backends_user_and_password(tmp_path):
    lsf = require_lsf()
    identity = "by-hand-%s" % uuid.uuid4().hex[:8]
    connection = {"backend": {"type": "lsf", "url": lsf["LSF_PAC_URL"]},
                  "credentials": {"user": lsf["LSF_USER"], "password": lsf["LSF_PASSWORD"]}}
    job = {"identity": identity, "script": "#!/bin/bash\nsleep 300\n", "queue": "normal"}
    submitted = by_hand(tmp_path, "submit", dict(connection, jobs=[job]), lsf["LSF_PASSWORD"])
    assert submitted["results"][0]["changed"] is True and submitted["failed_count"] == 0, submitted
    polled = by_hand(tmp_path, "poll", dict(connection, identities=[identity]), lsf["LSF_PASSWORD"])
    assert polled["jobs"][identity]["job_id"] == submitted["results"][0]["job"]["job_id"]
    assert "results_summary" not in polled["jobs"][identity]
    cancelled = by_hand(tmp_path, "cancel", dict(connection, jobs=[{"identity": identity}]), lsf["LSF_PASSWORD"])
    assert cancelled["results"][0]["changed"] is True and cancelled["results"][0]["job"]["phase"] == "cancelled", cancelled
