# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files to and from S3 with boto3: checksummed, resumable. Internal to this collection.

Every object Bridge uploads carries the sha256 of its content as user metadata (x-amz-meta-sha256),
so an unchanged file is recognised without reading the object back. Large files go as multipart
uploads; an interrupted one is found again (ListMultipartUploads) and only its missing parts are
sent (ListParts: a part whose ETag is the MD5 of the same bytes here is kept). Downloads are ranged
GETs appended to a `.part` file named after the object's ETag, checked against the sha256 before
the rename, so an interrupted download resumes and a changed object starts over.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import posixpath
import stat
import traceback

from ansible_collections.bridge.hpc.plugins.module_utils._errors import (
    AuthFailed,
    BridgeError,
    ConnectionFailed,
    NotFound,
    Rejected,
    SpecError,
)

try:
    import boto3
    import botocore.config
    import botocore.exceptions

    HAS_BOTO3 = True
    BOTO3_IMPORT_ERROR = None
except ImportError:
    HAS_BOTO3 = False
    BOTO3_IMPORT_ERROR = traceback.format_exc()

MIB = 1024 * 1024
SHA256_METADATA = "sha256"
# A test hook: stop (as a crash would) after this many parts or ranges were sent in one run, so a
# test can interrupt a transfer at a known point and check that the next run sends only the rest.
STOP_AFTER_PARTS_ENV = "BRIDGE_S3_STOP_AFTER_PARTS"
READ_CHUNK = MIB


class TransferInterrupted(BridgeError):
    kind = "interrupted"
    temporary = True


# ----------------------------------------------------------------------------- pure planning
def is_prefix(key):
    """A key naming a directory: empty (the whole bucket) or ending in '/'."""
    return key == "" or key.endswith("/")


def object_key(prefix, relative_path):
    return prefix + relative_path.replace(os.sep, "/")


def relative_key(prefix, key):
    """The local relative path of `key` under `prefix`; refuses keys that would escape the directory."""
    rest = key[len(prefix):]
    parts = [p for p in rest.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise SpecError("key", "object '%s' cannot be a file under the destination directory" % key)
    return os.path.join(*parts)


def plan_transfers(local, remote):
    """What to send, given files here and objects there, both {key: {"sha256", "size", ...}}, for
    the direction local -> remote. A file is sent unless the other side has the same sha256; an
    object without Bridge's sha256 (uploaded elsewhere) is compared by its plain MD5 ETag when it
    has one. Returns [(key, "transfer"|"unchanged")] in key order."""
    plan = []
    for key in sorted(local):
        here, there = local[key], remote.get(key)
        plan.append((key, "unchanged" if there is not None and same_content(here, there) else "transfer"))
    return plan


def same_content(one, other):
    if one.get("size") != other.get("size"):
        return False
    if one.get("sha256") and other.get("sha256"):
        return one["sha256"] == other["sha256"]
    if one.get("md5") and other.get("md5"):
        return one["md5"] == other["md5"]
    return False


def plain_md5(etag):
    """The MD5 an ETag is, for an object uploaded in one piece; None for multipart ETags ("...-N")."""
    etag = (etag or "").strip('"')
    return etag if len(etag) == 32 and "-" not in etag else None


def part_ranges(size, part_size):
    """[(part_number, offset, length)] covering `size` bytes; one empty part for an empty file."""
    if size == 0:
        return [(1, 0, 0)]
    return [(n + 1, offset, min(part_size, size - offset)) for n, offset in enumerate(range(0, size, part_size))]


def reusable_parts(ranges, listed_parts, md5_of_range):
    """Part numbers of an interrupted multipart upload that hold the same bytes as the file here:
    listed with the size the range has and the ETag its MD5 is. `md5_of_range(offset, length)`."""
    by_number = dict((p["PartNumber"], p) for p in listed_parts)
    reused = set()
    for number, offset, length in ranges:
        part = by_number.get(number)
        if part and part["Size"] == length and part["ETag"].strip('"') == md5_of_range(offset, length):
            reused.add(number)
    return reused


def partial_download_path(path, etag):
    """Where an interrupted download of one object version waits: named after the ETag, so the
    bytes of another version are never resumed."""
    tag = hashlib.sha256((etag or "").encode("utf-8")).hexdigest()[:12]
    directory, name = os.path.split(path)
    return os.path.join(directory, ".%s.%s.part" % (name, tag))


def describe(plan, direction, source, target):
    """The diff of a run: one line per file that would be sent."""
    lines = ["%s %s -> %s" % (direction, source(key), target(key)) for key, action in plan if action == "transfer"]
    return "\n".join(lines) + ("\n" if lines else "")


# ----------------------------------------------------------------------------- local files
def file_digests(path):
    """sha256 and md5 of a file, read once."""
    sha, md5 = hashlib.sha256(), hashlib.md5()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(READ_CHUNK), b""):
            sha.update(chunk)
            md5.update(chunk)
    return sha.hexdigest(), md5.hexdigest()


