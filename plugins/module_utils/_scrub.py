# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one scrubber of secrets, in every encoding they can come back in. Internal to this collection.

A manager may echo a credential it was sent in its own encoding: PAC an XML-escaped password
(p&amp;ss&lt;w&gt;rd, or &#38;), IBM Cloud IAM a URL-encoded API key (api%2Fkey%2B, or %2f),
a JSON service an escaped one (\\u0026, \\/), a proxy a base64 Authorization header (Basic
user:password). Every client's messages (through Transport.scrub), the Kubernetes client's and a
job's output (_output.tail) are scrubbed here, so a secret is masked in all of these forms.

Character by character, a secret matches as itself or as any escape of that character (JSON,
XML/HTML named or numeric in any case and with leading zeros, percent-encoded UTF-8 in either
case, + for a space), so a text that escapes some characters and not others is matched too. Base64
does not encode character by character: a secret inside base64 text (Basic user:password, any
blob) shows as one of three runs, one per alignment of its first byte, whatever comes before or
after it; each run is matched in the standard and URL-safe alphabets.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import re
from xml.sax.saxutils import escape

try:
    from urllib.parse import quote, quote_plus
except ImportError:  # Python 2, where ansible-test's compile test still looks
    from urllib import quote, quote_plus

# What replaces a secret.
MASK = "********"
# A base64 run shorter than this is not looked for: a few characters occur in unrelated base64 text
# (a JWT, a job's output) by chance, and a run that short gives away little of the secret.
MIN_BASE64_RUN = 6
# A longer secret is matched in its whole encodings only (_whole_forms).
PER_CHARACTER_UP_TO = 256
# Named entities of the characters XML and HTML escape.
_ENTITIES = {"&": ("amp",), "<": ("lt",), ">": ("gt",), '"': ("quot",), "'": ("apos",)}
# Compiled patterns of recent sets of secrets: a client scrubs many messages with the same few.
_PATTERNS = {}
_PATTERNS_KEPT = 32


def scrub(text, secrets, mask=MASK):
    """`text` with every one of `secrets`, in any of its encodings, replaced by `mask`. Where one
    secret holds another, the longer is masked whole."""
    text = "" if text is None else "%s" % (text,)
    key = tuple(sorted(set(s for s in secrets if s), key=lambda s: (-len(s), s)))
    if not key or not text:
        return text
    pattern = _PATTERNS.get(key)
    if pattern is None:
        if len(_PATTERNS) >= _PATTERNS_KEPT:
            _PATTERNS.clear()
        pattern = _PATTERNS[key] = re.compile("|".join(secret_pattern(secret) for secret in key))
    return pattern.sub(lambda _match: mask, text)


def secret_pattern(secret):
    """A regular expression of `secret` in every encoding (the module's docstring says which)."""
    if len(secret) > PER_CHARACTER_UP_TO:
        escaped = "|".join(re.escape(form) for form in sorted(set(_whole_forms(secret)), key=lambda f: (-len(f), f)))
    else:
        escaped = "".join(_character(character) for character in secret)
    runs = sorted(set(_base64_runs(secret.encode("utf-8"))), key=lambda run: (-len(run), run))
    return "|".join([escaped] + [re.escape(run) for run in runs])


def _whole_forms(secret):
    """A long secret (a whole kubeconfig) as each encoder writes it whole: matched character by
    character, it would cost seconds to compile and to match; its short parts (a token) are secrets
    of their own."""
    url = quote(secret, safe="")
    plus = quote_plus(secret, safe="")
    xml = escape(secret, {'"': "&quot;", "'": "&#x27;"})
    return [secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1], escape(secret), xml,
            url, url.lower(), plus, plus.lower()]


def _character(character):
    """The alternatives of one character of a secret."""
    code = ord(character)
    forms = [re.escape(character)]
    json_form = json.dumps(character)[1:-1]
    if json_form != character:
        forms.append(re.escape(json_form))
    if character == "/":
        forms.append(re.escape("\\/"))
    # JSON's \\u form of any character, as an encoder that escapes everything non-ASCII writes it.
    forms.append("".join(r"\\u" + _hex_digits("%04x" % unit) for unit in _utf16_units(code)))
    forms.extend("&%s;" % name for name in _ENTITIES.get(character, ()))
    forms.append("&#0*%d;" % code)
    forms.append("&#[xX]0*%s;" % _hex_digits("%x" % code))
    forms.append("".join("%" + _hex_digits("%02x" % byte) for byte in bytearray(character.encode("utf-8"))))
    if character == " ":
        forms.append(r"\+")
    return "(?:%s)" % "|".join(forms)


def _hex_digits(digits):
    """A pattern of hex digits in either case: "2f" -> "2[fF]"."""
    return "".join("[%s%s]" % (digit.lower(), digit.upper()) if digit.isalpha() else digit for digit in digits)


def _utf16_units(code):
    if code < 0x10000:
        return [code]
    code -= 0x10000
    return [0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)]


def _base64_runs(data):
    """The base64 characters that `data` alone decides, for each of the three offsets it may start at
    in a longer text (b"user:" + password), in both alphabets; and its whole encoding, padded or not."""
    runs = []
    whole = base64.b64encode(data).decode("ascii")
    for encoded in (whole, whole.rstrip("=")):
        runs.extend([encoded, encoded.replace("+", "-").replace("/", "_")])
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode("ascii")
        # Character i holds bits 6i..6i+5; those of data are bits 8*offset .. 8*(offset+len)-1.
        first = -(-8 * offset // 6)
        last = (8 * (offset + len(data))) // 6
        run = encoded[first:last]
        if len(run) >= MIN_BASE64_RUN:
            runs.extend([run, run.replace("+", "-").replace("/", "_")])
    return [run for run in runs if len(run) >= MIN_BASE64_RUN]
