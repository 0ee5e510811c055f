"""An in-memory backend with the client verbs _jobs uses: for lifecycle and module unit tests only.

Integration tests use real Slurm; this only pins the lifecycle rules (find before submit, no
writes in check mode, changed from before/after).
"""

from ansible_collections.bridge.hpc.plugins.module_utils._backend import TERMINAL_PHASES, Backend, queue_record
from ansible_collections.bridge.hpc.plugins.module_utils._errors import NotFound


class FakeBackend(Backend):
    NAME = "fake"
    TITLE = "Fake"
    CONNECTION = dict(token=dict(type="str"))
    CREDENTIALS = ("token",)
    SECRETS = ("token",)

    def __init__(self, progression=("queued", "running", "completed"), final=None):
        self.jobs = {}
        self.submits = []
        self.cancels = []
        self.preflights = 0
        self.progression = list(progression)
        self.final = final or {}
        self.warnings = []
        self.polls = {}
        self.lookups = 0

    @classmethod
    def launcher(cls, spec):
        return ""

    def render(self, spec):
        return {"rendered": spec["identity"]}

    @classmethod
    def from_options(cls, get):
        return cls()

    @property
    def requests_sent(self):
        return self.lookups

    def describe(self):
        return {"manager": self.TITLE, "url": "fake://", "version": "1", "api_version": None}

    def _newest(self, identity):
        matches = [j for j in self.jobs.values() if j["identity"] == identity]
        return dict(matches[-1]) if matches else None

    def find_many(self, identities, names=None):
        self.lookups += 1
        found = {}
        for identity in identities:
            job = self._newest(identity)
            if job is not None:
                found[identity] = self.get(job["job_id"]) if not job["terminal"] else job
        return found

    def list(self, identities=None, name=None, phases=None):
        return [dict(job) for job in self.jobs.values()
                if (identities is None or job["identity"] in identities)
                and (name is None or job["name"] == name) and (not phases or job["phase"] in phases)]

    def check(self, spec):
        self.preflights += 1

    def inventory(self):
        return {"nodes": [{"name": "fake-node", "native": {}}]}

    def capacity(self):
        running = sum(1 for job in self.jobs.values() if job["phase"] == "running")
        queued = sum(1 for job in self.jobs.values() if job["phase"] == "queued")
        return {"manager": self.TITLE, "version": "1", "api_version": None,
                "queues": [queue_record(name=None, state="ready", usable=True, default=True, pending=queued,
                                        running=running)]}

    def submit(self, spec):
        job_id = str(100 + len(self.submits))
        self.submits.append(spec)
        self.jobs[job_id] = self._job(job_id, spec["identity"], self.progression[0])
        self.polls[job_id] = 0
        return job_id

    def _job(self, job_id, identity, phase, **extra):
        job = {"job_id": job_id, "identity": identity, "name": identity, "phase": phase,
               "terminal": phase in TERMINAL_PHASES, "native_state": phase.upper(),
               "reason": None, "exit_code": 0 if phase == "completed" else None, "signal": None,
               "failure_class": None, "submit_time": "2026-12-01T00:00:%02dZ" % (int(job_id) % 60),
               "start_time": None, "end_time": None, "partition": "debug", "native": {"id": job_id}}
        job.update(extra)
        return job

    def get(self, job_id):
        job_id = str(job_id)
        if job_id not in self.jobs:
            raise NotFound("no such job", "get", "job", job_id, "Fake", "fake://")
        job = self.jobs[job_id]
        if not job["terminal"] and job["phase"] != "cancelled":
            self.polls[job_id] = self.polls.get(job_id, 0) + 1
            step = min(self.polls[job_id], len(self.progression) - 1)
            phase = self.progression[step]
            job = self._job(job_id, job["identity"], phase)
            if job["terminal"]:
                job.update(self.final)
            self.jobs[job_id] = job
        return dict(job)

    def cancel(self, job_id):
        self.cancels.append(job_id)
        job = self.jobs[str(job_id)]
        self.jobs[str(job_id)] = self._job(job["job_id"], job["identity"], "cancelled", failure_class="cancelled")

    def close(self):
        pass


class FatedBackend(FakeBackend):
    """A FakeBackend whose n-th submitted job meets the n-th of `fates` at its first read: (phase,
    extra fields), such as ("failed", {"failure_class": "timeout"}); its end_time is `ended`."""

    def __init__(self, fates, ended="2026-12-04T00:00:00Z"):
        super(FatedBackend, self).__init__()
        self.fates = list(fates)
        self.ended = ended

    def get(self, job_id):
        job_id = str(job_id)
        if job_id not in self.jobs:
            raise NotFound("no such job", "get", "job", job_id, "Fake", "fake://")
        job = self.jobs[job_id]
        if not job["terminal"] and job["phase"] != "cancelled" and job.get("fated") is None:
            phase, extra = self.fates[int(job_id) - 100]
            extra = dict(extra)
            if phase in TERMINAL_PHASES:
                extra.setdefault("end_time", self.ended)
            job = self._job(job_id, job["identity"], phase, fated=True, **extra)
            self.jobs[job_id] = job
        return dict(job)
