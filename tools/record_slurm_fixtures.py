#!/usr/bin/env python
"""Record real slurmrestd responses as unit-test fixtures.

Runs a fixed scenario (ping, partitions, nodes, submit, job states, errors, cancel, ...) against
a cluster started by tools/slurm-cluster.sh and writes one file per case:

    tests/unit/fixtures/slurm/<api_version>/<case>.json
    {"request": {"method", "path", "body"?}, "status", "headers": {"content-type"}, "body"}

Tokens are never written: only the content-type header is kept, and every file is checked for
the tokens before it is written.

    tools/record_slurm_fixtures.py 24.11                 # newest API version the cluster serves
    tools/record_slurm_fixtures.py 24.11 --api v0.0.40   # another one
    tools/record_slurm_fixtures.py 22.05 --skip-timeout  # without the ~2 min TIMEOUT case
    tools/record_slurm_fixtures.py 24.11 --accounting    # only the /slurmdb (slurmdbd) cases

Needs root (it asks tools/slurm-cluster.sh for a second user's token) and httpx.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
CLUSTER_SH = REPO / "tools" / "slurm-cluster.sh"
OUT = REPO / "tests" / "unit" / "fixtures" / "slurm"
UNKNOWN_JOB = 999999
OTHER_USER = "bridgeother"
# Base states after which a job no longer changes (1.9 of docs/external-apis.md).
TERMINAL = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
            "DEADLINE", "OUT_OF_MEMORY"}
REDACTED = "<redacted>"


def read_env(version):
    out = subprocess.run([str(CLUSTER_SH), "env", version], check=True, capture_output=True,
                         text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def mint_token(version, user):
    out = subprocess.run([str(CLUSTER_SH), "token", version, user], check=True,
                         capture_output=True, text=True).stdout
    return out.strip()


def api_num(api):
    return int(api.rsplit(".", 1)[1])


class Recorder:
    def __init__(self, env, api, other_token):
        self.api = api
        self.legacy = api_num(api) < 40  # v0.0.38: flat numbers, string states, dict environment
        self.user = env["SLURM_USER"]
        self.token = env["SLURM_JWT"]
        self.other_token = other_token
        self.secrets = [self.token, other_token]
        # A broken signature: the server sees a well-formed JWT that does not verify.
        self.bad_token = self.token[:-6] + ("AAAAAA" if not self.token.endswith("AAAAAA") else "BBBBBB")
        self.secrets.append(self.bad_token)
        # Also the signatures alone, so a partial copy would be caught too.
        self.secrets += [t.rsplit(".", 1)[-1] for t in list(self.secrets)]
        # Slurm 24.11 stalls ~5 s on some requests: keep the timeout well above that.
        self.http = httpx.Client(base_url=env["SLURM_URL"], timeout=30)
        self.outdir = OUT / api
        self.outdir.mkdir(parents=True, exist_ok=True)
        self.written = []

    # -- HTTP ---------------------------------------------------------------------------------
    def call(self, method, path, body=None, token=None, user=None, auth=True, store="slurm", params=None):
        headers = {"Accept": "application/json"}
        if auth:
            headers["X-SLURM-USER-NAME"] = user or self.user
            headers["X-SLURM-USER-TOKEN"] = token or self.token
        url = f"/{store}/{self.api}/{path}"
        resp = self.http.request(method, url, json=body, headers=headers, params=params)
        if params:
            url = str(resp.request.url.raw_path, "ascii")
        try:
            parsed = resp.json()
        except ValueError:
            parsed = resp.text
        return {
            "request": {"method": method, "path": url, **({"body": body} if body is not None else {})},
            "status": resp.status_code,
            "headers": {"content-type": resp.headers.get("content-type")},
            "body": parsed,
        }

    def record(self, case, exchange):
        text = json.dumps(exchange, indent=2, sort_keys=False) + "\n"
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        path = self.outdir / f"{case}.json"
        path.write_text(text)
        self.written.append(path)
        print(f"  {self.api}/{case}: HTTP {exchange['status']}", flush=True)
        return exchange

    def rec(self, case, method, path, **kw):
        return self.record(case, self.call(method, path, **kw))

    # -- job helpers --------------------------------------------------------------------------
    def job_body(self, name, script, partition="debug", minutes=5, comment=None, hold=False):
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "BRIDGE_FIXTURE": name}
        job = {
            "name": name,
            "partition": partition,
            "comment": comment or f"bridge:{name}",
            "current_working_directory": "/tmp",
            "standard_output": f"/tmp/{name}-%j.out",
        }
        if hold:
            job["hold"] = True
        script = "#!/bin/sh\n" + script + "\n"
        if self.legacy:
            job.update(time_limit=minutes, environment=env)
            return {"script": script, "job": job}
        job.update(script=script, time_limit={"set": True, "infinite": False, "number": minutes},
                   environment=[f"{k}={v}" for k, v in env.items()])
        return {"job": job}

    def submit(self, case, name, script, **kw):
        ex = self.call("POST", "job/submit", body=self.job_body(name, script, **kw))
        if case:
            self.record(case, ex)
        job_id = ex["body"].get("job_id") if isinstance(ex["body"], dict) else None
        if ex["status"] != 200 or not job_id:
            raise SystemExit(f"submit of {name} failed: {ex['status']} {ex['body']}")
        return job_id

    def job(self, job_id):
        ex = self.call("GET", f"job/{job_id}")
        jobs = ex["body"].get("jobs") if isinstance(ex["body"], dict) else None
        return ex, (jobs[0] if jobs else None)

    @staticmethod
    def states(job):
        s = job.get("job_state")
        return s if isinstance(s, list) else [s]

    def wait_job(self, job_id, pred, timeout, what):
        deadline = time.monotonic() + timeout
        while True:
            ex, job = self.job(job_id)
            if job and pred(job):
                return ex
            if time.monotonic() > deadline:
                raise SystemExit(f"job {job_id} did not reach {what} in {timeout}s: "
                                 f"{job and self.states(job)} {job and job.get('state_reason')}")
            time.sleep(0.5)

    def finished(self, job):
        s = self.states(job)
        # v0.0.38 reports COMPLETING instead of the base state while the job winds down.
        return s[0] in TERMINAL and not ({"COMPLETING", "STAGE_OUT"} & set(s))

    def running(self, job):
        return self.states(job)[0] == "RUNNING"

    def wait_recorded(self, job_id, state, timeout, required=True):
        """GET /slurmdb/.../job/<id> once accounting shows `state` (the last answer when not required)."""
        deadline = time.monotonic() + timeout
        while True:
            ex = self.call("GET", f"job/{job_id}", store="slurmdb")
            jobs = ex["body"].get("jobs") if isinstance(ex["body"], dict) else None
            current = ((jobs or [{}])[-1].get("state") or {}).get("current")
            if state in (current if isinstance(current, list) else [current]):
                return ex
            if time.monotonic() > deadline:
                if not required:
                    return ex
                raise SystemExit(f"accounting did not show job {job_id} {state} in {timeout}s: {current}")
            time.sleep(1)


def not_modified(ex):
    if ex["status"] == 304:
        return True
    body = ex["body"] if isinstance(ex["body"], dict) else {}
    return ex["status"] == 200 and not body.get("jobs") and any(
        "No job changes" in w.get("description", "") for w in body.get("warnings") or [])


def scenario(r, skip_timeout):
    # Started first: Slurm enforces the limit only every ~30 s, so TIMEOUT takes 1.5-2 min.
    timeout_id = None
    if not skip_timeout:
        timeout_id = r.submit(None, "fixture-timeout", "sleep 120", minutes=1)

    r.rec("ping", "GET", "ping/")
    r.rec("ping_bad_token", "GET", "ping/", token=r.bad_token)
    r.rec("ping_no_auth", "GET", "ping/", auth=False)
    r.rec("partitions", "GET", "partitions/")
    r.rec("partition_unknown", "GET", "partition/nope")
    r.rec("nodes", "GET", "nodes/")

    ok_id = r.submit("submit_ok", "fixture-ok", "echo fixture-ok; sleep 3")
    ex, job = r.job(ok_id)
    r.record("job_pending_or_running", ex)
    if not r.running(job):
        r.record("job_running", r.wait_job(ok_id, r.running, 60, "RUNNING"))
    r.record("job_completed", r.wait_job(ok_id, r.finished, 60, "the end"))

    fail_id = r.submit(None, "fixture-exit3", "exit 3")
    r.record("job_failed_exit3", r.wait_job(fail_id, r.finished, 60, "the end"))

    cancel_id = r.submit(None, "fixture-cancel", "sleep 300")
    r.wait_job(cancel_id, r.running, 60, "RUNNING")
    r.rec("delete_running", "DELETE", f"job/{cancel_id}")
    r.record("job_cancelled", r.wait_job(cancel_id, r.finished, 60, "the end"))

    r.rec("job_unknown", "GET", f"job/{UNKNOWN_JOB}")
    r.rec("job_bad_id", "GET", "job/abc")

    body = r.job_body("fixture-nopart", "echo never", partition="nope")
    r.rec("submit_unknown_partition", "POST", "job/submit", body=body)
    body = r.job_body("fixture-badtoken", "echo never")
    r.rec("submit_bad_token", "POST", "job/submit", body=body, token=r.bad_token)

    # Over the partition's MaxTime (debug: 30 min): accepted, then pends for ever.
    over_id = r.submit("submit_time_over_max", "fixture-overtime", "echo never", minutes=60)
    r.record("job_partition_time_limit", r.wait_job(
        over_id, lambda j: j.get("state_reason") == "PartitionTimeLimit", 60, "PartitionTimeLimit"))
    r.rec("delete_pending", "DELETE", f"job/{over_id}")

    r.rec("delete_finished", "DELETE", f"job/{ok_id}")
    r.rec("delete_unknown", "DELETE", f"job/{UNKNOWN_JOB}")

    listing = r.rec("jobs_list", "GET", "jobs/")
    # Cheap polling with update_time: "nothing changed" is a 304 without a body (v0.0.38) or a 200
    # with no jobs and a warning (v0.0.42+); v0.0.40/41 in 24.11 refuse an epoch (422) but take
    # "now". Try the list's last_update first, then a time in the future.
    last = listing["body"].get("last_update") if isinstance(listing["body"], dict) else None
    since = last["number"] if isinstance(last, dict) and last.get("set") else int(time.time())
    time.sleep(1)
    ex = None
    for when in (since, int(time.time()) + 60):
        ex = r.call("GET", f"jobs/?update_time={when}")
        if ex["status"] == 422:
            r.record("jobs_update_time_epoch_rejected", ex)
            ex = r.call("GET", "jobs/?update_time=now")
        if not_modified(ex):
            break
    r.record("jobs_not_modified", ex)

    if timeout_id:
        r.record("job_timeout", r.wait_job(timeout_id, r.finished, 240, "the end"))

    # Last, because on 24.11 and 26.05 this refusal wedges slurmctld (it keeps an internal lock):
    # the cluster is restarted afterwards.
    other_body = r.job_body("fixture-other", "sleep 300")
    ex = r.call("POST", "job/submit", body=other_body, token=r.other_token, user=OTHER_USER)
    other_id = ex["body"]["job_id"]
    r.rec("delete_other_users_job", "DELETE", f"job/{other_id}")
    return other_id


def accounting_scenario(r, skip_timeout):
    """The /slurmdb cases: accounting keeps jobs after slurmctld forgets them (MinJobAge)."""
    # As SlurmClient asks: times relative to the server's clock (epochs are refused by 22.05 and v0.0.40/41).
    probe = r.call("GET", "jobs/", params={"job_name": "bridge-probe", "submit_time": "now-0seconds"}, store="slurmdb")
    if probe["status"] == 404:
        r.record("slurmdb_absent", probe)
        return
    r.record("slurmdb_jobs_empty", probe)
    names = ["fixture-acct-ok", "fixture-acct-exit3", "fixture-acct-held", "fixture-acct-mem"]
    ok_id = r.submit(None, names[0], "echo ok; sleep 2")
    fail_id = r.submit(None, names[1], "exit 3")
    held_id = r.submit(None, names[2], "true", hold=True)
    # 48 MiB held by the batch shell for 3 s, sampled every second (JobAcctGatherFrequency=task=1).
    mem_id = r.submit(None, names[3], "x=$(head -c 50331648 /dev/zero | tr '\\0' a); sleep 3; echo ${#x}")
    timeout_id = None if skip_timeout else r.submit(None, "fixture-acct-timeout", "sleep 120", minutes=1)
    r.record("slurmdb_job_completed", r.wait_recorded(ok_id, "COMPLETED", 90))
    r.record("slurmdb_job_failed_exit3", r.wait_recorded(fail_id, "FAILED", 90))
    r.record("slurmdb_job_max_rss", r.wait_recorded(mem_id, "COMPLETED", 90))
    r.record("slurmdb_job_held", r.wait_recorded(held_id, "PENDING", 30, required=False))
    r.rec("slurmdb_jobs_by_name", "GET", "jobs/", store="slurmdb",
          params=dict({"job_name": ",".join(sorted(names)), "submit_time": "now-3600seconds"},
                      # 22.05 refuses the users filter.
                      **({} if r.legacy else {"users": r.user})))
    r.rec("slurmdb_jobs_window", "GET", "jobs/", store="slurmdb",
          params={"job_name": ",".join(sorted(names)), "start_time": "now-3600seconds", "end_time": "now"})
    r.rec("slurmdb_job_unknown", "GET", f"job/{UNKNOWN_JOB}", store="slurmdb")
    r.call("DELETE", f"job/{held_id}")
    r.record("slurmdb_job_cancelled", r.wait_recorded(held_id, "CANCELLED", 60))
    if timeout_id:
        r.record("slurmdb_job_timeout", r.wait_recorded(timeout_id, "TIMEOUT", 240))


def cleanup(r, version, other_id):
    """Restart a wedged cluster (start does that), then let the owner cancel its job."""
    subprocess.run([str(CLUSTER_SH), "start", version], check=True)
    r.call("DELETE", f"job/{other_id}", token=r.other_token, user=OTHER_USER)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("version", choices=["22.05", "24.11", "26.05"])
    ap.add_argument("--api", help="API version, e.g. v0.0.40 (default: newest served)")
    ap.add_argument("--skip-timeout", action="store_true", help="skip the slow job_timeout case")
    ap.add_argument("--accounting", action="store_true", help="only the /slurmdb cases (slurmdb_absent without slurmdbd)")
    args = ap.parse_args()

    env = read_env(args.version)
    served = env["SLURM_API_VERSIONS"].split(",")
    api = args.api or served[0]
    if api not in served:
        sys.exit(f"{api} is not served by Slurm {args.version} (serves {','.join(served)})")
    r = Recorder(env, api, mint_token(args.version, OTHER_USER))
    print(f"recording {api} from Slurm {args.version} at {env['SLURM_URL']}", flush=True)
    if args.accounting:
        accounting_scenario(r, args.skip_timeout)
    else:
        cleanup(r, args.version, scenario(r, args.skip_timeout))

    leaked = [str(p) for p in r.written for s in r.secrets if s in p.read_text()]
    if leaked:
        sys.exit(f"token found in {leaked}")
    print(f"wrote {len(r.written)} files to {r.outdir}")


if __name__ == "__main__":
    main()
