# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a Slurm or LSF batch job writes its stdout and stderr, and their tails. Internal to this
collection.

The paths come from the normalized job (bridge.hpc.slurm_job_info, lsf_job_info): Slurm 22.05's
REST v0.0.38 returns the patterns as submitted (`out-%j.txt`, relative or empty), 23.02 and later
return them expanded; LSF keeps `%J` and `%I`. Expanding an expanded path changes nothing unless it
holds a literal `%` or backslash.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import re

from ansible_collections.bridge.hpc.plugins.module_utils._errors import NotFound, Rejected, SpecError

DEFAULT_TAIL_BYTES = 65536
# Slurm's stepd names the batch script's step "batch" (%s), and the batch script is task 0 on
# node 0 (%t, %n): what Slurm's own expand_stdio_fields (src/common/...) prints for a batch job.
BATCH_STEP = "batch"
SLURM_NUMERIC = "AabJjnt"
SLURM_WILDCARDS = SLURM_NUMERIC + "Nsux"


def _number(value):
    """An integer from REST v0.0.38 (plain) or v0.0.40+ ({set, infinite, number}); None when unset."""
    if isinstance(value, dict):
        return value.get("number") if value.get("set") else None
    return value


def first_node(nodes):
    """The first host of a Slurm host list: "n[01-04,07],m1" -> "n01"."""
    if not nodes:
        return ""
    match = re.match(r"^([^,\[]*)(?:\[([^\]\-,]*))?", nodes)
    return match.group(1) + (match.group(2) or "")


def slurm_fields(job):
    """The values of Slurm's filename patterns for a normalized job (native payload optional)."""
    native = job.get("native") or {}
    array_job = _number(native.get("array_job_id")) or 0
    array_task = _number(native.get("array_task_id"))
    return {
        "A": int(array_job) or int(job["job_id"]),
        "a": int(array_task) if array_task is not None else 0,
        "b": (int(array_task) if array_task is not None else 0) % 10,
        "J": int(job["job_id"]),
        "j": int(job["job_id"]),
        "n": 0,
        "t": 0,
        "N": first_node(job.get("nodes")),
        "s": BATCH_STEP,
        "u": job.get("user") or "",
        "x": job.get("name") or "",
        "array": array_task is not None,
    }


def expand_slurm(pattern, fields, working_directory):
    """A Slurm filename pattern expanded as slurmctld expands it for a batch job (sbatch(1),
    "filename pattern"): %% is "%", a number after % zero-pads a numeric field (at most 10), an
    unknown letter is kept with its %, and a backslash anywhere turns all expansion off (the
    backslashes are dropped). A relative path is relative to the job's working directory."""
    if "\\" in pattern:
        expanded = pattern.replace("\\", "")
    else:
        expanded = _expand_slurm_fields(pattern, fields)
    if not expanded.startswith("/"):
        expanded = os.path.join(working_directory or "/", expanded)
    return expanded


def _expand_slurm_fields(pattern, fields):
    out = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char != "%":
            out.append(char)
            i += 1
            continue
        i += 1
        if i == n:
            # Slurm drops a lone % at the end.
            break
        if pattern[i] == "%":
            out.append("%")
            i += 1
            continue
        match = re.match(r"\d+", pattern[i:])
        if match:
            digits = match.group(0)
            width = int(digits)
            # Slurm reads one digit of padding, or all of them when they make more than 9 (capped
            # at 10); padding not followed by a field letter prints only the last digit.
            after = i + len(digits) if width > 9 else i + 1
            if after < n and pattern[after] in SLURM_WILDCARDS:
                out.append(_field(fields, pattern[after], min(width, 10)))
                i = after + 1
            else:
                out.append(digits[-1])
                i += len(digits)
            continue
        if pattern[i] in SLURM_WILDCARDS:
            out.append(_field(fields, pattern[i], 0))
        else:
            out.append("%" + pattern[i])
        i += 1
    return "".join(out)


def _field(fields, letter, width):
    value = fields[letter]
    if letter in SLURM_NUMERIC:
        return "%0*d" % (width, value)
    return value


