"""The walks of docs/getting-started.md without a service: every shell block is valid bash, every file
block is a playbook whose tasks call modules that exist with options they take, every ad-hoc
`ansible -m` names such a module and options, every file is used, and every job the walks submit
is one its backend compiles into a request (nothing refused, its output readable). Running them is
tests/integration/test_getting_started.py's; tests/docs_walk.py says how blocks are marked."""

import importlib
import json
import os
import subprocess

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.errors import UnsupportedError
from ansible.parsing.splitter import parse_kv

import docs_walk
from ansible_collections.bridge.hpc.plugins.module_utils._jobs import refuse_output
from ansible_collections.bridge.hpc.plugins.module_utils._login import attach_login
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(REPO, "docs", "getting-started.md")
BLOCKS = docs_walk.blocks(DOC)
SECTIONS = docs_walk.sections(BLOCKS)
COLLECTION = "bridge.hpc."
# The backend of each job module (the neutral one's is its `backend` option).
JOB_MODULES = {"slurm_job": "slurm", "lsf_job": "lsf", "ray_job": "ray", "quantum_job": "quantum", "k8s_job": "kubernetes",
               "job": None}
# Connections that make a client without a request; nothing is sent to them.
OFFLINE = {"slurm": {"url": "http://127.0.0.1:9", "api_version": "v0.0.38", "user": "u", "token": "t"},
           "ray": {"url": "http://127.0.0.1:9"},
           "lsf": {"url": "http://127.0.0.1:9/platform/", "user": "u", "password": "p"},
           "quantum": {"url": "http://127.0.0.1:9/api/v1", "api_key": "k", "service_crn": "crn"},
           "kubernetes": {"url": "https://127.0.0.1:9", "api_key": "k"}}


def where(block):
    return "docs/getting-started.md:%d" % block.line


class ArgumentSpec(Exception):
    """What a module's main() handed to AnsibleModule."""


@pytest.fixture
def argument_spec(monkeypatch):
    """argument_spec(name): the AnsibleModule arguments of bridge.hpc.<name>, as its main() builds them."""
    def build(name):
        module = importlib.import_module("ansible_collections.bridge.hpc.plugins.modules.%s" % name)

        def capture(**arguments):
            raise ArgumentSpec(arguments)

        monkeypatch.setattr(module, "AnsibleModule", capture)
        with pytest.raises(ArgumentSpec) as built:
            module.main()
        return built.value.args[0]
    return build


def unsupported(arguments, params):
    """The options of `params` that the module does not take (nested ones as `login.port`), as
    AnsibleModule reports them; values are not checked (a playbook's are templates)."""
    result = ArgumentSpecValidator(arguments["argument_spec"]).validate(params)
    return [str(error) for error in result.errors.errors if isinstance(error, UnsupportedError)]


def adhoc_calls(block):
    """(module, params) of every `ansible HOST -m MODULE -a ARGS` of a shell block, the arguments
    read as `ansible` reads them: JSON when they are an object, else key=value."""
    for words in docs_walk.commands(block.text):
        if words[0] != "ansible":
            continue
        module = words[words.index("-m") + 1]
        raw = words[words.index("-a") + 1] if "-a" in words else ""
        yield module, json.loads(raw) if raw.startswith("{") and raw.endswith("}") else parse_kv(raw)


def playbook_calls(block):
    """(module, params) of every task of a file block's plays."""
    for play in yaml.safe_load(block.text):
        for task in play.get("tasks") or []:
            modules = [key for key in task if key.startswith(COLLECTION) or key.startswith("ansible.builtin.")]
            assert len(modules) == 1, "%s: task %r calls %s" % (where(block), task.get("name"), modules)
            yield modules[0], task[modules[0]]


def test_there_is_a_walk_per_backend_and_one_for_the_neutral_module():
    assert list(SECTIONS)[0] == docs_walk.SETUP
    assert set(SECTIONS) == {docs_walk.SETUP, "any"} | set(BACKENDS)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.language == "bash"], ids=where)
def test_a_shell_block_is_bash(block):
    checked = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True, check=False)
    assert checked.returncode == 0, "%s: %s" % (where(block), checked.stderr)


