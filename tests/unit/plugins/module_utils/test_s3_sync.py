"""The S3 module's planning: what is sent, which parts of an interrupted upload are kept, where a
partial download waits, and errors naming the field. S3 itself is stubbed here; the real server is
in tests/integration/test_stage_s3.py."""

import hashlib
import os

import botocore.exceptions
import pytest

from ansible_collections.bridge.hpc.plugins.module_utils import _s3_sync
from ansible_collections.bridge.hpc.plugins.module_utils._errors import AuthFailed, NotFound, SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._s3_sync import (
    MIB,
    check_writable,
    local_sources,
    local_targets,
    part_ranges,
    partial_download_path,
    plain_md5,
    plan_transfers,
    relative_key,
    reusable_parts,
)


def test_plan_sends_only_what_differs():
    local = {"a": {"size": 1, "sha256": "x"}, "b": {"size": 1, "sha256": "y"}, "c": {"size": 2, "sha256": "z"},
             "d": {"size": 3, "sha256": "w", "md5": "m"}}
    remote = {"a": {"size": 1, "sha256": "x"}, "b": {"size": 1, "sha256": "other"},
              "d": {"size": 3, "sha256": None, "md5": "m"}}
    assert plan_transfers(local, remote) == [("a", "unchanged"), ("b", "transfer"), ("c", "transfer"),
                                             ("d", "unchanged")]


def test_objects_without_any_digest_are_sent_again():
    assert plan_transfers({"a": {"size": 1, "sha256": "x"}}, {"a": {"size": 1, "sha256": None, "md5": None}}) == [
        ("a", "transfer")]


def test_plain_md5_only_for_single_part_etags():
    assert plain_md5('"%s"' % ("a" * 32)) == "a" * 32
    assert plain_md5('"%s-8"' % ("a" * 32)) is None


def test_part_ranges_cover_the_file():
    assert part_ranges(0, 8) == [(1, 0, 0)]
    assert part_ranges(20, 8) == [(1, 0, 8), (2, 8, 8), (3, 16, 4)]


def test_reusable_parts_are_the_same_bytes_of_the_same_size():
    ranges = part_ranges(20, 8)
    md5s = {(0, 8): "m1", (8, 8): "m2", (16, 4): "m3"}
    listed = [{"PartNumber": 1, "Size": 8, "ETag": '"m1"'}, {"PartNumber": 2, "Size": 8, "ETag": '"changed"'},
              {"PartNumber": 3, "Size": 5, "ETag": '"m3"'}]
    assert reusable_parts(ranges, listed, lambda offset, length: md5s[(offset, length)]) == {1}


@pytest.mark.parametrize("key", ["p/../etc/passwd", "p/", "p/./"])
def test_keys_that_escape_or_name_no_file_are_refused(key):
    with pytest.raises(SpecError) as caught:
        relative_key("p/", key)
    assert caught.value.field == "key"


def test_partial_download_is_per_object_version():
    one, other = partial_download_path("/d/big.bin", "etag1"), partial_download_path("/d/big.bin", "etag2")
    assert one.startswith("/d/.big.bin.") and one.endswith(".part") and one != other


def test_upload_sources_of_a_directory_and_a_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a").write_text("1")
    (tmp_path / "sub" / "b").write_text("22")
    assert sorted(local_sources(str(tmp_path), "pre")) == ["pre/a", "pre/sub/b"]
    assert list(local_sources(str(tmp_path / "a"), "pre/")) == ["pre/a"]
    assert local_sources(str(tmp_path / "a"), "x/y")["x/y"]["size"] == 1
    with pytest.raises(SpecError) as caught:
        local_sources(str(tmp_path / "missing"), "k")
    assert caught.value.field == "path"


def test_download_targets(tmp_path):
    assert local_targets(str(tmp_path), "p/", ["p/a", "p/s/b"]) == {"p/a": str(tmp_path / "a"),
                                                                  "p/s/b": str(tmp_path / "s" / "b")}
    assert local_targets(str(tmp_path), "p/a", ["p/a"]) == {"p/a": str(tmp_path / "a")}
    assert local_targets(str(tmp_path / "f"), "p/a", ["p/a"]) == {"p/a": str(tmp_path / "f")}


