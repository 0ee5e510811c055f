"""tools/slurm-cluster.sh: `start` on a degraded cluster brings every daemon back (issue item 8).

Each version runs in tools/lib/slurm-sandbox.sh: private pid, network and mount namespaces in which
the script starts a throwaway copy of the cluster on its usual ports. The real clusters that other
tests use are never touched, and whatever happens (a failed assertion, a hung daemon, a killed
pytest) the copy dies with the sandbox's first process.

The driver behaves as the user in the report: the env file is sourced into the shell (so SLURM_JWT
is exported) before each `start`; one daemon is killed by the PID the script recorded; `start`
must then leave the cluster `running` and answering an authenticated request.
"""

import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import REPO, require_slurm

DAEMONS = ("slurmrestd", "slurmctld", "slurmd")

DRIVER = r"""
set -u
v=$1; shift
script=tools/slurm-cluster.sh
run=$BRIDGE_RUN/slurm-$v
$script start "$v" || { echo "FIRST-START-FAILED"; exit 1; }
# As in the report: the env file sourced into the caller's shell (SLURM_JWT exported).
set -a; . "$run/env"; set +a
for daemon in "$@"; do
  read -r pid _ <"$run/pids/$daemon.pid"
  kill "$pid"
  for _ in $(seq 100); do [[ $($script status "$v") == *degraded* ]] && break; sleep 0.1; done
  before=$($script status "$v")
  $script start "$v"; rc=$?
  after=$($script status "$v")
  set -a; . "$run/env"; set +a
  code=$(curl -s -o "$run/partitions.json" -w '%{http_code}' -m 20 \
    -H "X-SLURM-USER-NAME: $SLURM_USER" -H "X-SLURM-USER-TOKEN: $SLURM_JWT" \
    "$SLURM_URL/slurm/${SLURM_API_VERSIONS%%,*}/partitions")
  grep -q '"debug"' "$run/partitions.json" && debug=yes || debug=no
  echo "RESULT|$daemon|$rc|$before|$after|$code|$debug"
done
# Idempotent: a second start on a running cluster restarts nothing.
pids=$(cat "$run"/pids/*.pid)
$script start "$v"; rc=$?
[[ $(cat "$run"/pids/*.pid) == "$pids" ]] && same=yes || same=no
echo "AGAIN|$rc|$($script status "$v")|$same"
$script stop "$v"
"""


def run_sandboxed(version):
    # Not pytest's tmp_path: its parents are 0700, and slurmctld (user slurm) must reach its state.
    run_dir = tempfile.mkdtemp(prefix="bss-", dir="/tmp")
    os.chmod(run_dir, 0o755)
    command = [os.path.join(REPO, "tools", "lib", "slurm-sandbox.sh"), run_dir,
               "bash", "-c", DRIVER, "driver", version] + list(DAEMONS)
    try:
        return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_start_on_a_degraded_cluster_brings_every_daemon_back(version):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("the sandbox needs root and unshare")
    require_slurm(version)   # the chroot must exist: the sandbox has no network to build it
    result = run_sandboxed(version)
    output = result.stdout + result.stderr
    assert "FIRST-START-FAILED" not in output, output[-4000:]
    rows = [line.split("|")[1:] for line in result.stdout.splitlines() if line.startswith("RESULT|")]
    assert [row[0] for row in rows] == list(DAEMONS), output[-4000:]
    for daemon, rc, before, after, code, debug in rows:
        where = "after killing %s: %s" % (daemon, output[-4000:])
        assert before.startswith(version + " degraded"), where
        assert rc == "0", where
        assert after.startswith(version + " running"), where
        assert (code, debug) == ("200", "yes"), where
    again = [line.split("|")[1:] for line in result.stdout.splitlines() if line.startswith("AGAIN|")]
    assert again and again[0][0] == "0" and again[0][1].startswith(version + " running"), output[-4000:]
    assert again[0][2] == "yes", "a start on a running cluster restarted daemons: " + output[-4000:]
