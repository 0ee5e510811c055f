"""Whose Slurm job carries an identity (module_utils/slurm/identity.py, issue 37 item 6): another
user's job with the same comment is never adopted, two of the user's own are refused naming both,
and with an identity key a tag only that key makes is in the comment. Accounting and slurmctld
answer through tests/unit/slurm_stub.py; the lookup sends the same requests as without these rules.
"""

import base64
import json

import httpx
import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import AmbiguousIdentity
from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_many_present, read_many
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.identity import claim, identity_keys, identity_tag
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.states import identity_of, normalize_job, tag_of

from slurm_stub import Stub, live_job, recorded_job

KEY = "0123456789abcdef0123456789abcdef"
OLD_KEY = "an older key, still accepted"


def owned_by(job, user, comment=None):
    """`job` (a stub record, live or recorded) of `user`, with `comment` when given."""
    job = dict(job, **({"user_name": user} if "user_name" in job else {"user": user}))
    if comment is not None:
        if isinstance(job.get("comment"), dict):
            job["comment"] = dict(job["comment"], job=comment)
        else:
            job["comment"] = comment
    return job


def keyed_client(stub, key=KEY, user="bridge", token="tok"):
    http = httpx.Client(base_url="http://slurm.test", transport=httpx.MockTransport(stub.handle))
    transport = Transport("http://slurm.test", "Slurm", secrets=[token], http_client=http, sleep=lambda s: None)
    return SlurmClient("http://slurm.test", user=user, token=token, api_version=stub.version, transport=transport,
                       identity_key=key)


def test_the_tag_is_hmac_sha256_of_the_identity_truncated_and_pinned():
    # Golden: jobs tagged by one release are found by the next.
    assert identity_tag(KEY, "3f2a9c1e-uid") == "055141708c8a77078ac64949e1aac344"
    assert identity_tag("k", "identity") == "c9155771b8494dc79a0fa48d586ef50e"
    assert len(identity_tag(KEY, "x")) == 32 and identity_tag(KEY, "x") != identity_tag(OLD_KEY, "x")


def test_a_comment_with_a_tag_and_an_array_reads_back_its_identity_tag_and_indexes():
    comment = "bridge:abc mac=%s array=0-9%%2" % identity_tag(KEY, "abc")
    assert identity_of(comment) == "abc" and tag_of(comment) == identity_tag(KEY, "abc")
    assert identity_of("bridge:abc array=0-9") == "abc" and tag_of("bridge:abc array=0-9") is None
    assert tag_of("bridge:abc") is None and tag_of("someone else's") is None


def test_identity_keys_are_one_a_line_the_first_tags():
    assert identity_keys("\n first \n\nsecond\n") == ("first", "second")
    assert identity_keys(None) == () and identity_keys(" \n") == ()


def test_another_users_newer_job_with_the_same_comment_is_not_adopted():
    """The attack of issue 37 item 6: bridgeother submits a job that exits 3 with the comment of
    bridge's running job; the lookup keeps bridge's own, and says what it passed over."""
    own = live_job(457, "carols-uid", "RUNNING")
    other = owned_by(dict(live_job(458, "carols-uid", "FAILED"), submit_time={"set": True, "number": 1796000999}),
                     "bridgeother")
    stub = Stub(live=[own, other], recorded=None)
    client = stub.client()
    found = client.find("carols-uid")
    assert found["job_id"] == "457" and found["phase"] == "running"
    assert any("job 458 of user 'bridgeother' carries identity 'carols-uid'" in w for w in client.warnings)


def test_only_another_users_job_is_no_job_at_all():
    stub = Stub(live=[owned_by(live_job(458, "carols-uid"), "bridgeother")], recorded=None)
    assert stub.client().find("carols-uid") is None


def test_accounting_matches_only_the_users_own_ended_jobs():
    """22.05's accounting takes no user filter: its answer holds every user's jobs of that name."""
    stub = Stub(recorded=[recorded_job(7, "wanted"), owned_by(recorded_job(8, "wanted", state="FAILED"), "bridgeother")])
    client = stub.client()
    assert client.find("wanted")["job_id"] == "7"
    assert stub.paths() == ["/slurmdb/v0.0.42/jobs/"]


