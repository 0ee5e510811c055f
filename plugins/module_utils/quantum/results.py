# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Qiskit Runtime results as plain data, without qiskit or numpy.

GET /jobs/{id}/results comes in one of two encodings. Without support_qiskit the service sends
plain JSON: a register's shots as hex strings. qiskit_ibm_runtime's RuntimeEncoder (what the
official client asks for, and what a simulator built on qiskit writes) tags objects as
{"__type__": T, "__value__": V}: PrimitiveResult > SamplerPubResult or PubResult > DataBin >
BitArray (a uint8 ndarray of packed bits) or ndarray, where an ndarray is
base64(zlib(the bytes numpy.save writes)). Both become the same plain data here: a sampler
register's counts (and bitstrings), an estimator's values as lists of floats.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import base64
import binascii
import json
import re
import struct
import zlib

from ansible_collections.bridge.hpc.plugins.module_utils._backend import ShapeError

# Bounds of what a result may unpack to, so a corrupt or hostile body cannot exhaust memory.
MAX_DECODED_BYTES = 256 * 1024 * 1024
DEFAULT_MAX_BITSTRINGS = 1024
# qiskit_ibm_runtime's ExtrapolatorType names, which RuntimeEncoder may tag as ndarray.
EXTRAPOLATOR = re.compile(r"^(linear|exponential|double_exponential|fallback|polynomial_degree_\d+)$")


# ---------------------------------------------------------------- numpy .npy without numpy (pure)

# numpy dtype (kind + item size) -> struct format of one item; complex items are two floats.
NPY_FORMATS = {
    "b1": "?", "u1": "B", "i1": "b", "u2": "H", "i2": "h", "u4": "I", "i4": "i", "u8": "Q", "i8": "q",
    "f2": "e", "f4": "f", "f8": "d", "c8": "ff", "c16": "dd",
}


def _product(shape):
    count = 1
    for dimension in shape:
        count *= dimension
    return count


class NdArray(object):
    """An n-dimensional array read from .npy bytes: its dtype, shape and raw C-order item bytes."""

    def __init__(self, descr, shape, raw):
        self.descr = descr
        self.shape = tuple(shape)
        self.raw = raw

    def flat(self):
        order = ">" if self.descr[0] == ">" else "<"
        item = NPY_FORMATS[self.descr[1:]]
        values = struct.unpack("%s%d%s" % (order, _product(self.shape) * len(item), item[0]), self.raw)
        if len(item) == 2:
            # A complex number as [real, imaginary], as RuntimeEncoder writes a Python complex.
            return [[values[i], values[i + 1]] for i in range(0, len(values), 2)]
        return list(values)

    def tolist(self):
        return _nest(self.flat(), self.shape)


