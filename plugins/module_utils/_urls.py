# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one URL parser of Bridge, and the operator's allow-list read with it. Internal to this collection.

Bridge sends with httpx (_transport.py) and urllib3 (the kubernetes client), and the controller
decides with this parser which URLs may be reached. Three parsers that read one text differently
are a way past any allow-list: `http://127.0.0.1:E\\@127.0.0.1:A/` is host A to urllib.parse and
host E to urllib3. So this parser accepts only the plain RFC 3986 forms on which urllib.parse,
httpx and urllib3 agree (tests/unit/test_urls.py checks that over a corpus of SSRF bypasses) and
refuses the rest, naming the field and what is allowed: any character outside RFC 3986, userinfo,
a host that is no DNS name, dotted-quad IPv4 or bracketed IPv6 address (2130706433,
0x7f.1, 0177.0.0.1, 127.1, a trailing dot), a bad port, and dot segments or encoded slashes in
the path.

The controller hands its --allowed-backend-url list to the modules it runs for a tenant's
connection in the environment variable ALLOWED_URLS_ENV (and to its probe's clients with
Backend.limit_urls); every request a client sends is checked against it right before it is sent.
Without it (a module a user runs, a ClusterBridgeBackend's connection) any URL the parser accepts
may be reached.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import ipaddress
import os
import re

from ansible_collections.bridge.hpc.plugins.module_utils._errors import BackendURLNotAllowed, SpecError

ALLOWED_URLS_ENV = "BRIDGE_ALLOWED_URLS"
HTTP_SCHEMES = ("http", "https")
# ssh: a Slurm backend's login node (spec.login), allowed as ssh://host:port.
DEFAULT_PORTS = {"http": 80, "https": 443, "ssh": 22}

# RFC 3986 section 2: unreserved, reserved (gen-delims and sub-delims) and "%" of pct-encoded.
RFC3986_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%")
URL_FORM = re.compile(r"^(?P<scheme>[^:/?#]+)://(?P<authority>[^/?#]*)(?P<path>[^?#]*)"
                      r"(?:\?(?P<query>[^#]*))?(?:#(?P<fragment>.*))?$", re.DOTALL)
PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
# A last label that is all digits or 0x-hex makes WHATWG parsers (and inet_aton) read the host as
# an IPv4 address in one of its old forms; only the dotted-quad decimal form is accepted.
NUMERIC_LABEL = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")
DOTTED_QUAD = re.compile(r"^(?:0|[1-9][0-9]{0,2})(?:\.(?:0|[1-9][0-9]{0,2})){3}$")
PORT = re.compile(r"^[1-9][0-9]{0,4}$")
# An encoded slash, backslash or control character: servers and proxies decode them differently, and a
# decoded CR LF ends a request line.
ENCODED_SEPARATORS = re.compile(r"%(?:2f|5c|[01][0-9a-f]|7f)", re.IGNORECASE)
FORM = "scheme://host[:port][/path] (host a DNS name, a dotted-quad IPv4 address or an [IPv6] address)"

Url = collections.namedtuple("Url", "scheme host port path query")


def parse_url(text, field="url", schemes=HTTP_SCHEMES, query=False):
    """The Url of `text` (host in lowercase, port filled in from the scheme), or SpecError naming
    `field` and what is allowed. `query`: whether a query may follow (a request's URL; never a
    base URL or an allow-list entry). A fragment is never sent, so never accepted."""
    if not isinstance(text, str) or not text:
        raise SpecError(field, "is empty; expected %s" % FORM)
    for position, character in enumerate(text):
        if character not in RFC3986_CHARACTERS:
            raise SpecError(field, "%r at position %d is not allowed in a URL: only RFC 3986's ASCII letters, digits "
                                   "and -._~:/?#[]@!$&'()*+,;=%% are (no backslash, space, control or non-ASCII "
                                   "character)" % (character, position))
    if PERCENT.search(text):
        raise SpecError(field, "a %% not followed by two hex digits is no percent-encoding")
    match = URL_FORM.match(text)
    if not match:
        raise SpecError(field, "%r is not an %s URL of the form %s" % (
            text, " or ".join("%s://" % scheme for scheme in schemes), FORM))
    scheme = match.group("scheme")
    if scheme not in schemes:
        raise SpecError(field, "scheme %r is not allowed; use %s (in lowercase)" % (scheme, " or ".join(schemes)))
    if match.group("fragment") is not None:
        raise SpecError(field, "a URL with a #fragment is not allowed")
    if match.group("query") is not None and not query:
        raise SpecError(field, "a URL with a ?query is not allowed here; expected %s" % FORM)
    host, port = _authority(match.group("authority"), scheme, field)
    path = match.group("path")
    segments = path.split("/")
    if any(segment.replace("%2e", ".").replace("%2E", ".") in (".", "..") for segment in segments):
        raise SpecError(field, "dot segments (., .., also percent-encoded) are not allowed in the path")
    if ENCODED_SEPARATORS.search(path):
        raise SpecError(field, "%2F, %5C and encoded control characters (%00-%1F, %7F) are not allowed in the path")
    return Url(scheme, host, port, path, match.group("query"))


def _authority(authority, scheme, field):
    if "@" in authority:
        raise SpecError(field, "userinfo (user@ or user:password@) is not allowed in a URL; credentials go in the Secret")
    if authority.startswith("["):
        inner, bracket, rest = authority[1:].partition("]")
        if not bracket:
            raise SpecError(field, "an IPv6 address is not closed with ]")
        try:
            if "%" in inner:
                raise ValueError("a zone id")
            address = ipaddress.IPv6Address(inner)
        except ValueError:
            raise SpecError(field, "%r is not an IPv6 address in brackets (zone ids and IPvFuture are not allowed)" % inner)
        if str(address) != inner.lower():
            raise SpecError(field, "IPv6 address %r must be written in its short form %s" % (inner, address))
        host = "[%s]" % address
    else:
        host, _colon, rest = authority.partition(":")
        rest = ":" + rest if _colon else ""
        host = host.lower()
        if "%" in host:
            raise SpecError(field, "percent-encoding is not allowed in the host")
        labels = host.split(".")
        if not host or not all(LABEL.match(label) for label in labels):
            raise SpecError(field, "host %r is not a DNS name (labels of letters, digits, - and _, no empty label, "
                                   "no trailing dot), a dotted-quad IPv4 address or an [IPv6] address" % host)
        if NUMERIC_LABEL.match(labels[-1]):
            if not DOTTED_QUAD.match(host) or any(int(label) > 255 for label in labels):
                raise SpecError(field, "host %r is no dotted-quad IPv4 address (four decimal numbers 0-255 without "
                                       "leading zeros; no decimal, hex, octal or short forms)" % host)
    if not rest:
        return host, DEFAULT_PORTS[scheme]
    if rest[0] != ":" or not PORT.match(rest[1:]) or int(rest[1:]) > 65535:
        raise SpecError(field, "port %r is not a number from 1 to 65535 without leading zeros" % rest[1:])
    return host, int(rest[1:])


class UrlPrefix:
    """One entry of --allowed-backend-url: scheme://host[:port][/path]. A URL matches when its
    scheme, host and port are the same and its path is the entry's path or below it, both read by
    parse_url: "https://ok.example@evil.example" is refused, and no dot segment leads out of the
    path."""

    def __init__(self, text):
        try:
            self.url = parse_url(text, "--allowed-backend-url", schemes=tuple(DEFAULT_PORTS))
        except SpecError as exc:
            raise ValueError("%r is not an http://, https:// or ssh:// prefix %s: %s" % (text, FORM, exc.reason))
        self.text = text
        self.path = self.url.path.rstrip("/")

    def matches(self, url):
        """Whether the Url `url` is under this prefix."""
        if (url.scheme, url.host, url.port) != (self.url.scheme, self.url.host, self.url.port):
            return False
        return not self.path or url.path == self.path or url.path.startswith(self.path + "/")


class AllowList:
    """The operator's --allowed-backend-url prefixes; none: any URL parse_url accepts may be used."""

    def __init__(self, texts):
        self.prefixes = [UrlPrefix(text) for text in texts]

    @classmethod
    def from_environ(cls, environ=None):
        """The list the controller handed over in ALLOWED_URLS_ENV (prefixes separated by
        whitespace, which no accepted URL holds); empty when there is none."""
        return cls((os.environ if environ is None else environ).get(ALLOWED_URLS_ENV, "").split())

    def environment(self):
        """The environment that hands this list to a module: {ALLOWED_URLS_ENV: ...}."""
        return {ALLOWED_URLS_ENV: " ".join(prefix.text for prefix in self.prefixes)}

    def refusal(self, field, text, schemes=HTTP_SCHEMES, query=False):
        """Why the URL `text` of `field` may not be used (unparsable or on no prefix); None when it may."""
        try:
            url = parse_url(text, field, schemes, query)
        except SpecError as exc:
            return str(exc)
        if not self.prefixes or any(prefix.matches(url) for prefix in self.prefixes):
            return None
        return "%s: %s is not among the backend URLs this controller may reach (%s)" % (
            field, text, ", ".join(prefix.text for prefix in self.prefixes))


def require_sendable(text, allow_list, manager, verb="send", obj="request"):
    """Raise BackendURLNotAllowed, before anything is sent to `text` (a request's whole URL, query
    included), when parse_url refuses it or it is outside the AllowList `allow_list`."""
    why = allow_list.refusal("request URL", text, query=True)
    if why:
        raise BackendURLNotAllowed(why, verb, obj, None, manager)
