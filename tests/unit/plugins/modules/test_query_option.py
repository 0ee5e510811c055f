"""The `query` option of every *_info module (doc fragment bridge.hpc.query, module_utils/_query.py):
documented once, in every argspec, checked before any client exists, narrowing the result."""

import glob
import importlib
import os

import pytest
import yaml

from ansible_collections.bridge.hpc.plugins.module_utils import _module
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS
from ansible_collections.bridge.hpc.plugins.modules import job_info, slurm_cluster_info, slurm_job_info

from fake_backend import FakeBackend
from module_runner import Fail, run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
INFO_MODULES = sorted(os.path.basename(path)[:-3] for path in glob.glob(os.path.join(REPO, "plugins", "modules", "*_info.py")))
CONNECTION = {"url": "http://slurm.test:6820", "user": "alice", "token": "s3cret-token"}
# What each module needs besides its connection to get as far as reading.
ARGS = {"job_info": {"backend": "slurm", "identities": ["sweep-1"]}, "quantum_backend_info": {"gather": ["status"]}}

pytestmark = pytest.mark.usefixtures("capture")


def module_named(name):
    return importlib.import_module("ansible_collections.bridge.hpc.plugins.modules.%s" % name)


class AnyClient(object):
    """A client of any backend that knows no job, device or node: every verb answers an empty list."""

    warnings = []
    transport = None
    requests_sent = 0
    api_version = "v0.0.42"

    def poll_many(self, identities):
        return {}

    def close(self):
        pass

    def __getattr__(self, verb):
        return lambda *args, **kwargs: []


@pytest.fixture
def no_client(monkeypatch):
    """Every backend's client construction fails the test: nothing may be contacted."""
    def refuse(cls, get):
        raise AssertionError("a client was built, so a request could have been sent")

    for backend in BACKENDS.values():
        monkeypatch.setattr(backend, "from_options", classmethod(refuse))


@pytest.fixture
def any_client(monkeypatch):
    for backend in BACKENDS.values():
        monkeypatch.setattr(backend, "from_options", classmethod(lambda cls, get: AnyClient()))


@pytest.fixture
def backend(monkeypatch):
    fake = FakeBackend()
    monkeypatch.setattr(SlurmClient, "from_options", classmethod(lambda cls, get: fake))
    for job_id, phase in (("1", "running"), ("2", "completed"), ("3", "running")):
        fake.jobs[job_id] = fake._job(job_id, "identity-%s" % job_id, phase, user="alice")
    return fake


def test_the_info_modules_are_the_ten_there_are():
    assert INFO_MODULES == ["job_info", "k8s_job_info", "lsf_cluster_info", "lsf_job_info", "quantum_backend_info",
                            "quantum_job_info", "ray_cluster_info", "ray_job_info", "slurm_cluster_info", "slurm_job_info"]


@pytest.mark.parametrize("name", INFO_MODULES)
def test_every_info_module_documents_query_through_the_fragment_and_what_it_returns(name):
    module = module_named(name)
    docs = yaml.safe_load(module.DOCUMENTATION)
    assert "bridge.hpc.query" in docs["extends_documentation_fragment"]
    assert "query" not in (docs.get("options") or {}), "written once, in the fragment"
    returns = yaml.safe_load(module.RETURN)
    assert returns["query_result"]["returned"] == "when query is set"
    for key, doc in returns.items():
        if key != "query_result":
            assert doc["returned"].endswith("query is not set"), key


def test_the_fragment_documents_the_option_as_the_argspec_declares_it():
    fragment = importlib.import_module("ansible_collections.bridge.hpc.plugins.doc_fragments.query").ModuleDocFragment
    documented = yaml.safe_load(fragment.DOCUMENTATION)["options"]
    assert sorted(documented) == ["query"] and documented["query"]["type"] == "str"


@pytest.mark.parametrize("expression, jmespath_says", [
    ("jobs[", "Incomplete expression"),
    ("`{", "Unclosed ` delimiter"),
    ("", "cannot be empty"),
    ("jobs[].no_such(job_id)", "Unknown function: no_such()"),
    ("length(jobs, missing)", "Expected 1 argument for function length(), received 2"),
    ("merge()", "Expected at least 1 argument for function merge(), received 0"),
])
def test_an_expression_is_checked_before_any_client_exists(no_client, expression, jmespath_says):
    outcome = run(slurm_job_info, dict(CONNECTION, query=expression))
    assert isinstance(outcome, Fail)
    assert outcome.result["error"]["field"] == "query"
    assert outcome.result["msg"].startswith("query: is not a valid JMESPath expression: ")
    assert jmespath_says in outcome.result["msg"]
    assert "s3cret-token" not in repr(outcome.result)


def test_a_good_expression_gets_as_far_as_the_client(no_client):
    with pytest.raises(AssertionError, match="a client was built"):
        run(slurm_job_info, dict(CONNECTION, query="jobs[0:2].{n: length(name), both: merge(@, `{}`)}"))