def test_a_file_in_the_way_is_an_error_naming_path(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(SpecError) as caught:
        check_writable(str(tmp_path / "file" / "x" / "y"))
    assert caught.value.field == "path" and "not a directory" in str(caught.value)
    check_writable(str(tmp_path / "new" / "dir" / "f"))


def client_error(code, status):
    return botocore.exceptions.ClientError({"Error": {"Code": code, "Message": "m"},
                                            "ResponseMetadata": {"HTTPStatusCode": status}}, "ListObjectsV2")


class FakeS3(object):
    """An in-memory bucket with multipart uploads: enough to follow the module's requests."""

    def __init__(self, fail=None):
        self.objects, self.uploads, self.calls, self.fail = {}, {}, [], fail

    def __getattr__(self, name):
        def call(**kwargs):
            self.calls.append(name)
            if self.fail:
                raise self.fail
            return getattr(self, "_" + name)(**kwargs)
        return call

    def _list_objects_v2(self, Bucket, Prefix):
        return {"Contents": [{"Key": k, "Size": len(v["body"]), "ETag": '"%s"' % hashlib.md5(v["body"]).hexdigest()}
                             for k, v in self.objects.items() if k.startswith(Prefix)]}

    def _head_object(self, Bucket, Key):
        return {"Metadata": dict(self.objects[Key]["meta"])}

    def _list_multipart_uploads(self, Bucket, Prefix):
        return {"Uploads": [{"Key": u["key"], "UploadId": i, "Initiated": n} for n, (i, u) in enumerate(self.uploads.items())]}

    def _create_multipart_upload(self, Bucket, Key, Metadata):
        upload_id = "u%d" % len(self.uploads)
        self.uploads[upload_id] = {"key": Key, "meta": Metadata, "parts": {}}
        return {"UploadId": upload_id}

    def _list_parts(self, Bucket, Key, UploadId):
        return {"Parts": [{"PartNumber": n, "Size": len(b), "ETag": '"%s"' % hashlib.md5(b).hexdigest()}
                          for n, b in sorted(self.uploads[UploadId]["parts"].items())]}

    def _upload_part(self, Bucket, Key, UploadId, PartNumber, Body):
        self.uploads[UploadId]["parts"][PartNumber] = Body
        return {"ETag": '"%s"' % hashlib.md5(Body).hexdigest()}

    def _complete_multipart_upload(self, Bucket, Key, UploadId, MultipartUpload):
        upload = self.uploads.pop(UploadId)
        body = b"".join(upload["parts"][p["PartNumber"]] for p in MultipartUpload["Parts"])
        self.objects[Key] = {"body": body, "meta": upload["meta"]}

    def _abort_multipart_upload(self, Bucket, Key, UploadId):
        self.uploads.pop(UploadId)


PARAMS = {"bucket": "b", "endpoint_url": "https://s3.test", "part_size_mb": 5, "multipart_threshold_mb": 5,
          "ca_bundle": None, "region": None, "access_key": "AK", "secret_key": "SK"}


def syncer(fake, monkeypatch, stop_after=None):
    if stop_after is None:
        monkeypatch.delenv(_s3_sync.STOP_AFTER_PARTS_ENV, raising=False)
    else:
        monkeypatch.setenv(_s3_sync.STOP_AFTER_PARTS_ENV, str(stop_after))
    sync = _s3_sync.S3Sync(PARAMS)
    sync.s3 = fake
    return sync


def test_an_interrupted_multipart_upload_resumes_with_the_missing_parts(tmp_path, monkeypatch):
    path = tmp_path / "big"
    path.write_bytes(os.urandom(12 * MIB))
    fake = FakeS3()
    with pytest.raises(_s3_sync.TransferInterrupted):
        syncer(fake, monkeypatch, stop_after=2).upload(str(path), "big")
    assert len(next(iter(fake.uploads.values()))["parts"]) == 2
    _plan, files = syncer(fake, monkeypatch).upload(str(path), "big")
    assert (files[0]["parts_reused"], files[0]["parts_sent"]) == (2, 1)
    assert files[0]["bytes_sent"] == 2 * MIB and files[0]["resumed_bytes"] == 10 * MIB
    assert fake.objects["big"]["body"] == path.read_bytes() and not fake.uploads
    _plan, again = syncer(fake, monkeypatch).upload(str(path), "big")
    assert again[0]["action"] == "unchanged"


def test_parts_of_other_bytes_are_not_kept(tmp_path, monkeypatch):
    path = tmp_path / "big"
    path.write_bytes(os.urandom(11 * MIB))
    fake = FakeS3()
    with pytest.raises(_s3_sync.TransferInterrupted):
        syncer(fake, monkeypatch, stop_after=1).upload(str(path), "big")
    path.write_bytes(os.urandom(11 * MIB))
    _plan, files = syncer(fake, monkeypatch).upload(str(path), "big")
    assert (files[0]["parts_reused"], files[0]["parts_sent"]) == (0, 3)
    assert "abort_multipart_upload" in fake.calls and not fake.uploads


def test_check_mode_sends_nothing(tmp_path, monkeypatch):
    (tmp_path / "a").write_text("1")
    fake = FakeS3()
    sync = syncer(fake, monkeypatch)
    sync.check_mode = True
    _plan, files = sync.upload(str(tmp_path / "a"), "k")
    assert files[0]["action"] == "upload" and fake.calls == ["list_objects_v2"] and not fake.objects


@pytest.mark.parametrize("code, status, kind, field", [
    ("NoSuchBucket", 404, NotFound, "bucket"),
    ("InvalidAccessKeyId", 403, AuthFailed, "access_key"),
    ("SignatureDoesNotMatch", 403, AuthFailed, "secret_key"),
    ("AccessDenied", 403, AuthFailed, "permission denied"),
])
def test_errors_name_the_field_and_never_the_secret(tmp_path, monkeypatch, code, status, kind, field):
    fake = FakeS3(fail=client_error(code, status))
    with pytest.raises(kind) as caught:
        syncer(fake, monkeypatch).download(str(tmp_path), "p/")
    assert field in str(caught.value) and "SK" not in str(caught.value)
    assert os.listdir(str(tmp_path)) == []


def test_bad_mode_and_part_size_are_refused_before_any_request():
    with pytest.raises(SpecError) as caught:
        _s3_sync.sync(dict(PARAMS, mode="rw", direction="download", path="/x", key=""), False)
    assert caught.value.field == "mode"
    with pytest.raises(SpecError) as caught:
        _s3_sync.sync(dict(PARAMS, mode=None, part_size_mb=4, direction="download", path="/x", key=""), False)
    assert caught.value.field == "part_size_mb"
