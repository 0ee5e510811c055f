"""Every registered backend, and the unit tests' fake, keeps the contract of _backend.py.

Same declarations, same verbs, and the same normalized job shape from answers recorded from the
real services. A new backend fails here until it declares itself and gives its recorded samples.
"""

import glob
import os
import re
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from ansible_collections.bridge.hpc.plugins.module_utils import _backend
from ansible_collections.bridge.hpc.plugins.module_utils._backend import (
    CAPABILITY_DOCS,
    FAILURE_CLASSES,
    JOB_KEYS,
    PHASES,
    Backend,
    compilable,
    newest_by_identity,
)
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.client import IDENTITY_LABEL, identity_hash
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.states import normalize_job as k8s_normalize_job
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.client import LsfClient
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.answers import records as lsf_records
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.states import normalize_job as lsf_normalize_job
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.states import normalize_job as quantum_normalize_job
from ansible_collections.bridge.hpc.plugins.module_utils.ray.client import RayClient
from ansible_collections.bridge.hpc.plugins.module_utils.ray.states import normalize_job as ray_normalize_job
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.states import normalize_job as slurm_normalize_job

from fake_backend import FakeBackend
from k8s_stub import ApiServerStub
from quantum_stub import StubRuntime
from slurm_stub import Stub as SlurmStub
from recorded import FIXTURES, recorded, replaying_transport

VERBS = ("describe", "render", "check", "submit", "find_many", "get", "list", "cancel", "inventory", "capacity")
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def recorded_jobs(manager, version, normalize, key=None):
    """Every job a recorded answer of `manager` holds, normalized."""
    jobs = []
    for path in sorted(glob.glob(os.path.join(FIXTURES, manager, version, "job*.json"))):
        fixture = recorded(manager, version, os.path.basename(path)[:-5])
        if fixture["status"] != 200:
            continue
        body = fixture["body"]
        natives = body.get(key) or [] if key else (body if isinstance(body, list) else [body])
        jobs.extend(normalize(native) for native in natives)
    return jobs


def fake_jobs():
    backend = FakeBackend(progression=("queued", "running", "failed"), final={"failure_class": "non_zero_exit"})
    job_id = backend.submit(normalize_spec({"script": "#!/bin/bash\ntrue\n", "identity": "contract"}))
    return [backend.get(job_id) for _poll in range(3)]


# Jobs of each backend as its normalizer makes them from real answers. A new backend adds its own.
SAMPLES = {
    "slurm": lambda: [job for version in ("v0.0.38", "v0.0.40", "v0.0.42", "v0.0.45")
                      for job in recorded_jobs("slurm", version, slurm_normalize_job, key="jobs")],
    "ray": lambda: recorded_jobs("ray", "2.60.0", ray_normalize_job),
    # From the PAC simulator (tests/simulators/lsf_pac.py), not a real Application Center.
    "lsf": lambda: [lsf_normalize_job(native) for body in recorded_jobs("lsf", "simulator", lambda body: body)
                    for native in lsf_records(body, "job", "jobs")],
    # HAND-WRITTEN from the fact sheets and qiskit-ibm-runtime's source, and recorded from the Qiskit
    # Runtime SIMULATOR (tests/simulators/quantum_runtime.py), not from IBM Quantum (fixtures/quantum/README.md).
    "quantum": lambda: [quantum_normalize_job(native) for source in ("handwritten", "simulator")
                        for body in recorded_jobs("quantum", source, lambda body: body)
                        for native in (body["jobs"] if "jobs" in body else [body])],
    # HAND-WRITTEN in kube-apiserver v1.34's shapes, and RECORDED from the real cluster of
    # tools/kube-control-plane.sh where fixtures/kubernetes/recorded exists (fixtures/kubernetes/README.md).
    "kubernetes": lambda: [k8s_normalize_job(body["job"], body["pods"]) for source in ("handwritten", "recorded")
                           for body in recorded_jobs("kubernetes", source, lambda body: body)],
    "fake": fake_jobs,
}
EVERY_BACKEND = sorted(BACKENDS.items()) + [("fake", FakeBackend)]


@pytest.mark.parametrize("name, backend", EVERY_BACKEND)
def test_declarations(name, backend):
    assert backend.NAME == name and backend.TITLE
    options = backend.connection_options()
    assert set(backend.CREDENTIALS) <= set(options), "credentials must be connection options"
    assert set(backend.SECRETS) <= set(backend.CREDENTIALS)
    assert all(options[secret].get("no_log") for secret in backend.SECRETS)
    assert set(backend.ENV) <= set(options)
    assert set(backend.CAPABILITIES) <= set(CAPABILITY_DOCS), "document a new capability in CAPABILITY_DOCS"


