"""The backends the controller runs jobs on, as the collection's registry declares them
(module_utils/_registry.py): their names, the credential keys each takes from its Secret, and
whether its jobs live in a Kubernetes namespace.
"""

from bridge_controller.collection import module_utils

BACKENDS = module_utils("_registry").BACKENDS


def credential_keys(backend_type):
    """(module option, Secret key) of each credential handed to the module of `backend_type`; none
    for a type the CRD refuses."""
    backend = BACKENDS.get(backend_type)
    return () if backend is None else tuple(zip(backend.CREDENTIALS, backend.secret_keys()))


def namespaced(backend_type):
    """Whether jobs of `backend_type` live in a Kubernetes namespace (the connection option
    `namespace`): the BridgeJob's own, unless spec.backend.namespace names another."""
    backend = BACKENDS.get(backend_type)
    return backend is not None and "namespace" in backend.connection_options()


def tags_identities(backend_type):
    """Whether the jobs of `backend_type` carry an identity tagged with the controller's identity
    key (the connection option `identity_key`, module_utils/slurm/identity.py)."""
    backend = BACKENDS.get(backend_type)
    return backend is not None and "identity_key" in backend.connection_options()
