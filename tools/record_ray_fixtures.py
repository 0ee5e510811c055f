#!/usr/bin/env python
"""Record real Ray Jobs REST API responses as unit-test fixtures.

Runs a fixed scenario (version, submit, job states, logs, errors, stop, delete, impossible
resources, cluster status, nodes, working_dir packages) against the head started by
tools/ray-cluster.sh and writes one file per case:

    tests/unit/fixtures/ray/<ray version>/<case>.json
    {"request": {"method", "path", "body"?}, "status", "headers": {"content-type"}, "body"}

`body` is the parsed JSON, or the raw text when the answer is not JSON. A package upload's
request body (zip bytes) is written as {"zip_base64": ..., "files": {name: text}}.

Submission ids must be unique for the head's lifetime (and a reused id after DELETE appends to
the old log file), so the scenario needs a head without fixture-* jobs: with --restart it stops and
starts the head when there are some (this kills whatever else runs on it), else it refuses.
Other users' jobs are left out of `jobs_list` (the file says so in "note").

    tools/ray-cluster.sh start
    .venv/bin/python tools/record_ray_fixtures.py [--restart]   # the main scenario, ~40 s

`--second-head` records the token_* cases and job_failed_start_timeout instead, from a second head
with token auth and a short start timeout (its own run dir and ports):

    export BRIDGE_RUN=/tmp/bridge-ray2
    BRIDGE_RAY_AUTH=token BRIDGE_RAY_JOB_START_TIMEOUT=20 BRIDGE_RAY_DASHBOARD_PORT=8266 \
      BRIDGE_RAY_GCS_PORT=6380 BRIDGE_RAY_CLIENT_PORT=23001 BRIDGE_RAY_AGENT_PORT=52366 \
      tools/ray-cluster.sh start
    .venv/bin/python tools/record_ray_fixtures.py --second-head
    tools/ray-cluster.sh stop

Needs httpx (the project venv has it).
"""

import argparse
import base64
import hashlib
import io
import json
import subprocess
import time
import zipfile
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
CLUSTER_SH = REPO / "tools" / "ray-cluster.sh"
OUT = REPO / "tests" / "unit" / "fixtures" / "ray"
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}
PREFIX = "fixture-"
TOKEN_SHOWN = "<token>"


