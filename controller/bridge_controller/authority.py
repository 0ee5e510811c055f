"""Who a BridgeJob acts for, and whether they may: asked of the apiserver each time a runner call
is about to send something for it.

A BridgeJob is data its author wrote; the controller has rights its author may lack (the Secrets it
reads, the Jobs it has created). So every runner call (submit, poll, cancel, a retry's submit) is
made only for BridgeJobs whose author may, at that moment, do themselves what the call does (and a
probe of a tenant's BridgeBackend only while its author may read the Secret it uses):

* read the Secret it hands over (backend.credentialsSecretRef, of the BridgeJob or of its
  namespace's BridgeBackend; a ClusterBridgeBackend's Secret is the platform team's, and its
  namespaceSelector is what admits a namespace to it);
* read the ConfigMaps it names (scriptFrom, caConfigMapRef), at the submit;
* for a kubernetes backend without a Secret, create (submit), get (poll) or delete (cancel) Jobs in
  the BridgeJob's namespace. Those calls are then made with a token of the ServiceAccount the
  operator named for Jobs (--job-service-account, in that namespace), never with the controller's.

The author is what admission recorded in the annotations AUTHOR and AUTHOR_GROUPS
(deploy/admission-policy.yaml checks them, deploy/author-mutation/ writes them): a BridgeJob
without them is refused, since nobody is known to act for. Answers are SubjectAccessReviews; an
allowed one is reused for ALLOWED_FOR seconds, a denied one never (a right just granted counts at
once, a revoked one within that time).
"""

import base64
import json
import threading
import time

AUTHOR = "bridge.dev/author"
AUTHOR_GROUPS = "bridge.dev/author-groups"
# How long an allowed answer stands: a poll every few seconds of many BridgeJobs by one author
# asks once, and a revoked right stops them within this time.
ALLOWED_FOR = 10.0
# A Job ServiceAccount's token lives this long (the apiserver's minimum): one runner call's worth.
TOKEN_SECONDS = 600
DEFAULT_JOB_SERVICE_ACCOUNT = "bridge-runner"

# Refusal reasons (the condition's reason).
AUTHOR_UNKNOWN = "AuthorUnknown"
FORBIDDEN = "AuthorForbidden"
NO_CREDENTIALS = "CredentialsMissing"

# The verb on Jobs each action needs, for a kubernetes backend run with the Job ServiceAccount.
JOB_VERBS = {"submit": "create", "poll": "get", "cancel": "delete"}


def as_job_account(backend):
    """Whether `backend` (resolver.backend's keys) runs as the Job ServiceAccount: a kubernetes
    backend without a Secret, on the controller's own cluster."""
    return backend["type"] == "kubernetes" and not backend["secret"]


class Refused(Exception):
    """The call may not be made for this BridgeJob: `reason` and a message naming who and what."""

    def __init__(self, reason, message):
        super().__init__(message)
        self.reason = reason


def author_of(obj):
    """(username, [groups]) admission recorded for `obj`; Refused when there is none."""
    annotations = obj["metadata"].get("annotations") or {}
    user = annotations.get(AUTHOR)
    if not user:
        raise Refused(AUTHOR_UNKNOWN, "metadata.annotations['%s'] is not set: no author was recorded when this %s was "
                      "created, so the controller acts for nobody (install deploy/admission-policy.yaml, and "
                      "deploy/author-mutation/ where the cluster serves MutatingAdmissionPolicy; without it, set the "
                      "annotation to your own user name, as `kubectl auth whoami` shows it)"
                      % (AUTHOR, obj.get("kind") or "BridgeJob"))
    groups = [group for group in (annotations.get(AUTHOR_GROUPS) or "").split("\n") if group]
    return user, groups