@pytest.mark.parametrize("block", BLOCKS, ids=where)
def test_a_block_is_a_shell_block_or_a_file_a_shell_block_of_its_section_runs(block):
    assert block.language in ("bash", "yaml"), where(block)
    assert (block.language == "yaml") == bool(block.file), "%s: a file is YAML, and YAML is saved as a file" % where(block)
    if block.file:
        used = [words for other in SECTIONS[block.section] if other.language == "bash"
                for words in docs_walk.commands(other.text) if block.file in words]
        assert used, "%s: no command of walk %s uses %s" % (where(block), block.section, block.file)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.language == "bash" or b.file], ids=where)
def test_every_module_and_option_named_exists(block, argument_spec):
    calls = list(adhoc_calls(block) if block.language == "bash" else playbook_calls(block))
    for module, params in calls:
        if not module.startswith(COLLECTION):
            continue
        name = module[len(COLLECTION):]
        assert os.path.exists(os.path.join(REPO, "plugins", "modules", name + ".py")), "%s: no module %s" % (where(block), module)
        errors = unsupported(argument_spec(name), params)
        assert not errors, "%s: %s: %s" % (where(block), module, errors)


def test_an_option_the_module_does_not_take_is_found(argument_spec):
    assert unsupported(argument_spec("slurm_job"), {"identity": "x", "output": {"tail_line": 5}}) != []
    assert unsupported(argument_spec("slurm_job"), {"identity": "x", "login": {"host": "h", "port": "{{ port }}"}}) == []


def extra_vars(section):
    """{name: [values]} of the `-e name=value` of a section's commands."""
    found = {}
    for block in SECTIONS[section]:
        if block.language == "bash":
            for words in docs_walk.commands(block.text):
                for flag, value in zip(words, words[1:]):
                    if flag == "-e" and "=" in value:
                        found.setdefault(value.split("=", 1)[0], []).append(value.split("=", 1)[1])
    return found


def untemplated(params, backend):
    """A task's params with each template (an env lookup, a variable) replaced by a value of its
    kind: the backend a command passes, a port, else a word."""
    if isinstance(params, dict):
        return dict((key, backend if key == "backend" and "{{" in str(value) else
                     22 if key == "port" and "{{" in str(value) else untemplated(value, backend))
                    for key, value in params.items())
    if isinstance(params, str) and "{{" in params:
        return "templated"
    return params


def submitted_jobs():
    """(where, module, backend, params) of every job a walk makes present from a script."""
    for block in BLOCKS:
        if block.language != "bash" and not block.file:
            continue
        for module, params in adhoc_calls(block) if block.language == "bash" else playbook_calls(block):
            name = module[len(COLLECTION):]
            if name not in JOB_MODULES or params.get("state", "present") != "present" or "script" not in params:
                continue
            for backend in [JOB_MODULES[name]] if JOB_MODULES[name] else extra_vars(block.section)["backend"]:
                yield "%s %s on %s" % (where(block), module, backend), name, backend, untemplated(params, backend)


JOBS = list(submitted_jobs())


@pytest.mark.parametrize("job_at, module, backend, params", JOBS, ids=[job[0] for job in JOBS])
def test_every_job_a_walk_submits_compiles_for_its_backend(job_at, module, backend, params, argument_spec):
    """What the module does before its first request: the spec normalized and compiled into the
    native request (`rendered`), and its `output` one the backend can read."""
    arguments = argument_spec(module)
    validated = ArgumentSpecValidator(arguments["argument_spec"]).validate(params)
    assert not validated.error_messages, "%s: %s" % (job_at, validated.error_messages)
    client = BACKENDS[backend].from_options(OFFLINE[backend].get)
    attach_login(client, validated.validated_parameters)
    spec = normalize_spec(validated.validated_parameters, client)
    assert client.render(spec), job_at
    refuse_output(client, spec)


def test_there_is_a_job_per_backend_and_the_neutral_module_runs_on_two():
    assert {backend for _at, module, backend, _params in JOBS if module != "job"} == set(BACKENDS)
    assert len({backend for _at, module, backend, _params in JOBS if module == "job"}) >= 2