def test_another_users_unfinished_job_of_that_name_is_not_read_from_slurmctld():
    stub = Stub(live=[owned_by(live_job(8, "wanted", "PENDING"), "bridgeother")],
                recorded=[owned_by(recorded_job(8, "wanted", state="PENDING", comment=False), "bridgeother")], dbd_queue=0)
    client = stub.client()
    assert client.find("wanted") is None
    assert "/slurm/v0.0.42/job/8" not in stub.paths()


def test_the_filter_costs_no_request():
    """The same lookup with and without another user's job: the same requests."""
    alone = Stub(live=[live_job(457, "carols-uid")], recorded=None)
    alone.client().find("carols-uid")
    crowded = Stub(live=[live_job(457, "carols-uid"), owned_by(live_job(458, "carols-uid"), "bridgeother")], recorded=None)
    crowded.client().find("carols-uid")
    assert alone.paths() == crowded.paths() == ["/slurmdb/v0.0.42/jobs/", "/slurm/v0.0.42/jobs/"]


def test_two_of_the_users_own_jobs_with_one_identity_are_refused_naming_both():
    stub = Stub(live=[live_job(457, "carols-uid"), live_job(458, "carols-uid", "FAILED")], recorded=None)
    with pytest.raises(AmbiguousIdentity) as refused:
        stub.client().find("carols-uid")
    assert refused.value.job_ids == ["457", "458"]
    assert "2 jobs of user 'bridge' carry identity 'carols-uid' (457, 458)" in str(refused.value)
    assert "adopted none, submitted nothing" in str(refused.value)
    assert refused.value.to_dict()["type"] == "AmbiguousIdentity" and refused.value.temporary is False


def test_the_tasks_of_one_array_and_the_components_of_one_het_job_are_one_submission():
    tasks = [dict(live_job(500 + index, "sweep"), array_job_id={"set": True, "number": 500},
                  array_task_id={"set": True, "number": index}, comment="bridge:sweep array=0-2") for index in range(3)]
    het = [dict(live_job(600 + offset, "het"), het_job_id={"set": True, "number": 600}) for offset in range(2)]
    client = Stub(live=tasks + het, recorded=None).client()
    assert client.find("sweep")["job_id"] == "500"
    assert client.find("het")["job_id"] in ("600", "601")


def test_a_requeued_jobs_records_in_accounting_are_one_submission():
    runs = [recorded_job(7, "wanted", state="NODE_FAIL"), recorded_job(7, "wanted")]
    assert Stub(recorded=runs).client().find("wanted")["job_id"] == "7"


def test_with_a_key_the_comment_carries_the_identitys_tag():
    client = keyed_client(Stub(recorded=None))
    spec = normalize_spec({"script": "#!/bin/sh\ntrue\n", "identity": "carols-uid"}, client)
    assert client.render(spec)["job"]["comment"] == "bridge:carols-uid mac=%s" % identity_tag(KEY, "carols-uid")
    assert keyed_client(Stub(recorded=None), key=KEY + "\n" + OLD_KEY).render(spec) == client.render(spec)


def test_with_a_key_a_copied_or_made_up_tag_is_not_adopted_a_tagged_or_untagged_own_job_is():
    tag = identity_tag(KEY, "carols-uid")
    own = owned_by(live_job(457, "carols-uid"), "bridge", "bridge:carols-uid mac=%s" % tag)
    copied = owned_by(live_job(458, "carols-uid"), "bridgeother", "bridge:carols-uid mac=%s" % tag)
    made_up = owned_by(live_job(459, "carols-uid"), "bridge", "bridge:carols-uid mac=%s" % ("0" * 32))
    client = keyed_client(Stub(live=[own, copied, made_up], recorded=None))
    assert client.find("carols-uid")["job_id"] == "457"
    assert any("job 459 carries identity 'carols-uid' with a tag the identity key did not make" in w
               for w in client.warnings)
    # Submitted before the key was in use: found, never lost.
    assert keyed_client(Stub(live=[live_job(457, "legacy")], recorded=None)).find("legacy")["job_id"] == "457"