class Authority:
    """`kube` is the controller's KubeApi (access_review, service_account_token, own_cluster)."""

    def __init__(self, kube, job_service_account=DEFAULT_JOB_SERVICE_ACCOUNT, clock=time.monotonic):
        self.kube = kube
        self.job_service_account = job_service_account
        self.clock = clock
        self._allowed = {}
        self._lock = threading.Lock()

    def may(self, author, verb, resource, namespace, name=None, group=""):
        """Whether `author` ((user, groups)) may `verb` the `resource` (`name`) in `namespace`."""
        user, groups = author
        question = (user, tuple(groups), verb, group, resource, namespace, name)
        now = self.clock()
        with self._lock:
            if self._allowed.get(question, 0) > now:
                return True
        allowed = self.kube.access_review(user, groups, verb, group, resource, namespace, name)
        if allowed:
            with self._lock:
                self._allowed[question] = now + ALLOWED_FOR
        return allowed

    def check(self, action, obj, backend, script_ref=None):
        """Refused when `obj`'s author may not have `action` done with `backend` (resolver.backend's
        keys); `script_ref` is the scriptFrom ConfigMap's name at a submit."""
        author = author_of(obj)
        namespace = obj["metadata"]["namespace"]
        who = "'%s'" % author[0]
        self._may_read_secret(author, backend, "this BridgeJob's backend")
        if action == "submit":
            names = [script_ref] if script_ref else []
            if backend.get("ca") and backend.get("ca_namespace") == namespace:
                names.append(backend["ca"]["name"])
            for name in names:
                if not self.may(author, "get", "configmaps", namespace, name):
                    raise Refused(FORBIDDEN, "%s may not get ConfigMap '%s' in namespace '%s', which this BridgeJob "
                                  "names" % (who, name, namespace))
        if as_job_account(backend):
            verb = JOB_VERBS.get(action, "get")
            job_namespace = backend.get("job_namespace") or namespace
            if not self.may(author, verb, "jobs", job_namespace, group="batch"):
                raise Refused(FORBIDDEN, "%s may not %s Jobs (batch) in namespace '%s': a BridgeJob of a kubernetes "
                              "backend without credentialsSecretRef runs its Job for its author, who must be allowed to "
                              "%s it themselves" % (who, verb, job_namespace, verb))

    def check_probe(self, obj, backend):
        """Refused when the author of a tenant's backend object `obj` may not get the Secret the
        probe would hand over (`backend`: backend_objects.connection_of's keys)."""
        self._may_read_secret(author_of(obj), backend, "this BridgeBackend")

    def _may_read_secret(self, author, backend, whose):
        if backend["secret"] and backend.get("secret_owner") != "platform":
            if not self.may(author, "get", "secrets", backend["secret_namespace"], backend["secret"]):
                raise Refused(FORBIDDEN, "'%s' may not get Secret '%s' in namespace '%s', which %s hands over as its "
                              "credentials" % (author[0], backend["secret"], backend["secret_namespace"], whose))

    def job_credentials(self, namespace):
        """{"kubeconfig": ...} for a kubernetes backend without a Secret: a short-lived token of the
        operator's Job ServiceAccount in `namespace`, for this cluster. Refused when there is none."""
        try:
            token = self.kube.service_account_token(namespace, self.job_service_account, TOKEN_SECONDS)
        except LookupError as exc:
            raise Refused(NO_CREDENTIALS, "a kubernetes backend without credentialsSecretRef runs its Jobs as "
                          "ServiceAccount '%s' of namespace '%s', which the operator provides: %s"
                          % (self.job_service_account, namespace, exc))
        server, ca_pem = self.kube.own_cluster()
        cluster = {"server": server}
        if ca_pem:
            cluster["certificate-authority-data"] = base64.b64encode(ca_pem.encode("utf-8")).decode("ascii")
        user = "system:serviceaccount:%s:%s" % (namespace, self.job_service_account)
        kubeconfig = {
            "apiVersion": "v1", "kind": "Config", "current-context": "bridge",
            "clusters": [{"name": "bridge", "cluster": cluster}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "bridge", "context": {"cluster": "bridge", "user": user, "namespace": namespace}}],
        }
        # JSON is YAML: the module loads it with yaml.safe_load.
        return {"kubeconfig": json.dumps(kubeconfig)}
