"""The backends the controller runs jobs on, and the credential keys each one takes from its Secret.

The collection's registry (plugins/module_utils/_registry.py, each backend's CREDENTIALS) is the
source; the controller keeps its own copy because it does not import the collection: the
collection is what its playbooks run, installed apart. tests/unit/controller/test_backends.py
fails when this table, deploy/crd.yaml or docs/bridgejob.md disagree with the registry.
"""

CREDENTIALS = {
    "slurm": ("user", "token"),
    "ray": ("token",),
    "lsf": ("user", "password"),
}


def credential_keys(backend_type):
    """The Secret keys handed to the module of `backend_type`; none for a type the CRD refuses."""
    return CREDENTIALS.get(backend_type, ())
