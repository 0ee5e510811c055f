# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The end of a job's output, as results and BridgeJob status show it. Internal to this
collection.

Pure: a backend reads the output (bytes or text, whole or its end), tail() makes what is shown of
it. What is shown is text that any terminal, log viewer or YAML dump can hold: decoded as UTF-8
with U+FFFD for what is not, without control characters (terminal escapes included) but newline
and tab, without the secrets Bridge knows of, and at most MAX_BYTES bytes of whole lines.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.bridge.hpc.plugins.module_utils._fields import OUTPUT_TAIL_BYTES
from ansible_collections.bridge.hpc.plugins.module_utils._scrub import MASK, scrub as scrub_encoded

# What a module result and status.output hold at most (the field table's): the etcd object of a
# BridgeJob stays small however many of them a namespace has.
MAX_BYTES = OUTPUT_TAIL_BYTES
# A secret shorter than this is not looked for: masking every "1" or "ab" of an output would leave
# nothing readable, and such a value protects nothing.
MIN_SECRET_LENGTH = 4
# Environment variables whose values are secrets by their name (AWS_SECRET_ACCESS_KEY, DB_PASSWORD,
# GITHUB_TOKEN, API_KEY, ...): their values are masked wherever the job printed them.
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|KEY|CREDENTIAL", re.IGNORECASE)
# Terminal escape sequences as whole sequences, so that no "[31m" is left behind: CSI (ESC [ ...
# final byte, or C1 CSI), OSC (ESC ] ... BEL or ESC \), and the others (ESC, intermediate bytes,
# a final byte: ESC c, ESC ( B, ESC 7).
_ESCAPES = re.compile(u"\x1b\\[[0-?]*[ -/]*[@-~]|\x9b[0-?]*[ -/]*[@-~]|\x1b\\][^\x07\x1b]*(?:\x07|\x1b\\\\)?|"
                      u"\x1b[ -/]*[0-~]")
# Control characters but tab and newline: C0, DEL and C1.
_CONTROLS = re.compile(u"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def secret_values(environment):
    """The values of the environment variables whose names say they are secrets."""
    return [value for name, value in sorted((environment or {}).items()) if SECRET_NAME.search(name) and value]


def scrub(text, secrets):
    """`text` with every secret of `secrets` (of MIN_SECRET_LENGTH or more), in any encoding
    (_scrub), replaced by MASK; a secret that holds another is masked whole."""
    return scrub_encoded(text, [s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH], MASK)


def clean(text):
    """Text without terminal escapes and control characters but newline and tab; CR LF is a newline."""
    text = text.replace(u"\r\n", u"\n")
    return _CONTROLS.sub(u"", _ESCAPES.sub(u"", text))


def as_text(data):
    """Bytes decoded as UTF-8 with U+FFFD for what is not; text as it is."""
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data or u""


def tail(data, tail_lines, max_bytes=MAX_BYTES, secrets=(), partial=False):
    """{"text", "lines", "truncated"}: the last `tail_lines` lines of `data` (bytes or text), decoded,
    cleaned and scrubbed of `secrets` BEFORE anything is cut (so no cut leaves half a secret), then
    at most `max_bytes` bytes of UTF-8: whole lines from the end, or the end of the last line at a
    character boundary when that one line is longer. `lines` counts the lines of `text`;
    `truncated` says whether anything of the output was left out (`partial`: the backend read only
    its end)."""
    text = clean(scrub(as_text(data), secrets))
    # Scrubbed once more: a secret the job printed with escapes or controls inside is whole now.
    text = scrub(text, secrets)
    lines = text.split(u"\n")
    if lines and lines[-1] == u"":
        lines.pop()
    truncated = bool(partial)
    if len(lines) > tail_lines:
        lines = lines[len(lines) - tail_lines:] if tail_lines > 0 else []
        truncated = True
    kept, size = [], 0
    for line in reversed(lines):
        encoded = len(line.encode("utf-8")) + 1
        if size + encoded > max_bytes:
            if not kept:
                kept.append(_end_of(line, max_bytes - 1))
            truncated = True
            break
        kept.append(line)
        size += encoded
    kept.reverse()
    return {"text": u"".join(line + u"\n" for line in kept), "lines": len(kept), "truncated": truncated}


def _end_of(line, max_bytes):
    """The end of one line in at most `max_bytes` bytes of UTF-8, cut between characters."""
    data = line.encode("utf-8")[-max_bytes:] if max_bytes > 0 else b""
    # A cut inside a character leaves continuation bytes (10xxxxxx) first: drop them.
    start = 0
    while start < len(data) and 0x80 <= bytearray(data[start:start + 1])[0] < 0xC0:
        start += 1
    return data[start:].decode("utf-8")


def error_text(exc):
    """What output_error holds: the error's message, short."""
    return str(exc)[:1000]
