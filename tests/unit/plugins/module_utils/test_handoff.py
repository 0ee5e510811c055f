import json
import os
import threading
import uuid

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._handoff import take_handoff


class Module:
    def __init__(self, **params):
        self.params = dict(handoff_timeout=10, **params)
        self.no_log_values = set()


def handed(tmp_path, document, allowed, backend="slurm"):
    pipe = str(tmp_path / uuid.uuid4().hex)
    os.mkfifo(pipe, 0o600)
    module = Module(handoff_pipe=pipe, backend=backend, jobs=None, token=None)

    def write():
        with open(pipe, "w") as handle:
            handle.write(json.dumps(document))

    writer = threading.Thread(target=write)
    writer.start()
    try:
        return module, take_handoff(module, allowed)
    finally:
        writer.join()


# The work of bridge.hpc.jobs; the credentials come from the backend (Slurm's: user and token).
ALLOWED = {"jobs": list}


def test_the_document_replaces_the_options_and_its_token_is_scrubbed(tmp_path):
    module, took = handed(tmp_path, {"jobs": [{"identity": "u"}], "token": "s3cret"}, ALLOWED)
    assert took and module.params["jobs"] == [{"identity": "u"}] and module.params["token"] == "s3cret"
    assert "s3cret" in module.no_log_values


def test_the_controllers_identity_key_is_taken_for_slurm_scrubbed_and_refused_for_others(tmp_path):
    module, took = handed(tmp_path, {"jobs": [], "identity_key": "k3y"}, ALLOWED)
    assert took and module.params["identity_key"] == "k3y" and "k3y" in module.no_log_values
    with pytest.raises(SpecError, match="unexpected keys identity_key in the handed-over document; allowed for ray"):
        handed(tmp_path, {"jobs": [], "identity_key": "k3y"}, ALLOWED, backend="ray")


def test_the_credentials_handed_over_are_those_of_the_backend(tmp_path):
    # Ray authenticates with a token alone: a user name for it is a mistake of the sender.
    with pytest.raises(SpecError, match="unexpected keys user in the handed-over document; allowed for ray: "
                       "api_version, ca_path, iam_url, jobs, namespace, token, url, validate_certs$"):
        handed(tmp_path, {"user": "alice", "token": "s3cret"}, ALLOWED, backend="ray")


def test_unknown_keys_and_wrong_types_are_refused_naming_them(tmp_path):
    with pytest.raises(SpecError, match="unexpected keys password in the handed-over document; allowed for slurm: "
                       "api_version, ca_path, iam_url, identity_key, jobs, namespace, token, url, user, validate_certs$"):
        handed(tmp_path, {"password": "x"}, ALLOWED)
    with pytest.raises(SpecError, match="jobs in the handed-over document must be a list"):
        handed(tmp_path, {"jobs": "all"}, ALLOWED)


def test_the_connection_comes_through_the_pipe_as_data_never_as_a_template(tmp_path):
    # The controller's playbooks get only the backend's type as an extra var: what a BridgeJob's
    # author wrote (a URL holding a Jinja expression, say) reaches the module untouched.
    template = "http://h/{{ lookup('pipe', 'touch marker') }}"
    connection = {"url": template, "api_version": "v0.0.42", "validate_certs": False, "ca_path": "/run/ca.pem",
                  "namespace": "team-a", "iam_url": template}
    module, took = handed(tmp_path, dict(connection, jobs=[]), ALLOWED)
    assert took and dict((key, module.params[key]) for key in connection) == connection
    with pytest.raises(SpecError, match="validate_certs in the handed-over document must be a bool"):
        handed(tmp_path, {"validate_certs": "no"}, ALLOWED)


def test_the_credentials_option_takes_no_connection():
    module = Module(handoff_pipe=None, backend="slurm", credentials={"url": "http://elsewhere"})
    with pytest.raises(SpecError, match="credentials: unexpected keys url in credentials"):
        take_handoff(module, ALLOWED)


def test_without_a_pipe_the_options_stand():
    module = Module(handoff_pipe=None, jobs=[{"identity": "u"}])
    assert take_handoff(module, ALLOWED) is True and module.params["jobs"] == [{"identity": "u"}]


def test_the_timeout_must_be_positive(tmp_path):
    module = Module(handoff_pipe=str(tmp_path / "pipe"))
    module.params["handoff_timeout"] = 0
    with pytest.raises(SpecError, match="handoff_timeout"):
        take_handoff(module, ALLOWED)


def test_the_credentials_option_sets_the_backends_credentials_and_scrubs_its_secrets():
    # The playbooks run by hand pass one `credentials` dict whatever the backend.
    module = Module(handoff_pipe=None, backend="quantum", credentials={"api_key": "k3y", "service_crn": "crn:v1:x"})
    assert take_handoff(module, ALLOWED) is True
    assert module.params["api_key"] == "k3y" and module.params["service_crn"] == "crn:v1:x"
    assert module.no_log_values == {"k3y"}


def test_the_credentials_option_refuses_another_backends_keys():
    module = Module(handoff_pipe=None, backend="lsf", credentials={"user": "lsfadmin", "token": "t"})
    with pytest.raises(SpecError, match="credentials: unexpected keys token in credentials; allowed for lsf: password, user$"):
        take_handoff(module, ALLOWED)


def test_credentials_handed_over_win_over_the_option(tmp_path):
    pipe = str(tmp_path / uuid.uuid4().hex)
    os.mkfifo(pipe, 0o600)
    module = Module(handoff_pipe=pipe, backend="ray", jobs=None, credentials={"token": "old"})

    def write():
        with open(pipe, "w") as handle:
            handle.write(json.dumps({"token": "new"}))

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert take_handoff(module, ALLOWED) is True
    finally:
        writer.join()
    assert module.params["token"] == "new" and module.no_log_values == {"old", "new"}
