"""AWX: the credential types of awx/credential_types, validated and rendered as AWX does
(tests/awx_credentials.py), against the environment variables the modules read; the job template's
survey (awx/surveys/job.json) against playbooks/job.yml."""

import json
import os
import re

import pytest
import yaml
from jinja2 import Environment, meta
from ansible.module_utils.errors import AnsibleFallbackNotFound
from ansible.module_utils.basic import env_fallback

from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS
from ansible_collections.bridge.hpc.plugins.modules import s3_object_sync

import awx_credentials

REPO = awx_credentials.REPO
TYPES = awx_credentials.load_types()
# The Bridge credential type of each backend, and the variables of the backend's ENV it leaves out.
BACKEND_TYPES = {
    "slurm": ("slurm", {"SLURM_JWT_FILE"}),   # the JWT itself is injected; the two are mutually exclusive
    "ray": ("ray", set()),
    "lsf": ("lsf", set()),
    "quantum": ("quantum", set()),
    # AWX's built-in "OpenShift or Kubernetes API Bearer Token" type injects the apiserver, token and
    # CA (test_awx_builtin_kubernetes_credential_reaches_the_modules); KUBECONFIG is kubectl's.
    "kubernetes": ("kubernetes", {"KUBECONFIG", "K8S_AUTH_HOST", "K8S_AUTH_API_KEY", "K8S_AUTH_SSL_CA_CERT"}),
}
# Inputs of a credential of each type, as a user fills them in: every field.
FILLED = {
    "slurm": {"url": "https://slurm.example.org:6820", "user": "alice", "token": "jwt.jwt.jwt"},
    "ray": {"url": "http://ray-head:8265", "token": "ray-secret"},
    "lsf": {"url": "https://pac.example.org:8443/platform", "user": "alice", "password": "pw"},
    "quantum": {"url": "https://eu-de.quantum.cloud.ibm.com/api/v1", "api_key": "key-1",
                "service_crn": "crn:v1:bluemix:public:quantum-computing:eu-de:a/acc:inst::",
                "iam_url": "https://iam.test.cloud.ibm.com"},
    "kubernetes": {"kubeconfig": "apiVersion: v1\nkind: Config\n", "context": "admin@bridge"},
    "login_node": {"host": "login.example.org", "port": "2222", "user": "alice",
                   "known_hosts": "[login.example.org]:2222 ssh-ed25519 AAAAC3Nza\n"},
    "s3": {"endpoint": "https://s3.example.org:7070", "access_key": "AKIA1", "secret_key": "s3-secret",
           "region": "eu-west-1", "ca_bundle": "-----BEGIN CERTIFICATE-----\nMII\n-----END CERTIFICATE-----\n"},
}


# Where playbooks/hybrid.yml and playbooks/demo.yml read the login node from the environment.
LOGIN_NODE_TASKS = "playbooks/tasks/login_node.yml"


def readers():
    """{environment variable: (reader, option, secret)} for every variable a bridge.hpc module falls
    back to (the backends' ENV, for all their modules, and bridge.hpc.s3_object_sync's), and the login
    node's that playbooks/tasks/login_node.yml reads itself (lookup('ansible.builtin.env', 'BRIDGE_SSH_...'))
    for playbooks/hybrid.yml and playbooks/demo.yml."""
    found = {}
    with open(os.path.join(REPO, "playbooks", "tasks", "login_node.yml")) as handle:
        for variable in re.findall(r"lookup\('ansible.builtin.env', '(BRIDGE_SSH_[A-Z_]+)'\)", handle.read()):
            found[variable] = (LOGIN_NODE_TASKS, variable, False)
    for name, backend in BACKENDS.items():
        options = backend.connection_options()
        for option, variables in backend.ENV.items():
            for variable in variables:
                found[variable] = (name, option, bool(options[option].get("no_log")))
    for option, spec in s3_object_sync.ARGUMENT_SPEC.items():
        if "fallback" in spec:
            for variable in spec["fallback"][1]:
                found[variable] = ("s3_object_sync", option, bool(spec.get("no_log")))
    return found


READERS = readers()


def fields_of(template):
    """The input fields a template names ("tower" is AWX's, not one)."""
    return sorted(meta.find_undeclared_variables(Environment().parse(template)) - {"tower"})


def injected_fields(definition):
    """{env variable: the input fields its template names}."""
    return dict((variable, fields_of(template)) for variable, template in definition["injectors"].get("env", {}).items())


@pytest.mark.parametrize("name", sorted(TYPES))
def test_awx_would_accept_the_definition(name):
    assert awx_credentials.validation_errors(TYPES[name]) == []


