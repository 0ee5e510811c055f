"""What a BridgeJob names in Kubernetes, read when its batch runs: the backend's connection (with
the CA bundle of caConfigMapRef), the credentials Secret, and the script of scriptFrom.

Nothing is cached: a Secret or ConfigMap fixed after a failure is read by the next attempt, and a
token rotated in the Secret (one that expires) is handed to the next batch and the next poll. That
costs one GET of the Secret per runner call, whatever the number of CRs in it; the controller may
only `get` Secrets (no list, no watch), so there is no watch to keep a cache fresh with.
"""

from bridge_controller.backends import namespaced
from bridge_controller.kube import Missing
from bridge_controller.spec import backend_of

# The parts of spec.backend the runner connects with; the credentials go apart, through the pipe.
CONNECTION_FIELDS = ("type", "url", "api_version", "iam_url", "validate_certs")


class Resolver:
    def __init__(self, kube):
        self.kube = kube

    def connection(self, obj):
        """What the runner connects with (the credentials apart): the same for a backend key's CRs."""
        backend = backend_of(obj)
        connection = dict((k, v) for k, v in backend.items() if k in CONNECTION_FIELDS)
        if namespaced(backend["type"]):
            connection["namespace"] = backend["job_namespace"] or backend["namespace"]
        if backend["ca"]:
            connection["ca_pem"] = self.kube.read_config_map_key(backend["namespace"], backend["ca"]["name"],
                                                                 backend["ca"].get("key") or "ca.crt")
        return connection

    def credentials(self, obj):
        """The data of the CR's credentials Secret; {} when it names none."""
        backend = backend_of(obj)
        if not backend["secret"]:
            return {}
        return self.kube.read_secret(backend["namespace"], backend["secret"])

    def scripts(self, objects):
        """(objects ready to submit, {key: script of scriptFrom}, [(key, obj, why) of those waiting]).

        A ConfigMap that is not there (yet) holds back its own CR only: it may be applied after the
        CR, as a Pod waits for the ConfigMaps it names, and the backend is not to blame.
        """
        ready, scripts, waiting = [], {}, []
        for key, obj in objects:
            ref = ((obj.get("spec") or {}).get("scriptFrom") or {}).get("configMapKeyRef")
            if ref:
                try:
                    scripts[key] = self.kube.read_config_map_key(obj["metadata"]["namespace"], ref["name"], ref["key"])
                except Missing as exc:
                    waiting.append((key, obj, "spec.scriptFrom: %s" % exc))
                    continue
            ready.append((key, obj))
        return ready, scripts, waiting
