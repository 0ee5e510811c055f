"""playbooks/job.yml, the AWX job template's playbook, launched as a survey launches it but without
the chosen backend's credential: the job fails before anything is submitted and says what is
missing, unless the survey's "Backend not configured" answer is skip. No service is needed: the
environment has no variable of the backend, as in a job template without its credential."""

import os

import pytest

from conftest import REPO, ansible_env, start_playbook

# Every variable a backend's modules read (playbooks/vars/backends_from_env.yml): none reaches the run.
BACKEND_PREFIXES = ("SLURM_", "RAY_", "LSF_", "QUANTUM_", "K8S_AUTH_", "KUBECONFIG")


def launch(tmp_path, extravars):
    env = dict((name, value) for name, value in ansible_env().items() if not name.startswith(BACKEND_PREFIXES))
    log_path = str(tmp_path / "job.log")
    process = start_playbook(os.path.join(REPO, "playbooks", "job.yml"), extravars, env, log_path)
    returncode = process.wait(timeout=300)
    with open(log_path) as handle:
        return returncode, handle.read()


@pytest.mark.parametrize("backend", ["lsf", "slurm"])
def test_a_backend_without_its_credential_fails_the_job(backend, tmp_path):
    returncode, output = launch(tmp_path, {"job_backend": backend, "job_run": "no-credential"})
    assert returncode != 0, output[-3000:]
    assert ("Workflow no-credential: step job (%s) cannot run: backend '%s' is not configured" % (backend, backend)
            in output), output[-3000:]
    assert "nothing was submitted" in output


def test_skip_asked_for_succeeds_and_says_it_ran_nothing(tmp_path):
    returncode, output = launch(tmp_path, {"job_backend": "lsf", "job_run": "no-credential", "job_unconfigured": "skip"})
    assert returncode == 0, output[-3000:]
    assert "skipped: backend 'lsf' is not configured" in output, output[-3000:]
