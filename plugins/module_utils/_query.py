# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `query` option of the *_info modules: a JMESPath expression that narrows the result, as the
AWS CLI's --query does. Internal to this collection.

The expression is checked before any request (compiled, and every function it calls known and given
as many arguments as it takes, which jmespath itself only finds out while searching), so a typo
costs no request; the search runs on the result the module would have returned, without the keys
Ansible itself reads or adds.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import traceback

from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError

try:
    import jmespath
    from jmespath.exceptions import ArityError, JMESPathError, UnknownFunctionError, VariadictArityError
    from jmespath.functions import Functions
except ImportError:
    HAS_JMESPATH = False
    JMESPATH_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_JMESPATH = True
    JMESPATH_IMPORT_ERROR = None

QUERY_OPTIONS = dict(query=dict(type="str"))

# Keys Ansible reads from every result or adds to it: not the module's data, so the query does not
# see them; `changed` is returned beside query_result.
ANSIBLE_KEYS = frozenset(("changed", "failed", "skipped", "msg", "warnings", "deprecations", "invocation",
                          "exception", "diff"))


def compile_query(expression, field="query"):
    """The compiled expression, or a SpecError naming `field` (the BridgeJob controller's is
    spec.resultQuery) with jmespath's own message."""
    try:
        compiled = jmespath.compile(expression)
        check_functions(compiled.parsed, Functions().FUNCTION_TABLE)
    except JMESPathError as exc:
        raise SpecError(field, "is not a valid JMESPath expression: %s" % exc)
    return compiled


def check_functions(node, table):
    """Raise jmespath's own error for a call of an unknown function or with the wrong number of
    arguments: jmespath.compile accepts both and fails only while searching, after the requests."""
    if node.get("type") == "function_expression":
        name, given = node["value"], len(node["children"])
        if name not in table:
            raise UnknownFunctionError("Unknown function: %s()" % name)
        signature = table[name]["signature"]
        if signature and signature[-1].get("variadic"):
            if given < len(signature):
                raise VariadictArityError(len(signature), given, name)
        elif given != len(signature):
            raise ArityError(len(signature), given, name)
    for child in node.get("children") or ():
        if isinstance(child, dict):  # a slice's children are its numbers
            check_functions(child, table)


def narrowed(expression, result):
    """{changed, query_result}: what `expression` selects from `result`'s own data."""
    compiled = compile_query(expression)
    data = dict((key, value) for key, value in result.items() if key not in ANSIBLE_KEYS)
    try:
        selected = compiled.search(data)
    except JMESPathError as exc:
        # A function given a value of the wrong type (length() of a number): only the data shows it.
        raise SpecError("query", "could not be applied to the result: %s" % exc)
    return {"changed": result.get("changed", False), "query_result": selected}
