"""tools/slurm-cluster.sh: `start` on a degraded cluster brings every daemon back (issue item 8), and
accounting (issue 13): slurmdbd with MariaDB answers /slurmdb for a job slurmctld has forgotten.

Each version runs in tools/lib/slurm-sandbox.sh: private pid, network and mount namespaces in which
the script starts a throwaway copy of the cluster on its usual ports. The real clusters that other
tests use are never touched, and whatever happens (a failed assertion, a hung daemon, a killed
pytest) the copy dies with the sandbox's first process. What needs the network (the packages, the
chroot and slurmdbd in it, mariadb-server) is installed outside first: `tools/slurm-cluster.sh
install`.

The driver behaves as the user in the report: the env file is sourced into the shell (so SLURM_JWT
is exported) before each `start`; one daemon is killed by the PID the script recorded; `start`
must then leave the cluster `running` and answering an authenticated request. MinJobAge is 2 s
(BRIDGE_SLURM_MIN_JOB_AGE), so a finished job soon leaves /slurm/.../job/{id}; it must then still
be found in accounting, with its comment, on every /slurmdb version the cluster serves. The
cluster runs with --no-accounting before and after: no slurmdbd or MariaDB, and slurmrestd without
its slurmdbd plugin.
"""

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import COLLECTIONS, REPO, SANDBOXED_HOST_CLUSTER, one_at_a_time

DAEMONS = ("slurmdbd", "mariadbd", "slurmrestd", "slurmctld", "slurmd")
SCRIPT = os.path.join(REPO, "tools", "slurm-cluster.sh")
REST_PLUGINS = {"22.05": "openapi/v0.0.38,openapi/v0.0.37,openapi/v0.0.36",
                "24.11": "openapi/slurmctld", "26.05": "openapi/slurmctld"}
REST_DB_PLUGINS = {"22.05": "openapi/dbv0.0.38", "24.11": "openapi/slurmdbd", "26.05": "openapi/slurmdbd"}
DB_API_VERSIONS = {"22.05": "v0.0.38", "24.11": "v0.0.42,v0.0.41,v0.0.40",
                   "26.05": "v0.0.45,v0.0.44,v0.0.43,v0.0.42"}

# Submits a job over REST, waits until slurmctld has forgotten it, then asks accounting for it on
# every /slurmdb version; prints one ACCT line per version. argv: the env file.
ACCOUNTING_CHECK = r"""
import json, sys, time, urllib.error, urllib.request, uuid
env = dict(line.rstrip("\n").split("=", 1) for line in open(sys.argv[1]) if "=" in line)
url, version = env["SLURM_URL"], env["SLURM_API_VERSIONS"].split(",")[0]
headers = {"X-SLURM-USER-NAME": env["SLURM_USER"], "X-SLURM-USER-TOKEN": env["SLURM_JWT"],
           "Content-Type": "application/json"}

def call(path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        try:
            return error.code, json.loads(error.read() or b"{}")
        except ValueError:
            return error.code, {}

def current(state):   # v0.0.38: "COMPLETED", v0.0.40+: ["COMPLETED"]
    return state if isinstance(state, str) else ",".join(state)

tag = uuid.uuid4().hex[:10]
name, comment = "bridge-acct-" + tag, "bridge-id-" + tag
# start_time as an ISO time with its colons percent-encoded: the one form every version takes
# (22.05's dbv0.0.38 and 24.11's v0.0.40/41 reject an epoch; a raw ':' is 400 or 500).
since = time.strftime("%Y-%m-%dT%H%%3A%M%%3A%S", time.localtime(time.time() - 120))
# Its output nowhere: a sandbox cluster numbers jobs from 1, like the real ones, and a
# /tmp/slurm-<id>.out left behind could refuse another cluster's job of that id.
job = {"name": name, "comment": comment, "current_working_directory": "/tmp", "standard_output": "/dev/null"}
script = "#!/bin/bash\nexit 0\n"
if version == "v0.0.38":
    body = {"script": script, "job": dict(job, environment={"PATH": "/bin:/usr/bin"})}
else:
    body = {"job": dict(job, script=script, environment=["PATH=/bin:/usr/bin"])}
code, answer = call("/slurm/%s/job/submit" % version, body)
job_id = answer.get("job_id")
print("SUBMIT|%s|%s" % (code, job_id))
last, deadline = "", time.time() + 150
while job_id and time.time() < deadline:
    code, answer = call("/slurm/%s/job/%s" % (version, job_id))
    jobs = [j for j in answer.get("jobs", []) if j.get("job_id") == job_id]
    if not jobs:
        break
    last = current(jobs[0]["job_state"])
    time.sleep(1)
print("FORGOTTEN|%s|%s" % (code if job_id and not jobs else "still-there", last))
for db_version in env["SLURM_DB_API_VERSIONS"].split(","):
    deadline = time.time() + 30
    while True:
        code, answer = call("/slurmdb/%s/job/%s" % (db_version, job_id))
        jobs = [j for j in answer.get("jobs", []) if j.get("job_id") == job_id]
        state = current(jobs[0]["state"]["current"]) if jobs else ""
        if state == "COMPLETED" or time.time() > deadline:
            break
        time.sleep(1)
    got = jobs[0]["comment"]["job"] if jobs else None
    listed_code, listed = call("/slurmdb/%s/jobs/?job_name=%s&start_time=%s" % (db_version, name, since))
    ids = [j.get("job_id") for j in listed.get("jobs", [])]
    print("ACCT|%s|%s|%s|%s|%s|%s" % (db_version, code, state, got == comment, listed_code, ids == [job_id]))
"""

