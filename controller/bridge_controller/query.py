"""spec.resultQuery: a JMESPath expression that picks what of a finished job goes into status.result.

Pure functions. The expression is checked when the CR is planned, before anything is submitted, as
the collection checks its `query` option (module_utils/_query.py): it compiles, and every function
it calls exists and is given as many arguments as it takes, which jmespath itself finds out only
while searching, that is after the job ran.
"""

import json

from jmespath.exceptions import JMESPathError

from bridge_controller.collection import module_utils

_errors = module_utils("_errors")
_query = module_utils("_query")

FIELD = "spec.resultQuery"
# Bytes of compact JSON that status.result may hold: every watch event, `kubectl get` and informer
# cache carries the whole status, and a job's output belongs in its backend, not in etcd.
RESULT_LIMIT = 4096


def refusal(expression):
    """Why `expression` cannot be a resultQuery, naming the field; None when it can."""
    try:
        _query.compile_query(expression, FIELD)
    except _errors.SpecError as exc:
        return str(exc)
    return None


def selected(expression, job):
    """(status.result, (status, reason, message) of the ResultSelected condition) for a finished job,
    the job as bridge.hpc.job_info returns it. status.result is None (left out) when the expression
    selects nothing, fails on this job's data, or selects more than RESULT_LIMIT."""
    # Checked at planning, so only the data can fail it now (length() of a null), or a CR
    # submitted by a controller that did not check yet.
    try:
        value = _query.compile_query(expression, FIELD).search(job)
    except _errors.SpecError as exc:
        return None, (False, "QueryFailed", str(exc))
    except JMESPathError as exc:
        return None, (False, "QueryFailed", "%s: %s" % (FIELD, exc))
    if value is None:
        return None, (True, "NothingSelected", "spec.resultQuery selected nothing (null)")
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    if size > RESULT_LIMIT:
        return None, (False, "TooLarge", "spec.resultQuery selected %d bytes of JSON, over the limit of %d bytes "
                                         "for status.result; select less" % (size, RESULT_LIMIT))
    return value, (True, "Selected", "%d bytes of JSON" % size)