def read_env():
    out = subprocess.run([str(CLUSTER_SH), "env"], check=True, capture_output=True,
                         text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def make_zip(files):
    """A working_dir zip the way the SDK builds one: the files at the top level of the archive."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in files.items():
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            zf.writestr(info, text)
    return buf.getvalue()


def pkg_name(data):
    """The name the SDK gives an uploaded zip file: _ray_pkg_<sha1 of the zip bytes>.zip."""
    return f"_ray_pkg_{hashlib.sha1(data).hexdigest()}.zip"


class Recorder:
    def __init__(self, env):
        self.token = env.get("RAY_TOKEN") or ""
        self.http = client(env)
        self.bare = httpx.Client(base_url=env["RAY_URL"], timeout=60)  # never sends the token
        self.version = self.http.get("/api/version").json()["ray_version"]
        self.outdir = OUT / self.version
        self.outdir.mkdir(parents=True, exist_ok=True)
        self.written = []

    # -- HTTP ---------------------------------------------------------------------------------
    def call(self, method, path, body=None, content=None, shown_body=None, headers=None,
             auth=True):
        http = self.http if auth else self.bare
        resp = http.request(method, path, json=body, content=content, headers=headers)
        try:
            parsed = resp.json()
        except ValueError:
            parsed = resp.text
        req = {"method": method, "path": path}
        if body is not None or shown_body is not None:
            req["body"] = shown_body if shown_body is not None else body
        if headers:
            shown = {k: v.replace(self.token, TOKEN_SHOWN) if self.token else v
                     for k, v in headers.items()}
            req["headers"] = shown
        return {
            "request": req,
            "status": resp.status_code,
            "headers": {"content-type": resp.headers.get("content-type")},
            "body": parsed,
        }

    def record(self, case, exchange):
        text = json.dumps(exchange, indent=2) + "\n"
        if self.token and self.token in text:
            raise SystemExit(f"{case}: the token would be written")
        path = self.outdir / f"{case}.json"
        path.write_text(text)
        self.written.append(path)
        body = exchange["body"]
        summary = body.get("status") if isinstance(body, dict) and "status" in body else ""
        print(f"  {self.version}/{case}: HTTP {exchange['status']} {summary or ''}", flush=True)
        return exchange

    def rec(self, case, method, path, **kw):
        return self.record(case, self.call(method, path, **kw))

    # -- jobs ---------------------------------------------------------------------------------
    def submit(self, case, body):
        ex = self.call("POST", "/api/jobs/", body=body)
        if case:
            self.record(case, ex)
        return ex

    def job(self, sid):
        ex = self.call("GET", f"/api/jobs/{sid}")
        return ex, (ex["body"] if ex["status"] == 200 else None)

    def wait_job(self, sid, pred, timeout, what):
        deadline = time.monotonic() + timeout
        while True:
            ex, job = self.job(sid)
            if job and pred(job):
                return ex
            if time.monotonic() > deadline:
                raise SystemExit(f"job {sid} did not reach {what} in {timeout}s: "
                                 f"{job and job.get('status')} {job and job.get('message')}")
            time.sleep(0.3)

    def wait_done(self, sid, timeout=60):
        return self.wait_job(sid, lambda j: j["status"] in TERMINAL, timeout, "a terminal state")

    def wait_running(self, sid, timeout=60):
        return self.wait_job(sid, lambda j: j["status"] == "RUNNING", timeout, "RUNNING")


def scenario(r, pending_wait):
    r.rec("version", "GET", "/api/version")
    r.rec("authentication_mode", "GET", "/api/authentication_mode")
    r.rec("cluster_status_idle", "GET", "/api/cluster_status")

    # -- a job that succeeds -------------------------------------------------------------------
    ok = {
        "entrypoint": "echo hello $BRIDGE_FIXTURE && python -c 'print(6*7)'",
        "submission_id": f"{PREFIX}ok",
        "runtime_env": {"env_vars": {"BRIDGE_FIXTURE": "ok"}},
        "metadata": {"owner": "bridge", "case": "ok"},
        "entrypoint_num_cpus": 0.5,
    }
    r.submit("submit_ok", ok)
    r.rec("job_pending_or_running", "GET", f"/api/jobs/{PREFIX}ok")
    r.record("job_succeeded", r.wait_done(f"{PREFIX}ok"))
    r.rec("logs_succeeded", "GET", f"/api/jobs/{PREFIX}ok/logs")

    # -- a job that fails ----------------------------------------------------------------------
    r.submit("submit_exit3", {"entrypoint": "echo about to fail; exit 3",
                              "submission_id": f"{PREFIX}exit3"})
    r.record("job_failed_exit3", r.wait_done(f"{PREFIX}exit3"))
    r.rec("logs_failed_exit3", "GET", f"/api/jobs/{PREFIX}exit3/logs")

    # -- refused submissions -------------------------------------------------------------------
    r.submit("submit_duplicate", {"entrypoint": "echo again", "submission_id": f"{PREFIX}ok"})
    r.submit("submit_bad_field", {"entrypoint": "echo x", "submission_id": f"{PREFIX}badfield",
                                  "nope": 1})
    r.submit("submit_missing_entrypoint", {"submission_id": f"{PREFIX}noentry"})
    r.submit("submit_bad_type", {"entrypoint": "echo x", "submission_id": f"{PREFIX}badtype",
                                 "metadata": "not-a-dict"})
    ex = r.submit("submit_negative_cpus", {"entrypoint": "echo x",
                                           "submission_id": f"{PREFIX}negcpus",
                                           "entrypoint_num_cpus": -1})
    if ex["status"] == 200:
        r.record("job_negative_cpus", r.wait_done(f"{PREFIX}negcpus", 30))
    ex = r.submit("submit_unknown_runtime_env_key",
                  {"entrypoint": "echo x", "submission_id": f"{PREFIX}badenv",
                   "runtime_env": {"nope": 1}})
    if ex["status"] == 200:
        r.record("job_unknown_runtime_env_key", r.wait_done(f"{PREFIX}badenv", 60))
        r.rec("logs_unknown_runtime_env_key", "GET", f"/api/jobs/{PREFIX}badenv/logs")
    # The dashboard refuses non-GET requests that look like they come from a browser.
    r.rec("submit_browser_origin", "POST", "/api/jobs/",
          body={"entrypoint": "echo x", "submission_id": f"{PREFIX}browser"},
          headers={"Origin": "http://example.org"})
    r.rec("jobs_list_no_slash", "GET", "/api/jobs")
    r.rec("submit_no_slash", "POST", "/api/jobs",
          body={"entrypoint": "echo x", "submission_id": f"{PREFIX}noslash"})

    # -- a driver that calls ray.init(): only then does job_id get a value --------------------
    r.submit("submit_ray_driver", {
        "entrypoint": "python -c 'import ray; ray.init(); "
                      "print(ray.get(ray.remote(lambda: 6 * 7).remote()))'",
        "submission_id": f"{PREFIX}driver",
    })
    ex = r.record("job_ray_driver_succeeded", r.wait_done(f"{PREFIX}driver", 90))
    r.rec("logs_ray_driver", "GET", f"/api/jobs/{PREFIX}driver/logs")
    job_id = ex["body"].get("job_id")
    if job_id:
        r.rec("job_by_ray_job_id", "GET", f"/api/jobs/{job_id}")

    # -- a custom resource the head has ----------------------------------------------------------
    r.submit("submit_custom_resource", {"entrypoint": "echo custom",
                                        "submission_id": f"{PREFIX}custom",
                                        "entrypoint_resources": {"bridge_test": 1}})
    r.record("job_custom_resource_succeeded", r.wait_done(f"{PREFIX}custom"))

    # -- a running job: delete refused, stop, stopped ----------------------------------------
    r.submit("submit_sleep", {"entrypoint": "sleep 300", "submission_id": f"{PREFIX}sleep"})
    r.record("job_running", r.wait_running(f"{PREFIX}sleep"))
    r.rec("logs_running", "GET", f"/api/jobs/{PREFIX}sleep/logs")
    r.rec("delete_running", "DELETE", f"/api/jobs/{PREFIX}sleep")
    r.rec("stop_running", "POST", f"/api/jobs/{PREFIX}sleep/stop")
    r.record("job_stopped", r.wait_done(f"{PREFIX}sleep"))
    r.rec("logs_stopped", "GET", f"/api/jobs/{PREFIX}sleep/logs")
    r.rec("stop_finished", "POST", f"/api/jobs/{PREFIX}ok/stop")

    # -- delete -------------------------------------------------------------------------------
    r.rec("delete_finished", "DELETE", f"/api/jobs/{PREFIX}exit3")
    r.rec("job_deleted", "GET", f"/api/jobs/{PREFIX}exit3")

    # -- unknown ids --------------------------------------------------------------------------
    r.rec("job_unknown", "GET", "/api/jobs/nope")
    r.rec("logs_unknown", "GET", "/api/jobs/nope/logs")
    r.rec("stop_unknown", "POST", "/api/jobs/nope/stop")
    r.rec("delete_unknown", "DELETE", "/api/jobs/nope")

    # -- resources the head can never provide -------------------------------------------------
    r.submit("submit_impossible_gpu", {"entrypoint": "echo never",
                                       "submission_id": f"{PREFIX}gpu",
                                       "entrypoint_num_gpus": 1})
    r.submit("submit_impossible_resource", {"entrypoint": "echo never",
                                            "submission_id": f"{PREFIX}nores",
                                            "entrypoint_resources": {"nope": 1}})
    r.submit("submit_impossible_cpus", {"entrypoint": "echo never",
                                        "submission_id": f"{PREFIX}cpus",
                                        "entrypoint_num_cpus": 64})
    time.sleep(pending_wait)
    r.rec("job_pending_impossible_gpu", "GET", f"/api/jobs/{PREFIX}gpu")
    r.rec("job_pending_impossible_resource", "GET", f"/api/jobs/{PREFIX}nores")
    r.rec("job_pending_impossible_cpus", "GET", f"/api/jobs/{PREFIX}cpus")
    r.rec("logs_pending_impossible", "GET", f"/api/jobs/{PREFIX}gpu/logs")
    r.rec("cluster_status_infeasible", "GET", "/api/cluster_status")
    r.rec("cluster_status_format", "GET", "/api/cluster_status?format=1")
    r.rec("stop_pending", "POST", f"/api/jobs/{PREFIX}gpu/stop")
    time.sleep(5)
    r.rec("job_pending_after_stop", "GET", f"/api/jobs/{PREFIX}gpu")

    # -- nodes --------------------------------------------------------------------------------
    r.rec("nodes", "GET", "/api/v0/nodes")
    r.rec("nodes_detail", "GET", "/api/v0/nodes?detail=true")

    # -- working_dir from an uploaded package -------------------------------------------------
    files = {
        "main.py": "import os, sys\n"
                   "print('working_dir ok', open('data.txt').read().strip(), sys.argv[1:])\n"
                   "print('cwd has', sorted(os.listdir('.')))\n",
        "data.txt": "payload-1\n",
    }
    data = make_zip(files)
    name = pkg_name(data)
    shown = {"zip_base64": base64.b64encode(data).decode(), "files": files}
    r.rec("package_get_missing", "GET", f"/api/packages/gcs/{name}")
    r.rec("package_put", "PUT", f"/api/packages/gcs/{name}", content=data, shown_body=shown)
    r.rec("package_get_present", "GET", f"/api/packages/gcs/{name}")
    r.submit("submit_with_working_dir", {
        "entrypoint": "python main.py a b",
        "submission_id": f"{PREFIX}wd",
        "runtime_env": {"working_dir": f"gcs://{name}"},
    })
    r.record("job_working_dir_succeeded", r.wait_done(f"{PREFIX}wd"))
    r.rec("logs_working_dir", "GET", f"/api/jobs/{PREFIX}wd/logs")
    r.rec("package_get_after_job", "GET", f"/api/packages/gcs/{name}")

    # A name that is not the content hash: the server stores whatever it is given.
    files2 = dict(files, **{"data.txt": "payload-2\n"})
    data2 = make_zip(files2)
    shown2 = {"zip_base64": base64.b64encode(data2).decode(), "files": files2}
    r.rec("package_put_custom_name", "PUT", "/api/packages/gcs/bridge_fixture_pkg.zip",
          content=data2, shown_body=shown2)
    r.submit("submit_working_dir_custom_name", {
        "entrypoint": "python main.py custom",
        "submission_id": f"{PREFIX}wd-custom",
        "runtime_env": {"working_dir": "gcs://bridge_fixture_pkg.zip"},
    })
    r.record("job_working_dir_custom_name", r.wait_done(f"{PREFIX}wd-custom"))
    r.rec("logs_working_dir_custom_name", "GET", f"/api/jobs/{PREFIX}wd-custom/logs")

    # Same name, new content: shows whether a node re-downloads or keeps its unpacked copy.
    files3 = dict(files, **{"data.txt": "payload-3\n"})
    data3 = make_zip(files3)
    shown3 = {"zip_base64": base64.b64encode(data3).decode(), "files": files3}
    r.rec("package_put_same_name_new_content", "PUT", "/api/packages/gcs/bridge_fixture_pkg.zip",
          content=data3, shown_body=shown3)
    r.submit(None, {
        "entrypoint": "python main.py reused",
        "submission_id": f"{PREFIX}wd-reused",
        "runtime_env": {"working_dir": "gcs://bridge_fixture_pkg.zip"},
    })
    r.record("job_working_dir_same_name", r.wait_done(f"{PREFIX}wd-reused"))
    r.rec("logs_working_dir_same_name", "GET", f"/api/jobs/{PREFIX}wd-reused/logs")

    # A package that was never uploaded.
    missing = "_ray_pkg_" + "0" * 40 + ".zip"
    ex = r.submit("submit_working_dir_missing", {
        "entrypoint": "python main.py",
        "submission_id": f"{PREFIX}wd-missing",
        "runtime_env": {"working_dir": f"gcs://{missing}"},
    })
    if ex["status"] == 200:
        r.record("job_working_dir_missing", r.wait_done(f"{PREFIX}wd-missing", 120))

    # A name without an extension and a non-gcs protocol.
    r.rec("package_put_no_extension", "PUT", "/api/packages/gcs/bridge_fixture_noext",
          content=data, shown_body=shown)
    ex = r.submit("submit_working_dir_no_extension", {
        "entrypoint": "python main.py",
        "submission_id": f"{PREFIX}wd-noext",
        "runtime_env": {"working_dir": "gcs://bridge_fixture_noext"},
    })
    if ex["status"] == 200:
        r.record("job_working_dir_no_extension", r.wait_done(f"{PREFIX}wd-noext", 120))
    r.rec("package_put_bad_protocol", "PUT", f"/api/packages/https/{name}", content=data,
          shown_body=shown)

    ex = r.call("GET", "/api/jobs/")
    if isinstance(ex["body"], list):
        mine = [j for j in ex["body"] if (j.get("submission_id") or "").startswith(PREFIX)]
        if len(mine) != len(ex["body"]):
            ex["note"] = (f"body filtered to the {len(mine)} fixture-* jobs of the "
                          f"{len(ex['body'])} the head listed")
            ex["body"] = mine
    r.record("jobs_list", ex)


def second_head(r, timeout):
    """Token auth and the start timeout, from a head started with BRIDGE_RAY_AUTH=token and
    BRIDGE_RAY_JOB_START_TIMEOUT (see the module docstring)."""
    if not r.token:
        raise SystemExit("--second-head needs a head started with BRIDGE_RAY_AUTH=token")
    bearer = f"Bearer {r.token}"
    r.rec("token_authentication_mode", "GET", "/api/authentication_mode", auth=False)
    r.rec("token_missing", "GET", "/api/jobs/", auth=False)
    r.rec("token_wrong", "GET", "/api/jobs/", auth=False,
          headers={"Authorization": "Bearer " + "0" * 64})
    r.rec("token_without_bearer", "GET", "/api/version", auth=False,
          headers={"Authorization": r.token})
    r.rec("token_ok", "GET", "/api/version", auth=False, headers={"Authorization": bearer})
    r.rec("token_x_ray_authorization", "GET", "/api/version", auth=False,
          headers={"X-Ray-Authorization": bearer})
    r.rec("token_missing_submit", "POST", "/api/jobs/", auth=False,
          body={"entrypoint": "echo never", "submission_id": f"{PREFIX}noauth"})

    r.submit("submit_start_timeout", {"entrypoint": "echo never",
                                      "submission_id": f"{PREFIX}timeout",
                                      "entrypoint_num_gpus": 1})
    r.record("job_failed_start_timeout", r.wait_done(f"{PREFIX}timeout", timeout))


def client(env):
    token = env.get("RAY_TOKEN") or ""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=env["RAY_URL"], timeout=60, headers=headers)


def fixture_jobs(http):
    jobs = http.get("/api/jobs/").json()
    return [j for j in jobs if (j.get("submission_id") or "").startswith(PREFIX)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--pending-wait", type=float, default=10,
                    help="seconds to let the impossible jobs pend before reading them")
    ap.add_argument("--restart", action="store_true",
                    help="restart the head if it has fixture-* jobs from an earlier run")
    ap.add_argument("--second-head", action="store_true",
                    help="record token_* and job_failed_start_timeout (see above)")
    ap.add_argument("--start-timeout-wait", type=float, default=120,
                    help="seconds to wait for job_failed_start_timeout")
    args = ap.parse_args()

    env = read_env()
    with client(env) as http:
        leftovers = fixture_jobs(http)
    if leftovers and (args.second_head or not args.restart):
        raise SystemExit(f"{len(leftovers)} fixture-* jobs exist on this head already; restart it "
                         "(tools/ray-cluster.sh stop; tools/ray-cluster.sh start) or pass --restart")
    if leftovers:
        print(f"{len(leftovers)} fixture jobs from an earlier run: restarting the head", flush=True)
        subprocess.run([str(CLUSTER_SH), "stop"], check=True)
        subprocess.run([str(CLUSTER_SH), "start"], check=True)
        env = read_env()
    r = Recorder(env)
    print(f"recording Ray {r.version} at {env['RAY_URL']}", flush=True)
    try:
        if args.second_head:
            second_head(r, args.start_timeout_wait)
        else:
            scenario(r, args.pending_wait)
    finally:
        # The impossible jobs would pend for 15 minutes; stop what still runs.
        for job in fixture_jobs(r.http):
            if job["status"] not in TERMINAL:
                r.http.post(f"/api/jobs/{job['submission_id']}/stop")
    print(f"wrote {len(r.written)} files to {r.outdir}")


if __name__ == "__main__":
    main()
