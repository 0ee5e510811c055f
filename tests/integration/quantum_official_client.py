"""Scenarios of the UNMODIFIED official qiskit-ibm-runtime client against the Qiskit Runtime simulator.

Run by tests/integration/test_quantum_official_client.py with the qiskit venv's python
(QUANTUM_PYTHON; the project venv has no qiskit), with the simulator's env file in the environment.
Every scenario runs, whatever the others did; stdout is one JSON object {scenario: facts}, a failed
scenario's facts being {"error": traceback}. Every raw result the simulator returned is validated
against IBM's own Pydantic models (ibm_quantum_schemas) before a scenario reports success.
"""

import json
import os
import sys
import time
import traceback
import uuid
import warnings

import requests
from ibm_quantum_schemas.estimator.version_0_1.params import ParamsModel as EstimatorParams
from ibm_quantum_schemas.estimator.version_0_1.primitive_result import PrimitiveResultWrapperModel as EstimatorResult
from ibm_quantum_schemas.sampler.version_0_1.params import ParamsModel as SamplerParams
from ibm_quantum_schemas.sampler.version_0_1.primitive_result import PrimitiveResultWrapperModel as SamplerResult
from qiskit import QuantumCircuit
from qiskit.primitives.containers.sampler_pub import SamplerPub
from qiskit.quantum_info import SparsePauliOp
from qiskit.transpiler import generate_preset_pass_manager
from qiskit_ibm_runtime import Batch, EstimatorV2, QiskitRuntimeService, SamplerV2, Session

# SamplerV2/EstimatorV2 warn that they are deprecated since 0.50 (quantum-lsf.md §A5); they are
# what the simulator serves.
warnings.simplefilter("ignore", DeprecationWarning)
ENV = os.environ
TAG = "bridge-test-" + uuid.uuid4().hex[:8]
POLL = 0.1


def service(token=None):
    # quantum-lsf.md "What a simulator must implement": IAM_URL, GLOBAL_SEARCH_URL and
    # GLOBAL_CATALOG_URL come from the environment; the Runtime URL from url + url_resolver.
    return QiskitRuntimeService(channel="ibm_quantum_platform", token=token or ENV["QUANTUM_API_KEY"],
                                instance=ENV["QUANTUM_SERVICE_CRN"], url=ENV["QUANTUM_IAM_URL"],
                                url_resolver=lambda url, *_: url + "/api/v1")


class Raw(object):
    """Plain HTTP to the simulator, to read what it answered before the client decoded it."""

    def __init__(self):
        form = {"grant_type": "urn:ibm:params:oauth:grant-type:apikey", "apikey": ENV["QUANTUM_API_KEY"]}
        token = requests.post(ENV["QUANTUM_IAM_URL"] + "/identity/token", data=form, timeout=30).json()["access_token"]
        self.headers = {"Authorization": "Bearer " + token, "Service-CRN": ENV["QUANTUM_SERVICE_CRN"]}

    def get(self, path):
        response = requests.get(ENV["QUANTUM_URL"] + path, headers=self.headers, timeout=30)
        response.raise_for_status()
        return response


RAW = Raw()


def validated(job, program):
    """The job's raw params and results checked against IBM's models; returns the job id."""
    params_model, result_model = (SamplerParams, SamplerResult) if program == "sampler" else (EstimatorParams, EstimatorResult)
    params_model.model_validate(RAW.get("/jobs/%s" % job.job_id()).json()["params"])
    result_model.model_validate_json(RAW.get("/jobs/%s/results" % job.job_id()).text)
    return job.job_id()


def bell(measured=True):
    circuit = QuantumCircuit(2)
    circuit.h(0)
    circuit.cx(0, 1)
    if measured:
        circuit.measure_all()
    return circuit


def isa(circuit, backend):
    return generate_preset_pass_manager(backend=backend, optimization_level=1).run(circuit)


def wait_for(job, states, timeout=30):
    deadline = time.time() + timeout
    while job.status() not in states:
        if time.time() > deadline:
            raise AssertionError("job %s still %s after %ss" % (job.job_id(), job.status(), timeout))
        time.sleep(POLL)
    return job.status()


def failure(call):
    """(exception class name, message) of what call() raised, or None."""
    try:
        call()
    except Exception as exc:  # pylint: disable=broad-exception-caught
        return [type(exc).__name__, str(exc)]
    return None


def scenario_service(svc):
    started = time.time()
    service()
    seconds = time.time() - started
    names = [b.name for b in svc.backends()]
    return {"seconds": round(seconds, 3), "backends": names,
            "operational": {n: svc.backend(n).status().operational for n in names},
            "least_busy": svc.least_busy().name, "usage": svc.usage()}


def scenario_sampler(svc):
    backend = svc.backend("ibm_manila")
    job = SamplerV2(mode=backend).run([isa(bell(), backend)], shots=2000)
    result = job.result()
    return {"job": validated(job, "sampler"), "status": job.status(), "counts": result[0].data.meas.get_counts(),
            "shots": result[0].data.meas.num_shots, "spans": len(result.metadata["execution"]["execution_spans"])}


