"""The backends the controller runs jobs on, and the credential keys each one takes from its Secret.

The collection's registry (plugins/module_utils/_registry.py, each backend's CREDENTIALS and
SECRET_KEYS) is the source; the controller keeps its own copy because it does not import the
collection: the collection is what its playbooks run, installed apart.
tests/unit/controller/test_backends.py fails when this table, deploy/crd.yaml or
docs/bridgejob.md disagree with the registry.
"""

# The module options each backend takes from the Secret.
CREDENTIALS = {
    "slurm": ("user", "token"),
    "ray": ("token",),
    "lsf": ("user", "password"),
    "quantum": ("api_key", "service_crn"),
    # Optional: without a kubeconfig Secret, Jobs run on the controller's own cluster.
    "kubernetes": ("kubeconfig_content",),
}
# The Secret's key of an option, where it is not the option's own name (Secret keys are
# camelCase by Kubernetes convention).
SECRET_KEYS = {
    "quantum": {"api_key": "apiKey", "service_crn": "serviceCrn"},
    "kubernetes": {"kubeconfig_content": "kubeconfig"},
}
# Backends whose jobs live in a Kubernetes namespace (the connection option `namespace`): the
# BridgeJob's own, unless spec.backend.namespace names another.
NAMESPACED = ("kubernetes",)


def credential_keys(backend_type):
    """(module option, Secret key) of each credential handed to the module of `backend_type`; none
    for a type the CRD refuses."""
    renamed = SECRET_KEYS.get(backend_type, {})
    return tuple((option, renamed.get(option, option)) for option in CREDENTIALS.get(backend_type, ()))