@pytest.mark.parametrize("name", INFO_MODULES)
def test_every_info_module_refuses_a_bad_query_naming_it_before_any_request(no_client, name):
    outcome = run(module_named(name), dict(ARGS.get(name, {}), query="jobs[?phase=="))
    assert isinstance(outcome, Fail), "the argspec takes query and the check comes before the client"
    assert outcome.result["error"]["field"] == "query" and "Invalid jmespath expression" in outcome.result["msg"]


@pytest.mark.parametrize("name", INFO_MODULES)
def test_every_info_module_returns_changed_and_query_result_only(any_client, name):
    outcome = run(module_named(name), dict(ARGS.get(name, {}), query="keys(@)"))
    assert not isinstance(outcome, Fail), outcome.result
    assert sorted(outcome.result) == ["changed", "query_result"] and outcome.result["changed"] is False
    assert outcome.result["query_result"], "the module's own keys"
    assert "changed" not in outcome.result["query_result"], "Ansible's keys are not the module's data"


def test_the_query_selects_from_the_result_the_module_would_return(backend):
    plain = run(slurm_job_info, dict(CONNECTION)).result
    narrowed = run(slurm_job_info, dict(CONNECTION, query="jobs[?phase=='running'].job_id")).result
    assert narrowed == {"changed": False, "query_result": [j["job_id"] for j in plain["jobs"] if j["phase"] == "running"]}
    assert narrowed["query_result"] == ["1", "3"]
    shaped = run(slurm_job_info, dict(CONNECTION, job_id="2", query="job.{phase: phase, exit: exit_code}")).result
    assert shaped["query_result"] == {"phase": "completed", "exit": plain["jobs"][1]["exit_code"]}


def test_a_query_that_selects_nothing_returns_null(backend):
    assert run(slurm_job_info, dict(CONNECTION, query="no_such_key")).result == {"changed": False, "query_result": None}
    assert run(slurm_job_info, dict(CONNECTION, query="changed")).result["query_result"] is None


def test_the_other_options_still_apply_before_the_query(backend):
    outcome = run(slurm_job_info, dict(CONNECTION, phases=["completed"], query="length(jobs)"))
    assert outcome.result["query_result"] == 1


def test_cluster_info_narrowed(monkeypatch):
    class Cluster(FakeBackend):
        api_version = "v0.0.42"

        def partitions(self):
            return [{"name": "debug", "state": "UP", "max_time_minutes": 30, "native": {}},
                    {"name": "long", "state": "DOWN", "max_time_minutes": 600, "native": {}}]

    monkeypatch.setattr(SlurmClient, "from_options", classmethod(lambda cls, get: Cluster()))
    outcome = run(slurm_cluster_info, dict(CONNECTION, gather=["partitions"],
                                           query="partitions[?state=='UP'].{name: name, minutes: max_time_minutes}"))
    assert outcome.result == {"changed": False, "query_result": [{"name": "debug", "minutes": 30}]}


def test_job_info_narrowed(backend):
    outcome = run(job_info, dict(CONNECTION, backend="slurm", identities=["identity-1", "nobody"],
                                 query="{phase: jobs.\"identity-1\".phase, missing: missing}"))
    assert outcome.result["query_result"] == {"phase": "running", "missing": ["nobody"]}


def test_a_query_the_data_does_not_fit_fails_naming_it(backend):
    outcome = run(slurm_job_info, dict(CONNECTION, query="abs(jobs)"))
    assert isinstance(outcome, Fail) and outcome.result["error"]["field"] == "query"
    assert "could not be applied to the result" in outcome.result["msg"] and "abs()" in outcome.result["msg"]


def test_check_mode_narrows_too(backend):
    outcome = run(slurm_job_info, dict(CONNECTION, query="jobs[0].job_id"), check_mode=True)
    assert outcome.result == {"changed": False, "query_result": "1"}


def test_without_jmespath_only_a_query_fails(backend, monkeypatch):
    monkeypatch.setattr(_module, "HAS_JMESPATH", False)
    monkeypatch.setattr(_module, "JMESPATH_IMPORT_ERROR", "ImportError: No module named 'jmespath'")
    outcome = run(slurm_job_info, dict(CONNECTION, query="jobs"))
    assert isinstance(outcome, Fail) and "jmespath" in outcome.result["msg"]
    assert "Failed to import the required Python library" in outcome.result["msg"]
    assert backend.lookups == 0
    assert "jobs" in run(slurm_job_info, dict(CONNECTION)).result


def test_job_info_idle_after_the_handoff_wait_is_narrowed_too(tmp_path):
    pipe = str(tmp_path / "handoff")
    os.mkfifo(pipe)
    outcome = run(job_info, dict(backend="slurm", handoff_pipe=pipe, handoff_timeout=1, query="missing"))
    assert outcome.result == {"changed": False, "query_result": []}
