"""status.output and condition OutputRead: read by the poll that finds a job finished, once, and with
spec.output.follow by every poll that finds it running; a Slurm backend's login node reaches the
module as content (the Secret's loginPrivateKey), never a path."""

from bridge_controller import backend_objects
from bridge_controller.executor import Executor
from bridge_controller.handoff import handoff_document
from bridge_controller.policy import Policy
from bridge_controller.spec import backend_key, backend_of
from bridge_controller.status import desired_status, status_patch

from fake_backend import FakeBackend
from fakes import FakeKube, FakeRunner
from test_executor import RecordingQueue, bridgejob, settle

LOGIN = {"host": "login1.example", "port": 2222, "user": "alice", "knownHosts": "[login1.example]:2222 ssh-ed25519 AAAA"}


class PrintingBackend(FakeBackend):
    CAPABILITIES = frozenset(["logs"])

    def __init__(self, **kwargs):
        super(PrintingBackend, self).__init__(**kwargs)
        self.reads = 0

    def read_output(self, job, tail_lines):
        self.reads += 1
        return b"\x1b[1mbold\x1b[0m \xff\nsecret-token here\nenv-secret-value too\ndone\n", False

    def output_secrets(self):
        return ["secret-token"]


def setup():
    kube = FakeKube(secrets={"ns/creds": {"user": "u", "token": "secret-token"}})
    backend = PrintingBackend()
    runner = FakeRunner(backend)
    queue = RecordingQueue()
    executor = Executor(kube, kube, runner, queue, clock=lambda: 1000.0)
    kube.listeners.append(executor.observe)
    return kube, backend, runner, queue, executor


def test_the_poll_that_finds_the_job_finished_reads_its_output_once():
    kube, backend, runner, queue, executor = setup()
    kube.create(bridgejob("a", output={"tailLines": 3}, environment={"API_TOKEN": "env-secret-value", "MODE": "fast"}))
    kube.create(bridgejob("b"))
    settle(executor, queue)
    executor.poll_due(now=2000.0)
    assert backend.reads == 0, "a running job's output is not read"
    assert runner.output_lines == {"uid-a": 3}
    executor.poll_due(now=3000.0)
    settle(executor, queue)
    assert executor.poll_due(now=4000.0) == 0
    assert backend.reads == 1
    a, b = kube.objects["ns/a"]["status"], kube.objects["ns/b"]["status"]
    assert a["phase"] == "Completed"
    assert a["output"] == {"text": u"******** here\n******** too\ndone\n", "lines": 3, "truncated": True}
    read = [c for c in a["conditions"] if c["type"] == "OutputRead"][0]
    assert (read["status"], read["reason"], read["message"]) == ("True", "Read", "3 lines, truncated")
    assert "output" not in b and not [c for c in b["conditions"] if c["type"] == "OutputRead"]


def output_read(status):
    read = [c for c in status["conditions"] if c["type"] == "OutputRead"][0]
    return read["status"], read["reason"], read["message"]


def test_with_follow_each_poll_of_the_running_job_reads_its_output_and_the_last_replaces_it():
    kube, backend, runner, queue, executor = setup()
    kube.create(bridgejob("a", output={"tailLines": 2, "follow": True}))
    kube.create(bridgejob("b", output={"tailLines": 2}))
    settle(executor, queue)
    executor.poll_due(now=2000.0)
    assert runner.output_lines == {"uid-a": 2, "uid-b": 2} and runner.output_follow == ["uid-a"]
    assert backend.reads == 1, "only the running job that follows is read"
    a = kube.objects["ns/a"]["status"]
    assert a["phase"] == "Running" and a["output"] == {"text": "env-secret-value too\ndone\n", "lines": 2, "truncated": True,
                                                       "running": True}
    assert output_read(a) == ("True", "Following", "2 lines, truncated")
    assert "output" not in kube.objects["ns/b"]["status"]
    executor.poll_due(now=3000.0)
    settle(executor, queue)
    assert backend.reads == 3
    a = kube.objects["ns/a"]["status"]
    # Stored through a merge patch: `running` is gone, not merged into the final read.
    assert a["phase"] == "Completed" and a["output"] == {"text": "env-secret-value too\ndone\n", "lines": 2, "truncated": True}
    assert output_read(a) == ("True", "Read", "2 lines, truncated")
    assert kube.objects["ns/b"]["status"]["output"] == a["output"]


