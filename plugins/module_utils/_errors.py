# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Typed errors shared by every Bridge client. Internal to this collection."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class BridgeError(Exception):
    """Base of every error a Bridge client raises.

    The message always reads
    "Failed to <verb> <object> '<id>' on <manager> at <url>: <reason> (HTTP <n>)"
    so that modules, inventory plugins and the controller report failures alike.
    """

    kind = "error"
    # Whether trying the same thing again later may succeed (kopf's TemporaryError vs
    # PermanentError): the controller retries temporary errors with backoff and reports permanent
    # ones. A subclass or the raiser decides; a 5xx or a lost connection is temporary.
    temporary = False

    def __init__(self, reason, verb=None, obj=None, ident=None, manager=None, url=None, status=None):
        self.reason = reason
        self.verb = verb
        self.obj = obj
        self.ident = ident
        self.manager = manager
        self.url = url
        self.status = status
        super(BridgeError, self).__init__(self.render())

    def render(self):
        if not self.verb:
            return self.reason
        what = self.obj or "request"
        if self.ident not in (None, ""):
            what = "%s '%s'" % (what, self.ident)
        where = ""
        if self.manager:
            where = " on %s" % self.manager
        if self.url:
            where += " at %s" % self.url
        text = "Failed to %s %s%s: %s" % (self.verb, what, where, self.reason)
        if self.status:
            text += " (HTTP %s)" % self.status
        return text

    def to_dict(self):
        """What modules and the controller put in results and status: never a token."""
        return {
            "type": type(self).__name__,
            "kind": self.kind,
            "reason": self.reason,
            "status": self.status,
            "temporary": self.temporary,
            "message": self.render(),
        }


class ConnectionFailed(BridgeError):
    kind = "connection"
    temporary = True


class Timeout(BridgeError):
    kind = "timeout"
    temporary = True


class AuthFailed(BridgeError):
    kind = "auth"


class CredentialsRefused(AuthFailed):
    """The credentials were refused while waiting for a job that exists (a token expired). `job`
    is the job as last seen: it stays as it is, and a later run finds it by its identity."""

    def __init__(self, reason, job, cause):
        self.job = job
        super(CredentialsRefused, self).__init__(reason, status=cause.status)


class NotFound(BridgeError):
    kind = "not_found"


class AlreadyExists(BridgeError):
    kind = "already_exists"


class Rejected(BridgeError):
    """The manager (or Bridge's own validation) refused the request, with its reason."""

    kind = "rejected"


class ServerError(BridgeError):
    kind = "server"

    @property
    def temporary(self):
        # A 5xx or 429 may pass; an unexpected 3xx or 4xx will answer the same next time.
        return self.status is None or self.status == 429 or self.status >= 500


class AmbiguousIdentity(BridgeError):
    """Jobs carry an identity that cannot be pinned on one submission of the credential's user
    (`job_ids`): none is adopted and nothing is submitted. Permanent while those jobs carry it.

    A lookup of several identities raises it for the first refused one, with `refused`
    ({identity: AmbiguousIdentity} of all) and `found` (the answer for the others), so that a
    batch fails only the items it concerns."""

    kind = "ambiguous_identity"

    def __init__(self, reason, verb=None, obj=None, ident=None, manager=None, url=None, status=None, job_ids=()):
        self.job_ids = list(job_ids)
        self.refused = {}
        self.found = {}
        super(AmbiguousIdentity, self).__init__(reason, verb, obj, ident, manager, url, status)

    def to_dict(self):
        result = super(AmbiguousIdentity, self).to_dict()
        result["job_ids"] = list(self.job_ids)
        return result


class MalformedResponse(BridgeError):
    """The answer was not what the manager's API sends: HTML from a proxy, another service's JSON,
    a truncated body, fields of the wrong type. Permanent: the URL most likely points elsewhere."""

    kind = "malformed_response"


class BackendURLNotAllowed(BridgeError):
    """A request was not sent: its URL is one Bridge's URL parser refuses (_urls.py) or outside the
    operator's allow-list. Permanent; the controller shows the type as the condition's reason."""

    kind = "url_not_allowed"


class Unsupported(Rejected):
    """The backend cannot do what was asked (a verb or a spec field it has no equivalent for)."""

    kind = "unsupported"


class SpecError(Rejected):
    """A job spec field is invalid; raised before anything is sent anywhere."""

    kind = "invalid_spec"

    def __init__(self, field, reason):
        self.field = field
        super(SpecError, self).__init__("%s: %s" % (field, reason))

    def to_dict(self):
        result = super(SpecError, self).to_dict()
        result["field"] = self.field
        return result


def error_for_status(status):
    """The error type that an HTTP status means when the manager's body says nothing better."""
    if status in (401, 511):
        return AuthFailed
    if status == 404:
        return NotFound
    if status == 409:
        return AlreadyExists
    if status in (400, 403, 413, 415, 422):
        return Rejected
    return ServerError
