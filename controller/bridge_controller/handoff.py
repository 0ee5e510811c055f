"""The controller's side of the pipe protocol (module_utils/_handoff.py is the module's side).

A playbook's module blocks on a named pipe until the controller writes one JSON document into
it: the connection (url, namespace, ...), the work (jobs or identities) and the credentials. The
credentials so never go through extra vars or the environment, which ansible-runner writes to
disk (the environment even into artifacts/<ident>/command). And nothing a tenant wrote is ever an
extra var: Ansible renders a template found in a variable's value, so a URL holding
"{{ lookup('pipe', ...) }}" would run a command here. Through the pipe it is data the module
reads, never a template. An empty write ends a waiting module idle.
"""

import errno
import fcntl
import os
import time

from bridge_controller.backends import credential_keys, tags_identities


# The Secret key of a Slurm login node's private key (spec.login of the backend), handed over in
# the module's `login` option as its private_key: content, never a path.
LOGIN_KEY = "loginPrivateKey"
# The file beside a runner's pipes that it holds a shared flock on while it lives: a waiting module
# that can take the lock knows that no controller will ever write to it, and exits (the module's
# side, module_utils/_handoff.py, names it too; a unit test proves they agree).
CONTROLLER_LOCK = "controller.lock"


def hold_controller_lock(pipe_dir):
    """The open file (an fd, close-on-exec) that holds the shared lock on `pipe_dir`'s
    CONTROLLER_LOCK; closing it tells the modules waiting there to give up."""
    fd = os.open(os.path.join(pipe_dir, CONTROLLER_LOCK), os.O_RDONLY | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def handoff_document(action, connection, credentials, jobs=None, identities=None, wait_timeout=120, output_lines=None,
                     output_secrets=None, output_follow=None, identity_key=None):
    """What the module of `action` reads from its pipe: the connection options but the backend's
    type (the playbook's one extra var), its work, and exactly the credentials of the backend that
    the Secret holds (a Secret may carry other keys, a CA for instance), each under the name of the
    module option it sets; the login node's key from the Secret's loginPrivateKey in `login`.
    `output_lines` ({identity: tail_lines}) asks a poll for the output of the jobs it finds finished,
    `output_follow` ([identity] of those) for that of the jobs it finds running too, `output_secrets`
    ({identity: [value]}) what to mask in each besides the connection's secrets. A document without
    a job that follows its output has no `output_follow`, as before there was one. `identity_key`
    (the controller's --identity-key-file) goes to a backend whose jobs carry a tagged identity."""
    credentials = credentials or {}
    document = dict((option, value) for option, value in connection.items() if option != "type" and value is not None)
    document.update((option, credentials[key]) for option, key in credential_keys(connection["type"]) if credentials.get(key))
    document.pop("identity_key", None)   # the controller's alone, whatever a connection says
    if identity_key and tags_identities(connection["type"]):
        document["identity_key"] = identity_key
    if document.get("login") and credentials.get(LOGIN_KEY):
        document["login"] = dict(document["login"], private_key=credentials[LOGIN_KEY])
    if action == "poll":
        document["identities"] = list(identities)
        if output_lines:
            document["output_lines"] = dict(output_lines)
        if output_follow:
            document["output_follow"] = list(output_follow)
        if output_secrets:
            document["output_secrets"] = dict(output_secrets)
    else:
        document["jobs"] = list(jobs)
    if action == "cancel":
        document["wait_timeout"] = int(wait_timeout)
    return document


def write_to_pipe(pipe, data, alive, timeout=120.0, clock=time.monotonic):
    """Write `data` to the reader of the named pipe `pipe`, waiting for one while `alive()` says so.

    False when no reader came (the playbook ended first, or in `timeout`) or the reader went away
    before taking everything: then it acted on nothing, since the module only acts on a whole
    document.
    """
    deadline = clock() + timeout
    while True:
        try:
            fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return False  # the pipe was removed: nobody can read it any more
            if exc.errno != errno.ENXIO:
                raise
        if not alive() or clock() > deadline:
            return False
        time.sleep(0.01)
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BrokenPipeError:
        return False
    finally:
        os.close(fd)
    return True
