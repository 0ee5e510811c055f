"""Resumed transfers against the real services, and what 64 MiB costs over each path.

S3: a multipart upload stopped after 3 of 8 parts (the module's test hook) resumes with the 5
missing parts; a ranged download stopped after 2 ranges resumes into its .part file. SSH: a file
whose first part is already on the login node (what rsync --partial leaves after an interrupted
transfer) is completed by rsync sending only the rest. The durations printed are measured, never
asserted."""

import hashlib
import os
import time

import pytest

from stage_support import (bucket, require_login_node, require_s3_server, run_json, s3_client, ssh,  # noqa: F401
                           stage_once, task_results, write_inventory)

MIB = 1024 * 1024
SIZE = 64 * MIB
TRANSFER_TASKS = {"rsync": "Copy to the cluster with rsync (checksums, resumable)",
                  "copy": "Copy to the cluster with copy (checksums)"}


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "big.bin"
    path.write_bytes(os.urandom(SIZE))
    return str(path)


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(MIB), b""):
            digest.update(chunk)
    return digest.hexdigest()


def s3_module(s3, stop_after=None, **args):
    env = dict(s3)
    if stop_after is not None:
        env["BRIDGE_S3_STOP_AFTER_PARTS"] = str(stop_after)
    done, output = run_json(["ansible", "localhost", "-m", "bridge.hpc.s3_object_sync", "-a",
                             " ".join("%s=%s" % item for item in args.items())], env)
    result = output["plays"][0]["tasks"][0]["hosts"]["localhost"]
    took = task_results(output, "bridge.hpc.s3_object_sync")[0][1] if output else None
    return result, took


def test_s3_multipart_upload_and_ranged_download_resume(big_file, bucket, tmp_path):  # noqa: F811
    s3 = require_s3_server()
    client = s3_client(s3)
    stopped, _ = s3_module(s3, stop_after=3, direction="upload", bucket=bucket, key="big.bin", path=big_file)
    assert stopped.get("failed") and "BRIDGE_S3_STOP_AFTER_PARTS" in stopped["msg"]
    uploads = client.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert len(uploads) == 1
    assert len(client.list_parts(Bucket=bucket, Key="big.bin", UploadId=uploads[0]["UploadId"])["Parts"]) == 3

    resumed, took = s3_module(s3, direction="upload", bucket=bucket, key="big.bin", path=big_file)
    entry = resumed["files"][0]
    assert resumed["changed"] and (entry["parts_reused"], entry["parts_sent"]) == (3, 5)
    assert entry["bytes_sent"] == 40 * MIB and entry["resumed_bytes"] == 24 * MIB
    assert not client.list_multipart_uploads(Bucket=bucket).get("Uploads")
    assert client.head_object(Bucket=bucket, Key="big.bin")["Metadata"]["sha256"] == sha256_of(big_file)
    again, _ = s3_module(s3, direction="upload", bucket=bucket, key="big.bin", path=big_file)
    assert not again["changed"] and again["bytes_transferred"] == 0

    fresh, upload_took = s3_module(s3, direction="upload", bucket=bucket, key="fresh.bin", path=big_file)
    assert fresh["files"][0]["parts_sent"] == 8

    target = str(tmp_path / "back.bin")
    stopped, _ = s3_module(s3, stop_after=2, direction="download", bucket=bucket, key="big.bin", path=target)
    assert stopped.get("failed") and not os.path.exists(target)
    partial = [name for name in os.listdir(str(tmp_path)) if name.endswith(".part")]
    assert len(partial) == 1 and os.path.getsize(str(tmp_path / partial[0])) == 16 * MIB
    resumed, _ = s3_module(s3, direction="download", bucket=bucket, key="big.bin", path=target)
    assert resumed["files"][0]["resumed_bytes"] == 16 * MIB and resumed["bytes_transferred"] == 48 * MIB
    assert sha256_of(target) == sha256_of(big_file) and not [n for n in os.listdir(str(tmp_path)) if n.endswith(".part")]
    fresh_target = str(tmp_path / "fresh.bin")
    _, download_took = s3_module(s3, direction="download", bucket=bucket, key="fresh.bin", path=fresh_target)
    print("\nS3 64 MiB: multipart upload %.2f s (%.0f MiB/s), resumed upload sent 40 of 64 MiB in %.2f s, "
          "download %.2f s (%.0f MiB/s)" % (upload_took, 64 / upload_took, took, download_took, 64 / download_took))


@pytest.fixture
def login_dir(tmp_path):
    login = require_login_node()
    remote = "/home/%s/stage-resume-%s" % (login["BRIDGE_SSH_USER"], os.path.basename(str(tmp_path)))
    ssh(login, "mkdir -p %s" % remote)
    yield login, remote
    ssh(login, "rm -rf %s" % remote)


def test_rsync_resumes_a_partial_file_and_what_64_mib_cost(big_file, login_dir, tmp_path):
    login, remote = login_dir
    inventory = write_inventory(tmp_path, login)
    with open(big_file, "rb") as handle:
        ssh(login, "cat > %s/partial.bin" % remote, stdin=handle.read(24 * MIB))
    started = time.monotonic()
    done, result, durations = stage_once(inventory, {"login": "login", "stage_method": "rsync", "stage_in": [
        {"src": big_file, "dest": remote + "/partial.bin"}]}, None, tmp_path)
    assert done.returncode == 0, done.stdout[-5000:]
    entry = result["in"][0]
    assert entry["changed"] and entry["sha256"] == sha256_of(big_file)
    assert 0 < entry["bytes_transferred"] < 44 * MIB, entry
    assert ssh(login, "sha256sum %s/partial.bin" % remote).stdout.split()[0].decode() == entry["sha256"]
    resume_took = durations[TRANSFER_TASKS["rsync"]]

    took = {}
    for method in ("rsync", "copy"):
        done, result, durations = stage_once(inventory, {"login": "login", "stage_method": method, "stage_in": [
            {"src": big_file, "dest": "%s/%s.bin" % (remote, method)}]}, None, tmp_path)
        assert done.returncode == 0, done.stdout[-5000:]
        assert result["in"][0]["changed"]
        took[method] = durations[TRANSFER_TASKS[method]]
    print("\nSSH 64 MiB: rsync %.2f s (%.0f MiB/s), copy %.2f s (%.0f MiB/s); resuming after 24 MiB sent %.1f MiB "
          "in %.2f s; whole role run %.1f s" % (took["rsync"], 64 / took["rsync"], took["copy"], 64 / took["copy"],
                                                entry["bytes_transferred"] / MIB, resume_took,
                                                time.monotonic() - started))