@pytest.mark.parametrize("name, backend", EVERY_BACKEND)
def test_every_verb_is_implemented(name, backend):
    for verb in VERBS + ("from_options",):
        assert getattr(backend, verb) is not getattr(Backend, verb), "%s does not implement %s" % (name, verb)
    assert (backend.logs is not Backend.logs) == ("logs" in backend.CAPABILITIES)


@pytest.mark.parametrize("name", sorted(BACKENDS) + ["fake"])
def test_normalized_jobs_have_one_shape(name):
    assert name in SAMPLES, "add recorded jobs of backend %s to SAMPLES" % name
    jobs = SAMPLES[name]()
    assert jobs
    for job in jobs:
        assert set(JOB_KEYS) <= set(job), "%s lacks %s" % (name, set(JOB_KEYS) - set(job))
        assert isinstance(job["job_id"], str) and job["job_id"]
        assert job["phase"] in PHASES
        assert job["terminal"] is (job["phase"] in _backend.TERMINAL_PHASES)
        assert job["failure_class"] is None or job["failure_class"] in FAILURE_CLASSES
        assert job["phase"] != "completed" or job["failure_class"] is None
        assert job["exit_code"] is None or isinstance(job["exit_code"], int)
        for key in ("submit_time", "start_time", "end_time"):
            assert job[key] is None or RFC3339.match(job[key]), (key, job[key])
        assert job["end_time"] is None or job["terminal"]
        assert isinstance(job["native"], dict)


# What each backend's $(LAUNCHER) becomes for one task, and for 4 tasks on 2 nodes: the command, or
# ("refused", the field its SpecError names). A new backend declares its own here.
LAUNCHERS = {
    "slurm": ("srun", "srun -n 4 -N 2"),
    "lsf": ("", "blaunch"),
    "ray": ("", ("refused", "resources.nodes")),
    # A primitive run has no tasks or nodes to ask for (the field table), nor a command to launch.
    "quantum": (("refused", "script"), ("refused", "resources.nodes")),
    "kubernetes": ("", ("refused", "resources.nodes")),
    "fake": ("", ""),
}


@pytest.mark.parametrize("name, backend", EVERY_BACKEND)
def test_every_backend_declares_its_launcher(name, backend):
    assert name in LAUNCHERS, "declare what $(LAUNCHER) becomes on backend %s in LAUNCHERS" % name
    assert backend.launcher.__func__ is not Backend.launcher.__func__, "%s does not implement launcher" % name
    one = normalize_spec({"script": "#!/bin/sh\n$(LAUNCHER) true\n"})
    many = normalize_spec({"script": "#!/bin/sh\n$(LAUNCHER) true\n", "resources": {"tasks": 4, "nodes": 2}})
    for spec, expected in zip((one, many), LAUNCHERS[name]):
        # What it cannot start, the field table refuses before the launcher (compilable) or the launcher does.
        if isinstance(expected, tuple):
            with pytest.raises(SpecError) as refused:
                compilable(backend, spec)
            assert refused.value.field == expected[1]
        else:
            assert backend.launcher(spec) == expected


@pytest.mark.parametrize("name, backend", EVERY_BACKEND)
def test_the_url_is_checked_before_any_request(name, backend):
    if backend is FakeBackend:
        pytest.skip("the fake has no URL")
    if backend.URL_NAME is not None:
        with pytest.raises(Exception, match="^url: .*required"):
            backend.from_options(lambda option: None)
    with pytest.raises(Exception, match="^url: 'slurm.example.org' is not an http"):
        backend.from_options(lambda option: "slurm.example.org" if option == "url" else None)


def test_newest_is_chosen_by_submit_time_not_by_id():
    older = {"job_id": "b-job", "identity": "x", "submit_time": "2026-12-01T10:00:00Z"}
    newer = {"job_id": "a-job", "identity": "x", "submit_time": "2026-12-01T10:00:05Z"}
    warnings = []
    assert newest_by_identity([newer, older], warnings)["x"] is newer
    assert newest_by_identity([older, newer])["x"] is newer
    assert "several jobs carry identity 'x'" in warnings[0]


def test_without_submit_times_ids_decide_by_number_not_by_text():
    nine, ten = {"job_id": "9", "identity": "x"}, {"job_id": "10", "identity": "x"}
    assert newest_by_identity([ten, nine])["x"] is ten


# -- the lookup before a submit is bounded (issue 27) ---------------------------------------------
# What ensure_present asks of a named spec without an explicit identity: its identity and the one
# Bridge 0.1.0 derived, both submitted under the spec's name. Neither has a job here, the lookup
# every new job pays. Each backend says how every request of it stays bounded whatever the number
# of jobs the manager keeps (by id, tag, label or name), checks it on the requests sent, and caps
# their number.
NEW, OLD, NAME = "contract-new", "contract-old", "contract"


