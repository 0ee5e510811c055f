"""spec.backend.caConfigMapRef end to end: the controller trusts the CA a ConfigMap holds.

slurmrestd (22.05) speaks plain HTTP; a TLS-terminating Relay in front of it serves a certificate
for 127.0.0.1 signed by a throwaway CA. With the CA in a ConfigMap named by caConfigMapRef the
BridgeJob runs to Completed; without it the certificate is not verified, the job is not submitted
(nothing in Slurm carries the CR's UID) and BackendReachable says why; validateCerts: false runs
without the CA. The controller (one process for the module, with its own label selector, as in
test_controller_backends.py) never logs the token nor leaves it in its runner directory: the
`controller` fixture checks both when it stops.
"""

import sys

import pytest

import test_controller_backends
import test_controller_e2e
from conftest import COLLECTIONS, Relay, make_certificates, require_slurm
from test_controller_backends import Namespace, condition, phase_of, slurm_backend
from test_controller_e2e import wait_for

# Their fixtures, used by name: a module-scoped controller process of this module's own.
kube = test_controller_e2e.kube
controller = test_controller_backends.controller


@pytest.fixture(scope="module")
def tls_slurm(tmp_path_factory):
    """(Slurm env, CA bundle text, the relay) for Slurm 22.05 behind TLS."""
    slurm = require_slurm("22.05")
    ca_path, server_context = make_certificates(tmp_path_factory.mktemp("tls"))
    relay = Relay.to(slurm["SLURM_URL"], tls=server_context)
    with open(ca_path) as handle:
        ca_pem = handle.read()
    try:
        yield slurm, ca_pem, relay
    finally:
        relay.close()


def tls_backend(namespace, slurm, relay, **extra):
    backend = slurm_backend(namespace, slurm)
    backend.update(url=relay.url, **extra)
    return backend


def test_a_ca_from_a_config_map_is_trusted(controller, tls_slurm):
    slurm, ca_pem, relay = tls_slurm
    namespace = Namespace(controller, "tls-ca")
    namespace.config_map("bridge-ca", {"ca.crt": ca_pem})
    seen = relay.connections
    namespace.bridgejob("ok", tls_backend(namespace, slurm, relay, caConfigMapRef={"name": "bridge-ca"}),
                        script="#!/bin/bash\necho over tls\n")

    done = wait_for(lambda: namespace.read("ok"), lambda o: phase_of(o) in ("Completed", "Failed"))
    assert phase_of(done) == "Completed", done.get("status")
    assert done["status"]["exitCode"] == 0 and done["status"]["jobId"]
    assert condition(done, "BackendReachable")["status"] == "True"
    assert relay.connections > seen, "the job did not go through the TLS relay"
    namespace.assert_no_secret(["ok"])


def test_without_the_ca_the_certificate_is_refused_and_nothing_is_submitted(controller, tls_slurm):
    slurm, _ca_pem, relay = tls_slurm
    namespace = Namespace(controller, "tls-noca")
    created = namespace.bridgejob("untrusted", tls_backend(namespace, slurm, relay), script="#!/bin/bash\nexit 0\n")

    refused = wait_for(lambda: namespace.read("untrusted"), lambda o: condition(o, "BackendReachable").get("status") == "False")
    reachable = condition(refused, "BackendReachable")
    assert "certificate verify failed" in reachable["message"], reachable
    assert phase_of(refused) == "Pending" and not refused["status"].get("jobId")
    assert condition(refused, "Submitted")["status"] == "False"

    sys.path.insert(0, COLLECTIONS)
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

    plain = SlurmClient(slurm["SLURM_URL"], user=slurm["SLURM_USER"], token=slurm["SLURM_JWT"])
    try:
        assert plain.find(created["metadata"]["uid"]) is None
    finally:
        plain.close()
    # Not deleted here: a CR without a job id is only released after a cancel that reached the
    # backend (a job may have been submitted before its id was written), so it would be held.
    namespace.assert_no_secret(["untrusted"])


def test_validate_certs_false_needs_no_ca(controller, tls_slurm):
    slurm, _ca_pem, relay = tls_slurm
    namespace = Namespace(controller, "tls-novalidate")
    namespace.bridgejob("unverified", tls_backend(namespace, slurm, relay, validateCerts=False), script="#!/bin/bash\nexit 0\n")

    done = wait_for(lambda: namespace.read("unverified"), lambda o: phase_of(o) in ("Completed", "Failed"))
    assert phase_of(done) == "Completed", done.get("status")
    assert done["status"]["exitCode"] == 0
    namespace.assert_no_secret(["unverified"])
