"""The controller's identity key (issue 37 item 6): read from --identity-key-file, handed through
the pipe to a backend whose jobs carry a tagged identity and to no other, never taken from what a
BridgeJob's connection says; a poll that finds several jobs of one identity leaves the BridgeJob
as it was, naming them."""

import pytest

from bridge_controller import results
from bridge_controller.handoff import handoff_document
from bridge_controller.main import parse_args
from bridge_controller.results import PERMANENT


def test_the_key_goes_to_slurm_and_to_no_other_backend():
    document = handoff_document("poll", {"type": "slurm", "url": "http://s"}, {}, identities=["a"], identity_key="k1")
    assert document["identity_key"] == "k1"
    for backend in ("ray", "lsf", "quantum", "kubernetes"):
        assert "identity_key" not in handoff_document("poll", {"type": backend}, {}, identities=["a"], identity_key="k1")


def test_a_connection_never_sets_the_key():
    connection = {"type": "slurm", "url": "http://s", "identity_key": "the tenant's"}
    assert handoff_document("submit", connection, {}, jobs=[], identity_key="k1")["identity_key"] == "k1"
    assert "identity_key" not in handoff_document("submit", connection, {}, jobs=[])


def test_the_key_file_is_read_once_at_start(tmp_path):
    path = tmp_path / "key"
    path.write_text("first\nsecond\n")
    assert parse_args(["--identity-key-file", str(path)]).identity_key == "first\nsecond\n"
    assert parse_args([]).identity_key is None


@pytest.mark.parametrize("content", [None, "", " \n"])
def test_a_missing_or_empty_key_file_stops_the_controller(tmp_path, content, capsys):
    path = tmp_path / "key"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit):
        parse_args(["--identity-key-file", str(path)])
    assert "--identity-key-file" in capsys.readouterr().err


def test_an_ambiguous_identity_keeps_the_job_as_it_was_and_names_the_jobs():
    error = {"type": "AmbiguousIdentity", "kind": "ambiguous_identity", "temporary": False, "job_ids": ["457", "458"],
             "message": "Failed to look up identity 'u1' on Slurm at http://s: 2 jobs of user 'bridge' carry identity "
                        "'u1' (457, 458); ..."}
    outcomes = results.poll_outcomes(["u1", "u2"], {"jobs": {"u2": {"job_id": "9", "phase": "running"}},
                                                    "missing": [], "refused": {"u1": error}})
    assert outcomes["u1"].kind == PERMANENT and "job" not in outcomes["u1"].observed
    assert outcomes["u1"].observed["backend_error"]["type"] == "AmbiguousIdentity"
    assert "(457, 458)" in outcomes["u1"].observed["message"]
    assert outcomes["u2"].observed["job"]["job_id"] == "9"