def requested(method, url):
    """(method, path, query) of a request."""
    parts = urlsplit(str(url))
    return method, parts.path, dict(parse_qsl(parts.query))


def lsf_lookup():
    sent = []

    def pac(request):
        if request.url.path.endswith("/ws/logon"):
            return httpx.Response(200, json={"token": 'u"2099-01-01T00:00:00Z"c2ln"YWJj'})
        sent.append(requested(request.method, request.url))
        return httpx.Response(404, json={"message": "No matching job found."})

    url = "http://pac.test/platform"
    http = httpx.Client(base_url=url, transport=httpx.MockTransport(pac))
    client = LsfClient(url, user="u", password="p", transport=Transport(url, "LSF", http_client=http, sleep=lambda s: None))
    return client, lambda: sent


def ray_lookup():
    answers = [recorded("ray", "2.60.0", case) for case in ("job_unknown", "version", "job_unknown")]
    transport, sent = replaying_transport("Ray", answers)
    return RayClient("http://ray.test", token="tok", transport=transport), lambda: [requested(r.method, r.url) for r in sent]


def quantum_lookup():
    stub = StubRuntime()
    return stub.client(), lambda: [requested(method, url) for method, url in stub.api_requests()]


def slurm_lookup():
    # slurmctld holds jobs, none of them these; its queue for slurmdbd is empty (24.11 and later).
    stub = SlurmStub(live=[], recorded=[], dbd_queue=0)
    return stub.client(), lambda: [requested(r.method, r.url) for r in stub.sent]


def kubernetes_lookup():
    stub = ApiServerStub()
    return stub.client(), lambda: [(method, path, query) for method, path, query, _body in stub.sent]


LOOKUPS = {
    "lsf": ("by job name: GET ws/jobs?jobname= of the name and of each identity (404 when no job has it); the "
            "jobs found are then read by id (POST ws/jobs/getfullinfo), none here", 3, lsf_lookup,
            lambda method, path, query: method == "GET" and path.endswith("/ws/jobs") and query.get("jobname") in (NAME, NEW, OLD)),
    "ray": ("by id: the submission id is the identity, GET /api/jobs/<identity> of each (and Ray's version once a "
            "client, to read its error texts)", 3, ray_lookup,
            lambda method, path, query: method == "GET" and path in ("/api/jobs/" + NEW, "/api/jobs/" + OLD, "/api/version")),
    "quantum": ("by tag: one page (limit) of the jobs tagged bridge, then GET /jobs?tags=bridge:<identity> of each "
                "identity not on it", 3, quantum_lookup,
                lambda method, path, query: method == "GET" and path.endswith("/jobs") and query.get("limit")
                and query.get("tags") in ("bridge", "bridge:" + NEW, "bridge:" + OLD)),
    "slurm": ("by job name: accounting's GET /slurmdb/<version>/jobs/?job_name= of the name and the identities, "
              "then, for what it lacks, GET /slurm/<version>/diag and, once slurmctld has nothing queued for "
              "slurmdbd, the same query again (22.05, or a queue that is not empty: slurmctld's list)", 3, slurm_lookup,
              lambda method, path, query: (method == "GET" and path.endswith("/diag/")) or (
                  method == "GET" and "/slurmdb/" in path and path.endswith("/jobs/")
                  and set(query.get("job_name", "").split(",")) == {NAME, NEW, OLD})),
    "kubernetes": ("by label: one Job list selecting the identities' hashes (%s in (...)); their Pods only for "
                   "Jobs found" % IDENTITY_LABEL, 1, kubernetes_lookup,
                   lambda method, path, query: method == "GET" and path.endswith("/jobs") and query.get("labelSelector")
                   == "%s in (%s)" % (IDENTITY_LABEL, ",".join(sorted(identity_hash(i) for i in (NEW, OLD))))),
}
# Backends whose lookup of a new identity still reads every job the manager keeps, and why.
UNBOUNDED = {}


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_every_backend_says_how_its_lookup_is_bounded(name):
    assert (name in LOOKUPS) != (name in UNBOUNDED), "say in LOOKUPS how backend %s bounds its lookup" % name


@pytest.mark.parametrize("name", sorted(LOOKUPS))
def test_the_lookup_of_a_new_identity_asks_only_for_it(name):
    reason, most, make, bounded = LOOKUPS[name]
    client, sent = make()
    assert client.find_many([NEW, OLD], names=[NAME, NAME]) == {}
    requests = sent()
    assert requests and len(requests) <= most, (reason, requests)
    for request in requests:
        assert bounded(*request), "%s: %s is not %s" % (name, request, reason)
