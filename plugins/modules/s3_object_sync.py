#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: s3_object_sync
short_description: Upload files to or download them from S3, checksummed and resumable
version_added: 0.1.0
description:
  - Uploads a file or a directory tree to C(s3://bucket/key), or downloads an object or every object
    under a prefix into a directory, with boto3.
  - Every uploaded object carries the sha256 of its content as user metadata (C(x-amz-meta-sha256)).
    A file whose sha256 (or, for an object uploaded by another tool in one piece, its MD5 ETag) is the
    same on both sides is not sent again, so a second run changes nothing.
  - A file of O(multipart_threshold_mb) or more is uploaded in parts. When an earlier upload of the same
    key was interrupted, its parts are listed and only the missing ones (or ones whose MD5 differs) are
    sent before the upload is completed.
  - A download is a series of ranged GETs appended to a hidden C(.<name>.<tag>.part) file next to the
    target, tagged with the object's ETag; an interrupted download resumes there. The file is renamed into
    place only when its sha256 (or MD5) is the object's.
  - Runs where the task runs; delegated to a cluster's login node it moves data between S3 and the
    cluster directly.
author:
  - Bridge developers (@bridge-hpc)
options:
  direction:
    description:
      - C(upload) sends O(path) to O(bucket); C(download) writes O(bucket) objects to O(path).
    type: str
    required: true
    choices: [upload, download]
  bucket:
    description:
      - The bucket. It must exist; it is never created.
    type: str
    required: true
  key:
    description:
      - Object key, or a prefix when it ends in C(/) (or is empty, the whole bucket).
      - Upload of a directory puts its files under the prefix (a C(/) is added when missing); upload of a
        file to a prefix names the object after the file.
      - Download of a prefix writes every object under it into the directory O(path), keeping the rest of
        the key as a relative path; a key with C(..) in it is refused.
    type: str
    default: ""
  path:
    description:
      - Upload, the local file or directory to send. Download, the local file to write, or the directory
        the file or the prefix's files land in. Missing parent directories are created.
    type: path
    required: true
  mode:
    description:
      - Download only, the mode of the files written, in octal, for example C("0640").
    type: str
  endpoint_url:
    description:
      - URL of the S3 service. AWS's own when unset.
      - If not set, the environment variable E(BRIDGE_S3_ENDPOINT), then E(AWS_ENDPOINT_URL) is used.
    type: str
  region:
    description:
      - Region of the bucket. If not set, E(AWS_DEFAULT_REGION) or E(AWS_REGION) is used.
    type: str
  access_key:
    description:
      - Access key id. If not set, the environment variable E(AWS_ACCESS_KEY_ID) is used.
    type: str
  secret_key:
    description:
      - Secret access key. If not set, the environment variable E(AWS_SECRET_ACCESS_KEY) is used.
      - Never logged, never part of a result or an error message.
    type: str
  ca_bundle:
    description:
      - PEM file of the certificate authorities to trust for O(endpoint_url) instead of the system store.
      - If not set, the environment variable E(BRIDGE_S3_CA_BUNDLE) (what the AWX credential type Bridge S3
        injects), then E(AWS_CA_BUNDLE) is used. An environment variable that is set but empty counts as not set,
        for this and every other option.
    type: path
  validate_certs:
    description:
      - Verify the server's TLS certificate. Turn off only for a throwaway test server.
    type: bool
    default: true
  part_size_mb:
    description:
      - Size of one part of a multipart upload and of one ranged GET, in MiB (at least 5).
      - A resumed upload reuses only parts of this size.
    type: int
    default: 8
  multipart_threshold_mb:
    description:
      - Files of this many MiB or more are uploaded in parts.
    type: int
    default: 16
attributes:
  check_mode:
    support: full
    description: Lists, reads metadata and hashes local files; sends and writes nothing.
  diff_mode:
    support: full
    description: One line per file that would be sent.
notes:
  - Errors name the option to fix, for example C(bucket) for a bucket that does not exist, C(access_key) for
    an unknown key id, C(secret_key) for a wrong secret, C(path) for a local file that is missing or a
    directory that cannot be written. The bucket is listed before anything is sent or written, so such an
    error changes nothing.
  - The environment variable E(BRIDGE_S3_STOP_AFTER_PARTS) is a test hook. When it is set to N, the module
    fails as if interrupted after sending N parts or ranges.
requirements:
  - boto3 >= 1.26 (Debian 12's python3-boto3 will do) on the host the task runs on
"""

EXAMPLES = r"""
- name: Send the inputs to the bucket
  bridge.hpc.s3_object_sync:
    direction: upload
    path: inputs/
    bucket: project
    key: runs/42/inputs/
    endpoint_url: https://s3.example.org

- name: Fetch them onto the cluster, from its login node
  bridge.hpc.s3_object_sync:
    direction: download
    bucket: project
    key: runs/42/inputs/
    path: /scratch/alice/run42
    mode: "0640"
  delegate_to: login1
"""

RETURN = r"""
files:
  description: One entry per file, in key order.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: Local path.
      type: str
    key:
      description: Object key.
      type: str
    bytes:
      description: Size of the file.
      type: int
    sha256:
      description: sha256 of the content; null for an object that has none and was not downloaded.
      type: str
    action:
      description: C(upload), C(download), C(mode) (only the mode was set) or C(unchanged).
      type: str
    bytes_sent:
      description: Bytes sent or received in this run (not in check mode).
      type: int
    resumed_bytes:
      description: Bytes an interrupted earlier run had already sent, multipart uploads and downloads only.
      type: int
    parts_sent:
      description: Upload, parts sent in this run.
      type: int
    parts_reused:
      description: Upload, parts of an interrupted upload that were kept.
      type: int
  sample: [{"path": "/scratch/run42/in.csv", "key": "runs/42/inputs/in.csv", "bytes": 120, "action": "download",
            "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "bytes_sent": 120,
            "resumed_bytes": 0}]
bytes_transferred:
  description: Bytes sent or received in this run.
  returned: always
  type: int
  sample: 120
"""

import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.errors import AnsibleFallbackNotFound

from ansible_collections.bridge.hpc.plugins.module_utils._errors import BridgeError
from ansible_collections.bridge.hpc.plugins.module_utils._s3_sync import BOTO3_IMPORT_ERROR, HAS_BOTO3, sync


def env_fallback(*names):
    """The first of the environment variables `names` that is set and not empty: an empty one (what
    an AWX credential injects for a field left empty) is not set."""
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    raise AnsibleFallbackNotFound


ARGUMENT_SPEC = dict(
    direction=dict(type="str", required=True, choices=["upload", "download"]),
    bucket=dict(type="str", required=True),
    key=dict(type="str", default="", no_log=False),
    path=dict(type="path", required=True),
    mode=dict(type="str"),
    endpoint_url=dict(type="str", fallback=(env_fallback, ["BRIDGE_S3_ENDPOINT", "AWS_ENDPOINT_URL"])),
    region=dict(type="str", fallback=(env_fallback, ["AWS_DEFAULT_REGION", "AWS_REGION"])),
    access_key=dict(type="str", fallback=(env_fallback, ["AWS_ACCESS_KEY_ID"]), no_log=False),
    secret_key=dict(type="str", fallback=(env_fallback, ["AWS_SECRET_ACCESS_KEY"]), no_log=True),
    ca_bundle=dict(type="path", fallback=(env_fallback, ["BRIDGE_S3_CA_BUNDLE", "AWS_CA_BUNDLE"])),
    validate_certs=dict(type="bool", default=True),
    part_size_mb=dict(type="int", default=8),
    multipart_threshold_mb=dict(type="int", default=16),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    if not HAS_BOTO3:
        module.fail_json(msg=missing_required_lib("boto3"), exception=BOTO3_IMPORT_ERROR)
    try:
        result = sync(module.params, module.check_mode)
    except BridgeError as exc:
        # Not _module.fail_on_bridge_error: that module pulls in every backend's client (httpx),
        # which a login node this runs on need not have.
        module.fail_json(msg=str(exc), error=exc.to_dict())
    if not module._diff:
        result.pop("diff")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