def _nest(values, shape):
    if not shape:
        return values[0]
    if len(shape) == 1:
        return list(values)
    step = _product(shape[1:])
    return [_nest(values[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def _fortran_to_c(raw, shape, itemsize):
    """Item bytes of a Fortran-order array rearranged into C order."""
    count = _product(shape)
    result = bytearray(len(raw))
    strides = []
    stride = 1
    for dimension in shape:
        strides.append(stride)
        stride *= dimension
    for c_index in range(count):
        rest, f_index = c_index, 0
        for axis in range(len(shape) - 1, -1, -1):
            rest, position = divmod(rest, shape[axis])
            f_index += position * strides[axis]
        result[c_index * itemsize:(c_index + 1) * itemsize] = raw[f_index * itemsize:(f_index + 1) * itemsize]
    return bytes(result)


def parse_npy(data):
    """An NdArray of the bytes numpy.save writes: the magic, a version, a header dict (descr,
    fortran_order, shape) padded with spaces, then the items. Object arrays (pickles) are refused."""
    if data[:6] != b"\x93NUMPY":
        raise ShapeError("not .npy data (no \\x93NUMPY magic)")
    major = bytearray(data[6:7])[0] if len(data) > 7 else 0
    if major == 1:
        (length,), start = struct.unpack("<H", data[8:10]), 10
    elif major in (2, 3):
        (length,), start = struct.unpack("<I", data[8:12]), 12
    else:
        raise ShapeError("an .npy format version that numpy does not write")
    if length > 65536:
        raise ShapeError(".npy header longer than numpy writes")
    try:
        header = ast.literal_eval(data[start:start + length].decode("latin-1").strip())
    except (SyntaxError, ValueError):
        raise ShapeError(".npy header is not a Python literal")
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise ShapeError(".npy header is not a dictionary of descr, fortran_order and shape")
    descr, shape = header["descr"], header["shape"]
    if not isinstance(descr, str) or len(descr) < 3 or descr[0] not in "<>|=" or descr[1:] not in NPY_FORMATS:
        raise ShapeError(".npy dtype is not a number type Bridge reads")
    if not isinstance(shape, tuple) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise ShapeError(".npy shape is not a tuple of sizes")
    itemsize = struct.calcsize("<" + NPY_FORMATS[descr[1:]])
    raw = data[start + length:]
    if len(raw) != itemsize * _product(shape):
        raise ShapeError(".npy data is not of the size its header says")
    if header["fortran_order"] and len(shape) > 1:
        raw = _fortran_to_c(raw, shape, itemsize)
    return NdArray(descr, shape, raw)


def _inflate(data):
    inflater = zlib.decompressobj()
    try:
        inflated = inflater.decompress(data, MAX_DECODED_BYTES)
    except zlib.error as exc:
        raise ShapeError("not zlib data: %s" % exc)
    if inflater.unconsumed_tail:
        raise ShapeError("unpacks to more than %d bytes" % MAX_DECODED_BYTES)
    return inflated


def decode_ndarray(value):
    """An NdArray of RuntimeEncoder's ndarray value: base64(zlib(numpy.save bytes))."""
    try:
        packed = base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ShapeError("ndarray value is not base64: %s" % exc)
    try:
        return parse_npy(_inflate(packed))
    except struct.error as exc:
        raise ShapeError("truncated .npy data: %s" % exc)


# ---------------------------------------------------------------- results (pure)

class BitArrayValue(object):
    """A sampler register: the shots' packed bits (uint8, last axis big-endian bytes) and their count."""

    def __init__(self, array, num_bits):
        if not isinstance(array, NdArray) or array.descr[1:] != "u1" or len(array.shape) < 2:
            raise ShapeError("a BitArray's array must be a uint8 ndarray of shape (..., shots, bytes)")
        if not isinstance(num_bits, int) or isinstance(num_bits, bool) or num_bits < 0 or \
                array.shape[-1] != (num_bits + 7) // 8:
            raise ShapeError("a BitArray's num_bits does not fit its bytes a shot")
        self.array = array
        self.num_bits = num_bits

    def integers(self):
        size = self.array.shape[-1]
        raw = self.array.raw
        mask = (1 << self.num_bits) - 1
        return [int(binascii.hexlify(raw[i:i + size]) or b"0", 16) & mask for i in range(0, len(raw), size)]


def _counts(bitstrings):
    counts = {}
    for text in bitstrings:
        counts[text] = counts.get(text, 0) + 1
    return dict(sorted(counts.items()))


def register_summary(values, num_bits, shape, max_bitstrings):
    """A classical register's outcomes as plain data: counts of each bitstring (clbit 0 last, as
    qiskit prints them) over all shots, the shots of one binding, and the bitstrings themselves when
    there are at most max_bitstrings of them. A PUB that binds several parameter values (shape not
    empty) also gets the counts of each binding, in C order of that shape, as qiskit's
    BitArray.get_counts(loc) gives them."""
    width = "0%db" % num_bits
    bitstrings = [format(value, width) if num_bits else "" for value in values]
    shots = shape[-1] if shape else len(values)
    summary = {"num_bits": num_bits, "shape": list(shape[:-1]), "shots": shots, "counts": _counts(bitstrings)}
    if len(shape) > 1:
        summary["binding_counts"] = [_counts(bitstrings[start:start + shots])
                                     for start in range(0, len(bitstrings), shots or 1)]
    if len(bitstrings) <= max_bitstrings:
        summary["bitstrings"] = bitstrings
    return summary


def _hex_samples(samples):
    """(values, shape) of the plain format's hex samples, nested one list level per PUB axis."""
    shape, level = [], samples
    while isinstance(level, list):
        shape.append(len(level))
        level = level[0] if level else None
    flat = []

    def walk(item):
        if isinstance(item, list):
            for inner in item:
                walk(inner)
        elif isinstance(item, str):
            flat.append(int(item, 16))
        else:
            raise ShapeError("a sample must be a hex string such as 0x3, got %s" % type(item).__name__)

    walk(samples)
    return flat, shape


def _runtime_tag(obj):
    """json.loads object_hook: a RuntimeEncoder {"__type__", "__value__"} as plain data, arrays as
    NdArray and registers as BitArrayValue until _plain turns them into lists and summaries."""
    kind, value = obj.get("__type__"), obj.get("__value__")
    if kind is None or "__value__" not in obj:
        return obj
    if kind == "ndarray":
        # A list or number is an object array sent as its tolist(); an extrapolator name (an
        # estimator option) is passed through as RuntimeDecoder does.
        if not isinstance(value, str) or EXTRAPOLATOR.match(value):
            return value
        return decode_ndarray(value)
    if kind == "BitArray":
        return BitArrayValue(value["array"], value["num_bits"])
    if kind == "DataBin":
        if not isinstance(value.get("fields"), dict):
            raise ShapeError("a DataBin needs its fields")
        return dict(value["fields"])
    if kind in ("SamplerPubResult", "PubResult", "EstimatorPubResult"):
        return {"data": value["data"], "metadata": value.get("metadata")}
    if kind == "PrimitiveResult":
        if not isinstance(value.get("pub_results"), list):
            raise ShapeError("a PrimitiveResult needs pub_results")
        return {"pub_results": value["pub_results"], "metadata": value.get("metadata")}
    if kind == "complex":
        return list(value)
    if kind == "set":
        return sorted(value, key=str)
    return value


def _plain(value, max_bitstrings):
    if isinstance(value, NdArray):
        return value.tolist()
    if isinstance(value, BitArrayValue):
        return register_summary(value.integers(), value.num_bits, value.array.shape[:-1], max_bitstrings)
    if isinstance(value, dict):
        return dict((key, _plain(item, max_bitstrings)) for key, item in value.items())
    if isinstance(value, list):
        return [_plain(item, max_bitstrings) for item in value]
    return value


def _plain_data(data, max_bitstrings):
    """The plain format's PUB data: registers as {"samples": [hex], "num_bits"}, estimator values as they are."""
    if not isinstance(data, dict):
        raise ShapeError("a result's data must be an object")
    result = {}
    for name, field in data.items():
        if isinstance(field, dict) and "samples" in field:
            values, shape = _hex_samples(field["samples"])
            num_bits = field.get("num_bits")
            if not isinstance(num_bits, int) or isinstance(num_bits, bool):
                raise ShapeError("a register has no num_bits")
            result[name] = register_summary(values, num_bits, shape, max_bitstrings)
        else:
            result[name] = field
    return result


def decode_results(text, max_bitstrings=DEFAULT_MAX_BITSTRINGS):
    """GET /jobs/{id}/results as plain data: {"format", "pubs": [{"data", "metadata"}], "metadata"}.

    Reads both encodings: qiskit's (RuntimeEncoder tags: PrimitiveResult, DataBin, BitArray, ndarray
    as base64(zlib(.npy))) and the plain JSON the service sends without support_qiskit (registers as
    hex samples). Sampler registers become counts, estimator values lists of floats.
    """
    body = json.loads(text, object_hook=_runtime_tag)
    if isinstance(body, dict) and "pub_results" in body:
        pubs = []
        for pub in body["pub_results"]:
            if not isinstance(pub, dict):
                raise ShapeError("a PUB result must be an object, got %s" % type(pub).__name__)
            pubs.append({"data": _plain(pub["data"], max_bitstrings),
                         "metadata": _plain(pub.get("metadata"), max_bitstrings)})
        return {"format": "qiskit", "pubs": pubs, "metadata": _plain(body.get("metadata"), max_bitstrings)}
    if isinstance(body, dict) and isinstance(body.get("results"), list):
        pubs = []
        for pub in body["results"]:
            if not isinstance(pub, dict):
                raise ShapeError("a PUB result must be an object, got %s" % type(pub).__name__)
            pubs.append({"data": _plain_data(pub.get("data"), max_bitstrings), "metadata": pub.get("metadata")})
        return {"format": "json", "pubs": pubs, "metadata": body.get("metadata")}
    raise ShapeError("neither a PrimitiveResult nor a results list")


# Bounds of a results summary, which a BridgeJob's status holds: a status stays small.
SUMMARY_PUBS = 16
SUMMARY_OUTCOMES = 16
SUMMARY_VALUES = 64
SUMMARY_REGISTERS = 16


def _flat(value):
    if isinstance(value, list):
        return [number for item in value for number in _flat(item)]
    return [value]


def _shape(value):
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        value = value[0] if value else None
    return shape


def summarize_results(results, outcomes=SUMMARY_OUTCOMES, pubs=SUMMARY_PUBS, values=SUMMARY_VALUES):
    """A bounded summary of decode_results' plain data, per PUB: each sampler register's shots and
    its `outcomes` most frequent bitstrings with their counts (ties by bitstring), or an estimator's
    expectation values and standard deviations, flattened in C order, with their shape. `truncated`
    says whether anything was left out (PUBs past `pubs`, registers, outcomes, values past `values`)."""
    summary, truncated = [], len(results["pubs"]) > pubs
    for pub in results["pubs"][:pubs]:
        data = pub.get("data") or {}
        entry = {}
        registers = sorted((name, field) for name, field in data.items() if isinstance(field, dict) and "counts" in field)
        truncated = truncated or len(registers) > SUMMARY_REGISTERS
        if registers:
            entry["registers"] = {}
            for name, field in registers[:SUMMARY_REGISTERS]:
                ranked = sorted(field["counts"].items(), key=lambda item: (-item[1], item[0]))
                truncated = truncated or len(ranked) > outcomes
                entry["registers"][name] = {"shots": field["shots"], "outcomes": len(ranked),
                                            "counts": dict(ranked[:outcomes])}
        for name in ("evs", "stds"):
            if name in data:
                flat = _flat(data[name])
                truncated = truncated or len(flat) > values
                entry[name] = flat[:values]
                entry["shape"] = _shape(data[name])
        summary.append(entry)
    return {"pubs": summary, "truncated": truncated}
