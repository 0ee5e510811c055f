"""What the operator lets a tenant's BridgeJob do: pure checks made before anything is sent.

Whoever may create a BridgeJob and a Secret in a namespace is a tenant, and the controller acts
with rights no tenant has (its ServiceAccount, its files, its network). So a BridgeJob is refused,
with a condition naming the field, when it would make the controller

* send the controller's own credentials elsewhere or weaken their TLS: a kubernetes BridgeJob
  without a kubeconfig Secret runs its Job with the controller's ServiceAccount, so it may name
  no url, caConfigMapRef or validateCerts false, and no namespace but its own;
* run a command or read a file on the controller's machine: a kubeconfig from the BridgeJob's
  Secret may hold no exec or auth-provider (the client runs them), no tokenFile, client
  certificate, key or CA *file* (the client reads them: in the Deployment the ServiceAccount
  token is such a file) and no insecure-skip-tls-verify, unless the operator allowed that
  feature (--insecure-kubeconfig-exec, -files, -tls), as Flux's controllers do;
* reach a server the operator did not allow (--allowed-backend-url): spec.backend.url, iamUrl,
  a Slurm login node (login, as ssh://host:port) and the kubeconfig's servers and proxies.

docs/security.md is the threat model these checks serve.
"""

import yaml

from bridge_controller.collection import module_utils

_errors = module_utils("_errors")
_urls = module_utils("_urls")
# One parser for the allow-list here and in the clients that send (issue 37): a text two parsers
# read differently cannot pass here as one host and be sent to another.
AllowList, UrlPrefix = _urls.AllowList, _urls.UrlPrefix

# Refusal reasons (the Failed or BackendReachable condition's reason).
NAMESPACE_NOT_ALLOWED = "NamespaceNotAllowed"
# The same name as the error the clients raise when they refuse a request's URL.
URL_NOT_ALLOWED = _errors.BackendURLNotAllowed.__name__
CONTROLLER_CONNECTION = "ControllerConnectionFixed"
INSECURE_KUBECONFIG = "InsecureKubeconfig"

# What a kubeconfig's user or cluster may hold only when the operator allowed its feature.
KUBECONFIG_FEATURES = {
    "exec": "runs a command on the controller's machine",
    "files": "reads a file on the controller's machine",
    "tls": "turns TLS verification off",
}
USER_FIELDS = (("exec", "exec"), ("auth-provider", "exec"), ("tokenFile", "files"),
               ("client-certificate", "files"), ("client-key", "files"))
CLUSTER_FIELDS = (("certificate-authority", "files"),)


class Policy:
    """The operator's choices; the default allows any backend URL and no insecure kubeconfig feature."""

    def __init__(self, allowed_urls=(), kubeconfig_features=()):
        self.allow_list = AllowList(allowed_urls)
        unknown = set(kubeconfig_features) - set(KUBECONFIG_FEATURES)
        if unknown:
            raise ValueError("unknown kubeconfig features: %s" % ", ".join(sorted(unknown)))
        self.kubeconfig_features = frozenset(kubeconfig_features)

    def url_refusal(self, field, url, schemes=_urls.HTTP_SCHEMES):
        """(reason, message) when `url` is one _urls.parse_url refuses (with or without an
        allow-list) or outside the allowed prefixes; None when it may be used."""
        why = self.allow_list.refusal(field, url, schemes)
        return (URL_NOT_ALLOWED, why) if why else None

    def refusal(self, obj):
        """(reason, message) of a BridgeJob whose spec this controller may not act on; None when it may."""
        return self.backend_refusal((obj.get("spec") or {}).get("backend") or {}, obj["metadata"].get("namespace"))

    def backend_refusal(self, backend, own, where="spec.backend", kind="BridgeJob"):
        """(reason, message) of a tenant's connection `backend` (a BridgeJob's spec.backend, a
        BridgeBackend's spec, camelCase) of an object of `kind` in namespace `own`; None when this
        controller may use it. `where` is the connection's path in that object."""
        if backend.get("type") == "kubernetes" and not backend.get("credentialsSecretRef"):
            if backend.get("namespace") not in (None, own):
                return NAMESPACE_NOT_ALLOWED, (
                    "%s.namespace: %r is not this %s's namespace %r; without a kubeconfig Secret "
                    "the Job runs with the controller's rights, so only in its %s's own namespace"
                    % (where, backend["namespace"], kind, own, kind))
            for field, forbidden in (("url", backend.get("url") is not None),
                                     ("caConfigMapRef", backend.get("caConfigMapRef") is not None),
                                     ("validateCerts", backend.get("validateCerts") is False)):
                if forbidden:
                    return CONTROLLER_CONNECTION, (
                        "%s.%s: without a kubeconfig Secret the Job runs on the controller's own cluster "
                        "with the controller's credentials, whose connection a %s does not change" % (where, field, kind))
        for field in ("url", "iamUrl"):
            if backend.get(field) is not None:
                refused = self.url_refusal("%s.%s" % (where, field), backend[field])
                if refused:
                    return refused
        login = backend.get("login") or {}
        if login.get("host"):
            host = login["host"] if login["host"].startswith("[") or ":" not in login["host"] else "[%s]" % login["host"]
            return self.url_refusal("%s.login" % where, "ssh://%s:%d" % (host, login.get("port") or 22), schemes=("ssh",))
        return None

    def kubeconfig_refusal(self, text):
        """(reason, message) of a kubeconfig from a BridgeJob's Secret that this controller may not
        load; None when it may. Read as the module reads it (yaml.safe_load), every user and cluster
        checked, not only the current context's: a kubeconfig of odd shape is refused, since its
        loader might find what this check did not."""
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError:
            return INSECURE_KUBECONFIG, "the Secret's kubeconfig is not YAML"
        if not isinstance(document, dict):
            return INSECURE_KUBECONFIG, "the Secret's kubeconfig is not a YAML mapping"
        for section, inner, fields in (("users", "user", USER_FIELDS), ("clusters", "cluster", CLUSTER_FIELDS)):
            entries = document.get(section) or []
            if not isinstance(entries, list):
                return INSECURE_KUBECONFIG, "%s in the Secret's kubeconfig is not a list" % section
            for index, entry in enumerate(entries):
                where = "%s[%d].%s" % (section, index, inner)
                settings = entry.get(inner) if isinstance(entry, dict) else entry
                if settings is not None and not isinstance(settings, dict):
                    return INSECURE_KUBECONFIG, "%s in the Secret's kubeconfig is not a mapping" % where
                refused = self._settings_refusal(where, settings or {}, fields, section == "clusters")
                if refused:
                    return refused
        return None

    def _settings_refusal(self, where, settings, fields, is_cluster):
        for key, feature in fields:
            if settings.get(key) and feature not in self.kubeconfig_features:
                return INSECURE_KUBECONFIG, "%s.%s in the Secret's kubeconfig %s; refused unless the controller runs with " \
                    "--insecure-kubeconfig-%s" % (where, key, KUBECONFIG_FEATURES[feature], feature)
        if not is_cluster:
            return None
        if settings.get("insecure-skip-tls-verify") and "tls" not in self.kubeconfig_features:
            return INSECURE_KUBECONFIG, "%s.insecure-skip-tls-verify in the Secret's kubeconfig %s; refused unless the " \
                "controller runs with --insecure-kubeconfig-tls" % (where, KUBECONFIG_FEATURES["tls"])
        for key in ("server", "proxy-url"):
            if settings.get(key):
                refused = self.url_refusal("%s.%s in the Secret's kubeconfig" % (where, key), str(settings[key]))
                if refused:
                    return refused
        return None
