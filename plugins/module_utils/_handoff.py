# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Work handed to a running module through a named pipe. Internal to this collection.

Starting ansible-playbook and a module costs about 1.4 s, far more than the requests a submit
makes. The BridgeJob controller therefore starts its playbooks before the work exists: the module
blocks on a named pipe and the controller writes the jobs (or identities) and the credentials into
it when a CR arrives. The credentials so pass from process to process in memory and never rest in
a file, extra vars or the environment. The connection (url, namespace, ...) comes the same way:
what a BridgeJob's author wrote must never be an extra var, which Ansible would render as a
template.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import json
import os
import select
import time

from ansible_collections.bridge.hpc.plugins.module_utils._errors import BridgeError, SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._login import HANDED_OVER
from ansible_collections.bridge.hpc.plugins.module_utils._module import check_query, fail_on_bridge_error, with_query
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS

# Connection options a handed-over document may set, with their types: the BridgeJob's backend
# but its type, which picks the module's backend and is the playbook's one extra var.
HANDOFF_CONNECTION = dict(url=str, namespace=str, api_version=str, iam_url=str, validate_certs=bool, ca_path=str)

# Options the controller itself hands over, never read from a BridgeJob or its Secret: the key
# that tags Slurm job identities (slurm/identity.py), for a backend that has the option.
CONTROLLER_SECRETS = ("identity_key",)

HANDOFF_OPTIONS = dict(
    handoff_pipe=dict(type="path"),
    handoff_timeout=dict(type="int", default=900),
    credentials=dict(type="dict", no_log=True),
)


# The controller holds a shared flock on this file, next to its pipes, for as long as it lives
# (bridge_controller/handoff.py names it too). The kernel drops the lock with the process, however
# it ends, and no other process can take its pid's place in it.
CONTROLLER_LOCK = "controller.lock"
# Seconds between two looks at that lock while the module waits for its work.
LIVENESS_INTERVAL = 1.0


def controller_gone(path):
    """True when the controller that made the pipe `path` holds its lock no longer: it ended, or
    was killed, and will never write. A pipe without that lock beside it (made by hand) has none."""
    try:
        fd = os.open(os.path.join(os.path.dirname(path), CONTROLLER_LOCK), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # held: the controller is there
    finally:
        os.close(fd)
    return True


def read_handoff(path, timeout, clock=time.monotonic):
    """The JSON document a writer puts into the named pipe `path`, or None when none came in time
    or the controller that made the pipe is gone.

    The pipe is opened without blocking, so that waiting is bounded by `timeout` even when no
    writer ever opens it, and the module looks at the controller's lock every LIVENESS_INTERVAL:
    a standby playbook of a controller that died exits then, not after its handoff_timeout.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        deadline = clock() + timeout
        while True:
            remaining = deadline - clock()
            if remaining <= 0 or controller_gone(path):
                return None
            readable, _writable, _failed = select.select([fd], [], [], min(remaining, LIVENESS_INTERVAL))
            if readable:
                break
        # The writer is there: read to its end, blocking, however large the document.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    if not chunks:
        return None
    try:
        document = json.loads(b"".join(chunks).decode("utf-8"))
    except ValueError as exc:
        raise SpecError("handoff_pipe", "the handed-over document is not JSON: %s" % exc)
    if not isinstance(document, dict):
        raise SpecError("handoff_pipe", "the handed-over document must be a JSON object")
    return document


def take_handoff(module, work):
    """Merge the handed-over document into module.params; False when nothing came in time.

    `work` maps each key of the work the document may hold to its type; besides it, the document
    may hold the connection options of HANDOFF_CONNECTION and the credentials of the module's
    backend (its CREDENTIALS, strings). A handed-over secret joins the values every module output
    is scrubbed of, as a no_log option's value does.
    """
    path = module.params.get("handoff_pipe")
    if module.params.get("credentials"):
        merge_document(module, module.params["credentials"], {}, "credentials", "credentials")
    if not path:
        return True
    if module.params.get("handoff_timeout") is None or module.params["handoff_timeout"] <= 0:
        raise SpecError("handoff_timeout", "must be a positive number of seconds")
    document = read_handoff(path, module.params["handoff_timeout"])
    if document is None:
        return False
    work = dict(work)
    work.update(HANDOFF_CONNECTION)
    if module.params["backend"] == "slurm" and "login" in module.params:
        work["login"] = dict   # the login node a Slurm job's output is read on (spec.login)
    connection = BACKENDS[module.params["backend"]].connection_options()
    for key in CONTROLLER_SECRETS:
        if key in connection:
            work[key] = str
            if document.get(key):
                module.no_log_values.add(document[key])
    check_login(module, document.get("login"))
    for values in (document.get("output_secrets") or {}).values() if isinstance(document.get("output_secrets"), dict) else ():
        module.no_log_values.update(str(value) for value in values or () if value)
    merge_document(module, document, work, "handoff_pipe", "the handed-over document")
    return True


def check_login(module, login):
    """A handed-over login node holds content only (its key and known_hosts as text), never a path
    on the controller's machine; its key is scrubbed from all output as a credential is."""
    if login is None:
        return
    if not isinstance(login, dict):
        raise SpecError("handoff_pipe", "login in the handed-over document must be a dict")
    unknown = sorted(set(login) - set(HANDED_OVER))
    if unknown:
        raise SpecError("handoff_pipe", "unexpected keys %s in the handed-over login; allowed: %s"
                        % (", ".join(unknown), ", ".join(HANDED_OVER)))
    if login.get("private_key"):
        module.no_log_values.add(login["private_key"])


def merge_document(module, document, work, field, what):
    """Merge `document` (the keys of `work` and the credentials of the module's backend) into
    module.params, its secrets scrubbed from all output; a SpecError on `field` names what is wrong.

    The pipe and the `credentials` option (the playbooks run by hand) take the same keys, so that
    one playbook serves every backend without naming any backend's credentials.
    """
    backend = BACKENDS[module.params["backend"]]
    allowed = dict(work)
    allowed.update((key, str) for key in backend.CREDENTIALS)
    unknown = sorted(set(document) - set(allowed))
    if unknown:
        raise SpecError(field, "unexpected keys %s in %s; allowed for %s: %s"
                        % (", ".join(unknown), what, backend.NAME, ", ".join(sorted(allowed))))
    for key in backend.SECRETS:
        if document.get(key):
            module.no_log_values.add(document[key])
    for key, value in document.items():
        if value is not None and not isinstance(value, allowed[key]):
            raise SpecError(field, "%s in %s must be a %s" % (key, what, allowed[key].__name__))
    module.params.update((key, value) for key, value in document.items() if value is not None)


def handoff_or_exit(module, work, idle_result):
    """take_handoff for a module's main: a bad document (or `query`, before the wait) fails the task;
    none at all ends it idle."""
    try:
        check_query(module)
        if take_handoff(module, work):
            return
        idle = with_query(module, dict(idle_result, changed=False, msg="nothing was handed over within handoff_timeout"))
    except BridgeError as exc:
        fail_on_bridge_error(module, exc)
    else:
        module.exit_json(**idle)
