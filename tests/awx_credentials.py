"""The AWX credential types of awx/credential_types as AWX validates and injects them; shared by
tests/unit/test_awx_credential_types.py and tests/integration/test_awx_credentials.py.

What AWX does, from its source (awx/main/fields.py: CredentialTypeInputField,
CredentialTypeInjectorField; awx/main/models/credential/__init__.py: CredentialType.inject_credential):
- inputs: `fields` of `id` (a variable name, not "tower"), `label`, `type` string or boolean, and
  optionally `format`, `choices`, `help_text`, `multiline`, `secret`, `ask_at_runtime`, `default`;
  `required` lists ids.
- injectors: `file` (`template` or `template.NAME`), `env`, `extra_vars`: templates rendered by
  jinja2's ImmutableSandboxedEnvironment. To validate a type, every template is rendered with
  StrictUndefined over {every field id: "EXAMPLE", "tower": {filename: ...}}, so a template naming an
  undefined field is refused. An env var may not start with ANSIBLE_ nor be one AWX sets itself.
- At launch the namespace holds the credential's non-empty inputs only (booleans always), with the
  default Undefined: a field left empty renders as "". Each file template is written to a file in the
  job's private data dir (env/), whose path in the container is tower.filename (or
  tower.filename.NAME); then the env templates are rendered: the values are strings.
"""

import os
import re
import shlex
import tempfile

import yaml
from jinja2 import StrictUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TYPES_DIR = os.path.join(REPO, "awx", "credential_types")
# AWX's ENV_BLOCKLIST (awx/main/constants.py): variables a custom credential type may not inject.
AWX_ENV_BLOCKLIST = frozenset((
    "VIRTUAL_ENV", "PATH", "PYTHONPATH", "PROOT_TMP_DIR", "JOB_ID", "INVENTORY_ID", "INVENTORY_SOURCE_ID",
    "INVENTORY_UPDATE_ID", "AD_HOC_COMMAND_ID", "REST_API_URL", "REST_API_TOKEN", "MAX_EVENT_RES",
    "CALLBACK_QUEUE", "CALLBACK_CONNECTION", "CACHE", "JOB_CALLBACK_DEBUG", "INVENTORY_HOSTVARS", "AWX_HOST",
    "PROJECT_REVISION", "SUPERVISOR_WEB_CONFIG_PATH",
))
FIELD_KEYS = frozenset(("id", "label", "type", "format", "choices", "help_text", "multiline", "secret",
                        "ask_at_runtime", "default"))
NAME = re.compile(r"^[a-zA-Z_]+[a-zA-Z0-9_]*$")
FILE_TEMPLATE = re.compile(r"^template(\.[a-zA-Z_]+[a-zA-Z0-9_]*)?$")
# Where AWX mounts the private data dir in the execution environment.
CONTAINER_RUNNER_DIR = "/runner"


def load_types():
    """{file name without .yml: the credential type's definition (the API's POST body)}."""
    types = {}
    for name in sorted(os.listdir(TYPES_DIR)):
        if name.endswith(".yml"):
            with open(os.path.join(TYPES_DIR, name)) as handle:
                types[name[:-4]] = yaml.safe_load(handle)
    return types


