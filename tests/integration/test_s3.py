"""The S3 server of tools/s3.sh (versitygw over a POSIX dir), driven by boto3 as the staging role
drives it: TLS verified against the script's CA, checksums, multipart uploads, S3's error codes; the
script's own start/status/stop on a second instance in a run dir of its own."""

import base64
import hashlib
import os
import stat
import subprocess
import uuid

import pytest

from conftest import REPO, private_service, read_env_file, require_s3

boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402  (after the importorskip of boto3)
from botocore.exceptions import ClientError, ConnectionClosedError, SSLError  # noqa: E402

S3 = os.path.join(REPO, "tools", "s3.sh")
# A port of its own for the second instance: main's server stays on 7070.
PRIVATE_PORT = "7071"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def server():
    return require_s3()


def client(env, endpoint=None, verify=None, **credentials):
    """A boto3 client from the env file's values alone; `verify` None means the env's CA bundle.
    One attempt: an error must surface as the server's answer, not after retries."""
    return boto3.client(
        "s3", endpoint_url=endpoint or env["BRIDGE_S3_ENDPOINT"], region_name=env["AWS_DEFAULT_REGION"],
        aws_access_key_id=credentials.get("access_key", env["AWS_ACCESS_KEY_ID"]),
        aws_secret_access_key=credentials.get("secret_key", env["AWS_SECRET_ACCESS_KEY"]),
        verify=env["AWS_CA_BUNDLE"] if verify is None else verify,
        config=Config(retries={"max_attempts": 1}))


@pytest.fixture()
def bucket(server):
    s3 = client(server)
    name = "bridge-test-%s" % uuid.uuid4().hex[:8]
    s3.create_bucket(Bucket=name)
    yield name
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
        for item in page.get("Contents", []):
            s3.delete_object(Bucket=name, Key=item["Key"])
    s3.delete_bucket(Bucket=name)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def test_put_get_round_trip_with_sha256_checksum(server, bucket):
    s3 = client(server)
    body = os.urandom(64 * 1024)
    digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
    put = s3.put_object(Bucket=bucket, Key="inputs/data.bin", Body=body, ChecksumAlgorithm="SHA256")
    assert put["ChecksumSHA256"] == digest
    got = s3.get_object(Bucket=bucket, Key="inputs/data.bin", ChecksumMode="ENABLED")
    assert got["ChecksumSHA256"] == digest
    assert sha256(got["Body"].read()) == sha256(body)
    # The POSIX backend keeps the object as a plain file, where a job on the cluster can read it.
    with open(os.path.join(server["BRIDGE_S3_DATA"], bucket, "inputs", "data.bin"), "rb") as handle:
        assert sha256(handle.read()) == sha256(body)


def test_multipart_upload_over_5_mib(server, bucket):
    s3 = client(server)
    parts = [os.urandom(5 * MIB), os.urandom(MIB + 17)]
    upload = s3.create_multipart_upload(Bucket=bucket, Key="big.bin")
    done = []
    for number, data in enumerate(parts, start=1):
        part = s3.upload_part(Bucket=bucket, Key="big.bin", UploadId=upload["UploadId"], PartNumber=number, Body=data)
        done.append({"ETag": part["ETag"], "PartNumber": number})
    s3.complete_multipart_upload(Bucket=bucket, Key="big.bin", UploadId=upload["UploadId"],
                                 MultipartUpload={"Parts": done})
    head = s3.head_object(Bucket=bucket, Key="big.bin")
    assert head["ContentLength"] == sum(len(p) for p in parts)
    assert head["ETag"].strip('"').endswith("-2")
    assert sha256(s3.get_object(Bucket=bucket, Key="big.bin")["Body"].read()) == sha256(b"".join(parts))


def test_list_by_prefix(server, bucket):
    s3 = client(server)
    for key in ("run/1/out.txt", "run/2/out.txt", "other.txt"):
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="run/")
    assert [item["Key"] for item in listed["Contents"]] == ["run/1/out.txt", "run/2/out.txt"]
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]].count(bucket) == 1


def error_code(call):
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value.response["Error"]["Code"]


def test_missing_bucket_answers_no_such_bucket(server):
    assert error_code(lambda: client(server).list_objects_v2(Bucket="bridge-no-such-bucket")) == "NoSuchBucket"


def test_wrong_secret_answers_signature_does_not_match(server):
    s3 = client(server, secret_key="0" * 40)
    assert error_code(s3.list_buckets) == "SignatureDoesNotMatch"


def test_unknown_access_key_answers_invalid_access_key_id(server):
    s3 = client(server, access_key="AKIABRIDGEUNKNOWN000")
    assert error_code(s3.list_buckets) == "InvalidAccessKeyId"


def test_tls_without_the_ca_is_refused_by_the_client(server, monkeypatch):
    # Without the env's CA bundle, botocore verifies against its default CAs, which never signed ours.
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    with pytest.raises(SSLError, match="CERTIFICATE_VERIFY_FAILED"):
        client(server, verify=True).list_buckets()


def test_plain_http_gets_no_answer(server):
    with pytest.raises(ConnectionClosedError):
        client(server, endpoint=server["BRIDGE_S3_ENDPOINT"].replace("https://", "http://", 1)).list_buckets()


def test_script_start_is_idempotent_and_stop_ends_it():
    settings = {"BRIDGE_S3_PORT": PRIVATE_PORT}
    with private_service("s3.sh", "s3", settings) as env_file:
        run_dir = os.path.dirname(env_file)
        run_env = dict(os.environ, BRIDGE_RUN=os.path.dirname(run_dir), **settings)
        values = read_env_file(env_file)
        assert values["BRIDGE_S3_ENDPOINT"] == "https://127.0.0.1:%s" % PRIVATE_PORT
        for secret in (env_file, os.path.join(run_dir, "secret_key")):
            assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
        with open(os.path.join(run_dir, "pids", "versitygw.pid")) as handle:
            recorded = handle.read()
        # The secret reaches versitygw in its environment, never on its command line.
        with open("/proc/%s/cmdline" % recorded.split()[0], "rb") as handle:
            assert values["AWS_SECRET_ACCESS_KEY"].encode() not in handle.read()

        again = subprocess.run([S3, "start"], env=run_env, capture_output=True, text=True, check=False)
        assert again.returncode == 0, again.stderr
        assert "already running" in again.stderr and "up to date" in again.stderr
        with open(os.path.join(run_dir, "pids", "versitygw.pid")) as handle:
            assert handle.read() == recorded
        assert client(values).list_buckets()["Buckets"] == []

        status = subprocess.run([S3, "status"], env=run_env, capture_output=True, text=True, check=True)
        assert status.stdout.strip() == "running https://127.0.0.1:%s" % PRIVATE_PORT
        subprocess.run([S3, "stop"], env=run_env, check=True)
        status = subprocess.run([S3, "status"], env=run_env, capture_output=True, text=True, check=True)
        assert status.stdout.strip() == "stopped https://127.0.0.1:%s" % PRIVATE_PORT