def range_md5(path, offset, length):
    md5 = hashlib.md5()
    with open(path, "rb") as handle:
        handle.seek(offset)
        left = length
        while left:
            chunk = handle.read(min(READ_CHUNK, left))
            if not chunk:
                break
            md5.update(chunk)
            left -= len(chunk)
    return md5.hexdigest()


def local_sources(path, key):
    """{key: {"path", "size"}} of what an upload of `path` to `key` sends. A directory goes under the
    prefix `key` (made to end in '/'); a file to `key`, or under it when `key` is a prefix."""
    if not os.path.exists(path):
        raise SpecError("path", "'%s' does not exist" % path)
    if os.path.isdir(path):
        prefix = key if is_prefix(key) else key + "/"
        sources = {}
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for name in files:
                full = os.path.join(root, name)
                sources[object_key(prefix, os.path.relpath(full, path))] = {"path": full}
    else:
        sources = {(key + os.path.basename(path)) if is_prefix(key) else key: {"path": path}}
    for entry in sources.values():
        if not os.access(entry["path"], os.R_OK):
            raise SpecError("path", "'%s' is not readable" % entry["path"])
        entry["size"] = os.path.getsize(entry["path"])
    return sources


def local_targets(path, key, objects):
    """{key: local path} a download of `key` (an object, or a prefix with `objects`) writes."""
    if is_prefix(key):
        return dict((k, os.path.join(path, relative_key(key, k))) for k in objects)
    if os.path.isdir(path):
        return {key: os.path.join(path, posixpath.basename(key))}
    return {key: path}


def check_writable(path):
    """The nearest existing directory above the file `path` must be writable: the file is written
    next to itself (.part) and renamed, and missing parents are made."""
    directory = os.path.dirname(path) or "."
    while not os.path.isdir(directory):
        if os.path.exists(directory):
            raise SpecError("path", "'%s' is in the way of '%s': not a directory" % (directory, path))
        directory = os.path.dirname(directory) or "."
    if not os.access(directory, os.W_OK | os.X_OK):
        raise SpecError("path", "cannot write to '%s' (permission denied)" % directory)


