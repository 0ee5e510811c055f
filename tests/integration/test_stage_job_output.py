"""Job output through the stage role: a real Slurm 22.05 job's files read on the login node over
the real sshd (the job runs as the login node's user, in a directory under its home), a 24.11 job
in its chroot read with path_prefix, and an LSF simulator job's -o/-e files."""

import os
import shutil
import uuid

from conftest import require_lsf, require_slurm
from stage_support import require_login_node, run_playbook, ssh, write_inventory

RUN_ID = uuid.uuid4().hex[:8]


def test_slurm_2205_job_output_over_the_login_node(tmp_path):
    values = require_slurm("22.05")
    login = require_login_node()
    assert values["SLURM_USER"] == login["BRIDGE_SSH_USER"]
    workdir = "/home/%s/stage-job-%s" % (login["BRIDGE_SSH_USER"], RUN_ID)
    ssh(login, "mkdir -p %s" % workdir)
    try:
        done = run_playbook("stage_job_output.yml", write_inventory(tmp_path, login), {
            "login": "login", "run_id": RUN_ID + "-2205", "workdir": workdir, "fetch_dir": str(tmp_path / "fetched")},
            values, tmp_path)
        assert done.returncode == 0, done.stdout[-6000:]
    finally:
        ssh(login, "rm -rf %s" % workdir)


def test_slurm_2411_job_output_in_its_chroot(tmp_path):
    """The chroot cluster's paths exist on this host under SLURM_ROOT, which only root can enter
    (it is in root's ~/.cache): the controller reads them itself (stage_login_host localhost)."""
    values = require_slurm("24.11")
    workdir = "/tmp/stage-job-%s" % RUN_ID
    host_dir = values["SLURM_ROOT"] + workdir
    os.makedirs(host_dir)
    os.chmod(host_dir, 0o777)
    try:
        done = run_playbook("stage_job_output.yml", write_inventory(tmp_path, require_login_node()), {
            "login": "localhost", "run_id": RUN_ID + "-2411", "workdir": workdir,
            "fetch_dir": str(tmp_path / "fetched")}, values, tmp_path)
        assert done.returncode == 0, done.stdout[-6000:]
    finally:
        shutil.rmtree(host_dir, ignore_errors=True)


def test_lsf_simulator_job_output(tmp_path):
    """The simulator runs the job as LSF_USER, who cannot enter pytest's tmp dirs: the job's working
    directory is its own under /tmp (the simulator makes it and hands it to the user)."""
    values = require_lsf()
    workdir = "/tmp/stage-lsf-%s" % RUN_ID
    try:
        done = run_playbook("stage_job_output_lsf.yml", write_inventory(tmp_path, require_login_node()), {
            "login": "localhost", "run_id": RUN_ID, "workdir": workdir}, values, tmp_path)
        assert done.returncode == 0, done.stdout[-6000:]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
