"""The stage role against the real login node (tools/sshd.sh) and S3 server (tools/s3.sh): a round
trip with checksums for each stage_method, a second run that changes nothing, and bad input that
fails clearly and changes nothing."""

import os
import time
import uuid

import pytest

from conftest import RUN, read_env_file
from stage_support import bucket, recap, require_login_node, require_s3_server, run_playbook, ssh, write_inventory  # noqa: F401

RUN_ID = uuid.uuid4().hex[:8]


@pytest.fixture
def staging(tmp_path):
    login = require_login_node()
    s3 = require_s3_server()
    local = tmp_path / "local"
    (local / "in" / "tree" / "sub").mkdir(parents=True)
    (local / "in" / "data.bin").write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    (local / "in" / "tree" / "a.txt").write_text(u"caf\u00e9\n")
    (local / "in" / "tree" / "sub" / "b.txt").write_text("b\n")
    remote = "/home/%s/stage-it-%s-%s" % (login["BRIDGE_SSH_USER"], RUN_ID, uuid.uuid4().hex[:6])
    ssh(login, "mkdir -p %s" % remote)
    yield {"inventory": write_inventory(tmp_path, login), "local_dir": str(local), "remote_dir": remote, "s3": s3,
           "login": login}
    ssh(login, "rm -rf %s" % remote)


@pytest.mark.parametrize("method", ["rsync", "copy"])
def test_round_trip_then_nothing_to_do(staging, bucket, method, tmp_path):  # noqa: F811
    extra = {"login": "login", "local_dir": staging["local_dir"], "remote_dir": staging["remote_dir"],
             "bucket": bucket, "method": method}
    started = time.monotonic()
    first = run_playbook("stage_roundtrip.yml", staging["inventory"], extra, staging["s3"], tmp_path)
    took = time.monotonic() - started
    assert first.returncode == 0, first.stdout[-6000:]
    assert recap(first)["changed"] > 0
    started = time.monotonic()
    second = run_playbook("stage_roundtrip.yml", staging["inventory"], extra, staging["s3"], tmp_path)
    again = time.monotonic() - started
    assert second.returncode == 0, second.stdout[-6000:]
    assert recap(second)["changed"] == 0, second.stdout[-6000:]
    print("round trip (%s): first run %.1f s, second run %.1f s" % (method, took, again))


def test_bad_input_fails_clearly_and_changes_nothing(staging, bucket, tmp_path):  # noqa: F811
    wrong_secret = "wrong-%s" % uuid.uuid4().hex
    extra = {"login": "login", "local_dir": staging["local_dir"], "remote_dir": staging["remote_dir"],
             "bucket": bucket, "wrong_secret": wrong_secret}
    done = run_playbook("stage_errors.yml", staging["inventory"], extra, staging["s3"], tmp_path)
    assert done.returncode == 0, done.stdout[-8000:]
    assert recap(done)["changed"] == 0
    assert wrong_secret not in done.stdout + done.stderr