def test_an_arrays_tag_is_read_from_its_records_comment():
    def array(first, comment):
        return [dict(live_job(first + index, "sweep"), array_job_id={"set": True, "number": first},
                     array_task_id={"set": True, "number": index}, comment=comment) for index in range(2)]

    tagged = array(500, "bridge:sweep mac=%s array=0-1" % identity_tag(KEY, "sweep"))
    made_up = array(600, "bridge:sweep mac=%s array=0-1" % ("f" * 32))
    client = keyed_client(Stub(live=tagged + made_up, recorded=None))
    found = client.find("sweep")
    assert found["job_id"] == "500" and found["array"]["indexes"] == "0,1"


def test_a_job_tagged_with_an_older_key_is_found_after_the_key_changed():
    tagged = owned_by(live_job(457, "carols-uid"), "bridge", "bridge:carols-uid mac=%s" % identity_tag(OLD_KEY, "carols-uid"))
    client = keyed_client(Stub(live=[tagged], recorded=None), key=KEY + "\n" + OLD_KEY)
    assert client.find("carols-uid")["job_id"] == "457"


def token_naming(claims):
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return "eyJhbGciOiJIUzI1NiJ9.%s.c2ln" % payload


def test_without_a_known_user_an_untagged_job_is_refused_a_tagged_one_adopted():
    """No user given and a token that names none, and no answer naming it: whose job it is cannot
    be checked, so only a tag vouches for it."""
    untagged = live_job(457, "carols-uid")
    stub = Stub(live=[untagged], recorded=None)
    with pytest.raises(AmbiguousIdentity) as refused:
        keyed_client(stub, user=None, token=token_naming({})).find("carols-uid")
    assert "user the credential acts for is not known" in str(refused.value) and refused.value.job_ids == ["457"]
    tagged = owned_by(live_job(457, "carols-uid"), "bridge", "bridge:carols-uid mac=%s" % identity_tag(KEY, "carols-uid"))
    assert keyed_client(Stub(live=[tagged], recorded=None), user=None, token=token_naming({})).find("carols-uid")


def test_the_user_an_answer_says_the_request_came_from_is_not_taken_for_the_owner():
    """24.11's meta.client.user names the user of the TCP connection's process (root for a root
    curl with bridge's token), not the one the token authenticates: it vouches for nothing."""
    stub = Stub(live=[live_job(457, "carols-uid")], recorded=None)
    handle = stub.handle

    def with_meta(request):
        response = handle(request)
        if response.status_code != 200:
            return response
        body = json.loads(response.content)
        body["meta"] = {"client": {"source": "[localhost]:44570(fd:9)", "user": "bridge", "group": "bridge"}}
        return httpx.Response(response.status_code, json=body)

    stub.handle = with_meta
    with pytest.raises(AmbiguousIdentity):
        keyed_client(stub, key=None, user=None, token=token_naming({})).find("carols-uid")


def test_a_batch_fails_only_the_item_whose_identity_is_ambiguous():
    stub = Stub(live=[live_job(457, "twice"), live_job(458, "twice"), live_job(459, "once")], recorded=None)
    client = stub.client()
    specs = [normalize_spec({"script": "#!/bin/sh\ntrue\n", "identity": identity}, client) for identity in ("twice", "once")]
    twice, once = ensure_many_present(client, specs)
    assert twice["failed"] and twice["error"]["type"] == "AmbiguousIdentity" and twice["error"]["job_ids"] == ["457", "458"]
    assert not once["failed"] and once["job"]["job_id"] == "459" and not once["changed"]
    assert not any(request.method == "POST" for request in stub.sent)


def test_a_poll_names_the_ambiguous_identity_apart_from_found_and_missing():
    stub = Stub(live=[live_job(457, "twice"), live_job(458, "twice"), live_job(459, "once")], recorded=None)
    found, missing, refused = read_many(stub.client(), ["twice", "once", "gone"])
    assert sorted(found) == ["once"] and missing == ["gone"] and refused["twice"].job_ids == ["457", "458"]


def test_claim_is_pure_and_keeps_the_newest_record_of_one_submission():
    first = normalize_job({"job_id": 7, "comment": "bridge:x", "user_name": "u", "job_state": ["PENDING"],
                           "submit_time": 1})
    again = normalize_job({"job_id": 7, "comment": "bridge:x", "user_name": "u", "job_state": ["RUNNING"],
                           "submit_time": 2})
    found, refused, notes = claim([first, again], ["x"], "u")
    assert found["x"]["phase"] == "running" and refused == {} and notes == []