def validation_errors(definition):
    """What AWX would refuse in a credential type definition, as a list of messages."""
    errors = []
    unknown = set(definition) - {"name", "description", "kind", "inputs", "injectors"}
    if unknown:
        errors.append("unknown keys %s" % sorted(unknown))
    if definition.get("kind") not in ("cloud", "net"):
        errors.append("custom credential types are of kind cloud or net, not %r" % definition.get("kind"))
    inputs, injectors = definition.get("inputs") or {}, definition.get("injectors") or {}
    if set(inputs) - {"fields", "required"}:
        errors.append("inputs: unknown keys %s" % sorted(set(inputs) - {"fields", "required"}))
    ids = []
    for field in inputs.get("fields", []):
        ids.append(field.get("id"))
        if set(field) - FIELD_KEYS:
            errors.append("field %s: unknown keys %s" % (field.get("id"), sorted(set(field) - FIELD_KEYS)))
        if not field.get("label") or not isinstance(field.get("id"), str) or not NAME.match(field["id"]):
            errors.append("field %r: an id that is a variable name and a label are required" % field)
        if field.get("id") == "tower":
            errors.append('"tower" is a reserved field name')
        kind = field.get("type", "string")
        if kind not in ("string", "boolean"):
            errors.append("field %s: type %r" % (field.get("id"), kind))
        if field.get("format") not in (None, "ssh_private_key", "url"):
            errors.append("field %s: format %r" % (field.get("id"), field.get("format")))
        if "default" in field and not isinstance(field["default"], {"string": str, "boolean": bool}.get(kind, str)):
            errors.append("field %s: default %r is not a %s" % (field.get("id"), field["default"], kind))
        for key in ("choices", "multiline", "format", "secret"):
            if key in field and kind != "string":
                errors.append("field %s: %s not allowed for a %s" % (field.get("id"), key, kind))
    if len(set(ids)) != len(ids):
        errors.append("field ids must be unique: %s" % ids)
    errors += ["required %s is no field" % name for name in inputs.get("required", []) if name not in ids]
    if set(injectors) - {"file", "env", "extra_vars"}:
        errors.append("injectors: unknown keys %s" % sorted(set(injectors) - {"file", "env", "extra_vars"}))
    templates = list(injectors.get("file", {}))
    errors += ["file injector %s: not template or template.NAME" % t for t in templates if not FILE_TEMPLATE.match(t)]
    if "template" in templates and len(templates) > 1:
        errors.append("several files need the multi-file syntax (template.NAME) only")
    for variable, value in injectors.get("env", {}).items():
        if not NAME.match(variable):
            errors.append("env %s: not a variable name" % variable)
        if variable.startswith("ANSIBLE_") or variable in AWX_ENV_BLOCKLIST:
            errors.append("env %s: AWX does not allow it in credentials" % variable)
        if not isinstance(value, str) or not value.isascii():
            errors.append("env %s: the template must be an ASCII string" % variable)
    namespace = dict((name, "EXAMPLE") for name in ids)
    namespace["tower"] = {"filename": _filenames(templates, lambda label: "EXAMPLE_FILENAME")}
    sandbox = ImmutableSandboxedEnvironment(undefined=StrictUndefined)
    for section, entries in injectors.items():
        for key, template in entries.items():
            try:
                sandbox.from_string(template).render(namespace)
            except Exception as exc:  # UndefinedError, SecurityError, TemplateSyntaxError: AWX refuses each
                errors.append("%s %s: %s: %s" % (section, key, type(exc).__name__, exc))
    return errors


def _filenames(templates, path_of):
    """tower.filename: a path for `template`, else an object with a path per template.NAME."""
    if "template" in templates:
        return path_of("template")
    return dict((label.split(".", 1)[1], path_of(label)) for label in templates)


def inject(definition, inputs, private_data_dir=None):
    """The environment AWX gives a job for a credential of this type with these inputs: {variable:
    string}. File injectors are written into private_data_dir/env (a temporary dir when not given),
    and the variables name their paths as the execution environment sees them (/runner/env/...)."""
    fields = definition["inputs"].get("fields", [])
    namespace = {}
    for name, value in inputs.items():
        if isinstance(value, bool) or len(value):
            namespace[name] = value
    for field in fields:
        if field.get("type") == "boolean" and field["id"] not in inputs:
            namespace[field["id"]] = False
    sandbox = ImmutableSandboxedEnvironment()
    private_data_dir = private_data_dir or tempfile.mkdtemp(prefix="bridge-awx-")
    os.makedirs(os.path.join(private_data_dir, "env"), exist_ok=True)

    def write(label):
        handle, path = tempfile.mkstemp(dir=os.path.join(private_data_dir, "env"))
        with os.fdopen(handle, "w") as out:
            out.write(sandbox.from_string(definition["injectors"]["file"][label]).render(**namespace))
        return CONTAINER_RUNNER_DIR + path[len(private_data_dir):]

    namespace["tower"] = {"filename": _filenames(list(definition["injectors"].get("file", {})), write)}
    return dict((variable, sandbox.from_string(template).render(**namespace))
                for variable, template in definition["injectors"].get("env", {}).items())


def host_path(private_data_dir, container_path):
    """The file on the host that a /runner/... path of an injected variable names."""
    return os.path.join(private_data_dir, os.path.relpath(container_path, CONTAINER_RUNNER_DIR))


def write_env_file(path, env):
    """env as a 0600 file of shell assignments (`set -a; . PATH; set +a` exports it)."""
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
        for variable, value in sorted(env.items()):
            handle.write("%s=%s\n" % (variable, shlex.quote(value)))
    return path
