"""The few Kubernetes calls the controller makes, behind one small interface.

`KubeApi` wraps the official client (tests/unit/controller/fakes.py has an in-memory stand-in).
Finalizer and status changes carry the object's resourceVersion, so a stale view fails (409
Conflict) instead of overwriting a newer write.
"""

import base64

GROUP, VERSION, PLURAL = "bridge.dev", "v1alpha1", "bridgejobs"


class Conflict(Exception):
    """The object changed since it was read; the next event brings the new version."""


class Missing(Exception):
    """A named object, or the key it should hold, does not exist (yet): its message names both."""


def missing_key(namespace, name, key):
    return Missing("ConfigMap '%s' in namespace '%s' has no key '%s'" % (name, namespace, key))


def missing_config_map(namespace, name):
    return Missing("ConfigMap '%s' not found in namespace '%s'" % (name, namespace))


class KubeApi:
    def __init__(self, api_client):
        from kubernetes import client  # imported here so the pure modules need no Kubernetes client

        self.api_client = api_client
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.authorization = client.AuthorizationV1Api(api_client)
        self.client = client

    def _patch(self, obj, body, status=False):
        meta = obj["metadata"]
        call = self.custom.patch_namespaced_custom_object_status if status else self.custom.patch_namespaced_custom_object
        try:
            return call(GROUP, VERSION, meta["namespace"], PLURAL, meta["name"], body)
        except self.client.exceptions.ApiException as exc:
            if exc.status == 409:
                raise Conflict(str(exc.reason))
            raise

    def set_finalizers(self, obj, finalizers):
        body = {"metadata": {"finalizers": list(finalizers), "resourceVersion": obj["metadata"]["resourceVersion"]}}
        return self._patch(obj, body)

    def patch_status(self, obj, status):
        # A merge patch replaces each field it names, so a status computed from a stale `obj`
        # would overwrite a newer phase; with the resourceVersion the apiserver refuses it instead.
        body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "status": status}
        return self._patch(obj, body, status=True)

    def read(self, obj):
        """`obj` as stored now, read from the apiserver (not the watch's cache); None when it is gone."""
        meta = obj["metadata"]
        try:
            return self.custom.get_namespaced_custom_object(GROUP, VERSION, meta["namespace"], PLURAL, meta["name"])
        except self.client.exceptions.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def read_secret(self, namespace, name):
        secret = self.core.read_namespaced_secret(name, namespace)
        return dict((k, base64.b64decode(v).decode("utf-8")) for k, v in (secret.data or {}).items())

    def read_config_map_key(self, namespace, name, key):
        try:
            data = self.core.read_namespaced_config_map(name, namespace).data or {}
        except self.client.exceptions.ApiException as exc:
            if exc.status == 404:
                raise missing_config_map(namespace, name)
            raise
        if key not in data:
            raise missing_key(namespace, name, key)
        return data[key]

    def access_review(self, user, groups, verb, group, resource, namespace, name=None):
        """Whether the authorizer lets `user` (in `groups`) `verb` that resource: a SubjectAccessReview."""
        attributes = self.client.V1ResourceAttributes(verb=verb, group=group, resource=resource, namespace=namespace,
                                                      name=name)
        review = self.client.V1SubjectAccessReview(spec=self.client.V1SubjectAccessReviewSpec(
            user=user, groups=list(groups), resource_attributes=attributes))
        try:
            return bool(self.authorization.create_subject_access_review(review).status.allowed)
        except self.client.exceptions.ApiException as exc:
            if exc.status == 403:
                # The operator's to fix, and nothing is sent meanwhile: said plainly, not as the body.
                raise PermissionError("the controller may not create SubjectAccessReviews, which it asks before "
                                      "every request for a BridgeJob's author: apply deploy/rbac.yaml")
            raise

    def service_account_token(self, namespace, name, seconds):
        """A token of ServiceAccount `name` in `namespace` (TokenRequest); LookupError when there is no
        such ServiceAccount or the controller may not ask for its token."""
        request = self.client.AuthenticationV1TokenRequest(
            spec=self.client.V1TokenRequestSpec(audiences=[], expiration_seconds=seconds))
        try:
            return self.core.create_namespaced_service_account_token(name, namespace, request).status.token
        except self.client.exceptions.ApiException as exc:
            if exc.status in (403, 404):
                raise LookupError("its token cannot be had (HTTP %d: %s)" % (
                    exc.status, "no such ServiceAccount" if exc.status == 404 else "the controller is not bound to "
                    "ask for it there (deploy/tenant/)"))
            raise

    def own_cluster(self):
        """(apiserver URL, CA bundle PEM or None) of the cluster the controller itself talks to."""
        configuration = self.api_client.configuration
        pem = None
        if configuration.ssl_ca_cert:
            with open(configuration.ssl_ca_cert) as handle:
                pem = handle.read()
        return configuration.host, pem

    def patch_backend_status(self, obj, status):
        """Merge `status` into a BridgeBackend's or ClusterBridgeBackend's status. No resourceVersion:
        the probe is the only writer of that status and computes all of it, and a spec edit since
        the probe read the object (a new generation) is probed again at once anyway."""
        meta = obj["metadata"]
        plural = {"BridgeBackend": "bridgebackends", "ClusterBridgeBackend": "clusterbridgebackends"}[obj["kind"]]
        if meta.get("namespace"):
            return self.custom.patch_namespaced_custom_object_status(GROUP, VERSION, meta["namespace"], plural, meta["name"],
                                                                     {"status": status})
        return self.custom.patch_cluster_custom_object_status(GROUP, VERSION, plural, meta["name"], {"status": status})

    def undecodable(self, metadata, reason):
        """A Warning event on a BridgeJob the watch skips because it cannot decode it (decode.py),
        named by what of its metadata could be read."""
        obj = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "BridgeJob", "metadata": metadata}
        self.event(obj, "Undecodable", "the controller cannot decode this BridgeJob (%s) and skips it; create it again "
                   "within the CRD's limits (docs/bridgejob.md)" % reason, "Warning")

    def event(self, obj, reason, message, kind="Normal"):
        """An event about `obj`: a BridgeJob, or any object that carries its kind and apiVersion (a
        backend object). A cluster-scoped object's events go to namespace default, as the
        apiserver's own do for Nodes."""
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        body = self.client.CoreV1Event(
            metadata=self.client.V1ObjectMeta(generate_name="%s." % meta["name"], namespace=namespace),
            involved_object=self.client.V1ObjectReference(
                api_version=obj.get("apiVersion") or "%s/%s" % (GROUP, VERSION), kind=obj.get("kind") or "BridgeJob",
                name=meta["name"], namespace=meta.get("namespace"), uid=meta.get("uid"), resource_version=meta.get("resourceVersion")),
            reason=reason, message=message[:1000], type=kind, source=self.client.V1EventSource(component="bridge-controller"))
        self.core.create_namespaced_event(namespace, body)
