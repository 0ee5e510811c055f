"""What every submit benchmark shares: timing, the four submit methods, the ratio table."""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(REPO, ".run", "collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_present  # noqa: E402


def read_env(path):
    """The variables of an env file that a service script wrote (NAME=value lines)."""
    env = {}
    with open(path) as handle:
        for line in handle:
            if "=" in line and not line.startswith("#"):
                name, value = line.rstrip("\n").split("=", 1)
                env[name] = value
    return env


def timed(submit_one, items):
    """(total seconds, per-item seconds) of calling submit_one on each item in turn."""
    durations = []
    started = time.perf_counter()
    for item in items:
        t0 = time.perf_counter()
        submit_one(item)
        durations.append(time.perf_counter() - t0)
    return time.perf_counter() - started, durations


def timed_playbook(playbook_text, extra_vars, count):
    """(total, per-job) seconds of one ansible-playbook run that submits `count` jobs."""
    with tempfile.TemporaryDirectory() as tmp:
        playbook = os.path.join(tmp, "bench.yml")
        with open(playbook, "w") as handle:
            handle.write(playbook_text)
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_PYTHON_INTERPRETER=sys.executable,
                   ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
        ansible_playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
        t0 = time.perf_counter()
        subprocess.run([ansible_playbook, "-i", "localhost,", "-c", "local", playbook, "-e", json.dumps(extra_vars)],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        total = time.perf_counter() - t0
    return total, [total / count] * count


def print_table(title, results, count, baseline="raw POST"):
    print(title)
    print("%-18s %12s %12s %10s" % ("method", "ms/job mean", "ms/job p50", "x raw"))
    floor = results[baseline][0] / count
    for method, (total, durations) in results.items():
        mean = total / count
        print("%-18s %12.1f %12.1f %10.1f" % (method, mean * 1000, statistics.median(durations) * 1000, mean / floor))


class SubmitBench(object):
    """One run of the four submit methods against one service, each on fresh identities.

    `client` is a backend client, `spec_for(identity)` the normalized spec of one benchmark job.
    `submitted` collects the job ids of the timed submissions, for the caller to clean up.
    """

    def __init__(self, client, spec_for, count):
        self.client = client
        self.spec_for = spec_for
        self.count = count
        self.run = uuid.uuid4().hex[:6]
        self.results = {}
        self.submitted = []

    def identities(self, tag):
        return ["bench-%s-%s-%03d" % (self.run, tag, i) for i in range(self.count)]

    def time_raw(self, post, items):
        """The floor: post(item) sends one request and returns the new job's id."""
        self.results["raw POST"] = timed(lambda item: self.submitted.append(post(item)), items)

    def time_client(self):
        """client.submit alone, then the whole module lifecycle ensure_present."""
        client, spec_for = self.client, self.spec_for
        self.results["client.submit"] = timed(
            lambda identity: self.submitted.append(client.submit(spec_for(identity))), self.identities("cli"))
        self.results["ensure_present"] = timed(
            lambda identity: self.submitted.append(ensure_present(client, spec_for(identity))["job"]["job_id"]),
            self.identities("ens"))

    def time_playbook(self, playbook_text, extra_vars=None):
        """ansible-playbook looping over `identities`; returns them (the playbook's job ids are not seen)."""
        identities = self.identities("pb")
        self.results["ansible-playbook"] = timed_playbook(
            playbook_text, dict(extra_vars or {}, identities=identities), self.count)
        return identities

    def print_table(self, title):
        print_table(title, self.results, self.count)

    def requests_per_lifecycle(self, probe):
        """HTTP requests `probe` sends for one ensure_present that submits a new job; the job's id
        joins `submitted`."""
        before = probe.transport.requests_sent
        self.submitted.append(ensure_present(probe, self.spec_for("bench-%s-count" % self.run))["job"]["job_id"])
        return probe.transport.requests_sent - before