def test_a_broken_definition_is_refused():
    broken = json.loads(json.dumps(TYPES["ray"]))
    broken["injectors"]["env"]["RAY_ADDRESS"] = "{{ uri }}"
    broken["injectors"]["env"]["ANSIBLE_HOST_KEY_CHECKING"] = "False"
    broken["inputs"]["fields"].append({"id": "flag", "label": "Flag", "type": "boolean", "secret": True})
    errors = " | ".join(awx_credentials.validation_errors(broken))
    assert "uri" in errors and "ANSIBLE_HOST_KEY_CHECKING" in errors and "secret not allowed for a boolean" in errors


def test_every_type_is_here_and_named_once():
    assert sorted(TYPES) == sorted(list(BACKEND_TYPES) + ["login_node", "s3"])
    assert len({t["name"] for t in TYPES.values()}) == len(TYPES)


@pytest.mark.parametrize("name", sorted(TYPES))
def test_every_injected_variable_is_one_a_module_reads(name):
    unknown = sorted(set(TYPES[name]["injectors"]["env"]) - set(READERS))
    assert unknown == [], "%s injects %s, which no bridge.hpc module reads" % (name, unknown)


@pytest.mark.parametrize("backend", sorted(BACKEND_TYPES))
def test_a_backend_type_injects_exactly_what_its_modules_read(backend):
    type_name, left_out = BACKEND_TYPES[backend]
    read = {v for variables in BACKENDS[backend].ENV.values() for v in variables}
    assert set(TYPES[type_name]["injectors"]["env"]) == read - left_out


def test_the_login_node_type_injects_what_the_hybrid_playbook_reads_but_the_key():
    read = {v for v, (reader, _o, _s) in READERS.items() if reader == LOGIN_NODE_TASKS}
    assert set(TYPES["login_node"]["injectors"]["env"]) == read - {"BRIDGE_SSH_KEY"}


def test_the_s3_type_injects_the_first_variable_of_each_s3_option():
    first = {spec["fallback"][1][0] for spec in s3_object_sync.ARGUMENT_SPEC.values() if "fallback" in spec}
    assert set(TYPES["s3"]["injectors"]["env"]) == first


@pytest.mark.parametrize("name", sorted(TYPES))
def test_what_a_module_keeps_secret_is_a_secret_input(name):
    definition = TYPES[name]
    secret = {f["id"] for f in definition["inputs"]["fields"] if f.get("secret")}
    must = {field for variable, fields in injected_fields(definition).items() if READERS[variable][2] for field in fields}
    # A file's content is a secret when the option it stands for is (the kubeconfig: kubeconfig_content).
    if name == "kubernetes":
        for template in definition["injectors"]["file"].values():
            must.update(fields_of(template))
    assert must <= secret
    # and nothing else is: a URL or a user name in a secret field could not be read back in the UI
    assert secret == must


@pytest.mark.parametrize("name", sorted(TYPES))
def test_the_rendered_environment_gives_the_modules_the_inputs(name, tmp_path, monkeypatch):
    definition = TYPES[name]
    env = awx_credentials.inject(definition, FILLED[name], str(tmp_path))
    assert all(isinstance(value, str) for value in env.values())
    monkeypatch.setattr(os, "environ", dict(env))
    for variable, value in env.items():
        _reader, option, _secret = READERS[variable]
        if value.startswith(awx_credentials.CONTAINER_RUNNER_DIR + "/env/"):
            with open(awx_credentials.host_path(str(tmp_path), value)) as handle:
                # the file holds the input its template names
                assert handle.read() in [FILLED[name][f] for t in definition["injectors"]["file"].values()
                                         for f in fields_of(t)], variable
        else:
            assert value == FILLED[name][injected_fields(definition)[variable][0]], variable
        assert env_fallback(variable) == value


@pytest.mark.parametrize("backend", ["slurm", "ray", "lsf", "quantum"])
def test_a_module_builds_its_client_from_the_rendered_environment(backend, monkeypatch):
    """As a module does: options from env_fallback (AnsibleModule), the EXCLUSIVE ones through
    Backend.with_environment; the optional inputs left empty render as "" and change nothing."""
    definition = TYPES[BACKEND_TYPES[backend][0]]
    required = definition["inputs"]["required"]
    for inputs in (FILLED[backend], dict((k, v) for k, v in FILLED[backend].items() if k in required)):
        env = awx_credentials.inject(definition, inputs)
        monkeypatch.setattr(os, "environ", dict(env))
        cls = BACKENDS[backend]
        params = {}
        for option, spec in cls.connection_options(env_fallback).items():
            try:
                params[option] = spec["fallback"][0](*spec["fallback"][1]) if "fallback" in spec else spec.get("default")
            except AnsibleFallbackNotFound:
                params[option] = spec.get("default")
        client = cls.from_options(cls.with_environment(params.get, os.environ))
        assert client.url.rstrip("/") == inputs["url"].rstrip("/")
        if backend == "quantum":
            assert client.iam_url == inputs.get("iam_url", "https://iam.cloud.ibm.com")