def test_a_status_patch_deletes_a_nested_key_that_is_gone():
    running = {"text": "x\n", "lines": 1, "truncated": False, "running": True}
    final = {"text": "x\n", "lines": 1, "truncated": False}
    patch = status_patch({"phase": "Running", "output": running}, {"phase": "Completed", "output": final})
    assert patch["status"]["output"] == {"text": "x\n", "lines": 1, "truncated": False, "running": None}


def test_a_followed_job_cancelled_keeps_what_was_read_while_it_ran():
    running = {"text": "x\n", "lines": 1, "truncated": False, "running": True}
    first = desired_status({}, 1, job={"job_id": "7", "phase": "running", "output": running}, now="T")
    cancelled = desired_status(first, 1, job={"job_id": "7", "phase": "cancelled", "failure_class": "cancelled"}, now="T2")
    assert cancelled["output"] == running
    assert output_read(cancelled) == ("True", "ReadWhileRunning", "1 lines, read while the job ran")


def test_a_handoff_without_follow_is_the_document_it_was():
    connection = {"type": "ray", "url": "http://ray:8265"}
    plain = handoff_document("poll", connection, {}, identities=["x"], output_lines={"x": 5})
    assert "output_follow" not in plain
    following = handoff_document("poll", connection, {}, identities=["x"], output_lines={"x": 5}, output_follow=["x"])
    assert following == dict(plain, output_follow=["x"])


def test_output_that_cannot_be_read_is_a_false_condition_and_the_job_stands():
    status = desired_status({}, 1, job={"job_id": "7", "phase": "completed", "exit_code": 0,
                                        "output_error": "Failed to read job output '/x': no such file"}, now="T")
    read = [c for c in status["conditions"] if c["type"] == "OutputRead"][0]
    assert (read["status"], read["reason"]) == ("False", "ReadFailed") and "no such file" in read["message"]
    assert status["phase"] == "Completed" and "output" not in status


def test_an_output_stays_when_later_writes_know_nothing_of_it():
    output = {"text": "x\n", "lines": 1, "truncated": False}
    first = desired_status({}, 1, job={"job_id": "7", "phase": "completed", "output": output}, now="T")
    again = desired_status(first, 1, reachable=True, now="T2")
    assert again["output"] == first["output"]


def test_a_slurm_login_node_is_handed_over_with_its_key_from_the_secret():
    job = bridgejob("a", backend={"type": "slurm", "url": "http://slurm:6820", "credentialsSecretRef": {"name": "creds"},
                                  "login": LOGIN})
    login = backend_of(job)["login"]
    assert login == {"host": "login1.example", "port": 2222, "user": "alice", "known_hosts": LOGIN["knownHosts"]}
    document = handoff_document("poll", {"type": "slurm", "url": "http://slurm:6820", "login": login},
                                {"user": "u", "token": "t", "loginPrivateKey": "-----KEY-----"}, identities=["x"],
                                output_lines={"x": 5})
    assert document["login"] == dict(login, private_key="-----KEY-----")
    assert document["output_lines"] == {"x": 5} and "loginPrivateKey" not in document
    # A backend object's spec.login says the same.
    obj = {"kind": "BridgeBackend", "metadata": {"name": "s", "namespace": "ns"},
           "spec": {"type": "slurm", "url": "http://slurm:6820", "login": LOGIN}}
    assert backend_objects.connection_of(obj, "ns")["login"] == login


def test_jobs_with_another_login_node_are_another_batch():
    plain = bridgejob("a")
    other = bridgejob("b", backend=dict(bridgejob("b")["spec"]["backend"], login=LOGIN))
    assert backend_key(plain) != backend_key(other)


def test_the_allowed_urls_cover_the_login_node_as_ssh():
    policy = Policy(allowed_urls=["http://slurm:6820", "ssh://login1.example:2222"])
    backend = {"type": "slurm", "url": "http://slurm:6820", "login": LOGIN}
    assert policy.backend_refusal(backend, "ns") is None
    refused = policy.backend_refusal(dict(backend, login=dict(LOGIN, host="evil.example")), "ns")
    assert refused[0] == "BackendURLNotAllowed" and "spec.backend.login" in refused[1]
