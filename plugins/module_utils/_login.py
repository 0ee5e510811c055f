# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cluster's login node, reached over SSH to read a job's output where the manager's
API does not serve it (slurmrestd). Internal to this collection.

The connection is the one the stage role uses (docs: roles/stage): OpenSSH's client, key
authentication, host keys checked against known_hosts given with the option, never asked for
(BatchMode) and never learned (StrictHostKeyChecking=yes). Nothing of the user's or the system's
ssh configuration is read. A key or known_hosts given as content is written to a private temporary
directory for the one command and removed after it: the BridgeJob controller hands over content
only, never a path.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shutil
import subprocess
import tempfile

from ansible_collections.bridge.hpc.plugins.module_utils._errors import (
    AuthFailed,
    ConnectionFailed,
    NotFound,
    Rejected,
    SpecError,
    Timeout,
    Unsupported,
)

# The `login` option of the modules that read a Slurm job's output (doc fragment bridge.hpc.login).
LOGIN_SUBOPTIONS = dict(
    host=dict(type="str", required=True),
    port=dict(type="int", default=22),
    user=dict(type="str"),
    private_key=dict(type="str", no_log=True),
    private_key_file=dict(type="path", no_log=False),
    known_hosts=dict(type="str"),
    known_hosts_file=dict(type="path"),
    timeout=dict(type="int", default=30),
)
LOGIN_OPTIONS = dict(login=dict(type="dict", options=LOGIN_SUBOPTIONS))
# What the BridgeJob controller may hand over (content, never a path on its machine).
HANDED_OVER = ("host", "port", "user", "private_key", "known_hosts")

MANAGER = "the login node"
# A host name, an IPv4 address or a bracketed IPv6 one; a user name as useradd takes it. Neither
# may start with "-": ssh would read it as an option.
HOST_PATTERN = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_][A-Za-z0-9_.-]{0,252})$")
USER_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}\$?$")
# What ssh writes when it cannot reach, or is refused by, the login node (exit status 255).
_HOST_KEY = re.compile(r"host key verification failed|remote host identification has changed|"
                       r"no .* host key is known", re.IGNORECASE)
_REFUSED = re.compile(r"permission denied|too many authentication failures|no supported authentication", re.IGNORECASE)


