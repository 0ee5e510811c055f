# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which Slurm job is the one of an identity (pure). Internal to this collection.

slurmctld shows every job's comment to every user of the cluster (GET jobs/), and any user may
submit a job whose comment is "bridge:<identity>". So a job counts as Bridge's only when:

- the user the credential acts for owns it (its user_name; accounting's user);
- with an identity key (the controller's --identity-key-file, or the option identity_key), its
  comment carries the tag only that key makes ("bridge:<identity> mac=<tag>"), or no tag at all (a
  job submitted before the key was in use, so never lost; it is still its owner's);
- it is the only submission carrying the identity: the tasks of one array and the components of
  one heterogeneous job are one submission, several records of one job id (a requeue) too.

Where two submissions qualify, or a job qualifies only by an owner who cannot be known, none is
adopted and nothing is submitted: Bridge never submits one identity twice, so a second job is not
its own, and submitting a third would not help.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import hmac

from ansible_collections.bridge.hpc.plugins.module_utils._backend import natural_key, newer
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.accounting import job_comment
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.states import at_path, number, tag_of

# 128 bits of HMAC-SHA256 as hex: nobody without the key makes a tag that verifies.
TAG_HEX_DIGITS = 32


def identity_keys(value):
    """The keys of an identity key text: one per non-blank line, the first makes the tags of new
    jobs and every one verifies, so that a key can be replaced without losing the jobs of the old."""
    return tuple(line.strip() for line in (value or "").splitlines() if line.strip())


def identity_tag(key, identity):
    """The tag of `identity` under `key`: HMAC-SHA256 of the identity, truncated."""
    digest = hmac.new(key.encode("utf-8"), identity.encode("utf-8"), hashlib.sha256).hexdigest()
    return digest[:TAG_HEX_DIGITS]


def submission_of(job):
    """What tells one submission from another: a heterogeneous job's leader id, else the job id
    (one array is one job already, arrays.fold)."""
    native = job.get("native") or {}
    leader = number(native.get("het_job_id")) or number(at_path(native, "het", "job_id"))
    return str(leader) if leader else job["job_id"]


def vouched(job, keys):
    """True when the job's tag verifies under one of `keys`, None when it has no tag (or there is
    no key to check one with), False for a tag none of the keys made."""
    # The comment of the native record: slurmctld's string or accounting's comment.job, an
    # array's its first record's (arrays.fold), which every record of it carries.
    tag = tag_of(job_comment(job.get("native") or {}))
    if not tag or not keys:
        return None
    return any(hmac.compare_digest(identity_tag(key, job["identity"]), tag) for key in keys)


def claim(jobs, identities, user, keys=()):
    """({identity: job}, {identity: (why, [job ids])}, [notes]) of `jobs` (normalized records):
    the job of each identity that has exactly one submission of its own (the newest record of
    it), the identities refused (several submissions, or an owner that cannot be checked), and
    notes on the jobs passed over (another user's, a tag of another key). `user` is the one the
    credential acts for, None where it cannot be known."""
    wanted = set(identities)
    candidates, notes = {}, []
    for job in jobs:
        identity = job.get("identity")
        if identity not in wanted:
            continue
        if user is not None and job.get("user") != user:
            notes.append("job %s of user '%s' carries identity '%s'; Bridge adopts only jobs of '%s', the user its "
                         "credential acts for" % (job["job_id"], job.get("user"), identity, user))
            continue
        verdict = vouched(job, keys)
        if verdict is False:
            notes.append("job %s carries identity '%s' with a tag the identity key did not make; not adopted"
                         % (job["job_id"], identity))
            continue
        candidates.setdefault(identity, []).append((job, verdict))
    found, refused = {}, {}
    for identity, matches in candidates.items():
        if user is None and any(verdict is None for _job, verdict in matches):
            ids = sorted(set(job["job_id"] for job, _verdict in matches))
            refused[identity] = ("the user the credential acts for is not known (no user given, and a token that "
                                 "names none), so whose job %s is cannot be checked: adopted none, submitted nothing; "
                                 "give the option user (SLURM_USER)" % ", ".join(ids), ids)
            continue
        submissions = {}
        for job, _verdict in matches:
            key = submission_of(job)
            if key not in submissions or newer(job, submissions[key]):
                submissions[key] = job
        if len(submissions) > 1:
            ids = sorted(submissions, key=natural_key)
            refused[identity] = ("%d jobs%s carry identity '%s' (%s); Bridge submits one job per identity, so at most "
                                 "one is its own: adopted none, submitted nothing. Cancel the ones that are not; while "
                                 "they carry it (accounting keeps an ended job's comment), this identity stays refused"
                                 % (len(ids), " of user '%s'" % user if user else "", identity, ", ".join(ids)), ids)
            continue
        found[identity] = next(iter(submissions.values()))
    return found, refused, notes