def scenario_estimator(svc):
    backend = svc.backend("ibm_manila")
    circuit = isa(bell(measured=False), backend)
    observables = [SparsePauliOp(p).apply_layout(circuit.layout) for p in ("ZZ", "XX", "ZI")]
    job = EstimatorV2(mode=backend).run([(circuit, observables)])
    data = job.result()[0].data
    return {"job": validated(job, "estimator"), "evs": [float(v) for v in data.evs],
            "stds": [float(v) for v in data.stds]}


def scenario_session(svc):
    backend = svc.backend("ibm_nairobi")
    circuit = isa(bell(), backend)
    with Session(backend=backend) as session:
        jobs = [SamplerV2(mode=session).run([circuit], shots=shots) for shots in (500, 500)]
        counts = [sum(j.result()[0].data.meas.get_counts().values()) for j in jobs]
        details = session.details()
    return {"session_id": session.session_id, "job_sessions": [j.session_id for j in jobs], "shots": counts,
            "mode": details["mode"], "backend": details["backend_name"],
            "state_after_close": RAW.get("/sessions/%s" % session.session_id).json()["state"],
            "jobs": [validated(j, "sampler") for j in jobs]}


def scenario_batch(svc):
    backend = svc.backend("ibm_manila")
    circuit = isa(bell(), backend)
    with Batch(backend=backend) as batch:
        jobs = [SamplerV2(mode=batch).run([circuit], shots=shots) for shots in (300, 300)]
        statuses = [wait_for(j, ("DONE",)) for j in jobs]
        details = batch.details()
    return {"session_id": batch.session_id, "job_sessions": [j.session_id for j in jobs], "statuses": statuses,
            "mode": details["mode"], "usage_time": details["usage_time"],
            "jobs": [validated(j, "sampler") for j in jobs]}


def scenario_cancel(svc):
    # A job on the paused device stays Queued; a job of many shots stays Running for seconds
    # (the simulator's QPU time grows with shots).
    paused = svc.backend("ibm_lima")
    queued = SamplerV2(mode=paused).run([isa(bell(), paused)], shots=100)
    before_queued = wait_for(queued, ("QUEUED",))
    queued.cancel()
    backend = svc.backend("ibm_nairobi")
    running = SamplerV2(mode=backend).run([isa(bell(), backend)], shots=100000)
    before_running = wait_for(running, ("RUNNING",))
    running.cancel()
    facts = {"queued": [before_queued, wait_for(queued, ("CANCELLED",))],
             "running": [before_running, wait_for(running, ("CANCELLED",))],
             "result_of_cancelled": failure(queued.result),
             "cancel_again": failure(queued.cancel)}
    svc.delete_job(queued.job_id())
    facts["job_after_delete"] = failure(lambda: svc.job(queued.job_id()))
    return facts


def scenario_logs_and_tags(svc):
    backend = svc.backend("ibm_manila")
    sampler = SamplerV2(mode=backend, options={"environment": {"log_level": "INFO", "job_tags": [TAG]}})
    job = sampler.run([isa(bell(), backend)], shots=200)
    job.result()
    other = SamplerV2(mode=backend).run([isa(bell(), backend)], shots=100)
    other.result()
    found = [j.job_id() for j in svc.jobs(job_tags=[TAG])]
    job.update_tags([TAG, "second"])
    again = svc.job(job.job_id())
    return {"job": job.job_id(), "other": other.job_id(), "tag": TAG, "found": found, "logs": job.logs(),
            "tags_after_update": again.tags, "program": again.primitive_id, "backend": again.backend().name,
            "metrics_usage": job.metrics()["usage"], "usage": job.usage(), "validated": validated(job, "sampler")}


def scenario_non_isa(svc):
    backend = svc.backend("ibm_manila")
    circuit = bell()   # h is not a basis gate of the device: not an ISA circuit
    client_side = failure(lambda: SamplerV2(mode=backend).run([circuit], shots=100))
    # The client checks ISA circuits before it sends them; to see the simulator refuse one too, the
    # same request goes through the client's own REST layer (its request code, unmodified).
    params = {"pubs": [SamplerPub.coerce(circuit, 100)], "version": 2, "support_qiskit": True, "options": {}}
    try:
        svc._active_api_client.program_run("sampler", "ibm_manila", params, image=None, log_level=None, session_id=None)  # pylint: disable=protected-access
        server_side = None
    except Exception as exc:  # pylint: disable=broad-exception-caught
        server_side = [type(exc).__name__, getattr(exc, "status_code", None), str(exc)]
    return {"client_side": client_side, "server_side": server_side}


def scenario_wrong_key(_svc):
    return {"refused": failure(lambda: service(token="not-the-api-key"))}


SCENARIOS = [scenario_service, scenario_sampler, scenario_estimator, scenario_session, scenario_batch,
             scenario_cancel, scenario_logs_and_tags, scenario_non_isa, scenario_wrong_key]


def main():
    facts = {}
    svc = service()
    for run in SCENARIOS:
        name = run.__name__[len("scenario_"):]
        started = time.time()
        try:
            facts[name] = run(svc)
        except Exception:  # pylint: disable=broad-exception-caught
            facts[name] = {"error": traceback.format_exc()}
        facts[name]["elapsed"] = round(time.time() - started, 3)
    json.dump(facts, sys.stdout, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
