"""The RETURN docs of the modules that return jobs agree with the backend contract (_backend.py's
JOB_KEYS, PHASES, FAILURE_CLASSES), with what each backend's normalizers return, and with each other.

RETURN cannot extend a doc fragment (ansible-core 2.19 applies fragments to DOCUMENTATION only), so
every module's RETURN holds its job's keys and the return values it shares with other modules; they
are written once, in tools/returns.yml, and tools/return_docs.py writes them between BEGIN and END
lines (make spec; tests/unit/test_fields.py fails while a module is not what the table says). These
tests hold the table and the modules' own docs to the contract. `phase` and `failure_class` list
their values as `choices` ("Can only return" in the docs site).
"""

import glob
import importlib
import os
import pkgutil
import re
import sys

import pytest
import yaml

from ansible_collections.bridge.hpc.plugins.module_utils._backend import FAILURE_CLASSES, JOB_KEYS, PHASES
from ansible_collections.bridge.hpc.plugins.module_utils._module import TOP_LEVEL_JOB_FIELDS
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS

from module_runner import Fail, run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
sys.path.insert(0, os.path.join(REPO, "tools"))

import return_docs  # noqa: E402  pylint: disable=wrong-import-position

# The type every module documents for each key of JOB_KEYS.
JOB_KEY_TYPES = {
    "job_id": "str", "name": "str", "identity": "str", "phase": "str", "terminal": "bool", "native_state": "str",
    "reason": "str", "exit_code": "int", "signal": "int", "failure_class": "str", "submit_time": "str",
    "start_time": "str", "end_time": "str", "native": "dict",
}
CHOICES = {"phase": list(PHASES), "failure_class": list(FAILURE_CLASSES)}
# Module names start with the backend's name, or with the short name its community uses.
MODULE_PREFIX = {"kubernetes": "k8s"}
# One answer of each backend per normalizer, as small as the normalizer takes: every normalizer
# returns one dict literal, so any answer shows its keys. Completed jobs, to which an info module
# adds all it can (a quantum job's results). A new backend adds its own.
NORMALIZED = {
    "slurm": (("normalize_job", {"job_id": 42, "job_state": ["COMPLETED"]}),
              ("normalize_accounting_job", {"job_id": 42, "state": {"current": ["COMPLETED"]}}, "v0.0.42")),
    "lsf": (("normalize_job", {"jobId": "42", "jobStatus": "DONE"}),),
    "ray": (("normalize_job", {"submission_id": "train-42", "status": "SUCCEEDED"}),),
    "kubernetes": (("normalize_job", {"metadata": {"name": "train-1a2b"},
                                      "status": {"conditions": [{"type": "Complete", "status": "True"}]}}, []),),
    "quantum": (("normalize_job", {"id": "d6147q3", "state": {"status": "Completed"}}),),
}
# The backend-neutral modules: where in RETURN the job is documented.
NEUTRAL_JOB_DOCS = {"job": ("job",), "jobs": ("results", "job")}
# A value in C() or RV(key=...) that reads like a phase or failure class.
NAMED_VALUE = re.compile(r"(?:C\(|RV\((?:job\.)?(?:phase|failure_class)=)([a-z_]+)\)")


def module_named(name):
    return importlib.import_module("ansible_collections.bridge.hpc.plugins.modules.%s" % name)


def returns(name):
    return yaml.safe_load(module_named(name).RETURN)


def prefix(backend):
    return MODULE_PREFIX.get(backend, backend)


def job_modules():
    return ["job"] + ["%s_job" % prefix(name) for name in sorted(BACKENDS)]


def documented(name, path):
    """The doc of the return value at `path` (keys through `contains`) of module `name`."""
    doc = returns(name)[path[0]]
    for key in path[1:]:
        doc = doc["contains"][key]
    return doc


def job_docs():
    """(module, path of its documented job): a backend's job module documents `job`, its info
    module `jobs`, whose items are its jobs."""
    places = sorted(NEUTRAL_JOB_DOCS.items())
    for name in sorted(BACKENDS):
        places += [("%s_job" % prefix(name), ("job",)), ("%s_job_info" % prefix(name), ("jobs",))]
    return [pytest.param(name, path, id=name) for name, path in places]


