"""A STUB of slurmrestd for unit tests of the accounting paths: slurmctld's jobs and accounting's
(/slurmdb) jobs in memory, behind httpx.MockTransport, routed by path. The shapes follow recorded
responses (tests/unit/fixtures/slurm); recorded-response tests check the real ones.
"""

import httpx

from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

NOT_FOUND_TEXT = "Unable find requested URL. Please view /openapi/v3 for API reference."


def live_job(job_id, identity, state="RUNNING", name=None):
    return {"job_id": job_id, "name": name or identity, "comment": "bridge:" + identity, "job_state": [state],
            "exit_code": {"status": ["SUCCESS"], "return_code": {"set": True, "infinite": False, "number": 0}},
            "submit_time": {"set": True, "number": 1796000000}, "user_name": "bridge"}


def recorded_job(job_id, identity, state="COMPLETED", name=None, comment=True):
    return {"job_id": job_id, "name": name or identity, "user": "bridge", "account": "bridge",
            "comment": {"job": "bridge:" + identity if comment else None, "administrator": None, "system": None},
            "state": {"current": [state], "reason": "None"},
            "exit_code": {"status": ["SUCCESS"], "return_code": {"set": True, "infinite": False, "number": 0}},
            "time": {"submission": 1796000000, "start": 1796000001, "end": 1796000011, "elapsed": 10,
                     "limit": {"set": True, "infinite": False, "number": 5},
                     "total": {"seconds": 1, "microseconds": 250000}},
            "steps": [{"time": {"total": {"seconds": 1, "microseconds": 0}},
                       "tres": {"requested": {"max": [{"type": "cpu", "count": 1}, {"type": "mem", "count": 65011712}]}}},
                      {"time": {"total": {"seconds": 0, "microseconds": 250000}},
                       "tres": {"requested": {"max": [{"type": "mem", "count": 4096}]}}}]}


class Stub(object):
    """slurmrestd with `live` jobs in slurmctld and `recorded` ones in accounting (None: no /slurmdb);
    /diag says `dbd_queue` messages wait for slurmdbd (None: /diag answers no such statistic)."""

    def __init__(self, live=(), recorded=(), version="v0.0.42", dbd_queue=None):
        self.live = list(live)
        self.dbd_queue = dbd_queue
        self.recorded = None if recorded is None else list(recorded)
        self.version = version
        self.sent = []
        self.nothing_found = False

    def client(self, user="bridge"):
        http = httpx.Client(base_url="http://slurm.test", transport=httpx.MockTransport(self.handle))
        transport = Transport("http://slurm.test", "Slurm", secrets=["tok"], http_client=http, sleep=lambda s: None)
        return SlurmClient("http://slurm.test", user=user, token="tok", api_version=self.version, transport=transport)

    def paths(self):
        return [request.url.path for request in self.sent]

    def handle(self, request):
        self.sent.append(request)
        store, _version, rest = request.url.path.strip("/").split("/", 2)
        if store == "slurmdb":
            if self.recorded is None:
                return httpx.Response(404, text=NOT_FOUND_TEXT)
            if rest.startswith("job/"):
                job_id = int(rest.split("/")[1])
                return httpx.Response(200, json={"jobs": [j for j in self.recorded if job_id in (j["job_id"], array_of(j))]})
            names = request.url.params.get("job_name")
            jobs = [j for j in self.recorded if names is None or j["name"] in names.split(",")]
            if not jobs and self.nothing_found:
                return httpx.Response(200, json={"jobs": [], "errors": [
                    {"description": "Nothing found", "error_number": 9003, "error": "Nothing found with query",
                     "source": "slurmdb_jobs_get"}]})
            return httpx.Response(200, json={"jobs": jobs})
        if rest.startswith("diag"):
            statistics = {"jobs_submitted": len(self.live)}
            if self.dbd_queue is not None:
                statistics["dbd_agent_queue_size"] = self.dbd_queue
            return httpx.Response(200, json={"statistics": statistics})
        if rest.startswith("job/"):
            job_id = int(rest.split("/")[1])
            jobs = [j for j in self.live if job_id in (j["job_id"], array_of(j))]
            if not jobs:
                return httpx.Response(404, json={"errors": [{"error_number": 2017, "error": "Invalid job id specified"}]})
            return httpx.Response(200, json={"jobs": jobs})
        return httpx.Response(200, json={"jobs": self.live})


def array_of(job):
    """The id of the array a record of slurmctld or accounting belongs to (0: none): asked for the
    array's id, Slurm answers every record of it."""
    value = job.get("array_job_id", (job.get("array") or {}).get("job_id"))
    if isinstance(value, dict):
        value = value.get("number") if value.get("set") else 0
    return value or 0
