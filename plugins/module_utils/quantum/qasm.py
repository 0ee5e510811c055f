# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""OpenQASM 3 text, read without a parser (pure): whether the Runtime API would take a circuit,
and its width, classical registers and input parameters.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_VERSION = re.compile(r"^\s*OPENQASM\s+(\d+)(?:\.(\d+))?\s*;")
_SIZE = r"(?:\[\s*([^\]]+?)\s*\])"
_QUBIT = re.compile(r"(?<![\w$])qubit\s*" + _SIZE + r"?\s+([A-Za-z_]\w*)\s*;")
_QREG = re.compile(r"(?<![\w$])qreg\s+([A-Za-z_]\w*)\s*" + _SIZE + r"?\s*;")
_BIT = re.compile(r"(?<![\w$])bit\s*" + _SIZE + r"?\s+([A-Za-z_]\w*)\s*[;=]")
_CREG = re.compile(r"(?<![\w$])creg\s+([A-Za-z_]\w*)\s*" + _SIZE + r"?\s*;")
_PHYSICAL = re.compile(r"\$(\d+)")
_INPUT = re.compile(r"(?<![\w$])input\s+[A-Za-z_]\w*\s*(?:\[[^\]]*\])?\s+([A-Za-z_]\w*)\s*;")
_CONST = re.compile(r"(?<![\w$])const\s+[A-Za-z_]\w*\s*(?:\[[^\]]*\])?\s+([A-Za-z_]\w*)\s*=\s*(\d+)\s*;")


def qasm_problem(text):
    """Why `text` is no OpenQASM 3 program the Runtime API would take, or None."""
    if text is None or not text.strip():
        return "is empty"
    if text.startswith("#!"):
        return "is a script with a #! line; the quantum backend runs OpenQASM 3 circuits"
    code = _COMMENTS.sub(" ", text)
    version = _VERSION.match(code)
    if version and version.group(1) != "3":
        return ("is OpenQASM %s; the Qiskit Runtime REST API takes OpenQASM 3 (qiskit.qasm3.dumps writes it)"
                % version.group(1))
    if _PHYSICAL.search(code) and (_QUBIT.search(code) or _QREG.search(code)):
        # qiskit's OpenQASM 3 importer, which the service reads circuits with, refuses this
        # ("Mixing modes not currently supported").
        return "addresses physical qubits ($n) and declares qubits too; use one or the other"
    return None


def circuit_shape(text):
    """What Bridge reads of an OpenQASM 3 circuit without parsing it fully:

    {"qubits": width or None when a register size is not a literal or constant, "clbits": {register:
    size}, "inputs": [parameter names]}.
    The width of a circuit on physical qubits is the highest index plus one, as the service reads it
    (an estimator observable has one Pauli per qubit of that width).
    """
    code = _COMMENTS.sub(" ", text)
    constants = dict((name, int(value)) for name, value in _CONST.findall(code))

    def size(expression):
        if not expression:
            return 1
        expression = expression.strip()
        if expression.isdigit():
            return int(expression)
        return constants.get(expression)

    declared = [size(expression) for expression, _name in _QUBIT.findall(code)]
    declared += [size(expression) for _name, expression in _QREG.findall(code)]
    physical = [int(index) for index in _PHYSICAL.findall(code)]
    clbits = dict((name, size(expression)) for expression, name in _BIT.findall(code))
    clbits.update((name, size(expression)) for name, expression in _CREG.findall(code))
    if None in declared:
        width = None
    else:
        width = max(sum(declared), (max(physical) + 1) if physical else 0)
    return {"qubits": width, "clbits": clbits, "inputs": _INPUT.findall(code)}