def backend_function(backend, function):
    """`function` of the backend's module in module_utils, or of any module of it once it is a package."""
    parts = BACKENDS[backend].__module__.split(".")
    package = importlib.import_module(".".join(parts[:parts.index("module_utils") + 2]))
    modules = [package]
    if hasattr(package, "__path__"):
        modules += [importlib.import_module(info.name)
                    for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    found = [getattr(module, function) for module in modules if hasattr(module, function)]
    assert found, "%s has no %s; say in NORMALIZED how it normalizes jobs" % (package.__name__, function)
    return found[0]


def normalized_job(backend):
    """A job of the backend with every key one of its normalizers returns."""
    assert backend in NORMALIZED, "give NORMALIZED an answer of backend %s per normalizer" % backend
    job = {}
    for function, *args in NORMALIZED[backend]:
        job.update(backend_function(backend, function)(*args))
    return job


def text(doc):
    """A return value's description as one string."""
    description = doc["description"]
    return description if isinstance(description, str) else " ".join(description)


def without_returned(doc):
    """What a return value is, apart from when it is returned and its sample."""
    return dict((key, value) for key, value in doc.items() if key not in ("returned", "sample"))


def test_every_job_key_has_its_documented_type():
    assert sorted(JOB_KEY_TYPES) == sorted(JOB_KEYS), "a key of JOB_KEYS changed: its type here and in every module"


@pytest.mark.parametrize("name, path", job_docs())
def test_the_job_is_documented_with_every_key_of_the_contract(name, path):
    job = documented(name, path)
    assert (job["type"], job.get("elements")) in (("dict", None), ("list", "dict")), "a job or a list of jobs"
    contains = job["contains"]
    assert [key for key in JOB_KEYS if key not in contains] == []
    for key in JOB_KEYS:
        assert contains[key]["type"] == JOB_KEY_TYPES[key], key
    for key, choices in CHOICES.items():
        assert contains[key]["choices"] == choices, key
    if name in NEUTRAL_JOB_DOCS:
        assert sorted(contains) == sorted(JOB_KEYS), "a backend's own keys are its module's to document"
        for backend in BACKENDS:
            assert "M(bridge.hpc.%s_job)" % prefix(backend) in text(job), "names where %s's keys are" % backend


@pytest.mark.parametrize("name, path", job_docs())
def test_phases_and_failure_classes_are_named_as_the_contract_names_them(name, path):
    """Their descriptions, at the job or the top level, name no phase or failure class the contract lacks."""
    docs = [documented(name, path)["contains"][key] for key in CHOICES]
    docs += [returns(name)[key] for key in CHOICES if key in returns(name)]
    for doc in docs:
        for value in NAMED_VALUE.findall(text(doc)):
            assert value in PHASES + FAILURE_CLASSES, (text(doc), value)


def test_the_neutral_modules_document_the_job_alike():
    job, batch = (documented(name, path)["contains"] for name, path in sorted(NEUTRAL_JOB_DOCS.items()))
    assert dict((key, without_returned(doc)) for key, doc in batch.items()) == \
        dict((key, without_returned(doc)) for key, doc in job.items())


def test_job_info_returns_the_jobs_of_the_job_module():
    jobs = returns("job_info")["jobs"]
    assert jobs["type"] == "dict" and "contains" not in jobs, "its keys are identities"
    assert "RV(bridge.hpc.job#module:job)" in text(jobs)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_a_backends_job_module_documents_the_keys_its_normalizers_return(backend):
    contains = documented("%s_job" % prefix(backend), ("job",))["contains"]
    assert sorted(contains) == sorted(normalized_job(backend))


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_a_backends_info_module_documents_its_jobs_as_its_job_module(backend):
    name = "%s_job_info" % prefix(backend)
    job_module = documented("%s_job" % prefix(backend), ("job",))["contains"]
    info = documented(name, ("jobs",))["contains"]
    for key, doc in job_module.items():
        assert without_returned(info.get(key, {})) == without_returned(doc), key
    assert "RV(jobs)" in text(returns(name)["job"]) and "contains" not in returns(name)["job"]


class OneJobClient(object):
    """A client that knows one job and answers every read an info module makes with something."""

    warnings = ()
    transport = None
    requests_sent = 1
    api_version = None
    lookup = None

    def __init__(self, job):
        self.job = job

    def get(self, job_id):
        return dict(self.job)

    def find(self, identity, name=None):
        return dict(self.job)

    def list(self, **filters):
        return [dict(self.job)]

    def results(self, job_id, max_bitstrings=None):
        return {}

    def logs(self, job_id, tail_lines=None):
        return ""

    def metrics(self, job_id):
        return {}

    def close(self):
        pass


@pytest.mark.usefixtures("capture")
@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_an_info_modules_jobs_have_the_keys_it_documents(monkeypatch, backend):
    """Read with every flag that adds to a job (include_native, results, logs, ...), a job has no
    key the module does not document; the module documents none it cannot return."""
    name = "%s_job_info" % prefix(backend)
    client = OneJobClient(normalized_job(backend))
    monkeypatch.setattr(BACKENDS[backend], "from_options", classmethod(lambda cls, get: client))
    options = yaml.safe_load(module_named(name).DOCUMENTATION)["options"]
    flags = dict((option, True) for option, doc in options.items()
                 if doc["type"] == "bool" and doc.get("default") is False)
    assert "include_native" in flags
    outcome = run(module_named(name), dict(flags, job_id="42"))
    assert not isinstance(outcome, Fail), outcome.result
    assert sorted(outcome.result["job"]) == sorted(documented(name, ("jobs",))["contains"])
    assert outcome.result["jobs"] == [outcome.result["job"]]


@pytest.mark.parametrize("name", job_modules())
def test_a_job_module_returns_the_jobs_fields_at_the_top_level_as_the_job_has_them(name):
    docs = returns(name)
    job = docs["job"]["contains"]
    for field in TOP_LEVEL_JOB_FIELDS:
        assert field in docs, field
        assert docs[field]["returned"] == "always", field
        assert docs[field]["type"] == job[field]["type"], field
        assert docs[field].get("choices") == job[field].get("choices"), field


def test_what_every_job_module_returns_is_documented_alike():
    """A key every job module returns is of one type, returned at the same time, in each."""
    docs = dict((name, returns(name)) for name in job_modules())
    shared = set.intersection(*(set(doc) for doc in docs.values()))
    assert set(TOP_LEVEL_JOB_FIELDS) | {"job", "identity", "rendered", "api_version", "error"} <= shared
    for key in sorted(shared):
        first = docs["job"][key]
        for name, doc in sorted(docs.items()):
            assert (doc[key]["type"], doc[key]["returned"]) == (first["type"], first["returned"]), (name, key)
    assert len(set(text(doc["error"]) for doc in docs.values())) == 1, "the one typed error of main_for"


@pytest.mark.parametrize("backend", sorted(set(BACKENDS) - {"slurm"}))
def test_only_the_slurm_modules_speak_slurm(backend):
    for name in ("%s_job" % prefix(backend), "%s_job_info" % prefix(backend)):
        assert "slurm" not in module_named(name).RETURN.lower(), name


def table():
    with open(os.path.join(REPO, return_docs.TABLE), encoding="utf-8") as handle:
        return return_docs.Table(handle.read())


def begin_lines():
    """{module name: the parts its BEGIN lines name, each as its words}."""
    out = {}
    for path in sorted(glob.glob(os.path.join(REPO, return_docs.MODULES))):
        with open(path, encoding="utf-8") as handle:
            out[os.path.basename(path)[:-3]] = [line.split(return_docs.BEGIN, 1)[1].split()
                                                for line in handle if return_docs.BEGIN in line]
    return out


def test_the_table_has_the_job_keys_of_every_backend_and_each_of_its_parts_is_written_somewhere():
    keys = table().values["job_keys"]
    assert sorted(keys) == sorted(set(BACKENDS) | {"all"}), "a backend's job keys are its own part"
    assert list(keys["all"]) == list(JOB_KEYS)
    parts = begin_lines()
    for backend in BACKENDS:
        assert ["job_keys", backend] in parts["%s_job" % prefix(backend)]
        assert ["job_keys", backend, "include_native"] in parts["%s_job_info" % prefix(backend)]
    named = set(words[0] for words in sum(parts.values(), []))
    assert named == set(table().values), "a part no module names says nothing to anyone"


def test_a_hand_edit_between_begin_and_end_is_undone_and_the_rest_of_the_module_is_kept():
    path = "plugins/modules/slurm_job_info.py"
    with open(os.path.join(REPO, path), encoding="utf-8") as handle:
        text = handle.read()
    rewrite = return_docs.rewrites()[path]
    assert rewrite(text) == text
    edited = text.replace("Slurm's state reason, such as", "Why, such as", 1)
    assert edited != text and rewrite(edited) == text
    own = text.replace('sample: ["41", "42"]', 'sample: ["43"]', 1)
    assert own != text and rewrite(own) == own, "a sample below END is the module's own"


@pytest.mark.parametrize("words", ["job_keys", "job_keys nosuch", "job_keys slurm native", "nosuch", "phase extra", "query_result"])
def test_a_begin_line_naming_what_the_table_lacks_fails_naming_it(words):
    text = "x:\n  # %s %s\n  # %s\n" % (return_docs.BEGIN, words, return_docs.END)
    with pytest.raises(SystemExit) as failed:
        return_docs.spliced(table(), text, "x.py")
    assert return_docs.TABLE in str(failed.value)