# ----------------------------------------------------------------------------- S3
class S3Sync(object):
    """One bucket, one run: list, plan, transfer."""

    def __init__(self, params, check_mode=False):
        self.bucket = params["bucket"]
        self.endpoint = params.get("endpoint_url") or "AWS S3"
        self.check_mode = check_mode
        self.part_size = params["part_size_mb"] * MIB
        self.threshold = params["multipart_threshold_mb"] * MIB
        stop_after = os.environ.get(STOP_AFTER_PARTS_ENV)
        self.parts_left = int(stop_after) if stop_after else None
        verify = params.get("ca_bundle") or True
        if not params.get("validate_certs", True):
            verify = False
        # Path-style addressing: a bucket name is not a host name on a private endpoint.
        options = dict(s3={"addressing_style": "path"}, retries={"max_attempts": 3, "mode": "standard"})
        # Checksums only where S3 requires them: S3-compatible servers do not all accept the CRC32
        # trailers boto3 sends by default since 1.36, and the sha256 Bridge keeps makes them
        # redundant. Older botocore (Debian 12 ships 1.29) has neither the option nor the trailers.
        if "request_checksum_calculation" in getattr(botocore.config.Config, "OPTION_DEFAULTS", {}):
            options.update(request_checksum_calculation="when_required", response_checksum_validation="when_required")
        config = botocore.config.Config(**options)
        self.s3 = boto3.session.Session().client(
            "s3",
            endpoint_url=params.get("endpoint_url") or None,
            region_name=params.get("region") or None,
            aws_access_key_id=params.get("access_key") or None,
            aws_secret_access_key=params.get("secret_key") or None,
            verify=verify,
            config=config,
        )

    # -- errors
    def call(self, operation, what, **kwargs):
        """One S3 request; its failure as a Bridge error naming the field to fix."""
        try:
            return getattr(self.s3, operation)(Bucket=self.bucket, **kwargs)
        except botocore.exceptions.ClientError as exc:
            raise self.client_error(exc, operation, what)
        except botocore.exceptions.SSLError as exc:
            raise ConnectionFailed("TLS verification failed (ca_bundle: the CA that signed the server's certificate): %s"
                                   % exc, "reach", "S3 endpoint", None, None, self.endpoint)
        except botocore.exceptions.NoCredentialsError:
            raise SpecError("access_key", "no S3 credentials: set access_key and secret_key, or AWS_ACCESS_KEY_ID "
                            "and AWS_SECRET_ACCESS_KEY")
        except (botocore.exceptions.EndpointConnectionError, botocore.exceptions.ConnectionError) as exc:
            raise ConnectionFailed(str(exc), "reach", "S3 endpoint", None, None, self.endpoint)

    def client_error(self, exc, operation, what):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        where = dict(verb=operation, obj="S3 object" if what.rstrip("/") != "s3://%s" % self.bucket else "S3 bucket",
                     ident=what, manager="S3", url=self.endpoint, status=status)
        if code == "NoSuchBucket":
            return NotFound("bucket: bucket '%s' does not exist" % self.bucket, **where)
        if code in ("NoSuchKey", "404", "NotFound"):
            return NotFound("key: no such object", **where)
        # versitygw answers an unknown key id with its admin error XAdminUserNotFound.
        if code in ("InvalidAccessKeyId", "XAdminUserNotFound"):
            return AuthFailed("access_key: the access key id is not known to the server", **where)
        if code == "SignatureDoesNotMatch":
            return AuthFailed("secret_key: the secret key does not match the access key", **where)
        if code in ("AccessDenied", "403", "Forbidden"):
            return AuthFailed("permission denied", **where)
        return Rejected("%s: %s" % (code, error.get("Message", "")), **where)

    def url(self, key):
        return "s3://%s/%s" % (self.bucket, key)

    def interrupt_point(self):
        if self.parts_left is None:
            return
        if self.parts_left <= 0:
            raise TransferInterrupted("stopped by %s (a test hook)" % STOP_AFTER_PARTS_ENV)
        self.parts_left -= 1

    # -- listing
    def objects(self, key):
        """{key: {"size", "etag"}} of the object `key`, or of every object under the prefix `key`.
        The first request of every run, so a missing bucket or bad credentials fail before anything."""
        found = {}
        token = None
        while True:
            kwargs = {"Prefix": key}
            if token:
                kwargs["ContinuationToken"] = token
            page = self.call("list_objects_v2", self.url(key), **kwargs)
            for item in page.get("Contents", []):
                if is_prefix(key) or item["Key"] == key:
                    found[item["Key"]] = {"size": item["Size"], "etag": item.get("ETag", "").strip('"')}
            if not page.get("IsTruncated"):
                return found
            token = page.get("NextContinuationToken")

    def describe_object(self, key, listed):
        """The listed object with its sha256 (HeadObject: metadata is not in listings) and plain MD5."""
        head = self.call("head_object", self.url(key), Key=key)
        info = dict(listed)
        info["sha256"] = head.get("Metadata", {}).get(SHA256_METADATA)
        info["md5"] = plain_md5(listed.get("etag"))
        return info

    # -- upload
    def upload(self, path, key):
        sources = local_sources(path, key)
        remote = self.objects(key)
        for entry in sources.values():
            entry["sha256"], entry["md5"] = file_digests(entry["path"])
        remote = dict((k, self.describe_object(k, v)) for k, v in remote.items() if k in sources)
        plan = plan_transfers(sources, remote)
        files = []
        for object_name, action in plan:
            entry = sources[object_name]
            record = {"path": entry["path"], "key": object_name, "bytes": entry["size"], "sha256": entry["sha256"],
                      "action": "upload" if action == "transfer" else "unchanged"}
            if action == "transfer" and not self.check_mode:
                record.update(self.put(entry, object_name))
            files.append(record)
        return plan, files

    def put(self, entry, key):
        metadata = {SHA256_METADATA: entry["sha256"]}
        if entry["size"] < self.threshold:
            self.interrupt_point()
            with open(entry["path"], "rb") as body:
                self.call("put_object", self.url(key), Key=key, Body=body, Metadata=metadata)
            return {"parts_sent": 1, "parts_reused": 0, "bytes_sent": entry["size"]}
        return self.put_multipart(entry, key, metadata)

    def put_multipart(self, entry, key, metadata):
        ranges = part_ranges(entry["size"], self.part_size)
        upload_id, reused = self.resumable_upload(entry, key, ranges)
        if upload_id is None:
            upload_id = self.call("create_multipart_upload", self.url(key), Key=key, Metadata=metadata)["UploadId"]
        etags = {}
        sent = 0
        with open(entry["path"], "rb") as handle:
            for number, offset, length in ranges:
                if number in reused:
                    etags[number] = reused[number]
                    continue
                self.interrupt_point()
                handle.seek(offset)
                answer = self.call("upload_part", self.url(key), Key=key, UploadId=upload_id, PartNumber=number,
                                   Body=handle.read(length))
                etags[number] = answer["ETag"]
                sent += length
        self.call("complete_multipart_upload", self.url(key), Key=key, UploadId=upload_id, MultipartUpload={
            "Parts": [{"PartNumber": n, "ETag": etags[n]} for n, _o, _l in ranges]})
        self.ensure_sha256(key, entry, metadata)
        return {"parts_sent": len(ranges) - len(reused), "parts_reused": len(reused), "bytes_sent": sent,
                "resumed_bytes": entry["size"] - sent}

    def resumable_upload(self, entry, key, ranges):
        """(upload id, {part number: ETag}) of the newest interrupted upload of `key` whose parts hold
        this file's bytes; (None, {}) when there is none. Others for the key are aborted: their
        parts would be billed and never completed."""
        listed = self.call("list_multipart_uploads", self.url(key), Prefix=key).get("Uploads", [])
        uploads = sorted((u for u in listed if u["Key"] == key), key=lambda u: u["Initiated"], reverse=True)
        chosen, reused = None, {}
        for upload in uploads:
            if chosen is None:
                parts = self.call("list_parts", self.url(key), Key=key, UploadId=upload["UploadId"]).get("Parts", [])
                numbers = reusable_parts(ranges, parts, lambda o, n: range_md5(entry["path"], o, n))
                if numbers:
                    chosen = upload["UploadId"]
                    reused = dict((p["PartNumber"], p["ETag"]) for p in parts if p["PartNumber"] in numbers)
                    continue
            self.call("abort_multipart_upload", self.url(key), Key=key, UploadId=upload["UploadId"])
        return chosen, reused

    def ensure_sha256(self, key, entry, metadata):
        """A resumed upload keeps the metadata it was created with, which an edit of the file's
        unsent parts would make wrong: rewrite it in place when it differs."""
        head = self.call("head_object", self.url(key), Key=key)
        if head.get("Metadata", {}).get(SHA256_METADATA) == entry["sha256"]:
            return
        self.call("copy_object", self.url(key), Key=key, CopySource={"Bucket": self.bucket, "Key": key},
                  Metadata=metadata, MetadataDirective="REPLACE")

    # -- download
    def download(self, path, key, mode=None):
        listed = self.objects(key)
        if not listed and not is_prefix(key):
            raise NotFound("key: no such object", "download", "S3 object", self.url(key), "S3", self.endpoint, 404)
        targets = local_targets(path, key, listed)
        for target in targets.values():
            check_writable(target)
        remote = dict((k, self.describe_object(k, v)) for k, v in listed.items())
        local = {}
        for object_name, target in targets.items():
            if os.path.isfile(target):
                sha, md5 = file_digests(target)
                local[object_name] = {"size": os.path.getsize(target), "sha256": sha, "md5": md5}
        plan = plan_transfers(remote, local)
        files = []
        for object_name, action in plan:
            info, target = remote[object_name], targets[object_name]
            record = {"path": target, "key": object_name, "bytes": info["size"],
                      "sha256": info["sha256"] or local.get(object_name, {}).get("sha256"),
                      "action": "download" if action == "transfer" else "unchanged"}
            if action == "transfer" and not self.check_mode:
                record.update(self.get(object_name, info, target))
            if mode is not None and not self.check_mode and set_mode(target, mode) and action != "transfer":
                record["action"] = "mode"
            files.append(record)
        return plan, files

    def get(self, key, info, target):
        """Ranged GETs appended to the object version's .part file; renamed once its digest matches."""
        parent = os.path.dirname(target)
        if parent and not os.path.isdir(parent):
            os.makedirs(parent)
        partial = partial_download_path(target, info["etag"])
        have = os.path.getsize(partial) if os.path.exists(partial) else 0
        if have > info["size"]:
            os.remove(partial)
            have = 0
        resumed = have
        with open(partial, "ab") as handle:
            while have < info["size"]:
                self.interrupt_point()
                end = min(have + self.part_size, info["size"]) - 1
                # IfMatch: a range of another version of the object must not land in this file.
                body = self.call("get_object", self.url(key), Key=key, Range="bytes=%d-%d" % (have, end),
                                 IfMatch='"%s"' % info["etag"])["Body"]
                for chunk in iter(lambda: body.read(READ_CHUNK), b""):
                    handle.write(chunk)
                    have += len(chunk)
        sha, md5 = file_digests(partial)
        expected = info["sha256"] or info["md5"]
        if expected and expected not in (sha, md5):
            os.remove(partial)
            raise Rejected("the downloaded bytes' digest %s is not the object's %s; the partial file was removed"
                           % (sha, expected), "download", "S3 object", self.url(key), "S3", self.endpoint)
        os.rename(partial, target)
        return {"sha256": sha, "bytes_sent": info["size"] - resumed, "resumed_bytes": resumed}