# With slurmdbd stopped: a job submitted a moment before (Bridge's own request, its answer not read
# by Bridge, as from an attempt that died) is found by the identity lookup of a fresh client (issue
# 27: exactly once with accounting gone). Prints LOOKUP|<found job is that job>|<lookup way>.
# argv: the env file, the collections dir.
LOOKUP_CHECK = r"""
import json, sys, urllib.request, uuid
sys.path.insert(0, sys.argv[2])
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.compile import compile_job
env = dict(line.rstrip("\n").split("=", 1) for line in open(sys.argv[1]) if "=" in line)
client = SlurmClient(env["SLURM_URL"], user=env["SLURM_USER"], token=env["SLURM_JWT"])
spec = normalize_spec({"script": "#!/bin/bash\ntrue\n", "identity": "dbd-down-" + uuid.uuid4().hex[:8],
                       "working_directory": "/tmp", "stdout": "/dev/null",
                       "backend_options": {"slurm": {"hold": True}}})
request = urllib.request.Request(
    "%s/slurm/%s/job/submit" % (env["SLURM_URL"], client.api_version),
    data=json.dumps(compile_job(spec, client.api_version)).encode(),
    headers={"X-SLURM-USER-NAME": env["SLURM_USER"], "X-SLURM-USER-TOKEN": env["SLURM_JWT"],
             "Content-Type": "application/json"})
with urllib.request.urlopen(request, timeout=30) as answer:
    job_id = str(json.loads(answer.read())["job_id"])
fresh = SlurmClient(env["SLURM_URL"], user=env["SLURM_USER"], token=env["SLURM_JWT"])
found = fresh.find(spec["identity"])
print("LOOKUP|%s|%s" % (found is not None and found["job_id"] == job_id, fresh.lookup))
client.cancel(job_id)
"""

DRIVER = r"""
set -u
v=$1; shift
script=tools/slurm-cluster.sh
run=$BRIDGE_RUN/slurm-$v
pidfile() {
  if [[ $1 == mariadbd ]]; then echo "$BRIDGE_RUN/mariadb/pids/mariadbd.pid"; else echo "$run/pids/$1.pid"; fi
}
rest_plugins() {  # slurmrestd's -s argument
  local pid _
  read -r pid _ <"$run/pids/slurmrestd.pid"
  tr '\0' '\n' <"/proc/$pid/cmdline" | sed -n '/^-s$/{n;p}'
}
pids_now() { cat "$run"/pids/*.pid "$BRIDGE_RUN"/mariadb/pids/*.pid 2>/dev/null; }
without() {  # the setup without accounting, as before issue 13
  set -a; . "$run/env"; set +a
  [[ -e $run/pids/slurmdbd.pid ]] && dbd=yes || dbd=no
  [[ -e $BRIDGE_RUN/mariadb/pids/mariadbd.pid ]] && mdb=yes || mdb=no
  storage=$(grep '^AccountingStorageType=' "$run/slurm/etc/slurm.conf")
  echo "$1|$2|$($script status "$v")|$SLURM_ACCOUNTING|$dbd|$mdb|$(rest_plugins)|$storage"
}
$script start "$v" --no-accounting; without NOACCT $?
pids=$(pids_now)
$script start "$v" --no-accounting; rc=$?
[[ $(pids_now) == "$pids" ]] && same=yes || same=no
echo "NOACCT-AGAIN|$rc|$same"
# Accounting on the same state: 24.11 and 26.05 keep a ClusterID there that the new database must
# not contradict.
$script start "$v" || { echo "FIRST-START-FAILED"; exit 1; }
set -a; . "$run/env"; set +a
echo "MODE|$SLURM_ACCOUNTING|$SLURM_DB_API_VERSIONS|$(rest_plugins)"
python3 -c "$ACCOUNTING_CHECK" "$run/env"
for daemon in "$@"; do
  read -r pid _ <"$(pidfile "$daemon")"
  kill "$pid"
  for _ in $(seq 100); do [[ $($script status "$v") == *degraded* ]] && break; sleep 0.1; done
  before=$($script status "$v")
  if [[ $daemon == slurmdbd ]]; then "$BRIDGE_PYTHON" -c "$LOOKUP_CHECK" "$run/env" "$BRIDGE_COLLECTIONS"; fi
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
pids=$(pids_now)
$script start "$v"; rc=$?
[[ $(pids_now) == "$pids" ]] && same=yes || same=no
echo "AGAIN|$rc|$($script status "$v")|$same"
# Back without accounting: slurmdbd gone, and MariaDB stopped (no cluster uses it).
$script start "$v" --no-accounting; without SWITCHED $?
$script stop "$v"
"""