def shell_quote(text):
    """`text` as one word of a POSIX shell command line (the login shell runs the command)."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


class LoginNode(object):
    """ssh to one login node: read_end(path, n) is the end of a file there."""

    def __init__(self, host, port=22, user=None, private_key=None, private_key_file=None, known_hosts=None,
                 known_hosts_file=None, timeout=30, ssh="ssh"):
        self.host, self.port, self.user = host, port, user
        self.private_key, self.private_key_file = private_key, private_key_file
        self.known_hosts, self.known_hosts_file = known_hosts, known_hosts_file
        self.timeout = timeout
        self.ssh = ssh
        self.url = "ssh://%s%s:%d" % (user + "@" if user else "", host, port)
        self.commands_run = 0

    @classmethod
    def from_option(cls, value, field="login"):
        """A LoginNode from the `login` option's dict; SpecError naming the suboption that is wrong."""
        if not value:
            return None
        options = dict((name, spec.get("default")) for name, spec in LOGIN_SUBOPTIONS.items())
        unknown = sorted(set(value) - set(options))
        if unknown:
            raise SpecError(field, "unknown key(s) %s; allowed: %s" % (", ".join(unknown), ", ".join(sorted(options))))
        options.update((name, item) for name, item in value.items() if item is not None)
        host = "%s" % (options["host"] or "")
        if not HOST_PATTERN.match(host):
            raise SpecError(field + ".host", "'%s' is not a host name or address" % host)
        if options["user"] is not None and not USER_PATTERN.match(options["user"]):
            raise SpecError(field + ".user", "'%s' is not a user name" % options["user"])
        try:
            port = int(options["port"])
        except (TypeError, ValueError):
            raise SpecError(field + ".port", "must be a number from 1 to 65535")
        if not 0 < port < 65536:
            raise SpecError(field + ".port", "must be a number from 1 to 65535, got %d" % port)
        for content, path in (("private_key", "private_key_file"), ("known_hosts", "known_hosts_file")):
            if options[content] and options[path]:
                raise SpecError(field + "." + content, "%s and %s are mutually exclusive" % (content, path))
        if not options["known_hosts"] and not options["known_hosts_file"]:
            raise SpecError(field + ".known_hosts", "the login node's host key is required (known_hosts or "
                            "known_hosts_file): Bridge checks it and never learns it on first use")
        if int(options["timeout"]) <= 0:
            raise SpecError(field + ".timeout", "must be a positive number of seconds")
        return cls(host, port, options["user"], options["private_key"], options["private_key_file"],
                   options["known_hosts"], options["known_hosts_file"], int(options["timeout"]))

    def secrets(self):
        return [self.private_key] if self.private_key else []

    def read_end(self, path, max_bytes):
        """(bytes, partial): the last `max_bytes` bytes of the file `path` on the login node,
        `partial` when the file is longer. One ssh command."""
        command = "LC_ALL=C tail -c %d -- %s" % (max_bytes + 1, shell_quote(path))
        data = self.run(command, "read", "job output", path)
        if len(data) > max_bytes:
            return data[len(data) - max_bytes:], True
        return data, False

    def run(self, command, verb, obj, ident):
        """The stdout of `command` run on the login node; a typed error otherwise."""
        workdir = tempfile.mkdtemp(prefix="bridge-login-")
        try:
            args = self._args(workdir) + [command]
            self.commands_run += 1
            try:
                done = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      timeout=self.timeout * 2 + 5, check=False)
            except OSError as exc:
                raise Unsupported("cannot run ssh (openssh-client) where this runs: %s" % exc.strerror, verb, obj,
                                  ident, MANAGER, self.url)
            except subprocess.TimeoutExpired:
                raise Timeout("ssh did not finish within %d seconds" % (self.timeout * 2 + 5), verb, obj, ident,
                              MANAGER, self.url)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        if done.returncode == 0:
            return done.stdout
        reason = self._reason(done.stderr)
        if done.returncode == 255:
            if _HOST_KEY.search(reason):
                raise AuthFailed("the login node's host key is not the one known_hosts holds (%s)" % reason, verb, obj,
                                 ident, MANAGER, self.url)
            if _REFUSED.search(reason):
                raise AuthFailed("the login node refused the key (%s)" % reason, verb, obj, ident, MANAGER, self.url)
            raise ConnectionFailed(reason, verb, obj, ident, MANAGER, self.url)
        if re.search(r"no such file|cannot open", reason, re.IGNORECASE):
            raise NotFound(reason, verb, obj, ident, MANAGER, self.url)
        raise Rejected(reason, verb, obj, ident, MANAGER, self.url)

    def _reason(self, stderr):
        """The last lines ssh or the command wrote to stderr, short, without the key."""
        text = stderr.decode("utf-8", "replace").strip()
        for secret in self.secrets():
            text = text.replace(secret, "********")
        lines = [line for line in text.splitlines() if line.strip() and not line.startswith("Warning: Permanently")]
        return " ".join(lines[-3:])[:500] or "ssh failed without a message"

    def _args(self, workdir):
        known_hosts = self.known_hosts_file
        if self.known_hosts:
            known_hosts = self._private_file(workdir, "known_hosts", self.known_hosts)
        args = [self.ssh, "-F", "/dev/null", "-T", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
                "-o", "UserKnownHostsFile=%s" % known_hosts, "-o", "GlobalKnownHostsFile=/dev/null",
                "-o", "UpdateHostKeys=no", "-o", "ConnectTimeout=%d" % self.timeout, "-o", "ServerAliveInterval=10",
                "-o", "ControlMaster=no", "-o", "ControlPath=none", "-o", "ForwardAgent=no",
                "-o", "ClearAllForwardings=yes", "-o", "LogLevel=ERROR", "-p", str(self.port)]
        key = self.private_key_file
        if self.private_key:
            key = self._private_file(workdir, "id", self.private_key)
        if key:
            args += ["-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-i", key]
        if self.user:
            args += ["-l", self.user]
        return args + ["--", self.host.strip("[]")]

    @staticmethod
    def _private_file(workdir, name, content):
        """A file of `content` only this user can read; ssh refuses a key that ends without a newline."""
        path = os.path.join(workdir, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(content if content.endswith("\n") else content + "\n")
        return path


def attach_login(client, params):
    """Give `client` the login node of a module's `login` option; SpecError for a backend that
    reads job output through its own API."""
    value = params.get("login")
    if not value:
        return
    if client.NAME != "slurm":
        raise SpecError("login", "only the slurm backend reads job output through a login node; %s serves it "
                        "through its own API" % client.TITLE)
    client.login = LoginNode.from_option(value)