def set_mode(path, mode):
    """chmod to `mode` (octal text); True when it changed."""
    wanted = int(mode, 8)
    if stat.S_IMODE(os.stat(path).st_mode) == wanted:
        return False
    os.chmod(path, wanted)
    return True


def sync(params, check_mode):
    """The whole module once the arguments are valid: a result dict."""
    if params["mode"] is not None:
        try:
            int(params["mode"], 8)
        except ValueError:
            raise SpecError("mode", "'%s' is not an octal file mode such as 0640" % params["mode"])
    if params["part_size_mb"] < 5:
        raise SpecError("part_size_mb", "S3 parts other than the last are at least 5 MiB; got %d"
                        % params["part_size_mb"])
    syncer = S3Sync(params, check_mode)
    path, key = params["path"], params["key"]
    try:
        if params["direction"] == "upload":
            plan, files = syncer.upload(path, key)
            verb, source, target = "upload", lambda k: path_of(files, k), syncer.url
        else:
            plan, files = syncer.download(path, key, params["mode"])
            verb, source, target = "download", syncer.url, lambda k: path_of(files, k)
    except (IOError, OSError) as exc:
        # What the checks before any transfer cannot see (root passes access(2), a full disk).
        raise SpecError("path", "%s: %s" % (exc.filename or path, exc.strerror or exc))
    changed = any(f["action"] != "unchanged" for f in files)
    return {
        "changed": changed,
        "files": files,
        "bytes_transferred": sum(f.get("bytes_sent", 0) for f in files),
        "diff": {"before": "", "after": describe(plan, verb, source, target)},
    }


def path_of(files, key):
    return next(f["path"] for f in files if f["key"] == key)