def run_sandboxed(version):
    # Not pytest's tmp_path: its parents are 0700, and slurmctld (user slurm) and mariadbd (user
    # mysql) must reach their state.
    run_dir = tempfile.mkdtemp(prefix="bss-", dir="/tmp")
    os.chmod(run_dir, 0o755)
    command = [os.path.join(REPO, "tools", "lib", "slurm-sandbox.sh"), run_dir,
               "bash", "-c", DRIVER, "driver", version] + list(DAEMONS)
    env = dict(os.environ, BRIDGE_SLURM_MIN_JOB_AGE="2", ACCOUNTING_CHECK=ACCOUNTING_CHECK, LOOKUP_CHECK=LOOKUP_CHECK,
               BRIDGE_PYTHON=sys.executable, BRIDGE_COLLECTIONS=COLLECTIONS)
    try:
        # test_slurm_min_job_age.py, running at the same time, sandboxes 22.05 clusters too.
        with one_at_a_time(SANDBOXED_HOST_CLUSTER) if version == "22.05" else contextlib.nullcontext():
            return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=480,
                                  check=False)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def rows(result, kind):
    return [line.split("|")[1:] for line in result.stdout.splitlines() if line.startswith(kind + "|")]


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_accounting_and_start_on_a_degraded_cluster(version):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("the sandbox needs root and unshare")
    # The sandbox has no network: the packages, and the chroot with slurmdbd in it, are installed
    # here first (a no-op once `make services` or an earlier run did it).
    installed = subprocess.run([SCRIPT, "install", version], capture_output=True, text=True, timeout=600,
                               check=False)
    assert installed.returncode == 0, installed.stderr[-4000:]
    result = run_sandboxed(version)
    output = result.stdout + result.stderr
    tail = output[-6000:]
    assert "FIRST-START-FAILED" not in output, tail

    assert rows(result, "MODE") == [["1", DB_API_VERSIONS[version],
                                     REST_PLUGINS[version] + "," + REST_DB_PLUGINS[version]]], tail
    assert rows(result, "SUBMIT") and rows(result, "SUBMIT")[0][0] == "200", tail
    # slurmctld forgot the finished job: 22.05 answers 500, the newer ones 404.
    assert rows(result, "FORGOTTEN") == [["500" if version == "22.05" else "404", "COMPLETED"]], tail
    accounting = rows(result, "ACCT")
    assert [row[0] for row in accounting] == DB_API_VERSIONS[version].split(","), tail
    for db_version, code, state, comment, listed_code, listed in accounting:
        assert (code, state, comment) == ("200", "COMPLETED", "True"), "%s: %s" % (db_version, tail)
        assert (listed_code, listed) == ("200", "True"), "%s: %s" % (db_version, tail)

    # slurmdbd stopped: the job submitted a moment before is found, from slurmctld's list.
    assert rows(result, "LOOKUP") == [["True", "live"]], tail

    restarts = rows(result, "RESULT")
    assert [row[0] for row in restarts] == list(DAEMONS), tail
    for daemon, rc, before, after, code, debug in restarts:
        where = "after killing %s: %s" % (daemon, tail)
        assert before.startswith(version + " degraded"), where
        assert rc == "0", where
        assert after.startswith(version + " running"), where
        assert (code, debug) == ("200", "yes"), where
    again = rows(result, "AGAIN")
    assert again and again[0][0] == "0" and again[0][1].startswith(version + " running"), tail
    assert again[0][2] == "yes", "a start on a running cluster restarted daemons: " + tail

    for kind in ("NOACCT", "SWITCHED"):
        without = rows(result, kind)
        assert without, tail
        rc, status, accounting_flag, dbd, mariadb, plugins, storage = without[0]
        assert rc == "0" and status.startswith(version + " running") and "no accounting" in status, tail
        assert (accounting_flag, dbd, mariadb) == ("0", "no", "no"), "%s: %s" % (kind, tail)
        assert plugins == REST_PLUGINS[version], tail
        assert storage == "AccountingStorageType=accounting_storage/none", tail
    assert rows(result, "NOACCT-AGAIN") == [["0", "yes"]], tail