def slurm_output_paths(job):
    """{"stdout": path, "stderr": path} of a Slurm batch job. Without --output Slurm writes
    slurm-%j.out (slurm-%A_%a.out for an array task) in the working directory; without --error
    stderr goes where stdout goes."""
    fields = slurm_fields(job)
    stdout = job.get("stdout") or ("slurm-%A_%a.out" if fields["array"] else "slurm-%j.out")
    stderr = job.get("stderr") or stdout
    cwd = job.get("working_directory")
    return {"stdout": expand_slurm(stdout, fields, cwd), "stderr": expand_slurm(stderr, fields, cwd)}


def lsf_output_paths(job):
    """{"stdout": path, "stderr": path} of an LSF job: %J is the job id, %I the array index (0 for
    a job that is not an array element: bsub(1) -o); relative paths are relative to the job's cwd;
    without -e stderr goes with stdout. LSF mails the output of a job without -o: no path then."""
    native = job.get("native") or {}
    match = re.match(r"^(\d+)(?:\[(\d+)\])?$", str(job["job_id"]))
    if not match:
        raise SpecError("job.job_id", "'%s' is not an LSF job id (digits, or digits[index])" % job["job_id"])
    job_id, index = match.group(1), match.group(2) or "0"
    stdout = job.get("stdout") or native.get("outfile") or ""
    stderr = job.get("stderr") or native.get("errfile") or stdout
    cwd = job.get("working_directory") or native.get("cwd") or "/"

    def expand(pattern):
        if not pattern:
            return None
        path = pattern.replace("%J", job_id).replace("%I", index)
        return path if path.startswith("/") else os.path.join(cwd, path)

    return {"stdout": expand(stdout), "stderr": expand(stderr)}


OUTPUT_PATHS = {"slurm": slurm_output_paths, "lsf": lsf_output_paths}


def output_paths(backend, job, path_prefix=""):
    if not isinstance(job, dict) or not job.get("job_id"):
        raise SpecError("job", "must be a job as bridge.hpc.slurm_job_info or lsf_job_info return it (with job_id)")
    paths = OUTPUT_PATHS[backend](job)
    if path_prefix:
        paths = dict((k, None if p is None else path_prefix.rstrip("/") + p) for k, p in paths.items())
    return paths


def tail(path, tail_bytes=None, tail_lines=None):
    """The end of a file: its last `tail_bytes` bytes (DEFAULT_TAIL_BYTES when neither limit is
    given), then of those its last `tail_lines` lines, decoded as UTF-8 with replacement. A file that
    does not exist yet (a queued job) is empty and says so."""
    if tail_bytes is None and tail_lines is None:
        tail_bytes = DEFAULT_TAIL_BYTES
    result = {"path": path, "exists": False, "size": 0, "text": "", "truncated": False}
    if path is None:
        return result
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            start = max(0, size - tail_bytes) if tail_bytes is not None else 0
            handle.seek(start)
            data = handle.read(size - start)
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT:
            return result
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise Rejected("permission denied", "read", "job output", path)
        if exc.errno == errno.EISDIR:
            raise SpecError("job.stdout", "'%s' is a directory" % path)
        raise NotFound(str(exc), "read", "job output", path)
    truncated = start > 0
    if truncated:
        # Start at a character, not inside one: drop UTF-8 continuation bytes at the cut.
        cut = 0
        while cut < min(3, len(data)) and 0x80 <= bytearray(data[cut:cut + 1])[0] < 0xC0:
            cut += 1
        data = data[cut:]
    if tail_lines is not None:
        lines = data.splitlines(True)
        if len(lines) > tail_lines:
            data = b"".join(lines[len(lines) - tail_lines:]) if tail_lines else b""
            truncated = True
    result.update(exists=True, size=size, text=data.decode("utf-8", "replace"), truncated=truncated)
    return result


def read_output(backend, job, path_prefix="", tail_bytes=None, tail_lines=None):
    for name, value in (("tail_bytes", tail_bytes), ("tail_lines", tail_lines)):
        if value is not None and value < 0:
            raise SpecError(name, "must be 0 or more, got %d" % value)
    paths = output_paths(backend, job, path_prefix)
    # Not "stdout"/"stderr": Ansible takes those result keys for a command's text (stdout_lines).
    result = {"changed": False, "stdout_file": tail(paths["stdout"], tail_bytes, tail_lines)}
    if paths["stderr"] == paths["stdout"]:
        result["stderr_file"] = dict(result["stdout_file"], same_as_stdout=True)
    else:
        result["stderr_file"] = dict(tail(paths["stderr"], tail_bytes, tail_lines), same_as_stdout=False)
    return result
