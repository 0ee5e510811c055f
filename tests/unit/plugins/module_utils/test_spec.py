"""The backend-neutral spec: parsing, validation, identity."""

import re

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._spec import (
    IDENTITY_PATTERN,
    derive_identity,
    format_minutes,
    normalize_spec,
    parse_memory,
    parse_time_limit,
)

SCRIPT = "#!/bin/bash\necho hi\n"


@pytest.mark.parametrize("value, minutes", [
    (90, 90), ("90", 90), ("05:30", 6), ("00:00:59", 1), ("01:00:00", 60), ("1-00:00:00", 1440),
    ("2-3", 3060), ("2-03:04", 3064), ("2-03:04:05", 3065), (" 10 ", 10),
])
def test_time_limits_follow_slurm_syntax(value, minutes):
    assert parse_time_limit(value) == minutes


@pytest.mark.parametrize("value", ["1:99", "10:00:61", "abc", "1h", "-5", 0, -3, True, "0", "1-24:00:00", "00:00:00"])
def test_malformed_time_limits_name_the_field(value):
    with pytest.raises(SpecError) as err:
        parse_time_limit(value)
    assert err.value.field == "resources.time_limit"


@pytest.mark.parametrize("value, mib", [
    ("4G", 4096), ("4g", 4096), ("512M", 512), ("1.5GiB", 1536), (2048, 2048), ("1T", 1048576), ("100K", 1), ("4GB", 4096),
])
def test_memory_units(value, mib):
    assert parse_memory(value) == mib


@pytest.mark.parametrize("value", ["4X", "G4", "-1G", "0", "four"])
def test_bad_memory(value):
    with pytest.raises(SpecError):
        parse_memory(value)


def test_format_minutes():
    assert format_minutes(30) == "00:30:00"
    assert format_minutes(1440) == "1-00:00:00"
    assert format_minutes(None) == "UNLIMITED"


def test_identity_is_deterministic_and_follows_content():
    first = normalize_spec({"script": SCRIPT, "name": "a"})
    again = normalize_spec({"script": SCRIPT, "name": "a"})
    other = normalize_spec({"script": SCRIPT + "echo more\n", "name": "a"})
    assert first["identity"] == again["identity"]
    assert first["identity"] != other["identity"]
    assert first["identity"].startswith("a-")


def test_explicit_identity_wins_and_name_defaults_from_it():
    spec = normalize_spec({"script": SCRIPT, "identity": "run-42"})
    assert spec["identity"] == "run-42"
    assert spec["name"] == "run-42"


def test_identity_of_odd_names_is_still_a_valid_identity():
    spec = normalize_spec({"script": SCRIPT, "name": "über/job"})
    assert re.match(r"^ber-job-[0-9a-f]{16}$", spec["identity"]) and derive_identity(spec) == spec["identity"]
    assert IDENTITY_PATTERN.match(spec["identity"])


@pytest.mark.parametrize("params, field", [
    ({}, "script"),
    ({"script": "echo no shebang"}, "script"),
    ({"script": SCRIPT, "name": "has space"}, "name"),
    ({"script": SCRIPT, "identity": "bad id"}, "identity"),
    ({"script": SCRIPT, "environment": {"1X": "y"}}, "environment"),
    ({"script": SCRIPT, "environment": {"X": {"a": 1}}}, "environment.X"),
    ({"script": SCRIPT, "resources": {"nodes": 0}}, "resources.nodes"),
    ({"script": SCRIPT, "resources": {"cores": 2}}, "resources"),
    ({"script": SCRIPT, "resources": {"gpu_type": "a100"}}, "resources.gpu_type"),
    ({"script": SCRIPT, "resources": {"memory": "1G", "memory_per_cpu": "1G"}}, "resources.memory"),
    ({"script": SCRIPT, "backend_options": {"pbs": {}}}, "backend_options"),
    ({"script": SCRIPT, "backend_options": {"slurm": "x"}}, "backend_options.slurm"),
])
def test_bad_specs_name_the_field(params, field):
    with pytest.raises(SpecError) as err:
        normalize_spec(params)
    assert err.value.field == field
    assert field in str(err.value)


def test_environment_values_become_text():
    spec = normalize_spec({"script": SCRIPT, "environment": {"N": 3, "B": True}})
    assert spec["environment"] == {"B": "true", "N": "3"}
