"""Re-running a play after slurmctld has forgotten its job (MinJobAge) submits nothing, where
accounting keeps the job; without accounting it submits again, which is why accounting is used.

Each case runs in tools/lib/slurm-sandbox.sh (private pid, network and mount namespaces): a throwaway
cluster with MinJobAge=2 on the usual ports, with its own slurmdbd and MariaDB, beside the real ones.
Cases of different versions run at the same time: most of each is waiting for slurmctld's purge.
Each wave holds conftest.SANDBOXED_HOST_CLUSTER: test_slurm_cluster_script.py, running at the same
time, sandboxes a 22.05 cluster too.
"""

import json
import os
import shutil
import subprocess
import tempfile
import uuid

import pytest

from conftest import REPO, SANDBOXED_HOST_CLUSTER, VENV_BIN, ansible_env, one_at_a_time, require_slurm

PLAYBOOK = os.path.join(REPO, "tests", "integration", "playbooks", "slurm_rerun.yml")

DRIVER = r"""
set -u
v=$1; accounting=$2; out=$3; identity=$4
BRIDGE_SLURM_MIN_JOB_AGE=2 tools/slurm-cluster.sh start "$v" $accounting >"$out/start.log" 2>&1 || {
  echo "START-FAILED"; cat "$out/start.log"; exit 1; }
set -a; . "$BRIDGE_RUN/slurm-$v/env"; set +a
# The job's own dir: slurm-<id>.out in /tmp may belong to another cluster's job of the same id.
mkdir -p "$BRIDGE_RUN/work" && chmod 1777 "$BRIDGE_RUN/work"
play() {
  ansible-playbook -i localhost, -c local "$PLAYBOOK" -e "identity=$identity" -e "result_file=$out/run$1.json" \
    -e "work_dir=$BRIDGE_RUN/work" >"$out/run$1.log" 2>&1
  echo "RUN|$1|$?"
}
play 1
job_id=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["job_id"])' "$out/run1.json")
# slurmctld purges jobs older than MinJobAge once a minute; 22.05 answers a forgotten one with 500.
for i in $(seq 180); do
  code=$(curl -s -o /dev/null -w '%{http_code}' -m 10 -H "X-SLURM-USER-NAME: $SLURM_USER" \
    -H "X-SLURM-USER-TOKEN: $SLURM_JWT" "$SLURM_URL/slurm/${SLURM_API_VERSIONS%%,*}/job/$job_id")
  [[ $code == 404 || $code == 500 ]] && break
  sleep 1
done
echo "FORGOTTEN|$job_id|$code|$i"
play 2
tools/slurm-cluster.sh stop "$v" >/dev/null 2>&1
"""

# Two host clusters (22.05) at once in two sandboxes fail their jobs (JobLaunchFailure): one at a time.
WAVES = [[("22.05", ""), ("26.05", "")], [("22.05", "--no-accounting")]]


def start_case(version, accounting, tmp_path):
    # Not pytest's tmp_path for the run dir: its parents are 0700, and slurmctld (user slurm) must reach it.
    run_dir = tempfile.mkdtemp(prefix="bmj-", dir="/tmp")
    os.chmod(run_dir, 0o755)
    out = tmp_path / ("%s%s" % (version, accounting or "-accounting"))
    out.mkdir()
    command = [os.path.join(REPO, "tools", "lib", "slurm-sandbox.sh"), run_dir, "bash", "-c", DRIVER, "driver",
               version, accounting, str(out), "rerun-%s" % uuid.uuid4().hex[:8]]
    env = ansible_env({"PLAYBOOK": PLAYBOOK, "PATH": VENV_BIN + os.pathsep + os.environ["PATH"]})
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return process, run_dir, out


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("the sandbox needs root and unshare")
    for version in sorted(set(case[0] for wave in WAVES for case in wave)):
        require_slurm(version)  # the chroot must exist: the sandbox has no network to build it
    tmp_path = tmp_path_factory.mktemp("min-job-age")
    results = {}
    for wave in WAVES:
        with one_at_a_time(SANDBOXED_HOST_CLUSTER):
            started = [(case, start_case(case[0], case[1], tmp_path)) for case in wave]
            for case, (process, run_dir, out) in started:
                results[case] = finish_case(process, run_dir, out)
    return results


def finish_case(process, run_dir, out):
    try:
        output = process.communicate(timeout=420)[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        shutil.rmtree(run_dir, ignore_errors=True)
    runs = [json.loads((out / ("run%d.json" % n)).read_text()) if (out / ("run%d.json" % n)).exists() else None
            for n in (1, 2)]
    logs = "".join((out / ("run%d.log" % n)).read_text() for n in (1, 2) if (out / ("run%d.log" % n)).exists())
    return output, runs, logs


def check_forgotten(output, first):
    forgotten = [line.split("|") for line in output.splitlines() if line.startswith("FORGOTTEN|")]
    assert forgotten and forgotten[0][1] == first["job_id"] and forgotten[0][2] in ("404", "500"), output


@pytest.mark.parametrize("version", ["22.05", "26.05"])
def test_a_rerun_after_min_job_age_submits_nothing_with_accounting(outcomes, version):
    output, (first, second), logs = outcomes[(version, "")]
    assert "RUN|1|0" in output and "RUN|2|0" in output, output + logs[-4000:]
    check_forgotten(output, first)
    assert first["changed"] is True and first["phase"] == "completed"
    assert second["changed"] is False, "submitted again: %s" % second
    assert second["job_id"] == first["job_id"] and second["phase"] == "completed"
    assert second["lookup"] == "accounting" and second["job"]["source"] == "accounting"
    assert second["job"]["elapsed_seconds"] is not None


def test_without_accounting_a_rerun_after_min_job_age_submits_again(outcomes):
    """What accounting prevents: slurmctld alone no longer knows the job."""
    output, (first, second), logs = outcomes[("22.05", "--no-accounting")]
    assert "RUN|1|0" in output and "RUN|2|0" in output, output + logs[-4000:]
    check_forgotten(output, first)
    assert first["lookup"] == "live" and second["lookup"] == "live"
    assert second["changed"] is True and second["job_id"] != first["job_id"]
