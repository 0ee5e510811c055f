"""spec.resultQuery: a JMESPath expression that picks what of a finished job goes into status.result.

Pure functions. The expression is checked when the CR is planned, before anything is submitted: it
compiles, and every function it calls exists and is given as many arguments as it takes, which
jmespath itself finds out only while searching, that is after the job ran. The collection's `query`
option checks the same (module_utils/_query.py); the controller does not import the collection, so
tests/unit/controller/test_result_query.py holds the two to one verdict.
"""

import json

import jmespath
from jmespath.exceptions import ArityError, JMESPathError, UnknownFunctionError, VariadictArityError
from jmespath.functions import Functions

# Bytes of compact JSON that status.result may hold: every watch event, `kubectl get` and informer
# cache carries the whole status, and a job's output belongs in its backend, not in etcd.
RESULT_LIMIT = 4096
FUNCTIONS = Functions().FUNCTION_TABLE


def compiled(expression):
    """The compiled expression; jmespath's own JMESPathError when it is no usable one."""
    parsed = jmespath.compile(expression)
    for name, given in calls(parsed.parsed):
        if name not in FUNCTIONS:
            raise UnknownFunctionError("Unknown function: %s()" % name)
        takes = FUNCTIONS[name]["signature"]
        if takes and takes[-1].get("variadic"):
            if given < len(takes):
                raise VariadictArityError(len(takes), given, name)
        elif given != len(takes):
            raise ArityError(len(takes), given, name)
    return parsed


def calls(node):
    """(function name, number of arguments) of every call in a parsed expression."""
    if node.get("type") == "function_expression":
        yield node["value"], len(node["children"])
    for child in node.get("children") or ():
        if isinstance(child, dict):  # a slice's children are its numbers
            yield from calls(child)


def refusal(expression):
    """Why `expression` cannot be a resultQuery, naming the field; None when it can."""
    try:
        compiled(expression)
    except JMESPathError as exc:
        return "spec.resultQuery: is not a valid JMESPath expression: %s" % exc
    return None


def selected(expression, job):
    """(status.result, (status, reason, message) of the ResultSelected condition) for a finished job,
    the job as bridge.hpc.job_info returns it. status.result is None (left out) when the expression
    selects nothing, fails on this job's data, or selects more than RESULT_LIMIT."""
    try:
        value = compiled(expression).search(job)
    except JMESPathError as exc:
        # Checked at planning, so only the data can fail it now (length() of a null), or a CR
        # submitted by a controller that did not check yet.
        return None, (False, "QueryFailed", "spec.resultQuery: %s" % exc)
    if value is None:
        return None, (True, "NothingSelected", "spec.resultQuery selected nothing (null)")
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    if size > RESULT_LIMIT:
        return None, (False, "TooLarge", "spec.resultQuery selected %d bytes of JSON, over the limit of %d bytes "
                                         "for status.result; select less" % (size, RESULT_LIMIT))
    return value, (True, "Selected", "%d bytes of JSON" % size)