def test_an_empty_optional_input_renders_as_an_empty_string():
    env = awx_credentials.inject(TYPES["s3"], {"access_key": "a", "secret_key": "s"})
    assert env["BRIDGE_S3_CA_BUNDLE"] == "" and env["BRIDGE_S3_ENDPOINT"] == ""


# Variables that other software in the same job reads (boto3, so amazon.aws and the aws CLI), where
# an empty value is not "unset": an empty AWS_CA_BUNDLE fails every boto3 call (older botocore
# verifies nothing), an empty AWS_DEFAULT_REGION is refused.
FOREIGN_PREFIXES = ("AWS_",)


@pytest.mark.parametrize("name", sorted(TYPES))
def test_no_variable_other_software_reads_is_injected_empty(name):
    """AWX injects every env template, empty when its field is: with only the required inputs (as a
    credential made through the API has), none that boto3 reads is empty."""
    definition = TYPES[name]
    required = dict((field, FILLED[name][field]) for field in definition["inputs"].get("required", []))
    env = awx_credentials.inject(definition, required)
    empty = sorted(v for v, value in env.items() if v.startswith(FOREIGN_PREFIXES) and value == "")
    assert empty == [], "%s injects %s empty when its optional fields are" % (name, empty)


def test_s3_without_region_or_ca_gives_boto3_a_region_and_no_ca_bundle(monkeypatch):
    env = awx_credentials.inject(TYPES["s3"], {"access_key": "a", "secret_key": "s"})
    assert env["AWS_DEFAULT_REGION"] == "us-east-1" and "AWS_CA_BUNDLE" not in env
    # bridge.hpc.s3_object_sync takes the empty CA variable as unset and reads AWS_CA_BUNDLE after it.
    monkeypatch.setattr(os, "environ", dict(env, AWS_CA_BUNDLE="/etc/site-ca.pem"))
    fallback, variables = s3_object_sync.ARGUMENT_SPEC["ca_bundle"]["fallback"]
    assert fallback(*variables) == "/etc/site-ca.pem"
    monkeypatch.setattr(os, "environ", dict(env))
    with pytest.raises(AnsibleFallbackNotFound):
        fallback(*variables)


# ------------------------------------------------------------------ the job template's survey

SURVEY_TYPES = {"text": str, "textarea": str, "password": str, "multiplechoice": str, "multiselect": str,
                "integer": int, "float": float}


def test_the_survey_is_one_awx_takes_and_asks_what_playbooks_job_uses():
    with open(os.path.join(REPO, "awx", "surveys", "job.json")) as handle:
        survey = json.load(handle)
    with open(os.path.join(REPO, "playbooks", "job.yml")) as handle:
        play = yaml.safe_load(handle)[0]
    assert isinstance(survey["name"], str) and isinstance(survey["description"], str) and survey["spec"]
    variables = [q["variable"] for q in survey["spec"]]
    assert len(set(variables)) == len(variables)
    for question in survey["spec"]:
        assert {"question_name", "variable", "type", "required"} <= set(question), question
        assert isinstance(question["required"], bool)
        assert isinstance(question["default"], SURVEY_TYPES[question["type"]]), question
        if question["type"] == "multiplechoice":
            assert question["default"] in question["choices"].split("\n")
        # each answer replaces one of the playbook's own defaults
        assert question["variable"] in play["vars"], question["variable"]
    backend = next(q for q in survey["spec"] if q["variable"] == "job_backend")
    assert sorted(backend["choices"].split("\n")) == sorted(BACKENDS)


# ------------------------------------------------------------------ the execution environment

def test_the_collection_declares_its_ee_requirements_where_ansible_builder_looks():
    with open(os.path.join(REPO, "meta", "execution-environment.yml")) as handle:
        meta = yaml.safe_load(handle)
    assert meta["version"] == 1
    for path in meta["dependencies"].values():
        assert os.path.isfile(os.path.join(REPO, path)), path
    with open(os.path.join(REPO, "ee", "execution-environment.yml")) as handle:
        ee = yaml.safe_load(handle)
    with open(os.path.join(REPO, "ee", ee["dependencies"]["galaxy"])) as handle:
        collections = yaml.safe_load(handle)["collections"]
    staged = {item["dest"] for item in ee["additional_build_files"]}
    assert all(c["type"] == "file" and c["name"].split("/")[0] in staged for c in collections)
    with open(os.path.join(REPO, "galaxy.yml")) as handle:
        galaxy = yaml.safe_load(handle)
    assert "ee" in galaxy["build_ignore"]
